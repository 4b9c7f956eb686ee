"""The event-loop side of :class:`~kinesis_trio.SyncProducer`: its main task, the pump
that feeds the Producer in order, the resolver that settles the futures in batches, and
the delivery of failed records to ``on_failure``."""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future

import anyio
import anyio.abc
import anyio.lowlevel
import sniffio

from ._config import ProducerConfig
from ._failures import FailedRecord
from ._logging import get_logger
from ._outcome import ABORTED, CLOSE_TIMEOUT, Outcome, RecordResult
from ._producer import Producer

_log = get_logger("kinesis_trio.producer")

_NEW, _OPEN, _CLOSING, _CLOSED = 0, 1, 2, 3
#: The pump yields to the loop after this many records, so responses get processed.
_PUMP_YIELD_EVERY = 512
#: While the oldest outcome is unresolved, look for resolved ones behind it this often (s).
_SWEEP_INTERVAL = 0.05


class SyncProducerAbort(Exception):
    """Raised inside the background Producer's scope to abort it (a failed ``with`` block,
    ``close(abort=True)`` or a close that ran out of ``close_timeout``); never reaches you."""


class _Item:
    """One record on its way: queued here, then in the producer, then settled."""

    __slots__ = (
        "data",
        "epoch",
        "explicit_hash_key",
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
        self.epoch = 0
        self.outcome: Outcome | None = None


_FLUSH = _Item(None, "", None, None, 0)
"""Queue marker: ask the producer to flush once the records queued before it are in."""


class _LoopSide:
    """The tasks SyncProducer runs on its background event loop."""

    # The caller-side state they share (see SyncProducer.__init__), guarded by _cond.
    _producer: Producer
    _config: ProducerConfig
    _default_stream: str | None
    _cond: threading.Condition
    _state: int
    _queue: collections.deque[_Item]
    _outstanding_records: int
    _outstanding_bytes: int
    _waiters: int
    _epoch_counts: dict[int, int]
    _pump_idle: bool
    _abort: bool
    _abort_reason: str
    _timed_out: bool
    _error: BaseException | None
    # Loop-side state (touched only on the producer's thread).
    _waiting: collections.deque[_Item]
    _pump_event: anyio.Event | None
    _resolver_event: anyio.Event | None
    _close_event: anyio.Event | None
    _tg: anyio.abc.TaskGroup | None
    _call_soon: Callable[[Callable[[], object]], object] | None
    _loop_thread: int
    _on_failure: Callable[[FailedRecord], object] | None
    #: records failed here, never handed to the Producer (queued when it closed)
    _unsent_failures: collections.deque[FailedRecord]
    _failure_caller: _CallbackThread | None

    async def _run(self, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        """The main task: the producer's scope, the pump and the resolver."""
        if sniffio.current_async_library() == "trio":
            import trio

            token = trio.lowlevel.current_trio_token()
            self._call_soon = token.run_sync_soon
        else:
            import asyncio

            self._call_soon = asyncio.get_running_loop().call_soon_threadsafe
        self._loop_thread = threading.get_ident()
        self._close_event = anyio.Event()
        self._pump_event = anyio.Event()
        self._resolver_event = anyio.Event()
        producer = self._producer
        try:
            async with producer:
                async with anyio.create_task_group() as tg:
                    self._tg = tg
                    pumped = anyio.Event()
                    tg.start_soon(self._resolver)
                    tg.start_soon(self._pump, producer, pumped)
                    if self._on_failure is not None:
                        tg.start_soon(self._deliver_failures, producer)
                    task_status.started()
                    await self._close_event.wait()
                    if not self._abort:
                        with anyio.move_on_after(self._config.close_timeout) as scope:
                            await pumped.wait()
                            await producer.flush()
                        self._timed_out = scope.cancelled_caught
                    tg.cancel_scope.cancel()
                if self._abort:
                    raise SyncProducerAbort(
                        f"the SyncProducer was closed by {self._abort_reason}"[:150]
                    )
                if self._timed_out:
                    raise SyncProducerAbort(
                        f"not confirmed within close_timeout ({self._config.close_timeout} s)"
                    )
        except SyncProducerAbort:
            pass
        except BaseException as exc:
            self._error = exc
            raise
        finally:
            self._finish()
            if self._on_failure is not None:
                # the failures the close made (and any not delivered yet), then the records
                # that never reached the producer
                await self._deliver_failures(producer)

    async def _deliver_failures(self, producer: Producer) -> None:
        """Hand each failed record to ``on_failure`` in its thread, one call at a time.
        Cancelled, it loses no record: the rest are delivered after the close."""
        caller = self._failure_caller
        if caller is None:
            assert self._call_soon is not None
            caller = self._failure_caller = _CallbackThread(self._call_on_failure, self._call_soon)
        async for record in producer.failures():
            await caller.call(record)
        if self._state == _CLOSED:  # after the close: the last ones, then the thread ends
            while self._unsent_failures:
                await caller.call(self._unsent_failures.popleft())
            await caller.stop()

    def _call_on_failure(self, record: FailedRecord) -> None:
        """In the callback's thread: the callback; what it raises is logged, not raised."""
        callback = self._on_failure
        assert callback is not None
        if self._timed_out and not self._abort and record.result.error_code == ABORTED:
            record = record._replace(
                result=record.result._replace(
                    error_code=CLOSE_TIMEOUT,
                    error_message=(
                        f"not confirmed within close_timeout ({self._config.close_timeout} s)"
                    ),
                )
            )
        try:
            callback(record)
        except Exception as exc:
            _log.error(
                "on_failure_raised",
                stream=record.stream_name,
                error_code=record.result.error_code,
                error=f"{type(exc).__name__}: {exc}"[:300],
                exc_info=True,
            )

    async def _pump(self, producer: Producer, pumped: anyio.Event) -> None:
        """Move queued records into the producer, in order."""
        queue = self._queue
        waiting = self._waiting
        cond = self._cond
        put_nowait = producer.put_nowait
        count = 0
        while True:
            if not queue:
                event = None
                with cond:
                    if not queue:
                        if self._state != _OPEN:
                            pumped.set()
                            return
                        event = self._pump_event = anyio.Event()
                        self._pump_idle = True  # the next put wakes us (_wake_pump)
                if event is not None:
                    await event.wait()
                continue
            item = queue.popleft()
            if item is _FLUSH:
                tg = self._tg
                assert tg is not None
                tg.start_soon(producer.flush)
                continue
            data = item.data
            assert data is not None
            try:
                try:
                    outcome = put_nowait(
                        data,
                        item.partition_key,
                        item.explicit_hash_key,
                        stream_name=item.stream_name,
                    )
                except anyio.WouldBlock:
                    outcome = await producer.put(
                        data,
                        item.partition_key,
                        item.explicit_hash_key,
                        stream_name=item.stream_name,
                    )
            except Exception as exc:
                item.future.set_exception(exc)
                self._release([item])
                continue
            except BaseException:
                queue.appendleft(item)  # not accepted (cancelled): _finish fails it
                raise
            item.outcome = outcome
            item.data = None
            waiting.append(item)
            resolver_event = self._resolver_event
            if resolver_event is not None:
                self._resolver_event = None
                resolver_event.set()
            count += 1
            if count >= _PUMP_YIELD_EVERY:
                count = 0
                await anyio.lowlevel.checkpoint()

    async def _resolver(self) -> None:
        """Resolve futures from outcomes: wait on the oldest, then settle what is done."""
        while True:
            waiting = self._waiting
            if not waiting:
                event = self._resolver_event = anyio.Event()
                await event.wait()
                continue
            head = waiting[0].outcome
            assert head is not None
            if not head.done():
                with anyio.move_on_after(_SWEEP_INTERVAL):
                    await head.wait()
                if not head.done():
                    # Every outcome in the line not counted outstanding by the producer is
                    # resolved: look for those only when there are some.
                    if len(waiting) > self._producer.outstanding_records:
                        self._sweep()
                    continue
            batch: list[_Item] = []
            while waiting and waiting[0].outcome.done():  # type: ignore[union-attr]
                batch.append(waiting.popleft())
            self._settle(batch)
            await anyio.lowlevel.checkpoint()

    def _sweep(self) -> None:
        """Settle every resolved outcome, wherever it is in the waiting line."""
        done: list[_Item] = []
        keep: collections.deque[_Item] = collections.deque()
        for item in self._waiting:
            (done if item.outcome.done() else keep).append(item)  # type: ignore[union-attr]
        if done:
            self._waiting.clear()  # in place: the pump holds this deque
            self._waiting.extend(keep)
            self._settle(done)

    def _settle(self, items: Sequence[_Item]) -> None:
        rewrite = self._timed_out
        for item in items:
            outcome = item.outcome
            assert outcome is not None
            result = outcome.result()
            if rewrite and result.error_code == ABORTED:
                result = result._replace(
                    error_code=CLOSE_TIMEOUT,
                    error_message=(
                        f"not confirmed within close_timeout ({self._config.close_timeout} s)"
                    ),
                )
            item.future.set_result(result)
        self._release(items)

    def _release(self, items: Sequence[_Item]) -> None:
        """Take settled records off the books; wake waiting putters and flushers."""
        if not items:
            return
        size = 0
        epochs: dict[int, int] = {}
        for item in items:
            size += item.size
            epochs[item.epoch] = epochs.get(item.epoch, 0) + 1
        with self._cond:
            self._outstanding_records -= len(items)
            self._outstanding_bytes -= size
            counts = self._epoch_counts
            for epoch, n in epochs.items():
                left = counts[epoch] - n
                if left:
                    counts[epoch] = left
                else:
                    del counts[epoch]
            if self._waiters:
                self._cond.notify_all()

    def _finish(self) -> None:
        """After the producer's scope: settle everything still on the books."""
        with self._cond:
            self._state = _CLOSED
            leftovers = list(self._queue)
            self._queue.clear()
            self._cond.notify_all()
        settled = [i for i in self._waiting if i.outcome is not None and i.outcome.done()]
        self._settle(settled)
        unresolved = [i for i in self._waiting if not i.future.done()]
        self._waiting.clear()
        leftovers = [i for i in leftovers if i is not _FLUSH] + unresolved
        if not leftovers:
            return
        if self._timed_out and not self._abort:
            code = CLOSE_TIMEOUT
            message = f"not confirmed within close_timeout ({self._config.close_timeout} s)"
        else:
            code = ABORTED
            why = self._abort_reason
            if not self._abort:
                error = self._error
                why = f"{type(error).__name__}: {error}"[:150] if error else "producer failed"
            message = f"the SyncProducer was closed ({why}) before the record was sent"
        now = anyio.current_time()
        default = self._default_stream or ""
        for item in leftovers:
            result = RecordResult(
                False,
                item.stream_name or default,
                item.partition_key,
                None,
                None,
                None,
                (),
                code,
                message,
                now,
                now,
            )
            item.future.set_result(result)
            if self._on_failure is not None and item.data is not None:
                self._unsent_failures.append(
                    FailedRecord(
                        item.data,
                        item.partition_key,
                        item.explicit_hash_key,
                        result.stream_name,
                        result,
                    )
                )
        self._release(leftovers)


class _CallbackThread:
    """The thread ``on_failure`` runs in: one of its own, for one call at a time, ended at
    the close (a slow callback never holds up the event loop)."""

    def __init__(
        self,
        callback: Callable[[FailedRecord], None],
        call_soon: Callable[[Callable[[], object]], object],
    ) -> None:
        self._callback = callback
        self._call_soon = call_soon
        self._cond = threading.Condition(threading.Lock())
        self._slot: FailedRecord | None = None
        self._stopping = False
        self._done: anyio.Event | None = None  # the call under way (loop side)
        self._thread = threading.Thread(
            target=self._main, name="kinesis-trio-on-failure", daemon=True
        )
        self._thread.start()

    async def _idle(self) -> None:
        # A call handed over by a cancelled caller still runs: wait for it first.
        while self._done is not None:
            await self._done.wait()

    async def call(self, record: FailedRecord) -> None:
        """Run the callback with ``record`` in the thread; return when it has returned."""
        await self._idle()
        done = self._done = anyio.Event()
        with self._cond:
            self._slot = record
            self._cond.notify()
        await done.wait()

    async def stop(self) -> None:
        """After the last call: end the thread."""
        await self._idle()
        with self._cond:
            self._stopping = True
            self._cond.notify()
        self._thread.join()  # it is idle: it ends at once

    def _finished(self) -> None:  # on the loop
        done, self._done = self._done, None
        if done is not None:
            done.set()

    def _main(self) -> None:
        while True:
            with self._cond:
                while self._slot is None and not self._stopping:
                    self._cond.wait()
                record, self._slot = self._slot, None
            if record is None:
                return
            self._callback(record)
            try:
                self._call_soon(self._finished)
            except RuntimeError:  # the loop is gone (abandoned): nobody waits any more
                return
