"""The retry scheduler (no awaits): backoff per shard, the retry budget, when each retry is
due. The policy it applies (the backoff curve, what a retry costs) is ``_retry_policy``'s.

A failed record goes back on its stream's retry heap with its shard's backoff (full jitter,
exponential in the shard's consecutive failures), or expires if the backoff would take it
past its ``record_ttl``. A record the service throttled waits one step of the curve only
(``retry_backoff_base`` at most) while its shard's limiter can still slow down
(``_limiter``: every throttle halves its pace): the limiter paces the retry, and a backoff
that grew with the shard's throttles on top of it kept a throttled record out while the
newer records behind it took the shard's share (in a fleet, until its TTL). A limiter at
its floor cannot slow down more (from about 14 producers on a shard, their floors add up
to more than the shard takes): the shard's backoff grows again, as for any failure, or the
fleet's retries would storm the shard. When a retry is due its records go *first*: the
next batch their shard sends starts with them, before anything the shard holds
(``ShardBuffer.retry_first``, taken by ``Outgoing.batch``), so a record waits behind the
records older than it, never behind those accepted after it. A throttled aggregate larger
than its shard's aggregates may be now goes back in halves, down to that size
(:func:`split`): an entry goes only when the shard's bucket holds its size, which a shared
shard's never does for a large one.

Retries after timeouts and server errors also pay the producer's
:class:`~kinesis_trio._core._congestion.RetryBudget` (what they cost:
:func:`~kinesis_trio._core._retry_policy.overload_cost`); while it is empty they wait (and
their last attempt says how long), and a successful request lets them go at once. A due
retry wakes its shard's worker (an empty ``Queue``); each wait is a ``RetryAt`` effect.
"""

from __future__ import annotations

import heapq
import itertools
import math
import random

from .._backoff import backoff_delay
from .._error_codes import THROTTLING_CODES
from .._results import Attempt
from ._accumulator import prune, regroup
from ._congestion import RetryBudget
from ._effects import RetryAt
from ._pipeline_data import KRecord, ShardBuffer, StreamState
from ._placing import Parts, Placing
from ._record import Record

__all__ = ["Retries"]

_INF = math.inf
#: (due, order, records, retry budget cost, when they began to wait for the budget)
_Entry = tuple[float, int, list[KRecord], float, float | None]


def split(krec: KRecord, most: int) -> list[KRecord]:
    """An aggregate throttled while larger than its shard's aggregates may be now
    (``most``: ``ShardBuffer.agg_max``, which follows the limiter: ``_limiter.paced_size``),
    as aggregates of its members in order, each of at most half of them, or ``most`` bytes
    of them if more (a member alone goes as a plain record; members of ``most`` bytes or
    less in all stay one).

    Kinesis takes an entry only when the shard's bucket holds its size: while other
    producers draw small entries from it as it refills, it never holds a large one's, and
    a large aggregate made before the shard was shared was throttled at every retry until
    its records expired. Halved at each throttle, an aggregate asks the shard for no less
    than it must: where the bucket holds half of it, two entries go, not one per ``most``
    bytes, each one more entry to throttle (six producers on 4 shards at 4x, one seed of
    the fleet simulation: fairness 0.72 when aggregates went straight to ``most``, 0.86
    halved; docs/scaling.md)."""
    live = krec.live()
    total = sum(o.size for o in live)
    if len(live) < 2 or total <= most:
        return [krec]
    most = max(most, (total + 1) // 2)
    parts: list[KRecord] = []
    chunk: list[Record] = []
    size = 0
    for o in live:
        if chunk and size + o.size > most:
            parts += regroup(krec, chunk)  # (a member alone: a plain record)
            chunk, size = [], 0
        chunk.append(o)
        size += o.size
    return parts + regroup(krec, chunk)


class Retries(Placing):
    """The producer's retry schedule and budget."""

    def __init__(self, parts: Parts, rand: random.Random) -> None:
        super().__init__(parts)
        self.rand = rand
        #: per-key ordering: what is left of an aggregate stays one Kinesis record
        self.together = parts.config.ordering == "per_key"
        #: what retries after timeouts and server errors may spend
        self.budget = RetryBudget()
        self._held: set[StreamState] = set()  # streams with retries waiting for the budget
        self._seq = itertools.count()
        #: each stream's records waiting for their retry, a heap by due time
        self._heaps: dict[StreamState, list[_Entry]] = {}

    def _heap(self, stream: StreamState) -> list[_Entry]:
        heap = self._heaps.get(stream)
        if heap is None:
            heap = self._heaps[stream] = []
        return heap

    def waiting(self, stream: StreamState) -> list[_Entry]:
        """The stream's retries waiting, in heap order: ``(due, order, records, retry budget
        cost, when they began to wait for the budget)``."""
        return list(self._heaps.get(stream, ()))

    def next_due(self, stream: StreamState) -> float:
        """When the stream's next retry is due (``inf``: none waits)."""
        heap = self._heaps.get(stream)
        return heap[0][0] if heap else _INF

    def schedule(
        self,
        stream: StreamState,
        failures: list[tuple[KRecord, Attempt]],
        now: float,
        cost: float = 0.0,
    ) -> None:
        """Send records again after their shard's backoff, or expire those it would take
        past their ``record_ttl``. ``cost``: what the retry budget charges (per request)."""
        ttl, ttl_now = self.ttl, self.endings.pauses.ttl_now
        base = self.config.retry_backoff_base
        cap = self.config.retry_backoff_max
        by_due: dict[float, list[KRecord]] = {}
        for krec, attempt in failures:
            shard = krec.shard
            # throttled: one step while its shard's limiter paces it; else the shard's backoff
            throttled = attempt.error_code in THROTTLING_CODES
            paced = throttled and not shard.limiter.at_floor()
            steps = 1 if paced else max(1, shard.failures)
            due = now + backoff_delay(steps, base=base, cap=cap, rand=self.rand)
            live = krec.live()
            for outcome in live:
                outcome.attempted(attempt)
            at = ttl_now(due)
            expired = [o for o in live if o.arrival + ttl <= at]
            if expired:
                self.endings.expire(expired, now, "retrying was not done in time")
                retry = prune([krec], self.together)  # (per-key ordering: the key's after)
                if not retry:
                    continue
            else:
                retry = [krec]
            if throttled and krec.aggregated and krec.size > shard.agg_max and not self.together:
                # (per-key ordering: a key's records stay in one Kinesis record)
                retry = [part for k in retry for part in split(k, shard.agg_max)]
            for k in retry:
                k.waiting_since(now)
            by_due.setdefault(due, []).extend(retry)
        share = cost / len(by_due) if by_due else 0.0  # the request's cost, split
        heap = self._heap(stream)
        for due, krecs in by_due.items():
            heapq.heappush(heap, (due, next(self._seq), krecs, share, None))
            self.outbox.push(RetryAt(stream, due))

    def due(self, stream: StreamState, now: float) -> None:
        """Send the records whose retry is due (and paid for) first through the shards they
        go back through (the worker is woken by an empty batch), or place them anew (their
        shard was retired, or they are aggregates and the map is stale)."""
        heap = self._heap(stream)
        by_shard: dict[ShardBuffer, list[KRecord]] = {}
        while heap and heap[0][0] <= now:
            _, _, krecs, cost, waited = heapq.heappop(heap)
            krecs = [k for k in krecs if any(o.resolution is None for o in k.members)]
            if cost and krecs and not self._pay(stream, krecs, cost, waited, now):
                continue
            for krec in krecs:
                shard = krec.shard
                if shard.retired or (krec.aggregated and stream.stale):
                    self.place.reroute(stream, [krec], now)
                else:
                    krec.due_by(-_INF)
                    by_shard.setdefault(shard, []).append(krec)
        for shard, krecs in by_shard.items():
            shard.retry_first(krecs)  # before what the shard holds: they are older
            self.acc.queue(shard, [])

    def _pay(
        self,
        stream: StreamState,
        krecs: list[KRecord],
        cost: float,
        since: float | None,
        now: float,
    ) -> bool:
        """Pay a retry from the budget, or hold it (again) until the budget can."""
        budget = self.budget
        if budget.withdraw(cost, now):
            for krec in krecs:
                krec.charged(cost / len(krecs))
            if since is not None:
                waited = f"; its retry waited {now - since:.3g} s for the retry budget"
                for krec in krecs:
                    for o in krec.live():
                        o.waited(waited)
            return True
        # Held, not failed: records past their TTL expire (at their TTL, not before), the
        # others wait until time alone would refill the budget, or their first TTL.
        keep: list[KRecord] = []
        at = self.endings.pauses.ttl_now(now)
        for krec in krecs:
            live = krec.live()
            late = [o for o in live if o.arrival + self.ttl <= at]
            if not late:
                keep.append(krec)
                continue
            self.endings.expire(late, now, "its retry waited for the retry budget")
            keep += prune([krec], self.together)
        if keep:
            first_ttl = min(o.arrival for k in keep for o in k.members) + self.ttl + now - at
            due = min(budget.ready_at(cost, now), first_ttl)
            entry = (due, next(self._seq), keep, cost, now if since is None else since)
            heapq.heappush(self._heap(stream), entry)
            self._held.add(stream)
            self.outbox.push(RetryAt(stream, due))
        return False

    def answered(self, krecs: list[KRecord], end: float) -> None:
        """A request came back with an answer: the budget gets back what its retried
        records cost (or 1), and retries held for the budget may go now."""
        refund = 1.0
        for krec in krecs:
            if krec.paid:
                refund += krec.charged(0.0)
        self.budget.deposit(refund, end)
        if self._held and self.budget.level >= RetryBudget.ERROR_COST:
            for stream in self._held:  # the budget may cover them now: due at once
                heap = self._heap(stream)
                heap[:] = [(min(e[0], end) if e[4] is not None else e[0], *e[1:]) for e in heap]
                heapq.heapify(heap)
                self.outbox.push(RetryAt(stream, end))
            self._held.clear()
