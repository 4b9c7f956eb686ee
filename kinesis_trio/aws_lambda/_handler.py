"""The Lambda handler helper: one producer per execution environment (per process), and an
invocation that does not return before its records' outcomes are known (or its time is up).

What it does around each invocation (``docs/lambda.md`` tells it for users):

1. the first invocation opens a :class:`~kinesis_trio.SyncProducer` (its event loop on a
   background thread, ``asyncio`` by default) and keeps it for the next ones; importing
   the module and making the :class:`LambdaProducer` open nothing;
2. the invocation ends the ``record_ttl`` pause that began when the previous one returned
   (``kinesis_trio._core._pauses``: a frozen environment's time does not expire records);
3. the handler runs, with an :class:`Invocation` to put records through (each tied, if
   wished, to the input item it came from);
4. before returning, the producer flushes and waits for this invocation's outcomes, until
   ``context.get_remaining_time_in_millis()`` less ``margin``;
5. then, by ``unconfirmed``: ``"fail"`` raises :class:`RecordsNotConfirmedError` (the
   invocation fails; the event source retries it); ``"return"`` returns, and the records
   go on in the producer (and with a spool, on disk: the next process to open it sends
   them first). With ``batch=True`` the answer is the partial batch response naming the
   input items whose records failed for good (or that the handler failed itself);
   without it a record that failed for good raises :class:`RecordsFailedError`;
6. the ``record_ttl`` pause begins, and the handler's answer goes back.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import dataclasses
import inspect
import os
import threading
from collections.abc import Awaitable, Callable, Mapping
from functools import partial
from pathlib import Path
from typing import Any

import anyio

from .._config import ProducerConfig
from .._errors import KinesisTrioError
from .._logging import get_logger
from .._results import RecordResult
from .._shell._outcome import Outcome
from .._shell._producer import Producer
from .._shell._sync_producer import SyncProducer
from . import _batch, _slots

_log = get_logger("kinesis_trio.aws_lambda")

#: records put in a sync handler are handed to the producer's thread this many at a time
SEND_EVERY = 500

Data = bytes | bytearray | memoryview
#: what the helper needs of Lambda's context object
Context = Any


@dataclasses.dataclass(frozen=True)
class InvocationReport:
    """What became of one invocation's records when it returned."""

    #: records written
    confirmed: int
    #: records that failed for good (their results)
    failed: tuple[RecordResult, ...]
    #: records whose outcome was not known in time
    unconfirmed: int
    #: input items with a record that failed for good, or failed by the handler
    failed_items: frozenset[str]
    #: input items with a record not confirmed in time
    unconfirmed_items: frozenset[str]


class RecordsNotConfirmedError(KinesisTrioError):
    """Records of the invocation were not confirmed before its time ran out
    (``unconfirmed="fail"``); ``report`` says which."""

    def __init__(self, report: InvocationReport) -> None:
        super().__init__(
            f"{report.unconfirmed} records not confirmed before the invocation's time ran out "
            f"({report.confirmed} written, {len(report.failed)} failed)"
        )
        self.report = report


class RecordsFailedError(KinesisTrioError):
    """Records of the invocation failed for good, and no partial batch response can say
    so (``batch=False``); ``report`` has their results."""

    def __init__(self, report: InvocationReport) -> None:
        first = report.failed[0]
        super().__init__(
            f"{len(report.failed)} records failed ({first.error_code}: {first.error_message})"
        )
        self.report = report


class Invocation:
    """One invocation's records: put them here (``put`` in a sync handler, ``await aput``
    in an async one); ``item=`` ties a record to the input item it came from."""

    def __init__(self, owner: LambdaProducer, event: Any, context: Context) -> None:
        #: the invocation's event and Lambda's context object
        self.event: Any = event
        self.context: Context = context
        self._owner = owner
        self._futures: list[tuple[concurrent.futures.Future[RecordResult], str | None]] = []
        self._outcomes: list[tuple[Outcome, str | None]] = []
        self._failed_items: set[str] = set()
        #: records put and not handed to the producer yet
        self._pending: list[Any] = []
        #: what became of the records, once the invocation has waited for them
        self.report: InvocationReport | None = None

    def items(self) -> list[tuple[str, Mapping[str, Any]]]:
        """``(itemIdentifier, record)`` of each input item of a Kinesis, SQS or
        DynamoDB-streams batch event (ValueError for another event)."""
        return _batch.items(self.event)

    def put(
        self,
        data: Data,
        partition_key: str | None = None,
        explicit_hash_key: str | None = None,
        *,
        item: str | None = None,
        stream_name: str | None = None,
    ) -> concurrent.futures.Future[RecordResult]:
        """Put a record (a sync handler); its future resolves to its result. ``item``: the
        input item's identifier, for the partial batch response.

        Bad input raises at once. The records go to the producer's thread in batches (one
        hand-over, not one per record): every ``SEND_EVERY`` records, at :meth:`send`, and
        when the handler returns. Call :meth:`send` before waiting on a future inside the
        handler."""
        sync = self._owner.producer
        pending = sync._check(data, partition_key, explicit_hash_key, stream_name)
        self._pending.append(pending)
        self._futures.append((pending.future, item))
        if len(self._pending) >= SEND_EVERY:
            self.send()
        return pending.future

    def send(self) -> None:
        """Hand the records put so far to the producer (blocks while it is at its
        backpressure limits; with ``spool_sync="put"``, until they are in the spool)."""
        pending, self._pending = self._pending, []
        if pending:
            self._owner.producer._hand_over(pending)

    async def aput(
        self,
        data: Data,
        partition_key: str | None = None,
        explicit_hash_key: str | None = None,
        *,
        item: str | None = None,
        stream_name: str | None = None,
    ) -> Outcome:
        """Put a record from an async handler (on the producer's event loop)."""
        producer = self._owner.producer._producer
        outcome = await producer.put(
            data, partition_key, explicit_hash_key, stream_name=stream_name
        )
        self._outcomes.append((outcome, item))
        return outcome

    def fail_item(self, item: str) -> None:
        """Name an input item in the partial batch response (the handler could not use it)."""
        self._failed_items.add(item)

    def remaining(self) -> float:
        """Seconds left for the handler's work before the wait for outcomes must begin."""
        return self._owner._budget(self.context)

    def _report(self) -> InvocationReport:
        results: list[tuple[RecordResult | None, str | None]] = []
        for future, item in self._futures:
            results.append((future.result() if future.done() else None, item))
        for outcome, item in self._outcomes:
            results.append((outcome.result() if outcome.done() else None, item))
        failed = tuple(r for r, _ in results if r is not None and not r.ok)
        failed_items = set(self._failed_items)
        unconfirmed_items = set()
        confirmed = unconfirmed = 0
        for result, item in results:
            if result is None:
                unconfirmed += 1
                if item is not None:
                    unconfirmed_items.add(item)
            elif result.ok:
                confirmed += 1
            elif item is not None:
                failed_items.add(item)
        return InvocationReport(
            confirmed, failed, unconfirmed, frozenset(failed_items), frozenset(unconfirmed_items)
        )


class LambdaProducer:
    """The producer of a Lambda function: make it at module level, decorate the handler.

    ::

        kinesis = LambdaProducer("orders")

        @kinesis.handler
        def handler(event, context, records):
            for item, record in records.items():
                records.put(transform(record), partition_key="k", item=item)

    The handler gets a third argument, the :class:`Invocation`; it may be ``async def``
    (run on the producer's event loop: ``await records.aput(...)``). ``unconfirmed``:
    ``"fail"`` (the default) or ``"return"``; ``margin``: seconds kept back from the
    invocation's remaining time; ``batch``: answer with a partial batch response (the
    handler's own answer, if a dict with ``batchItemFailures``, is merged into it).
    ``spool_dir``: a root under which each process keeps a spool of its own
    (``ROOT/process-N``; sets ``config.spool_dir``). The other arguments are
    :class:`~kinesis_trio.SyncProducer`'s; ``backend`` defaults to ``"asyncio"``.
    """

    def __init__(
        self,
        stream_name: str | None = None,
        *,
        unconfirmed: str = "fail",
        margin: float = 0.5,
        batch: bool = False,
        spool_dir: str | os.PathLike[str] | None = None,
        config: ProducerConfig | None = None,
        backend: str = "asyncio",
        **producer_args: Any,
    ) -> None:
        if unconfirmed not in ("fail", "return"):
            raise ValueError(f"unconfirmed must be 'fail' or 'return', got {unconfirmed!r}")
        if not margin >= 0:
            raise ValueError(f"margin must be >= 0 seconds, got {margin!r}")
        #: the default stream (read when the producer opens)
        self.stream_name: str | None = stream_name
        #: what records not confirmed in time do: ``"fail"`` or ``"return"``
        self.unconfirmed: str = unconfirmed
        #: seconds of the invocation's remaining time kept back from the wait
        self.margin: float = float(margin)
        #: answer with a partial batch response
        self.batch: bool = batch
        self._root = None if spool_dir is None else Path(spool_dir)
        self._config = config or ProducerConfig()
        self._args = dict(producer_args, backend=backend)
        self._lock = threading.Lock()
        self._sync: SyncProducer | None = None
        self._pid = 0
        #: this process's spool (under ``spool_dir``), once open
        self.spool: Path | None = None
        self._drained = False
        #: the drain of the spools no process runs on (see ``_drain``), once begun
        self._draining: anyio.CancelScope | None = None

    # -- the producer ---------------------------------------------------------------------

    @property
    def producer(self) -> SyncProducer:
        """This process's producer, opened on first use (and anew in a forked child)."""
        sync = self._sync
        if sync is not None and self._pid == os.getpid():
            return sync
        with self._lock:
            if self._sync is None or self._pid != os.getpid():
                self._sync, self.spool = self._open()
                self._pid = os.getpid()
            return self._sync

    def _open(self) -> tuple[SyncProducer, Path | None]:
        def open_in(spool: Path | None) -> SyncProducer:
            config = self._config
            if spool is not None:
                config = dataclasses.replace(config, spool_dir=spool)
            return SyncProducer(self.stream_name, config=config, **self._args).open()

        if self._root is None:
            return open_in(None), None
        return _slots.claim(self._root, open_in)

    def close(self) -> None:
        """Flush and close this process's producer (an ``atexit`` hook does it otherwise).
        A drain of other processes' spools still running stops: what it has not sent stays
        in their spools, for the next process."""
        with self._lock:
            sync, self._sync = self._sync, None
        if sync is not None and self._pid == os.getpid():
            draining = self._draining
            if draining is not None:
                self._on_loop(sync, draining.cancel)
            sync.close()

    # -- invocations ----------------------------------------------------------------------

    def handler(self, fn: Callable[..., Any]) -> Callable[[Any, Context], Any]:
        """Wrap ``fn(event, context, invocation)`` (sync or async) as a Lambda handler."""
        is_async = inspect.iscoroutinefunction(fn)

        def handle(event: Any, context: Context) -> Any:
            sync = self.producer
            self._resume(sync)
            invocation = Invocation(self, event, context)
            try:
                if is_async:
                    portal = sync._portal
                    assert portal is not None
                    answer = portal.call(self._run_async, fn, event, context, invocation)
                else:
                    try:
                        answer = fn(event, context, invocation)
                    finally:
                        invocation.send()
                    if invocation._futures:
                        with contextlib.suppress(TimeoutError):
                            sync.flush(timeout=self._budget(context))
                return self._answer(invocation, answer)
            finally:
                self._pause(sync, begun=is_async)

        handle.__name__ = getattr(fn, "__name__", "handler")
        handle.__doc__ = fn.__doc__
        handle.__wrapped__ = fn  # type: ignore[attr-defined]
        return handle

    async def _run_async(
        self,
        fn: Callable[[Any, Context, Invocation], Awaitable[Any]],
        event: Any,
        context: Context,
        invocation: Invocation,
    ) -> Any:
        try:
            answer = await fn(event, context, invocation)
            if invocation._outcomes:
                with anyio.move_on_after(self._budget(context)):
                    await self.producer._producer.flush()
        finally:
            _begin_pause(self.producer._producer)
        return answer

    def _budget(self, context: Context) -> float:
        """Seconds left for the wait: the invocation's remaining time less ``margin``."""
        remaining = float(context.get_remaining_time_in_millis()) / 1000.0
        return max(0.0, remaining - self.margin)

    def _answer(self, invocation: Invocation, answer: Any) -> Any:
        report = invocation._report()
        invocation.report = report
        if report.unconfirmed and self.unconfirmed == "fail":
            raise RecordsNotConfirmedError(report)
        if not self.batch:
            if report.failed:
                raise RecordsFailedError(report)
            return answer
        failed = set(report.failed_items)
        if isinstance(answer, Mapping):
            for entry in answer.get("batchItemFailures", ()):
                failed.add(str(entry["itemIdentifier"]))
        order = [i for i, _ in invocation.items()] if failed else []
        return _batch.batch_response(failed, order)

    def _resume(self, sync: SyncProducer) -> None:
        """The invocation starts: the pause ``record_ttl`` did not count ends. Not waited
        for: the loop runs it before the invocation's records, handed over after it."""
        call_soon = sync._line.call_soon
        if call_soon is not None:
            call_soon(partial(_end_pause, sync._producer))

    def _pause(self, sync: SyncProducer, begun: bool = False) -> None:
        """The handler returns: the environment may be frozen from now on (``begun``: the
        pause began on the loop already, an async handler's). Waited for while a record
        may be in flight (its expiry depends on when the pause began); not otherwise."""
        producer = sync._producer
        call_soon = sync._line.call_soon
        if begun or call_soon is None:
            pass
        elif self.spool is None and not sync._line.outstanding_records:
            call_soon(partial(_begin_pause, producer))
        else:
            self._on_loop(sync, partial(_begin_pause, producer))
        if not self._drained and self._root is not None and self.spool is not None:
            self._drained = True
            portal = sync._portal
            if portal is not None:
                self._draining = portal.call(anyio.CancelScope)  # made on its loop
                portal.start_task_soon(self._drain, self._root, self.spool, self._draining)

    @staticmethod
    def _on_loop(sync: SyncProducer, fn: Callable[[], object]) -> None:
        portal = sync._portal
        if portal is not None:
            portal.call(fn)

    async def _drain(self, root: Path, own: Path, scope: anyio.CancelScope) -> None:
        """Send the records of the spools no process runs on (left by a process that
        ended), each through a producer of its own that holds its lock meanwhile; until
        ``scope`` is cancelled (the close: its producer's close keeps what is unsent)."""
        with scope:
            await self._drain_each(root, own)

    async def _drain_each(self, root: Path, own: Path) -> None:
        for spool in _slots.siblings(root, own):
            config = dataclasses.replace(self._config, spool_dir=spool)
            args = {k: v for k, v in self._args.items() if k not in _SYNC_ONLY}
            try:
                async with Producer(self.stream_name, config=config, **args) as producer:
                    await producer.recovered()
            except Exception as exc:  # a living sibling's (locked), or failing: left for later
                _log.info("lambda_spool_not_drained", spool=str(spool), error=repr(exc)[:200])


def _end_pause(producer: Producer) -> None:
    engine = producer._engine
    if engine is not None:
        engine.resume(producer._now())


def _begin_pause(producer: Producer) -> None:
    engine = producer._engine
    if engine is not None:
        engine.pause(producer._now())


#: SyncProducer's arguments that the async Producer does not take
_SYNC_ONLY = ("backend", "backend_options", "on_failure", "after_fork")
