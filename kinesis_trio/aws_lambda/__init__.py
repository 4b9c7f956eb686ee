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

from ._batch import batch_response as batch_response
from ._batch import items as items
from ._handler import LambdaProducer as LambdaProducer
from ._invocation import Invocation as Invocation
from ._invocation import InvocationReport as InvocationReport
from ._invocation import ItemSkippedError as ItemSkippedError
from ._invocation import RecordsFailedError as RecordsFailedError
from ._invocation import RecordsNotConfirmedError as RecordsNotConfirmedError
from ._invocation import current_records as current_records
from ._records import DynamoDBRecord as DynamoDBRecord
from ._records import KinesisRecord as KinesisRecord
from ._records import Record as Record
from ._records import SqsMessage as SqsMessage
from ._records import typed as typed

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
