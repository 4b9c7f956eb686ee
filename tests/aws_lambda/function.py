"""The Lambda function the real-runtime tests run (``function.handler`` under awslambdaric).

Settings from the environment: ``STREAM``, ``UNCONFIRMED`` (``fail``/``return``),
``MARGIN`` (seconds), ``SPOOL`` (a spool root, optional), ``SPOOL_SYNC``,
``OPEN_AT_IMPORT`` (open the producer in the init phase, not at the first invocation). An event
``{"tag": "a", "n": 10}`` puts ``n`` records ``a-0`` ... ``a-9``; the answer says which
process ran it and its spool.
"""

from __future__ import annotations

import os
from typing import Any

from kinesis_trio import ProducerConfig
from kinesis_trio.aws_lambda import Invocation, LambdaProducer

kinesis = LambdaProducer(
    os.environ["STREAM"],
    unconfirmed=os.environ.get("UNCONFIRMED", "fail"),
    margin=float(os.environ.get("MARGIN", "0.5")),
    spool_dir=os.environ.get("SPOOL") or None,
    config=ProducerConfig(spool_sync=os.environ.get("SPOOL_SYNC", "interval")),
)

if os.environ.get("OPEN_AT_IMPORT"):
    kinesis.producer  # noqa: B018 -- opens it now, in the init phase (takes a spool)


@kinesis.handler
def handler(event: dict[str, Any], context: Any, records: Invocation) -> dict[str, Any]:
    tag = event.get("tag", "x")
    for i in range(int(event.get("n", 1))):
        records.put(f"{tag}-{i}".encode(), partition_key=f"{tag}-{i}")
    return {"pid": os.getpid(), "spool": str(kinesis.spool)}
