"""KPL-style metrics: levels, granularity, statistic sets, and sinks.

``Producer(..., metrics_sinks=[...])`` hands each one-minute window (``metrics_upload_delay``)
to every sink; ``producer.metrics.totals()`` and ``.snapshot()`` read them in process.
"""

from .._metric_names import MetricDatum as MetricDatum
from .._metric_names import MetricsGranularity as MetricsGranularity
from .._metric_names import MetricsLevel as MetricsLevel
from .._metric_names import MetricsSink as MetricsSink
from ._cloudwatch import CloudWatchError as CloudWatchError
from ._cloudwatch import CloudWatchSink as CloudWatchSink
from ._otel import OpenTelemetrySink as OpenTelemetrySink
from ._prometheus import PrometheusSink as PrometheusSink
from ._recorder import InMemorySink as InMemorySink
from ._recorder import Metrics as Metrics

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
