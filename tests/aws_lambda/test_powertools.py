"""The helper's partial batch responses beside Powertools for AWS Lambda's (a dev
dependency): the same batch, the same items failing in the handler, the same answer.
``process_partial_response`` with ``BatchProcessor`` for Kinesis, SQS and DynamoDB
streams; with ``SqsFifoPartialProcessor`` for SQS FIFO (``batch="fifo"``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pytest
from aws_lambda_powertools.utilities.batch import (
    BatchProcessor,
    EventType,
    SqsFifoPartialProcessor,
    process_partial_response,
)

from kinesis_trio.aws_lambda import Invocation
from kinesis_trio.aws_lambda._batch import items
from kinesis_trio.testing import FakeKinesis
from tests.aws_lambda.support import (
    Context,
    dynamodb_event,
    kinesis_event,
    lambda_producer,
    sqs_event,
)

SOURCES: dict[str, tuple[Callable[..., dict[str, Any]], EventType]] = {
    "kinesis": (kinesis_event, EventType.KinesisDataStreams),
    "sqs": (sqs_event, EventType.SQS),
    "dynamodb": (dynamodb_event, EventType.DynamoDBStreams),
}
ITEMS = ("1", "2", "3", "4", "5")


def _ours(event: dict[str, Any], failing: set[str], backend: str, batch: bool | str) -> Any:
    fake = FakeKinesis()
    fake.create_stream("s", shard_count=1)
    kinesis = lambda_producer(fake, backend, batch=batch)
    ids = {id(record): item for item, record in items(event)}

    @kinesis.handler
    def handler(event: Any, context: Any, records: Invocation) -> None:
        def one(record: Mapping[str, Any]) -> None:
            item = ids[id(record)]
            if item in failing:
                raise ValueError(f"bad {item}")
            records.put(item.encode(), partition_key=item)

        records.process(one)

    try:
        return handler(event, Context())
    finally:
        kinesis.close()


def _powertools(event: dict[str, Any], failing: set[str], processor: Any) -> Any:
    ids = {id(record): item for item, record in items(event)}

    def one(record: Any) -> None:
        if ids[id(record.raw_event)] in failing:
            raise ValueError("bad")

    return process_partial_response(event, one, processor)


@pytest.mark.parametrize("failing", [{"2", "4"}, {"1"}, set()])
@pytest.mark.parametrize("source", list(SOURCES))
def test_the_same_answer_as_powertools(source: str, failing: set[str], backend: str) -> None:
    make, kind = SOURCES[source]
    event = make(*ITEMS)
    theirs = _powertools(event, failing, BatchProcessor(event_type=kind))
    assert _ours(event, failing, backend, True) == theirs


@pytest.mark.parametrize("failing", [{"2"}, {"4", "2"}, {"5"}, set()])
def test_the_same_fifo_answer_as_powertools(failing: set[str], backend: str) -> None:
    event = sqs_event(*ITEMS)
    theirs = _powertools(event, failing, SqsFifoPartialProcessor())
    assert _ours(event, failing, backend, "fifo") == theirs
