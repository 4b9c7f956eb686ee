"""Outcome: the pending result of one accepted record, as users hold it."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Awaitable
from typing import Protocol

import sniffio

from .._core import Record
from .._results import R_ERROR_CODE, R_OK, RecordResult

__all__ = ["Outcome"]


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


class Outcome(Record):
    """The pending result of one accepted record; resolved exactly once.

    ``await outcome.wait()`` returns the :class:`RecordResult`. Waiting is cancel-safe:
    cancelling a waiter changes nothing for the record or for other waiters. The object is
    also the core's row for the record (``_core/_record.py``: the producer keeps no other
    per-record object; once the record is sealed into an aggregate, the aggregate holds its
    bytes instead, until it is resolved: a record that fails gets them back for its
    ``FailedRecord``), and creates its event only when somebody waits.

    ``partition_key`` is the record's partition key (``None`` for a record put without one
    to an ``AUTO`` stream; a key the producer had to give it later is shown here).
    """

    __slots__ = ()

    def result(self) -> RecordResult:
        """The result; raises ``RuntimeError`` if the record is not resolved yet."""
        res = self.resolution
        if res is None:
            raise RuntimeError("outcome not resolved yet: await outcome.wait()")
        return self.result_for(res)

    async def wait(self) -> RecordResult:
        """Wait for the result. Cancel-safe: cancelling a waiter changes nothing for the
        record or for other waiters.

        On an outcome already resolved it returns the result at once, without a checkpoint
        (like awaiting a finished asyncio future), so awaiting many finished outcomes costs
        no task switches.
        """
        res = self.resolution
        if res is None:
            event = self.waker
            if event is None:
                event = _loop_event()
                self.wake_with(event)
            await event.wait()  # type: ignore[attr-defined]
            res = self.resolution
            assert res is not None
        return self.result_for(res)

    @property
    def stream_name(self) -> str:
        """The stream the record was put to."""
        return self.stream

    def __repr__(self) -> str:
        res = self.resolution
        state = "pending" if res is None else ("ok" if res[R_OK] else f"failed {res[R_ERROR_CODE]}")
        return f"<Outcome {state} stream={self.stream!r} partition_key={self.partition_key!r}>"
