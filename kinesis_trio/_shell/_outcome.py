"""Outcome: the pending result of one accepted record, as users hold it."""

from __future__ import annotations

import asyncio
import sys
from typing import Any

import sniffio

from .._core import Record, Waker
from .._results import R_ERROR_CODE, R_OK, RecordResult

__all__ = ["Outcome"]


class _Parked:
    """One trio task waiting for a record: woken by the record's resolution
    (:meth:`set`), or gone if cancelled first (:meth:`abort`).

    A ``trio.Event`` per waiting record was the event, its set of tasks, its ``wait``
    coroutine and an abort closure with two cells: each of them one more object for the
    garbage collector to walk and promote while the record is in flight, and with a task
    per record (a web handler's shape) the collector's passes follow the objects made per
    record. This is one object; ``abort`` is its bound method.
    """

    __slots__ = ("record", "task")

    def __init__(self, record: Record, task: Any) -> None:
        self.record = record
        self.task = task

    def set(self) -> None:
        task = self.task
        if task is not None:
            self.task = None
            _trio_reschedule(task)

    def abort(self, _raise_cancel: object) -> Any:
        """Cancelled while parked: leave the record as it was before this waiter."""
        self.task = None
        self.record.unwake(self)
        return _trio_abort_succeeded


class _Future(asyncio.Future[None]):
    """One asyncio waiter: its own future (cancelling a waiter cancels only its own),
    resolved by the record's resolution. An ``asyncio.Event`` was the event, its deque,
    this future and its ``wait`` coroutine."""

    __slots__ = ()

    def set(self) -> None:
        if not self.done():
            self.set_result(None)


class _Fan(list[Waker]):
    """Several waiters on one record (rare): each is woken."""

    __slots__ = ()

    def set(self) -> None:
        for waker in self:
            waker.set()


def _leave(record: Record, waker: Waker) -> None:
    """Leave ``waker`` on ``record``, beside any waiter already there."""
    present = record.waker
    if present is None:
        record.wake_with(waker)
    elif isinstance(present, _Fan):
        present.append(waker)
    else:
        record.wake_with(_Fan((present, waker)))


_trio_reschedule: Any = None
_trio_abort_succeeded: Any = None
_trio_wait: Any = None
_trio_current_task: Any = None


def _trio_parts() -> None:
    """Trio is running here, so imported: its parts are looked up rather than imported
    with this module, so that an asyncio application does not load it (about 5,000
    objects more for every full collection once the rest of the package is imported)."""
    global _trio_reschedule, _trio_abort_succeeded, _trio_wait, _trio_current_task
    lowlevel = sys.modules["trio"].lowlevel
    _trio_reschedule = lowlevel.reschedule
    _trio_abort_succeeded = lowlevel.Abort.SUCCEEDED
    _trio_wait = lowlevel.wait_task_rescheduled
    _trio_current_task = lowlevel.current_task


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
            if sniffio.current_async_library() == "trio":
                if _trio_wait is None:
                    _trio_parts()
                parked = _Parked(self, _trio_current_task())
                _leave(self, parked)
                await _trio_wait(parked.abort)
            else:
                future = _Future()
                _leave(self, future)
                try:
                    await future
                except BaseException:
                    self.unwake(future)
                    raise
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
