"""Reliability behaviour on the fake, in virtual time: throttling, sharing a stream,
credentials expiring, periodic shard map refresh, ListShards kept within its quota."""

from __future__ import annotations

import anyio
import pytest

from kinesis_trio import Outcome
from kinesis_trio.testing import FakeKinesis
from tests.support.helpers import fake_producer, stream_state

pytestmark = [pytest.mark.anyio, pytest.mark.virtual_time]


async def test_fail_if_throttled_fails_at_once_with_the_throttling_code() -> None:
    fake = FakeKinesis()
    fake.create_stream("s", 1)
    fake.fail_next(1, "throttle_entries")
    async with fake_producer(fake, fail_if_throttled=True, record_max_buffered_time=0.01) as p:
        result = await (await p.put(b"v", "k")).wait()
        later = await (await p.put(b"w", "k")).wait()
    assert not result.ok and result.error_code == "ProvisionedThroughputExceededException"
    assert len(result.attempts) == 1
    assert later.ok


@pytest.mark.scenario
async def test_two_producers_sharing_a_stream_converge() -> None:
    """Both start at rate_limit=150 on one shard: together 3x its limit. AIMD must bring
    them down to share it instead of spinning on throttled retries."""
    seconds = 40.0
    rate = 1000
    fake = FakeKinesis(
        enforce_limits=True, records_per_second=rate, bytes_per_second=1_048_576 * rate // 1000
    )
    fake.create_stream("s", 1)
    results: list[Outcome] = []

    async def run(name: str) -> None:
        async with fake_producer(
            fake,
            aggregation_enabled=False,
            rate_limit=150 * rate / 1000,
            record_max_buffered_time=0.05,
            record_ttl=3600.0,
            max_outstanding_records=5000,
        ) as producer:
            start = anyio.current_time()
            i = 0
            while anyio.current_time() - start < seconds:
                results.append(await producer.put(b"%s-%d" % (name.encode(), i), f"{name}{i}"))
                i += 1

    async with anyio.create_task_group() as tg:
        tg.start_soon(run, "a")
        tg.start_soon(run, "b")
    stats = fake.stats
    assert all(o.result().ok for o in results)
    throttled_share = stats.entries_throttled / stats.entries
    # not spinning: most attempts land
    assert throttled_share < 0.10, throttled_share
    written = stats.entries_ok
    assert written >= 0.85 * rate * seconds, written  # and the shard is kept busy


async def test_periodic_refresh_finds_a_reshard_without_any_write() -> None:
    interval = 5.0
    fake = FakeKinesis()
    fake.create_stream("s", 2)
    async with fake_producer(fake, shard_map_refresh_interval=interval) as producer:
        first = fake.open_shards("s")[0]
        fake.split_shard("s", first.shard_id, (first.start + first.end) // 2 + 1)
        await anyio.sleep(interval * 1.1 + 1.2)
        assert {s.shard_id for s in stream_state(producer, "s").map.shards} == {
            s.shard_id for s in fake.open_shards("s")
        }
        assert (await (await producer.put(b"v", "k")).wait()).ok


async def test_refreshes_are_deduplicated_and_rate_limited() -> None:
    fake = FakeKinesis()
    fake.create_stream("s", 4)
    async with fake_producer(
        fake, aggregation_enabled=False, record_max_buffered_time=0.01
    ) as producer:
        for shard in list(fake.open_shards("s")):
            fake.split_shard("s", shard.shard_id, (shard.start + shard.end) // 2 + 1)
        start = anyio.current_time()
        outcomes = [await producer.put(b"%d" % i, f"k{i}") for i in range(2000)]
        await producer.flush()
        elapsed = anyio.current_time() - start
    assert all(o.result().ok for o in outcomes)
    list_shards = fake.calls.count("ListShards")
    # one at start; then at most one per second (plus the one that found the new map)
    assert list_shards <= 2 + elapsed, (list_shards, elapsed)
