"""``tail`` against the in-memory fake, in process: round trips, resharding, the KCL's
aggregate rule, the start positions, ``-n``, the formats, throttling and expired iterators.

On trio the clock is a ``MockClock`` (pacing, backoff and polling take no real time); on
asyncio the same tests run in real time, with short idle intervals.
"""

from __future__ import annotations

import base64
import io
import itertools
import json
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import httpx
import pytest

from kinesis_trio import KinesisClient
from kinesis_trio._core._aggregation import encode_aggregate, partition_hash_key
from kinesis_trio.cli._options import _Failure
from kinesis_trio.cli._tail import TailOptions, TailStats, tail
from kinesis_trio.testing import FakeKinesis
from tests.support.helpers import connect, entry, error_response, fake_producer

pytestmark = [pytest.mark.anyio, pytest.mark.virtual_time]

MAX = (1 << 128) - 1
HALF = 1 << 127
MIB = 1024 * 1024


Hook = Callable[[str, dict[str, Any]], Awaitable[httpx.Response | None]]


class Run:
    """One tail run's output and stderr."""

    def __init__(self, out: io.BytesIO, err: io.StringIO, stats: TailStats) -> None:
        self.out = out.getvalue()
        self.err = err.getvalue()
        self.stats = stats

    @property
    def lines(self) -> list[bytes]:
        return self.out.splitlines()

    @property
    def json(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.lines]


async def run_tail(client: KinesisClient, **options: Any) -> Run:
    options.setdefault("stream", "s")
    options.setdefault("idle_interval", 0.2)
    out, err = io.BytesIO(), io.StringIO()
    with anyio.fail_after(30):  # a follow run that misses records would never end
        stats = await tail(client, TailOptions(**options), out, err)
    return Run(out, err, stats)


async def write(fake: FakeKinesis, records: list[tuple[bytes, str]], **config: Any) -> None:
    async with fake_producer(fake, **config) as producer:
        outcomes = [await producer.put(data, key) for data, key in records]
    assert all(o.result().ok for o in outcomes)


def keyed(n: int, prefix: str = "r") -> list[tuple[bytes, str]]:
    return [(f"{prefix}-{i}".encode(), f"key-{i % 13}") for i in range(n)]


# -- round trips ------------------------------------------------------------------------------


async def test_round_trip_of_aggregated_records_and_a_10_mib_one() -> None:
    fake = FakeKinesis()
    fake.create_stream("s", shard_count=4, max_record_size_kib=10240)
    records = keyed(300)
    big = b"x" * (10 * MIB - 64)
    await write(fake, [*records, (big, "big")])
    assert any(len(r.data) > 4 and r.data[:4] == b"\xf3\x89\x9a\xc2" for r in fake.records("s"))
    async with connect(fake) as client:
        run = await run_tail(client, format="json")
    got = Counter((r["data"].encode(), r["partition_key"]) for r in run.json)
    assert got == Counter([*records, (big, "big")])
    assert run.stats.shards_started == 4
    members = [r for r in run.json if r["sub_sequence_number"] is not None]
    assert members, "the producer aggregates: some lines are members of an aggregate"
    # within a shard, the order written: (sequence number, sub sequence number) ascending
    by_shard: dict[str, list[tuple[int, int]]] = defaultdict(list)
    for r in run.json:
        by_shard[r["shard_id"]].append((int(r["sequence_number"]), r["sub_sequence_number"] or 0))
    assert all(seen == sorted(seen) for seen in by_shard.values())


async def test_raw_base64_and_json_formats_of_binary_data() -> None:
    fake = FakeKinesis()
    fake.create_stream("s")
    datas = [b"text \xc3\xa9", b"\xff\xfe\x00bin", b""]
    async with connect(fake) as client:
        await client.call(
            "PutRecords", {"StreamName": "s", "Records": [entry(d, "k") for d in datas]}
        )
        raw = await run_tail(client, format="raw")
        b64 = await run_tail(client, format="base64")
        js = await run_tail(client, format="json")
    assert raw.out == b"".join(d + b"\n" for d in datas)
    assert [base64.b64decode(line) for line in b64.lines] == datas
    rows = js.json
    assert [r["data_base64"] for r in rows] == [False, True, False]
    assert rows[0]["data"] == "text é"
    assert base64.b64decode(rows[1]["data"]) == datas[1]
    assert all(r["sub_sequence_number"] is None and r["explicit_hash_key"] is None for r in rows)
    assert all(r["approximate_arrival_timestamp"].endswith("Z") for r in rows)


async def test_count_stops_after_n_records() -> None:
    fake = FakeKinesis()
    fake.create_stream("s", shard_count=2)
    await write(fake, keyed(50))
    async with connect(fake) as client:
        run = await run_tail(client, count=7)
        followed = await run_tail(client, count=50, follow=True)  # ends at -n though following
    assert len(run.lines) == 7 and run.stats.records == 7
    assert sorted(followed.lines) == sorted(d for d, _ in keyed(50))


async def test_stream_arn_and_one_shard() -> None:
    fake = FakeKinesis()
    fake.create_stream("s", shard_count=2)
    await write(fake, keyed(40), aggregation_enabled=False)
    async with connect(fake) as client:
        run = await run_tail(
            client, stream=None, stream_arn=fake.stream_arn("s"), shard="shardId-000000000001"
        )
    assert any(b.get("StreamARN") for op, b in fake.requests if op == "GetShardIterator")
    expected = [r.data for r in fake.records("s") if r.shard_id == "shardId-000000000001"]
    assert run.lines == expected and 0 < len(expected) < 40


async def test_a_missing_stream_or_shard_is_a_failure_naming_it() -> None:
    fake = FakeKinesis()
    fake.create_stream("s")
    async with connect(fake) as client:
        with pytest.raises(_Failure, match="stream 'nope' not found"):
            await run_tail(client, stream="nope")
        with pytest.raises(_Failure, match="no shard 'shardId-9' in stream 's'"):
            await run_tail(client, shard="shardId-9")


# -- start positions ----------------------------------------------------------------------------


async def test_from_timestamp_skips_what_arrived_before() -> None:
    fake = FakeKinesis()
    fake.create_stream("s", shard_count=2)
    await write(fake, keyed(20, "early"))
    await anyio.sleep(0.5)
    middle = anyio.current_time()  # the fake's arrival times are loop time in process
    await anyio.sleep(0.5)
    await write(fake, keyed(20, "late"))
    async with connect(fake) as client:
        run = await run_tail(client, iterator_type="AT_TIMESTAMP", timestamp=middle)
    assert sorted(run.lines) == sorted(d for d, _ in keyed(20, "late"))


async def test_from_sequence_starts_at_that_record() -> None:
    fake = FakeKinesis()
    fake.create_stream("s")
    await write(fake, keyed(10), aggregation_enabled=False)
    stored = fake.records("s")
    async with connect(fake) as client:
        run = await run_tail(
            client,
            shard=stored[0].shard_id,
            iterator_type="AT_SEQUENCE_NUMBER",
            sequence_number=stored[4].sequence_number,
        )
    assert run.lines == [r.data for r in stored[4:]]


async def test_latest_reads_only_new_records_and_children_from_their_start() -> None:
    fake = FakeKinesis()
    fake.create_stream("s")
    await write(fake, keyed(10, "old"))
    new = keyed(30, "new")
    async with connect(fake) as client, anyio.create_task_group() as tg:

        async def later() -> None:
            await anyio.sleep(1.0)
            fake.split_shard("s", "shardId-000000000000", HALF)
            await write(fake, new)  # only into the children, before tail starts them

        tg.start_soon(later)
        run = await run_tail(client, iterator_type="LATEST", follow=True, count=30)
    assert sorted(run.lines) == sorted(d for d, _ in new)
    kinds = [b["ShardIteratorType"] for op, b in fake.requests if op == "GetShardIterator"]
    assert kinds == ["LATEST", "TRIM_HORIZON", "TRIM_HORIZON"]


# -- resharding ---------------------------------------------------------------------------------


async def test_follow_reads_a_split_shard_then_its_children_in_order() -> None:
    fake = FakeKinesis()
    fake.create_stream("s")
    before = [(f"before-{i}".encode(), f"key-{i % 5}") for i in range(25)]
    after = [(f"after-{i}".encode(), f"key-{i % 5}") for i in range(25)]
    await write(fake, before)
    async with connect(fake) as client, anyio.create_task_group() as tg:

        async def reshard() -> None:
            await anyio.sleep(1.5)
            fake.split_shard("s", "shardId-000000000000", HALF)
            await write(fake, after)

        tg.start_soon(reshard)
        run = await run_tail(client, follow=True, count=50, format="json")
    rows = run.json
    assert sorted(r["data"].encode() for r in rows) == sorted(d for d, _ in before + after)
    parent = [i for i, r in enumerate(rows) if r["shard_id"] == "shardId-000000000000"]
    children = [i for i, r in enumerate(rows) if r["shard_id"] != "shardId-000000000000"]
    assert len(parent) == 25 and len(children) == 25
    assert max(parent) < min(children), "a child shard was read before its parent's end"
    assert {r["shard_id"] for r in rows} == {
        "shardId-000000000000",
        "shardId-000000000001",
        "shardId-000000000002",
    }


async def test_without_follow_every_shard_of_a_resharded_stream_is_read_parents_first() -> None:
    async def slow_parents(operation: str, body: dict[str, Any]) -> httpx.Response | None:
        if (
            operation == "GetRecords"
            and json.loads(body["ShardIterator"])[1] != "shardId-000000000002"
        ):
            await anyio.sleep(0.5)  # the child, were it read at once, would come first
        return None

    fake = FakeKinesis(hook=slow_parents)
    fake.create_stream("s", shard_count=2)
    await write(fake, keyed(20, "a"))
    fake.merge_shards("s", "shardId-000000000000", "shardId-000000000001")
    await write(fake, keyed(20, "b"))
    async with connect(fake) as client:
        run = await run_tail(client, format="json")
    rows = run.json
    assert sorted(r["data"] for r in rows) == sorted(
        d.decode() for d, _ in keyed(20, "a") + keyed(20, "b")
    )
    child = [i for i, r in enumerate(rows) if r["shard_id"] == "shardId-000000000002"]
    parents = [i for i, r in enumerate(rows) if r["shard_id"] != "shardId-000000000002"]
    assert max(parents) < min(child)


# -- the KCL's aggregate rule --------------------------------------------------------------------


def key_in(lo: int, hi: int) -> str:
    n = 0
    while not lo <= partition_hash_key(f"k{n}") <= hi:
        n += 1
    return f"k{n}"


async def test_an_aggregate_with_a_member_outside_its_shard_is_dropped_and_reported() -> None:
    fake = FakeKinesis()
    fake.create_stream("s", shard_count=2)  # shard 0: [0, HALF - 1]
    low = key_in(0, HALF - 1)
    bad = encode_aggregate(
        [(b"in-1", low, None), (b"out", low, str(HALF + 1)), (b"in-2", low, None)]
    )
    good = encode_aggregate([(b"ok-1", low, None), (b"ok-2", low, None)])
    async with connect(fake) as client:
        answer = await client.call(
            "PutRecords",
            {
                "StreamName": "s",
                "Records": [entry(bad, "a", 0), entry(good, "a", 0), entry(b"plain", low)],
            },
        )
        run = await run_tail(client)
    assert {r["ShardId"] for r in answer["Records"]} == {"shardId-000000000000"}
    assert run.lines == [b"ok-1", b"ok-2", b"plain"]
    bad_seq = answer["Records"][0]["SequenceNumber"]
    reports = [line for line in run.err.splitlines() if "aggregate dropped" in line]
    assert len(reports) == 1
    assert f"shard shardId-000000000000, sequence number {bad_seq}" in reports[0]
    assert run.stats.dropped_aggregates == 1


# -- throttling, pacing, expired iterators ------------------------------------------------------


def fake_with(hook: Hook) -> FakeKinesis:
    fake = FakeKinesis(hook=hook)
    fake.create_stream("s")
    return fake


async def test_throttled_get_records_back_off_and_retry() -> None:
    times: list[float] = []

    async def hook(operation: str, body: dict[str, Any]) -> httpx.Response | None:
        if operation != "GetRecords":
            return None
        times.append(anyio.current_time())
        if len(times) <= 3:
            return error_response(400, "ProvisionedThroughputExceededException")
        return None

    fake = fake_with(hook)
    await write(fake, keyed(20))
    async with connect(fake) as client:
        run = await run_tail(client)
    assert sorted(run.lines) == sorted(d for d, _ in keyed(20))
    assert len(times) > 3  # three throttled calls, then the reads that got the records
    gaps = [b - a for a, b in itertools.pairwise(times)]
    # the one backoff: full jitter under 0.5, 1, 2 s, never under the call rate's 0.2 s
    for gap, ceiling in zip(gaps, (0.5, 1.0, 2.0), strict=False):
        assert 0.2 - 0.01 <= gap <= ceiling + 0.2


@pytest.mark.parametrize(
    "answer",
    [
        httpx.Response(200, content=b"[" * 5000),
        httpx.Response(200, content=b"\xff\xfe"),
        httpx.Response(200, json={"Records": "not a list"}),
        httpx.Response(200, json={"Records": [["not", "an", "object"]]}),
        httpx.Response(200, json={"Records": [{"Data": 1, "PartitionKey": "k"}]}),
        httpx.Response(200, json={"Records": [], "MillisBehindLatest": "9" * 5000}),
        httpx.Response(200, json={"Records": [], "NextShardIterator": ["x"]}),
        httpx.Response(302, json={"Records": []}),
        httpx.Response(502, content=b"<html>bad gateway</html>"),
    ],
    ids=[
        "nested",
        "not-utf8",
        "records-not-a-list",
        "record-not-an-object",
        "data-not-a-string",
        "behind-5000-digits",
        "iterator-not-a-string",
        "302",
        "502-html",
    ],
)
async def test_a_malformed_get_records_answer_is_read_again(answer: httpx.Response) -> None:
    """Nothing a GetRecords answer holds escapes ``tail``: it is read again after the
    backoff, and every record comes out once."""
    served = 0

    async def hook(operation: str, body: dict[str, Any]) -> httpx.Response | None:
        nonlocal served
        if operation != "GetRecords":
            return None
        served += 1
        return answer if served <= 2 else None

    fake = fake_with(hook)
    await write(fake, keyed(10))
    async with connect(fake) as client:
        run = await run_tail(client)
    assert served > 2
    assert sorted(run.lines) == sorted(d for d, _ in keyed(10))


async def test_a_malformed_list_shards_entry_is_read_again() -> None:
    served = 0
    armed = False

    async def hook(operation: str, body: dict[str, Any]) -> httpx.Response | None:
        nonlocal served
        if not armed or operation != "ListShards":
            return None
        served += 1
        if served == 1:
            return httpx.Response(200, json={"Shards": [{"ShardId": 7, "HashKeyRange": []}]})
        if served == 2:
            return httpx.Response(
                200,
                json={
                    "Shards": [{"ShardId": "x", "HashKeyRange": {"StartingHashKey": "9" * 5000}}]
                },
            )
        return None

    fake = fake_with(hook)
    await write(fake, keyed(5))
    armed = True
    async with connect(fake) as client:
        run = await run_tail(client)
    assert served >= 3 and sorted(run.lines) == sorted(d for d, _ in keyed(5))


async def test_get_records_calls_are_paced_by_count_and_bytes() -> None:
    times: list[float] = []

    async def hook(operation: str, body: dict[str, Any]) -> httpx.Response | None:
        if operation == "GetRecords":
            times.append(anyio.current_time())
        return None

    fake = fake_with(hook)
    async with connect(fake) as client:
        await client.call(
            "PutRecords",
            {"StreamName": "s", "Records": [entry(b"y" * (MIB - 100), "k") for _ in range(4)]},
        )
        run = await run_tail(client)
        assert len(run.lines) == 4
        # 4 MiB read in the first call: the next waits 2 s (2 MiB/s per shard). The pacer
        # counts from before the call left, the hook sees it arrive.
        assert times[1] - times[0] >= 2.0 - 0.01
        times.clear()
        with anyio.move_on_after(2.0):
            await run_tail(client, follow=True, idle_interval=0.0)  # idle: only the call rate
    assert len(times) <= 2.0 * 5 + 1  # five calls a second at most: delays only lower it
    assert all(b - a >= 0.2 - 0.01 for a, b in itertools.pairwise(times))


async def test_an_expired_iterator_is_replaced_after_the_last_record_read() -> None:
    calls = 0

    async def hook(operation: str, body: dict[str, Any]) -> httpx.Response | None:
        nonlocal calls
        if operation == "GetRecords":
            calls += 1
            if calls == 3:
                return error_response(400, "ExpiredIteratorException")
        return None

    fake = fake_with(hook)
    first, second = keyed(10, "first"), keyed(10, "second")
    await write(fake, first, aggregation_enabled=False)
    async with connect(fake) as client, anyio.create_task_group() as tg:

        async def more() -> None:
            await anyio.sleep(1.0)
            await write(fake, second, aggregation_enabled=False)

        tg.start_soon(more)
        run = await run_tail(client, follow=True, count=20)
    assert sorted(run.lines) == sorted(d for d, _ in first + second)  # none twice
    iterators = [b for op, b in fake.requests if op == "GetShardIterator"]
    assert [b["ShardIteratorType"] for b in iterators] == ["TRIM_HORIZON", "AFTER_SEQUENCE_NUMBER"]
    stored = fake.records("s")
    assert iterators[1]["StartingSequenceNumber"] == stored[9].sequence_number


# -- progress ------------------------------------------------------------------------------------


async def test_progress_lines_on_stderr_at_most_every_quarter_second_and_on_change() -> None:
    """A line each 0.25 s at most while records arrive, and none once nothing changes. The
    tail runs until its line shows every record and then 1 s more."""
    fake = FakeKinesis()
    fake.create_stream("s", shard_count=2)
    done = "reading: 30 records, 2 shards reading, 0 closed shards read"
    out, err = io.BytesIO(), _Watched(done)
    options = TailOptions(
        stream="s", follow=True, progress=True, progress_interval=0.01, idle_interval=0.2
    )
    async with connect(fake) as client, anyio.create_task_group() as tg:
        started = anyio.current_time()

        async def run_tail() -> None:
            await tail(client, options, out, err)

        tg.start_soon(run_tail)
        for i in range(30):
            await write(fake, [(f"t-{i}".encode(), f"k{i}")])
            await anyio.sleep(0.1)
        with anyio.fail_after(30):
            await err.seen.wait()
        shown = len(err.getvalue().splitlines())
        await anyio.sleep(1.0)  # nothing changes now: no more lines
        stopped = anyio.current_time()
        tg.cancel_scope.cancel()
    lines = err.getvalue().splitlines()
    assert all(line.startswith("kinesis-trio: tail: reading: ") for line in lines)
    assert 3 <= len(lines) <= (stopped - started) / 0.25 + 1  # at most one a quarter second
    assert len(lines) == shown  # none after the last change
    assert done in lines[-1]
    assert lines[-1].endswith("0 ms behind latest")


class _Watched(io.StringIO):
    """A stderr that says when a line holding ``text`` was written (``seen``)."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text
        self.seen = anyio.Event()

    def write(self, s: str) -> int:
        if self.text in s:
            self.seen.set()
        return super().write(s)


class _Terminal(io.BytesIO):
    def isatty(self) -> bool:
        return True


def test_no_progress_when_stdout_is_a_terminal() -> None:
    from kinesis_trio.cli._commands import _parser
    from kinesis_trio.cli._tail import _options

    args = _parser().parse_args(["tail", "--stream", "s"])
    assert _options(args, _Terminal()).progress is False
    assert _options(args, io.BytesIO()).progress is True
    quiet = _parser().parse_args(["tail", "--stream", "s", "-q"])
    assert _options(quiet, io.BytesIO()).progress is False


async def test_list_shards_throttled_is_retried() -> None:
    failures = 0
    armed = False

    async def hook(operation: str, body: dict[str, Any]) -> httpx.Response | None:
        nonlocal failures
        if armed and operation == "ListShards" and failures < 3:
            failures += 1
            return error_response(400, "LimitExceededException")
        return None

    fake = fake_with(hook)
    await write(fake, keyed(5))
    armed = True
    async with connect(fake) as client:
        run = await run_tail(client)
    assert failures == 3 and sorted(run.lines) == sorted(d for d, _ in keyed(5))
