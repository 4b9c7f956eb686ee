"""The response interpreter: answers and errors into per-record decisions (no event loop)."""

from __future__ import annotations

from typing import Any

import pytest

from kinesis_trio._core._interpret import (
    entry_error,
    interpret_answer,
    interpret_error,
    kcl_delivers,
)
from kinesis_trio._core._limiter import ShardLimiter
from kinesis_trio._core._pipeline_data import KRecord, ShardBuffer
from kinesis_trio._core._retry_policy import Action
from kinesis_trio._errors import ConnectionLostError, KinesisError
from tests.support.engine import outcome

A = ShardBuffer("shardId-000000000000", 0, 99, ShardLimiter(100, 0.0))
B = ShardBuffer("shardId-000000000001", 100, 199, ShardLimiter(100, 0.0))


def krec(shard: ShardBuffer, key: str = "k") -> KRecord:
    return KRecord([outcome(b"d", key)], b"d", key, None, 2, shard, 0.0, False)


def ok(shard_id: str) -> dict[str, Any]:
    return {"ShardId": shard_id, "SequenceNumber": "49"}


def test_each_entry_gets_its_decision() -> None:
    krecs = [krec(A), krec(A), krec(B), krec(B), krec(A), krec(B)]
    entries: list[Any] = [
        ok(A.shard_id),
        ok(B.shard_id),  # landed elsewhere: the map is stale
        {"ErrorCode": "ProvisionedThroughputExceededException", "ErrorMessage": "slow"},
        {"ErrorCode": "AccessDeniedException", "ErrorMessage": "no"},
        {"SequenceNumber": 7, "ShardId": A.shard_id},  # no proof: malformed
        {"ErrorCode": "InternalFailure"},
    ]
    answer = interpret_answer(krecs, entries, 1.0, 2.0, fail_if_throttled=False)
    assert [k for k, _ in answer.written] == [krecs[0]]
    assert [k for k, _ in answer.elsewhere] == [krecs[1]]
    assert [k for k, _ in answer.failed] == [krecs[3]]
    retry = {id(k): a for k, a in answer.retry}
    assert set(retry) == {id(krecs[2]), id(krecs[4]), id(krecs[5])}
    assert retry[id(krecs[4])].ambiguous and retry[id(krecs[4])].error_code == "MalformedResponse"
    assert not retry[id(krecs[2])].ambiguous
    assert answer.malformed == 1
    assert answer.throttled == {B}
    assert answer.bad == {A, B} and answer.ok == set()


def test_fail_if_throttled_fails_throttled_records() -> None:
    krecs = [krec(A)]
    entries = [{"ErrorCode": "ProvisionedThroughputExceededException"}]
    answer = interpret_answer(krecs, entries, 0.0, 1.0, fail_if_throttled=True)
    assert [k for k, _ in answer.failed] == krecs and not answer.retry


@pytest.mark.parametrize(
    ("entry", "code"),
    [
        ({"ShardId": "s", "SequenceNumber": "1"}, None),
        ({"ErrorCode": "X"}, "X"),
        ({"ErrorCode": ""}, "MalformedResponse"),
        ({"SequenceNumber": "1"}, "MalformedResponse"),
        ({"SequenceNumber": "1", "ErrorCode": "X"}, "MalformedResponse"),
        ([], "MalformedResponse"),
        (None, "MalformedResponse"),
    ],
)
def test_entry_error(entry: Any, code: str | None) -> None:
    assert entry_error(entry) == code


def test_the_kcl_rule_takes_the_whole_aggregate() -> None:
    inside = [outcome(b"a", "k", ehk="10"), outcome(b"b", "k", ehk="99")]
    straddling = [*inside, outcome(b"c", "k", ehk="100")]
    assert kcl_delivers((0, 99), inside)
    assert not kcl_delivers((0, 99), straddling)
    assert not kcl_delivers(None, inside)


def test_request_errors() -> None:
    krecs = [krec(A), krec(A), krec(B)]
    named = KinesisError(
        "ValidationException",
        "1 validation error detected: Value at 'records.2.member.partitionKey' failed",
        status_code=400,
    )
    verdict = interpret_error(krecs, named, 0.0, 1.0, fail_if_throttled=False, refreshable=True)
    assert verdict.action is Action.FAIL and verdict.named == [1]
    unnamed = KinesisError(
        "ValidationException", "Partition key must be between 1 and 256 in length", status_code=400
    )
    verdict = interpret_error(krecs, unnamed, 0.0, 1.0, fail_if_throttled=False, refreshable=True)
    assert verdict.bisect and verdict.named is None
    missing = KinesisError("ResourceNotFoundException", "Stream s not found", status_code=400)
    verdict = interpret_error(krecs, missing, 0.0, 1.0, fail_if_throttled=False, refreshable=True)
    assert verdict.action is Action.FAIL and not verdict.bisect
    expired = KinesisError("ExpiredTokenException", "expired", status_code=400)
    for refreshable, action in ((True, Action.REFRESH_CREDENTIALS), (False, Action.FAIL)):
        verdict = interpret_error(
            krecs, expired, 0.0, 1.0, fail_if_throttled=False, refreshable=refreshable
        )
        assert verdict.action is action
    lost = ConnectionLostError("reset", operation="PutRecords")
    verdict = interpret_error(krecs, lost, 0.0, 1.0, fail_if_throttled=False, refreshable=True)
    assert verdict.action is Action.RETRY and verdict.attempt.ambiguous
