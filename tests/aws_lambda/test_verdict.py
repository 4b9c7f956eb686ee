"""The rule of partial batch responses, on its own: an item's verdict from its records'
outcomes and what was raised while it was processed (``_batch.verdict``), and the batch's,
SQS FIFO's included (``_batch.verdicts``, ``_batch.failed``)."""

from __future__ import annotations

from kinesis_trio._results import RecordResult
from kinesis_trio.aws_lambda._batch import (
    FAILED,
    OK,
    SKIPPED,
    UNCONFIRMED,
    Verdict,
    failed,
    verdict,
    verdicts,
)


def test_an_items_verdict() -> None:
    written = RecordResult(True, "s", "k", "shardId-0", "1", None, ())
    refused = RecordResult(False, "s", "k", None, None, None, (), "AccessDeniedException")
    assert verdict([]) == OK
    assert verdict([written, written]) == OK
    assert verdict([written, None]) == UNCONFIRMED
    assert verdict([written, refused, None]) == FAILED
    assert verdict([None, ValueError("no such stream")]) == FAILED
    assert verdict([written], [RuntimeError("in its scope")]) == FAILED
    assert verdict([], [RuntimeError("fail_item")]) == FAILED


def test_the_batchs_verdicts() -> None:
    each: dict[str, Verdict] = {"b": FAILED, "c": OK, "d": UNCONFIRMED, "x": FAILED}
    assert verdicts(["a", "b", "c", "d"], each) == {
        "a": OK,
        "b": FAILED,
        "c": OK,
        "d": UNCONFIRMED,
        "x": FAILED,  # not in the batch: kept, after it
    }
    assert failed(verdicts(["a", "b", "c", "d"], each)) == ["b", "x"]


def test_fifo_from_the_first_failed_message_on() -> None:
    each: dict[str, Verdict] = {"m1": OK, "m2": FAILED, "m3": OK, "m4": FAILED}
    decided = verdicts(["m1", "m2", "m3", "m4"], each, fifo=True)
    assert decided == {"m1": OK, "m2": FAILED, "m3": SKIPPED, "m4": SKIPPED}
    assert failed(decided) == ["m2", "m3", "m4"]
    assert failed(verdicts(["m1", "m2"], {"m1": OK}, fifo=True)) == []
    # a message skipped as it was processed stops the batch too
    assert failed(verdicts(["m1", "m2"], {"m1": SKIPPED}, fifo=True)) == ["m1", "m2"]
