"""KPL-style metrics: levels, granularity, statistic sets, and sinks.

``Producer(..., metrics_sinks=[...])`` hands each one-minute window (``metrics_upload_delay``)
to every sink; ``producer.metrics.totals()`` and ``.snapshot()`` read them in process.
"""

from ._metrics import CloudWatchError as CloudWatchError
from ._metrics import CloudWatchSink as CloudWatchSink
from ._metrics import InMemorySink as InMemorySink
from ._metrics import MetricDatum as MetricDatum
from ._metrics import Metrics as Metrics
from ._metrics import MetricsGranularity as MetricsGranularity
from ._metrics import MetricsLevel as MetricsLevel
from ._metrics import MetricsSink as MetricsSink
from ._metrics import OpenTelemetrySink as OpenTelemetrySink
from ._metrics import PrometheusSink as PrometheusSink

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
