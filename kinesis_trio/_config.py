"""ProducerConfig: the KPL's settings, validated once, times in seconds."""

from __future__ import annotations

import dataclasses
import math
import ssl
from dataclasses import dataclass

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
    #: KPL ``MaxConnections``: the most PutRecords requests in flight at once. The number
    #: in flight adapts between 1 and this to what the endpoint takes without queueing
    #: (see ``adaptive_concurrency``). Two more connections serve shard-map refreshes, so
    #: they never wait behind PutRecords that hang.
    max_connections: int = 24
    #: Adapt the requests in flight to the endpoint's round trips, timeouts and 5xx answers
    #: (``False``: always ``max_connections``, as the KPL does).
    adaptive_concurrency: bool = True
    #: KPL ``RequestTimeout``.
    request_timeout: float = 6.0
    #: KPL ``ConnectTimeout``.
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
    #: KPL ``MetricsLevel``: ``"none"``, ``"summary"`` or ``"detailed"``.
    metrics_level: str = "detailed"
    #: KPL ``MetricsGranularity``: ``"global"``, ``"stream"`` or ``"shard"``.
    metrics_granularity: str = "shard"
    #: KPL ``MetricsNamespace`` (CloudWatch namespace).
    metrics_namespace: str = "KinesisProducerLibrary"
    #: KPL ``MetricsUploadDelay``: seconds per metrics window handed to the sinks.
    metrics_upload_delay: float = 60.0

    def __post_init__(self) -> None:
        def positive_int(name: str, upper: int | None = None) -> None:
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"ProducerConfig.{name} must be a positive int, got {value!r}")
            if upper is not None and value > upper:
                raise ValueError(f"ProducerConfig.{name} must be at most {upper}, got {value!r}")

        def positive_time(name: str) -> None:
            value = getattr(self, name)
            if (
                isinstance(value, bool)
                or not isinstance(value, (int, float))
                or not math.isfinite(value)
                or value <= 0
            ):
                raise ValueError(
                    f"ProducerConfig.{name} must be a positive, finite number of seconds, "
                    f"got {value!r}"
                )

        if self.aggregation_enabled is not None and not isinstance(self.aggregation_enabled, bool):
            raise ValueError(
                "ProducerConfig.aggregation_enabled must be a bool or None, "
                f"got {self.aggregation_enabled!r}"
            )
        for flag in ("channel_aggregation", "check_access"):
            if not isinstance(getattr(self, flag), bool):
                raise ValueError(
                    f"ProducerConfig.{flag} must be a bool, got {getattr(self, flag)!r}"
                )
        positive_int("aggregation_max_count", 4_294_967_295)
        positive_int("aggregation_max_size", RECORD_MAX_SIZE_CEILING)
        positive_int("collection_max_count", PUT_RECORDS_MAX_ENTRIES)
        positive_int("collection_max_size", PUT_RECORDS_MAX_BYTES_CEILING)
        positive_int("linger_window_bytes")
        positive_int("max_connections", 10_000)
        positive_int("max_outstanding_records")
        positive_int("max_outstanding_bytes")
        if self.max_record_size is not None:
            positive_int("max_record_size", RECORD_MAX_SIZE_CEILING)
        positive_int("shard_queue_size")
        positive_int("failures_buffer_records")
        positive_int("failures_buffer_bytes")
        if self.aggregation_max_size < 64:
            raise ValueError(
                "ProducerConfig.aggregation_max_size must be at least 64 bytes, "
                f"got {self.aggregation_max_size!r}"
            )
        if self.record_max_buffered_time != 0:
            positive_time("record_max_buffered_time")
        positive_time("record_ttl")
        positive_time("request_timeout")
        positive_time("connect_timeout")
        positive_time("close_timeout")
        positive_time("retry_backoff_base")
        positive_time("retry_backoff_max")
        if (
            isinstance(self.rate_limit, bool)
            or not isinstance(self.rate_limit, (int, float))
            or not 0 < self.rate_limit < math.inf
        ):
            raise ValueError(
                "ProducerConfig.rate_limit must be a positive percentage of the shard limits, "
                f"got {self.rate_limit!r}"
            )
        if not isinstance(self.adaptive_concurrency, bool):
            raise ValueError(
                "ProducerConfig.adaptive_concurrency must be a bool, "
                f"got {self.adaptive_concurrency!r}"
            )
        if not isinstance(self.fail_if_throttled, bool):
            raise ValueError(
                f"ProducerConfig.fail_if_throttled must be a bool, got {self.fail_if_throttled!r}"
            )
        if self.ordering not in ("none", "per_key"):
            raise ValueError(
                f"ProducerConfig.ordering must be 'none' or 'per_key', got {self.ordering!r}"
            )
        if self.metrics_level not in ("none", "summary", "detailed"):
            raise ValueError(
                "ProducerConfig.metrics_level must be 'none', 'summary' or 'detailed', "
                f"got {self.metrics_level!r}"
            )
        if self.metrics_granularity not in ("global", "stream", "shard"):
            raise ValueError(
                "ProducerConfig.metrics_granularity must be 'global', 'stream' or 'shard', "
                f"got {self.metrics_granularity!r}"
            )
        if not isinstance(self.metrics_namespace, str) or not self.metrics_namespace:
            raise ValueError(
                "ProducerConfig.metrics_namespace must be a non-empty str, "
                f"got {self.metrics_namespace!r}"
            )
        positive_time("metrics_upload_delay")
        if self.shard_map_refresh_interval is not None:
            positive_time("shard_map_refresh_interval")
        if not isinstance(self.verify, (bool, str, ssl.SSLContext)):
            raise ValueError(
                "ProducerConfig.verify must be a bool, a CA bundle path or an ssl.SSLContext, "
                f"got {self.verify!r}"
            )
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
