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
   input items that failed: a record of theirs failed for good or ended in an exception,
   or something raised in their scope (:meth:`Invocation.item`, ``process``), or the
   handler failed them itself; one rule decides (``_batch.verdict``, ``_batch.verdicts``;
   ``batch="fifo"``: every message after the first failed one too), and each failed item
   is logged once. What no item can be blamed for (an exception outside any item's scope,
   a record tied to no item that failed) fails the invocation. Without ``batch`` a record
   that failed for good raises :class:`RecordsFailedError`;
6. the ``record_ttl`` pause begins, and the handler's answer goes back.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import inspect
import os
import threading
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import anyio

from .._config import ProducerConfig
from .._logging import get_logger
from .._shell._producer import Producer
from .._shell._sync_producer import SyncProducer
from . import _batch
from ._invocation import (
    _CURRENT,
    Context,
    Invocation,
    InvocationReport,
    RecordsFailedError,
    RecordsNotConfirmedError,
    _describe,
    _name,
    current_records,
)

_log = get_logger("kinesis_trio.aws_lambda")


def _unwrap(fn: Callable[..., Any]) -> Callable[..., Any]:
    try:
        inner: Callable[..., Any] = inspect.unwrap(fn)
    except ValueError:  # a cycle of __wrapped__
        return fn
    return inner


def _positional(fn: Callable[..., Any], follow: bool) -> float | None:
    """How many positional arguments ``fn`` takes (inf with ``*args``; None: unknown)."""
    try:
        signature = inspect.signature(fn, follow_wrapped=follow)
    except (TypeError, ValueError):
        return None
    count = 0.0
    for parameter in signature.parameters.values():
        if parameter.kind is inspect.Parameter.VAR_POSITIONAL:
            return float("inf")
        if parameter.kind in (
            inspect.Parameter.POSITIONAL_ONLY,
            inspect.Parameter.POSITIONAL_OR_KEYWORD,
        ):
            count += 1
    return count


def _takes_two(fn: Callable[..., Any]) -> bool:
    """The handler is ``(event, context)``: its own signature (under the decorators that
    wrap it, ``functools.wraps`` leaving ``__wrapped__``) takes two positional arguments."""
    return _positional(fn, follow=True) == 2


def _takes_three(fn: Callable[..., Any]) -> bool:
    """The outermost callable accepts a third positional argument (Powertools' tracer's
    wrapper, ``(event, context, **kwargs)``, does not)."""
    found = _positional(fn, follow=False)
    return found is None or found >= 3


class LambdaProducer:
    """The producer of a Lambda function: make it at module level, decorate the handler.

    ::

        kinesis = LambdaProducer("orders")

        @kinesis.handler
        def handler(event, context, records):
            for item, record in records.items():
                records.put(transform(record), partition_key="k", item=item)

    The handler gets a third argument, the :class:`Invocation` (or, written
    ``(event, context)``, reads it as :attr:`records`); it may be ``async def``
    (run on the producer's event loop: ``await records.aput(...)``). ``unconfirmed``:
    ``"fail"`` (the default) or ``"return"``; ``margin``: seconds kept back from the
    invocation's remaining time; ``batch``: answer with a partial batch response (the
    handler's own answer, if a dict with ``batchItemFailures``, is merged into it).
    ``spool_dir``: a root under which each process keeps a spool of its own
    (``ROOT/process-N``; sets ``config.spool_dir``). ``on_report``: called with each
    invocation's :class:`InvocationReport` once its outcomes are known, before the answer
    goes back (in the handler's thread; what it raises is logged, not the invocation's).
    The other arguments are :class:`~kinesis_trio.SyncProducer`'s; ``backend`` defaults
    to ``"asyncio"``.
    """

    def __init__(
        self,
        stream_name: str | None = None,
        *,
        unconfirmed: str = "fail",
        margin: float = 0.5,
        batch: bool | str = False,
        spool_dir: str | os.PathLike[str] | None = None,
        on_report: Callable[[InvocationReport], object] | None = None,
        config: ProducerConfig | None = None,
        backend: str = "asyncio",
        **producer_args: Any,
    ) -> None:
        if unconfirmed not in ("fail", "return"):
            raise ValueError(f"unconfirmed must be 'fail' or 'return', got {unconfirmed!r}")
        if not margin >= 0:
            raise ValueError(f"margin must be >= 0 seconds, got {margin!r}")
        if batch not in (False, True, "fifo"):
            raise ValueError(f"batch must be False, True or 'fifo', got {batch!r}")
        #: the default stream (read when the producer opens)
        self.stream_name: str | None = stream_name
        #: what records not confirmed in time do: ``"fail"`` or ``"return"``
        self.unconfirmed: str = unconfirmed
        #: seconds of the invocation's remaining time kept back from the wait
        self.margin: float = float(margin)
        #: answer with a partial batch response
        self.batch: bool = bool(batch)
        #: SQS FIFO: stop at the first failed message (``batch="fifo"``)
        self.fifo: bool = batch == "fifo"
        self._root = None if spool_dir is None else Path(spool_dir)
        if on_report is not None and not callable(on_report):
            raise TypeError(f"on_report must be callable, got {on_report!r}")
        #: called with each invocation's report before its answer goes back
        self.on_report = on_report
        self._config = config or ProducerConfig()
        self._args = dict(producer_args, backend=backend)
        self._lock = threading.Lock()
        self._sync: SyncProducer | None = None
        self._pid = 0
        #: this process's spool (under ``spool_dir``), once open
        self.spool: Path | None = None
        self._drained = False
        #: a pause began (or begins before the loop takes a record) and has not ended
        self._paused = False
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
        from . import _slots  # the spool slots' module: loaded only with ``spool_dir``

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

    @property
    def records(self) -> Invocation:
        """The running invocation's :class:`Invocation` (``current_records()``), for a
        two-argument handler: ``kinesis.records.put(...)``."""
        found = current_records()
        if found._owner is not self:
            raise RuntimeError("the running invocation is another LambdaProducer's")
        return found

    def handler(self, fn: Callable[..., Any]) -> Callable[[Any, Context], Any]:
        """Wrap ``fn`` (sync or async) as a Lambda handler: ``fn(event, context,
        records)``, or ``fn(event, context)`` (its signature, through the decorators it
        is wrapped in, takes two positional arguments), which reaches the
        :class:`Invocation` through :attr:`records` / :func:`current_records`. So other
        decorators of ``(event, context)`` handlers (Powertools') stack above and below."""
        inner = _unwrap(fn)
        is_async = inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(inner)
        two = _takes_two(fn)
        if not two and not _takes_three(fn):
            raise TypeError(
                f"{_name(fn)} takes (event, context, records), but what wraps it does not "
                f"pass a third argument: write it as (event, context) and read "
                f"kinesis.records (or current_records()) inside"
            )

        def handle(event: Any, context: Context) -> Any:
            sync = self.producer
            self._resume(sync, is_async)
            invocation = Invocation(self, event, context)
            token = _CURRENT.set(invocation)
            try:
                if is_async:
                    portal = sync._portal
                    assert portal is not None
                    answer = portal.call(self._run_async, fn, two, event, context, invocation)
                else:
                    try:
                        answer = fn(event, context) if two else fn(event, context, invocation)
                    except BaseException:
                        invocation.send()
                        raise
                    if invocation._futures:  # the last records and the wait: one hand-over
                        with contextlib.suppress(TimeoutError):
                            invocation._send_and_wait(self._budget(context))
                return self._answer(invocation, answer)
            finally:
                _CURRENT.reset(token)
                self._pause(sync, begun=is_async)

        functools.update_wrapper(handle, fn, assigned=("__module__", "__name__", "__doc__"))
        handle.__wrapped__ = fn  # type: ignore[attr-defined]
        return handle

    async def _run_async(
        self,
        fn: Callable[..., Any],
        two: bool,
        event: Any,
        context: Context,
        invocation: Invocation,
    ) -> Any:
        token = _CURRENT.set(invocation)
        try:
            answer = fn(event, context) if two else fn(event, context, invocation)
            if inspect.isawaitable(answer):  # a sync decorator over an async handler
                answer = await answer
            if invocation._outcomes:
                with anyio.move_on_after(self._budget(context)):
                    await self.producer._producer.flush()
        finally:
            _CURRENT.reset(token)
            _begin_pause(self.producer._producer)
        return answer

    def _budget(self, context: Context) -> float:
        """Seconds left for the wait: the invocation's remaining time less ``margin``."""
        remaining = float(context.get_remaining_time_in_millis()) / 1000.0
        return max(0.0, remaining - self.margin)

    def _answer(self, invocation: Invocation, answer: Any) -> Any:
        report = invocation._report(answer if self.batch else None)  # (kept on it too)
        if self.on_report is not None:
            try:
                self.on_report(report)
            except Exception as exc:  # the hook's failure is not the invocation's
                _log.warning("lambda_on_report_failed", error=_describe(exc), exc_info=exc)
        if report.unconfirmed and self.unconfirmed == "fail":
            raise RecordsNotConfirmedError(report)
        if not self.batch:
            if report.failed:
                raise RecordsFailedError(report)
            return answer
        if invocation._loose:  # failed for good, and tied to no item
            raise RecordsFailedError(dataclasses.replace(report, failed=invocation._loose))
        order = [i for i, _ in invocation.items()] if report.failed_items else []
        return _batch.batch_response(report.failed_items, order)

    def _resume(self, sync: SyncProducer, is_async: bool) -> None:
        """The invocation starts: the pause ``record_ttl`` did not count ends. Not waited
        for: the loop runs it before the invocation's records, handed over after it. With
        no record in the producer (a sync handler's records all settled, no spool) no
        record's time runs before the next one arrives: the pause ends as the loop takes
        that record (``Line.defer``), with no hand-off of its own; with none put it goes
        on (:meth:`_pause` withdraws the call)."""
        line = sync._line
        call_soon = line.call_soon
        if call_soon is None:
            return
        if line.cancel_deferred():  # the pause deferred as the last invocation returned
            self._paused = False  # never began (no record arrived)
        if not self._paused:
            return
        self._paused = False
        resume = partial(_end_pause, sync._producer)
        if is_async or self.spool is not None or line.outstanding_records:
            call_soon(resume)  # records may be in the producer: their time counts from now
        else:
            line.defer(resume)

    def _pause(self, sync: SyncProducer, begun: bool = False) -> None:
        """The handler returns: the environment may be frozen from now on (``begun``: the
        pause began on the loop already, an async handler's). Waited for while a record
        may be in flight (its expiry depends on when the pause began); not otherwise."""
        producer = sync._producer
        call_soon = sync._line.call_soon
        self._paused = call_soon is not None
        if begun or call_soon is None:
            pass
        elif sync._line.cancel_deferred():
            pass  # the loop never resumed (no record reached it): the pause goes on
        elif self.spool is None and not sync._line.outstanding_records:
            # no record in the producer for the pause to keep from expiring: it begins
            # once one arrives (before the loop takes it), with no hand-off of its own;
            # the next invocation withdraws it if none did
            sync._line.defer(partial(_begin_pause, producer))
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
        from . import _slots

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
