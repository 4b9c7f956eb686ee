"""Partial batch responses: the input items of an event, and the answer naming those to retry.

A function that an event source mapping invokes with a batch (Kinesis, SQS, DynamoDB
streams) and that has ``ReportBatchItemFailures`` on returns
``{"batchItemFailures": [{"itemIdentifier": ...}, ...]}``: only the items named are
retried (for a stream, from the lowest sequence number named on). The identifier of each
item, as AWS's own Powertools reads it (``aws_lambda_powertools/utilities/batch/base.py``):

- Kinesis (``eventSource`` ``aws:kinesis``): ``record["kinesis"]["sequenceNumber"]``
- SQS (``aws:sqs``): ``record["messageId"]``
- DynamoDB streams (``aws:dynamodb``): ``record["dynamodb"]["SequenceNumber"]``

Which items the answer names is one rule, here and nowhere else: :func:`verdict` decides
one item's from what became of its records and what was raised while it was processed,
:func:`verdicts` the batch's (SQS FIFO: from the first failed message on, every one).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

from .._results import RecordResult

__all__ = [
    "FAILED",
    "OK",
    "SKIPPED",
    "SOURCES",
    "UNCONFIRMED",
    "Verdict",
    "batch_response",
    "failed",
    "item_id",
    "items",
    "source_of",
    "verdict",
    "verdicts",
]

#: what became of an input item: its records written and nothing raised
OK: Literal["ok"] = "ok"
#: a record failed for good or ended in an exception, or something raised while it was
#: processed (its scope, ``fail_item``, the handler's own answer)
FAILED: Literal["failed"] = "failed"
#: nothing failed, and a record's outcome was not known in time
UNCONFIRMED: Literal["unconfirmed"] = "unconfirmed"
#: SQS FIFO: a message after the first failed one (reported failed, sent nothing more)
SKIPPED: Literal["skipped"] = "skipped"
Verdict = Literal["ok", "failed", "unconfirmed", "skipped"]

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


def verdict(
    outcomes: Iterable[RecordResult | BaseException | None],
    raised: Iterable[BaseException] = (),
) -> Verdict:
    """One item's verdict from its records' ``outcomes`` (a result; an exception its future
    ended in; None: not known in time) and what was ``raised`` while it was processed.

    Anything raised, any exception and any result not ``ok`` fail the item; else a record
    not known in time leaves it ``UNCONFIRMED``; else it is ``OK`` (an item that put
    nothing and raised nothing too)."""
    if any(True for _ in raised):
        return FAILED
    unknown = False
    for outcome in outcomes:
        if outcome is None:
            unknown = True
        elif isinstance(outcome, BaseException) or not outcome.ok:
            return FAILED
    return UNCONFIRMED if unknown else OK


def verdicts(
    order: Sequence[str], each: Mapping[str, Verdict], *, fifo: bool = False
) -> dict[str, Verdict]:
    """Every item's verdict, the batch's ``order`` first (an item not in ``each`` is
    ``OK``; one in ``each`` and not in ``order`` comes after, as given).

    ``fifo`` (SQS FIFO): the first item in ``order`` that failed stops the batch: every
    item after it is ``SKIPPED`` (whatever its own verdict: SQS must deliver it again,
    after the failed one), and those before it keep theirs."""
    out: dict[str, Verdict] = {i: each.get(i, OK) for i in order}
    for i, v in each.items():
        out.setdefault(i, v)
    if fifo:
        stopped = False
        for i in order:
            if stopped:
                out[i] = SKIPPED
            elif out[i] in (FAILED, SKIPPED):
                out[i] = FAILED
                stopped = True
    return out


def failed(decided: Mapping[str, Verdict]) -> list[str]:
    """The items a partial batch response names: ``FAILED`` and ``SKIPPED`` ones, in order."""
    return [i for i, v in decided.items() if v in (FAILED, SKIPPED)]
