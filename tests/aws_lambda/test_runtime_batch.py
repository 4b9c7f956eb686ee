"""Partial batch responses in a real Lambda runtime (awslambdaric under the Runtime
Interface Emulator, writing to the Python local engine): every failure while an item is
processed is that item's, for Kinesis, SQS and DynamoDB-streams events; SQS FIFO stops at
the first failed message. The function is ``batch_function.py``.

Skipped with the reason when the emulator cannot be built (no Go toolchain).
"""

from __future__ import annotations

import base64
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from kinesis_trio.testing._emulators import LocalKinesis
from tests.aws_lambda.rie import Runtime
from tests.aws_lambda.runtime_kit import runtime_env, stored

pytestmark = [pytest.mark.integration, pytest.mark.subprocess]

SOURCES = ["kinesis", "sqs", "dynamodb"]


def event(source: str, *specs: dict[str, Any]) -> dict[str, Any]:
    """A batch of ``source`` whose items carry ``specs`` (``batch_function.spec``); the
    items' identifiers are their tags."""
    records: list[dict[str, Any]] = []
    for n, wanted in enumerate(specs):
        text = json.dumps(wanted)
        tag = wanted["tag"]
        if source == "sqs":
            records.append(
                {
                    "eventSource": "aws:sqs",
                    "eventSourceARN": "arn:aws:sqs:us-east-1:123456789012:q.fifo",
                    "messageId": tag,
                    "body": text,
                    "attributes": {"MessageGroupId": "g", "SequenceNumber": str(n)},
                }
            )
        elif source == "kinesis":
            data = base64.b64encode(text.encode()).decode()
            records.append(
                {
                    "eventSource": "aws:kinesis",
                    "kinesis": {"sequenceNumber": tag, "partitionKey": "k", "data": data},
                }
            )
        else:
            records.append(
                {
                    "eventSource": "aws:dynamodb",
                    "dynamodb": {
                        "SequenceNumber": tag,
                        "Keys": {},
                        "NewImage": {"spec": {"S": text}},
                    },
                }
            )
    return {"Records": records}


def failures(*tags: str) -> dict[str, Any]:
    return {"batchItemFailures": [{"itemIdentifier": t} for t in tags]}


def run(rie: Path, engine: LocalKinesis, stream: str, batch: dict[str, Any], **env: str) -> Any:
    function = "batch_function.handler"
    with Runtime(rie, runtime_env(engine, stream, **env), handler=function) as runtime:
        answer = runtime.invoke(batch)
        output = runtime.output()
    assert "errorMessage" not in answer, (answer, output)
    return answer, output


@pytest.mark.parametrize("source", SOURCES)
def test_a_stream_that_does_not_exist_fails_its_item_only(
    rie: Path, engine: LocalKinesis, stream: str, source: str
) -> None:
    """Item b's record goes to a stream that does not exist (its future ends in
    ResourceNotFoundError): b alone is in the answer, a's and c's records are written, and
    the log names b and the call, once."""
    batch = event(source, {"tag": "a"}, {"tag": "b", "stream": "no-such-stream"}, {"tag": "c"})
    answer, output = run(rie, engine, stream, batch, MODE="loop")
    assert answer == failures("b")
    assert stored(engine, stream) == Counter([b"a-0", b"c-0"])
    logged = [line for line in output.splitlines() if "lambda_item_failed" in line]
    assert len(logged) == 1, output
    assert "item='b'" in logged[0] and "no-such-stream" in logged[0], logged


@pytest.mark.parametrize("mode", ["process", "aprocess"])
@pytest.mark.parametrize("source", SOURCES)
def test_a_put_that_raises_fails_its_item_only(
    rie: Path, engine: LocalKinesis, stream: str, source: str, mode: str
) -> None:
    """Item b puts a record with an empty partition key (``put`` raises ValueError at once)
    inside its scope: b is in the answer, a's and c's records are written."""
    batch = event(source, {"tag": "a"}, {"tag": "b", "key": ""}, {"tag": "c"})
    answer, _ = run(rie, engine, stream, batch, MODE=mode)
    assert answer == failures("b")
    assert stored(engine, stream) == Counter([b"a-0", b"c-0"])


@pytest.mark.parametrize("mode", ["process", "aprocess"])
@pytest.mark.parametrize("source", SOURCES)
def test_an_exception_in_an_items_scope_fails_that_item(
    rie: Path, engine: LocalKinesis, stream: str, source: str, mode: str
) -> None:
    batch = event(source, {"tag": "a"}, {"tag": "b", "raise": True}, {"tag": "c", "n": 2})
    answer, output = run(rie, engine, stream, batch, MODE=mode)
    assert answer == failures("b")
    assert stored(engine, stream) == Counter([b"a-0", b"c-0", b"c-1"])
    assert "cannot use b" in output


@pytest.mark.parametrize("mode", ["process", "aprocess"])
def test_a_fifo_batch_stops_at_the_first_failed_message(
    rie: Path, engine: LocalKinesis, stream: str, mode: str
) -> None:
    """m2 fails in its scope: m2, m3 and m4 are in the answer, and only m1's record is
    sent (m3 and m4 are not processed)."""
    batch = event("sqs", {"tag": "m1"}, {"tag": "m2", "raise": True}, {"tag": "m3"}, {"tag": "m4"})
    answer, _ = run(rie, engine, stream, batch, MODE=mode, BATCH="fifo")
    assert answer == failures("m2", "m3", "m4")
    assert stored(engine, stream) == Counter([b"m1-0"])


@pytest.mark.parametrize("mode", ["loop", "process", "aprocess"])
def test_a_fifo_message_whose_record_fails_after_later_ones_were_put(
    rie: Path, engine: LocalKinesis, stream: str, mode: str
) -> None:
    """m1's record goes to a stream that does not exist, which is known only after m2's
    and m3's records were put (sync handlers; an async ``aput`` loads the stream and
    raises in m1's scope, before m2 is processed). m1 and every later message are in the
    answer, so SQS redelivers them in order; the later ones' records already put cannot be
    unsent: they are written (and written again by the redelivery)."""
    batch = event("sqs", {"tag": "m1", "stream": "no-such-stream"}, {"tag": "m2"}, {"tag": "m3"})
    answer, _ = run(rie, engine, stream, batch, MODE=mode, BATCH="fifo")
    assert answer == failures("m1", "m2", "m3")
    if mode == "aprocess":
        assert stored(engine, stream) == Counter()
    else:
        assert stored(engine, stream) == Counter([b"m2-0", b"m3-0"])


@pytest.mark.parametrize(
    ("order", "kind"), [("above", "sync"), ("below", "sync"), ("above", "async")]
)
def test_powertools_decorators_stacked_in_a_real_runtime(
    rie: Path, engine: LocalKinesis, stream: str, order: str, kind: str
) -> None:
    """A two-argument handler with Powertools' logger, tracer and metrics stacked above or
    below ``@kinesis.handler`` (``powertools_function.py``): the partial batch response
    comes back through them, the records are written, Powertools' logger writes its line
    and the producer's failed-item warning (as its JSON, with the Lambda context's keys),
    and ``log_metrics`` its EMF line."""
    batch = {
        "Records": [
            {"eventSource": "aws:sqs", "messageId": tag, "body": body}
            for tag, body in (("m1", "a"), ("m2", "bad"), ("m3", "c"))
        ]
    }
    env = runtime_env(
        engine,
        stream,
        ORDER=order,
        KIND=kind,
        POWERTOOLS_TRACE_DISABLED="1",
        AWS_LAMBDA_FUNCTION_NAME="orders-fn",
    )
    with Runtime(rie, env, handler="powertools_function.handler") as runtime:
        answer = runtime.invoke(batch)
        output = runtime.output()
    assert answer == failures("m2"), output
    assert stored(engine, stream) == Counter([b"a", b"c"])
    lines = [json.loads(line) for line in output.splitlines() if line.startswith("{")]
    putting = [line for line in lines if line.get("message") == "putting"]
    assert len(putting) == 1 and putting[0]["items"] == 3, output
    assert "function_request_id" in putting[0]
    failed = [line for line in lines if "lambda_item_failed" in str(line.get("message"))]
    assert len(failed) == 1 and "item='m2'" in failed[0]["message"], output
    assert failed[0]["level"] == "WARNING" and "function_request_id" in failed[0]
    emf = [line for line in lines if "_aws" in line and "Items" in line]
    assert len(emf) == 1 and emf[0]["Items"] == [3.0], output
