"""The retry policy: retry, refresh and retry, or fail now; how long to back off; what a
retry costs the retry budget.

Pure: no I/O, no clock. The producer asks, then acts (when a retry is due, and whether the
budget lets it go, is the scheduler's: ``_retry_schedule``). The tables follow the Kinesis API
reference (see ``docs``/the reference notes): throttling, internal failures, 5xx and network
errors are retried until ``record_ttl``; errors that retrying cannot fix (a missing stream,
denied access, validation, KMS key problems, bad signatures) fail the records at once.
The tables themselves are ``_error_codes``'s, the backoff ``_backoff``'s (shared with the
client and the metrics sink, floors that this core does not import).
"""

from __future__ import annotations

import enum
import re
from typing import NamedTuple

from .._error_codes import (
    EXPIRED_TOKEN_CODES,
    FATAL_CODES,
    THROTTLING_CODES,
    TRANSIENT_CODES,
)
from .._errors import (
    CredentialsError,
    ExpiredTokenError,
    KinesisError,
    RequestTimeoutError,
    TransportError,
    refused_on_the_way,
)
from ._congestion import RetryBudget

__all__ = [
    "Action",
    "Decision",
    "classify_entry_error",
    "classify_exception",
    "invalid_entries",
    "overload_cost",
]


class Action(enum.Enum):
    """What to do with the records a failure touched."""

    RETRY = "retry"
    REFRESH_CREDENTIALS = "refresh_credentials"  # then retry
    FAIL = "fail"


class Decision(NamedTuple):
    """A classification: the action, whether it was throttling, whether it is ambiguous
    (the request may have been processed: a retry can duplicate records), whether the
    request was refused as too large before anything was written (``too_large``: split it,
    or fail its one record)."""

    action: Action
    throttled: bool = False
    ambiguous: bool = False
    too_large: bool = False


_RETRY = Decision(Action.RETRY)
_RETRY_AMBIGUOUS = Decision(Action.RETRY, ambiguous=True)
_THROTTLED = Decision(Action.RETRY, throttled=True)
_THROTTLED_AMBIGUOUS = Decision(Action.RETRY, throttled=True, ambiguous=True)
_THROTTLED_FAIL = Decision(Action.FAIL, throttled=True)
_FAIL = Decision(Action.FAIL)
_TOO_LARGE = Decision(Action.FAIL, too_large=True)


def classify_code(code: str, status: int = 200, *, fail_if_throttled: bool = False) -> Decision:
    """Decide from an AWS error code (and the HTTP status of a whole-request error)."""
    if code in THROTTLING_CODES or status == 429:
        return _THROTTLED_FAIL if fail_if_throttled else _THROTTLED
    if code in EXPIRED_TOKEN_CODES:
        return Decision(Action.REFRESH_CREDENTIALS)
    if code in FATAL_CODES:
        return _FAIL
    if code in TRANSIENT_CODES or status >= 500:
        return _RETRY
    if status == 200:
        # A per-entry code we don't know: the documented ones are throttling and
        # InternalFailure, both retryable. Retrying until the TTL beats dropping a record.
        return _RETRY
    return _FAIL  # any other 4xx: the request itself is wrong


def classify_entry_error(code: str, *, fail_if_throttled: bool = False) -> Decision:
    """Decide for one failed PutRecords entry (an ``ErrorCode`` in a 200 response)."""
    return classify_code(code, 200, fail_if_throttled=fail_if_throttled)


def classify_exception(exc: BaseException, *, fail_if_throttled: bool = False) -> Decision:
    """Decide for a failed request: an AWS error response or a transport failure."""
    if isinstance(exc, ExpiredTokenError):
        return Decision(Action.REFRESH_CREDENTIALS)
    if isinstance(exc, KinesisError):
        if not exc.from_service:
            # Not an error the service sent: a success status with a body that cannot be
            # read, a 1xx or 3xx, a 5xx page from something in between. The request may
            # well have been processed, so a retry can duplicate records. But a 4xx (not
            # 408 or 429) is something in front of the endpoint refusing the request
            # unprocessed (``refused_on_the_way``): nothing was written and the same request
            # would be refused again, so its records fail at once, definitely; a 413 (too
            # large, RFC 9110 15.5.14) splits a request of several records first.
            status = exc.status_code
            if status == 413:
                return _TOO_LARGE
            if refused_on_the_way(status):
                return _FAIL
            return _THROTTLED_AMBIGUOUS if status == 429 else _RETRY_AMBIGUOUS
        return classify_code(exc.code, exc.status_code, fail_if_throttled=fail_if_throttled)
    if isinstance(exc, TransportError):
        # Not sent (connect failure): a clean retry. Sent (timeout, reset): ambiguous.
        return Decision(Action.RETRY, ambiguous=exc.sent)
    if isinstance(exc, CredentialsError):
        return _FAIL
    return _FAIL


def overload_cost(error: BaseException) -> float:
    """What retrying after ``error`` costs the retry budget; 0: the error says nothing
    about load (4xx, credentials) and is not budgeted. Timeouts cost the most: the
    endpoint may still be working on the request."""
    if isinstance(error, RequestTimeoutError):
        return RetryBudget.TIMEOUT_COST
    if isinstance(error, TransportError):
        return RetryBudget.ERROR_COST
    if isinstance(error, KinesisError) and error.status_code >= 500:
        return RetryBudget.ERROR_COST
    return 0.0


#: How AWS (and both emulators) name a PutRecords entry in a request-level validation error:
#: ``Value at 'records.3.member.partitionKey' failed to satisfy constraint``, counting from 1.
_ENTRY_RE = re.compile(r"\brecords\.([0-9]{1,4})\.member\b", re.IGNORECASE)


def invalid_entries(message: str, count: int) -> list[int] | None:
    """The entries (0-based) a request-level validation error of a ``count``-entry request
    names, or ``None`` when it names none, or one the request does not have."""
    found = {int(m) - 1 for m in _ENTRY_RE.findall(message)}
    if not found or any(not 0 <= i < count for i in found):
        return None
    return sorted(found)
