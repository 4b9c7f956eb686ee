"""What a :class:`~kinesis_trio.Producer` reports (read-only views of its parts), its dead
letters and its spool's waits: the part of its public face that changes nothing."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

from .._aws._client import KinesisClient
from .._config import ProducerConfig
from .._core import Engine, RecoveryReport
from .._dead_letters import FailedRecord
from .._errors import ProducerClosedError
from ..metrics._recorder import Metrics
from ._failure_feed import FailureFeed
from ._outcome import Outcome

if TYPE_CHECKING:
    from ._spooler import Spooler

__all__ = ["ProducerViews"]


class ProducerViews:
    """The producer's counts, settings, metrics, client, dead letters, durability and
    recovery."""

    _config: ProducerConfig
    _engine: Engine[Outcome] | None
    _metrics: Metrics
    _client: KinesisClient | None
    _failures: FailureFeed
    _spooler: Spooler | None
    _default_stream: str | None

    @property
    def config(self) -> ProducerConfig:
        """The producer's settings."""
        return self._config

    @property
    def outstanding_records(self) -> int:
        """Accepted records whose outcome is not resolved yet."""
        return 0 if self._engine is None else self._engine.status().records

    @property
    def outstanding_bytes(self) -> int:
        """Bytes (data + partition key) of the outstanding records."""
        return 0 if self._engine is None else self._engine.status().bytes

    @property
    def request_limit(self) -> int:
        """PutRecords requests allowed in flight now: between 1 and ``max_connections``,
        adapted to the endpoint (see ``adaptive_concurrency``)."""
        if self._engine is None:
            return self._config.max_connections if not self._config.adaptive_concurrency else 1
        return self._engine.status().request_limit

    @property
    def requests_in_flight(self) -> int:
        """PutRecords requests out now."""
        return 0 if self._engine is None else self._engine.status().in_flight

    @property
    def retry_budget(self) -> float:
        """What is left of the retry budget that timeouts and 5xx retries draw on (500
        when full; a retry after a timeout costs 10, after a 5xx or reset 5)."""
        return 500.0 if self._engine is None else self._engine.status().retry_budget

    @property
    def metrics(self) -> Metrics:
        """The KPL-style metrics recorder: ``totals()``, ``snapshot()`` (see ``metrics``)."""
        return self._metrics

    @property
    def client(self) -> KinesisClient:
        """The underlying signed Kinesis client (open while the producer is)."""
        if self._client is None:
            raise ProducerClosedError("the producer is not open")
        return self._client

    # -- dead letters ---------------------------------------------------------------------

    def failures(self) -> AsyncIterator[FailedRecord]:
        """Every record that fails, as a :class:`FailedRecord` (data, keys, stream and its
        :class:`RecordResult` with the attempts), without awaiting the outcomes.

        Failures are kept from the moment the producer is entered, in a buffer bounded by
        ``failures_buffer_records`` / ``failures_buffer_bytes``; it never makes the producer
        wait. When it is full, the newest failure is dropped (what is held is delivered),
        counted in ``failures_dropped`` and ``FailedRecordsDropped``, and logged
        (``failed_records_dropped``, WARNING, at most once a minute).

        Any number of iterators may be taken, at any time: they share the buffer, each
        record going to one of them. An iterator ends once the producer has closed and
        every failure is taken, those the closing failed included (``ProducerCloseTimeout``,
        ``ProducerAborted``). Each step is a checkpoint; cancelling it loses no record.
        """
        return self._failures.iterator()

    @property
    def failures_dropped(self) -> int:
        """Failed records dropped because the ``failures()`` buffer was full."""
        return self._failures.dropped

    @property
    def recovery(self) -> RecoveryReport:
        """What became so far of the records found in the spool at start
        (:class:`RecoveryReport`; all zero and ``done`` without a spool or a backlog)."""
        return RecoveryReport() if self._spooler is None else self._spooler.report()

    async def wait_durable(self) -> None:
        """Return when every record accepted before is in the spool (or resolved): durability
        for ``put_nowait`` or ``spool_sync="interval"``. ``SpoolWriteError`` if it failed,
        or if the producer closed with records its last commit did not write."""
        if self._spooler is not None:
            await self._spooler.wait_durable()

    async def recovered(self) -> RecoveryReport:
        """Wait until every record found in the spool at start has its outcome (``put``
        waits only until they are accepted: they go before new records)."""
        if self._spooler is None:
            return RecoveryReport()
        return await self._spooler.recovered()

    def record_limit(self, stream_name: str | None = None) -> int:
        """The largest record (data + partition key) ``put`` takes for a loaded stream (its
        ``MaxRecordSizeInKiB``, ``max_record_size``, ``max_outstanding_bytes``), or KeyError."""
        ref = self._require_default() if stream_name is None else stream_name
        limit = None if self._engine is None else self._engine.record_limit(ref)
        if limit is None:
            raise KeyError(f"stream {ref!r} is not loaded (put to it first)")
        return limit

    def _record_checked(self, ref: str, n: int, pk_len: int, keyless: bool) -> bool:
        """``ValueError`` if the loaded stream ``ref`` refuses a record of ``n`` bytes of
        data and a ``pk_len``-byte key (``keyless``: none); False: not loaded (or the
        producer is not open). Reads only: a ``SyncProducer`` asks from its caller's thread."""
        engine = self._engine
        return engine is not None and engine.check(ref, n, pk_len, keyless)

    def _require_default(self) -> str:
        if self._default_stream is None:
            raise ValueError("no stream_name given and the producer has no default stream")
        return self._default_stream
