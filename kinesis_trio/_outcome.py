"""Outcome, RecordResult and Attempt: what became of each accepted record."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable
from typing import Any, Final, NamedTuple, Protocol

import sniffio

__all__ = ["Attempt", "Outcome", "RecordResult"]

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


class _Event(Protocol):
    def set(self) -> None: ...

    def wait(self) -> Awaitable[object]: ...


def _loop_event() -> _Event:
    """The running event loop's own event (``trio.Event`` or ``asyncio.Event``).

    ``anyio.Event`` wraps exactly these; the wrapper is one more object per waiting record,
    alive while it waits, for the garbage collector to walk, and a backend lookup more per
    wait (measured in benchmarks/results/gc.md). Both are cancel-safe the same way: a
    cancelled waiter leaves the event and the other waiters as they were. Trio is running
    here, so imported: it is looked up rather than imported with this module, so that an
    asyncio application does not load it (about 5,000 objects more for every full collection
    once the rest of the package is imported).
    """
    if sniffio.current_async_library() == "trio":
        event: _Event = sys.modules["trio"].Event()
        return event
    return asyncio.Event()


class Outcome:
    """The pending result of one accepted record; resolved exactly once.

    ``await outcome.wait()`` returns the :class:`RecordResult`. Waiting is cancel-safe:
    cancelling a waiter changes nothing for the record or for other waiters. The object also
    carries the record itself (the producer keeps no other per-record object; once the record
    is sealed into an aggregate, the aggregate holds its bytes instead, until it is resolved:
    a record that fails gets them back for its ``FailedRecord``),
    and creates its event only when somebody waits.
    """

    __slots__ = (
        "_agg",
        "_arrival",
        "_attempts",
        "_data",
        "_epoch",
        "_event",
        "_explicit_hash_key",
        "_hash_key",
        "_lane",
        "_partition_key",
        "_resolution",
        "_size",
        "_stream",
        "_sub",
    )

    def __init__(
        self,
        data: bytes,
        partition_key: str | None,
        explicit_hash_key: str | None,
        hash_key: int,
        size: int,
        arrival: float,
        stream: str,
        epoch: int,
    ) -> None:
        self._data: bytes | None = data
        self._partition_key = partition_key
        self._explicit_hash_key = explicit_hash_key
        self._hash_key = hash_key
        self._size = size
        self._arrival = arrival
        self._stream = stream
        self._epoch = epoch
        self._attempts: tuple[Attempt, ...] = ()
        self._resolution: Resolution | None = None
        self._sub = 0
        self._event: _Event | None = None
        #: the admission lane it is charged to (``_core._admission.Lane``), once placed
        self._lane: Any = None
        #: the aggregate holding its data while ``_data`` is None (sealed into it: the
        #: engine's ``KRecord``, which this module does not need to know)
        self._agg: object | None = None

    def _charged(self, lane: Any) -> None:
        """It is charged to admission lane ``lane`` (``_core._admission``)."""
        self._lane = lane

    def _attempted(self, attempt: Attempt) -> None:
        """Add ``attempt`` to the record's history: the one way anything adds to it."""
        self._attempts = (*self._attempts, attempt)

    def _sealed(self, aggregate: object) -> None:
        """Sealed into ``aggregate``, which holds its data from now (one copy in memory)."""
        self._data = None
        self._agg = aggregate

    def _unsealed(self, data: bytes) -> None:
        """Given its data back from its aggregate (it goes another way, or fails)."""
        self._data = data
        self._agg = None

    def _keyed(self, partition_key: str, hash_key: int) -> None:
        """A record put without a key was given ``partition_key`` (an ``AUTO`` stream
        switched back: Kinesis requires one)."""
        self._partition_key = partition_key
        self._hash_key = hash_key

    def _waited(self, note: str) -> None:
        """Add ``note`` to the last attempt's error message (what its retry waited for)."""
        *before, last = self._attempts
        message = (last.error_message or "") + note
        self._attempts = (*before, last._replace(error_message=message))

    def done(self) -> bool:
        """True once the record's result is known."""
        return self._resolution is not None

    def result(self) -> RecordResult:
        """The result; raises ``RuntimeError`` if the record is not resolved yet."""
        res = self._resolution
        if res is None:
            raise RuntimeError("outcome not resolved yet: await outcome.wait()")
        return self._result(res)

    async def wait(self) -> RecordResult:
        """Wait for the result. Cancel-safe: cancelling a waiter changes nothing for the
        record or for other waiters.

        On an outcome already resolved it returns the result at once, without a checkpoint
        (like awaiting a finished asyncio future), so awaiting many finished outcomes costs
        no task switches.
        """
        res = self._resolution
        if res is None:
            event = self._event
            if event is None:
                event = self._event = _loop_event()
            await event.wait()
            res = self._resolution
            assert res is not None
        return self._result(res)

    def _result(self, res: Resolution) -> RecordResult:
        # Built on each call rather than kept: a kept result would be one more long-lived
        # object per record for the garbage collector to walk (equal values either way).
        # resolution_attempt(), inline: this runs once per awaited record
        attempt = res[R_ATTEMPT]
        if attempt is None and res[R_START] is not None:
            attempt = _new_attempt(
                Attempt, (res[R_START], res[9], res[10], True, None, None, False)
            )
        attempts = self._attempts
        if attempt is not None:
            attempts = (*attempts, attempt) if attempts else (attempt,)
        return _new_result(
            RecordResult,
            (
                res[R_OK],
                self._stream,
                self._partition_key,
                res[R_SHARD_ID],
                res[R_SEQUENCE_NUMBER],
                self._sub if res[R_AGGREGATED] else None,
                attempts,
                res[R_ERROR_CODE],
                res[R_ERROR_MESSAGE],
                self._arrival,
                res[R_AT],
            ),
        )

    @property
    def stream_name(self) -> str:
        """The stream the record was put to."""
        return self._stream

    @property
    def partition_key(self) -> str | None:
        """The record's partition key (``None`` for a record put without one to an ``AUTO``
        stream; a key the producer had to give it later is shown here)."""
        return self._partition_key

    def __repr__(self) -> str:
        res = self._resolution
        state = "pending" if res is None else ("ok" if res[R_OK] else f"failed {res[R_ERROR_CODE]}")
        return f"<Outcome {state} stream={self._stream!r} partition_key={self._partition_key!r}>"

    # -- producer side -------------------------------------------------------------------

    def _resolve(self, resolution: Resolution, sub: int = 0) -> bool:
        """Resolve once; returns False (and changes nothing) if already resolved."""
        if self._resolution is not None:
            return False
        self._resolution = resolution
        self._sub = sub
        self._data = None  # the payload is no longer needed: let it go
        self._agg = None
        event = self._event
        if event is not None:
            event.set()
        return True


def sealed_into(members: list[Outcome], aggregate: object, lane: Any) -> tuple[int, float]:
    """``members`` were sealed into ``aggregate``, which holds their data from now (one
    copy in memory): ``Outcome._sealed`` for each, in one call per aggregate. Those not
    charged to an admission lane yet are charged to ``lane`` (``_core._admission``):
    returns the bytes of the unresolved ones, for the lane to owe, and when the first
    member arrived (:meth:`Lane.sealed`)."""
    size = 0
    for o in members:
        o._data = None
        o._agg = aggregate
        if o._lane is None:
            o._lane = lane
            if o._resolution is None:
                size += o._size
    # the first was accepted first (re-routed members, which may be older, were charged
    # where they were placed: then the lane owes something and ``since`` is not used)
    return size, members[0]._arrival
