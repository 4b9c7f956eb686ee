"""One producer of a fleet: its open-loop schedule, its outcomes counted, the fleet's figures.

Holds :class:`Member` (one producer offered records on schedule: a putter that puts what is
due, a waiter that awaits every outcome in order and counts it, each confirmed record's
ages), :class:`NullProducer` (a ``put`` whose outcome is resolved already: the harness's own
cost), :func:`fleet_keys` and :func:`figures` (what the members' reports add up to:
capacity used, expired, fairness, ages, put's waits). Used by ``_fleet_sim`` (N members in
one run on virtual time), ``_fleet_child`` (one member in a process of its own on real
time) and the command's parts.
"""

from __future__ import annotations

import math
import random
from collections import Counter, deque
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol

import anyio

from kinesis_trio import RecordResult
from kinesis_trio._results import EXPIRED

#: capacity used is measured from here (s after the common start): the shards' buckets
#: start full (one second's worth), so the first second can pass the limit
WARMUP = 1.0
#: the putters' shortest sleep: each wakes at most this often and puts what is due
TICK = 0.010
#: what the message of a record that expired in the producer's own queues says
IN_QUEUE = "producer's queue"


class _Outcome(Protocol):
    async def wait(self) -> RecordResult: ...

    def result(self) -> RecordResult: ...


class _Putter(Protocol):
    async def put(self, data: bytes, partition_key: str) -> Any: ...


class _Resolved:
    """The null producer's outcome: resolved already, ok."""

    RESULT = RecordResult(True, "null", None, None, None, None, ())

    async def wait(self) -> RecordResult:
        return self.RESULT

    def result(self) -> RecordResult:
        return self.RESULT


class NullProducer:
    """``put`` returns an outcome resolved already: a run of the same schedule through it
    is the harness's own cost (the putter, the waiter, the counting)."""

    _done = _Resolved()

    async def put(self, data: bytes, partition_key: str) -> _Resolved:
        return self._done


def fleet_keys(seed: int, count: int) -> list[str]:
    """The fleet's key pool: the same ``count`` random keys for the same seed, in every
    member and every process."""
    rng = random.Random(f"{seed}/keys")
    return [f"k{rng.getrandbits(60):x}" for _ in range(count)]


@dataclass
class Tally:
    """One producer's figures."""

    start: float = 0.0
    offered: int = 0
    accepted: int = 0
    ok: int = 0
    ok_bytes: int = 0
    window_bytes: int = 0
    expired: int = 0
    expired_in_queue: int = 0
    failed: Counter[str] = field(default_factory=Counter)
    put_wait: float = 0.0


class Member:
    """One producer on the schedule: record *i* due at ``start + i / rate`` until ``end``
    (times on the loop's clock), ``record_size`` bytes under a key drawn from ``keys``. The
    putter wakes at most every ``TICK`` and puts what is due (a ``put`` that waits holds
    back the records due behind it; one waiting at ``end`` is cancelled, its record not
    accepted). The waiter awaits every accepted record's outcome in order until
    ``drain_until``. Confirmed bytes count towards capacity between ``window`` (start,
    end) and ``cut_at`` (when the run was cut, if it was)."""

    def __init__(
        self,
        *,
        rate: float,
        start: float,
        end: float,
        record_size: int,
        keys: Sequence[str],
        seed: str,
        window: tuple[float, float],
        drain_until: float,
    ) -> None:
        self.rate, self.end, self.record_size = rate, end, record_size
        self.keys, self.seed, self.window = keys, seed, window
        self.drain_until = drain_until
        self.cut_at: float | None = None
        self.tally = Tally(start=start)
        self.pending: deque[tuple[_Outcome, float, float]] = deque()
        self.from_put: list[float] = []
        self.from_schedule: list[float] = []
        self.from_accept: list[float] = []

    async def run(self, producer: _Putter) -> None:
        """Put the schedule through ``producer`` and await the outcomes; the producer
        resolves (at its close) what is left pending: :meth:`settle` counts them."""
        more = anyio.Event()
        done = False

        async def waiter() -> None:
            nonlocal more
            pending = self.pending
            with anyio.move_on_at(self.drain_until):
                while pending or not done:
                    if not pending:
                        await more.wait()
                        more = anyio.Event()
                        continue
                    outcome, due, put_at = pending[0]
                    self._count(await outcome.wait(), due, put_at)
                    pending.popleft()

        async with anyio.create_task_group() as tg:
            tg.start_soon(waiter)
            await self._put(producer, lambda: more.set())
            done = True
            more.set()

    def settle(self) -> None:
        """Count the outcomes the waiter did not (past ``drain_until``, or cut): resolved
        by the producer's close, failed or aborted."""
        for outcome, due, put_at in self.pending:
            self._count(outcome.result(), due, put_at)
        self.pending.clear()

    async def _put(self, producer: _Putter, wake: Callable[[], None]) -> None:
        tally, data, keys = self.tally, b"x" * self.record_size, self.keys
        rng = random.Random(self.seed)
        pool, rate, start = len(keys), self.rate, tally.start
        tally.offered = offered = max(0, math.ceil((self.end - start) * rate))
        tick = max(TICK, 1.0 / rate)
        last = start + (offered - 1) / rate  # the last record's due time: before the end
        now = anyio.current_time
        pending = self.pending
        i = 0
        with anyio.CancelScope(deadline=self.end):
            while i < offered:
                due = start + i / rate
                t = now()
                if due > t:
                    await anyio.sleep_until(min(max(due, t + tick), last))
                    continue
                try:
                    outcome = await producer.put(data, keys[rng.randrange(pool)])
                finally:  # a put the end cancelled waited too (its record not accepted)
                    tally.put_wait += now() - t
                tally.accepted += 1
                pending.append((outcome, due, t))
                wake()
                i += 1

    def _count(self, result: RecordResult, due: float, put_at: float) -> None:
        tally = self.tally
        if result.ok:
            at = result.resolved_at
            tally.ok += 1
            tally.ok_bytes += self.record_size
            first, last = self.window
            if first <= at <= last and (self.cut_at is None or at <= self.cut_at):
                tally.window_bytes += self.record_size
            self.from_put.append(at - put_at)
            self.from_schedule.append(at - due)
            self.from_accept.append(at - result.accepted_at)
        elif result.error_code == EXPIRED:
            tally.expired += 1
            tally.expired_in_queue += IN_QUEUE in (result.error_message or "")
        else:
            tally.failed[result.error_code or "?"] += 1

    def report(self, digits: int | None = None) -> dict[str, Any]:
        """The tally and the ages (rounded to ``digits`` for a process's JSON), and the
        schedule's length: what :func:`figures` adds up."""
        out = asdict(self.tally)
        out["failed"] = dict(self.tally.failed)
        out["active_s"] = max(1e-9, self.end - self.tally.start)
        for name in ("from_put", "from_schedule", "from_accept"):
            ages: list[float] = getattr(self, name)
            out[name] = ages if digits is None else [round(a, digits) for a in ages]
        return out


def quantile(values: Sequence[float], q: float) -> float:
    """The ``q`` quantile of sorted ``values`` (0 when empty)."""
    if not values:
        return 0.0
    return values[min(len(values) - 1, int(q * len(values)))]


def figures(reports: Sequence[dict[str, Any]], capacity: float, window: float) -> dict[str, Any]:
    """A fleet's figures from its members' reports: ``capacity`` in bytes/s, ``window`` the
    seconds confirmed bytes were counted over."""
    # confirmed while the fleet contended (every member's window is as long): counted to
    # the end of the drain, a fleet with admission off looks even, its queues drained alone
    per_s = [r["window_bytes"] / window if window > 0 else 0.0 for r in reports]
    ages = {
        name: sorted(a for r in reports for a in r[name])
        for name in ("from_put", "from_schedule", "from_accept")
    }
    failed: Counter[str] = Counter()
    for r in reports:
        failed.update(r["failed"])
    confirmed = sum(r["window_bytes"] for r in reports)
    top = max(per_s, default=0.0)
    return {
        "offered_records": sum(r["offered"] for r in reports),
        "accepted": sum(r["accepted"] for r in reports),
        "ok": sum(r["ok"] for r in reports),
        "expired": sum(r["expired"] for r in reports),
        "expired_in_queue": sum(r["expired_in_queue"] for r in reports),
        "failed": sum(failed.values()),
        "failed_codes": dict(sorted(failed.items())),
        "capacity_used": confirmed / window / capacity if window > 0 else 0.0,
        "fairness": min(per_s) / top if top > 0 else 0.0,
        "age_from_put_p50_s": quantile(ages["from_put"], 0.5),
        "age_from_put_p99_s": quantile(ages["from_put"], 0.99),
        "age_from_put_max_s": ages["from_put"][-1] if ages["from_put"] else 0.0,
        "age_from_schedule_p99_s": quantile(ages["from_schedule"], 0.99),
        "age_from_schedule_max_s": ages["from_schedule"][-1] if ages["from_schedule"] else 0.0,
        "age_from_accept_p99_s": quantile(ages["from_accept"], 0.99),
        "put_wait_share": sum(r["put_wait"] for r in reports) / sum(r["active_s"] for r in reports),
        "ok_bytes_per_producer": [r["ok_bytes"] for r in reports],
    }
