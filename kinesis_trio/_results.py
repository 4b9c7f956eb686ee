"""RecordResult and Attempt: what became of each accepted record, and the resolutions the
core records (the :class:`~kinesis_trio.Outcome` that carries them is the shell's)."""

from __future__ import annotations

from typing import Final, NamedTuple

__all__ = ["Attempt", "RecordResult"]

#: Error codes the producer itself assigns (AWS codes are passed through as they are).
EXPIRED = "RecordExpired"
ABORTED = "ProducerAborted"
CLOSE_TIMEOUT = "ProducerCloseTimeout"
#: The stream's record limit was lowered below the record after it was accepted.
RECORD_TOO_LARGE = "RecordTooLarge"
#: With ``ordering="per_key"``: an earlier record of the same partition key failed for good,
#: so this one (put after it) fails too rather than land after a gap.
PRECEDING_FAILED = "PrecedingRecordFailed"


class Attempt(NamedTuple):
    """One try at writing a record, like the KPL's ``Attempt`` (immutable).

    ``start`` is on the event loop's clock (``anyio.current_time()``); ``delay`` is the time
    from the record's arrival (first attempt) or the previous attempt's end to this one's
    start; ``duration`` is the request's round trip. ``ambiguous`` marks a failure after the
    request was sent (a timeout or reset): the record may have been written anyway, so a
    retry may duplicate it.
    """

    start: float
    delay: float
    duration: float
    success: bool
    error_code: str | None = None
    error_message: str | None = None
    ambiguous: bool = False


class RecordResult(NamedTuple):
    """The final word on one record (immutable).

    ``ok`` records carry the ``shard_id`` and ``sequence_number`` Kinesis gave the record (for
    an aggregated record, the aggregate's; ``sub_sequence_number`` is the record's index in
    it, ``None`` for a record sent on its own). Failed records carry ``error_code`` and
    ``error_message``. ``attempts`` is the history, the last attempt being the terminal one;
    it is empty when the record failed before any request (for instance on an abort).
    ``accepted_at`` and ``resolved_at`` are on the event loop's clock
    (``anyio.current_time()``): ``resolved_at - accepted_at`` is the record's latency.
    """

    ok: bool
    stream_name: str
    partition_key: str | None
    shard_id: str | None
    sequence_number: str | None
    sub_sequence_number: int | None
    attempts: tuple[Attempt, ...]
    error_code: str | None = None
    error_message: str | None = None
    accepted_at: float = 0.0
    resolved_at: float = 0.0

    @property
    def possible_duplicate(self) -> bool:
        """An attempt failed ambiguously (timeout or reset after sending) before the
        record was written: another copy of it may be in the stream."""
        return any(a.ambiguous for a in self.attempts)


#: ``RecordResult``'s / ``Attempt``'s fields as one tuple, without the generated
#: ``__new__``'s extra frame.
_new_result = _new_attempt = tuple.__new__


# A Resolution is what one Kinesis record (plain or aggregated) came to, shared by its user
# records. It is a plain tuple of plain values rather than an object: CPython's collector
# stops tracking such tuples, so the resolved outcomes an application keeps add only
# themselves to every full garbage collection (the pauses were the latency tail). An
# aggregate's also holds its Attempt: two tracked objects per aggregate, shared by its members.
# Fields: ok, shard_id, sequence_number, aggregated, at (resolution time), error_code,
# error_message, attempt (the attempt that resolved it: a failed one, or an aggregate's
# success; else None), and a successful attempt's start, delay and duration (else None).
Resolution = tuple[
    bool,
    str | None,
    str | None,
    bool,
    float,
    str | None,
    str | None,
    Attempt | None,
    float | None,
    float | None,
    float | None,
]
R_OK: Final = 0
R_SHARD_ID: Final = 1
R_SEQUENCE_NUMBER: Final = 2
R_AGGREGATED: Final = 3
R_AT: Final = 4
R_ERROR_CODE: Final = 5
R_ERROR_MESSAGE: Final = 6
R_ATTEMPT: Final = 7
R_START: Final = 8


def written(
    shard_id: str | None,
    sequence_number: str | None,
    aggregated: bool,
    at: float,
    start: float,
    delay: float,
    duration: float,
) -> Resolution:
    """A record written at ``shard_id``/``sequence_number`` by an attempt begun at ``start``.

    An aggregate's resolution is shared by its members, so its attempt is built here, once
    (not once per member that is awaited). A plain record's is built when it is asked for:
    its resolution then holds only plain values, which the collector stops tracking.
    """
    attempt = (
        _new_attempt(Attempt, (start, delay, duration, True, None, None, False))
        if aggregated
        else None
    )
    return (
        True,
        shard_id,
        sequence_number,
        aggregated,
        at,
        None,
        None,
        attempt,
        start,
        delay,
        duration,
    )


def failed(
    error_code: str,
    error_message: str,
    at: float,
    attempt: Attempt | None = None,
    aggregated: bool = False,
) -> Resolution:
    """A record that failed for good (``attempt``: the last, failed one, if any)."""
    return (False, None, None, aggregated, at, error_code, error_message, attempt, None, None, None)


def resolution_attempt(res: Resolution) -> Attempt | None:
    """The attempt that resolved the record, if a request did."""
    attempt = res[R_ATTEMPT]
    if attempt is None and res[R_START] is not None:
        attempt = _new_attempt(Attempt, (res[R_START], res[9], res[10], True, None, None, False))
    return attempt
