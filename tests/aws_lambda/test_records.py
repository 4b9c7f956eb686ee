"""Typed input items (``records.typed()``, ``process(fn, typed=True)``) on the Lambda
documentation's sample events of each source, beside Powertools' data classes
(``aws_lambda_powertools.utilities.data_classes``): the same values for the same event."""

from __future__ import annotations

import base64
import sys
from collections.abc import Iterator
from decimal import Decimal
from typing import Any

import pytest
from aws_lambda_powertools.utilities.data_classes import (
    DynamoDBStreamEvent,
    KinesisStreamEvent,
    SQSEvent,
)

from kinesis_trio.aws_lambda import (
    DynamoDBRecord,
    Invocation,
    KinesisRecord,
    LambdaProducer,
    Record,
    SqsMessage,
    _records,
    typed,
)
from kinesis_trio.testing import FakeKinesis
from tests.aws_lambda import events
from tests.aws_lambda.support import Context, lambda_producer
from tests.support.helpers import user_data


def test_kinesis_records_agree_with_powertools() -> None:
    event = events.kinesis()
    theirs: list[Any] = list(KinesisStreamEvent(event).records)
    ours = [typed(r) for r in event["Records"]]
    assert [type(r) for r in ours] == [KinesisRecord, KinesisRecord]
    first = ours[0]
    assert isinstance(first, KinesisRecord) and first.data == b"Hello, this is a test."
    for mine, their in zip(ours, theirs, strict=True):
        assert isinstance(mine, KinesisRecord)
        assert mine.data == their.kinesis.data_as_bytes()
        assert mine.partition_key == their.kinesis.partition_key
        assert mine.sequence_number == their.kinesis.sequence_number == mine.item
        assert mine.arrival_time == their.kinesis.approximate_arrival_timestamp
        assert mine.event_id == their.event_id
        assert mine.event_source_arn == their.event_source_arn
        assert mine.shard_id == "shardId-000000000006"
        assert mine.raw is their.raw_event


@pytest.mark.parametrize("make", [events.sqs, events.sqs_fifo])
def test_sqs_messages_agree_with_powertools(make: Any) -> None:
    event = make()
    theirs: list[Any] = list(SQSEvent(event).records)
    for raw, their in zip(event["Records"], theirs, strict=True):
        mine = typed(raw)
        assert isinstance(mine, SqsMessage)
        assert mine.message_id == their.message_id == mine.item
        assert mine.body == their.body
        assert mine.receipt_handle == their.receipt_handle
        assert mine.event_source_arn == their.event_source_arn
        assert mine.group_id == their.attributes.message_group_id
        assert mine.deduplication_id == their.attributes.message_deduplication_id
        assert mine.attributes["SentTimestamp"] == their.attributes.sent_timestamp
        for name, value in mine.message_attributes.items():
            assert value["stringValue"] == their.message_attributes[name].string_value
    fifo = typed(events.sqs_fifo()["Records"][0])
    assert isinstance(fifo, SqsMessage) and fifo.group_id == "1"
    plain = typed(events.sqs()["Records"][0])
    assert isinstance(plain, SqsMessage) and plain.group_id is None
    assert plain.message_attributes["myAttribute"]["stringValue"] == "myValue"


def test_dynamodb_images_agree_with_powertools() -> None:
    """The same values, but where Powertools leaves a binary attribute as the event's
    base64 text, ours is boto3's ``Binary`` of its bytes; an image the record has not is
    None here ({} there)."""
    event = events.dynamodb()
    theirs: list[Any] = list(DynamoDBStreamEvent(event).records)
    for raw, their in zip(event["Records"], theirs, strict=True):
        mine = typed(raw)
        assert isinstance(mine, DynamoDBRecord)
        assert mine.sequence_number == their.dynamodb.sequence_number == mine.item
        assert mine.event_name == their.event_name.name
        assert mine.event_id == their.event_id
        assert mine.size_bytes == their.dynamodb.size_bytes
        assert mine.stream_view_type == their.dynamodb.stream_view_type.name
        assert mine.arrival_time == their.dynamodb.approximate_creation_date_time
        for ours, image in (
            (mine.keys, their.dynamodb.keys),
            (mine.new_image, their.dynamodb.new_image),
            (mine.old_image, their.dynamodb.old_image),
        ):
            assert _text_binaries(ours or {}) == image
    insert, _, remove, every = (typed(r) for r in event["Records"])
    assert isinstance(insert, DynamoDBRecord) and isinstance(remove, DynamoDBRecord)
    assert insert.keys == {"Id": Decimal(101)}
    assert insert.new_image == {"Message": "New item!", "Id": Decimal(101)}
    assert insert.old_image is None and remove.new_image is None
    assert remove.raw_old_image == {"Message": {"S": "This item has changed"}, "Id": {"N": "101"}}
    assert isinstance(every, DynamoDBRecord)
    image = every.new_image
    assert image is not None
    assert image["Sort"] == b"\x00\x01\x02" and image["Blobs"] == {b"\x00", b"\x01"}
    assert image["Count"] == Decimal("-12500") and image["Nothing"] is None
    assert image["List"] == ["x", Decimal(1), {"k": "v"}]


def _text_binaries(value: Any) -> Any:
    """Our values with each binary as base64 text, as Powertools gives it."""
    from boto3.dynamodb.types import Binary

    if isinstance(value, Binary):
        return base64.b64encode(value.value).decode()
    if isinstance(value, dict):
        return {k: _text_binaries(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_text_binaries(v) for v in value]
    if isinstance(value, set):
        return {_text_binaries(v) for v in value}
    return value


def test_records_are_immutable_and_lazy() -> None:
    record = typed(events.kinesis()["Records"][0])
    assert isinstance(record, KinesisRecord)
    assert not hasattr(record, "__dict__")
    with pytest.raises(AttributeError):
        record.item = "x"
    assert not hasattr(record, "_data")  # nothing decoded yet
    assert record.data == b"Hello, this is a test." and hasattr(record, "_data")
    dynamo = typed(events.dynamodb()["Records"][1])
    assert isinstance(dynamo, DynamoDBRecord)
    image = dynamo.new_image
    assert image is not None
    image["Message"] = "changed"  # a copy: the record's stays
    assert dynamo.new_image == {"Message": "This item has changed", "Id": Decimal(101)}
    assert repr(dynamo) == "DynamoDBRecord(item='4421584500000000017450439092')"


@pytest.fixture
def no_boto3(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setitem(sys.modules, "boto3.dynamodb.types", None)
    monkeypatch.setattr(_records, "_TYPES", {})
    yield


@pytest.mark.usefixtures("no_boto3")
def test_without_boto3_an_image_read_says_what_to_install() -> None:
    record = typed(events.dynamodb()["Records"][0])
    assert isinstance(record, DynamoDBRecord)
    assert record.sequence_number == "4421584500000000017450439091"
    assert record.raw_new_image == {"Message": {"S": "New item!"}, "Id": {"N": "101"}}
    with pytest.raises(ImportError, match=r"install boto3.*raw_new_image"):
        record.new_image  # noqa: B018


def test_typed_rejects_other_events() -> None:
    with pytest.raises(ValueError, match="eventSource"):
        typed({"eventSource": "aws:s3"})


@pytest.mark.parametrize("source", ["kinesis", "sqs", "dynamodb"])
def test_process_typed_passes_typed_records_to_each_scope(source: str, backend: str) -> None:
    """``records.typed()`` and ``process(fn, typed=True)`` / ``aprocess``: each item's
    typed record, in its scope (the second item fails alone); ``process(fn)`` without it
    still passes the event's dict."""
    event = getattr(events, source)()
    second = typed(event["Records"][1]).item
    fake = FakeKinesis()
    fake.create_stream("s", shard_count=1)
    kinesis: LambdaProducer = lambda_producer(fake, backend, batch=True)

    def text(record: Record) -> bytes:
        if isinstance(record, KinesisRecord):
            return record.data
        if isinstance(record, SqsMessage):
            return record.message_id.encode()
        keys = record.keys
        assert keys is not None
        return str(keys["Id"]).encode() + record.item.encode()

    @kinesis.handler
    def handler(event: Any, context: Any, records: Invocation) -> None:
        assert [r.item for r in records.typed()] == [i for i, _ in records.items()]
        assert records.typed()[0] is records.typed()[0]  # made once

        def one(record: Record) -> None:
            if record.item == second:
                raise ValueError("bad")
            records.put(text(record), partition_key="k")

        records.process(one, typed=True)
        records.process(lambda raw: seen.append(type(raw)))

    @kinesis.handler
    async def ahandler(event: Any, context: Any, records: Invocation) -> None:
        async def one(record: Record) -> None:
            if record.item == second:
                raise ValueError("bad")
            await records.aput(text(record), partition_key="k")

        await records.aprocess(one, typed=True)

    seen: list[type] = []
    try:
        want = {"batchItemFailures": [{"itemIdentifier": second}]}
        assert handler(event, Context()) == want
        assert ahandler(event, Context()) == want
        expected = [text(typed(r)) for r in event["Records"] if typed(r).item != second]
        assert sorted(user_data(fake)) == sorted(expected * 2)
        assert seen == [dict] * len(event["Records"])
    finally:
        kinesis.close()
