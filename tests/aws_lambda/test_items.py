"""Every failure while an item is processed is that item's: the helper in-process against
the fake (item scopes, ``process`` and ``aprocess``, SQS FIFO, what is logged, what still
fails the invocation). The rule itself: ``test_verdict.py``."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import pytest

from kinesis_trio.aws_lambda import (
    Invocation,
    ItemSkippedError,
    LambdaProducer,
    RecordsFailedError,
)
from kinesis_trio.testing import FakeKinesis, Faults
from tests.aws_lambda.support import Context, lambda_producer, sqs_event
from tests.support.helpers import user_data


@pytest.fixture
def fake() -> FakeKinesis:
    fake = FakeKinesis()
    fake.create_stream("s", shard_count=1)
    return fake


def _made(
    fake: FakeKinesis, backend: str, closing: list[LambdaProducer], **options: Any
) -> LambdaProducer:
    kinesis = lambda_producer(fake, backend, **options)
    closing.append(kinesis)
    return kinesis


def test_each_failure_in_a_scope_is_its_items(
    fake: FakeKinesis, backend: str, closing: list[LambdaProducer], caplog: pytest.LogCaptureFixture
) -> None:
    """b: a put that raises (empty key); c: the handler raises; d: a stream that does not
    exist (its future ends in an exception); e: a record refused for good. a's and f's are
    written; each failed item is logged once, with the call."""
    fake.create_stream("audit", shard_count=1)
    fake.faults = Faults(fatal={"audit": "AccessDeniedException"})
    kinesis = _made(fake, backend, closing, batch=True)

    @kinesis.handler
    def handler(event: Any, context: Any, records: Invocation) -> None:
        for item, _ in records.items():
            with records.item(item):
                if item == "c":
                    raise RuntimeError("cannot use c")
                key = "" if item == "b" else item
                stream = {"d": "missing", "e": "audit"}.get(item)
                records.put(item.encode(), partition_key=key, stream_name=stream)

    with caplog.at_level(logging.WARNING, logger="kinesis_trio.aws_lambda"):
        answer = handler(sqs_event("a", "b", "c", "d", "e", "f"), Context())
    assert answer == {"batchItemFailures": [{"itemIdentifier": i} for i in "bcde"]}
    assert user_data(fake) == [b"a", b"f"]
    logged = [r.getMessage() for r in caplog.records if "lambda_item_failed" in r.getMessage()]
    assert len(logged) == 4
    by_item = {i: [m for m in logged if f"item='{i}'" in m] for i in "bcde"}
    assert all(len(m) == 1 for m in by_item.values()), logged
    assert "ValueError" in by_item["b"][0] and "with records.item('b')" in by_item["b"][0]
    assert "cannot use c" in by_item["c"][0]
    assert "records.put(stream_name='missing')" in by_item["d"][0]
    assert "AccessDeniedException" in by_item["e"][0]


def test_process_and_aprocess(
    fake: FakeKinesis, backend: str, closing: list[LambdaProducer]
) -> None:
    sync = _made(fake, backend, closing, batch=True)

    def one(records: Invocation, record: Mapping[str, Any]) -> None:
        if record["body"] == "b":
            raise ValueError("bad b")
        records.put(record["body"].encode(), partition_key="k")

    @sync.handler
    def handler(event: Any, context: Any, records: Invocation) -> None:
        records.process(lambda record: one(records, record))

    assert handler(sqs_event("a", "b", "c"), Context()) == {
        "batchItemFailures": [{"itemIdentifier": "b"}]
    }

    @sync.handler
    async def ahandler(event: Any, context: Any, records: Invocation) -> None:
        async def aone(record: Mapping[str, Any]) -> None:
            if record["body"] == "e":
                raise ValueError("bad e")
            await records.aput(record["body"].encode(), partition_key="k")

        await records.aprocess(aone)

    assert ahandler(sqs_event("d", "e", "f"), Context()) == {
        "batchItemFailures": [{"itemIdentifier": "e"}]
    }
    assert user_data(fake) == [b"a", b"c", b"d", b"f"]


def test_fifo_sends_nothing_after_the_first_failed_message(
    fake: FakeKinesis, backend: str, closing: list[LambdaProducer]
) -> None:
    """m2 is failed by the handler (``fail_item``): m3's scope's put raises
    ItemSkippedError, caught there; m4 is never processed."""
    kinesis = _made(fake, backend, closing, batch="fifo")
    seen: list[str] = []

    @kinesis.handler
    def handler(event: Any, context: Any, records: Invocation) -> None:
        for item, _ in records.items()[:3]:
            seen.append(item)
            if item == "m2":
                records.fail_item(item)
            with records.item(item):
                records.put(item.encode(), partition_key="k")
        records.process(lambda record: seen.append(record["messageId"]))

    answer = handler(sqs_event("m1", "m2", "m3", "m4"), Context())
    assert answer == {"batchItemFailures": [{"itemIdentifier": i} for i in ("m2", "m3", "m4")]}
    assert user_data(fake) == [b"m1"]
    assert seen == ["m1", "m2", "m3", "m1"]  # process() ran m1 again, then stopped


def test_fifo_a_put_for_a_later_message_raises_outside_a_scope(
    fake: FakeKinesis, backend: str, closing: list[LambdaProducer]
) -> None:
    """With ``item=`` and no scope, a put for a message after a failed one raises
    ItemSkippedError; a failure the handler names only in its answer (m3) still fails
    every later message, whose records were sent (m4's)."""
    kinesis = _made(fake, backend, closing, batch="fifo")
    raised: list[str] = []

    @kinesis.handler
    def handler(event: Any, context: Any, records: Invocation) -> dict[str, Any]:
        for item in ("m1", "m2", "m3", "m4"):
            try:
                records.put(item.encode(), partition_key="k", item=item)
            except ItemSkippedError:
                raised.append(item)
        return {"batchItemFailures": [{"itemIdentifier": "m3"}]}

    answer = handler(sqs_event("m1", "m2", "m3", "m4"), Context())
    assert answer == {"batchItemFailures": [{"itemIdentifier": "m3"}, {"itemIdentifier": "m4"}]}
    assert raised == []
    assert user_data(fake) == [b"m1", b"m2", b"m3", b"m4"]

    @kinesis.handler
    def failing(event: Any, context: Any, records: Invocation) -> None:
        records.put(b"n1", partition_key="k", item="n1")
        records.fail_item("n2")
        for item in ("n2", "n3"):
            try:
                records.put(item.encode(), partition_key="k", item=item)
            except ItemSkippedError:
                raised.append(item)

    answer = failing(sqs_event("n1", "n2", "n3"), Context())
    assert answer == {"batchItemFailures": [{"itemIdentifier": "n2"}, {"itemIdentifier": "n3"}]}
    assert raised == ["n2", "n3"]
    assert b"n2" not in user_data(fake) and b"n1" in user_data(fake)


def test_a_failed_record_tied_to_no_item_fails_the_invocation(
    fake: FakeKinesis, backend: str, closing: list[LambdaProducer]
) -> None:
    fake.create_stream("audit", shard_count=1)
    fake.faults = Faults(fatal={"audit": "AccessDeniedException"})
    kinesis = _made(fake, backend, closing, batch=True)

    @kinesis.handler
    def handler(event: Any, context: Any, records: Invocation) -> None:
        records.put(b"a", partition_key="k", item="a")
        records.put(b"loose", partition_key="k", stream_name="audit")

    with pytest.raises(RecordsFailedError) as caught:
        handler(sqs_event("a"), Context())
    assert [r.stream_name for r in caught.value.report.failed] == ["audit"]


def test_a_handler_exception_outside_any_scope_fails_the_invocation(
    fake: FakeKinesis, backend: str, closing: list[LambdaProducer]
) -> None:
    kinesis = _made(fake, backend, closing, batch=True)

    @kinesis.handler
    def handler(event: Any, context: Any, records: Invocation) -> None:
        raise KeyError("no item to blame")

    with pytest.raises(KeyError):
        handler(sqs_event("a"), Context())


def test_batch_is_checked() -> None:
    with pytest.raises(ValueError, match="batch"):
        LambdaProducer("s", batch="FIFO")
