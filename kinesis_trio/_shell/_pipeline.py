"""The async shell: the tasks that move records and time around the engine.

Per stream::

    put() ──► engine: shard buffers (aggregate in formation, plain records)   [caller's task]
               │ sealed when full / at their linger deadline / on flush
               ▼
          shard channel ──► shard worker task ──► the shard's limiter (sleeps)
               ▼
          collector channel (bounded) ──► collector task: engine.out.collect decides
               ▼
          sender tasks (as many in flight as the gate allows) ──► engine.apply_answer

Every decision is the engine's (``_engine`` and the pure modules it uses); the tasks here
wait, sleep, send and wake each other. Timed wake-ups are cancel-scope deadlines moved
earlier (no task switch, no message): one linger timer per stream sleeps until the next
shard's linger deadline, the collector until its request is due, the retrier until the next
retry. A shard worker waits only on its channel: the timer (at a deadline), a flush or the
shard's retirement wakes it with a ``None`` in the channel. At a steady rate every shard's
containers seal at the same grid instant, and one timer wake-up and a message per due
shard cost half what a deadline per shard worker did (a deadline's wake-up goes through a
cancellation). A flush runs the timer's pass itself, in its own step: what it seals is in
the collector's channel before anything else runs (a Lambda invocation's records are on
the wire two loop steps after its flush, not after the timer's wake-up too).
"""

from __future__ import annotations

import contextlib
import math
import random
from collections.abc import Callable, Coroutine
from typing import Any

import anyio
import anyio.abc
import anyio.lowlevel
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from .._aws._client import KinesisClient
from .._config import ProducerConfig
from .._core import (
    Engine,
    KRecord,
    Outbox,
    Shard,
    ShardBuffer,
    ShardMap,
    StreamFacts,
    StreamState,
    effects,
    in_flight,
)
from .._dead_letters import FailedRecord
from .._errors import AccessDeniedError, ConnectionLostError, KinesisTrioError
from .._logging import get_logger
from ._outcome import Outcome

__all__ = ["Pipeline"]

_log = get_logger("kinesis_trio.producer")
_INF = math.inf
#: At most one ListShards per stream per this many seconds from this producer (plus jitter).
_MIN_REFRESH_INTERVAL = 1.0
_REFRESH_JITTER = 0.1
#: Batches the collector channel holds at least; more when the stream has more shards.
_COLLECTOR_QUEUE = 16


class _Worker:
    """A shard's worker as the shell runs it: its channel (batches, and ``None`` to wake
    it) and what the worker is doing."""

    __slots__ = ("idle", "nudged", "recv", "send", "tasks")

    def __init__(self, tasks: _Tasks) -> None:
        # The bound (shard_queue_size) is enforced where records enter, in put: internal
        # re-routes (retries, records of a retired shard) must never block.
        send, recv = anyio.create_memory_object_stream[list[KRecord] | None](math.inf)
        self.send: MemoryObjectSendStream[list[KRecord] | None] = send
        self.recv: MemoryObjectReceiveStream[list[KRecord] | None] = recv
        self.tasks = tasks
        self.nudged = False  # a wake-up (None) is in the channel, not yet received
        self.idle = False  # the worker waits on its channel with nothing in hand

    def nudge(self) -> None:
        """Wake the worker (once: a wake-up already queued is enough)."""
        if not self.nudged:
            self.nudged = True
            with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
                self.send.send_nowait(None)  # (suppressed: the worker has ended)

    def woken(self) -> None:
        """The worker received its wake-up."""
        self.nudged = False

    def waiting(self, idle: bool) -> None:
        """The worker waits on its channel with nothing in hand (``True``), or not."""
        self.idle = idle


class _Tasks:
    """A stream's tasks as the shell runs them: the collector's channel and state, and the
    wake-up scopes of the collector, the retrier and the linger timer."""

    __slots__ = (
        "coll_recv",
        "coll_scope",
        "coll_send",
        "coll_waiting",
        "retry_scope",
        "timer_scope",
    )

    def __init__(self, shards: int) -> None:
        # Room for one batch per shard: the shards' containers seal at the same instant (the
        # end of their linger window) and the collector must find them all queued when it
        # wakes, to send them in one request (the timer's pass sends the batches it seals
        # as one message; a worker sends its own). No more: a collector that is behind (every
        # connection busy) holds the workers back, and the backlog stays in the shards.
        room = max(_COLLECTOR_QUEUE, shards)
        send, recv = anyio.create_memory_object_stream[list[KRecord]](room)
        self.coll_send: MemoryObjectSendStream[list[KRecord]] = send
        self.coll_recv: MemoryObjectReceiveStream[list[KRecord]] = recv
        self.coll_scope: anyio.CancelScope | None = None
        self.coll_waiting = False  # a request is due but every connection is busy
        self.retry_scope: anyio.CancelScope | None = None
        self.timer_scope: anyio.CancelScope | None = None

    def collector_waits(self, scope: anyio.CancelScope | None, for_connection: bool) -> None:
        """The collector waits in ``scope`` (``for_connection``: a request is due but every
        connection is busy), or no longer waits (``None``)."""
        self.coll_scope = scope
        self.coll_waiting = for_connection

    def retrier_waits(self, scope: anyio.CancelScope | None) -> None:
        self.retry_scope = scope

    def timer_waits(self, scope: anyio.CancelScope | None) -> None:
        self.timer_scope = scope


class _Crew:
    """The shard workers as the shell runs them. A shard's worker starts when its shard
    first has a batch for it: a stream of thousands of shards costs a task only for the
    shards that get records (each one a ``_Worker``, a task and a channel)."""

    __slots__ = ("homes", "run", "tasks", "tg", "workers")

    def __init__(
        self,
        tg: anyio.abc.TaskGroup,
        tasks: dict[StreamState, _Tasks],
        run: Callable[[StreamState, ShardBuffer, _Worker], Coroutine[Any, Any, None]],
    ) -> None:
        self.tg = tg
        self.tasks = tasks
        self.run = run
        self.workers: dict[ShardBuffer, _Worker] = {}
        #: each shard's stream, from its ``StartShard`` until its worker ends
        self.homes: dict[ShardBuffer, StreamState] = {}

    def start(self, shard: ShardBuffer) -> _Worker:
        """Start the worker of a shard that has none."""
        stream = self.homes[shard]
        worker = self.workers[shard] = _Worker(self.tasks[stream])
        self.tg.start_soon(self.run, stream, shard, worker)
        return worker

    def retire(self, shard: ShardBuffer) -> None:
        """Wake the worker of a shard a reshard retired: it passes on what it holds and
        ends. A shard that never had one holds nothing (the engine re-placed its records)."""
        worker = self.workers.get(shard)
        if worker is not None:
            worker.nudge()
        else:
            self.homes.pop(shard, None)

    def ended(self, shard: ShardBuffer) -> None:
        """The worker of a retired shard ended."""
        self.workers.pop(shard, None)
        self.homes.pop(shard, None)


class _Refresh:
    """A stream's shard-map reloads, as the shell runs them (its own record)."""

    __slots__ = ("again", "last", "looping")

    def __init__(self) -> None:
        self.looping = False  # a reload loop runs for the stream
        self.again = False  # asked again while it ran: one more pass
        self.last = -_INF  # when the last reload (or the first load) began


def _poke(scope: anyio.CancelScope | None, deadline: float) -> None:
    """Move a waiting task's wake-up earlier (no task switch, no channel message)."""
    if scope is not None and deadline < scope.deadline:
        scope.deadline = deadline


class Pipeline:
    """The producer's tasks (in its task group), carrying out what the engine asks."""

    def __init__(
        self,
        config: ProducerConfig,
        client: KinesisClient,
        tg: anyio.abc.TaskGroup,
        now: Callable[[], float],
        engine: Engine[Outcome],
        outbox: Outbox,
        on_failed: Callable[[list[FailedRecord], float, list[int] | None], None] | None = None,
    ) -> None:
        self.config = config
        self.client = client
        self.tg = tg
        self.now = now
        #: the engine, and its door for the shard workers, timers, collectors and senders
        self.engine, self.out = engine, engine.out
        #: where the engine leaves its effects (given to it by the producer)
        self.outbox = outbox
        #: where the records that failed go (the producer's dead letters)
        self.on_failed = on_failed
        self.slot_freed: anyio.Event | None = None  # set when a request's slot frees
        self.progress_event: anyio.Event | None = None
        self.rand = random.Random()
        self._refreshes: dict[StreamState, _Refresh] = {}
        self._tasks: dict[StreamState, _Tasks] = {}
        self._crew = _Crew(tg, self._tasks, self._shard_worker)
        self._workers = self._crew.workers

    # -- the engine's effects ------------------------------------------------------------------

    def apply(self) -> None:
        """Carry out what the engine asked for in its last calls (no checkpoint)."""
        outbox = self.outbox
        progress = outbox.progress
        if not progress and not outbox.effects:
            return  # most calls leave nothing: no list made anew for them
        for effect in outbox.take():
            kind = type(effect)
            if kind is effects.Queue:
                shard = effect.shard  # type: ignore[union-attr]
                worker = self._workers.get(shard) or self._crew.start(shard)
                worker.send.send_nowait(effect.batch)  # type: ignore[union-attr]
            elif kind is effects.Wake:
                _poke(self._tasks[effect.stream].timer_scope, effect.at)  # type: ignore[union-attr]
            else:
                self._apply_rare(effect)
        if progress:
            self.progress()

    def _apply_rare(self, effect: effects.Effect) -> None:
        if isinstance(effect, effects.StartShard):  # its worker starts with its first batch
            self._crew.homes[effect.shard] = effect.stream
        elif isinstance(effect, effects.RetireShard):
            self._crew.retire(effect.shard)
        elif isinstance(effect, effects.RetryAt):
            _poke(self._tasks[effect.stream].retry_scope, effect.due)
        elif isinstance(effect, effects.Refresh):
            self.refresh(effect.stream)
        elif isinstance(effect, effects.RefreshCredentials):
            self.tg.start_soon(self._refresh_credentials)
        elif isinstance(effect, effects.SendApart):
            self.tg.start_soon(self._send_part, effect.stream, effect.krecs)
        elif isinstance(effect, effects.DeadLetters):
            if self.on_failed is not None:
                self.on_failed(effect.records, effect.at, effect.tickets)
        else:  # pragma: no cover - every effect is handled above
            raise AssertionError(f"unknown effect {effect!r}")

    def refresh(self, stream: StreamState) -> None:
        """Reload the stream's shard map soon: deduplicated, jittered, rate-limited."""
        state = self._refresh_state(stream)
        if state.looping:
            state.again = True
            return
        state.looping = True
        self.tg.start_soon(self._refresh_loop, stream, state)

    def _refresh_state(self, stream: StreamState) -> _Refresh:
        state = self._refreshes.get(stream)
        if state is None:
            state = self._refreshes[stream] = _Refresh()
        return state

    def progress(self) -> None:
        """Outstanding records were resolved: wake whoever waits for room or a flush."""
        event = self.progress_event
        if event is not None:
            self.progress_event = None
            event.set()

    # -- waiting for progress ----------------------------------------------------------------

    async def wait_progress(self) -> None:
        """Until some outstanding record is resolved (or the state changes)."""
        event = self.progress_event
        if event is None:
            event = self.progress_event = anyio.Event()
        await event.wait()

    def poke_all(self) -> None:
        """A flush: run each stream's timer pass here and now (it seals the shards that
        hold records, or wakes their workers), so the sealed batches reach the collector's
        channel in this step, not after a wake-up of the timer (a cancellation); then wake
        every worker, and each collector that got nothing to wake it."""
        for stream, tasks in self._tasks.items():
            # the timer keeps its deadline: a ``Wake`` the pass leaves moves it earlier; a
            # deadline past what is still open costs it one pass that finds nothing due
            _, sent = _timer_pass(self, stream, tasks)
            self.apply()
            if not sent:
                _poke(tasks.coll_scope, -_INF)
        for worker in self._workers.values():
            worker.nudge()

    # -- streams --------------------------------------------------------------------------

    async def load(self, name: str, arn: str | None) -> tuple[StreamFacts, ShardMap]:
        """A stream's facts (DescribeStreamSummary) and open shards (ListShards).

        A denied DescribeStreamSummary (a policy that allows only PutRecords and ListShards)
        is not fatal: the facts of a stream of before 2025 are assumed, and said in a
        WARNING when the stream is loaded.
        """
        ref = None if arn else name
        try:
            summary = await self.client.describe_stream_summary(ref, stream_arn=arn)
        except AccessDeniedError:
            facts = StreamFacts.assumed(name, arn)
        else:
            facts = StreamFacts.from_summary(summary, name)
        shard_map = ShardMap.from_api(await self.client.list_shards(ref, stream_arn=arn))
        return facts, shard_map

    def start_stream(
        self, key: str, name: str, arn: str | None, facts: StreamFacts, shard_map: ShardMap
    ) -> StreamState:
        """The tasks of a newly loaded stream (``key``: how users name it, ARN or name)."""
        config = self.config
        now = self.now()
        stream = StreamState(name, shard_map, arn=arn)
        tasks = self._tasks[stream] = _Tasks(len(shard_map.shards))
        self._refresh_state(stream).last = now
        self.engine.add_stream(key, stream, facts, shard_map, now)
        self.apply()  # its shards' workers
        self.tg.start_soon(self._collector, stream, tasks)
        self.tg.start_soon(self._retrier, stream, tasks)
        self.tg.start_soon(self._linger_timer, stream, tasks)
        if config.shard_map_refresh_interval is not None:
            self.tg.start_soon(self._periodic_refresh, stream, config.shard_map_refresh_interval)
        return stream

    async def _refresh_loop(self, stream: StreamState, state: _Refresh) -> None:
        try:
            while True:
                state.again = False
                # ListShards allows 100 calls/s per stream, shared with every other client:
                # at most one of ours per _MIN_REFRESH_INTERVAL, jittered so that producers
                # which saw the same reshard don't all call at once.
                wait = max(0.0, state.last + _MIN_REFRESH_INTERVAL - self.now())
                await anyio.sleep(wait + self.rand.uniform(0.0, _REFRESH_JITTER))
                state.last = self.now()
                if not await self._refresh_once(stream):
                    self.engine.reload_failed(stream, self.now())
                    self.apply()
                    state.again = True
                if not state.again:
                    return
        finally:
            state.looping = False

    async def _periodic_refresh(self, stream: StreamState, interval: float) -> None:
        while True:
            await anyio.sleep(interval * self.rand.uniform(0.9, 1.1))
            self.refresh(stream)

    async def _refresh_once(self, stream: StreamState) -> bool:
        engine = self.engine
        ref = None if stream.arn else stream.name
        try:
            facts, new_map = await self.load(stream.name, stream.arn)
        except (KinesisTrioError, ValueError) as exc:
            _log.warning("shard_map_refresh_failed", stream=stream.name, error=str(exc))
            return False
        engine.reload(stream, facts, new_map, self.now())
        self.apply()
        if engine.needs_history(stream):
            try:  # a shard born and closed between two refreshes: look at the history
                entries = await self.client.list_shards(ref, stream_arn=stream.arn, at_latest=False)
                engine.learn_shards(stream, [Shard.from_api(e) for e in entries])
            except (KinesisTrioError, KeyError, TypeError, ValueError) as exc:
                _log.warning("shard_history_failed", stream=stream.name, error=str(exc))
        engine.verify_pending(stream, self.now())
        self.apply()
        return True

    # -- per-shard workers ------------------------------------------------------------------

    async def _linger_timer(self, stream: StreamState, tasks: _Tasks) -> None:
        """Seal each shard's containers when they are due (their linger deadline, a flush),
        or wake its worker to; sleep until the next deadline (a ``Wake`` moves it earlier).

        A due shard whose worker has nothing in hand (waiting on an empty channel), or that
        has no worker yet, is sealed here and its batch passed on as its worker would
        (``out.seal_due``): a linger window's shards go in one pass of one task, not a
        wake-up of each worker (at 32 shards and 10,000 records/s, the last worker sealed 3
        ms after the window's end), and in one message to the collector, if it has room.
        The others' workers are woken to do it."""
        while True:
            wake, _ = _timer_pass(self, stream, tasks)
            # No checkpoint between the scan and the scope, and the pass's own effects are
            # carried out once the scope waits: a ``Wake`` cannot fall between them and be
            # lost (one the pass left, a shard it made due, moves this very scope).
            with anyio.CancelScope(deadline=wake) as scope:
                tasks.timer_waits(scope)
                self.apply()
                await anyio.sleep_forever()
            tasks.timer_waits(None)

    async def _shard_worker(self, stream: StreamState, shard: ShardBuffer, worker: _Worker) -> None:
        out = self.out
        recv = worker.recv
        while True:
            if out.wake_at(shard) > self.now():
                worker.waiting(True)
                try:
                    item = await recv.receive()
                finally:
                    worker.waiting(False)
                if item is None:
                    worker.woken()
                else:
                    out.taken(shard, 1)
                    batch, _ = self._drain(shard, worker, item)
                    self.progress()
                    await self._forward(stream, shard, worker, batch)
                    continue
            # Due (a deadline passed, a flush) or retired: drain the channel in order, then
            # seal.
            batch, emptied = self._drain(shard, worker, [])
            if batch:
                self.progress()
            if out.retired(shard):
                if batch:
                    await self._forward(stream, shard, worker, batch)
                if emptied:
                    self._crew.ended(shard)
                    return
                continue
            if emptied and out.due(shard, self.now()):
                batch += out.seal(shard)
            if batch:
                await self._forward(stream, shard, worker, batch)

    def _drain(
        self, shard: ShardBuffer, worker: _Worker, batch: list[KRecord]
    ) -> tuple[list[KRecord], bool]:
        """Add the batches already queued for the shard, up to one request's worth (the
        cap keeps a shard from taking everything queued into its limiter at once).
        Returns the batch and whether the channel is empty. The shard's due retries go
        first (they wake the worker with an empty batch, which must not leave them)."""
        batch = self.out.due_first(shard) + batch
        has_room = self.out.batch_has_room
        count = len(batch)
        size = sum(k.size for k in batch)
        taken = 0
        emptied = False
        while has_room(count, size):
            try:
                more = worker.recv.receive_nowait()
            except anyio.WouldBlock:
                emptied = True
                break
            if more is None:
                worker.woken()
                continue
            taken += 1
            batch += more
            count += len(more)
            size += sum(k.size for k in more)
        if taken:
            self.out.taken(shard, taken)
        return batch, emptied

    async def _forward(
        self, stream: StreamState, shard: ShardBuffer, worker: _Worker, batch: list[KRecord]
    ) -> None:
        """Pass a shard's batch to the collector, through the shard's rate limiter."""
        out = self.out
        coll = worker.tasks.coll_send
        batch = out.batch(stream, shard, batch, self.now())
        self.apply()
        while batch:
            n = out.admit(shard, batch, self.now())
            if n:
                chunk, batch = batch[:n], batch[n:]
                await coll.send(chunk)
                if not batch:
                    return
            await anyio.sleep(out.wait_time(shard, batch, self.now()))
            batch = out.batch(stream, shard, batch, self.now())
            self.apply()

    # -- collector, retrier, senders ----------------------------------------------------------

    async def _collector(self, stream: StreamState, tasks: _Tasks) -> None:
        """Collect Kinesis records into requests; send each when the collector says so."""
        recv = tasks.coll_recv
        out = self.out
        while True:
            due = out.collect(stream, self.now())
            if due.send:
                requests = out.requests(stream, self.now())
                self.apply()
                for chunk, size in requests:
                    await self._slot(size)
                    self.tg.start_soon(self._send, stream, chunk, size)
                continue
            tasks.collector_waits(None, due.for_connection)
            if due.wake > self.now():
                with anyio.CancelScope(deadline=due.wake) as scope:
                    tasks.collector_waits(scope, due.for_connection)
                    out.offer(stream, await recv.receive())
            tasks.collector_waits(None, False)
            while True:
                try:
                    out.offer(stream, recv.receive_nowait())
                except anyio.WouldBlock:
                    break

    async def _slot(self, size: int) -> None:
        """Wait until the engine's gate lets a request of ``size`` bytes out, and take
        that slot. With room, it takes it without yielding: the collector's next wait on
        its channel is its checkpoint, and a request's task its own."""
        out = self.out
        if out.try_slot(size):
            return
        out.slot_wanted(True)
        try:
            while not out.try_slot(size):
                if self.slot_freed is None:
                    self.slot_freed = anyio.Event()
                await self.slot_freed.wait()
        finally:
            out.slot_wanted(False)

    def _connection_freed(self, size: int) -> None:
        self.out.slot_freed(size)
        if self.slot_freed is not None:
            self.slot_freed.set()
            self.slot_freed = None
        for tasks in self._tasks.values():
            if tasks.coll_waiting:
                _poke(tasks.coll_scope, -_INF)

    async def _retrier(self, stream: StreamState, tasks: _Tasks) -> None:
        """Send failed records back through their shard (and its limiter) when due."""
        engine = self.engine
        while True:
            deadline = engine.next_retry(stream)
            if deadline > self.now():
                with anyio.CancelScope(deadline=deadline) as scope:
                    tasks.retrier_waits(scope)
                    await anyio.sleep_forever()
                tasks.retrier_waits(None)
            engine.retry_due(stream, self.now())
            self.apply()

    async def _send(self, stream: StreamState, krecs: list[KRecord], size: int) -> None:
        """Send one PutRecords request of ``krecs`` (``size`` bytes of records) in the slot
        taken for it, and hand what comes back to the engine."""
        engine = self.engine
        try:
            data = self.out.body(stream, krecs)
            start = self.now()
            # a deadline that follows its bytes (_core._deadline): past it, RequestTimeoutError
            try:
                response = await self.client.call_raw(
                    "PutRecords", data, entries=len(krecs), stream_arn=stream.arn
                )
            except KinesisTrioError as exc:
                engine.apply_error(stream, krecs, exc, start, self.now(), size)
            except Exception as exc:  # a bug reading an answer: the records may be written
                _log.exception("put_records_unreadable", stream=stream.name)
                lost = ConnectionLostError(
                    f"the answer could not be read ({type(exc).__name__})", operation="PutRecords"
                )
                engine.apply_error(stream, krecs, lost, start, self.now(), size)
            except anyio.get_cancelled_exc_class():
                # closing (close timeout, exception, cancel) with the request out: maybe written
                engine.mark_in_flight(krecs, in_flight(start, self.now()))
                raise
            else:
                engine.apply_answer(stream, krecs, response, start, self.now(), size)
        finally:
            self._connection_freed(size)
            self.apply()

    async def _send_part(self, stream: StreamState, krecs: list[KRecord]) -> None:
        size = sum(k.size for k in krecs)
        await self._slot(size)
        await self._send(stream, krecs, size)

    async def _refresh_credentials(self) -> None:
        try:
            await self.client.credentials.force_refresh()
        except KinesisTrioError as exc:
            _log.warning("credentials_refresh_failed", error=str(exc))


def _timer_pass(pipeline: Pipeline, stream: StreamState, tasks: _Tasks) -> tuple[float, bool]:
    """The linger timer's pass over the stream's shards that hold records (no checkpoint;
    the timer's, or a flush's in its own step; its effects are left for the caller to
    carry out): seal each due one here, or wake its worker to. Returns when the next one
    is due, and whether a batch went to the collector."""
    out = pipeline.out
    workers = pipeline._workers
    coll = tasks.coll_send
    now = pipeline.now()
    # the shards that hold records, not every shard of the stream
    due, wake = out.due_shards(stream, now)
    if not due:
        return wake, False
    # what the pass seals goes to the collector in one message, if it has room
    room = coll.statistics()
    sealed: list[KRecord] | None = [] if room.current_buffer_used < room.max_buffer_size else None
    # a shard whose worker has something in hand (or a wake-up queued) is its worker's to
    # seal; so is one the pass leaves (``out.seal_due``)
    here: list[ShardBuffer] = []
    for shard in due:
        worker = workers.get(shard)
        if worker is None or (worker.idle and not worker.nudged):
            here.append(shard)
        else:
            worker.nudge()
    for shard in out.seal_due(stream, here, now, sealed):
        (workers.get(shard) or pipeline._crew.start(shard)).nudge()
    if sealed:
        coll.send_nowait(sealed)
        return wake, True
    return wake, False
