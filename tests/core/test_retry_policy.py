"""Error classification and backoff: table tests (pure, no I/O)."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kinesis_trio._backoff import backoff_delay
from kinesis_trio._core._congestion import RetryBudget
from kinesis_trio._core._retry_policy import (
    Action,
    Decision,
    classify_entry_error,
    classify_exception,
    invalid_entries,
    overload_cost,
)
from kinesis_trio._error_codes import THROTTLING_CODES, metrics_retryable
from kinesis_trio._errors import (
    AccessDeniedError,
    ConnectError,
    ConnectionLostError,
    CredentialsError,
    ExpiredTokenError,
    KinesisError,
    RequestTimeoutError,
    error_from_response,
)

RETRY = Decision(Action.RETRY)
THROTTLED = Decision(Action.RETRY, throttled=True)
FAIL = Decision(Action.FAIL)
REFRESH = Decision(Action.REFRESH_CREDENTIALS)

ENTRY_TABLE = [
    ("ProvisionedThroughputExceededException", THROTTLED),
    ("InternalFailure", RETRY),
    ("KMSThrottlingException", THROTTLED),
    ("KMSDisabledException", FAIL),
    ("KMSInvalidStateException", FAIL),
    ("KMSAccessDeniedException", FAIL),
    ("KMSNotFoundException", FAIL),
    ("KMSOptInRequired", FAIL),
    ("AccessDeniedException", FAIL),
    ("ResourceNotFoundException", FAIL),
    ("SomethingNewException", RETRY),  # unknown per-entry codes are retried until the TTL
]


@pytest.mark.parametrize(("code", "expected"), ENTRY_TABLE)
def test_entry_errors(code: str, expected: Decision) -> None:
    assert classify_entry_error(code) == expected


def test_fail_if_throttled_fails_throttled_entries_only() -> None:
    assert classify_entry_error(
        "ProvisionedThroughputExceededException", fail_if_throttled=True
    ) == Decision(Action.FAIL, throttled=True)
    assert classify_entry_error("InternalFailure", fail_if_throttled=True) == RETRY


REQUEST_TABLE: list[tuple[int, str, Decision]] = [
    (400, "ResourceNotFoundException", FAIL),
    (400, "AccessDeniedException", FAIL),
    (400, "ValidationException", FAIL),
    (400, "InvalidArgumentException", FAIL),
    (400, "KMSDisabledException", FAIL),
    (400, "KMSInvalidStateException", FAIL),
    (400, "KMSAccessDeniedException", FAIL),
    (400, "KMSNotFoundException", FAIL),
    (400, "KMSOptInRequired", FAIL),
    (400, "UnrecognizedClientException", FAIL),
    (400, "IncompleteSignature", FAIL),
    (403, "MissingAuthenticationToken", FAIL),
    (400, "InvalidSignatureException", FAIL),
    (400, "ExpiredTokenException", REFRESH),
    (400, "ProvisionedThroughputExceededException", THROTTLED),
    (400, "LimitExceededException", THROTTLED),
    (400, "KMSThrottlingException", THROTTLED),
    (400, "ThrottlingException", THROTTLED),
    # no error shape of the service's (an empty body): the request may have been processed
    (429, "", Decision(Action.RETRY, throttled=True, ambiguous=True)),
    (500, "InternalFailure", RETRY),
    (503, "ServiceUnavailable", RETRY),
    (502, "", Decision(Action.RETRY, ambiguous=True)),
    (504, "", Decision(Action.RETRY, ambiguous=True)),
    (500, "SomethingNew", RETRY),
    (400, "SomethingNew", FAIL),
    # an intermediary refused it as too large: nothing written, split or failed at once
    (413, "", Decision(Action.FAIL, too_large=True)),
    (413, "ValidationException", FAIL),
]


@pytest.mark.parametrize(("status", "code", "expected"), REQUEST_TABLE)
def test_request_errors(status: int, code: str, expected: Decision) -> None:
    body = b'{"__type": "%s", "message": "m"}' % code.encode() if code else b""
    error = error_from_response("PutRecords", status, body, {})
    assert classify_exception(error) == expected


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (ConnectError("refused", operation="PutRecords"), Decision(Action.RETRY)),
        (
            RequestTimeoutError("read timeout", operation="PutRecords"),
            Decision(Action.RETRY, ambiguous=True),
        ),
        (
            ConnectionLostError("reset", operation="PutRecords"),
            Decision(Action.RETRY, ambiguous=True),
        ),
        (CredentialsError("no credentials"), FAIL),
        (ExpiredTokenError("ExpiredTokenException", "m", status_code=400), REFRESH),
        (AccessDeniedError("AccessDeniedException", "m", status_code=400), FAIL),
        (ValueError("not ours"), FAIL),
    ],
)
def test_exceptions(error: BaseException, expected: Decision) -> None:
    assert classify_exception(error) == expected


def test_throttled_request_with_fail_if_throttled() -> None:
    error = KinesisError("LimitExceededException", "m", status_code=400)
    assert classify_exception(error, fail_if_throttled=True) == Decision(
        Action.FAIL, throttled=True
    )


@given(st.integers(1, 60), st.floats(0.001, 1.0), st.floats(1.0, 60.0), st.integers(0, 2**32))
def test_backoff_is_full_jitter_exponential_and_capped(
    failures: int, base: float, cap: float, seed: int
) -> None:
    delay = backoff_delay(failures, base=base, cap=cap, rand=random.Random(seed))
    ceiling = min(cap, base * 2 ** (failures - 1))
    assert 0.0 <= delay <= ceiling


def test_backoff_grows_on_average() -> None:
    rand = random.Random(1)
    means = [sum(backoff_delay(f, rand=rand) for _ in range(2000)) / 2000 for f in (1, 3, 5, 10)]
    assert means[0] < means[1] < means[2] < means[3]
    assert abs(means[0] - 0.05) < 0.01  # full jitter: mean is half the ceiling
    assert abs(means[3] - 2.5) < 0.3  # capped at 5 s


@pytest.mark.parametrize("body", ["not json", "[1, 2]", "null"])
def test_a_success_status_with_an_unreadable_body_is_ambiguous(body: str) -> None:
    error = error_from_response("PutRecords", 200, body.encode(), {})
    malformed = KinesisError("MalformedResponse", "not a JSON object", status_code=200)
    for exc in (error, malformed):
        assert classify_exception(exc) == Decision(Action.RETRY, ambiguous=True), exc


@pytest.mark.parametrize(
    ("message", "count", "expected"),
    [
        # kinesalite's and AWS's form: entries counted from 1
        (
            "1 validation error detected: Value 'x' at 'records.2.member.partitionKey' failed",
            3,
            [1],
        ),
        (
            "2 validation errors detected: Value at 'records.1.member.data' failed; "
            "Value at 'records.3.member.explicitHashKey' failed",
            3,
            [0, 2],
        ),
        ("Value at 'records.4.member.partitionKey' failed", 3, None),  # not in this request
        ("Value at 'records.0.member.partitionKey' failed", 3, None),
        ("Partition key must be between 1 and 256 in length", 3, None),  # kinesis-local
        ("Value at 'streamName' failed to satisfy constraint", 3, None),
    ],
)
def test_invalid_entries_named_by_a_validation_error(
    message: str, count: int, expected: list[int] | None
) -> None:
    assert invalid_entries(message, count) == expected


@given(st.text(max_size=300), st.integers(min_value=1, max_value=500))
def test_invalid_entries_only_names_entries_of_the_request(message: str, count: int) -> None:
    found = invalid_entries(message, count)
    assert found is None or (found and all(0 <= i < count for i in found))


@pytest.mark.parametrize(
    ("code", "status", "expected"),
    [
        ("Throttling", 400, True),  # CloudWatch's query-protocol throttling
        ("ThrottlingException", 400, True),
        ("InternalServiceFault", 500, True),
        ("RequestExpired", 400, True),  # a retry signs anew
        ("SomethingNew", 503, True),
        ("SomethingNew", 429, True),
        ("InvalidParameterValue", 400, False),
        ("AccessDeniedException", 403, False),
        ("ProvisionedThroughputExceededException", 400, False),  # Kinesis', not CloudWatch's
        ("ExpiredToken", 400, False),  # retried only once the credentials are refreshed
    ],
)
def test_metrics_retryable(code: str, status: int, expected: bool) -> None:
    assert metrics_retryable(code, status) is expected


def test_cloudwatch_throttling_is_throttling_to_kinesis_too() -> None:
    assert {"Throttling", "ThrottlingException"} <= THROTTLING_CODES


def test_overload_cost() -> None:
    assert overload_cost(RequestTimeoutError("t", operation="PutRecords")) == (
        RetryBudget.TIMEOUT_COST
    )
    assert overload_cost(KinesisError("InternalFailure", "x", status_code=500)) == (
        RetryBudget.ERROR_COST
    )
    assert overload_cost(KinesisError("ThrottlingException", "x", status_code=400)) == 0.0
    assert overload_cost(CredentialsError("no credentials")) == 0.0
