"""Between a stream's shard buffers and its requests (pure, no awaits).

:class:`Outgoing` is the engine's part for what leaves the buffers: a shard's batch on its
way to its limiter (re-routed off a retired shard, without its expired records, split while
the map is stale), each stream's :class:`~kinesis_trio._core._requests.RequestCollector`
(when a request goes), and the records of a request checked against the stream's map and
facts as it goes, cut to what the path carries now (the gate's measured request size).
It is the engine's door for the shell's shard workers, collectors and senders
(``Engine.out``): with its own methods, it hands out the accumulator's and the gate's that
they call (``seal``, ``queue``, ``batch_has_room``; ``try_slot``, ``slot_freed``), bound once
so that a call on the send path costs no extra frame.
"""

from __future__ import annotations

import math
import random

from .._config import ProducerConfig
from .._results import RECORD_TOO_LARGE, failed
from ._accumulator import Accumulator, expired_in, prune, unaggregate
from ._congestion import ConcurrencyLimit
from ._endings import Endings
from ._ordering import KeyOrder
from ._pipeline_data import KRecord, ShardBuffer, StreamState
from ._requests import Due, RequestCollector, body, chunks
from ._reshard import ShardMaps

__all__ = ["Outgoing", "fail_too_large"]

_INF = math.inf


class Outgoing:
    """What leaves the shard buffers, stream by stream: batches, then requests."""

    __slots__ = (
        "acc",
        "batch_has_room",
        "collectors",
        "config",
        "endings",
        "gate",
        "maps",
        "order",
        "place",
        "queue",
        "rand",
        "seal",
        "slot_freed",
        "try_slot",
    )

    def __init__(
        self,
        config: ProducerConfig,
        acc: Accumulator,
        order: KeyOrder | None,
        endings: Endings,
        maps: ShardMaps,
        gate: ConcurrencyLimit,
        rand: random.Random,
    ) -> None:
        self.config = config
        self.acc = acc
        self.order = order
        #: where records are placed anew: per-key ordering wraps the accumulator
        self.place: Accumulator | KeyOrder = order or acc
        self.endings = endings
        self.maps = maps
        self.gate = gate
        self.rand = rand
        #: each stream's request in formation
        self.collectors: dict[StreamState, RequestCollector] = {}
        #: the accumulator's: seal a shard's open containers, queue a batch its worker
        #: could not pass on, and may a batch take another record
        self.seal, self.queue, self.batch_has_room = acc.seal, acc.queue, acc.batch_has_room
        #: the gate's: take a slot for a request of ``size`` bytes if one is free, give one
        self.try_slot, self.slot_freed = gate.try_acquire, gate.release

    def add_stream(self, stream: StreamState) -> None:
        config = self.config
        self.collectors[stream] = RequestCollector(
            config.collection_max_count, config.collection_max_size
        )

    # -- a shard's batch -----------------------------------------------------------------

    def batch(
        self, stream: StreamState, shard: ShardBuffer, batch: list[KRecord], now: float
    ) -> list[KRecord]:
        """A shard's batch on its way to its limiter, after the records whose retry is due
        (older: they go first); re-routed if the shard is retired, without its expired
        records, split into plain records while the map is stale."""
        if shard.first:
            batch = shard.take_first() + batch
        if shard.retired:
            self.place.reroute(stream, batch, now)
            return []
        ttl, at = self.config.record_ttl, self.endings.pauses.ttl_now(now)
        for krec in batch:  # (a loop, not ``any``: most batches are a record or two)
            if krec.since + ttl <= at:
                expired = expired_in(batch, at, ttl)
                why = "it waited in the producer's queues (rate limit)"
                self.endings.expire(expired, now, why)
                batch = prune(batch, self.order is not None)
                break
        if stream.stale:
            batch = unaggregate(batch) if self.order is None else self.order.split(batch)
        if self.acc.flushing:
            for krec in batch:
                krec.due_by(-_INF)
        return batch

    @staticmethod
    def due_first(shard: ShardBuffer) -> list[KRecord]:
        """The shard's records whose retry is due (taken: its worker sends them before what
        it drained from its channel, which may be only the empty batch that woke it)."""
        return shard.take_first() if shard.first else []

    def due_shards(self, stream: StreamState, now: float) -> tuple[list[ShardBuffer], float]:
        """The linger timer's pass: the stream's shards whose containers are due at ``now``
        (:meth:`wake_at` passed: their linger deadline, a flush, a reshard), in the order
        they opened, and when the next of the others is (``inf``: none), which the timer
        sleeps until unless a ``Wake`` moves it earlier. It visits the
        shards that hold records (``StreamState.open_shards``), never every shard of a
        stream (on a stream of thousands of shards, most hold nothing)."""
        flushing = self.acc.flushing
        due: list[ShardBuffer] = []
        wake = _INF
        for shard in stream.open_shards:
            # ``Accumulator.wake_at``, inline: this runs per shard holding records
            if shard.retired:
                at = -_INF
            elif not shard.members and not shard.plain:
                continue
            elif flushing:
                at = -_INF
            else:
                at = shard.open_deadline
            if at <= now:
                due.append(shard)
            elif at < wake:
                wake = at
        self.acc.timer_sleeps(stream, wake)
        return due, wake

    def seal_due(
        self,
        stream: StreamState,
        shards: list[ShardBuffer],
        now: float,
        sealed: list[KRecord] | None,
    ) -> list[ShardBuffer]:
        """Seal due shards from the linger timer's pass (those whose workers have nothing in
        hand) and pass their batches on as their workers would: what a shard's limiter
        admits now is added to ``sealed`` (the timer's one message to the collector; None:
        the collector's channel has no room, nothing is admitted), the rest is queued for
        its worker, in order. Returns the shards left to their workers, changed in
        nothing (they have batches queued before these, or a reshard retired them).

        One call for the pass: on a stream of thousands of shards a window's records are
        mostly one per shard, so what is paid per shard is paid per record. A batch goes
        through :meth:`batch` only if something there applies to it (retries due first,
        a record past its TTL, a stale map, a flush); else it is the batch unchanged."""
        left: list[ShardBuffer] = []
        seal, queue = self.seal, self.queue
        ttl, at = self.config.record_ttl, self.endings.pauses.ttl_now(now)
        for shard in shards:
            if shard.queued or shard.retired:
                left.append(shard)
                continue
            batch = seal(shard)
            if shard.first or stream.stale or self.acc.flushing:
                batch = self.batch(stream, shard, batch, now)
            else:
                for krec in batch:
                    if krec.since + ttl <= at:
                        batch = self.batch(stream, shard, batch, now)
                        break
            if not batch:
                continue
            if sealed is not None:
                limiter = shard.limiter
                if len(batch) == 1:
                    n = limiter.admit_one(batch[0].size, now)
                else:
                    n = limiter.admit([k.size for k in batch], now)
                if n == len(batch):
                    sealed += batch
                    continue
                if n:
                    sealed += batch[:n]
                    batch = batch[n:]
            queue(shard, batch)
        return left

    @staticmethod
    def retired(shard: ShardBuffer) -> bool:
        """Did a reshard retire the shard (its worker ends once it has passed on what it
        holds)?"""
        return shard.retired

    def wake_at(self, shard: ShardBuffer) -> float:
        """When the shard's worker must wake up if nothing arrives before."""
        return self.acc.wake_at(shard, bool(self.acc.flushing))

    def due(self, shard: ShardBuffer, now: float) -> bool:
        """Must the shard's open containers seal now?"""
        return self.acc.due(shard, now, bool(self.acc.flushing))

    @staticmethod
    def taken(shard: ShardBuffer, batches: int) -> None:
        """The shard's worker took ``batches`` queued batches out of its channel."""
        shard.took(batches)

    @staticmethod
    def admit(shard: ShardBuffer, batch: list[KRecord], now: float) -> int:
        """How many of ``batch``'s first records the shard's rate limiter lets go now
        (taken from its buckets)."""
        if len(batch) == 1:  # (no list of sizes for a batch of one)
            return shard.limiter.admit_one(batch[0].size, now)
        return shard.limiter.admit([k.size for k in batch], now)

    def wait_time(self, shard: ShardBuffer, batch: list[KRecord], now: float) -> float:
        """How long until the shard's rate limiter lets ``batch``'s first record go (spread
        at random while throttling slows it: :meth:`ShardLimiter.wait_time`)."""
        limiter = shard.limiter
        spread = self.rand.random() if limiter.multiplier < 1.0 else 0.0
        return limiter.wait_time([k.size for k in batch], now, spread=spread)

    def slot_wanted(self, waiting: bool) -> None:
        """A request waits for a slot of the gate (``True``), or no longer does."""
        (self.gate.hold if waiting else self.gate.unhold)()

    # -- the stream's requests -----------------------------------------------------------

    def offer(self, stream: StreamState, krecs: list[KRecord]) -> None:
        """Records (past their shard's limiter) for the stream's next requests, in order."""
        self.collectors[stream].offer(krecs)

    def collect(self, stream: StreamState, now: float) -> Due:
        """Should the stream's next request go now (``Due.send``), or when?"""
        collector = self.collectors[stream]
        gate = self.gate
        cap = gate.request_bytes(collector.max_size)  # what the path carries now
        return collector.decide(now, bool(self.acc.flushing), gate.has_room(), cap)

    def requests(self, stream: StreamState, now: float) -> list[tuple[list[KRecord], int]]:
        """The stream's due request, checked (:meth:`check`) and cut to what the path
        carries now: each part with its size in bytes."""
        collector = self.collectors[stream]
        taken, size = collector.take_sized()
        krecs = self.check(stream, taken, now)
        cap = self.gate.request_bytes(collector.max_size)
        if (
            krecs is taken
            and not stream.keyless
            and len(krecs) <= collector.max_count
            and size <= cap
        ):
            # the common case: nothing checked out and it fits (the size the collector
            # summed as the records came holds: no record was keyed or dropped)
            return [(krecs, size)] if krecs else []
        return [
            (chunk, sum(k.size for k in chunk)) for chunk in chunks(krecs, collector.max_count, cap)
        ]

    def check(self, stream: StreamState, krecs: list[KRecord], now: float) -> list[KRecord]:
        """The records of a request about to go, checked against the stream's map and facts
        (a record over a limit lowered since it was accepted fails; one without a partition
        key, accepted while the stream was ``AUTO``, gets one if the stream is no more)."""
        if stream.limit_lowered:
            krecs = fail_too_large(self.place, self.endings, stream, krecs, now)
        if stream.keyless and not stream.auto:
            for krec in krecs:
                if krec.partition_key is None:
                    self.maps.give_key(krec, self.rand)
        if self.order is not None:
            # a record failed after its key's since it was sealed is not sent
            krecs = prune(krecs, True)
            if stream.stale:
                return self.order.split(krecs)
        if stream.stale:
            return unaggregate(krecs)
        for k in krecs:  # (a loop, not ``any`` over a generator: once per Kinesis record)
            if k.aggregated and k.shard.retired:
                break
        else:
            return krecs
        # Sealed for a shard that a reshard retired since: it would straddle the new
        # shards (and KCL consumers would drop it), so its members are placed anew.
        keep: list[KRecord] = []
        for krec in krecs:
            if krec.aggregated and krec.shard.retired:
                self.place.reroute(stream, [krec], now)
            else:
                keep.append(krec)
        return keep

    @staticmethod
    def body(stream: StreamState, krecs: list[KRecord]) -> bytes:
        """The PutRecords body of ``krecs`` for ``stream`` (JSON, joined once)."""
        return body(stream.json_head, krecs)


def fail_too_large(
    place: Accumulator | KeyOrder,
    endings: Endings,
    stream: StreamState,
    krecs: list[KRecord],
    now: float,
) -> list[KRecord]:
    """Fail the records over the stream's current limit (it was lowered after they
    were accepted: Kinesis would reject the whole request)."""
    limit = stream.max_record_size
    if all(k.size <= limit for k in krecs):
        return krecs
    keep: list[KRecord] = []
    for krec in krecs:
        if krec.size <= limit:
            keep.append(krec)
            continue
        if krec.aggregated:  # its members may fit on their own: placed anew
            place.reroute(stream, [krec], now)
            continue
        message = (
            f"the record ({krec.size} bytes with its partition key) is over the stream's "
            f"record limit ({limit} bytes), lowered after it was accepted"
        )
        res = failed(RECORD_TOO_LARGE, message, now)
        endings.fail(krec.members, res, krec.shard.shard_id)
    return keep
