"""Per-key ordering, ``ProducerConfig(ordering="per_key")`` (pure, no awaits).

Kinesis keeps the order of the records of one shard, but a producer that retries reorders
them: a throttled record is sent again after records put after it were written, and a
PutRecords request "doesn't guarantee the ordering of records" among its entries (the
PutRecords API reference). The rule here, for each partition key of each stream:

- **One Kinesis record at a time.** The key's records that are placed (``held``) are all in
  one Kinesis record: the aggregate in formation of one shard, or one sealed record, plain
  or aggregated. A record put while they are unconfirmed joins that aggregate if it routes
  there and fits; otherwise it waits here (``parked``), in the order it was put. An
  aggregate may hold many keys, each of them once.
- **Confirmed, then the next.** When the held records are written (each resolution is
  told to :meth:`KeyOrder.resolved`), the parked ones are placed, the first
  alone and the next ones with it as long as they fit in the same aggregate. They go at
  once (not at the next linger deadline) if the first has waited its linger already, or
  if they fill the aggregate.
- **A failure ends the run.** When a held record fails for good (any code: throttled with
  ``fail_if_throttled``, expired, rejected, closed), every later record of its key that is
  not resolved fails with ``PrecedingRecordFailed`` (:meth:`KeyOrder.resolved` returns
  them): a consumer never sees a later record fill the gap.
- **Splitting keeps the rule.** What breaks a Kinesis record apart goes through here: a
  retired shard's records or an aggregate that landed outside its range are placed again
  (:meth:`KeyOrder.reroute`: held records go back to the head of the queue); an aggregate
  sent while the shard map is stale is sent as one plain record per key, the rest waiting
  (:meth:`KeyOrder.split`); an aggregate that lost expired members is sealed again as one
  (``_accumulator.regroup``).

Retries resend the same Kinesis record, so they keep the order. Records without a
partition key (an ``AUTO`` stream's) are not ordered: the producer refuses ``per_key`` on
such streams (:func:`refusal`).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

from .._results import PRECEDING_FAILED, R_AT, R_ERROR_CODE, R_OK, Resolution, failed
from ._accumulator import Accumulator, key_length, plain, unpack
from ._effects import NoRoom
from ._pipeline_data import KRecord, ShardBuffer, StreamState
from ._record import Record
from ._stream_policy import AUTO, StreamFacts

__all__ = ["KeyOrder", "refusal"]


def refusal(facts: StreamFacts) -> str | None:
    """Why ``ordering="per_key"`` cannot hold on this stream, or ``None``.

    On an ``AUTO`` stream the service "distributes records evenly across shards and ignores
    any partition key and ``ExplicitHashKey`` that producers supply"
    (``UpdateStreamRecordDistributionStrategy``): records of one key land on any shard, and
    no reader sees them in order.
    """
    if facts.strategy == AUTO:
        return (
            f"ordering='per_key' cannot hold on stream {facts.name!r}: its "
            "RecordDistributionStrategy is AUTO (the service places each record on any "
            "shard, whatever its partition key); use ordering='none' for it"
        )
    return None


class _Key:
    """One partition key's records: placed together (``held``, of which the first ``done``
    are resolved) and waiting (``parked``). Small while nothing waits: a producer whose
    keys are all different (random ones) keeps one of these per record in flight."""

    __slots__ = ("box", "done", "held", "parked", "shard", "stream")

    def __init__(self, stream: StreamState, first: Record) -> None:
        self.stream = stream
        self.held: list[Record] = [first]
        self.done = 0
        self.parked: deque[Record] | None = None
        #: the shard whose aggregate in formation holds ``held``, and that aggregate's
        #: member list (``shard.members is box`` until it is sealed)
        self.shard: ShardBuffer | None = None
        self.box: list[Record] | None = None

    def park(self, outcome: Record) -> None:
        if self.parked is None:
            self.parked = deque()
        self.parked.append(outcome)

    def unhold(self, keep: Record | None = None) -> None:
        """Put the unresolved held records (but ``keep``) back at the head of the queue."""
        back = [o for o in self.held[self.done :] if o is not keep]
        if back:
            if self.parked is None:
                self.parked = deque()
            self.parked.extendleft(reversed(back))
        self.held = [] if keep is None else [keep]
        self.done = 0
        self.at(None)

    def at(self, shard: ShardBuffer | None) -> None:
        self.shard = shard
        self.box = None if shard is None else shard.members

    def open_in(self) -> ShardBuffer | None:
        """The shard whose aggregate in formation holds the key's records, if one does."""
        shard = self.shard
        if shard is not None and shard.members is self.box:
            return shard
        return None


class KeyOrder:
    """The per-key ordering rule, wrapped around the accumulator's placement (the engine
    places through it) and told of every resolution (:meth:`resolved`)."""

    __slots__ = ("acc", "tables")

    def __init__(self, acc: Accumulator) -> None:
        self.acc = acc
        #: stream name -> partition key -> its records (keys with none unresolved are gone)
        self.tables: dict[str, dict[str, _Key]] = {}

    def pending(self) -> int:
        """Records waiting for an earlier record of their key (all streams)."""
        return sum(len(k.parked or ()) for t in self.tables.values() for k in t.values())

    # -- accepting --------------------------------------------------------------------------

    def accept(self, stream: StreamState, outcome: Record, pk_grow: int, now: float) -> None:
        """Place a newly accepted record, or queue it behind its key's unconfirmed ones.
        Raises ``NoRoom`` (changing nothing) as ``Accumulator.add`` does, and
        when the shard it routes to does not admit it (admission by time)."""
        lane = self.acc.lane_for(stream, outcome)
        if not lane.admits():
            lane.refused(now)
            raise NoRoom
        table = self.tables.get(stream.name)
        if table is None:
            table = self.tables[stream.name] = {}
        partition_key: str = outcome.partition_key  # type: ignore[assignment]
        key = table.get(partition_key)
        if key is None:
            shard = self.acc.add(stream, outcome, pk_grow, now)
            key = table[partition_key] = _Key(stream, outcome)
            key.at(shard)
            return
        lane.charge(outcome, now)  # it waits behind its key, or joins its aggregate
        if not key.parked:
            shard = key.open_in()
            if shard is not None:
                if self.acc.join(stream, shard, outcome, now, False):
                    key.held.append(outcome)
                    return
                if (
                    shard.start <= outcome.hash_key <= shard.end
                    and shard.queued < self.acc.queue_size
                ):
                    # full: send it now rather than at its deadline, the key's next run waits
                    self.acc.seal_into_channel(shard)
        key.park(outcome)

    # -- resolutions ------------------------------------------------------------------------

    def resolved(
        self, outcomes: Iterable[Record], res: Resolution
    ) -> list[tuple[list[Record], Resolution]]:
        """Records resolved with ``res`` (records resolved before are ignored): release the
        next run of each key whose records are all written. Returns what must fail now:
        the records after each one that failed, with their resolution."""
        fail: list[tuple[list[Record], Resolution]] = []
        tables = self.tables
        for outcome in outcomes:
            table = tables.get(outcome.stream)
            if table is None:
                continue
            pk = outcome.partition_key
            key = table.get(pk)  # type: ignore[arg-type]
            if key is None:
                continue
            held, done, parked = key.held, key.done, key.parked
            if done < len(held) and held[done] is outcome:
                key.done = done + 1
            elif outcome in held:  # resolved out of turn (it is after the resolved ones)
                held.remove(outcome)
            elif parked and outcome in parked:
                parked.remove(outcome)
            else:
                continue
            if not res[R_OK]:
                del table[pk]  # type: ignore[arg-type]
                after = [o for o in (*held[key.done :], *(parked or ())) if o.resolution is None]
                if after:
                    fail.append((after, self._after_failure(pk, res)))
            elif key.done >= len(held):
                if parked:
                    self._release(key, res[R_AT])
                else:
                    del table[pk]  # type: ignore[arg-type]
        return fail

    @staticmethod
    def _after_failure(pk: str | None, res: Resolution) -> Resolution:
        message = (
            f"an earlier record with partition key {pk!r} failed ({res[R_ERROR_CODE]}); "
            "with ordering='per_key' the records put after it fail too"
        )
        return failed(PRECEDING_FAILED, message, res[R_AT])

    def clear(self) -> None:
        """Everything was resolved at once (close, abort)."""
        self.tables.clear()

    def _release(self, key: _Key, now: float) -> None:
        """Place the key's next run: its first parked record, and those after it that join
        it in the same aggregate."""
        stream, parked, acc = key.stream, key.parked, self.acc
        assert parked
        first = parked.popleft()
        key.held = [first]
        key.done = 0
        key.at(acc.place(stream, first, key_length(first), now, False))
        if first.arrival + acc.linger <= now:  # it has waited its linger: it goes now
            acc.hurry(stream, first, now)
        shard = key.open_in()
        while parked and shard is not None and acc.join(stream, shard, parked[0], now, True):
            key.held.append(parked.popleft())
        if parked and shard is not None and shard.queued < acc.queue_size:
            # the run fills the aggregate: it goes now, not at its linger deadline
            acc.seal_into_channel(shard)

    # -- what breaks a Kinesis record apart --------------------------------------------------

    def reroute(self, stream: StreamState, batch: list[KRecord], now: float) -> None:
        """Place the unresolved records of ``batch`` anew (by the stream's current map):
        their keys' runs start again from them."""
        table = self.tables.get(stream.name, {})
        again: dict[str, _Key] = {}
        for krec in batch:
            unpack(krec)
            for outcome in krec.members:
                if outcome.resolution is not None:
                    continue
                pk = outcome.partition_key
                key = table.get(pk)  # type: ignore[arg-type]
                if key is None:  # not ordered (no partition key)
                    self.acc.place(stream, outcome, key_length(outcome), now, False)
                elif pk not in again:  # its key's first: the key's whole run goes back
                    key.unhold()
                    again[pk] = key  # type: ignore[index]
        for pk, key in again.items():
            if key.parked:
                self._release(key, now)
            else:  # (nothing of it was unresolved after all)
                del table[pk]

    def split(self, batch: list[KRecord]) -> list[KRecord]:
        """``batch`` with its aggregates split into plain records (the shard map is stale):
        one per key; the key's other records wait for it."""
        if not any(k.aggregated for k in batch):
            return batch
        out: list[KRecord] = []
        for krec in batch:
            if not krec.aggregated:
                out.append(krec)
                continue
            unpack(krec)
            table = self.tables.get(krec.members[0].stream, {})
            seen: set[str | None] = set()
            for outcome in krec.members:
                if outcome.resolution is not None:
                    continue
                pk = outcome.partition_key
                key = table.get(pk)  # type: ignore[arg-type]
                if key is None:
                    out.append(plain(outcome, krec.shard))
                elif pk not in seen:  # its key's first goes, the others wait for it
                    seen.add(pk)
                    key.unhold(keep=outcome)
                    out.append(plain(outcome, krec.shard))
        return out
