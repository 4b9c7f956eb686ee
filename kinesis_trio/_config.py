"""ProducerConfig: the KPL's settings, validated once, times in seconds."""

from __future__ import annotations

import dataclasses
import math
import os
import ssl
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["ProducerConfig"]

_MIB = 1024 * 1024
#: Hard limits of the PutRecords API.
PUT_RECORDS_MAX_ENTRIES = 500
PUT_RECORDS_MAX_BYTES_DEFAULT = 5 * _MIB
PUT_RECORDS_MAX_BYTES_CEILING = 10 * _MIB
RECORD_MAX_SIZE_CEILING = 10 * _MIB


@dataclass(frozen=True, slots=True)
class ProducerConfig:
    """Settings of a :class:`~kinesis_trio.Producer`, named after the KPL's (times in seconds).

    Every field has the KPL default where the KPL has one. Invalid values raise
    ``ValueError`` naming the field when the config is built.
    """

    #: KPL ``AggregationEnabled``: pack user records into KPL aggregated records. ``None``
    #: (the default): wherever the stream's readers can unpack them, that is not on an
    #: ``AUTO`` stream nor on one that feeds channels (see ``channel_aggregation``).
    #: ``True`` is the same, and logs a WARNING on an ``AUTO`` stream (where it cannot hold).
    aggregation_enabled: bool | None = None
    #: Keep aggregation on streams that feed channels (``ChannelCount`` > 0): only for
    #: channels that store raw bytes read by consumers that de-aggregate.
    channel_aggregation: bool = False
    #: KPL ``AggregationMaxCount``: user records per aggregated record.
    aggregation_max_count: int = 4_294_967_295
    #: KPL ``AggregationMaxSize``: bytes of one aggregated record.
    aggregation_max_size: int = 51_200
    #: KPL ``CollectionMaxCount``: Kinesis records per PutRecords request (API max 500).
    collection_max_count: int = PUT_RECORDS_MAX_ENTRIES
    #: KPL ``CollectionMaxSize``: bytes (data + partition keys) per PutRecords request.
    collection_max_size: int = PUT_RECORDS_MAX_BYTES_DEFAULT
    #: KPL ``RecordMaxBufferedTime``: longest a record waits to be batched (linger).
    record_max_buffered_time: float = 0.1
    #: Bytes a stream's buffers take within one linger window before they all go at once
    #: (not a KPL setting): at a high steady rate the window's records leave in several
    #: requests as they come, not all at its end.
    linger_window_bytes: int = 262_144
    #: KPL ``RecordTtl``: a record not confirmed within this time fails as expired.
    record_ttl: float = 30.0
    #: Admission by time (not a KPL setting): ``put`` waits while the records queued ahead
    #: of a new record on its shard, at the pace that shard has been confirming, plus a
    #: round trip, would take more than this share of ``record_ttl``, so that a slow but
    #: working endpoint slows ``put`` instead of expiring records in the producer's queue
    #: (see docs/backpressure.md). ``None``: only the count and byte caps (the KPL's way).
    #: A third: a shard's pace may fall to a third after a record was accepted (others
    #: came to share it) and the record is still written in time (docs/scaling.md).
    admission_ttl_share: float | None = 1 / 3
    #: KPL ``MaxConnections``: the most PutRecords requests in flight at once. The number
    #: in flight adapts between 1 and this to what the endpoint takes without queueing
    #: (see ``adaptive_concurrency``). Two more connections serve shard-map refreshes, so
    #: they never wait behind PutRecords that hang.
    max_connections: int = 24
    #: Adapt the requests in flight to the endpoint's round trips, timeouts and 5xx answers
    #: (``False``: always ``max_connections``, as the KPL does).
    adaptive_concurrency: bool = True
    #: KPL ``RequestTimeout``: the unit of a call's deadline, which follows its connection.
    #: A call has ``connect_timeout + request_timeout``, plus ``request_timeout`` for each MiB
    #: it carries (its body, and its answer as it arrives), to complete; while its request goes
    #: out or its answer comes in, ``request_timeout`` without a byte moving ends it (a stall).
    #: Requests are made no larger than what the path carries, measured, in half of it.
    request_timeout: float = 6.0
    #: KPL ``ConnectTimeout``: opening a connection (TLS included); with ``request_timeout``,
    #: also what a call has before its first byte goes.
    connect_timeout: float = 6.0
    #: KPL ``VerifyCertificate``; like httpx: a bool, a CA bundle path or an ``ssl.SSLContext``.
    verify: bool | str | ssl.SSLContext = True
    #: Backpressure: accepted records not yet resolved. ``put`` waits beyond it.
    max_outstanding_records: int = 100_000
    #: Backpressure: bytes (data + partition key) of accepted, unresolved records.
    max_outstanding_bytes: int = 128 * _MIB
    #: KPL ``MaxUserRecordSize``: data plus partition key of one record. ``None`` (the
    #: default): the stream's own limit (``MaxRecordSizeInKiB``, 1 to 10 MiB); a value can
    #: only lower it.
    max_record_size: int | None = None
    #: How long a normal exit waits for outstanding records before failing them.
    close_timeout: float = 30.0
    #: Dead letters: failed records ``Producer.failures()`` holds until they are taken.
    #: Beyond either bound a failed record is dropped (the newest: what is held is kept),
    #: counted in ``FailedRecordsDropped`` and logged.
    failures_buffer_records: int = 10_000
    #: Dead letters: bytes of data of the failed records held (one larger record alone is
    #: held all the same).
    failures_buffer_bytes: int = 32 * _MIB
    #: Sealed batches a shard worker may have queued before ``put`` waits.
    shard_queue_size: int = 64
    #: KPL ``RateLimit``: per-shard send rate, percent of the shard limits (1000 records/s
    #: and 1 MiB/s), applied with or without aggregation and during ``flush()``.
    rate_limit: float = 150.0
    #: KPL ``FailIfThrottled``: fail throttled records at once instead of retrying them.
    fail_if_throttled: bool = False
    #: ``"none"`` (the default, as fast as can be: retries may reorder records) or
    #: ``"per_key"``: records with the same partition key are written in the order they
    #: were put, across retries and resharding (see docs/ordering.md). Refused on ``AUTO``
    #: streams, where the service places records.
    ordering: str = "none"
    #: Reload shard maps this often (seconds; ``None``: only when a write reveals a reshard).
    #: On-demand streams reshard on their own: a periodic refresh catches that early.
    shard_map_refresh_interval: float | None = None
    #: Backoff before retrying a shard's failed records: full jitter, exponential from
    #: ``retry_backoff_base`` up to ``retry_backoff_max`` seconds.
    retry_backoff_base: float = 0.1
    retry_backoff_max: float = 5.0
    #: Check write access to each stream when it is loaded (the default stream in
    #: ``__aenter__``) with a ``DryRun`` PutRecords (see ``Producer.check_access``).
    check_access: bool = False
    #: A durable spool (see docs/spool.md): a directory where every accepted record is
    #: written (SQLite, WAL mode) until its outcome is final, so that a process that dies
    #: loses nothing; the next producer to open the directory sends what it holds first.
    #: ``None`` (the default): no spool.
    spool_dir: str | os.PathLike[str] | None = None
    #: When a record is durable: ``"interval"`` (the default: written within
    #: ``spool_interval`` of ``put``, the loss window) or ``"put"`` (written before ``put``
    #: returns: one write and fsync for every record that arrived meanwhile).
    spool_sync: str = "interval"
    #: The loss window of ``spool_sync="interval"``: seconds between the spool's writes.
    spool_interval: float = 0.2
    #: Backpressure: bytes (data + partition key) of the records in the spool; ``put``
    #: waits beyond it, as for ``max_outstanding_bytes``.
    spool_max_bytes: int = 1024 * _MIB
    #: KPL ``MetricsLevel``: ``"none"``, ``"summary"`` or ``"detailed"``.
    metrics_level: str = "detailed"
    #: KPL ``MetricsGranularity``: ``"global"``, ``"stream"`` or ``"shard"``.
    metrics_granularity: str = "shard"
    #: KPL ``MetricsNamespace`` (CloudWatch namespace).
    metrics_namespace: str = "KinesisProducerLibrary"
    #: KPL ``MetricsUploadDelay``: seconds per metrics window handed to the sinks.
    metrics_upload_delay: float = 60.0

    def __post_init__(self) -> None:
        for name, check in _RULES.items():
            value = getattr(self, name)
            must = check(value)
            if must is not None:
                raise ValueError(f"ProducerConfig.{name} must be {must}, got {value!r}")
        if self.max_record_size is not None and self.max_outstanding_bytes < self.max_record_size:
            raise ValueError(
                "ProducerConfig.max_outstanding_bytes must be at least max_record_size "
                f"({self.max_record_size}), got {self.max_outstanding_bytes!r}"
            )
        # A record larger than collection_max_size goes in a request of its own (a request
        # may carry 10 MiB: the largest record any stream takes).

    def replace(self, **changes: object) -> ProducerConfig:
        """Return a copy with ``changes`` applied (and validated)."""
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]


# -- the rules: what each setting must be --------------------------------------------------

#: A setting's check: ``None`` when the value is valid, else what it must be.
_Check = Callable[[Any], "str | None"]


def _count(upper: int | None = None, *, at_least: int = 1) -> _Check:
    """An int from 1 (or ``at_least`` bytes) to ``upper``."""

    def check(value: Any) -> str | None:
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            return "a positive int"
        if upper is not None and value > upper:
            return f"at most {upper}"
        if value < at_least:
            return f"at least {at_least} bytes"
        return None

    return check


def _seconds(*, zero: bool = False) -> _Check:
    """A positive, finite number of seconds (``zero``: 0 too)."""

    def check(value: Any) -> str | None:
        if zero and value == 0 and not isinstance(value, bool):
            return None
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or not math.isfinite(value)
            or value <= 0
        ):
            return "a positive, finite number of seconds"
        return None

    return check


def _optional(check: _Check) -> _Check:
    """``check``, or ``None``."""
    return lambda value: None if value is None else check(value)


def _flag(value: Any) -> str | None:
    return None if isinstance(value, bool) else "a bool"


def _flag_or_none(value: Any) -> str | None:
    return None if value is None or isinstance(value, bool) else "a bool or None"


def _one_of(*choices: str) -> _Check:
    said = ", ".join(repr(c) for c in choices[:-1]) + f" or {choices[-1]!r}"
    return lambda value: None if value in choices else said


def _percentage(value: Any) -> str | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < math.inf:
        return "a positive percentage of the shard limits"
    return None


def _share(value: Any) -> str | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
        return "a share of record_ttl, more than 0 and at most 1"
    return None


def _name(value: Any) -> str | None:
    return None if isinstance(value, str) and value else "a non-empty str"


def _path(value: Any) -> str | None:
    if isinstance(value, os.PathLike):
        value = os.fspath(value)
    return None if isinstance(value, str) and value else "a non-empty path"


def _tls(value: Any) -> str | None:
    if isinstance(value, (bool, str, ssl.SSLContext)):
        return None
    return "a bool, a CA bundle path or an ssl.SSLContext"


#: Every checked setting and its rule, in the order they are checked. (One more, across
#: settings: ``max_outstanding_bytes`` at least ``max_record_size``.)
_RULES: dict[str, _Check] = {
    "aggregation_enabled": _flag_or_none,
    "channel_aggregation": _flag,
    "check_access": _flag,
    "aggregation_max_count": _count(4_294_967_295),
    "aggregation_max_size": _count(RECORD_MAX_SIZE_CEILING, at_least=64),
    "collection_max_count": _count(PUT_RECORDS_MAX_ENTRIES),
    "collection_max_size": _count(PUT_RECORDS_MAX_BYTES_CEILING),
    "linger_window_bytes": _count(),
    "max_connections": _count(10_000),
    "max_outstanding_records": _count(),
    "max_outstanding_bytes": _count(),
    "max_record_size": _optional(_count(RECORD_MAX_SIZE_CEILING)),
    "shard_queue_size": _count(),
    "failures_buffer_records": _count(),
    "failures_buffer_bytes": _count(),
    "record_max_buffered_time": _seconds(zero=True),
    "record_ttl": _seconds(),
    "admission_ttl_share": _optional(_share),
    "request_timeout": _seconds(),
    "connect_timeout": _seconds(),
    "close_timeout": _seconds(),
    "retry_backoff_base": _seconds(),
    "retry_backoff_max": _seconds(),
    "rate_limit": _percentage,
    "adaptive_concurrency": _flag,
    "fail_if_throttled": _flag,
    "ordering": _one_of("none", "per_key"),
    "metrics_level": _one_of("none", "summary", "detailed"),
    "metrics_granularity": _one_of("global", "stream", "shard"),
    "metrics_namespace": _name,
    "metrics_upload_delay": _seconds(),
    "shard_map_refresh_interval": _optional(_seconds()),
    "verify": _tls,
    "spool_dir": _optional(_path),
    "spool_sync": _one_of("interval", "put"),
    "spool_interval": _seconds(),
    "spool_max_bytes": _count(),
}
