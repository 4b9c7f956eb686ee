"""Shard maps and the KCL rule for aggregates written elsewhere (no event loop)."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from kinesis_trio import Outcome
from kinesis_trio._config import ProducerConfig
from kinesis_trio._core._accumulator import Accumulator, key_length
from kinesis_trio._core._endings import Endings
from kinesis_trio._core._ledger import Ledger
from kinesis_trio._core._pipeline_data import KRecord
from kinesis_trio._core._placing import Parts
from kinesis_trio._core._record import Record
from kinesis_trio._core._reshard import ShardMaps
from kinesis_trio._core._shards import Shard, ShardMap
from kinesis_trio._results import Resolution, written
from kinesis_trio.metrics._recorder import metrics_for
from tests.support.engine import MAX_HASH, RecordingShell, even_shards, outcome, stream_of

TTL = 30.0


class _Expiries(Endings):
    """Endings that keep what it was told to expire (and resolves nothing for it)."""

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.expired: list[tuple[list[Record], str]] = []

    def expire(self, outcomes: list[Record], now: float, why: str) -> None:
        self.expired.append((outcomes, why))


class Harness:
    """ShardMaps wired to a real accumulator and ledger, and a recording shell."""

    def __init__(self, shards: list[Shard]) -> None:
        self.shell = RecordingShell()
        outbox = self.shell.outbox
        self.ledger = Ledger(10_000, 1 << 30, outbox)
        self.acc = Accumulator(
            agg_max_count=10_000,
            coll_max_count=500,
            coll_max_size=5 * 1024 * 1024,
            linger=0.1,
            queue_size=4,
            outbox=outbox,
            outstanding=self.ledger,
        )
        config = ProducerConfig(record_ttl=TTL)
        self.endings = _Expiries(self.ledger, metrics_for(config), TTL, None)
        self.expired = self.endings.expired
        self.maps = ShardMaps(Parts(config, self.acc, self.acc, self.endings, outbox))
        self.stream = stream_of(self.shell, shards)

    def aggregate(self, hash_keys: list[int], now: float = 0.0) -> tuple[KRecord, list[Outcome]]:
        """One sealed aggregate of records with these explicit hash keys (one shard's; a
        single record is sent plain, so there are at least two)."""
        assert len(hash_keys) >= 2
        members = []
        for i, hk in enumerate(hash_keys):
            o = outcome(b"r%d" % i, f"k{i}", now, ehk=str(hk))
            self.ledger.accept(o, o.size)
            self.acc.place(self.stream, o, key_length(o), now, False)
            members.append(o)
        batch = [k for shard in self.stream.shards for k in self.acc.seal(shard)]
        [agg] = batch
        assert agg.aggregated
        return agg, members

    def placed(self) -> list[Record]:
        """Every record in a shard's open containers (aggregate or plain batch)."""
        out = [o for shard in self.stream.shards for o in shard.members]
        return out + [o for s in self.stream.shards for k in s.plain for o in k.members]


def landed(shard_id: str) -> Resolution:
    return written(shard_id, "49", True, 1.0, 0.5, 0.0, 0.5)


def test_an_aggregate_whose_new_shard_holds_every_member_is_written_there() -> None:
    h = Harness([Shard("shardId-000000000000", 0, MAX_HASH)])
    agg, members = h.aggregate([10, 20])
    h.stream.known["shardId-000000000001"] = (0, 100)
    h.maps.landed_elsewhere(h.stream, [(agg, landed("shardId-000000000001"))], 1.0)
    assert all(o.result().ok and o.result().shard_id == "shardId-000000000001" for o in members)
    assert h.stream.stale and h.shell.refreshes == 1  # the map was out of date
    assert h.ledger.records == 0 and not h.placed()


def test_an_aggregate_across_a_split_is_placed_again_whole_with_a_note() -> None:
    h = Harness([Shard("shardId-000000000000", 0, MAX_HASH)])
    agg, members = h.aggregate([10, 2**127 + 5])
    h.stream.known["shardId-000000000001"] = (0, 2**127 - 1)
    h.maps.landed_elsewhere(h.stream, [(agg, landed("shardId-000000000001"))], 1.0)
    assert not any(o.done() for o in members)
    assert sorted(id(o) for o in h.placed()) == sorted(id(o) for o in members)
    for o in members:
        note = o.attempts[-1]
        assert note.error_code == "WrittenOutsideShardRange" and not note.ambiguous
        assert "does not hold all of its records" in (note.error_message or "")


def test_an_unknown_shard_waits_for_the_map_and_its_history() -> None:
    h = Harness([Shard("shardId-000000000000", 0, MAX_HASH)])
    agg, members = h.aggregate([10, 20])
    h.maps.landed_elsewhere(h.stream, [(agg, landed("shardId-000000000007"))], 1.0)
    assert len(h.stream.unverified) == 1 and h.shell.refreshes >= 1
    # A reload whose open shards do not show it: the closed ones must be listed too.
    h.maps.apply_map(h.stream, ShardMap(even_shards(2)), 2.0)
    assert h.maps.needs_history(h.stream)
    h.maps.learn_shards(h.stream, [Shard("shardId-000000000007", 0, 1000)])
    assert not h.maps.needs_history(h.stream)
    h.maps.verify_pending(h.stream, 2.0)
    assert all(o.result().ok for o in members) and not h.stream.unverified


def test_unverified_records_expire_only_after_their_ttl_with_an_ambiguous_note() -> None:
    h = Harness([Shard("shardId-000000000000", 0, MAX_HASH)])
    agg, members = h.aggregate([10, 20], now=0.0)
    h.maps.landed_elsewhere(h.stream, [(agg, landed("shardId-000000000007"))], 1.0)
    h.maps.expire_unverified(h.stream, TTL - 0.001)
    assert not h.expired and len(h.stream.unverified) == 1
    h.maps.expire_unverified(h.stream, TTL)
    [(expired, why)] = h.expired
    assert expired == members and "could not be reloaded" in why
    assert all(o.attempts[-1].ambiguous for o in members)
    assert not h.stream.unverified


def test_closing_notes_unverified_aggregates_as_maybe_delivered() -> None:
    h = Harness([Shard("shardId-000000000000", 0, MAX_HASH)])
    agg, members = h.aggregate([10, 11])
    h.maps.landed_elsewhere(h.stream, [(agg, landed("shardId-000000000007"))], 1.0)
    h.maps.note_unverified(h.stream, "before the producer closed")
    assert not h.stream.unverified
    note = members[0].attempts[-1]
    assert note.ambiguous and "before the producer closed" in (note.error_message or "")


def test_a_new_map_keeps_unchanged_shards_and_retires_the_others() -> None:
    two = even_shards(2)
    h = Harness(two)
    kept = h.stream.shards[0]
    for i in range(40):
        o = outcome(b"x", f"k{i}")
        h.ledger.accept(o, o.size)
        h.acc.place(h.stream, o, key_length(o), 0.0, False)
    split = [two[0], Shard("shardId-000000000002", two[1].start, two[1].start + 2**100)]
    split.append(Shard("shardId-000000000003", two[1].start + 2**100 + 1, MAX_HASH))
    h.maps.apply_map(h.stream, ShardMap(split), 1.0)
    assert h.stream.shards[0] is kept and not kept.retired
    assert [s.shard_id for s in h.shell.retired_shards] == ["shardId-000000000001"]
    assert len(h.placed()) == 40
    for shard in h.stream.shards:
        assert all(shard.start <= o.hash_key <= shard.end for o in shard.members)


@given(
    st.lists(st.integers(0, 1 << 20), min_size=2, max_size=30),
    st.integers(0, 1 << 20),
    st.integers(0, 1 << 20),
)
def test_each_member_is_written_or_placed_again_never_both(
    keys: list[int], low: int, width: int
) -> None:
    """Whatever the landing shard's range, the aggregate counts as written there exactly
    when that range holds every member; otherwise every member is back in a shard buffer
    whose range holds it, and none is resolved."""
    h = Harness([Shard("shardId-000000000000", 0, MAX_HASH)])
    agg, members = h.aggregate(keys)
    high = low + width
    h.stream.known["shardId-000000000001"] = (low, high)
    h.maps.landed_elsewhere(h.stream, [(agg, landed("shardId-000000000001"))], 1.0)
    holds_all = all(low <= k <= high for k in keys)
    placed = h.placed()
    if holds_all:
        assert all(o.result().ok for o in members) and not placed
    else:
        assert not any(o.done() for o in members)
        assert sorted(id(o) for o in placed) == sorted(id(o) for o in members)
    assert h.ledger.records == (0 if holds_all else len(members))
