"""The response interpreter: an answer (or a transport error) into per-record decisions.

Pure, no awaits. :func:`interpret_answer` reads a PutRecords answer entry by entry: written
where it was sent, written somewhere else (the shard map is stale; an aggregate must then
pass the KCL's range rule, :func:`kcl_delivers`), to retry (why, ambiguous or not), or
failed for good. :func:`interpret_error` does the same for a request that got no usable
answer. Nothing here resolves an outcome: the engine applies the decisions.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

from .._errors import KinesisError
from .._results import R_SEQUENCE_NUMBER, Attempt, Resolution, failed, written
from ._pipeline_data import KRecord, ShardBuffer
from ._record import Record
from ._retry_policy import (
    Action,
    Decision,
    classify_entry_error,
    classify_exception,
    invalid_entries,
)

__all__ = [
    "Answer",
    "RequestFailure",
    "entry_error",
    "interpret_answer",
    "interpret_error",
    "kcl_delivers",
]


class Answer:
    """What one PutRecords answer means for each of its records."""

    __slots__ = ("bad", "elsewhere", "failed", "malformed", "ok", "retry", "throttled", "written")

    def __init__(self) -> None:
        #: written in the shard they were sent for
        self.written: list[tuple[KRecord, Resolution]] = []
        #: written in another shard (the map is out of date)
        self.elsewhere: list[tuple[KRecord, Resolution]] = []
        #: to send again, with the attempt that failed
        self.retry: list[tuple[KRecord, Attempt]] = []
        #: failed for good
        self.failed: list[tuple[KRecord, Resolution]] = []
        #: shards that wrote something, shards with a failure, shards that throttled
        self.ok: set[ShardBuffer] = set()
        self.bad: set[ShardBuffer] = set()
        self.throttled: set[ShardBuffer] = set()
        #: entries that were neither a success nor an error (retried, ambiguous)
        self.malformed = 0


def interpret_answer(
    krecs: list[KRecord],
    entries: list[Any],
    start: float,
    end: float,
    *,
    fail_if_throttled: bool,
) -> Answer:
    """Decide, entry by entry, what a PutRecords answer means for ``krecs``.

    ``entries`` must be a list as long as ``krecs`` (else the whole request failed: see
    :func:`interpret_error`). A success without a string shard id and sequence number, or
    an entry that is neither a success nor an error, proves nothing: its record is retried
    and marked ambiguous (the request may have written it).
    """
    answer = Answer()
    duration = end - start
    malformed: Attempt | None = None
    for krec, entry in zip(krecs, entries, strict=True):
        shard = krec.shard
        # a well-formed success (``entry_error`` is None), tested inline: once per entry
        if (
            type(entry) is dict
            and type(sequence_number := entry.get("SequenceNumber")) is str
            and type(shard_id := entry.get("ShardId")) is str
        ):
            res = written(
                shard_id,
                sequence_number,
                krec.aggregated,
                end,
                start,
                start - krec.since,
                duration,
            )
            answer.ok.add(shard)
            if shard_id == shard.shard_id or shard.anywhere:
                answer.written.append((krec, res))
            else:
                answer.elsewhere.append((krec, res))
            continue
        code = entry_error(entry)
        assert code is not None  # (the test above is entry_error's own)
        answer.bad.add(shard)
        if code == "MalformedResponse":
            if malformed is None:
                malformed = Attempt(
                    start,
                    0.0,
                    duration,
                    False,
                    "MalformedResponse",
                    "PutRecords answered with an entry that is neither a success nor an error",
                    True,
                )
            answer.malformed += 1
            answer.retry.append((krec, malformed))
            continue
        message = str(entry.get("ErrorMessage") or "")
        decision = classify_entry_error(code, fail_if_throttled=fail_if_throttled)
        attempt = Attempt(start, start - krec.since, duration, False, code, message)
        if decision.throttled:
            answer.throttled.add(shard)
        if decision.action is Action.FAIL:
            answer.failed.append((krec, failed(code, message, end, attempt, krec.aggregated)))
        else:
            answer.retry.append((krec, attempt))
    answer.ok -= answer.bad
    return answer


def entry_error(entry: Any) -> str | None:
    """None for a well-formed success entry; else its error code (``MalformedResponse``
    for an entry that is neither a success nor an error)."""
    if type(entry) is not dict:
        return "MalformedResponse"
    if type(entry.get("SequenceNumber")) is str and type(entry.get("ShardId")) is str:
        return None
    code = entry.get("ErrorCode")
    if entry.get("SequenceNumber") is None and type(code) is str and code:
        return code
    return "MalformedResponse"


class RequestFailure(NamedTuple):
    """What a request that got no usable answer means for its records.

    ``action``: retry, fail, or refresh the credentials and retry. ``named``: the indexes
    of the entries a validation error named (only those fail). ``bisect``: the request was
    rejected for a record it does not name, or (``too_large``) refused as too large before
    anything was written, so it is sent again in halves.
    """

    action: Action
    throttled: bool
    attempt: Attempt
    named: list[int] | None = None
    bisect: bool = False
    too_large: bool = False


def interpret_error(
    krecs: list[KRecord],
    error: BaseException,
    start: float,
    end: float,
    *,
    fail_if_throttled: bool,
    refreshable: bool,
) -> RequestFailure:
    """Decide what a failed request (``error``) means for ``krecs``."""
    code = error_code(error)
    message = str(error)[:500]
    decision = classify_exception(error, fail_if_throttled=fail_if_throttled)
    attempt = Attempt(start, 0.0, end - start, False, code, message, decision.ambiguous)
    if decision.action is Action.REFRESH_CREDENTIALS and not refreshable:
        decision = Decision(Action.FAIL)  # static credentials cannot be refreshed
    if decision.too_large:
        # Refused by something in front of the endpoint (a proxy, a load balancer, a
        # gateway): nothing written, not ambiguous. Halves may pass; one record cannot.
        several = len(krecs) > 1
        size = sum(k.size for k in krecs)
        why = f"refused the request ({size:,} bytes of records) as too large, and nothing was " + (
            "written" if several else "written; the record cannot pass it"
        )
        attempt = _refused(error, 413, why, "", start, end, code)
        return RequestFailure(Action.FAIL, False, attempt, bisect=several, too_large=True)
    if (
        decision.action is Action.FAIL
        and isinstance(error, KinesisError)
        and not error.from_service
    ):
        # a 4xx from something in front of the endpoint (``refused_on_the_way``)
        why = "refused the request, and nothing was written"
        attempt = _refused(error, error.status_code, why, " (with no body)", start, end, code)
        return RequestFailure(Action.FAIL, False, attempt)
    if decision.action is Action.FAIL and code in (
        "ValidationException",
        "InvalidArgumentException",
    ):
        named = invalid_entries(message, len(krecs))
        if named is not None:
            return RequestFailure(decision.action, False, attempt, named=named)
        if len(krecs) > 1 and "stream" not in message.lower():
            # It names no entry (kinesis-local's messages don't): find the bad record by
            # halves, each sent as its own request, so its neighbours still go.
            return RequestFailure(decision.action, False, attempt, bisect=True)
    return RequestFailure(decision.action, decision.throttled, attempt)


def _refused(
    error: BaseException, status: int, why: str, bodiless: str, start: float, end: float, code: str
) -> Attempt:
    """The attempt of a request something in front of the endpoint refused (a 4xx without
    an error of the service's): nothing written, not ambiguous; its message quotes what the
    answer said (``bodiless`` if nothing)."""
    said = str(getattr(error, "message", "") or "")
    message = (
        f"HTTP {status} without an error of the service's: something in front of the "
        f"endpoint {why}" + (f" (it said: {said})" if said else bodiless)
    )[:500]
    return Attempt(start, 0.0, end - start, False, code, message, False)


def error_code(error: BaseException) -> str:
    """The code an attempt history shows for ``error``."""
    return error.code if isinstance(error, KinesisError) else type(error).__name__


def kcl_delivers(shard_range: tuple[int, int] | None, members: Sequence[Record]) -> bool:
    """Will a KCL consumer deliver an aggregate of ``members`` read from a shard with
    ``shard_range``? Only if the range holds every member's hash key: the KCL's
    ``AggregatorUtil.deaggregate`` drops the *whole* aggregate on one member outside it."""
    if shard_range is None:
        return False
    low, high = shard_range
    return all(low <= o.hash_key <= high for o in members)


def outside_range(attempt: Attempt, res: Resolution, known: bool, shard_id: str) -> Attempt:
    """The attempt history entry of an aggregate that KCL consumers would drop."""
    return _failed_as(
        attempt,
        f"aggregate written to {shard_id} (sequence number {res[R_SEQUENCE_NUMBER]}) "
        + (
            "whose hash key range does not hold all of its records"
            if known
            else "whose hash key range could not be found"
        )
        + ": KCL consumers drop the whole aggregate there, so it is sent again",
        "WrittenOutsideShardRange",
        ambiguous=not known,
    )


def unknown_range(attempt: Attempt, shard_id: str | None, when: str) -> Attempt:
    """The history entry of an aggregate whose shard's range stayed unknown (``when``: till
    when): it is in the stream, and KCL consumers may or may not deliver it (ambiguous)."""
    return _failed_as(
        attempt,
        f"aggregate written to {shard_id}, whose hash key range was not known {when}",
        "WrittenOutsideShardRange",
        ambiguous=True,
    )


def in_flight(start: float, now: float) -> Attempt:
    """The history entry of a request still out when the producer stopped."""
    return Attempt(
        start,
        0.0,
        now - start,
        False,
        "RequestInFlight",
        "the producer stopped while the PutRecords request was in flight",
        True,
    )


def resent_without(attempt: Attempt) -> Attempt:
    """The history entry of a record sent again without the entry its request failed for."""
    return _failed_as(
        attempt,
        f"the request was rejected for another record in it ({_cause(attempt)}); "
        "sent again without it",
    )


def resent_smaller(attempt: Attempt) -> Attempt:
    """The history entry of a record whose request, refused as too large, is sent again in
    halves (nothing was written: not ambiguous)."""
    return _failed_as(attempt, f"{_cause(attempt)}: sent again in halves")


def resent_in_halves(attempt: Attempt) -> Attempt:
    """The history entry of a record whose request is sent again in halves."""
    return _failed_as(
        attempt,
        f"{_cause(attempt)} (the request was rejected for a record it holds: sent again in "
        "halves to find that record)",
    )


def _cause(attempt: Attempt) -> str:
    return (attempt.error_message or "")[:200]


def _failed_as(
    attempt: Attempt, message: str, code: str | None = None, *, ambiguous: bool = False
) -> Attempt:
    """``attempt`` as a failure with this message (and code, if given)."""
    return attempt._replace(
        success=False,
        error_code=attempt.error_code if code is None else code,
        error_message=message,
        ambiguous=ambiguous,
    )
