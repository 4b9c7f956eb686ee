"""How records end (pure, no awaits): through the ledger, then per-key ordering.

:class:`Endings` resolves records through the ledger (exactly once, the counts, the
dead letters and progress in the outbox), tells per-key ordering what was resolved, and
fails what ordering says must fail after a failed record. It is also where the engine's
parts fail and expire records: the log line and the metrics of a failure are written here,
once.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from .._logging import get_logger
from .._results import EXPIRED, R_ATTEMPT, R_ERROR_CODE, Resolution, failed
from ._ledger import Ledger
from ._metric_window import MetricWindow
from ._ordering import KeyOrder
from ._pauses import Pauses
from ._record import Record

__all__ = ["Endings"]

_log = get_logger("kinesis_trio.producer")


class Endings:
    """How records end (resolved, failed, expired), for the engine and its parts."""

    __slots__ = ("ledger", "measure", "metrics", "order", "pauses", "ttl")

    def __init__(
        self, ledger: Ledger, metrics: MetricWindow, ttl: float, order: KeyOrder | None
    ) -> None:
        self.ledger = ledger
        self.metrics = metrics
        self.measure = metrics.enabled
        self.ttl = ttl
        #: the time ``record_ttl`` does not count (a frozen Lambda): every TTL check of the
        #: engine's parts compares with ``pauses.ttl_now(now)``
        self.pauses = Pauses(ttl)
        #: per-key ordering (``ordering="per_key"``), or None
        self.order = order

    def resolve(self, members: Sequence[Record], res: Resolution) -> tuple[int, int]:
        """Resolve the members of one Kinesis record (member ``i`` as sub-record ``i``);
        returns ``(records, bytes)`` resolved now. With per-key ordering, the next records
        of their keys are placed, or failed after a failure."""
        records, size = self.ledger.resolve(members, res)
        order = self.order
        if records and order is not None:  # it may resolve (or place) the records after them
            for after, why in order.resolved(members, res):
                self.fail_after(after, why)
        return records, size

    def resolver(self) -> Callable[[Sequence[Record], Resolution], tuple[int, int]]:
        """:meth:`resolve`, or without per-key ordering the ledger's own ``resolve`` (the
        same, a call less per Kinesis record of an answer)."""
        return self.resolve if self.order is not None else self.ledger.resolve

    def fail(self, members: Sequence[Record], res: Resolution, shard_id: str) -> None:
        """Fail the unresolved ``members`` of one Kinesis record with ``res``."""
        records, size = self.resolve(members, res)
        if not records:
            return
        stream = members[0].stream
        if self.measure:
            self.metrics.user_records_put(stream, shard_id, 0, 0, failed=records)
        _log.info(
            "records_failed",
            stream=stream,
            shard_id=shard_id,
            error_code=res[R_ERROR_CODE],
            attempt=len(members[0].attempts) + (res[R_ATTEMPT] is not None),
            records=records,
            bytes=size,
        )

    def fail_after(self, outcomes: list[Record], res: Resolution) -> None:
        """Fail records put after a record of their key that failed (per-key ordering)."""
        records, size = self.resolve(outcomes, res)
        if not records:
            return
        stream = outcomes[0].stream
        if self.measure:
            self.metrics.errors(stream, None, res[R_ERROR_CODE] or "", records)
        _log.info(
            "records_failed",
            stream=stream,
            error_code=res[R_ERROR_CODE],
            partition_key=outcomes[0].partition_key,
            records=records,
            bytes=size,
        )

    def expire(self, outcomes: list[Record], now: float, why: str) -> None:
        """Fail ``outcomes`` whose ``record_ttl`` has passed (``why``: where they waited)."""
        records = size = 0
        for outcome in outcomes:
            last = outcome.attempts[-1] if outcome.attempts else None
            message = (
                f"not written within record_ttl ({self.ttl} s) after "
                f"{len(outcome.attempts)} attempts"
                + (f"; last error: {last.error_code}: {last.error_message}" if last else "")
                + f"; {why}"
            )
            r, b = self.resolve((outcome,), failed(EXPIRED, message, now))
            records += r
            size += b
        if records:
            if self.measure:
                self.metrics.user_record_expired(outcomes[0].stream, None, records)
            _log.info(
                "records_expired",
                stream=outcomes[0].stream,
                error_code=EXPIRED,
                records=records,
                bytes=size,
            )

    def resolve_all(self, res: Resolution, unkept: Resolution | None = None) -> int:
        """Resolve every record not resolved yet with ``res`` (close, abort); with a spool,
        those its last commit could not write with ``unkept`` (``Ledger.resolve_all``)."""
        if self.order is not None:
            self.order.clear()
        return self.ledger.resolve_all(res, unkept)
