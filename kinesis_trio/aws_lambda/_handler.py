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

import concurrent.futures
import contextlib
import contextvars
import dataclasses
import functools
import inspect
import os
import threading
from collections.abc import Awaitable, Callable, Iterator, Mapping
from functools import partial
from pathlib import Path
from typing import Any, Literal, overload

import anyio

from .._config import ProducerConfig
from .._errors import KinesisTrioError
from .._logging import get_logger
from .._results import RecordResult
from .._shell._outcome import Outcome
from .._shell._producer import Producer
from .._shell._sync_producer import SyncProducer
from . import _batch, _records, _slots
from ._records import Record

_log = get_logger("kinesis_trio.aws_lambda")

#: records put in a sync handler are handed to the producer's thread this many at a time
SEND_EVERY = 500

Data = bytes | bytearray | memoryview
#: what the helper needs of Lambda's context object
Context = Any
#: one input item of a batch event, as the handler gets it
Item = Mapping[str, Any]

#: the item scope a task is in: (its invocation, the item's identifier)
_SCOPE: contextvars.ContextVar[tuple[Invocation, str] | None] = contextvars.ContextVar(
    "kinesis_trio_lambda_item", default=None
)
#: the invocation running (in the handler's thread, and in an async handler's task)
_CURRENT: contextvars.ContextVar[Invocation | None] = contextvars.ContextVar(
    "kinesis_trio_lambda_invocation", default=None
)


def current_records() -> Invocation:
    """The running invocation's :class:`Invocation`: what a two-argument handler
    ``(event, context)`` puts its records through (RuntimeError outside an invocation)."""
    found = _CURRENT.get()
    if found is None:
        raise RuntimeError(
            "no Lambda invocation is running here: current_records() is for the code a "
            "LambdaProducer.handler runs (in its thread, or its async handler's task)"
        )
    return found


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
    #: SQS FIFO: the messages after the first failed one (in ``failed_items`` too)
    skipped_items: frozenset[str] = frozenset()


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


class ItemSkippedError(KinesisTrioError):
    """SQS FIFO (``batch="fifo"``): a record put for a message at or after the first failed
    one; nothing is sent, and the message is reported failed. An item's scope catches it."""


class _HandlerFailed(KinesisTrioError):
    """An item the handler failed itself (``fail_item``, or its own answer's
    ``batchItemFailures``)."""


class Invocation:
    """One invocation's records: put them here (``put`` in a sync handler, ``await aput``
    in an async one); ``item=`` ties a record to the input item it came from."""

    def __init__(self, owner: LambdaProducer, event: Any, context: Context) -> None:
        #: the invocation's event and Lambda's context object
        self.event: Any = event
        self.context: Context = context
        self._owner = owner
        #: each record put: its future or outcome, its item, the stream named
        self._futures: list[
            tuple[concurrent.futures.Future[RecordResult], str | None, str | None]
        ] = []
        self._outcomes: list[tuple[Outcome, str | None, str | None]] = []
        #: what was raised while an item was processed: (the exception, the call)
        self._raised: dict[str, list[tuple[BaseException, str]]] = {}
        #: SQS FIFO: the place in the batch of the first item known failed
        self._stop: int | None = None
        self._places: dict[str, int] | None = None
        #: records that failed for good, tied to no item (once reported)
        self._loose: tuple[RecordResult, ...] = ()
        #: records put and not handed to the producer yet
        self._pending: list[Any] = []
        #: what became of the records, once the invocation has waited for them
        self.report: InvocationReport | None = None
        self._typed: list[Record] | None = None

    def items(self) -> list[tuple[str, Mapping[str, Any]]]:
        """``(itemIdentifier, record)`` of each input item of a Kinesis, SQS or
        DynamoDB-streams batch event (ValueError for another event)."""
        return _batch.items(self.event)

    def typed(self) -> list[Record]:
        """The input items as typed records (:class:`KinesisRecord`, :class:`SqsMessage`
        or :class:`DynamoDBRecord`, each with its ``item`` identifier and its ``raw``
        dict), in order; made once per invocation, each field parsed at its first read."""
        found = self._typed
        if found is None:
            source = _batch.source_of(self.event)
            found = self._typed = [_records.typed(r, source) for _, r in self.items()]
        return list(found)

    def _each(self, typed: bool) -> list[tuple[str, Any]]:
        if typed:
            return [(record.item, record) for record in self.typed()]
        return list(self.items())

    # -- items: what is processed for one input item is that item's ----------------------

    @contextlib.contextmanager
    def item(self, item: str) -> Iterator[None]:
        """A scope for processing input item ``item`` (``with``, in a sync or an async
        handler): each record put inside it is tied to ``item`` (no ``item=`` needed), and
        an exception raised inside it (a ``put`` that raises, the handler's own) is the
        item's failure, logged with it, not the invocation's. ``BaseException``s that are
        not ``Exception`` (a cancellation, ``KeyboardInterrupt``) go through."""
        with self._scope(item, f"with records.item({item!r})"):
            yield

    @overload
    def process(self, fn: Callable[[Item], object], *, typed: Literal[False] = ...) -> None: ...
    @overload
    def process(self, fn: Callable[[Record], object], *, typed: Literal[True]) -> None: ...
    def process(self, fn: Callable[[Any], object], *, typed: bool = False) -> None:
        """Call ``fn(record)`` for each input item of the batch, in order, each in its item's
        scope (:meth:`item`): as Powertools' ``process_partial_response`` does, an
        exception is that item's failure and the next item is processed. With
        ``batch="fifo"`` the items from the first failed one on are not processed.
        ``record`` is the event's dict, or with ``typed=True`` the typed record
        (:meth:`typed`)."""
        call = f"records.process({_name(fn)})"
        for item, record in self._each(typed):
            if self._skipping(item):
                self._skip(item)
                continue
            with self._scope(item, call):
                fn(record)

    @overload
    async def aprocess(
        self, fn: Callable[[Item], Awaitable[object]], *, typed: Literal[False] = ...
    ) -> None: ...
    @overload
    async def aprocess(
        self, fn: Callable[[Record], Awaitable[object]], *, typed: Literal[True]
    ) -> None: ...
    async def aprocess(
        self, fn: Callable[[Any], Awaitable[object]], *, typed: bool = False
    ) -> None:
        """:meth:`process` for an async handler: ``await fn(record)`` for each item, one
        after the other (``typed=True``: the typed record)."""
        call = f"records.aprocess({_name(fn)})"
        for item, record in self._each(typed):
            if self._skipping(item):
                self._skip(item)
                continue
            with self._scope(item, call):
                await fn(record)

    @contextlib.contextmanager
    def _scope(self, item: str, call: str) -> Iterator[None]:
        token = _SCOPE.set((self, item))
        try:
            yield
        except ItemSkippedError:
            self._skip(item)
        except Exception as exc:
            self._failed(item, exc, call)
        finally:
            _SCOPE.reset(token)

    def _item(self, item: str | None) -> str | None:
        """The item a record is tied to: ``item=``, else the scope's it is put in."""
        if item is None:
            scope = _SCOPE.get()
            if scope is not None and scope[0] is self:
                return scope[1]
        return item

    def _place(self, item: str) -> int | None:
        places = self._places
        if places is None:
            places = self._places = {i: n for n, (i, _) in enumerate(self.items())}
        return places.get(item)

    def _skipping(self, item: str | None) -> bool:
        """SQS FIFO: ``item`` is at or after the first failed one (send it nothing)."""
        if self._stop is None or item is None:
            return False
        place = self._place(item)
        return place is not None and place >= self._stop

    def _skip(self, item: str) -> None:
        self._raised.setdefault(item, [])

    def _failed(self, item: str, exc: BaseException, call: str) -> None:
        self._raised.setdefault(item, []).append((exc, call))
        if self._owner.fifo:
            place = self._place(item)
            if place is not None and (self._stop is None or place < self._stop):
                self._stop = place

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
        item = self._item(item)
        if self._skipping(item):
            raise ItemSkippedError(f"message {item!r} is after a failed one: not sent")
        sync = self._owner.producer
        pending = sync._check(data, partition_key, explicit_hash_key, stream_name)
        self._pending.append(pending)
        self._futures.append((pending.future, item, stream_name))
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
        """Put a record from an async handler (on the producer's event loop). It loads a
        stream it has not written to yet, so a stream that does not exist raises here: in
        an item's scope, that is the item's failure."""
        item = self._item(item)
        if self._skipping(item):
            raise ItemSkippedError(f"message {item!r} is after a failed one: not sent")
        producer = self._owner.producer._producer
        outcome = await producer.put(
            data, partition_key, explicit_hash_key, stream_name=stream_name
        )
        self._outcomes.append((outcome, item, stream_name))
        return outcome

    def fail_item(self, item: str) -> None:
        """Name an input item in the partial batch response (the handler could not use it)."""
        self._failed(item, _HandlerFailed("failed by the handler"), "records.fail_item")

    def remaining(self) -> float:
        """Seconds left for the handler's work before the wait for outcomes must begin."""
        return self._owner._budget(self.context)

    def _report(self, answer: Any = None) -> InvocationReport:
        """What became of the records and the items (``answer``: the handler's, whose
        ``batchItemFailures`` are items it failed). Each item's verdict is
        ``_batch.verdict``'s, the batch's ``_batch.verdicts``'; each failed item is logged
        once. Raises what no item can be blamed for: an exception a record not tied to an
        item ended in (``batch=True``: a record not tied to an item that failed, too)."""
        if isinstance(answer, Mapping):
            for entry in answer.get("batchItemFailures", ()):
                failure = _HandlerFailed("named in the handler's batchItemFailures")
                self._failed(str(entry["itemIdentifier"]), failure, "the handler's answer")
        entries: list[tuple[RecordResult | BaseException | None, str | None, str | None]] = []
        for future, item, stream in self._futures:
            outcome: RecordResult | BaseException | None = None
            if future.done():
                exc = future.exception()
                outcome = exc if exc is not None else future.result()
            entries.append((outcome, item, stream))
        for record, item, stream in self._outcomes:
            entries.append((record.result() if record.done() else None, item, stream))
        failed = tuple(o for o, _, _ in entries if isinstance(o, RecordResult) and not o.ok)
        self._loose = tuple(
            o for o, i, _ in entries if isinstance(o, RecordResult) and not o.ok and i is None
        )
        loose = [o for o, item, _ in entries if isinstance(o, BaseException) and item is None]
        if loose:
            raise loose[0]
        per_item: dict[str, list[RecordResult | BaseException | None]] = {}
        unconfirmed_items = set()
        confirmed = unconfirmed = 0
        for outcome, item, _ in entries:
            if outcome is None:
                unconfirmed += 1
            elif isinstance(outcome, RecordResult) and outcome.ok:
                confirmed += 1
            if item is not None:
                per_item.setdefault(item, []).append(outcome)
                if outcome is None:
                    unconfirmed_items.add(item)
        each = {
            item: _batch.verdict(per_item.get(item, ()), (e for e, _ in self._raised.get(item, ())))
            for item in {*per_item, *self._raised}
        }
        order = [i for i, _ in self.items()] if self._owner.batch and each else []
        decided = _batch.verdicts(order, each, fifo=self._owner.fifo)
        skipped = {i for i, v in decided.items() if v == _batch.SKIPPED}
        failed_items = set(_batch.failed(decided))
        for item, v in decided.items():
            if v == _batch.FAILED and self._owner.batch:
                self._log_failed(item, per_item.get(item, []), entries)
        return InvocationReport(
            confirmed,
            failed,
            unconfirmed,
            frozenset(failed_items),
            frozenset(unconfirmed_items),
            frozenset(skipped),
        )

    def _log_failed(
        self,
        item: str,
        outcomes: list[RecordResult | BaseException | None],
        entries: list[tuple[RecordResult | BaseException | None, str | None, str | None]],
    ) -> None:
        """Log a failed item once: its identifier, the first failure and the call that
        made it (the user's: a ``put`` and its stream, the item's scope, ``fail_item``)."""
        raised = self._raised.get(item)
        bad = [n for n, o in enumerate(outcomes) if o is not None and _failure(o)]
        exc_info: BaseException | None = None
        if raised:
            exc, call = raised[0]
            error = _describe(exc)
            if not isinstance(exc, _HandlerFailed):
                exc_info = exc
        elif bad:
            tied = [(o, stream) for o, i, stream in entries if i == item]
            outcome, stream = tied[bad[0]]
            assert outcome is not None
            error = _describe(outcome)
            target = stream or self._owner.stream_name
            call = f"records.put(stream_name={target!r})" if target else "records.put()"
        else:
            return
        _log.warning(
            "lambda_item_failed",
            item=item,
            call=call,
            error=error,
            records_failed=len(bad),
            exc_info=exc_info,
        )


def _failure(outcome: RecordResult | BaseException) -> bool:
    return isinstance(outcome, BaseException) or not outcome.ok


def _describe(outcome: RecordResult | BaseException) -> str:
    if isinstance(outcome, BaseException):
        return f"{type(outcome).__name__}: {outcome}"[:500]
    return f"{outcome.error_code}: {outcome.error_message}"[:500]


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


def _name(fn: Callable[..., Any]) -> str:
    return str(getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or fn)


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
            self._resume(sync)
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
                    finally:
                        invocation.send()
                    if invocation._futures:
                        with contextlib.suppress(TimeoutError):
                            sync.flush(timeout=self._budget(context))
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
        report = invocation._report(answer if self.batch else None)
        invocation.report = report
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
