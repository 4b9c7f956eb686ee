"""Random cancellation of putters, waiters and the whole producer scope.

Invariants: every accepted record is resolved exactly once; a put cancelled while it waited
accepted nothing (its record never reaches the stream); no outcome says ok for a record that
is not in the stream.
"""

from __future__ import annotations

import random
from typing import Any

import anyio
import anyio.lowlevel
import httpx
import pytest

from kinesis_trio import Outcome, deaggregate
from kinesis_trio.testing import FakeKinesis
from tests.support.helpers import fake_producer, throttle_response

pytestmark = pytest.mark.anyio


def written(fake: FakeKinesis) -> list[bytes]:
    return [
        user.data
        for record in fake.records("s")
        for user in deaggregate(
            record.data, record.partition_key, explicit_hash_key=record.explicit_hash_key
        )
    ]


def chaos_hook(rng: random.Random) -> Any:
    async def hook(operation: str, body: dict[str, Any]) -> httpx.Response | None:
        if operation != "PutRecords":
            return None
        await anyio.sleep(rng.uniform(0, 0.01))
        roll = rng.random()
        if roll < 0.15:
            return throttle_response(body)
        if roll < 0.2:
            return httpx.Response(500, json={"__type": "InternalFailure"})
        return None

    return hook


@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_random_cancellation_of_putters_and_waiters(
    seed: int, double_resolutions: list[Outcome]
) -> None:
    rng = random.Random(seed)
    fake = FakeKinesis(hook=chaos_hook(rng))
    fake.create_stream("s", 3)
    accepted: dict[bytes, Outcome] = {}
    cancelled_puts: list[bytes] = []
    async with fake_producer(
        fake,
        max_outstanding_records=40,
        record_max_buffered_time=0.005,
        retry_backoff_base=0.002,
        retry_backoff_max=0.02,
    ) as producer:

        async def putter(worker: int) -> None:
            for i in range(150):
                data = b"w%d-%d" % (worker, i)
                with anyio.move_on_after(rng.choice([0.0005, 0.002, 1.0])):
                    accepted[data] = await producer.put(data, f"k{rng.randrange(50)}")
                if data not in accepted:
                    cancelled_puts.append(data)

        async def waiter() -> None:
            for _ in range(300):
                if accepted:
                    outcome = rng.choice(list(accepted.values()))
                    with anyio.move_on_after(rng.uniform(0, 0.003)):
                        await outcome.wait()
                await anyio.sleep(0.0005)

        async with anyio.create_task_group() as tg:
            for w in range(6):
                tg.start_soon(putter, w)
            for _ in range(3):
                tg.start_soon(waiter)
    assert cancelled_puts, "the scenario should cancel some blocked puts"
    assert accepted
    assert all(o.done() for o in accepted.values())
    assert double_resolutions == []
    in_stream = written(fake)
    assert len(in_stream) == len(set(in_stream)), "no duplicates without ambiguous failures"
    assert not set(cancelled_puts) & set(in_stream), "a cancelled put reached the stream"
    for data, outcome in accepted.items():
        assert outcome.result().ok == (data in in_stream), outcome.result()


@pytest.mark.parametrize("seed", [4, 5, 6, 7])
async def test_cancelling_the_producer_scope_at_a_random_moment(
    seed: int, double_resolutions: list[Outcome]
) -> None:
    rng = random.Random(seed)
    fake = FakeKinesis(hook=chaos_hook(rng))
    fake.create_stream("s", 3)
    accepted: dict[bytes, Outcome] = {}
    with anyio.CancelScope() as scope:
        async with fake_producer(
            fake, max_outstanding_records=60, record_max_buffered_time=0.005
        ) as producer:
            # the random moment counts from when the producer is open (opening it can take
            # longer than the window on a loaded machine)
            scope.deadline = anyio.current_time() + rng.uniform(0.005, 0.08)
            for i in range(100_000):
                data = b"r%d" % i
                accepted[data] = await producer.put(data, f"k{i % 40}")
                if i % 10 == 0:
                    await anyio.lowlevel.checkpoint()
    assert scope.cancelled_caught
    assert accepted and all(o.done() for o in accepted.values())
    assert double_resolutions == []
    in_stream = set(written(fake))
    codes = {o.result().error_code for o in accepted.values() if not o.result().ok}
    assert codes <= {"ProducerAborted"}
    for data, outcome in accepted.items():
        if outcome.result().ok:
            assert data in in_stream  # never ok for a record that is not written
