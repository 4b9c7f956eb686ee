"""The KPL's metric names, levels and granularity; a datum; the sink protocol."""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, NamedTuple, Protocol, runtime_checkable

from ._logging import get_logger

_log = get_logger("kinesis_trio.metrics")

DEFAULT_NAMESPACE = "KinesisProducerLibrary"

MetricUnit = Literal["Count", "Milliseconds", "Bytes"]
Dimensions = tuple[tuple[str, str], ...]


class MetricsLevel(enum.Enum):
    """Which metrics are recorded: none, the summary ones, or all (the KPL's MetricsLevel)."""

    NONE = "none"
    SUMMARY = "summary"
    DETAILED = "detailed"


class MetricsGranularity(enum.Enum):
    """Finest dimension set recorded: global, per stream, per shard (KPL MetricsGranularity)."""

    GLOBAL = "global"
    STREAM = "stream"
    SHARD = "shard"


_LEVEL_RANK = {MetricsLevel.NONE: 0, MetricsLevel.SUMMARY: 1, MetricsLevel.DETAILED: 2}
_DEPTH = {MetricsGranularity.GLOBAL: 0, MetricsGranularity.STREAM: 1, MetricsGranularity.SHARD: 2}


class _Spec(NamedTuple):
    level: MetricsLevel
    unit: MetricUnit
    depth: int  # finest granularity the metric exists at: 0 global, 1 stream, 2 shard


_S, _D = MetricsLevel.SUMMARY, MetricsLevel.DETAILED
# Level and unit: metrics_constants.cc; depth ("not available at shard level"): metrics.md.
_SPECS: dict[str, _Spec] = {
    "UserRecordsReceived": _Spec(_D, "Count", 1),
    "UserRecordsPending": _Spec(_D, "Count", 0),
    "UserRecordsPut": _Spec(_S, "Count", 2),
    "UserRecordsDataPut": _Spec(_D, "Bytes", 2),
    "KinesisRecordsPut": _Spec(_S, "Count", 2),
    "KinesisRecordsDataPut": _Spec(_D, "Bytes", 2),
    "ErrorsByCode": _Spec(_S, "Count", 2),
    "AllErrors": _Spec(_S, "Count", 2),
    "RetriesPerRecord": _Spec(_D, "Count", 2),
    "UserRecordExpired": _Spec(_S, "Count", 2),
    "BufferingTime": _Spec(_S, "Milliseconds", 2),
    "RequestTime": _Spec(_D, "Milliseconds", 1),
    "UserRecordsPerKinesisRecord": _Spec(_D, "Count", 2),
    "KinesisRecordsPerPutRecordsRequest": _Spec(_D, "Count", 1),
    "UserRecordsPerPutRecordsRequest": _Spec(_D, "Count", 1),
    # Not the KPL's: the adaptive request concurrency and the retry budget (gauges).
    "RequestConcurrencyLimit": _Spec(_D, "Count", 0),
    "RequestsWaitingForSlot": _Spec(_D, "Count", 0),
    "RetryBudgetLevel": _Spec(_D, "Count", 0),
    # Not the KPL's: admission by time (admission_ttl_share), per stream.
    "OldestRecordAge": _Spec(_S, "Milliseconds", 1),
    "ProjectedDelay": _Spec(_S, "Milliseconds", 1),
    "KinesisRecordsThrottled": _Spec(_S, "Count", 1),
    "PutAdmissionWait": _Spec(_S, "Milliseconds", 1),
    # Not the KPL's: failed records dropped because Producer.failures()'s buffer was full.
    "FailedRecordsDropped": _Spec(_S, "Count", 1),
    # Not the KPL's: what a producer found in its spool at start (spool_dir), and how it ended.
    "SpoolRecordsRecovered": _Spec(_S, "Count", 0),
    "SpoolRecordsRecoveredFailed": _Spec(_S, "Count", 0),
    "SpoolRecordsDamaged": _Spec(_S, "Count", 0),
}
del _S, _D

_STREAM, _SHARD, _ERROR_CODE = "StreamName", "ShardId", "ErrorCode"


@dataclass(frozen=True)
class MetricDatum:
    """One statistic set: a metric over one window, for one dimension set.

    ``dimensions`` is ordered like the KPL's (``ErrorCode``, ``StreamName``, ``ShardId``);
    ``()`` is the global datum. ``timestamp`` is Unix time in seconds (the window's end).
    """

    name: str
    dimensions: Dimensions
    unit: MetricUnit
    count: int
    sum: float
    minimum: float
    maximum: float
    timestamp: float

    @property
    def average(self) -> float:
        """``sum / count``."""
        return self.sum / self.count if self.count else 0.0

    def dimension(self, name: str) -> str | None:
        """The value of dimension ``name``, or ``None``."""
        for key, value in self.dimensions:
            if key == name:
                return value
        return None


@runtime_checkable
class MetricsSink(Protocol):
    """Receives each closed window. May raise or be slow: :class:`Metrics` contains both."""

    async def publish(self, data: Sequence[MetricDatum]) -> None:
        """Publish one closed window's data points."""


def _sink_name(sink: object) -> str:
    name = getattr(sink, "name", None)
    return name if isinstance(name, str) and name else type(sink).__name__


def _describe(exc: BaseException, limit: int = 300) -> str:
    text = str(exc).strip().splitlines()
    first = text[0] if text else ""
    out = f"{type(exc).__name__}: {first}" if first else type(exc).__name__
    return out if len(out) <= limit else out[: limit - 3] + "..."
