"""Dead letters: every failed record reaches ``Producer.failures()`` once, with its data.

End to end against the in-memory fake, on Trio (virtual time) and asyncio.
"""

from __future__ import annotations

import base64
import logging
from typing import Any

import anyio
import httpx
import pytest

from kinesis_trio import FailedRecord, Outcome, Producer
from kinesis_trio.testing import FakeKinesis, Faults
from tests.support.helpers import (
    check_landed,
    error_response,
    fake_producer,
    fake_rows,
    throttle_response,
)

pytestmark = [pytest.mark.anyio, pytest.mark.virtual_time]


Sent = dict[bytes, tuple[str, str | None, Outcome]]


async def collect(producer: Producer, into: list[FailedRecord]) -> None:
    async for record in producer.failures():
        into.append(record)


def check_failures(sent: Sent, got: list[FailedRecord]) -> int:
    """Each failed outcome has exactly one FailedRecord, equal to what was put, with the
    outcome's result; no ok outcome has one. Returns how many failed."""
    by_data: dict[bytes, FailedRecord] = {}
    for record in got:
        assert record.data not in by_data, "a failed record was delivered twice"
        by_data[record.data] = record
    failed = 0
    for data, (pk, ehk, outcome) in sent.items():
        result = outcome.result()
        if result.ok:
            assert data not in by_data, "an ok record was delivered as failed"
            continue
        failed += 1
        record = by_data.pop(data)
        assert record == FailedRecord(data, pk, ehk, "s", result)
        assert record.result.attempts == result.attempts
    assert not by_data, "a failed record that was never put"
    return failed


async def test_every_failed_record_arrives_once_with_its_data_and_attempts() -> None:
    """A mix of retried and failed entries, aggregated and not: every failure (a throttled
    aggregate fails all its members) arrives once, with the data it was put with."""
    # Besides the random faults, the request that first holds record-0 gets a 500 and the
    # next one that holds it a throttle: a failed record retried first, whatever the timing.
    seen_first = 0

    async def hook(operation: str, body: dict[str, Any]) -> httpx.Response | None:
        nonlocal seen_first
        if operation != "PutRecords" or seen_first >= 2:
            return None
        if any(b"record-0" in base64.b64decode(e["Data"]) for e in body["Records"]):
            seen_first += 1
            if seen_first == 1:
                return error_response(500, "InternalFailure")
            return throttle_response(body)
        return None

    fake = FakeKinesis(hook=hook)
    fake.create_stream("s", 4)
    fake.faults = Faults(throttle_entries=0.15, internal_failure_entries=0.1, http_500=0.05, seed=3)
    sent: Sent = {}
    got: list[FailedRecord] = []
    async with (
        anyio.create_task_group() as tg,
        fake_producer(
            fake, fail_if_throttled=True, record_max_buffered_time=0.05, aggregation_max_count=10
        ) as producer,
    ):
        tg.start_soon(collect, producer, got)
        for i in range(1500):
            if i % 20 == 0:
                await anyio.sleep(0.01)
            data = b"record-%d" % i
            pk = f"k{i % 37}"
            ehk = str(i * 7919 % 2**128) if i % 10 == 0 else None
            sent[data] = (pk, ehk, await producer.put(data, pk, ehk))
        await producer.flush()
    failed = check_failures(sent, got)
    assert 0 < failed < len(sent)
    assert all(r.result.error_code == "ProvisionedThroughputExceededException" for r in got)
    # retried, then throttled (record-0 at least)
    assert any(len(r.result.attempts) > 1 for r in got if r.data == b"record-0")
    assert producer.failures_dropped == 0
    ok = [(d, pk, ehk, o) for d, (pk, ehk, o) in sent.items() if o.result().ok]
    check_landed(fake_rows(fake), ok)
    # nothing is kept for the records once resolved: no data, no aggregate
    assert all(o.data is None and o.agg is None for _, _, o in sent.values())


async def test_a_failed_request_of_aggregates_gives_each_member_its_data() -> None:
    """A whole request failing (AccessDenied) fails sealed aggregates: the members' data
    comes back out of the aggregate."""

    async def hook(operation: str, body: dict[str, Any]) -> httpx.Response | None:
        return (
            throttle_response(body, "AccessDeniedException") if operation == "PutRecords" else None
        )

    fake = FakeKinesis(hook=hook)
    fake.create_stream("s", 2)
    sent: Sent = {}
    got: list[FailedRecord] = []
    async with fake_producer(fake) as producer:
        for i in range(300):
            data = bytes([i % 251]) * (i % 17) + b"#%d" % i
            sent[data] = (f"key-{i % 5}", None, await producer.put(data, f"key-{i % 5}"))
        await producer.flush()
    got = [r async for r in producer.failures()]
    assert check_failures(sent, got) == 300
    assert len(fake.calls) > 0 and producer.failures_dropped == 0


async def test_records_failed_by_the_close_arrive_and_iteration_ends() -> None:
    """Never answered: the close fails every record (ProducerCloseTimeout); a consumer
    started before the producer gets them all and its loop ends after the close."""
    fake = FakeKinesis()
    fake.create_stream("s", 2)
    fake.faults = Faults(hang_before=1.0)
    producer = fake_producer(fake, close_timeout=2.0, request_timeout=600.0)
    got: list[FailedRecord] = []
    ended = anyio.Event()

    async def consume() -> None:
        await collect(producer, got)
        ended.set()

    sent: Sent = {}
    async with anyio.create_task_group() as tg:
        tg.start_soon(consume)  # before the producer is entered: it waits
        async with producer:
            for i in range(50):
                data = b"%d" % i
                sent[data] = (f"k{i}", None, await producer.put(data, f"k{i}"))
        with anyio.fail_after(5):
            await ended.wait()
    assert check_failures(sent, got) == 50
    assert {r.result.error_code for r in got} == {"ProducerCloseTimeout"}
    # sealed aggregates in flight: each attempt marks the request that never came back
    assert all(r.result.possible_duplicate for r in got)


async def test_records_failed_by_a_cancellation_arrive() -> None:
    fake = FakeKinesis()
    fake.create_stream("s", 1)
    fake.faults = Faults(hang_before=1.0)
    producer = fake_producer(fake, request_timeout=600.0, record_max_buffered_time=5.0)
    sent: Sent = {}
    with anyio.CancelScope() as scope:
        async with producer:
            for i in range(20):
                data = b"%d" % i
                sent[data] = (f"k{i}", None, await producer.put(data, f"k{i}"))
            # cancelled once every put is in (a deadline set before them could pass first
            # on a busy machine), while the records still linger
            scope.deadline = anyio.current_time() + 1.0
            await anyio.sleep_forever()
    got = [r async for r in producer.failures()]  # after the close: what is left, then ends
    assert check_failures(sent, got) == 20
    assert {r.result.error_code for r in got} == {"ProducerAborted"}
    assert not [r async for r in producer.failures()]  # taken: a new iterator ends at once


async def test_a_full_buffer_drops_the_newest_counts_and_logs_without_blocking(
    caplog: pytest.LogCaptureFixture,
) -> None:
    fake = FakeKinesis()
    fake.create_stream("s", 1)
    fake.faults = Faults(fatal={"s": "AccessDeniedException"})
    sent: list[bytes] = []
    with caplog.at_level(logging.WARNING, logger="kinesis_trio"):
        with anyio.fail_after(30):  # nobody drains: the producer must never wait for it
            async with fake_producer(
                fake,
                failures_buffer_records=5,
                aggregation_enabled=False,
                record_max_buffered_time=0.01,
            ) as producer:
                for i in range(100):
                    sent.append(b"%03d" % i)
                    outcome = await producer.put(sent[-1], "k")
                    await outcome.wait()  # one request each: they fail in this order
                assert producer.failures_dropped == 95
                assert producer.metrics.totals()["FailedRecordsDropped"] == 95
    got = [r async for r in producer.failures()]
    assert [r.data for r in got] == sent[:5]  # the first ones were kept, the newest dropped
    notices = [r.getMessage() for r in caplog.records if "failed_records_dropped" in r.getMessage()]
    # rate-limited: the first drop at once, the rest in one line at the close
    assert len(notices) == 2, notices
    assert "records=1 " in notices[0] and "records=94 " in notices[1]
    assert all("stream='s'" in n for n in notices)


async def test_several_consumers_share_the_failures() -> None:
    fake = FakeKinesis()
    fake.create_stream("s", 2)
    fake.faults = Faults(fatal={"s": "AccessDeniedException"})
    firsts: list[FailedRecord] = []
    seconds: list[FailedRecord] = []
    sent: Sent = {}
    producer = fake_producer(fake, record_max_buffered_time=0.01)
    async with anyio.create_task_group() as tg, producer:
        tg.start_soon(collect, producer, firsts)
        tg.start_soon(collect, producer, seconds)
        for i in range(200):
            data = b"%d" % i
            sent[data] = (f"k{i}", None, await producer.put(data, f"k{i}"))
            if i % 50 == 0:
                await producer.flush()
    assert check_failures(sent, firsts + seconds) == 200


async def test_ok_records_never_arrive_and_an_idle_iterator_ends_at_close() -> None:
    fake = FakeKinesis()
    fake.create_stream("s", 2)
    got: list[FailedRecord] = []
    with anyio.fail_after(10):  # the consumer's loop ends with the producer
        async with anyio.create_task_group() as tg, fake_producer(fake) as producer:
            tg.start_soon(collect, producer, got)
            outcomes = [await producer.put(b"x%d" % i, f"k{i}") for i in range(500)]
            await producer.flush()
    assert all(o.result().ok for o in outcomes)
    assert got == []


async def test_cancelling_a_waiting_consumer_loses_nothing() -> None:
    fake = FakeKinesis()
    fake.create_stream("s", 1)
    fake.faults = Faults(fatal={"s": "AccessDeniedException"})
    async with fake_producer(fake, record_max_buffered_time=0.01) as producer:
        iterator = producer.failures()
        with anyio.move_on_after(0.5):
            await iterator.__anext__()  # nothing failed yet: cancelled while waiting
        outcome = await producer.put(b"late", "k")
        await outcome.wait()
        record = await iterator.__anext__()
    assert record.data == b"late"
    assert [r async for r in iterator] == []


async def test_a_waiting_consumer_gets_each_failure_as_it_happens() -> None:
    fake = FakeKinesis()
    fake.create_stream("s", 1)
    fake.faults = Faults(fatal={"s": "AccessDeniedException"})
    async with fake_producer(fake, record_max_buffered_time=0.01) as producer:
        received = anyio.Event()
        got: list[FailedRecord] = []

        async def first() -> None:
            got.append(await producer.failures().__anext__())
            received.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(first)
            await anyio.sleep(1.0)  # the consumer is waiting: nothing failed yet
            await producer.put(b"now", "k")
            with anyio.fail_after(5):
                await received.wait()  # while the producer is open
        assert [r.data for r in got] == [b"now"]
        assert got[0].result.error_code == "AccessDeniedException"
