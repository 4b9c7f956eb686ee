"""AWS Lambda: one producer per execution environment, and invocations that return only
once their records' outcomes are known (or their time is up). See ``docs/lambda.md``.

::

    from kinesis_trio.aws_lambda import LambdaProducer

    kinesis = LambdaProducer("orders", batch=True)

    @kinesis.handler
    def handler(event, context, records):
        for item, record in records.items():
            with records.item(item):  # what fails in here is this item's
                records.put(record["body"].encode(), partition_key=item)

Typed records (``records.process(fn, typed=True)``: a :class:`KinesisRecord`,
:class:`SqsMessage` or :class:`DynamoDBRecord`), and a two-argument handler that stacks with
Powertools' decorators::

    @logger.inject_lambda_context
    @kinesis.handler
    def handler(event, context):
        records = kinesis.records  # the running invocation's
        records.process(lambda m: records.put(m.body.encode(), partition_key=m.item), typed=True)
"""

from typing import TYPE_CHECKING, Any

from ._batch import batch_response as batch_response
from ._batch import items as items
from ._handler import LambdaProducer as LambdaProducer
from ._invocation import Invocation as Invocation
from ._invocation import InvocationReport as InvocationReport
from ._invocation import ItemSkippedError as ItemSkippedError
from ._invocation import RecordsFailedError as RecordsFailedError
from ._invocation import RecordsNotConfirmedError as RecordsNotConfirmedError
from ._invocation import current_records as current_records

if TYPE_CHECKING:
    from ._records import DynamoDBRecord as DynamoDBRecord
    from ._records import KinesisRecord as KinesisRecord
    from ._records import Record as Record
    from ._records import SqsMessage as SqsMessage
    from ._records import typed as typed

#: the typed records (``_records``) are imported when first named: a function that does
#: not use them does not compile them at its cold start
_TYPED = ("DynamoDBRecord", "KinesisRecord", "Record", "SqsMessage", "typed")

__all__ = [
    "DynamoDBRecord",
    "Invocation",
    "InvocationReport",
    "ItemSkippedError",
    "KinesisRecord",
    "LambdaProducer",
    "Record",
    "RecordsFailedError",
    "RecordsNotConfirmedError",
    "SqsMessage",
    "batch_response",
    "current_records",
    "items",
    "typed",
]


def __getattr__(name: str) -> Any:
    if name not in _TYPED:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"{__name__}._records"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
