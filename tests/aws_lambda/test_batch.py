"""Partial batch responses: the item identifier of each source, and the answer the helper
builds from the records that failed for good (Kinesis, SQS, DynamoDB streams)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from kinesis_trio.aws_lambda import Invocation, batch_response, items
from kinesis_trio.testing import FakeKinesis, Faults
from tests.aws_lambda.support import (
    Context,
    dynamodb_event,
    kinesis_event,
    lambda_producer,
    sqs_event,
)
from tests.support.helpers import user_data

EVENTS: list[Callable[..., dict[str, Any]]] = [kinesis_event, sqs_event, dynamodb_event]


@pytest.mark.parametrize("make", EVENTS)
def test_the_item_identifier_of_each_source(make: Callable[..., dict[str, Any]]) -> None:
    event = make("101", "102")
    assert [i for i, _ in items(event)] == ["101", "102"]
    assert items({"Records": []}) == []


def test_other_events_are_refused() -> None:
    with pytest.raises(ValueError, match="no 'Records'"):
        items({"body": "x"})
    with pytest.raises(ValueError, match="aws:s3"):
        items({"Records": [{"eventSource": "aws:s3"}]})


def test_the_answer_names_each_failed_item_once_in_batch_order() -> None:
    assert batch_response(["3", "1", "3"], order=["1", "2", "3"]) == {
        "batchItemFailures": [{"itemIdentifier": "1"}, {"itemIdentifier": "3"}]
    }
    assert batch_response([]) == {"batchItemFailures": []}


@pytest.mark.parametrize("backend", ["trio", "asyncio"])
@pytest.mark.parametrize("make", EVENTS)
def test_the_helper_answers_with_the_items_whose_records_failed(
    make: Callable[..., dict[str, Any]], backend: str
) -> None:
    """Item 2's records go to a stream that denies writes; item 3 the handler fails itself;
    item 1's record is written: the answer names 2 and 3, the stream holds item 1's."""
    fake = FakeKinesis()
    fake.create_stream("s", shard_count=1)
    fake.create_stream("audit", shard_count=1)
    fake.faults = Faults(fatal={"audit": "AccessDeniedException"})
    kinesis = lambda_producer(fake, backend, batch=True)

    @kinesis.handler
    def handler(event: Any, context: Any, records: Invocation) -> None:
        for item, _ in records.items():
            if item == "3":
                records.fail_item(item)
                continue
            stream = "audit" if item == "2" else None
            records.put(item.encode(), partition_key=item, item=item, stream_name=stream)

    try:
        answer = handler(make("1", "2", "3"), Context())
    finally:
        kinesis.close()
    assert answer == {"batchItemFailures": [{"itemIdentifier": "2"}, {"itemIdentifier": "3"}]}
    assert user_data(fake) == [b"1"]


@pytest.mark.parametrize("backend", ["trio", "asyncio"])
def test_an_async_handlers_own_failures_are_merged(backend: str) -> None:
    fake = FakeKinesis()
    fake.create_stream("s", shard_count=1)
    kinesis = lambda_producer(fake, backend, batch=True)

    @kinesis.handler
    async def handler(event: Any, context: Any, records: Invocation) -> dict[str, Any]:
        for item, _ in records.items():
            await records.aput(item.encode(), partition_key=item, item=item)
        return {"batchItemFailures": [{"itemIdentifier": "b"}]}

    try:
        answer = handler(sqs_event("a", "b"), Context())
    finally:
        kinesis.close()
    assert answer == {"batchItemFailures": [{"itemIdentifier": "b"}]}
    assert user_data(fake) == [b"a", b"b"]
