"""KPL-style metrics: levels, granularity, statistic sets, and sinks.

``Producer(..., metrics_sinks=[...])`` hands each one-minute window (``metrics_upload_delay``)
to every sink; ``producer.metrics.totals()`` and ``.snapshot()`` read them in process.
"""

from typing import TYPE_CHECKING, Any

from .._metric_names import MetricDatum as MetricDatum
from .._metric_names import MetricsGranularity as MetricsGranularity
from .._metric_names import MetricsLevel as MetricsLevel
from .._metric_names import MetricsSink as MetricsSink
from ._recorder import InMemorySink as InMemorySink
from ._recorder import Metrics as Metrics

if TYPE_CHECKING:
    from ._cloudwatch import CloudWatchError as CloudWatchError
    from ._cloudwatch import CloudWatchSink as CloudWatchSink
    from ._otel import OpenTelemetrySink as OpenTelemetrySink
    from ._prometheus import PrometheusSink as PrometheusSink

#: each sink's module, imported when the sink is first named: a producer without one (a
#: Lambda function's cold start) compiles none of them
_SINKS = {
    "CloudWatchError": "_cloudwatch",
    "CloudWatchSink": "_cloudwatch",
    "OpenTelemetrySink": "_otel",
    "PrometheusSink": "_prometheus",
}

__all__ = [
    "CloudWatchError",
    "CloudWatchSink",
    "InMemorySink",
    "MetricDatum",
    "Metrics",
    "MetricsGranularity",
    "MetricsLevel",
    "MetricsSink",
    "OpenTelemetrySink",
    "PrometheusSink",
]


def __getattr__(name: str) -> Any:
    module = _SINKS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
