"""What the Lambda tests share: a context as Lambda's, a gate, events of each source."""

from __future__ import annotations

import threading
import time
from typing import Any

import anyio
import httpx

from kinesis_trio import ProducerConfig, deaggregate
from kinesis_trio.aws_lambda import LambdaProducer
from kinesis_trio.testing import FakeKinesis
from tests.support.helpers import CREDS


class Context:
    """Lambda's context object, as far as the helper reads it: the time left."""

    def __init__(self, seconds: float = 30.0) -> None:
        self.deadline = time.monotonic() + seconds
        self.aws_request_id = "test"

    def get_remaining_time_in_millis(self) -> int:
        return max(0, int((self.deadline - time.monotonic()) * 1000))


class Gate:
    """A FakeKinesis hook holding every PutRecords until ``opened`` is set (any thread)."""

    def __init__(self) -> None:
        self.opened = threading.Event()
        self.held = 0

    async def __call__(self, operation: str, body: dict[str, Any]) -> httpx.Response | None:
        if operation == "PutRecords":
            self.held += 1
            try:
                while not self.opened.is_set():  # noqa: ASYNC110 -- a threading.Event
                    await anyio.sleep(0.01)
            finally:
                self.held -= 1
        return None


def lambda_producer(
    fake: FakeKinesis,
    backend: str,
    backend_options: dict[str, Any] | None = None,
    **options: Any,
) -> LambdaProducer:
    fields = set(ProducerConfig.__dataclass_fields__) - {"spool_dir"}  # the helper's root
    config = {k: options.pop(k) for k in list(options) if k in fields}
    return LambdaProducer(
        "s",
        region_name="us-east-1",
        endpoint_url="http://fake.local",
        credentials=CREDS,
        transport=fake.transport(),
        config=ProducerConfig(**config),
        backend=backend,
        backend_options=backend_options,
        **options,
    )


def kinesis_event(*seqs: str) -> dict[str, Any]:
    return {
        "Records": [
            {
                "eventSource": "aws:kinesis",
                "kinesis": {"sequenceNumber": s, "partitionKey": "k", "data": "eA=="},
            }
            for s in seqs
        ]
    }


def sqs_event(*ids: str) -> dict[str, Any]:
    return {"Records": [{"eventSource": "aws:sqs", "messageId": i, "body": i} for i in ids]}


def dynamodb_event(*seqs: str) -> dict[str, Any]:
    return {
        "Records": [
            {"eventSource": "aws:dynamodb", "dynamodb": {"SequenceNumber": s, "Keys": {}}}
            for s in seqs
        ]
    }


def user_data(fake: FakeKinesis, stream: str = "s") -> list[bytes]:
    """The user records the fake stored (KPL aggregates taken apart), sorted."""
    return sorted(
        u.data for r in fake.records(stream) for u in deaggregate(r.data, r.partition_key or "")
    )
