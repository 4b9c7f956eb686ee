"""kinesis_trio.testing: the fake Kinesis itself, driven over its JSON 1.1 API.

Time-dependent tests run on virtual time on both backends (trio's
``MockClock(autojump_threshold=0)``, an asyncio loop whose clock leaps to its next timer),
with exact assertions.
"""

from __future__ import annotations

import base64
import json
import random
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx
import pytest

from kinesis_trio import Outcome, deaggregate
from kinesis_trio.testing import (
    ACCOUNT_ID,
    ENTRY_FAULTS,
    REQUEST_FAULTS,
    FakeKinesis,
    FakeStats,
    Faults,
)
from tests.support.helpers import fake_producer

pytestmark = [pytest.mark.anyio, pytest.mark.virtual_time]

MAX_HASH = 2**128 - 1
PTE = "ProvisionedThroughputExceededException"


def entry(data: bytes, pk: str = "k", ehk: int | None = None) -> dict[str, str]:
    out = {"Data": base64.b64encode(data).decode(), "PartitionKey": pk}
    if ehk is not None:
        out["ExplicitHashKey"] = str(ehk)
    return out


class Api:
    """A thin JSON 1.1 client for the fake."""

    def __init__(self, client: httpx.AsyncClient) -> None:
        self.client = client

    async def raw(self, operation: str, body: dict[str, Any], auth: bool = True) -> httpx.Response:
        headers = {
            "X-Amz-Target": f"Kinesis_20131202.{operation}",
            "Content-Type": "application/x-amz-json-1.1",
        }
        if auth:
            headers["Authorization"] = "AWS4-HMAC-SHA256 Credential=AKIDTEST/fake"
        return await self.client.post("/", content=json.dumps(body), headers=headers)

    async def ok(self, operation: str, body: dict[str, Any]) -> dict[str, Any]:
        response = await self.raw(operation, body)
        assert response.status_code == 200, response.text
        result: dict[str, Any] = response.json()
        return result

    async def error(self, operation: str, body: dict[str, Any], status: int = 400) -> str:
        response = await self.raw(operation, body)
        assert response.status_code == status, response.text
        code: str = response.json()["__type"]
        return code

    async def put(self, stream: str, entries: list[dict[str, str]]) -> dict[str, Any]:
        return await self.ok("PutRecords", {"StreamName": stream, "Records": entries})

    async def list_shards(self, stream: str, **extra: Any) -> list[dict[str, Any]]:
        body: dict[str, Any] = {"StreamName": stream, **extra}
        shards: list[dict[str, Any]] = []
        while True:
            page = await self.ok("ListShards", body)
            shards.extend(page["Shards"])
            if "NextToken" not in page:
                return shards
            body = {"NextToken": page["NextToken"]}


@asynccontextmanager
async def connect(fake: FakeKinesis) -> AsyncIterator[Api]:
    async with httpx.AsyncClient(transport=fake.transport(), base_url="http://fake") as client:
        yield Api(client)


async def put_or_hang(fake: FakeKinesis, api: Api, entries: list[dict[str, str]]) -> Any:
    """Slots, an error code, "reset", or "hang" (as soon as the fake logs a hang)."""
    seen: Any = None
    events = len(fake.fault_events)

    async def send() -> None:
        nonlocal seen
        try:
            response = await api.raw("PutRecords", {"StreamName": "s", "Records": entries})
        except httpx.ReadError:
            seen = "reset"
        else:
            body = response.json()
            seen = slots(body) if response.status_code == 200 else body["__type"]

    async with anyio.create_task_group() as tg:
        tg.start_soon(send)
        while seen is None:
            await anyio.sleep(0.001)
            if fake.fault_events[events:] and fake.fault_events[-1].kind.startswith("hang"):
                seen = "hang"
        tg.cancel_scope.cancel()
    return seen


def slots(result: dict[str, Any]) -> list[str]:
    """Each slot as 'ok' or its error code."""
    return ["ok" if "SequenceNumber" in r else r["ErrorCode"] for r in result["Records"]]


# -- protocol basics -------------------------------------------------------------------------


async def test_requests_need_an_authorization_header() -> None:
    fake = FakeKinesis()
    fake.create_stream("s")
    async with connect(fake) as api:
        response = await api.raw("PutRecords", {"StreamName": "s", "Records": []}, auth=False)
        assert response.status_code == 400
        assert "MissingAuthenticationToken" in response.json()["__type"]
        assert await api.error("Frobnicate", {}) == "UnknownOperationException"
    assert fake.records("s") == []


async def test_validation_rejects_whole_requests_and_stores_nothing() -> None:
    fake = FakeKinesis()
    fake.create_stream("s")
    async with connect(fake) as api:

        async def put_error(entries: list[dict[str, str]], stream: str = "s") -> str:
            return await api.error("PutRecords", {"StreamName": stream, "Records": entries})

        good = entry(b"fine")
        assert await put_error([]) == "ValidationException"
        assert await put_error([good] * 501) == "ValidationException"
        assert await put_error([good, entry(b"x", "k" * 257)]) == "ValidationException"
        assert await put_error([good, entry(b"x", "")]) == "ValidationException"
        assert await put_error([good, {**good, "ExplicitHashKey": "007"}]) == (
            "ValidationException"
        )
        # as Kinesis: ASCII digits only, and 256 UTF-16 code units (an emoji counts as two)
        assert await put_error([good, {**good, "ExplicitHashKey": "1\u0662"}]) == (
            "ValidationException"
        )
        assert await put_error([good, entry(b"x", "\U0001f600" * 129)]) == "ValidationException"
        assert await put_error([good, entry(b"x", ehk=MAX_HASH + 1)]) == (
            "InvalidArgumentException"
        )
        assert await put_error([good, entry(b"x" * (1024 * 1024), "k")]) == (
            "InvalidArgumentException"
        )
        big = entry(b"x" * (1024 * 1024 - 1), "k")  # exactly 1 MiB with its key: allowed
        assert await put_error([big] * 11) == "InvalidArgumentException"  # over 10 MiB
        assert await put_error([good], stream="missing") == "ResourceNotFoundException"
        assert fake.records("s") == []
        result = await api.put(
            "s",
            [big, entry(b"x", "k" * 256), entry(b"", "k", ehk=0), entry(b"e", "\U0001f600" * 128)],
        )
        assert slots(result) == ["ok"] * 4
    assert fake.stats.requests_by_status == {400: 11, 200: 1}


async def test_put_records_answers_in_request_order_with_rising_sequence_numbers() -> None:
    fake = FakeKinesis()
    fake.create_stream("s", 2)
    async with connect(fake) as api:
        entries = [entry(b"%d" % i, "k", ehk=0 if i % 2 else MAX_HASH) for i in range(10)]
        result = await api.put("s", entries)
    assert result["FailedRecordCount"] == 0
    shard_ids = [r["ShardId"] for r in result["Records"]]
    assert shard_ids == ["shardId-000000000001", "shardId-000000000000"] * 5
    seqs = [r["SequenceNumber"] for r in result["Records"]]
    assert seqs == sorted(seqs) and len(set(seqs)) == 10 and all(len(s) == 56 for s in seqs)
    low = fake.streams["s"].shards[0].records
    assert [r.data for r in low] == [b"1", b"3", b"5", b"7", b"9"]


async def test_get_records_reads_back_without_explicit_hash_key() -> None:
    fake = FakeKinesis()
    fake.create_stream("s", 1)
    async with connect(fake) as api:
        await api.put("s", [entry(b"a", "pk", ehk=5), entry(b"b", "pk")])
        it = await api.ok(
            "GetShardIterator",
            {
                "StreamName": "s",
                "ShardId": "shardId-000000000000",
                "ShardIteratorType": "TRIM_HORIZON",
            },
        )
        page = await api.ok("GetRecords", {"ShardIterator": it["ShardIterator"], "Limit": 1})
        assert [r["Data"] for r in page["Records"]] == [base64.b64encode(b"a").decode()]
        assert "ExplicitHashKey" not in page["Records"][0]
        assert page["Records"][0]["PartitionKey"] == "pk"
        page = await api.ok("GetRecords", {"ShardIterator": page["NextShardIterator"]})
        assert len(page["Records"]) == 1 and page["NextShardIterator"]
        # a closed shard read to its end: no next iterator, the children named
        fake.split_shard("s", "shardId-000000000000", 2**127)
        page = await api.ok("GetRecords", {"ShardIterator": page["NextShardIterator"]})
        assert page["Records"] == [] and page["NextShardIterator"] is None
        assert [c["ShardId"] for c in page["ChildShards"]] == [
            "shardId-000000000001",
            "shardId-000000000002",
        ]


# -- per-shard limits ------------------------------------------------------------------------


async def test_records_per_second_limit() -> None:
    fake = FakeKinesis(enforce_limits=True)
    fake.create_stream("s", 1)
    async with connect(fake) as api:
        start = anyio.current_time()
        results = [await api.put("s", [entry(b"x")] * 500) for _ in range(3)]
        drained = anyio.current_time()
        got = [s for r in results for s in slots(r)]
        ok = got.count("ok")
        # 1000 fit at once (none refilled meanwhile: no time passed)
        assert drained == start
        assert got[:1000] == ["ok"] * 1000
        assert set(got[1000:]) <= {"ok", PTE}
        assert [r["FailedRecordCount"] for r in results] == [slots(r).count(PTE) for r in results]
        failed = next(r for r in results[2]["Records"] if "ErrorCode" in r)
        assert failed == {
            "ErrorCode": PTE,
            "ErrorMessage": "Rate exceeded for shard shardId-000000000000 in stream s "
            f"under account {ACCOUNT_ID}.",
        }
        assert len(fake.records("s")) == ok
        assert ok == 1000 and results[2]["FailedRecordCount"] == 500

        # the bucket refills continuously: after a second, 1000 more fit
        await anyio.sleep(1.0)
        before = anyio.current_time()
        results = [await api.put("s", [entry(b"x")] * 500) for _ in range(3)]
        ok2 = sum(slots(r).count("ok") for r in results)
        assert ok2 == 1000 and before - drained == 1.0
    stats = fake.stats
    assert stats.requests == 6 and stats.entries == 3000
    assert stats.entries_ok == ok + ok2 and stats.entries_throttled == 3000 - ok - ok2
    assert stats.requests_by_status == {200: 6}
    shard = stats.shards["s"]["shardId-000000000000"]
    assert shard.records == ok + ok2 and shard.bytes == 2 * (ok + ok2)
    assert shard.throttled == stats.entries_throttled
    assert shard.first_accept == pytest.approx(start, abs=0.5)
    assert shard.last_accept is not None and shard.last_accept >= before


async def test_bytes_per_second_limit() -> None:
    fake = FakeKinesis(enforce_limits=True)
    fake.create_stream("s", 1)
    size = 10 * 1024 + 1  # 10 KiB of data plus a one-byte key
    async with connect(fake) as api:
        start = anyio.current_time()
        result = await api.put("s", [entry(b"d" * (size - 1))] * 200)
        # 102 * 10,241 bytes fit in 1 MiB; the 103rd does not
        assert slots(result) == ["ok"] * 102 + [PTE] * 98
        first = 102
        assert anyio.current_time() == start  # no time passed: nothing refilled
        await anyio.sleep(0.5)
        result = await api.put("s", [entry(b"d" * (size - 1))] * 200)
        second = slots(result).count("ok")
        # 3,994 bytes left over plus half a MiB refilled: 51 more
        assert second == 51
    assert fake.stats.shards["s"]["shardId-000000000000"].bytes == size * (first + second)


async def test_limits_are_per_shard_and_slots_keep_request_order() -> None:
    fake = FakeKinesis(enforce_limits=True, records_per_second=3)
    fake.create_stream("s", 2)
    low, high = 0, MAX_HASH
    async with connect(fake) as api:
        entries = [entry(b"%d" % i, "k", ehk=low if i % 2 == 0 else high) for i in range(10)]
        result = await api.put("s", entries)
    assert slots(result) == ["ok"] * 6 + [PTE] * 4
    assert result["FailedRecordCount"] == 4
    assert [r.get("ShardId") for r in result["Records"][:6]] == [
        "shardId-000000000000",
        "shardId-000000000001",
    ] * 3
    assert "shardId-000000000000 in stream s" in result["Records"][6]["ErrorMessage"]
    assert "shardId-000000000001 in stream s" in result["Records"][7]["ErrorMessage"]
    assert sorted(r.data for r in fake.records("s")) == [b"%d" % i for i in range(6)]


async def test_limits_off_by_default() -> None:
    fake = FakeKinesis()
    fake.create_stream("s", 1)
    async with connect(fake) as api:
        for _ in range(10):
            assert slots(await api.put("s", [entry(b"x")] * 500)) == ["ok"] * 500
    assert fake.stats.entries_ok == 5000


# -- faults ----------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ENTRY_FAULTS + REQUEST_FAULTS)
async def test_each_fault_kind_once(kind: str) -> None:
    fake = FakeKinesis()
    fake.create_stream("s", 2)
    fake.fail_next(1, kind)
    entries = [entry(b"%d" % i, f"k{i}") for i in range(5)]
    async with connect(fake) as api:
        seen: Any = None
        with anyio.move_on_after(6.0) as scope:
            try:
                response = await api.raw("PutRecords", {"StreamName": "s", "Records": entries})
                seen = (response.status_code, response.json())
            except httpx.ReadError as exc:
                seen = exc
        stored = [(r.shard_id, r.sequence_number) for r in fake.records("s")]
        if kind == "throttle_entries":
            assert seen[0] == 200 and seen[1]["FailedRecordCount"] == 5
            assert slots(seen[1]) == [PTE] * 5
        elif kind == "internal_failure_entries":
            assert seen[0] == 200 and slots(seen[1]) == ["InternalFailure"] * 5
        elif kind in ("http_500", "http_503"):
            status, code = (
                (500, "InternalFailure") if kind == "http_500" else (503, "ServiceUnavailable")
            )
            assert seen[0] == status and seen[1]["__type"] == code
        elif kind.startswith("hang"):
            assert scope.cancelled_caught and seen is None  # never answered
        else:
            assert isinstance(seen, httpx.ReadError)
            assert "connection reset by peer" in str(seen)
        if kind.endswith("_after"):
            assert len(stored) == 5  # processed: stored, though the client never heard
        else:
            assert stored == []
        # the next request is served normally
        assert slots(await api.put("s", entries)) == ["ok"] * 5
    if kind in REQUEST_FAULTS:
        [event] = fake.fault_events
        assert (event.kind, event.stream) == (kind, "s")
        assert sorted(event.entries) == sorted(stored)
        assert event.ambiguous == kind.endswith("_after")
        assert fake.ambiguous_requests == ([event] if event.ambiguous else [])
        assert fake.stats.requests_unanswered == (kind.startswith(("hang", "reset")))
    else:
        assert fake.fault_events == [] and fake.stats.faults[kind] == 5
    assert len(fake.records("s")) == len(stored) + 5


async def test_fail_next_queues_in_order_and_can_target_a_stream() -> None:
    fake = FakeKinesis()
    fake.create_stream("a")
    fake.create_stream("b")
    fake.fail_next(2, "http_503", stream="a")
    fake.fail_next(1, "ExpiredTokenException")
    with pytest.raises(ValueError, match="unknown fault kind"):
        fake.fail_next(1, "http500")
    with pytest.raises(ValueError, match="n must be"):
        fake.fail_next(0, "http_500")
    body_b = {"StreamName": "b", "Records": [entry(b"x")]}
    body_a = {"StreamName": "a", "Records": [entry(b"x")]}
    async with connect(fake) as api:
        assert await api.error("PutRecords", body_b) == "ExpiredTokenException"
        assert await api.error("PutRecords", body_a, 503) == "ServiceUnavailable"
        assert await api.ok("PutRecords", body_b)
        assert await api.error("PutRecords", body_a, 503) == "ServiceUnavailable"
        assert await api.ok("PutRecords", body_a)
        assert await api.ok("ListShards", {"StreamName": "a"})  # never a PutRecords fault
    assert [e.kind for e in fake.fault_events] == [
        "ExpiredTokenException",
        "http_503",
        "http_503",
    ]
    assert fake.stats.requests_by_status == {400: 1, 503: 2, 200: 2}


async def test_fatal_streams_fail_every_put_and_nothing_else() -> None:
    fake = FakeKinesis(
        faults=Faults(fatal={"audit": "AccessDeniedException", "kms": "KMSNotFoundException"})
    )
    for name in ("audit", "kms", "ok"):
        fake.create_stream(name)
    arn = f"arn:aws:kinesis:us-east-1:{ACCOUNT_ID}:stream/kms"
    async with connect(fake) as api:
        for _ in range(3):
            body = {"StreamName": "audit", "Records": [entry(b"x")]}
            assert await api.error("PutRecords", body) == "AccessDeniedException"
        by_arn = {"StreamARN": arn, "Records": [entry(b"x")]}
        assert await api.error("PutRecords", by_arn) == "KMSNotFoundException"
        assert len(await api.list_shards("audit")) == 1  # the shard map is still readable
        assert slots(await api.put("ok", [entry(b"x")])) == ["ok"]
    assert fake.records("audit") == [] and fake.records("kms") == []
    assert [e.kind for e in fake.fault_events] == ["AccessDeniedException"] * 3 + [
        "KMSNotFoundException"
    ]


async def test_random_faults_are_reproducible_with_a_seed_and_consistent() -> None:
    faults: dict[str, Any] = dict(
        http_500=0.1,
        http_503=0.05,
        reset_before=0.05,
        reset_after=0.1,
        hang_before=0.05,
        hang_after=0.05,
        throttle_entries=0.2,
        internal_failure_entries=0.05,
    )

    async def run() -> tuple[list[Any], FakeKinesis]:
        fake = FakeKinesis(faults=Faults(seed=1234, **faults))
        fake.create_stream("s", 3)
        seen: list[Any] = []
        async with connect(fake) as api:
            for i in range(200):
                entries = [entry(b"%d-%d" % (i, j), f"k{j}") for j in range(10)]
                seen.append(await put_or_hang(fake, api, entries))
        return seen, fake

    first, fake = await run()
    second, _ = await run()
    assert first == second
    counts = fake.stats.faults
    assert all(counts[kind] > 0 for kind in faults), counts
    # stored records: exactly the ok slots plus what the ambiguous requests stored
    ok_slots = sum(s.count("ok") for s in first if isinstance(s, list))
    ambiguous = [e for ev in fake.ambiguous_requests for e in ev.entries]
    assert len(fake.records("s")) == ok_slots + len(ambiguous) == fake.stats.entries_ok
    stored = {(r.shard_id, r.sequence_number) for r in fake.records("s")}
    assert set(ambiguous) <= stored
    assert first.count("hang") == counts["hang_before"] + counts["hang_after"]
    assert first.count("reset") == counts["reset_before"] + counts["reset_after"]
    # assigning faults again reseeds
    fake.faults = Faults(seed=1234, **faults)
    assert fake.rng.random() == random.Random(1234).random()


def test_faults_validate_probabilities() -> None:
    with pytest.raises(ValueError, match="probability"):
        Faults(http_500=1.5)
    with pytest.raises(ValueError, match="add up"):
        Faults(http_500=0.6, reset_after=0.6)
    with pytest.raises(ValueError, match="latency"):
        Faults(latency=-1)
    Faults(throttle_entries=0.7, http_500=0.7)  # different groups: fine


async def test_latency_delays_every_request() -> None:
    latency, jitter = 2.0, 1.0
    fake = FakeKinesis(faults=Faults(latency=latency, latency_jitter=jitter, seed=5))
    fake.create_stream("s")
    async with connect(fake) as api:
        durations = []
        calls: list[tuple[str, dict[str, Any]]] = [
            ("PutRecords", {"StreamName": "s", "Records": [entry(b"x")]}),
            ("ListShards", {"StreamName": "s"}),
            ("DescribeStreamSummary", {"StreamName": "s"}),
        ]
        for operation, body in calls * 3:
            start = anyio.current_time()
            await api.ok(operation, body)
            durations.append(anyio.current_time() - start)
    assert all(latency <= d for d in durations), durations
    assert all(d <= latency + jitter for d in durations), durations
    assert len({round(d, 9) for d in durations}) > 1  # jittered


# -- resharding ------------------------------------------------------------------------------


async def test_split_shard_closes_the_parent_and_routes_to_children() -> None:
    fake = FakeKinesis()
    fake.create_stream("s", 1)
    async with connect(fake) as api:
        await api.put("s", [entry(b"before", ehk=MAX_HASH)])
        await api.ok(
            "SplitShard",
            {
                "StreamName": "s",
                "ShardToSplit": "shardId-000000000000",
                "NewStartingHashKey": str(2**127),
            },
        )
        shards = await api.list_shards("s")
        assert [s["ShardId"] for s in shards] == [f"shardId-00000000000{i}" for i in range(3)]
        parent, low, high = shards
        assert "EndingSequenceNumber" in parent["SequenceNumberRange"]
        assert low["ParentShardId"] == high["ParentShardId"] == "shardId-000000000000"
        assert low["HashKeyRange"] == {"StartingHashKey": "0", "EndingHashKey": str(2**127 - 1)}
        assert high["HashKeyRange"] == {
            "StartingHashKey": str(2**127),
            "EndingHashKey": str(MAX_HASH),
        }
        assert all("EndingSequenceNumber" not in s["SequenceNumberRange"] for s in (low, high))
        latest = await api.list_shards("s", ShardFilter={"Type": "AT_LATEST"})
        assert [s["ShardId"] for s in latest] == ["shardId-000000000001", "shardId-000000000002"]
        summary = await api.ok("DescribeStreamSummary", {"StreamName": "s"})
        assert summary["StreamDescriptionSummary"]["OpenShardCount"] == 2

        result = await api.put("s", [entry(b"a", ehk=0), entry(b"b", ehk=2**127), entry(b"c")])
        assert [r["ShardId"] for r in result["Records"][:2]] == [
            "shardId-000000000001",
            "shardId-000000000002",
        ]
        assert result["Records"][2]["ShardId"] != "shardId-000000000000"
        assert [r.data for r in fake.streams["s"].shards[0].records] == [b"before"]
        assert int(parent["SequenceNumberRange"]["EndingSequenceNumber"]) < int(
            result["Records"][0]["SequenceNumber"]
        )

        def split(shard: str, key: int) -> dict[str, Any]:
            return {"StreamName": "s", "ShardToSplit": shard, "NewStartingHashKey": str(key)}

        assert await api.error("SplitShard", split("shardId-000000000000", 5)) == (
            "InvalidArgumentException"  # already split
        )
        assert await api.error("SplitShard", split("shardId-000000000001", 0)) == (
            "InvalidArgumentException"  # would leave an empty child
        )
        assert await api.error("SplitShard", split("shardId-000000000001", 2**127)) == (
            "InvalidArgumentException"  # outside the shard
        )
        assert await api.error("SplitShard", split("shardId-000000000099", 5)) == (
            "ResourceNotFoundException"
        )


async def test_merge_shards_needs_adjacent_open_shards() -> None:
    fake = FakeKinesis()
    fake.create_stream("s", 3)
    s0, s1, s2 = (s.shard_id for s in fake.open_shards("s"))
    async with connect(fake) as api:

        def merge(a: str, b: str) -> dict[str, Any]:
            return {"StreamName": "s", "ShardToMerge": a, "AdjacentShardToMerge": b}

        assert await api.error("MergeShards", merge(s0, s2)) == "InvalidArgumentException"
        assert await api.error("MergeShards", merge(s0, s0)) == "InvalidArgumentException"
        await api.ok("MergeShards", merge(s1, s0))  # either order
        shards = {s["ShardId"]: s for s in await api.list_shards("s")}
        child = shards["shardId-000000000003"]
        assert child["ParentShardId"] == s1 and child["AdjacentParentShardId"] == s0
        assert child["HashKeyRange"]["StartingHashKey"] == "0"
        assert child["HashKeyRange"]["EndingHashKey"] == str(fake.streams["s"].shards[1].end)
        assert all("EndingSequenceNumber" in shards[s]["SequenceNumberRange"] for s in (s0, s1))
        assert await api.error("MergeShards", merge(s0, s2)) == "InvalidArgumentException"
        result = await api.put("s", [entry(b"a", ehk=0), entry(b"b", ehk=MAX_HASH)])
        assert [r["ShardId"] for r in result["Records"]] == ["shardId-000000000003", s2]
        await api.ok("MergeShards", merge("shardId-000000000003", s2))
        assert [s.shard_id for s in fake.open_shards("s")] == ["shardId-000000000004"]
        assert (fake.open_shards("s")[0].start, fake.open_shards("s")[0].end) == (0, MAX_HASH)


async def test_update_shard_count_replaces_open_shards() -> None:
    fake = FakeKinesis()
    fake.create_stream("s", 2)
    async with connect(fake) as api:
        answer = await api.ok(
            "UpdateShardCount",
            {"StreamName": "s", "TargetShardCount": 4, "ScalingType": "UNIFORM_SCALING"},
        )
        assert (answer["CurrentShardCount"], answer["TargetShardCount"]) == (2, 4)
        latest = await api.list_shards("s", ShardFilter={"Type": "AT_LATEST"})
        assert [s["ShardId"] for s in latest] == [f"shardId-00000000000{i}" for i in range(2, 6)]
        assert [s["ParentShardId"] for s in latest] == ["shardId-000000000000"] * 2 + [
            "shardId-000000000001"
        ] * 2
        starts = [int(s["HashKeyRange"]["StartingHashKey"]) for s in latest]
        assert starts == [i * 2**126 for i in range(4)]
        assert len(await api.list_shards("s")) == 6
        result = await api.put("s", [entry(b"%d" % i, ehk=i * 2**126) for i in range(4)])
        assert [r["ShardId"] for r in result["Records"]] == [s["ShardId"] for s in latest]

        def update(n: int) -> dict[str, Any]:
            return {"StreamName": "s", "TargetShardCount": n, "ScalingType": "UNIFORM_SCALING"}

        assert await api.error("UpdateShardCount", update(9)) == "LimitExceededException"
        assert await api.error("UpdateShardCount", update(1)) == "LimitExceededException"
        await api.ok("UpdateShardCount", update(3))  # 4 -> 3: uneven overlap
        latest = await api.list_shards("s", ShardFilter={"Type": "AT_LATEST"})
        assert len(latest) == 3
        middle = latest[1]  # spans two old shards: both are its parents
        assert (middle["ParentShardId"], middle["AdjacentParentShardId"]) == (
            "shardId-000000000003",
            "shardId-000000000004",
        )


async def test_list_shards_paginates_and_filters() -> None:
    fake = FakeKinesis()
    fake.create_stream("s", 5)
    fake.split_shard("s", "shardId-000000000002", fake.streams["s"].shards[2].start + 1)
    async with connect(fake) as api:
        first = await api.ok(
            "ListShards", {"StreamName": "s", "MaxResults": 4, "ShardFilter": {"Type": "AT_LATEST"}}
        )
        assert len(first["Shards"]) == 4 and first["NextToken"]
        rest = await api.ok("ListShards", {"NextToken": first["NextToken"]})  # token only
        assert "NextToken" not in rest
        ids = [s["ShardId"] for s in first["Shards"] + rest["Shards"]]
        assert ids == [f"shardId-00000000000{i}" for i in (0, 1, 3, 4, 5, 6)]
        every = await api.list_shards("s", MaxResults=2)
        assert len(every) == 7
        after = await api.list_shards("s", ExclusiveStartShardId="shardId-000000000004")
        assert [s["ShardId"] for s in after] == ["shardId-000000000005", "shardId-000000000006"]
        both = {"NextToken": first["NextToken"], "StreamName": "s"}
        assert await api.error("ListShards", both) == "InvalidArgumentException"
        assert await api.error("ListShards", {"NextToken": "garbage"}) == (
            "InvalidArgumentException"
        )
        assert await api.error("ListShards", {"StreamName": "s", "MaxResults": 0}) == (
            "ValidationException"
        )
        await anyio.sleep(301)  # tokens expire after 300 s
        assert await api.error("ListShards", {"NextToken": first["NextToken"]}) == (
            "ExpiredNextTokenException"
        )

    fake.create_stream("big", 1001)
    async with connect(fake) as api:
        page = await api.ok("ListShards", {"StreamName": "big"})
        assert len(page["Shards"]) == 1000  # the default page size
        page = await api.ok("ListShards", {"NextToken": page["NextToken"]})
        assert [s["ShardId"] for s in page["Shards"]] == ["shardId-000000001000"]


async def test_stream_lifecycle_over_the_api() -> None:
    fake = FakeKinesis()
    async with connect(fake) as api:
        await api.ok("CreateStream", {"StreamName": "x", "ShardCount": 3})
        assert await api.error("CreateStream", {"StreamName": "x", "ShardCount": 1}) == (
            "ResourceInUseException"
        )
        summary = (await api.ok("DescribeStreamSummary", {"StreamName": "x"}))[
            "StreamDescriptionSummary"
        ]
        assert summary["OpenShardCount"] == 3
        assert summary["StreamARN"] == f"arn:aws:kinesis:us-east-1:{ACCOUNT_ID}:stream/x"
        await api.ok(
            "CreateStream", {"StreamName": "od", "StreamModeDetails": {"StreamMode": "ON_DEMAND"}}
        )
        summary = (await api.ok("DescribeStreamSummary", {"StreamName": "od"}))[
            "StreamDescriptionSummary"
        ]
        assert summary["StreamModeDetails"] == {"StreamMode": "ON_DEMAND"}
        await api.ok("DeleteStream", {"StreamName": "x"})
        assert await api.error("DescribeStreamSummary", {"StreamName": "x"}) == (
            "ResourceNotFoundException"
        )


# -- long runs under virtual time ------------------------------------------------------------


async def test_an_hour_of_bursts_with_limits_faults_and_a_reshard() -> None:
    """One hour of virtual time: bursts over the limit, retried, a split at half-time."""
    real_start = time.monotonic()
    fake = FakeKinesis(
        enforce_limits=True,
        records_per_second=100,
        bytes_per_second=100 * 1024,
        faults=Faults(latency=0.02, latency_jitter=0.03, http_500=0.05, seed=3),
    )
    fake.create_stream("s", 1)
    rng = random.Random(3)
    start = anyio.current_time()
    throttled = 0

    async with connect(fake) as api:

        async def send(batch: list[dict[str, str]]) -> None:
            nonlocal throttled
            while batch:
                response = await api.raw("PutRecords", {"StreamName": "s", "Records": batch})
                if response.status_code == 200:
                    records = response.json()["Records"]
                    throttled += sum(r.get("ErrorCode") == PTE for r in records)
                    batch = [e for e, r in zip(batch, records, strict=True) if "ErrorCode" in r]
                if batch:
                    await anyio.sleep(1.0)

        async with anyio.create_task_group() as tg:
            for burst in range(360):  # a burst of 150 records every 10 s
                if burst == 180:
                    fake.split_shard("s", "shardId-000000000000", 2**127)
                batch = [entry(b"%d.%d" % (burst, i), f"pk-{rng.random()}") for i in range(150)]
                tg.start_soon(send, batch)
                await anyio.sleep(10.0)
    elapsed = anyio.current_time() - start
    assert 3600.0 <= elapsed < 3600.0 + 60.0
    # an hour in seconds of real time (a real wait per request or retry would take hours;
    # a busy machine's slowness is minutes at most)
    assert time.monotonic() - real_start < 300.0
    datas = sorted(r.data for r in fake.records("s"))
    assert datas == sorted(b"%d.%d" % (b, i) for b in range(360) for i in range(150))
    stats = fake.stats
    assert stats.entries_ok == 54_000 and throttled == stats.entries_throttled > 0
    assert stats.requests_by_status[500] > 0
    before = stats.shards["s"]["shardId-000000000000"]
    # the single shard took 100 of each burst of 150 at once, the rest a second later
    assert before.records == 180 * 150
    assert before.first_accept is not None and before.last_accept is not None
    assert before.last_accept < start + 1810
    for child in ("shardId-000000000001", "shardId-000000000002"):
        assert stats.shards["s"][child].first_accept is not None
        assert stats.shards["s"][child].first_accept >= start + 1800  # type: ignore[operator]
    assert throttled >= 180 * 50  # every burst before the split went over the limit


async def test_a_producer_over_faults_confirms_each_record_once() -> None:
    """The intended use: a Producer against the fake with limits and faults.

    Every outcome is ok and names a stored record holding its data; stored records no
    outcome names come only from ambiguous requests (answer lost, retried).
    """
    fake = FakeKinesis(
        enforce_limits=True,
        faults=Faults(
            throttle_entries=0.05,
            internal_failure_entries=0.02,
            http_500=0.05,
            reset_after=0.05,
            hang_after=0.03,
            reset_before=0.03,
            latency=0.01,
            seed=11,
        ),
    )
    fake.create_stream("s", 2)
    sent: list[tuple[bytes, Outcome]] = []
    async with fake_producer(
        fake,
        request_timeout=2.0,
        connect_timeout=2.0,
        record_ttl=3600.0,
        record_max_buffered_time=0.05,
        retry_backoff_base=0.1,
        retry_backoff_max=1.0,
        aggregation_enabled=False,
        collection_max_count=25,
    ) as producer:
        for i in range(1500):
            data = b"r%d" % i
            sent.append((data, await producer.put(data, f"k{i % 97}")))
    stored = {(r.shard_id, r.sequence_number): r for r in fake.records("s")}
    named = set()
    for data, outcome in sent:
        result = outcome.result()
        assert result.ok, result
        where = (result.shard_id, result.sequence_number)
        named.add(where)
        record = stored[where]  # type: ignore[index]
        users = deaggregate(record.data, record.partition_key or "")
        assert users[result.sub_sequence_number or 0].data == data
    ambiguous = {e for ev in fake.ambiguous_requests for e in ev.entries}
    assert set(stored) - named <= ambiguous
    assert fake.ambiguous_requests, "the seed should have lost some answers"
    assert fake.stats.entries_throttled > 0


def test_fresh_stats_can_be_assigned() -> None:
    fake = FakeKinesis()
    fake.stats.requests = 5
    fake.stats = FakeStats()
    assert fake.stats.requests == 0
    assert fake.stats.shard("s", "x").records == 0
