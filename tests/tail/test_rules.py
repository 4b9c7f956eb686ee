"""The pure parts of ``kinesis-trio tail``: shard lineage, GetRecords pacing, the KCL's
aggregate rule, timestamps and the output formats (no I/O, no event loop)."""

from __future__ import annotations

import base64
import datetime
import itertools
import json
import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kinesis_trio._backoff import backoff_delay
from kinesis_trio._core._aggregation import encode_aggregate, partition_hash_key
from kinesis_trio.cli._tail import format_record
from kinesis_trio.cli._tail_rules import (
    BYTES_PER_SECOND,
    ReadPacer,
    ShardInfo,
    ShardLineage,
    parse_timestamp,
    split_record,
)

MAX = (1 << 128) - 1
HALF = 1 << 127


def shard(
    shard_id: str, *parents: str, start: int = 0, end: int = MAX, closed: bool = False
) -> ShardInfo:
    return ShardInfo(shard_id, parents, start, end, closed)


# -- ShardInfo ----------------------------------------------------------------------------------


def test_shard_info_from_list_shards() -> None:
    info = ShardInfo.from_api(
        {
            "ShardId": "shardId-000000000003",
            "ParentShardId": "shardId-000000000001",
            "AdjacentParentShardId": "shardId-000000000002",
            "HashKeyRange": {"StartingHashKey": "5", "EndingHashKey": "99"},
            "SequenceNumberRange": {"StartingSequenceNumber": "1", "EndingSequenceNumber": "9"},
        }
    )
    assert info == ShardInfo(
        "shardId-000000000003", ("shardId-000000000001", "shardId-000000000002"), 5, 99, True
    )
    assert info.holds(5) and info.holds(99) and not info.holds(4) and not info.holds(100)
    open_root = ShardInfo.from_api(
        {
            "ShardId": "a",
            "HashKeyRange": {"StartingHashKey": "0", "EndingHashKey": str(MAX)},
            "SequenceNumberRange": {"StartingSequenceNumber": "1"},
        }
    )
    assert open_root.parents == () and not open_root.closed


# -- ShardLineage ---------------------------------------------------------------------------


def split_family() -> list[ShardInfo]:
    """0 split into 1 and 2; 1 and 2 merged into 3."""
    return [
        shard("0", closed=True),
        shard("1", "0", end=HALF - 1, closed=True),
        shard("2", "0", start=HALF, closed=True),
        shard("3", "1", "2"),
    ]


def test_children_start_only_after_every_parent_finished() -> None:
    lineage = ShardLineage()
    lineage.update(split_family())
    assert lineage.ready() == ["0"]
    assert lineage.ready() == []  # started once
    lineage.finish("0")
    assert lineage.ready() == ["1", "2"]
    lineage.finish("1")
    assert lineage.ready() == []  # 3 still waits for its adjacent parent 2
    assert lineage.waiting() == ["3"]
    lineage.finish("2")
    assert lineage.ready() == ["3"]
    assert lineage.waiting() == []


def test_a_parent_trimmed_from_the_stream_does_not_block_its_child() -> None:
    lineage = ShardLineage()
    lineage.update([shard("1", "0", closed=True), shard("2", "1")])
    assert lineage.ready() == ["1"]
    lineage.finish("1")
    assert lineage.ready() == ["2"]


def test_latest_starts_the_open_shards_and_counts_the_closed_ones_as_read() -> None:
    lineage = ShardLineage(begin="open")
    lineage.update(split_family())
    assert lineage.ready() == ["3"]


def test_latest_children_found_later_start_after_their_parents() -> None:
    lineage = ShardLineage(begin="open")
    lineage.update([shard("0")])
    assert lineage.ready() == ["0"]
    lineage.update([shard("0", closed=True), shard("1", "0"), shard("2", "0")])
    assert lineage.ready() == []  # 0 is being read: its children wait
    lineage.finish("0")
    assert lineage.ready() == ["1", "2"]


def test_one_shard_only_never_starts_its_children() -> None:
    lineage = ShardLineage(only="1")
    lineage.update(split_family())
    assert lineage.ready() == ["1"]  # its parent 0 is not read: --shard means that one
    lineage.finish("1")
    assert lineage.ready() == []
    assert lineage.waiting() == []


@given(st.permutations(["0", "1", "2", "3"]))
def test_no_shard_starts_before_its_parents_whatever_order_they_finish(order: list[str]) -> None:
    lineage = ShardLineage()
    family = {s.shard_id: s for s in split_family()}
    lineage.update(family.values())
    running = lineage.ready()
    assert running == ["0"]
    started = list(running)
    while running:
        # finish the running shards in the order given by the permutation
        running.sort(key=order.index)
        done = running.pop(0)
        lineage.finish(done)
        new = lineage.ready()
        for child in new:
            assert all(p in lineage.finished for p in family[child].parents)
        started += new
        running += new
    assert sorted(started) == ["0", "1", "2", "3"]


# -- ReadPacer --------------------------------------------------------------------------------


def test_at_most_five_calls_a_second() -> None:
    pacer = ReadPacer()
    now, calls = 0.0, []
    while now < 10.0:
        now += pacer.delay(now)
        calls.append(now)
        pacer.answered(now, 100)
    assert all(b - a >= 0.2 - 1e-9 for a, b in itertools.pairwise(calls))
    assert 50 <= len(calls) <= 52  # 10 s at five a second, both ends counted


def test_bytes_hold_the_next_call_back_to_two_mib_a_second() -> None:
    pacer = ReadPacer()
    pacer.answered(10.0, 10 * 1024 * 1024)  # one 10 MiB page: 5 s of the shard's budget
    assert pacer.delay(10.0) == pytest.approx(5.0)
    assert pacer.delay(14.0) == pytest.approx(1.0)
    assert pacer.delay(15.0) == 0.0


@given(st.lists(st.integers(min_value=0, max_value=10 * 1024 * 1024), min_size=2, max_size=50))
def test_the_byte_rate_stays_under_two_mib_a_second(sizes: list[int]) -> None:
    pacer = ReadPacer()
    now = 0.0
    starts = []
    for size in sizes:
        now += pacer.delay(now)
        starts.append(now)
        pacer.answered(now, size)
    # what every call but the last returned was paid for before the last one went
    assert sum(sizes[:-1]) <= BYTES_PER_SECOND * (starts[-1] - starts[0]) + 1e-3


def test_an_empty_page_at_the_end_waits_the_idle_interval() -> None:
    pacer = ReadPacer(idle_interval=1.0)
    pacer.answered(3.0, 0, idle=True)
    assert pacer.delay(3.0) == pytest.approx(1.0)
    pacer.answered(4.0, 0)  # an empty page while behind: only the call rate
    assert pacer.delay(4.0) == pytest.approx(0.2)


class _Top(random.Random):
    """A random source that always draws its top (1.0): the backoff's ceiling."""

    def random(self) -> float:
        return 1.0


def test_throttles_back_off_exponentially_up_to_a_cap_and_reset_on_success() -> None:
    pacer = ReadPacer(backoff_base=0.5, backoff_max=4.0, rand=_Top())
    waits = [pacer.throttled(0.0) for _ in range(6)]
    assert waits == [0.5, 1.0, 2.0, 4.0, 4.0, 4.0]
    assert pacer.delay(0.0) == 4.0
    pacer.answered(10.0, 0)
    assert pacer.throttled(10.0) == 0.5


def test_throttle_waits_are_the_one_backoff_with_full_jitter() -> None:
    """The same draws give the same waits as the producer's backoff, never under the call
    rate's 0.2 s."""
    pacer = ReadPacer(backoff_base=0.5, backoff_max=4.0, rand=random.Random(7))
    reference = random.Random(7)
    for n in range(1, 9):
        expected = max(0.2, backoff_delay(n, base=0.5, cap=4.0, rand=reference))
        assert pacer.throttled(0.0) == pytest.approx(expected)


# -- split_record: the KCL's rule ---------------------------------------------------------------


def key_in(lo: int, hi: int, prefix: str = "k") -> str:
    """A partition key whose MD5 hash key is in [lo, hi]."""
    n = 0
    while True:
        key = f"{prefix}{n}"
        if lo <= partition_hash_key(key) <= hi:
            return key
        n += 1


LOW = shard("low", start=0, end=HALF - 1)


def test_an_aggregate_inside_the_range_is_split_in_order() -> None:
    a, b = key_in(0, HALF - 1, "a"), key_in(0, HALF - 1, "b")
    blob = encode_aggregate([(b"one", a, None), (b"two", b, None), (b"three", a, "5")])
    split = split_record(blob, "agg", "49", LOW)
    assert split.dropped is None
    assert [(r.data, r.partition_key, r.explicit_hash_key) for r in split.records] == [
        (b"one", a, None),
        (b"two", b, None),
        (b"three", a, "5"),
    ]
    assert [r.sub_sequence_number for r in split.records] == [0, 1, 2]
    assert all(r.aggregated and r.sequence_number == "49" for r in split.records)


@pytest.mark.parametrize("position", [0, 1, 2])
def test_an_aggregate_with_one_member_outside_the_range_is_dropped_whole(position: int) -> None:
    inside = key_in(0, HALF - 1)
    members: list[tuple[bytes, str, str | None]] = [(b"x", inside, None)] * 3
    members[position] = (b"out", inside, str(HALF + 7))  # explicit hash key in the high half
    split = split_record(encode_aggregate(members), "agg", "49", LOW)
    assert split.records == []
    assert split.dropped is not None
    assert f"member {position} of 3" in split.dropped and str(HALF + 7) in split.dropped


def test_the_partition_key_hash_decides_when_there_is_no_explicit_hash_key() -> None:
    outside = key_in(HALF, MAX)
    blob = encode_aggregate([(b"a", key_in(0, HALF - 1), None), (b"b", outside, None)])
    assert split_record(blob, "agg", "1", LOW).records == []
    high = shard("high", start=HALF, end=MAX)
    assert split_record(blob, "agg", "1", high).records == []
    assert len(split_record(blob, "agg", "1", shard("all")).records) == 2


def test_the_range_ends_are_inclusive() -> None:
    blob = encode_aggregate([(b"a", "k", "0"), (b"b", "k", str(HALF - 1))])
    assert len(split_record(blob, "agg", "1", LOW).records) == 2
    blob = encode_aggregate([(b"a", "k", str(HALF))])
    assert split_record(blob, "agg", "1", LOW).records == []


def test_a_plain_record_passes_through_unchecked() -> None:
    outside = key_in(HALF, MAX)
    split = split_record(b"plain", outside, "7", LOW)
    assert split.dropped is None
    assert [(r.data, r.partition_key, r.aggregated) for r in split.records] == [
        (b"plain", outside, False)
    ]


def test_an_aggregate_with_a_bad_md5_passes_through_as_one_record() -> None:
    blob = bytearray(encode_aggregate([(b"a", "k", str(HALF + 1)), (b"b", "k", None)]))
    blob[-1] ^= 0xFF
    split = split_record(bytes(blob), "agg", "7", LOW)
    assert split.dropped is None
    assert [(r.data, r.aggregated) for r in split.records] == [(bytes(blob), False)]


def test_a_member_with_a_non_integer_explicit_hash_key_ends_the_aggregate_there() -> None:
    inside = key_in(0, HALF - 1)
    blob = encode_aggregate([(b"a", inside, None), (b"b", inside, "12x"), (b"c", inside, None)])
    split = split_record(blob, "agg", "7", LOW)
    assert [r.data for r in split.records] == [b"a"]
    assert split.dropped is not None and "'12x'" in split.dropped


def test_an_aggregate_of_no_records_is_too_short_and_passes_through() -> None:
    blob = encode_aggregate([])  # magic + md5 only: the KCL wants more than the digest
    split = split_record(blob, "agg", "7", LOW)
    assert [(r.data, r.aggregated) for r in split.records] == [(blob, False)]
    assert split.dropped is None


# -- timestamps and formats -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1764064800", 1764064800.0),
        ("1764064800.5", 1764064800.5),
        ("2025-11-25T10:00:00Z", 1764064800.0),
        ("2025-11-25T10:00:00+00:00", 1764064800.0),
        ("2025-11-25T11:00:00+01:00", 1764064800.0),
        ("2025-11-25 10:00:00", 1764064800.0),  # no zone: UTC
        ("2025-11-25T10:00:00.250z", 1764064800.25),
    ],
)
def test_timestamps(text: str, expected: float) -> None:
    assert parse_timestamp(text) == expected


@pytest.mark.parametrize("text", ["", "yesterday", "-5", "nan", "inf", "2025-13-01"])
def test_bad_timestamps(text: str) -> None:
    with pytest.raises(ValueError, match="not a time"):
        parse_timestamp(text)


RECORD = {"SequenceNumber": "49", "ApproximateArrivalTimestamp": 1764064800.125}


def test_raw_and_base64_formats() -> None:
    assert format_record("raw", "s", RECORD, b"a b", "k", None, None) == b"a b\n"
    assert format_record("base64", "s", RECORD, b"\xff\n", "k", None, None) == b"/wo=\n"


def test_json_format_text_and_binary() -> None:
    line = format_record("json", "shardId-1", RECORD, "é ✓".encode(), "k", "12", 3)
    assert line.endswith(b"\n") and line.count(b"\n") == 1
    assert json.loads(line) == {
        "shard_id": "shardId-1",
        "sequence_number": "49",
        "sub_sequence_number": 3,
        "partition_key": "k",
        "explicit_hash_key": "12",
        "approximate_arrival_timestamp": "2025-11-25T10:00:00.125Z",
        "data": "é ✓",
        "data_base64": False,
    }
    binary = json.loads(format_record("json", "s", RECORD, b"\xff\x00", "k", None, None))
    assert binary["data_base64"] is True
    assert base64.b64decode(binary["data"]) == b"\xff\x00"
    assert binary["sub_sequence_number"] is None and binary["explicit_hash_key"] is None
    moment = datetime.datetime.fromisoformat(
        binary["approximate_arrival_timestamp"].replace("Z", "+00:00")
    )
    assert moment.timestamp() == 1764064800.125
