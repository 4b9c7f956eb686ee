"""Waiting on an Outcome: each waiter is woken by the record's resolution, a cancelled
waiter changes nothing for the record or for the other waiters, and the record keeps
nothing of a waiter that left (issue 66: one object per waiting record, not an event)."""

from __future__ import annotations

from typing import Any

import anyio
import httpx
import pytest

from kinesis_trio.testing import FakeKinesis
from tests.support.helpers import fake_producer

pytestmark = pytest.mark.anyio


def held_fake() -> tuple[FakeKinesis, anyio.Event]:
    """A fake whose PutRecords answers only once the returned event is set."""
    release = anyio.Event()

    async def hold(operation: str, body: dict[str, Any]) -> httpx.Response | None:
        if operation == "PutRecords":
            await release.wait()
        return None

    fake = FakeKinesis(hook=hold)
    fake.create_stream("s", 1)
    return fake, release


async def test_every_waiter_wakes_and_a_cancelled_one_changes_nothing() -> None:
    fake, release = held_fake()
    woken: list[str] = []
    async with fake_producer(fake, record_max_buffered_time=0.001) as producer:
        outcome = await producer.put(b"x", "k")

        async def waiter(name: str) -> None:
            result = await outcome.wait()
            assert result.ok
            woken.append(name)

        async with anyio.create_task_group() as tg:
            tg.start_soon(waiter, "first")
            tg.start_soon(waiter, "second")
            second = anyio.CancelScope()

            async def cancelled_waiter() -> None:
                with second:
                    await outcome.wait()
                    woken.append("cancelled")

            tg.start_soon(cancelled_waiter)
            tg.start_soon(waiter, "third")
            await anyio.wait_all_tasks_blocked()
            assert not outcome.done() and woken == []
            second.cancel()
            await anyio.wait_all_tasks_blocked()
            release.set()
        assert outcome.result().ok
    assert sorted(woken) == ["first", "second", "third"]


async def test_a_waiter_cancelled_alone_leaves_the_record_as_it_was() -> None:
    fake, release = held_fake()
    async with fake_producer(fake, record_max_buffered_time=0.001) as producer:
        outcome = await producer.put(b"x", "k")
        with anyio.move_on_after(0.02) as scope:
            await outcome.wait()
        assert scope.cancelled_caught
        assert outcome.waker is None, "the record keeps nothing of a waiter that left"
        release.set()
        # a waiter after the cancelled one is woken as the first would have been
        assert (await outcome.wait()).ok
        assert outcome.waker is None or outcome.done()


async def test_a_resolved_outcome_answers_at_once() -> None:
    fake = FakeKinesis()
    fake.create_stream("s", 1)
    async with fake_producer(fake, record_max_buffered_time=0.001) as producer:
        outcome = await producer.put(b"x", "k")
        assert (await outcome.wait()).ok
        with anyio.CancelScope() as scope:
            scope.cancel()
            # resolved: no checkpoint, so the cancelled scope does not interrupt it
            assert (await outcome.wait()).ok
