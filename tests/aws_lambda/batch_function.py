"""The batch function the real-runtime tests run (``batch_function.handler``).

Settings from the environment: ``STREAM``, ``BATCH`` (``1``, or ``fifo`` for SQS FIFO),
``MODE``: ``loop`` (a plain loop, each ``put`` tied with ``item=``), ``process``
(``records.process``: each item in its own scope) or ``aprocess`` (an async handler,
``await records.aprocess``). Each input item carries a spec (SQS: the body; Kinesis: the
data; DynamoDB: ``NewImage.spec``), JSON: ``{"tag": "a", "n": 1, "stream": "other",
"key": "", "raise": true}``: put ``n`` records ``a-0`` ... (to ``stream``, with partition
key ``key``, both optional), or raise first.
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Mapping
from typing import Any

from kinesis_trio.aws_lambda import Invocation, LambdaProducer

BATCH = os.environ.get("BATCH", "1")
MODE = os.environ.get("MODE", "loop")

kinesis = LambdaProducer(
    os.environ["STREAM"], batch="fifo" if BATCH == "fifo" else True, unconfirmed="fail"
)


def spec(record: Mapping[str, Any]) -> dict[str, Any]:
    """The spec an input item carries."""
    source = record["eventSource"]
    if source == "aws:sqs":
        text = record["body"]
    elif source == "aws:kinesis":
        text = base64.b64decode(record["kinesis"]["data"]).decode()
    else:
        text = record["dynamodb"]["NewImage"]["spec"]["S"]
    found: dict[str, Any] = json.loads(text)
    return found


def work(records: Invocation, record: Mapping[str, Any], item: str | None = None) -> None:
    """What the function does with one input item (``item``: tie its puts explicitly)."""
    wanted = spec(record)
    if wanted.get("raise"):
        raise RuntimeError(f"cannot use {wanted['tag']}")
    for i in range(int(wanted.get("n", 1))):
        records.put(
            f"{wanted['tag']}-{i}".encode(),
            partition_key=wanted.get("key", wanted["tag"]),
            stream_name=wanted.get("stream"),
            item=item,
        )


def sync_handler(event: dict[str, Any], context: Any, records: Invocation) -> None:
    if MODE == "loop":
        for item, record in records.items():
            work(records, record, item)
    else:
        records.process(lambda record: work(records, record))


async def async_handler(event: dict[str, Any], context: Any, records: Invocation) -> None:
    async def one(record: Mapping[str, Any]) -> None:
        wanted = spec(record)
        if wanted.get("raise"):
            raise RuntimeError(f"cannot use {wanted['tag']}")
        for i in range(int(wanted.get("n", 1))):
            await records.aput(
                f"{wanted['tag']}-{i}".encode(),
                partition_key=wanted.get("key", wanted["tag"]),
                stream_name=wanted.get("stream"),
            )

    await records.aprocess(one)


handler = kinesis.handler(async_handler if MODE == "aprocess" else sync_handler)
