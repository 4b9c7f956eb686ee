"""Retry decisions: which failures to retry, which to fail at once, and how long to wait.

Pure: no I/O, no clock. The producer asks, then acts.
"""

from __future__ import annotations

import enum
import random

from ._errors import CredentialsError, ExpiredTokenError, KinesisError, TransportError

__all__ = ["Action", "backoff_delay", "classify_entry_error", "classify_exception"]


class Action(enum.Enum):
    """What to do with the records a failure touched."""

    RETRY = "retry"
    REFRESH_CREDENTIALS = "refresh_credentials"  # then retry
    FAIL = "fail"


#: Per-entry and request error codes that retrying can fix.
RETRYABLE_CODES = frozenset(
    {
        "ProvisionedThroughputExceededException",
        "LimitExceededException",
        "KMSThrottlingException",
        "InternalFailure",
        "InternalFailureException",
        "InternalServerError",
        "ServiceUnavailable",
        "ServiceUnavailableException",
        "ThrottlingException",
        "Throttling",
        "RequestTimeout",
        "RequestTimeoutException",
        "SlowDown",
    }
)

#: Codes that retrying cannot fix: fail the records now.
FATAL_CODES = frozenset(
    {
        "ResourceNotFoundException",
        "AccessDeniedException",
        "ValidationException",
        "InvalidArgumentException",
        "KMSDisabledException",
        "KMSInvalidStateException",
        "KMSAccessDeniedException",
        "KMSNotFoundException",
        "KMSOptInRequired",
        "UnrecognizedClientException",
        "IncompleteSignature",
        "MissingAuthenticationToken",
        "InvalidSignatureException",
        "SerializationException",
    }
)


def classify_entry_error(code: str) -> Action:
    """Decide for one failed PutRecords entry (an ``ErrorCode`` in a 200 response)."""
    if code in FATAL_CODES:
        return Action.FAIL
    # The documented per-entry codes are throttling and InternalFailure, both retryable;
    # anything unknown is retried too (until the TTL) rather than dropped.
    return Action.RETRY


def classify_exception(exc: BaseException) -> Action:
    """Decide for a failed request (HTTP error, transport error)."""
    if isinstance(exc, ExpiredTokenError):
        return Action.REFRESH_CREDENTIALS
    if isinstance(exc, KinesisError):
        if exc.code in FATAL_CODES:
            return Action.FAIL
        if exc.code in RETRYABLE_CODES or exc.status_code >= 500:
            return Action.RETRY
        return Action.FAIL
    if isinstance(exc, TransportError):
        return Action.RETRY
    if isinstance(exc, CredentialsError):
        return Action.FAIL
    return Action.FAIL


def backoff_delay(
    attempt: int,
    *,
    base: float = 0.1,
    cap: float = 5.0,
    rand: random.Random | None = None,
) -> float:
    """Full-jitter exponential backoff before retry number ``attempt`` (1 = first retry)."""
    ceiling = min(cap, base * 2.0 ** max(0, attempt - 1))
    r: float = rand.random() if rand is not None else random.random()
    return ceiling * r
