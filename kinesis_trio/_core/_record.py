"""The core's row for each accepted record (pure, no awaits).

A :class:`Record` is everything the core keeps of one record: its bytes (until an aggregate
holds them), its keys, its size and arrival, the admission lane it is charged to, its
attempts and, once resolved, its resolution. Its fields change through its methods only.
The public :class:`~kinesis_trio.Outcome` (``_shell/_outcome.py``) extends it with
``wait()`` and ``result()``; the engine makes the class it is given (``Engine(make=...)``),
so the producer keeps one object per record.

:meth:`Record.resolve` is the one place the core wakes anything: it sets the waker a waiter
left (:meth:`Record.wake_with`, an event of the waiter's event loop), so that a record's
waiter wakes without a message per record. ``_core/_ledger.py`` is its only caller.
"""

from __future__ import annotations

from typing import Any, Protocol

from .._results import (
    R_AGGREGATED,
    R_AT,
    R_ATTEMPT,
    R_ERROR_CODE,
    R_ERROR_MESSAGE,
    R_OK,
    R_SEQUENCE_NUMBER,
    R_SHARD_ID,
    R_START,
    Attempt,
    RecordResult,
    Resolution,
    _new_attempt,
    _new_result,
)

__all__ = ["Record", "Waker", "sealed_into"]


class Waker(Protocol):
    """What a waiter leaves on a record to be woken by its resolution (an event)."""

    def set(self) -> None: ...


class Record:
    """One accepted record as the core keeps it; resolved exactly once."""

    __slots__ = (
        "agg",
        "arrival",
        "attempts",
        "data",
        "epoch",
        "explicit_hash_key",
        "hash_key",
        "lane",
        "partition_key",
        "resolution",
        "size",
        "stream",
        "sub",
        "waker",
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
        #: its bytes, or None while an aggregate holds them (``agg``) and once resolved
        self.data: bytes | None = data
        #: its partition key (None: put without one to an ``AUTO`` stream, until keyed)
        self.partition_key: str | None = partition_key
        self.explicit_hash_key: str | None = explicit_hash_key
        self.hash_key: int = hash_key
        #: data + partition key, in bytes
        self.size: int = size
        #: when it was accepted (the producer's clock)
        self.arrival: float = arrival
        #: the name of its stream
        self.stream: str = stream
        #: the flush epoch it was accepted in (``Ledger``)
        self.epoch: int = epoch
        self.attempts: tuple[Attempt, ...] = ()
        self.resolution: Resolution | None = None
        #: its place in its aggregate, once resolved as a member of one
        self.sub: int = 0
        #: what wakes its waiter, once one waits
        self.waker: Waker | None = None
        #: the admission lane it is charged to (``_admission.Lane``), once placed
        self.lane: Any = None
        #: the aggregate holding its data while ``data`` is None (the engine's ``KRecord``)
        self.agg: object | None = None

    def charged(self, lane: Any) -> None:
        """It is charged to admission lane ``lane`` (``_admission``)."""
        self.lane = lane

    def attempted(self, attempt: Attempt) -> None:
        """Add ``attempt`` to the record's history: the one way anything adds to it."""
        self.attempts = (*self.attempts, attempt)

    def sealed(self, aggregate: object) -> None:
        """Sealed into ``aggregate``, which holds its data from now (one copy in memory)."""
        self.data = None
        self.agg = aggregate

    def unsealed(self, data: bytes) -> None:
        """Given its data back from its aggregate (it goes another way, or fails)."""
        self.data = data
        self.agg = None

    def keyed(self, partition_key: str, hash_key: int) -> None:
        """A record put without a key was given ``partition_key`` (an ``AUTO`` stream
        switched back: Kinesis requires one)."""
        self.partition_key = partition_key
        self.hash_key = hash_key

    def waited(self, note: str) -> None:
        """Add ``note`` to the last attempt's error message (what its retry waited for)."""
        *before, last = self.attempts
        message = (last.error_message or "") + note
        self.attempts = (*before, last._replace(error_message=message))

    def done(self) -> bool:
        """True once the record's result is known."""
        return self.resolution is not None

    def result_for(self, res: Resolution) -> RecordResult:
        """What ``res`` says of the record, as users see it (``Outcome.result``, and each
        dead letter's ``FailedRecord.result``)."""
        # Built on each call rather than kept: a kept result would be one more long-lived
        # object per record for the garbage collector to walk (equal values either way).
        # resolution_attempt(), inline: this runs once per awaited record
        attempt = res[R_ATTEMPT]
        if attempt is None and res[R_START] is not None:
            attempt = _new_attempt(
                Attempt, (res[R_START], res[9], res[10], True, None, None, False)
            )
        attempts = self.attempts
        if attempt is not None:
            attempts = (*attempts, attempt) if attempts else (attempt,)
        return _new_result(
            RecordResult,
            (
                res[R_OK],
                self.stream,
                self.partition_key,
                res[R_SHARD_ID],
                res[R_SEQUENCE_NUMBER],
                self.sub if res[R_AGGREGATED] else None,
                attempts,
                res[R_ERROR_CODE],
                res[R_ERROR_MESSAGE],
                self.arrival,
                res[R_AT],
            ),
        )

    def wake_with(self, waker: Waker) -> None:
        """A waiter waits: ``waker`` is set when the record is resolved."""
        self.waker = waker

    def unwake(self, waker: Waker) -> None:
        """A waiter left (cancelled) before the resolution: forget ``waker`` if it is the
        one the record holds (one of several stays, and is set to no effect)."""
        if self.waker is waker:
            self.waker = None

    def resolve(self, resolution: Resolution, sub: int = 0) -> bool:
        """Resolve once (and wake the waiter); returns False, changing nothing, if it was
        resolved already."""
        if self.resolution is not None:
            return False
        self.resolution = resolution
        self.sub = sub
        self.data = None  # the payload is no longer needed: let it go
        self.agg = None
        waker = self.waker
        if waker is not None:
            waker.set()
        return True


def sealed_into(members: list[Record], aggregate: object, lane: Any) -> tuple[int, float]:
    """``members`` were sealed into ``aggregate``, which holds their data from now (one
    copy in memory): :meth:`Record.sealed` for each, in one call per aggregate. Those not
    charged to an admission lane yet are charged to ``lane`` (``_admission``): returns the
    bytes of the unresolved ones, for the lane to owe, and when the first member arrived
    (:meth:`Lane.sealed`)."""
    size = 0
    for o in members:
        o.data = None
        o.agg = aggregate
        if o.lane is None:
            o.lane = lane
            if o.resolution is None:
                size += o.size
    # the first was accepted first (re-routed members, which may be older, were charged
    # where they were placed: then the lane owes something and ``since`` is not used)
    return size, members[0].arrival
