"""The function the real-runtime Powertools test runs (``powertools_function.handler``):
a two-argument handler ``(event, context)`` stacked with Powertools for AWS Lambda's
logger, tracer (``POWERTOOLS_TRACE_DISABLED=1``: no X-Ray daemon) and metrics.

Settings from the environment: ``STREAM``; ``ORDER``: ``above`` (Powertools' decorators
over ``@kinesis.handler``) or ``below``; ``KIND``: ``sync`` or ``async`` (the handler).
Each SQS message's body is put as a record; a body ``bad`` raises in its scope. The
producer's logs go through Powertools' logger (``copy_config_to_registered_loggers``).
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import Any

from aws_lambda_powertools import Logger, Metrics, Tracer
from aws_lambda_powertools.logging.utils import copy_config_to_registered_loggers
from aws_lambda_powertools.metrics import MetricUnit

from kinesis_trio.aws_lambda import LambdaProducer, Record, SqsMessage

logger = Logger(service="orders")
tracer = Tracer(service="orders")
metrics = Metrics(namespace="KinesisTrio", service="orders")
logging.getLogger("kinesis_trio")  # registered, so that Powertools finds it
copy_config_to_registered_loggers(source_logger=logger, include={"kinesis_trio"})

kinesis = LambdaProducer(os.environ["STREAM"], batch=True)


def _check(record: Record) -> bytes:
    assert isinstance(record, SqsMessage)
    if record.body == "bad":
        raise ValueError(f"cannot use {record.message_id}")
    return record.body.encode()


def sync_body(event: dict[str, Any], context: Any) -> None:
    records = kinesis.records
    logger.info("putting", items=len(event["Records"]))
    metrics.add_metric(name="Items", unit=MetricUnit.Count, value=len(event["Records"]))
    records.process(lambda record: records.put(_check(record), partition_key="k"), typed=True)


async def async_body(event: dict[str, Any], context: Any) -> None:
    records = kinesis.records
    logger.info("putting", items=len(event["Records"]))
    metrics.add_metric(name="Items", unit=MetricUnit.Count, value=len(event["Records"]))

    async def one(record: Record) -> None:
        await records.aput(_check(record), partition_key="k")

    await records.aprocess(one, typed=True)


def powertools(fn: Callable[..., Any]) -> Callable[..., Any]:
    return logger.inject_lambda_context(tracer.capture_lambda_handler(metrics.log_metrics(fn)))


_body: Callable[..., Any] = async_body if os.environ.get("KIND") == "async" else sync_body
if os.environ.get("ORDER", "above") == "above":
    handler = powertools(kinesis.handler(_body))
else:
    handler = kinesis.handler(powertools(_body))
