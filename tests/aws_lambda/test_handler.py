"""The Lambda helper in-process, against the fake: one producer per process, the wait before
returning, what happens to records not confirmed in time, sync and async handlers."""

from __future__ import annotations

import time
from typing import Any

import pytest

from kinesis_trio.aws_lambda import (
    Invocation,
    LambdaProducer,
    RecordsFailedError,
    RecordsNotConfirmedError,
)
from kinesis_trio.testing import FakeKinesis, Faults
from tests.aws_lambda.support import Context, kinesis_event, lambda_producer
from tests.support.helpers import user_data
from tests.support.sync_kit import Gate


@pytest.fixture
def fake() -> FakeKinesis:
    fake = FakeKinesis()
    fake.create_stream("s", shard_count=2)
    return fake


def test_nothing_opens_before_the_first_invocation(fake: FakeKinesis, backend: str) -> None:
    kinesis = lambda_producer(fake, backend)

    @kinesis.handler
    def handler(event: Any, context: Any, records: Invocation) -> str:
        return "ok"

    assert fake.calls == []  # made at module level: no request, no thread
    assert kinesis._sync is None
    assert handler({}, Context()) == "ok"
    kinesis.close()


def test_a_sync_handler_returns_once_its_records_are_written(
    fake: FakeKinesis, backend: str, closing: list[LambdaProducer]
) -> None:
    kinesis = lambda_producer(fake, backend, record_max_buffered_time=30.0)
    closing.append(kinesis)
    seen: list[Invocation] = []

    @kinesis.handler
    def handler(event: Any, context: Any, records: Invocation) -> dict[str, int]:
        seen.append(records)
        for i in range(event["n"]):
            records.put(b"r%d" % i, partition_key=f"k{i}")
        return {"put": event["n"]}

    started = time.monotonic()
    assert handler({"n": 10}, Context()) == {"put": 10}
    # a 30 s linger: only the flush before returning sends them this soon
    assert time.monotonic() - started < 10
    assert len(user_data(fake)) == 10
    report = seen[0].report
    assert report is not None and (report.confirmed, report.unconfirmed) == (10, 0)
    # a second invocation: the same producer, no stream loaded again
    producer = kinesis.producer
    assert handler({"n": 5}, Context()) == {"put": 5}
    assert kinesis.producer is producer
    assert fake.calls.count("ListShards") == 1
    assert len(user_data(fake)) == 15


def test_an_async_handler_runs_on_the_producers_loop(
    fake: FakeKinesis, backend: str, closing: list[LambdaProducer]
) -> None:
    kinesis = lambda_producer(fake, backend)
    closing.append(kinesis)

    @kinesis.handler
    async def handler(event: Any, context: Any, records: Invocation) -> int:
        for i in range(3):
            await records.aput(b"a%d" % i, partition_key="k")
        return 3

    assert handler({}, Context()) == 3
    assert user_data(fake) == [b"a0", b"a1", b"a2"]


def test_records_not_confirmed_in_time_fail_the_invocation(
    backend: str, closing: list[LambdaProducer]
) -> None:
    gate = Gate()
    fake = FakeKinesis(gate)
    fake.create_stream("s", shard_count=1)
    kinesis = lambda_producer(fake, backend, margin=0.5)
    closing.append(kinesis)

    @kinesis.handler
    def handler(event: Any, context: Any, records: Invocation) -> str:
        records.put(b"late", partition_key="k", item="1")
        return "done"

    started = time.monotonic()
    with pytest.raises(RecordsNotConfirmedError) as caught:
        handler(kinesis_event("1"), Context(seconds=0.8))
    # it waited for the time left less the margin, not for the record
    assert 0.2 <= time.monotonic() - started < 5
    assert caught.value.report.unconfirmed == 1
    assert caught.value.report.unconfirmed_items == {"1"}
    gate.opened.set()


def test_records_not_confirmed_in_time_may_be_returned_and_go_on(
    backend: str, closing: list[LambdaProducer]
) -> None:
    gate = Gate()
    fake = FakeKinesis(gate)
    fake.create_stream("s", shard_count=1)
    kinesis = lambda_producer(fake, backend, margin=0.5, unconfirmed="return")
    closing.append(kinesis)
    futures = []

    @kinesis.handler
    def handler(event: Any, context: Any, records: Invocation) -> str:
        if event.get("put"):
            futures.append(records.put(b"late", partition_key="k"))
        return "done"

    assert handler({"put": True}, Context(seconds=0.8)) == "done"
    assert not futures[0].done() and fake.records("s") == []
    gate.opened.set()
    assert handler({}, Context()) == "done"
    assert futures[0].result(timeout=30).ok
    assert user_data(fake) == [b"late"]


def test_a_record_failed_for_good_fails_an_invocation_without_a_batch(
    backend: str, closing: list[LambdaProducer]
) -> None:
    fake = FakeKinesis()
    fake.create_stream("s", shard_count=1)
    fake.create_stream("audit", shard_count=1)
    fake.faults = Faults(fatal={"audit": "AccessDeniedException"})
    kinesis = lambda_producer(fake, backend)
    closing.append(kinesis)

    @kinesis.handler
    def handler(event: Any, context: Any, records: Invocation) -> str:
        records.put(b"ok", partition_key="k")
        records.put(b"denied", partition_key="k", stream_name="audit")
        return "done"

    with pytest.raises(RecordsFailedError) as caught:
        handler({}, Context())
    assert caught.value.report.confirmed == 1
    assert [r.error_code for r in caught.value.report.failed] == ["AccessDeniedException"]


def test_arguments_are_checked_when_made() -> None:
    with pytest.raises(ValueError, match="unconfirmed"):
        LambdaProducer("s", unconfirmed="later")
    with pytest.raises(ValueError, match="margin"):
        LambdaProducer("s", margin=-1)
