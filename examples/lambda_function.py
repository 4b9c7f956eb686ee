"""A Lambda function that forwards a batch (Kinesis, SQS or DynamoDB streams) to a stream.

Deploy ``lambda_function.handler`` with ``ReportBatchItemFailures`` on its event source
mapping: each input item becomes one record; the answer names the items to retry (a record
that failed for good, or an item that is not JSON). Records not confirmed before the
invocation's time runs out are returned, kept in a spool under ``/tmp`` and sent first by
the next invocation (``docs/lambda.md``).

Run here, it invokes the handler as Lambda would, with an event of each source and a
context of 30 s, against the endpoint the environment names (``kinesis-trio local``)::

    uv run python examples/lambda_function.py --stream events
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from typing import Any

from kinesis_trio.aws_lambda import DynamoDBRecord, Invocation, LambdaProducer, Record, SqsMessage

kinesis = LambdaProducer(
    os.environ.get("KINESIS_STREAM"),
    batch=True,
    unconfirmed="return",
    spool_dir=os.environ.get("SPOOL_DIR", os.path.join(tempfile.gettempdir(), "kinesis-spool")),
)


def _body(record: Record) -> Any:
    """The item's JSON: an SQS message's body, a Kinesis record's data (base64 decoded), a
    DynamoDB record's new image (deserialized with boto3, which Lambda's runtime ships)."""
    if isinstance(record, SqsMessage):
        return json.loads(record.body)
    if isinstance(record, DynamoDBRecord):
        return record.new_image or {}
    return json.loads(record.data)


@kinesis.handler
def handler(event: dict[str, Any], context: Any, records: Invocation) -> None:
    def one(record: Record) -> None:
        # a failure in here (not JSON, a put that raises) is this item's: it is named in the
        # answer, retried by the event source, then its DLQ; the other items go on
        body = _body(record)
        source = record.raw["eventSource"]
        data = json.dumps({"source": source, "body": body}, default=str).encode()
        records.put(data, partition_key=record.item)  # tied to the item by its scope

    records.process(one, typed=True)  # each item, typed, in its own scope


class _Context:
    """Lambda's context, as far as the helper reads it."""

    def __init__(self, seconds: float) -> None:
        self._deadline = time.monotonic() + seconds

    def get_remaining_time_in_millis(self) -> int:
        return int((self._deadline - time.monotonic()) * 1000)


def _events() -> dict[str, dict[str, Any]]:
    import base64

    kinesis_data = base64.b64encode(b'{"order": 1}').decode()
    return {
        "kinesis": {
            "Records": [
                {
                    "eventSource": "aws:kinesis",
                    "kinesis": {"sequenceNumber": "1", "data": kinesis_data},
                },
                {
                    "eventSource": "aws:kinesis",
                    "kinesis": {"sequenceNumber": "2", "data": "bm90IGpzb24="},
                },
            ]
        },
        "sqs": {
            "Records": [
                {"eventSource": "aws:sqs", "messageId": "m-1", "body": '{"order": 2}'},
                {"eventSource": "aws:sqs", "messageId": "m-2", "body": '{"order": 3}'},
            ]
        },
        "dynamodb": {
            "Records": [
                {
                    "eventSource": "aws:dynamodb",
                    "dynamodb": {"SequenceNumber": "100", "NewImage": {"id": {"S": "4"}}},
                }
            ]
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0] if __doc__ else "")
    parser.add_argument("--stream", default=os.environ.get("KINESIS_STREAM"))
    args = parser.parse_args()
    kinesis.stream_name = args.stream
    answers = {name: handler(event, _Context(30)) for name, event in _events().items()}
    kinesis.close()
    print(json.dumps(answers))


if __name__ == "__main__":
    main()
