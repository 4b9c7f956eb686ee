"""The line between :class:`~kinesis_trio.SyncProducer`'s callers and its event loop: the
records queued for the pump, the backpressure books and the flush epochs, all guarded by
one lock, and the way to wake the pump. Any thread; one owner for each of its fields."""

from __future__ import annotations

import collections
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import Future

import anyio

from .._errors import ProducerClosedError, ProducerForkedError, SpoolWriteError
from .._results import RecordResult
from ._outcome import Outcome

__all__ = ["CLOSED", "CLOSING", "FLUSH", "NEW", "OPEN", "Item", "Line", "await_durable", "is_mark"]

NEW, OPEN, CLOSING, CLOSED, FORKED = 0, 1, 2, 3, 4


class Item:
    """One record on its way: queued here, then in the producer, then settled."""

    __slots__ = (
        "data",
        "durable",
        "explicit_hash_key",
        "flush_epoch",
        "future",
        "outcome",
        "partition_key",
        "size",
        "stream_name",
    )

    def __init__(
        self,
        data: bytes | None,
        partition_key: str | None,
        explicit_hash_key: str | None,
        stream_name: str | None,
        size: int,
    ) -> None:
        self.data = data
        self.partition_key = partition_key
        self.explicit_hash_key = explicit_hash_key
        self.stream_name = stream_name
        self.size = size
        self.future: Future[RecordResult] = Future()
        self.future.set_running_or_notify_cancel()  # accepted: cancel() can't withdraw it
        #: the flush epoch it was accepted in (set by the line)
        self.flush_epoch = 0
        self.outcome: Outcome | None = None
        #: set when its record is in the spool, or resolved (``spool_sync="put"``, and
        #: the marks of ``wait_durable``); ``None``: nobody waits for that
        self.durable: Future[None] | None = None

    def wants_durable(self) -> Future[None]:
        """The caller will wait until the record is in the spool (or resolved)."""
        durable = self.durable = Future()
        durable.set_running_or_notify_cancel()
        return durable

    def sent(self, outcome: Outcome) -> None:
        """In the producer now: its outcome; the data is the producer's to keep."""
        self.outcome = outcome
        self.data = None


FLUSH = Item(None, "", None, None, 0)
"""Queue marker: ask the producer to flush once the records queued before it are in."""


def await_durable(items: Sequence[Item]) -> None:
    """Until the last of ``items`` (queued in order) is in the spool or resolved; a failed
    write raises ``SpoolWriteError`` carrying the futures of those accepted."""
    durable = items[-1].durable
    assert durable is not None
    try:
        durable.result()
    except SpoolWriteError as exc:
        futures = [item.future for item in items if item.outcome is not None]
        if not futures:  # none was accepted: their futures say why
            return
        raise SpoolWriteError(
            f"the record{'s were' if len(items) > 1 else ' was'} accepted and will be "
            f"sent, but writing to the spool failed ({exc}): not durable",
            futures[0] if len(items) == 1 else futures,
        ) from exc


def is_mark(item: Item) -> bool:
    """A queue marker (a flush, a wait for durability), not a record."""
    return item.data is None and item.outcome is None


class Line:
    """The queue to the pump and the books of outstanding records (guarded by ``cond``)."""

    __slots__ = (
        "abort",
        "abort_reason",
        "call_soon",
        "cond",
        "deferred",
        "epoch",
        "epoch_counts",
        "forked_message",
        "loop_thread",
        "max_bytes",
        "max_records",
        "outstanding_bytes",
        "outstanding_records",
        "pump_event",
        "pump_idle",
        "queue",
        "state",
        "waiters",
    )

    def __init__(self, max_records: int, max_bytes: int) -> None:
        self.max_records = max_records
        self.max_bytes = max_bytes
        self.cond = threading.Condition(threading.Lock())
        self.state = NEW
        self.queue: collections.deque[Item] = collections.deque()
        self.outstanding_records = 0
        self.outstanding_bytes = 0
        self.waiters = 0
        #: records accepted now belong to this flush epoch; counts[epoch]: those unsettled
        self.epoch = 0
        self.epoch_counts: dict[int, int] = {}
        self.pump_idle = False
        self.pump_event: anyio.Event | None = None
        self.abort = False
        self.abort_reason = "close(abort=True)"
        #: the event loop's thread and how to run a call on it (set once it runs)
        self.call_soon: Callable[[Callable[[], object]], object] | None = None
        #: a call for the loop that waits for the next record: the pump makes it before
        #: it takes that record into the producer (``defer``)
        self.deferred: Callable[[], object] | None = None
        self.loop_thread = 0
        self.forked_message = ""

    # -- state ----------------------------------------------------------------------------

    def start(self) -> None:
        """Open the line; once only."""
        with self.cond:
            if self.state != NEW:
                raise RuntimeError("a SyncProducer can be opened only once")
            self.state = OPEN

    def bind(self, call_soon: Callable[[Callable[[], object]], object]) -> None:
        """On the event loop, as it starts: the loop's thread and its ``call_soon``."""
        self.call_soon = call_soon
        self.loop_thread = threading.get_ident()
        self.pump_event = anyio.Event()

    def unbind(self) -> None:
        """The loop's thread has ended: a thread started later may get its ident, and must
        not be taken for it."""
        self.loop_thread = 0
        self.call_soon = None

    def shut(self) -> None:
        """Closed without a loop to settle anything (never opened, failed to open, or in a
        forked child)."""
        with self.cond:
            if self.state != FORKED:
                self.state = CLOSED

    def forked(self, message: str) -> None:
        """In a child forked from the process that opened it: the loop's thread does not
        exist here and the records queued are the parent's. Every call raises from now
        (``message``). The lock is made anew: a thread of the parent may have held it at
        the fork, and no thread here would ever release it."""
        self.cond = threading.Condition(threading.Lock())
        self.state = FORKED
        self.forked_message = message
        self.queue = collections.deque()
        self.outstanding_records = 0
        self.outstanding_bytes = 0
        self.waiters = 0
        self.epoch_counts = {}
        self.call_soon = None

    def close(self, abort: bool, reason: str | None) -> None:
        """Take no more records (with ``abort``: fail the unconfirmed ones); wake waiting
        putters (they raise) and the pump (it ends once the queue is empty)."""
        with self.cond:
            if self.state == OPEN:
                self.state = CLOSING
            if abort and not self.abort:
                self.abort = True
                self.abort_reason = reason or "close(abort=True)"
            self.cond.notify_all()
            self._wake_pump()

    def take_records(self) -> list[Item]:
        """On the loop, as it closes (no record is added now): the records still queued,
        in order, off the queue (the marks stay: the close answers them)."""
        with self.cond:
            queue = self.queue
            records = [item for item in queue if not is_mark(item)]
            if records:
                marks = [item for item in queue if is_mark(item)]
                queue.clear()
                queue.extend(marks)
        return records

    def finish(self) -> list[Item]:
        """On the loop, after the producer's scope: closed; the records still queued."""
        with self.cond:
            self.state = CLOSED
            leftovers = list(self.queue)
            self.queue.clear()
            self.cond.notify_all()
        return leftovers

    # -- the callers' side ----------------------------------------------------------------

    def add(self, item: Item, timeout: float | None) -> None:
        """Accept a record once it fits (``TimeoutError`` after ``timeout`` seconds)."""
        size = item.size
        with self.cond:
            if not (
                self.state == OPEN
                and self.outstanding_records < self.max_records
                and self.outstanding_bytes + size <= self.max_bytes
            ):
                self._wait_room(size, timeout)
            self.outstanding_records += 1
            self.outstanding_bytes += size
            epoch = item.flush_epoch = self.epoch
            counts = self.epoch_counts
            counts[epoch] = counts.get(epoch, 0) + 1
            self.queue.append(item)
            if self.pump_idle:
                self._wake_pump()

    def add_many(self, items: Sequence[Item]) -> None:
        """Accept records in order, with one lock acquisition per run of records that fit."""
        with self.cond:
            self._add_locked(items)
            if self.pump_idle:
                self._wake_pump()

    def add_many_and_flush(self, items: Sequence[Item], timeout: float | None) -> None:
        """``add_many(items)`` then ``flush(timeout)`` under one lock: one wake-up of the
        pump, which finds the records and the flush behind them together (not the records,
        then a wake-up of its own for the flush once it went idle again)."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self.cond:
            self._add_locked(items)
            self._flush_locked(deadline, timeout)

    def _add_locked(self, items: Sequence[Item]) -> None:
        """``add_many``, holding ``cond`` (waking the pump only to wait for room)."""
        i, n = 0, len(items)
        while i < n:
            item = items[i]
            size = item.size
            if not (
                self.state == OPEN
                and self.outstanding_records < self.max_records
                and self.outstanding_bytes + size <= self.max_bytes
            ):
                if self.pump_idle:
                    self._wake_pump()
                self._wait_room(size, None)
            self.outstanding_records += 1
            self.outstanding_bytes += size
            epoch = item.flush_epoch = self.epoch
            self.epoch_counts[epoch] = self.epoch_counts.get(epoch, 0) + 1
            self.queue.append(item)
            i += 1

    def defer(self, fn: Callable[[], object]) -> None:
        """Have the loop call ``fn`` before it takes the next record queued (not at once:
        it rides on the wake-up that record brings, no hand-off of its own)."""
        with self.cond:
            self.deferred = fn

    def take_deferred(self) -> Callable[[], object] | None:
        """On the loop: the deferred call, now to be made (``None``: there is none)."""
        with self.cond:
            fn, self.deferred = self.deferred, None
        return fn

    def cancel_deferred(self) -> bool:
        """Withdraw the deferred call; True if it was still to be made."""
        with self.cond:
            fn, self.deferred = self.deferred, None
        return fn is not None

    def not_on_loop(self, call: str) -> None:
        """Refuse a wait for the spool on the loop's own thread (it would never end)."""
        if self.loop_thread == threading.get_ident():
            raise RuntimeError(
                f"{call} from the producer's own thread (a future's callback) would wait for "
                "the spool: it would never be written"
            )

    def _wait_room(self, size: int, timeout: float | None) -> None:
        """Wait (holding ``cond``) until the record fits; raise if closed or timed out."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            if self.state != OPEN:
                if self.state == FORKED:
                    raise ProducerForkedError(self.forked_message)
                raise ProducerClosedError(
                    "the SyncProducer is not open: use `with SyncProducer(...)` or open()"
                    if self.state == NEW
                    else "the SyncProducer is closed"
                )
            if (
                self.outstanding_records < self.max_records
                and self.outstanding_bytes + size <= self.max_bytes
            ):
                return
            if self.loop_thread == threading.get_ident():
                raise RuntimeError(
                    "put() from the producer's own thread (a future's callback) would wait "
                    "for room: it would never get it"
                )
            remaining = None
            if deadline is not None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError(
                        f"no room for the record within {timeout} s (backpressure: "
                        f"{self.outstanding_records} records, {self.outstanding_bytes} bytes "
                        "outstanding); it was not accepted"
                    )
            self._wait(remaining)

    def flush(self, timeout: float | None) -> None:
        """Queue a flush; return when every record accepted before it is settled."""
        deadline = None if timeout is None else time.monotonic() + timeout
        with self.cond:
            self._flush_locked(deadline, timeout)

    def _flush_locked(self, deadline: float | None, timeout: float | None) -> None:
        """``flush``, holding ``cond``: queue the flush and wake the pump if idle, then
        wait until every record accepted before it is settled."""
        if self.state == FORKED:
            raise ProducerForkedError(self.forked_message)
        target = self.epoch
        counts = self.epoch_counts
        if not counts:
            return
        self.epoch += 1
        if self.state == OPEN:
            self.queue.append(FLUSH)
            if self.pump_idle:
                self._wake_pump()
        while counts and min(counts) <= target:
            remaining = None
            if deadline is not None:
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    left = sum(n for e, n in counts.items() if e <= target)
                    raise TimeoutError(f"flush: {left} records not resolved within {timeout} s")
            self._wait(remaining)

    def durable_mark(self) -> Future[None] | None:
        """Queue a mark that is done once every record accepted before it is in the spool
        (or resolved); ``None`` when there is nothing to wait for. While the producer
        closes too: the pump or the close answers it (the close once its last commit ran)."""
        with self.cond:
            if self.state == FORKED:
                raise ProducerForkedError(self.forked_message)
            if self.state not in (OPEN, CLOSING) or not self.epoch_counts:
                return None  # nothing accepted is unsettled (closed: the close settled all)
            mark = Item(None, "", None, None, 0)
            durable = mark.wants_durable()
            self.queue.append(mark)
            if self.pump_idle:
                self._wake_pump()
        return durable

    def _wait(self, timeout: float | None) -> None:
        self.waiters += 1
        try:
            self.cond.wait(timeout)
        finally:
            self.waiters -= 1

    # -- the loop's side ------------------------------------------------------------------

    def idle(self) -> anyio.Event:
        """The pump found the queue empty (call holding ``cond``, on the loop): the event
        the next record sets."""
        event = self.pump_event = anyio.Event()
        self.pump_idle = True
        return event

    def _wake_pump(self) -> None:
        """Wake the idle pump (call holding ``cond``; from any thread)."""
        self.pump_idle = False
        event = self.pump_event
        call_soon = self.call_soon
        if event is not None and call_soon is not None:
            call_soon(event.set)

    def release(self, items: Sequence[Item]) -> None:
        """Take settled records off the books; wake waiting putters and flushers."""
        if not items:
            return
        size = 0
        epochs: dict[int, int] = {}
        for item in items:
            size += item.size
            epochs[item.flush_epoch] = epochs.get(item.flush_epoch, 0) + 1
        with self.cond:
            self.outstanding_records -= len(items)
            self.outstanding_bytes -= size
            counts = self.epoch_counts
            for epoch, n in epochs.items():
                left = counts[epoch] - n
                if left:
                    counts[epoch] = left
                else:
                    del counts[epoch]
            if self.waiters:
                self.cond.notify_all()
