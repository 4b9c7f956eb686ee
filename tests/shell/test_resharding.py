"""Resharding: writes that reveal a stale map, refreshes, and no loss (fake Kinesis)."""

from __future__ import annotations

import base64
from typing import Any

import anyio
import httpx
import pytest

from kinesis_trio import Outcome, deaggregate
from kinesis_trio._core._aggregation import partition_hash_key
from kinesis_trio.testing import FakeKinesis
from tests.support.helpers import check_landed_kcl, fake_producer, fake_rows, stream_state

pytestmark = pytest.mark.anyio


async def test_split_mid_run_loses_nothing_and_stops_aggregating_across_shards() -> None:
    spanning_after_refresh = 0
    producer_box: list[Any] = []

    async def hook(operation: str, body: dict[str, Any]) -> httpx.Response | None:
        nonlocal spanning_after_refresh
        if operation != "PutRecords" or not producer_box:
            return None
        knows_split = len(stream_state(producer_box[0], "s").map) == 3
        for entry in body["Records"]:
            users = deaggregate(
                base64.b64decode(entry["Data"]),
                entry["PartitionKey"],
                explicit_hash_key=entry.get("ExplicitHashKey"),
            )
            if len(users) > 1:
                owners = {owner(fake, u.hash_key) for u in users}
                if len(owners) > 1 and knows_split:
                    spanning_after_refresh += 1
        return None

    fake = FakeKinesis(hook=hook)
    fake.create_stream("s", 2)
    sent: list[tuple[bytes, str, str | None, Outcome]] = []
    async with fake_producer(fake, record_max_buffered_time=0.02) as producer:
        producer_box.append(producer)
        for i in range(6000):
            if i == 2000:
                first = fake.open_shards("s")[0]
                fake.split_shard("s", first.shard_id, (first.start + first.end) // 2 + 1)
            if i % 500 == 0:
                await anyio.sleep(0.03)  # let batches go out around the split
            data = b"r%d" % i
            key = f"user-{i % 997}"
            sent.append((data, key, None, await producer.put(data, key)))
        await producer.flush()
        assert len(stream_state(producer, "s").map) == 3
    summary = check_landed_kcl(fake_rows(fake), sent)
    assert summary["ok"] == len(sent)
    assert summary["duplicates"] == 0
    assert spanning_after_refresh == 0
    # the split happened under aggregates in formation: some records had to be re-sent
    resent = [
        o
        for *_, o in sent
        if any(a.error_code == "WrittenOutsideShardRange" for a in o.result().attempts)
    ]
    assert summary["strays"] == len(resent) > 0


def owner(fake: FakeKinesis, hash_key: int) -> str:
    return next(s.shard_id for s in fake.open_shards("s") if s.start <= hash_key <= s.end)


async def test_plain_record_in_an_unexpected_shard_counts_as_written() -> None:
    fake = FakeKinesis()
    fake.create_stream("s", 1)
    async with fake_producer(
        fake, aggregation_enabled=False, record_max_buffered_time=0.01
    ) as producer:
        only = fake.open_shards("s")[0]
        fake.split_shard("s", only.shard_id, 2**127)
        outcomes = [await producer.put(b"%d" % i, f"k{i}") for i in range(50)]
        results = [await o.wait() for o in outcomes]
    assert all(r.ok and len(r.attempts) == 1 for r in results)
    for r in results:
        hk = partition_hash_key(r.partition_key or "")
        shard = next(s for s in fake.open_shards("s") if s.shard_id == r.shard_id)
        assert shard.start <= hk <= shard.end
    assert len(fake.records("s")) == 50
