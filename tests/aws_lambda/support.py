"""What the Lambda tests share: a context as Lambda's, events of each source (the gate is
``tests.support.sync_kit.Gate``)."""

from __future__ import annotations

import time
from typing import Any

from kinesis_trio import ProducerConfig
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
