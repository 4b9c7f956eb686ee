"""One invocation of a Lambda handler: the records it puts, each tied (if wished) to the
input item it came from, its item scopes, and what its answer says of each item
(``_batch``'s rule decides; ``_handler.LambdaProducer`` runs it).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import contextvars
import dataclasses
from collections.abc import Awaitable, Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Literal, Protocol, overload

from .._errors import KinesisTrioError
from .._logging import get_logger
from .._results import RecordResult
from .._shell._outcome import Outcome
from . import _batch

if TYPE_CHECKING:
    from .._shell._sync_producer import SyncProducer
    from ._records import Record

_log = get_logger("kinesis_trio.aws_lambda")


class _Owner(Protocol):
    """What an invocation needs of its ``LambdaProducer``."""

    stream_name: str | None
    batch: bool
    fifo: bool

    @property
    def producer(self) -> SyncProducer: ...

    def _budget(self, context: Context) -> float: ...


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

    def __init__(self, owner: _Owner, event: Any, context: Context) -> None:
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
            from . import _records  # the typed records' module: loaded at their first use

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
        """The item a record is tied to: ``item=``, else the scope's it is put in. Raises
        ``ItemSkippedError`` for an item at or after the first failed one (SQS FIFO)."""
        if item is None:
            scope = _SCOPE.get()
            if scope is not None and scope[0] is self:
                item = scope[1]
        if self._skipping(item):
            raise ItemSkippedError(f"message {item!r} is after a failed one: not sent")
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

    def _send_and_wait(self, timeout: float) -> None:
        """The handler returned: hand over the records left (:meth:`send`) and wait up to
        ``timeout`` seconds until every record put is settled, in one hand-over to the
        producer's thread (``TimeoutError`` past it)."""
        pending, self._pending = self._pending, []
        self._owner.producer._hand_over_and_flush(pending, timeout)

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
            try:  # one look at the future (done() and result() take its lock each)
                outcome: RecordResult | BaseException | None = future.result(0)
            except BaseException as exc:
                outcome = _ended_in(future, exc)
            entries.append((outcome, item, stream))
        for record, item, stream in self._outcomes:
            entries.append((record.result() if record.done() else None, item, stream))
        # one pass over the records (a warm invocation may have thousands)
        failed: list[RecordResult] = []
        failed_loose: list[RecordResult] = []
        raised: BaseException | None = None
        per_item: dict[str, list[RecordResult | BaseException | None]] = {}
        unconfirmed_items = set()
        confirmed = unconfirmed = 0
        for outcome, item, _ in entries:
            if outcome is None:
                unconfirmed += 1
            elif isinstance(outcome, RecordResult):
                if outcome.ok:
                    confirmed += 1
                else:
                    failed.append(outcome)
                    if item is None:
                        failed_loose.append(outcome)
            elif item is None and raised is None:
                raised = outcome
            if item is not None:
                per_item.setdefault(item, []).append(outcome)
                if outcome is None:
                    unconfirmed_items.add(item)
        self._loose = tuple(failed_loose)
        if raised is not None:
            raise raised
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
        self.report = InvocationReport(
            confirmed,
            tuple(failed),
            unconfirmed,
            frozenset(failed_items),
            frozenset(unconfirmed_items),
            frozenset(skipped),
        )
        return self.report

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


def _ended_in(
    future: concurrent.futures.Future[RecordResult], raised: BaseException
) -> BaseException | None:
    """What ``future.result(0)`` raised says: not resolved (None), or the exception the
    record ended in (anything else raised meanwhile goes on)."""
    if not future.done():
        return None
    ended = future.exception(0)
    if ended is not raised:
        raise raised
    return ended


def _failure(outcome: RecordResult | BaseException) -> bool:
    return isinstance(outcome, BaseException) or not outcome.ok


def _describe(outcome: RecordResult | BaseException) -> str:
    if isinstance(outcome, BaseException):
        return f"{type(outcome).__name__}: {outcome}"[:500]
    return f"{outcome.error_code}: {outcome.error_message}"[:500]


def _name(fn: Callable[..., Any]) -> str:
    return str(getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or fn)
