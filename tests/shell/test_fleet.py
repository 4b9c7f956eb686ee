"""A fleet of producers on one shard: records already accepted survive a shard whose pace
falls because others came to share it (issue 61).

Two producers share a shard at twice its capacity; after 10 s two more join, and each
producer's share of the shard halves after it accepted records at the old pace. None of
their records may expire while the stream keeps answering: throttled records go back first
(before the records accepted after them), paced by the shard's limiter, and ``put`` slows
instead. The fake enforces AWS's shard limits; records of 20 kB keep the fleet's CPU low
(50 records/s fill the shard).

On virtual time on both backends (trio's ``MockClock``, an asyncio loop whose clock leaps
to its next timer), with the real ``record_ttl`` (30 s): deterministic in what it proves,
whatever the machine's speed.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from kinesis_trio import Outcome, Producer, ProducerConfig, RecordResult
from kinesis_trio.testing import FakeKinesis
from tests.support.helpers import CREDS

pytestmark = [pytest.mark.anyio, pytest.mark.virtual_time]

#: the shard's bytes per second (the fake's limit), and each producer's offered rate
SHARD_BYTES = 1_048_576
OFFERED = 1_048_576
SIZE = 20_000


async def run_fleet(
    *, first: int, joining: int, join_at: float, until: float, **config: Any
) -> tuple[list[list[RecordResult]], FakeKinesis]:
    """``first`` producers from the start, ``joining`` more from ``join_at``, each putting
    ``OFFERED`` bytes/s on schedule until ``until`` (seconds); every outcome."""
    fake = FakeKinesis(enforce_limits=True, bytes_per_second=SHARD_BYTES)
    fake.create_stream("s", shard_count=1)
    settings = ProducerConfig(
        record_ttl=30.0,
        metrics_level="none",
        **config,
    )
    results: list[list[RecordResult]] = []
    start = anyio.current_time()

    async def producer(index: int, begin: float) -> None:
        outcomes: list[Outcome] = []
        async with Producer(
            "s",
            region_name="us-east-1",
            endpoint_url="http://fake.local",
            credentials=CREDS,
            config=settings,
            transport=fake.transport(),
        ) as p:
            interval = SIZE / OFFERED
            due = start + begin
            await anyio.sleep_until(due)
            i = 0
            while due < start + until:
                data = b"%d:%07d:" % (index, i) + b"x" * (SIZE - 12)
                outcomes.append(await p.put(data, f"k{i}"))
                i += 1
                due += interval
                await anyio.sleep_until(due)
            mine = [await o.wait() for o in outcomes]
        results.append(mine)

    async with anyio.create_task_group() as tg:
        for n in range(first):
            tg.start_soon(producer, n, 0.0)
        for n in range(joining):
            tg.start_soon(producer, first + n, join_at)
    return results, fake


async def test_records_accepted_survive_when_others_come_to_share_the_shard() -> None:
    results, fake = await run_fleet(first=2, joining=2, join_at=10.0, until=30.0)
    every = [r for mine in results for r in mine]
    failed = {r.error_code for r in every if not r.ok}
    assert not failed, (failed, sum(not r.ok for r in every))
    # the stream was overloaded throughout (4x its capacity at the end), and throttled
    assert fake.stats.entries_throttled > 0
    # each producer wrote a fair part of what the shard took
    written = sorted(len(mine) for mine in results)
    assert written[0] > 0
