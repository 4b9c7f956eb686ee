"""Partial batch responses: the input items of an event, and the answer naming those to retry.

A function that an event source mapping invokes with a batch (Kinesis, SQS, DynamoDB
streams) and that has ``ReportBatchItemFailures`` on returns
``{"batchItemFailures": [{"itemIdentifier": ...}, ...]}``: only the items named are
retried (for a stream, from the lowest sequence number named on). The identifier of each
item, as AWS's own Powertools reads it (``aws_lambda_powertools/utilities/batch/base.py``):

- Kinesis (``eventSource`` ``aws:kinesis``): ``record["kinesis"]["sequenceNumber"]``
- SQS (``aws:sqs``): ``record["messageId"]``
- DynamoDB streams (``aws:dynamodb``): ``record["dynamodb"]["SequenceNumber"]``
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["SOURCES", "batch_response", "item_id", "items", "source_of"]

#: the event sources with partial batch responses, by their ``eventSource``
SOURCES = {"aws:kinesis": "kinesis", "aws:sqs": "sqs", "aws:dynamodb": "dynamodb"}


def source_of(event: Mapping[str, Any]) -> str:
    """``"kinesis"``, ``"sqs"`` or ``"dynamodb"``: the source of a batch event (ValueError if
    the event is not a batch of one of them)."""
    records = event.get("Records") if isinstance(event, Mapping) else None
    if not isinstance(records, list):
        raise ValueError("not a batch event: no 'Records' list")
    if not records:
        return "empty"
    first = records[0]
    source = first.get("eventSource") if isinstance(first, Mapping) else None
    if source not in SOURCES:
        raise ValueError(
            f"not a Kinesis, SQS or DynamoDB-streams batch: eventSource {source!r} "
            f"(partial batch responses exist for {', '.join(sorted(SOURCES))})"
        )
    return SOURCES[source]


def item_id(record: Mapping[str, Any], source: str) -> str:
    """The ``itemIdentifier`` of one input item of a ``source`` batch."""
    if source == "kinesis":
        return str(record["kinesis"]["sequenceNumber"])
    if source == "sqs":
        return str(record["messageId"])
    if source == "dynamodb":
        return str(record["dynamodb"]["SequenceNumber"])
    raise ValueError(f"unknown batch source {source!r}")


def items(event: Mapping[str, Any]) -> list[tuple[str, Mapping[str, Any]]]:
    """``(itemIdentifier, record)`` for each input item of a batch event, in order."""
    source = source_of(event)
    records: list[Mapping[str, Any]] = event["Records"]
    if source == "empty":
        return []
    return [(item_id(record, source), record) for record in records]


def batch_response(failed: Iterable[str], order: Iterable[str] = ()) -> dict[str, Any]:
    """``{"batchItemFailures": [{"itemIdentifier": id}, ...]}`` for the ``failed`` items,
    each once, in the batch's ``order`` where given (a stream's retry starts at the first)."""
    wanted = set(failed)
    listed: list[str] = [i for i in order if i in wanted]
    seen = set(listed)
    listed += sorted(i for i in wanted if i not in seen)
    unique = list(dict.fromkeys(listed))
    return {"batchItemFailures": [{"itemIdentifier": i} for i in unique]}
