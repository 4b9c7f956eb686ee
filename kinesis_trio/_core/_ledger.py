"""The ledger: what the producer owes its callers (pure, no awaits).

It counts the outstanding records and bytes (the backpressure limits), keeps the set of
unresolved outcomes (what close and abort must fail), and the flush epochs (``flush()``
waits until every record accepted before it is resolved). Every resolution goes through
:meth:`Ledger.resolve`, which resolves each outcome at most once and keeps the counts
exact: the one place where "exactly once" is enforced. It is also where a record that
fails is seen failing: each one, with its data, goes into the outbox (a ``DeadLetters``
effect) when the producer keeps dead letters, with a spool as a dead letter the spool keeps
until it is taken (``SpoolBook.dead``); any resolution sets the outbox's progress.

The one way the core wakes a waiter: resolving an outcome here sets its event, if somebody
waits (``Record.resolve``). That event is the running loop's own (``trio.Event`` or
``asyncio.Event``), set synchronously on the loop's thread, during the engine call that
resolved it; setting it schedules the waiter and runs nothing. Every other wake-up (a
worker, a timer, whoever waits for room or a flush) is an effect the shell carries out. No
module of the core imports an async library (``tests/test_structure.py`` checks it).
"""

from __future__ import annotations

from collections.abc import Sequence

from .._dead_letters import FailedRecord
from .._results import R_AT, R_ERROR_CODE, R_ERROR_MESSAGE, R_OK, Resolution
from ._accumulator import unpack
from ._effects import DeadLetters, Outbox
from ._pipeline_data import KRecord
from ._record import Record
from ._spool import SpoolBook

__all__ = ["Ledger"]


class Ledger:
    """Outstanding records and bytes, unresolved outcomes and flush epochs."""

    __slots__ = (
        "_epoch_pending",
        "_unresolved",
        "bytes",
        "dead_letters",
        "epoch",
        "max_bytes",
        "max_records",
        "outbox",
        "records",
        "spool",
    )

    def __init__(
        self,
        max_records: int,
        max_bytes: int,
        outbox: Outbox,
        dead_letters: bool = False,
    ) -> None:
        self.max_records = max_records
        self.max_bytes = max_bytes
        self.records = 0
        self.bytes = 0
        #: records accepted now belong to this flush epoch
        self.epoch = 0
        # unresolved records of closed epochs (those of the current one are the rest: none
        # is counted per record until its epoch closes)
        self._epoch_pending: dict[int, int] = {}
        #: in order of acceptance (a dict: the first of a stream is its oldest)
        self._unresolved: dict[Record, None] = {}
        self.outbox = outbox
        #: each record failed, with its data, goes into the outbox (``DeadLetters``)
        self.dead_letters = dead_letters
        #: the spool's book (``spool_dir``): resolved records leave the spool
        self.spool: SpoolBook | None = None

    def use_spool(self, book: SpoolBook) -> None:
        """Resolved records leave the spool ``book`` keeps from now."""
        self.spool = book

    def has_room(self, size: int) -> bool:
        """Can a record of ``size`` bytes be accepted without passing the limits?"""
        return self.records < self.max_records and self.bytes + size <= self.max_bytes

    def accept(self, outcome: Record, size: int) -> None:
        """Count an accepted record (created in the current epoch)."""
        self.records += 1
        self.bytes += size
        self._unresolved[outcome] = None

    def resolve(self, members: Sequence[Record], res: Resolution) -> tuple[int, int]:
        """Resolve the members of one Kinesis record (member ``i`` as sub-record ``i``);
        the resolved ones are no longer outstanding. Returns ``(records, bytes)`` resolved
        now (members resolved before are left as they are). With dead letters, each member
        failed now goes into the outbox with its data."""
        if len(members) == 1 and res[R_OK] and self.spool is None:
            # a Kinesis record of one user record written (on a stream of many shards,
            # almost every one): the loop below for one member, without its bookkeeping
            outcome = members[0]
            if not outcome.resolve(res, 0):
                return 0, 0
            size = outcome.size
            self._unresolved.pop(outcome, None)
            lane = outcome.lane
            if lane is not None:
                lane.drained(size, True, res[R_AT])
            if outcome.epoch != self.epoch:
                self._forget_epoch(outcome.epoch, 1)
            self.records -= 1
            self.bytes -= size
            self.outbox.progressed()
            return 1, size
        failing = None
        if not res[R_OK] and self.dead_letters:
            failing = _with_data(members)
        records = size = 0
        epoch = self.epoch
        discard = self._unresolved.pop
        lane = None  # the admission lane being credited, and ``size`` when it began
        mark = 0
        older = run = 0  # an earlier epoch and how many of its records came in a row
        for sub, outcome in enumerate(members):
            if not outcome.resolve(res, sub):
                continue
            records += 1
            if outcome.lane is not lane:
                if lane is not None:
                    lane.drained(size - mark, res[R_OK], res[R_AT])
                lane = outcome.lane
                mark = size
            size += outcome.size
            discard(outcome, None)
            if outcome.epoch != epoch:
                if outcome.epoch == older:
                    run += 1
                else:
                    if run:
                        self._forget_epoch(older, run)
                    older, run = outcome.epoch, 1
        if lane is not None:
            lane.drained(size - mark, res[R_OK], res[R_AT])
        if run:
            self._forget_epoch(older, run)
        if records:
            self.records -= records
            self.bytes -= size
            tickets = None
            spool = self.spool
            if spool is not None:
                if res[R_OK] or not self.dead_letters:
                    spool.done(members, res[R_OK])
                else:  # dead letters: kept in the spool until taken
                    tickets = spool.dead(members, res[R_ERROR_CODE], res[R_ERROR_MESSAGE])
            if failing:
                self._failed(failing, res, tickets)
            self.outbox.progressed()
        return records, size

    def _failed(
        self,
        failing: list[tuple[Record, bytes]],
        res: Resolution,
        tickets: dict[Record, int] | None = None,
    ) -> None:
        records = [
            FailedRecord(data, o.partition_key, o.explicit_hash_key, o.stream, o.result_for(res))
            for o, data in failing  # each unresolved before: failed by this call
        ]
        kept = [tickets.get(o, 0) for o, _ in failing] if tickets else None
        self.outbox.push(DeadLetters(records, res[R_AT], kept))

    def _forget_epoch(self, epoch: int, count: int) -> None:
        pending = self._epoch_pending
        left = pending[epoch] - count
        if left:
            pending[epoch] = left
        else:
            del pending[epoch]

    def close_epoch(self) -> int:
        """Start a new epoch (a flush); returns the one ``flush()`` must see resolved."""
        target = self.epoch
        pending = self._epoch_pending
        current = self.records - sum(pending.values())  # the rest are of this epoch
        if current:
            pending[target] = current
        self.epoch += 1
        return target

    def pending_through(self, target: int) -> bool:
        """Are records of epoch ``target`` or earlier still unresolved?"""
        return any(epoch <= target for epoch in self._epoch_pending)

    def unresolved(self) -> int:
        return len(self._unresolved)

    def unresolved_outcomes(self) -> list[Record]:
        """The outcomes not resolved yet (a copy), oldest first."""
        return list(self._unresolved)

    def oldest_arrivals(self, streams: int) -> dict[str, float]:
        """When each stream's oldest unresolved record arrived, by stream name: the first
        of each stream in order of acceptance, so the walk stops once ``streams`` streams
        are found (at the first record, with one stream) instead of visiting every record."""
        found: dict[str, float] = {}
        for outcome in self._unresolved:
            name = outcome.stream
            if name not in found:
                found[name] = outcome.arrival
                if len(found) >= streams:
                    break
        return found

    def resolve_all(self, res: Resolution, unkept: Resolution | None = None) -> int:
        """Resolve every unresolved outcome with ``res`` (close and abort); returns how many.

        With a spool they are not failed for good: they stay in it (no dead letters), but
        those the close's last commit could not write (``SpoolBook.kept``), which resolve
        with ``unkept`` and are dead letters."""
        pending, self._unresolved = self._unresolved, {}
        failing = lost_failing = None
        lost: set[Record] = set()
        if self.spool is not None:
            lost = self.spool.kept(pending)
            if lost and self.dead_letters and unkept is not None and not unkept[R_OK]:
                lost_failing = _with_data(sorted(lost, key=_arrival))
        elif self.dead_letters and not res[R_OK]:
            failing = _with_data(sorted(pending, key=_arrival))  # in the order of arrival
        for outcome in pending:
            if outcome.lane is not None:
                outcome.lane.forget()
        count = 0
        for outcome in pending:
            resolution = unkept if unkept is not None and outcome in lost else res
            count += outcome.resolve(resolution)
        self.records = 0
        self.bytes = 0
        self._epoch_pending.clear()
        if count:
            if failing:
                self._failed(failing, res)
            if lost_failing and unkept is not None:
                self._failed(lost_failing, unkept)
            self.outbox.progressed()
        return count


def _arrival(outcome: Record) -> float:
    return outcome.arrival


def _with_data(outcomes: Sequence[Record]) -> list[tuple[Record, bytes]]:
    """The unresolved ``outcomes`` (each once) with their data (from their aggregate if it
    holds it)."""
    out: list[tuple[Record, bytes]] = []
    seen: set[int] = set()
    for outcome in outcomes:
        if outcome.resolution is not None or id(outcome) in seen:
            continue
        seen.add(id(outcome))
        data = outcome.data
        if data is None:
            agg = outcome.agg
            assert isinstance(agg, KRecord), "a record's data is on it or in its aggregate"
            unpack(agg)  # gives every unresolved member its data back: decoded once
            data = outcome.data
            assert data is not None
        out.append((outcome, data))
    return out
