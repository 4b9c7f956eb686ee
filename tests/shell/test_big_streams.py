"""A big stream costs what its records cost: nothing per linger window, per request or per
record visits every shard of a stream, only those that hold records (issue 61). The shard
workers of a stream start as their shards first get records.

Each test counts every pass over a stream's list of shard buffers (``for``, ``sum``,
``list``: anything that iterates it; routing a record indexes it, which is not a pass) while
the producer writes records on a few shards of a 2,000-shard stream for many linger
windows.
"""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from kinesis_trio._core import ShardBuffer, ShardMap, StreamState
from kinesis_trio.testing import FakeKinesis
from tests.support.helpers import fake_producer

pytestmark = [pytest.mark.anyio, pytest.mark.virtual_time]

SHARDS = 2_000


class Passes(list[ShardBuffer]):
    """A stream's shard buffers that count the passes over them."""

    passes = 0

    def __iter__(self) -> Any:
        Passes.passes += 1
        return super().__iter__()


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> type[Passes]:
    use_map = StreamState.use_map

    def counting(self: StreamState, shard_map: ShardMap, shards: list[ShardBuffer]) -> None:
        use_map(self, shard_map, Passes(shards))

    monkeypatch.setattr(StreamState, "use_map", counting)
    Passes.passes = 0
    return Passes


def keys_on(fake: FakeKinesis, shards: int) -> list[str]:
    """A partition key for each of the stream's first ``shards`` shards."""
    from kinesis_trio._core import hash_key_for

    ranges = [(s.start, s.end) for s in fake.open_shards("s")[:shards]]
    keys: dict[int, str] = {}
    i = 0
    while len(keys) < shards:
        h = hash_key_for(f"k{i}")
        for n, (start, end) in enumerate(ranges):
            if start <= h <= end and n not in keys:
                keys[n] = f"k{i}"
        i += 1
    return list(keys.values())


async def write_windows(fake: FakeKinesis, windows: int, **config: Any) -> list[bool]:
    """Records on 4 of the stream's shards, a few per linger window for ``windows`` windows,
    each awaited; returns each outcome's ``ok``."""
    keys = keys_on(fake, 4)
    producer = fake_producer(fake, metrics_level="none", **config)
    async with producer:
        outcomes = []
        for w in range(windows):
            for key in keys:
                outcomes.append(await producer.put(b"w%d" % w, key))
            await anyio.sleep(0.1)  # the default linger
        return [(await o.wait()).ok for o in outcomes]


async def test_linger_windows_visit_only_the_shards_that_hold_records(
    counted: type[Passes],
) -> None:
    fake = FakeKinesis()
    fake.create_stream("s", shard_count=SHARDS)
    results = await write_windows(fake, 50)
    assert all(results) and len(results) == 200
    # Loading the map passes over the shards once or twice (the policy's limits, the pace
    # of a new shard's lane); 50 windows, 200 records and their requests add none.
    assert counted.passes <= 3, counted.passes


async def test_sending_early_visits_only_the_shards_that_hold_records(
    counted: type[Passes],
) -> None:
    # A small ``linger_window_bytes``: each window's records make the stream's open
    # containers due early (``send_early``), which once summed and visited every shard.
    fake = FakeKinesis()
    fake.create_stream("s", shard_count=SHARDS)
    results = await write_windows(fake, 20, linger_window_bytes=4)
    assert all(results)
    assert counted.passes <= 3, counted.passes


async def test_a_shard_worker_starts_when_its_shard_first_has_records() -> None:
    fake = FakeKinesis()
    fake.create_stream("s", shard_count=SHARDS)
    keys = keys_on(fake, 3)
    async with fake_producer(fake, metrics_level="none") as producer:
        pipeline = producer._pipeline
        assert pipeline is not None
        assert len(pipeline._workers) == 0  # 2,000 shards, no task yet
        outcomes = [await producer.put(b"x", key) for key in keys]
        await producer.flush()
        assert all(o.result().ok for o in outcomes)
        # the timer sealed and sent them itself: a worker starts only for a batch queued
        assert len(pipeline._workers) <= 3
        # a shard whose records wait for its limiter queues them for its own worker
        many = [await producer.put(b"y" * 1000, keys[0]) for _ in range(3_000)]
        await producer.flush()
        assert all(o.result().ok for o in many)
        assert 1 <= len(pipeline._workers) <= 3
