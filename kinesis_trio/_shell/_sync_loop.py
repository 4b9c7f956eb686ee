"""The event-loop side of :class:`~kinesis_trio.SyncProducer`: its main task, the pump
that feeds the Producer in order from the :class:`~kinesis_trio._shell._sync_handoff.Line`, the
resolver that settles the futures in batches, and the delivery of failed records to
``on_failure`` (in a thread of its own, :class:`_CallbackThread`)."""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable, Sequence

import anyio
import anyio.abc
import anyio.lowlevel
import sniffio

from .._core import Row, kept_note, spool_note, unkept_note
from .._dead_letters import FailedRecord
from .._logging import get_logger
from .._results import ABORTED, CLOSE_TIMEOUT, RecordResult
from ._producer import Producer, _flush_begin, _flush_rest
from ._sync_handoff import CLOSED, FLUSH, OPEN, Item, Line, is_mark

__all__ = ["Loop", "SyncProducerAbort"]

_log = get_logger("kinesis_trio.producer")

#: The pump yields to the loop after this many records, so responses get processed.
_PUMP_YIELD_EVERY = 512
#: While the oldest outcome is unresolved, look for resolved ones behind it this often (s).
_SWEEP_INTERVAL = 0.05


class SyncProducerAbort(Exception):
    """Raised inside the background Producer's scope to abort it (a failed ``with`` block,
    ``close(abort=True)`` or a close that ran out of ``close_timeout``); never reaches you."""


class Loop:
    """The tasks SyncProducer runs on its background event loop (their state is touched
    only on the loop's thread; what callers share with them is on the :class:`Line`)."""

    __slots__ = (
        "_close_event",
        "_config",
        "_default_stream",
        "_durable_event",
        "_durables",
        "_error",
        "_failure_caller",
        "_flushes",
        "_handed_event",
        "_handing",
        "_kept",
        "_line",
        "_on_failure",
        "_producer",
        "_resolver_event",
        "_timed_out",
        "_unsent_failures",
        "_waiting",
    )

    def __init__(
        self,
        line: Line,
        producer: Producer,
        default_stream: str | None,
        on_failure: Callable[[FailedRecord], object] | None,
    ) -> None:
        self._line = line
        self._producer = producer
        self._config = producer.config
        self._default_stream = default_stream
        self._on_failure = on_failure
        #: the records in the producer, oldest first, until their futures are settled
        self._waiting: collections.deque[Item] = collections.deque()
        self._resolver_event: anyio.Event | None = None
        self._close_event: anyio.Event | None = None
        self._timed_out = False
        self._error: BaseException | None = None
        #: records failed here, never handed to the Producer (queued when it closed)
        self._unsent_failures: collections.deque[FailedRecord] = collections.deque()
        self._failure_caller: _CallbackThread | None = None
        #: a record is in ``on_failure`` now; the event is set when none is left to hand
        self._handing = False
        self._handed_event: anyio.Event | None = None
        #: records (and marks) in the producer whose callers wait until they are in the
        #: spool, not yet waited for; the durability task takes them all at once
        self._durables: list[Item] = []
        self._durable_event: anyio.Event | None = None
        #: the records still queued at the close, handed to the spool (``_keep_queued``),
        #: and how many of them, from the first, it took
        self._kept: tuple[list[Item], int] = ([], 0)
        #: the flushes the pump began, ended by one task (not a task each)
        self._flushes = _Flushes()

    def stop(self) -> None:
        """From a caller's thread (the close): end the main task."""
        call_soon = self._line.call_soon
        close_event = self._close_event
        assert call_soon is not None and close_event is not None
        call_soon(close_event.set)

    def _timeout_message(self) -> str:
        """Why a record failed when the close ran out of time."""
        return f"not confirmed within close_timeout ({self._config.close_timeout} s)"

    async def run(self, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        """The main task: the producer's scope, the pump and the resolver."""
        if sniffio.current_async_library() == "trio":
            import trio

            self._line.bind(trio.lowlevel.current_trio_token().run_sync_soon)
        else:
            import asyncio

            self._line.bind(asyncio.get_running_loop().call_soon_threadsafe)
        self._close_event = anyio.Event()
        self._resolver_event = anyio.Event()
        producer = self._producer
        line = self._line
        try:
            async with producer:
                async with anyio.create_task_group() as tg:
                    pumped = anyio.Event()
                    tg.start_soon(self._resolver)
                    tg.start_soon(self._pump, producer, pumped)
                    tg.start_soon(self._flushes.run, producer)
                    if self._config.spool_dir is not None:
                        tg.start_soon(self._durability, producer)
                    if self._on_failure is not None:
                        tg.start_soon(self._deliver_failures, producer)
                    task_status.started()
                    await self._close_event.wait()
                    if not line.abort:
                        with anyio.move_on_after(self._config.close_timeout) as scope:
                            await pumped.wait()
                            await producer.flush()
                            await self._failures_handed_over(producer)
                        self._timed_out = scope.cancelled_caught
                    tg.cancel_scope.cancel()
                self._keep_queued(producer)
                if line.abort:
                    raise SyncProducerAbort(
                        f"the SyncProducer was closed by {line.abort_reason}"[:150]
                    )
                if self._timed_out:
                    raise SyncProducerAbort(self._timeout_message())
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
            call_soon = self._line.call_soon
            assert call_soon is not None
            caller = self._failure_caller = _CallbackThread(self._call_on_failure, call_soon)
        feed = producer._failures
        while True:
            try:
                record, ticket = await feed.next_entry()
            except StopAsyncIteration:
                break
            self._handing = True
            try:
                await caller.call(record)
            finally:  # cancelled (the close's timeout), the close waits for it no more
                self._handing = False
            feed.settle(ticket)  # on_failure returned: a dead letter may leave the spool
            if not len(feed.buffer) and self._handed_event is not None:
                self._handed_event.set()
                self._handed_event = None
        if self._line.state == CLOSED:  # after the close: the last ones, then the thread ends
            while self._unsent_failures:
                await caller.call(self._unsent_failures.popleft())
            await caller.stop()

    async def _failures_handed_over(self, producer: Producer) -> None:
        """At a close, before the producer closes: wait until ``on_failure`` returned for
        each record failed so far, so that their dead letters leave the spool in its last
        commit (delivered after it, they would stay and be handed over again by the next
        producer). Within ``close_timeout``, as the flush."""
        if self._on_failure is None:
            return
        buffer = producer._failures.buffer
        while len(buffer) or self._handing:
            event = self._handed_event
            if event is None:
                event = self._handed_event = anyio.Event()
            await event.wait()

    def _call_on_failure(self, record: FailedRecord) -> None:
        """In the callback's thread: the callback; what it raises is logged, not raised."""
        callback = self._on_failure
        assert callback is not None
        if self._timed_out and not self._line.abort and record.result.error_code == ABORTED:
            record = record._replace(
                result=record.result._replace(
                    error_code=CLOSE_TIMEOUT, error_message=self._timeout_message()
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
        line = self._line
        queue = line.queue
        waiting = self._waiting
        cond = line.cond
        put_nowait = producer.put_nowait
        count = 0
        while True:
            if not queue:
                event = None
                with cond:
                    if not queue:
                        if line.state != OPEN:
                            pumped.set()
                            return
                        event = line.idle()  # the next put wakes us
                if event is not None:
                    await event.wait()
                continue
            item = queue.popleft()
            if line.deferred is not None:  # (the Lambda helper's resume) before the record
                deferred = line.take_deferred()
                if deferred is not None:
                    deferred()
            if item is FLUSH:
                # begun in this step (what is buffered is sealed and on its way now), its
                # wait for the outcomes left to the flusher (no task started per flush)
                self._flushes.begin(producer)
                continue
            data = item.data
            if data is None:  # wait_durable's mark: the records before it are in
                self._wants_durable(item)
                continue
            try:
                try:
                    outcome = put_nowait(
                        data,
                        item.partition_key,
                        item.explicit_hash_key,
                        stream_name=item.stream_name,
                    )
                except anyio.WouldBlock:  # no room, a stream to load: wait, but not
                    outcome = await producer._accept(  # for durability (apart, below)
                        data, item.partition_key, item.explicit_hash_key, item.stream_name
                    )
            except Exception as exc:
                item.future.set_exception(exc)
                if item.durable is not None:  # not accepted (its future says why); the
                    self._wants_durable(item)  # records before it may be: they go first
                line.release([item])
                continue
            except BaseException:
                queue.appendleft(item)  # not accepted (cancelled): _finish fails it
                raise
            item.sent(outcome)
            if item.durable is not None:
                self._wants_durable(item)
            waiting.append(item)
            resolver_event = self._resolver_event
            if resolver_event is not None:
                self._resolver_event = None
                resolver_event.set()
            count += 1
            if count >= _PUMP_YIELD_EVERY:
                count = 0
                await anyio.lowlevel.checkpoint()

    def _wants_durable(self, item: Item) -> None:
        self._durables.append(item)
        event = self._durable_event
        if event is not None:
            self._durable_event = None
            event.set()

    async def _durability(self, producer: Producer) -> None:
        """Tell the callers waiting for durability (``put`` under ``spool_sync="put"``,
        ``wait_durable``) when their records are in the spool: one wait for all the records
        moved into the producer meanwhile (they share the commits)."""
        while True:
            if not self._durables:
                event = self._durable_event = anyio.Event()
                await event.wait()
                continue
            batch, self._durables = self._durables, []
            error: Exception | None = None
            try:
                await producer.wait_durable()
            except Exception as exc:  # SpoolWriteError; the producer closed
                error = exc
            except BaseException:
                self._durables[:0] = batch  # cancelled (the close): _finish settles them
                raise
            for item in batch:
                durable = item.durable
                assert durable is not None
                if error is None:
                    durable.set_result(None)
                else:
                    durable.set_exception(error)

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
            batch: list[Item] = []
            while waiting and waiting[0].outcome.done():  # type: ignore[union-attr]
                batch.append(waiting.popleft())
            self._settle(batch)
            await anyio.lowlevel.checkpoint()

    def _sweep(self) -> None:
        """Settle every resolved outcome, wherever it is in the waiting line."""
        done: list[Item] = []
        keep: collections.deque[Item] = collections.deque()
        for item in self._waiting:
            (done if item.outcome.done() else keep).append(item)  # type: ignore[union-attr]
        if done:
            self._waiting.clear()  # in place: the pump holds this deque
            self._waiting.extend(keep)
            self._settle(done)

    def _settle(self, items: Sequence[Item]) -> None:
        rewrite = self._timed_out
        for item in items:
            outcome = item.outcome
            assert outcome is not None
            result = outcome.result()
            if rewrite and result.error_code == ABORTED:
                # what the engine said of the spool stays said (it keeps the record or not)
                note = spool_note(result.error_message)
                result = result._replace(
                    error_code=CLOSE_TIMEOUT, error_message=self._timeout_message() + note
                )
            item.future.set_result(result)
        self._line.release(items)

    def _keep_queued(self, producer: Producer) -> None:
        """The rule for the records still queued at the close (``put`` returned for them;
        the pump was held back, by a full or recovering spool, or the close was an abort):
        with a spool they get what the producer's own unresolved records get, kept in the
        spool for the next producer, in order while it has room; ``_finish`` says which
        were written, and fails the others saying why. Before the producer's last commit."""
        spooler = producer._spooler
        if spooler is None:
            return
        records = self._line.take_records()
        if not records:
            return
        default = self._default_stream or ""
        rows: list[Row] = []
        for i in records:
            assert i.data is not None  # a record, never in the producer
            rows.append(
                Row(0, i.stream_name or default, i.partition_key, i.explicit_hash_key, i.data)
            )
        self._kept = (records, spooler.keep(rows, [i.size for i in records]))

    def _finish(self) -> None:
        """After the producer's scope: settle everything still on the books."""
        leftovers = self._line.finish()
        settled = [i for i in self._waiting if i.outcome is not None and i.outcome.done()]
        self._settle(settled)
        unresolved = [i for i in self._waiting if not i.future.done()]
        self._waiting.clear()
        queued, kept = self._kept
        self._kept = ([], 0)
        durables = [
            i.durable for i in [*self._durables, *queued, *leftovers] if i.durable is not None
        ]
        self._durables = []
        # the producer's close wrote what it keeps, or failed to (then none is durable)
        spooler = self._producer._spooler
        error = spooler.closed_error() if spooler is not None else None
        if queued:
            if error is None:
                path = str(self._config.spool_dir)
                self._fail_unsent(queued[:kept], kept_note(path), kept=True)
            else:  # the last commit failed: they are not in the spool
                why = spooler.error() if spooler is not None else None
                self._fail_unsent(queued[:kept], unkept_note(why))
            room = (
                f"; the spool had no room for it (spool_max_bytes {self._config.spool_max_bytes})"
            )
            self._fail_unsent(queued[kept:], room + ": it is not kept")
        records = [i for i in leftovers if not is_mark(i)] + unresolved
        if records:
            self._fail_unsent(records)
        # Whoever waits for durability: every record has its result now
        for durable in durables:
            if durable.done():
                continue
            if error is None:
                durable.set_result(None)
            else:
                durable.set_exception(error)

    def _fail_unsent(self, leftovers: list[Item], note: str = "", kept: bool = False) -> None:
        """Fail the records the producer never had, or left unresolved; ``note`` ends the
        message; ``kept``: the spool keeps them (not failed for good: not ``on_failure``'s)."""
        if not leftovers:
            return
        line = self._line
        if self._timed_out and not line.abort:
            code = CLOSE_TIMEOUT
            message = self._timeout_message()
        else:
            code = ABORTED
            why = line.abort_reason
            if not line.abort:
                error = self._error
                why = f"{type(error).__name__}: {error}"[:150] if error else "producer failed"
            message = f"the SyncProducer was closed ({why}) before the record was sent"
        message += note
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
            if self._on_failure is not None and item.data is not None and not kept:
                self._unsent_failures.append(
                    FailedRecord(
                        item.data,
                        item.partition_key,
                        item.explicit_hash_key,
                        result.stream_name,
                        result,
                    )
                )
        line.release(leftovers)


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


class _Flushes:
    """The flushes the pump began (their targets, oldest first), each ended by one task
    once every outcome it waits for is resolved: no task is started per flush. A later
    flush's target is no earlier, so none ends later than it would in a task of its own."""

    __slots__ = ("_event", "_targets")

    def __init__(self) -> None:
        self._targets: collections.deque[int] = collections.deque()
        self._event: anyio.Event | None = None

    def begin(self, producer: Producer) -> None:
        """On the loop, in the pump's step: begin a flush (what is buffered is sealed and
        on its way now); :meth:`run` ends it."""
        self._targets.append(_flush_begin(producer))
        event = self._event
        if event is not None:
            self._event = None
            event.set()

    async def run(self, producer: Producer) -> None:
        """The task that ends the flushes begun. Cancelled (the close), it ends those left."""
        targets = self._targets
        try:
            while True:
                if not targets:
                    event = self._event = anyio.Event()
                    await event.wait()
                    continue
                target = targets.popleft()  # ``_flush_rest`` ends it, whatever happens
                await _flush_rest(producer, target)
        finally:
            engine = producer._engine
            while targets:
                targets.popleft()
                if engine is not None:
                    engine.flush_ended()
