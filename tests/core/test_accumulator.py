"""The accumulator: placement, the inline fast path, sealing and linger (no event loop)."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kinesis_trio._core._accumulator import Accumulator, expired_in, prune, unaggregate
from kinesis_trio._core._aggregation import _vlen, deaggregate, encode_records
from kinesis_trio._core._effects import NoRoom
from kinesis_trio._core._pipeline_data import KRecord, ShardBuffer, StreamState
from kinesis_trio._results import failed
from tests.support.engine import RecordingShell, buffer, even_shards, outcome, stream_of


def accumulator(
    shell: RecordingShell,
    *,
    agg_max_count: int = 10_000,
    coll_max_count: int = 500,
    coll_max_size: int = 5 * 1024 * 1024,
    queue_size: int = 4,
    linger: float = 0.1,
    early_size: int = 262_144,
    outstanding: int = 0,
) -> Accumulator:
    return Accumulator(
        agg_max_count=agg_max_count,
        coll_max_count=coll_max_count,
        coll_max_size=coll_max_size,
        linger=linger,
        queue_size=queue_size,
        outbox=shell.outbox,
        outstanding=_Outstanding(outstanding),
        early_size=early_size,
    )


class _Outstanding:
    """The ledger's count of outstanding bytes, fixed."""

    def __init__(self, size: int) -> None:
        self.bytes = size


def add(acc: Accumulator, stream: StreamState, data: bytes, key: str, now: float = 0.0) -> None:
    o = outcome(data, key, now)
    pk_len = len(key.encode())
    acc.add(stream, o, 1 + _vlen(pk_len) + pk_len, now)


def every_batch(shell: RecordingShell, acc: Accumulator, stream: StreamState) -> list[KRecord]:
    out = [k for _, batch in shell.sealed_batches for k in batch]
    for shard in stream.shards:
        out += acc.seal(shard)
    return out


_records = st.lists(
    st.tuples(
        st.binary(max_size=200) | st.integers(0, 30_000).map(lambda n: b"z" * n),
        st.sampled_from(["a", "b", "ключ", "k" * 256]) | st.text("abcxyz", min_size=1),
    ),
    min_size=1,
    max_size=150,
)


@given(_records, st.integers(1, 4), st.integers(200, 60_000), st.integers(1, 50))
def test_the_inline_fast_path_places_as_place_does(
    records: list[tuple[bytes, str]], shards: int, max_size: int, max_count: int
) -> None:
    """``add`` (the put path's inline copy) and ``place`` build the same aggregates, each
    within its limits, holding only records of its shard's range, encoded to its size."""
    results = []
    for inline in (True, False):
        shell = RecordingShell()
        acc = accumulator(shell, agg_max_count=max_count, queue_size=10**9)
        stream = stream_of(shell, even_shards(shards), agg_max_size=max_size)
        for data, key in records:
            if inline:
                add(acc, stream, data, key)
            else:
                acc.place(stream, outcome(data, key), len(key.encode()), 0.0, check_room=True)
        batches = every_batch(shell, acc, stream)
        for krec in batches:
            assert len(krec.members) <= max_count
            shard = krec.shard
            assert all(shard.start <= o.hash_key <= shard.end for o in krec.members)
            if krec.aggregated:
                users = deaggregate(krec.data, krec.partition_key)
                assert [u.partition_key for u in users] == [o.partition_key for o in krec.members]
                assert len(krec.data) <= max_size
                assert krec.size == len(krec.data) + 1
        results.append([(k.shard.shard_id, k.data, k.aggregated) for k in batches])
    assert results[0] == results[1]


@pytest.mark.parametrize(
    ("switch_at", "with_ehk"), [(None, False), (0, False), (1500, False), (0, True), (1500, True)]
)
def test_records_encoded_as_they_are_placed_join_into_the_members_encoding(
    switch_at: int | None, with_ehk: bool
) -> None:
    """Each record is encoded as it is placed (the seal only joins the pieces), by ``add``
    and by ``place`` alike: past the precomputed tables too (key indexes from 2,048,
    lengths from 4,096). A record with an explicit hash key drops the pieces (the seal
    encodes the members with their keys' table); either way the aggregate is the members'
    ``encode_records``."""
    shell = RecordingShell()
    acc = accumulator(shell)
    stream = stream_of(shell, even_shards(1), agg_max_size=1_048_576)
    shard = stream.shards[0]
    for i in range(2_100):
        data, key = (b"d" * (5_000 if i % 700 == 3 else i % 9), f"key-{i}")
        if i == switch_at:
            ehk = str(i) if with_ehk else None
            placed = outcome(data, key, ehk=ehk)
            acc.place(stream, placed, len(key.encode()), 0.0, check_room=True)
        elif switch_at is not None and i > switch_at and i % 3 == 0:
            acc.place(stream, outcome(data, key), len(key.encode()), 0.0, check_room=True)
        else:
            add(acc, stream, data, key)
        dropped = with_ehk and switch_at is not None and i >= switch_at
        assert (shard.parts is None) == dropped
    members = list(shard.members)
    expected = encode_records(
        [o.data for o in members],  # type: ignore[misc]
        [o.partition_key for o in members],  # type: ignore[misc]
        [o.explicit_hash_key for o in members] if with_ehk else None,
    )
    [agg] = every_batch(shell, acc, stream)
    assert agg.members == members and agg.data == expected
    assert shard.parts == [] and not shard.members  # the next aggregate starts clean


def test_an_aggregate_begun_by_a_full_one_is_encoded_as_placed() -> None:
    """In a burst every aggregate but a shard's first begins in ``place`` (with the record
    the full one could not take): it keeps the encoding-as-placed path, and each sealed
    aggregate is its members' ``encode_records``."""
    shell = RecordingShell()
    acc = accumulator(shell, agg_max_count=50, queue_size=100)
    stream = stream_of(shell, even_shards(1))
    shard = stream.shards[0]
    for i in range(260):
        add(acc, stream, b"v" * (i % 13), f"k{i % 37}")
        assert shard.parts is not None
    batches = every_batch(shell, acc, stream)
    assert [len(k.members) for k in batches] == [50, 50, 50, 50, 50, 10]
    start = 0
    for krec in batches:
        indexes = range(start, start + len(krec.members))
        datas, keys = [b"v" * (i % 13) for i in indexes], [f"k{i % 37}" for i in indexes]
        assert krec.aggregated and krec.data == encode_records(datas, keys)
        assert [(r.data, r.partition_key) for r in deaggregate(krec.data, "x")] == list(
            zip(datas, keys, strict=True)
        )
        start += len(krec.members)


def test_a_full_channel_blocks_before_anything_changes() -> None:
    shell = RecordingShell()
    acc = accumulator(shell, agg_max_count=2, queue_size=1)
    stream = stream_of(shell, even_shards(1))
    shard = stream.shards[0]
    for i in range(4):  # 2 aggregates: the first sealed into the channel, the second open
        add(acc, stream, b"x", f"k{i}")
    assert shard.queued == 1 and len(shard.members) == 2
    before = (shard.sizer.size, list(shard.members), shard.queued)
    with pytest.raises(NoRoom):
        add(acc, stream, b"y", "k9")
    assert (shard.sizer.size, list(shard.members), shard.queued) == before


def test_linger_deadlines_fall_at_the_end_of_their_window_on_every_shard() -> None:
    """Containers opened anywhere in one window of length linger seal together at its end:
    one request per window at a steady rate; no record waits longer than the linger."""
    shell = RecordingShell()
    acc = accumulator(shell, linger=0.5)
    stream = stream_of(shell, even_shards(4))
    for i, now in enumerate([10.01, 10.2, 10.37, 10.49]):
        add(acc, stream, b"x", f"key-{i}", now=now)
    opened = [s for s in stream.shards if s.open_deadline != math.inf]
    assert len(opened) >= 2 and {s.open_deadline for s in opened} == {10.5}
    for now in (10.0, 10.25, 10.5, 11.74, 12.0):
        deadline = acc.deadline(now)
        assert now < deadline <= now + 0.5
        assert deadline / 0.5 == pytest.approx(round(deadline / 0.5))
    assert accumulator(shell, linger=0.0).deadline(3.0) == 3.0


@pytest.mark.parametrize("aggregate", [True, False])
def test_a_window_that_takes_its_bytes_early_is_due_at_once(aggregate: bool) -> None:
    """``linger_window_bytes``: once a stream's open containers have taken that many bytes
    within one window, every open shard is due now (not at the window's end); what comes
    after opens containers due at the window's end again, and so on."""
    shell = RecordingShell()
    acc = accumulator(shell, linger=0.5, early_size=10_000, queue_size=10**9)
    stream = stream_of(shell, even_shards(4), aggregate=aggregate)
    now = 10.01
    i = 0
    while all(s.open_deadline == 10.5 or s.is_empty() for s in stream.shards):
        add(acc, stream, b"x" * 100, f"key-{i}", now=now)
        i += 1
        assert i < 200
    # the record that crossed 10,000 bytes (about 100 records of 100 bytes + key)
    assert 85 <= i <= 100
    opened = [s for s in stream.shards if not s.is_empty()]
    assert len(opened) == 4 and all(s.open_deadline == now for s in opened)
    assert all(acc.due(s, now, flushing=False) for s in opened)
    assert stream.window_bytes == 0
    if not aggregate:
        assert all(k.send_by == now for s in opened for k in s.plain)
    # the shards' workers seal them; the next records wait for the window's end again
    for shard in stream.shards:
        acc.seal(shard)
    add(acc, stream, b"x" * 100, "after", now=10.2)
    [after] = [s for s in stream.shards if not s.is_empty()]
    assert after.open_deadline == 10.5 and not acc.due(after, 10.2, flushing=False)


def test_a_producer_behind_does_not_send_early() -> None:
    """With more than a window's budget sealed and unresolved (a burst), the budget makes
    nothing due: the aggregates fill as usual rather than go out small."""
    shell = RecordingShell()
    acc = accumulator(shell, linger=0.5, early_size=10_000, queue_size=10**9)
    stream = stream_of(shell, even_shards(4))
    backlog = _Outstanding(15_000)
    # what the ledger counts: what the containers hold, and more than a budget sealed
    acc.outstanding = backlog
    for i in range(150):
        add(acc, stream, b"x" * 100, f"key-{i}", now=10.01)
        backlog.bytes += 100 + len(f"key-{i}")
    assert all(s.open_deadline == 10.5 for s in stream.shards)
    assert not any(acc.due(s, 10.01, flushing=False) for s in stream.shards)
    # once the backlog is written, the next budget's worth goes early again
    acc.outstanding = _Outstanding(0)
    for i in range(100):
        add(acc, stream, b"x" * 100, f"more-{i}", now=10.02)
    assert all(s.open_deadline == 10.02 for s in stream.shards)


def test_bytes_of_an_earlier_window_do_not_count_towards_the_next() -> None:
    """A window's count starts at its first container: 9,000 bytes at the end of one window
    and 9,000 at the start of the next make nothing due early with a 10,000 limit."""
    shell = RecordingShell()
    acc = accumulator(shell, linger=0.5, early_size=10_000, queue_size=10**9)
    stream = stream_of(shell, even_shards(2))
    for i in range(80):
        add(acc, stream, b"x" * 100, f"key-{i}", now=10.4)
    assert all(s.open_deadline == 10.5 for s in stream.shards)
    for shard in stream.shards:  # sealed at the window's end
        acc.seal(shard)
    for i in range(80):
        add(acc, stream, b"x" * 100, f"key-{i}", now=10.6)
    assert all(s.open_deadline == 11.0 for s in stream.shards)
    assert not any(acc.due(s, 10.6, flushing=False) for s in stream.shards)


def test_linger_opens_a_deadline_once_and_seal_clears_it() -> None:
    shell = RecordingShell()
    acc = accumulator(shell, linger=0.5)
    stream = stream_of(shell, even_shards(1))
    shard = stream.shards[0]
    assert acc.wake_at(shard, flushing=False) == math.inf
    add(acc, stream, b"x", "a", now=10.0)
    add(acc, stream, b"y", "b", now=10.2)
    assert shard.open_deadline == 10.5 and shell.opened_shards == [shard]
    assert acc.wake_at(shard, flushing=False) == 10.5
    assert acc.wake_at(shard, flushing=True) == -math.inf
    assert not acc.due(shard, 10.4, flushing=False)
    assert acc.due(shard, 10.5, flushing=False)
    assert acc.due(shard, 10.0, flushing=True)
    [krec] = acc.seal(shard)
    assert krec.aggregated and len(krec.members) == 2 and krec.send_by == 10.5
    assert shard.open_deadline == math.inf and shard.is_empty()
    shard.retired = True
    assert acc.wake_at(shard, flushing=False) == -math.inf


def test_without_aggregation_plain_records_fill_a_request() -> None:
    shell = RecordingShell()
    acc = accumulator(shell, coll_max_count=3)
    stream = stream_of(shell, even_shards(1), aggregate=False)
    for i in range(7):
        add(acc, stream, b"x", f"k{i}")
    assert [len(batch) for _, batch in shell.sealed_batches] == [3, 3]
    assert all(not k.aggregated for _, b in shell.sealed_batches for k in b)


def test_a_stale_map_aggregates_nothing_and_unaggregate_splits() -> None:
    shell = RecordingShell()
    acc = accumulator(shell)
    stream = stream_of(shell, even_shards(2))
    for i in range(6):
        add(acc, stream, b"x%d" % i, f"k{i}")
    sealed = [k for shard in stream.shards for k in acc.seal(shard)]
    assert any(k.aggregated for k in sealed)
    split = unaggregate(sealed)
    assert not any(k.aggregated for k in split)
    assert sorted(k.data for k in split) == sorted(b"x%d" % i for i in range(6))
    stream.stale = True
    add(acc, stream, b"y", "k0")
    assert [k.aggregated for k in stream.shards[0].plain + stream.shards[1].plain] == [False]


def _expire_and_prune(together: bool) -> list[tuple[bytes, bool]]:
    shell = RecordingShell()
    acc = accumulator(shell)
    stream = stream_of(shell, even_shards(1))
    add(acc, stream, b"old", "a", now=0.0)
    add(acc, stream, b"new", "b", now=5.0)
    add(acc, stream, b"newer", "b", now=5.5)
    batch = acc.seal(stream.shards[0])
    expired = expired_in(batch, now=6.0, ttl=3.0)
    assert [o.partition_key for o in expired] == ["a"]
    for o in expired:
        o.resolve(failed("RecordExpired", "", 6.0))
    return [(k.data, k.aggregated) for k in prune(batch, together)]


def test_pruning_expired_records_keeps_the_young_as_plain_records() -> None:
    assert _expire_and_prune(False) == [(b"new", False), (b"newer", False)]


def test_pruning_together_keeps_the_young_in_one_aggregate() -> None:
    [(blob, aggregated)] = _expire_and_prune(True)
    assert aggregated
    assert [r.data for r in deaggregate(blob, "a")] == [b"new", b"newer"]


def test_reroute_places_records_by_the_current_map() -> None:
    shell = RecordingShell()
    acc = accumulator(shell)
    stream = stream_of(shell, even_shards(1))
    for i in range(20):
        add(acc, stream, b"r%d" % i, f"k{i}")
    batch = acc.seal(stream.shards[0])
    old: ShardBuffer = stream.shards[0]
    new_map = type(stream.map)(even_shards(2))
    stream.use_map(new_map, [buffer(s) for s in even_shards(2)])
    acc.reroute(stream, batch, 1.0)
    placed = [o for shard in stream.shards for o in shard.members]
    assert len(placed) == 20 and old not in stream.shards
    for shard in stream.shards:
        assert all(shard.start <= o.hash_key <= shard.end for o in shard.members)


def test_a_shard_opening_tells_the_timer_only_a_deadline_earlier_than_it_wakes() -> None:
    """Shards opening in one window share its deadline: once the timer sleeps until it
    (its pass), or was told it (a ``Wake``), more shards opening for it tell nothing; a
    flush's due-now deadline is told."""
    shell = RecordingShell()
    acc = accumulator(shell, linger=0.5)
    stream = stream_of(shell, even_shards(4))
    add(acc, stream, b"x", "a", now=10.0)
    assert len(shell.opened_shards) == 1  # the first: the timer was told nothing yet
    for key in ("b", "c", "d", "e", "f"):
        add(acc, stream, b"x", key, now=10.1)
    assert len(stream.open_shards) > 1 and len(shell.opened_shards) == 1
    for shard in list(stream.open_shards):
        acc.seal(shard)
    acc.timer_sleeps(stream, math.inf)  # its pass found nothing more to wait for
    add(acc, stream, b"x", "a", now=10.6)
    assert len(shell.opened_shards) == 2 and stream.wake_told == 11.0
    acc.flush_started()
    add(acc, stream, b"x", "b", now=10.7)
    assert len(shell.opened_shards) == 3 and stream.wake_told == -math.inf
