"""SyncProducer: a thread-safe, blocking front for the Producer, for code without an event loop.

The :class:`~kinesis_trio.Producer` runs on a background thread, in an event loop started
with anyio's blocking portal. Threads never make one round trip to that loop per record:

* ``put`` validates the record in the caller's thread, waits only if the bridge is at the
  config's backpressure limits (``max_outstanding_records`` / ``max_outstanding_bytes``,
  counting records queued here and records in the producer until their futures resolve),
  appends it to a submission deque and returns a ``concurrent.futures.Future``;
* one *pump* task on the loop drains the deque in order with ``put_nowait`` (awaiting
  ``put`` only when the producer pushes back, e.g. a full shard queue or a stream to load);
* one *resolver* task waits on the oldest outcome and then settles every resolved outcome
  in a batch (a periodic sweep keeps one slow record from holding back the others).

The loop is woken (a non-blocking ``call_soon_threadsafe`` / ``TrioToken.run_sync_soon``)
only when the pump has gone idle. The deque and the books shared by the threads are the
``Line`` (``_sync_handoff``); the pump, the resolver and the close are the ``Loop``
(``_sync_loop``); SyncProducer checks the records and opens and closes the two.
"""

from __future__ import annotations

import atexit
import concurrent.futures
import contextlib
import os
import sys
import threading
import weakref
from collections.abc import Callable, Iterable
from concurrent.futures import Future
from types import TracebackType
from typing import TYPE_CHECKING, Any, TypeVar

from anyio.from_thread import BlockingPortal, start_blocking_portal

from .._aws._credentials import StaticCredentials
from .._config import RECORD_MAX_SIZE_CEILING, ProducerConfig
from .._core import (
    RecoveryReport,
    at_index,
    check_stream_name,
    coerce_data,
    parse_explicit_hash_key,
    partition_key_length,
    unpack,
)
from .._dead_letters import FailedRecord
from .._errors import ProducerForkedError
from .._results import RecordResult
from . import _forks as forks
from ._producer import Producer
from ._schema_puts import SyncSchemaPuts
from ._sync_handoff import CLOSED, FORKED, Item, Line, await_durable
from ._sync_loop import Loop

if TYPE_CHECKING:
    from ..gsr._types import SchemaRegistry

__all__ = ["SyncProducer"]

_T = TypeVar("_T")


Data = bytes | bytearray | memoryview


def _runs_trio() -> bool:
    """Whether the calling thread is running a Trio event loop."""
    trio = sys.modules.get("trio")  # not imported: not running
    if trio is None:
        return False
    try:
        trio.lowlevel.current_trio_token()
    except RuntimeError:
        return False
    return True


class SyncProducer(SyncSchemaPuts):
    """A blocking, thread-safe Kinesis producer: the :class:`Producer` on a background thread.

    ::

        with SyncProducer("orders", region_name="us-east-1") as producer:
            future = producer.put(b"data", partition_key="k")
            result = future.result(timeout=10)  # a RecordResult
            producer.flush(timeout=30)

    The arguments are the :class:`Producer`'s, plus ``backend`` (``"trio"`` or
    ``"asyncio"``) and ``backend_options`` for the background event loop, and
    ``on_failure``, called with each record that fails for good as a :class:`FailedRecord`
    (the dead letters, ``Producer.failures()``). It is called in a thread of its own
    (``kinesis-trio-on-failure``: never the event loop's thread nor a caller's), one call
    at a time, in the order the records failed, without awaiting the futures; records that
    fail as the
    producer closes are delivered before ``close`` returns (do not call ``close`` from it).
    What it raises is logged (``on_failure_raised``, ERROR) and the producer goes on. A slow
    callback never holds the producer up: failures wait in the bounded buffer
    (``failures_buffer_records``), beyond which they are dropped and counted.

    Thread safety: :meth:`put`, :meth:`put_many`, :meth:`flush`, :meth:`close` and the
    properties may be called from any thread, concurrently. :meth:`open` (or ``with``) once.
    Futures' done-callbacks run on the producer's thread: keep them short and non-blocking
    (a ``put`` from a callback raises ``RuntimeError`` rather than wait for room).

    Closing (``close()``, or leaving the ``with`` block normally) sends everything and waits
    up to ``config.close_timeout`` (records still unconfirmed then fail with
    ``ProducerCloseTimeout``), then stops the thread. Leaving the block by an exception, or
    ``close(abort=True)``, fails unconfirmed records with ``ProducerAborted`` at once, as the
    async Producer does. Either way every future is resolved before ``close`` returns.
    With a spool, the unconfirmed records, those still queued for the loop included, stay
    in the spool for the next producer (their futures say so), as the async Producer's do;
    those the spool has no room for, or its last commit cannot write, fail for good.
    An open producer still open at interpreter exit is closed (flushed) by ``atexit``.

    In a child forked from the process that opened it (gunicorn ``--preload``, Celery's
    prefork master), its thread and records stay in the parent: with ``after_fork="raise"``
    (the default) its first ``put``, ``put_many`` or ``flush`` there raises
    :class:`ProducerForkedError`; with ``after_fork="reopen"`` that first call opens a
    producer of the child's own (same arguments, empty books) and goes on, except with a
    spool (``spool_dir``), which stays the parent's: there it raises too.

    With ``schema_registry``, :meth:`put_object` writes typed records (Glue Schema Registry).

    With a spool (``config.spool_dir``), ``put`` returns once the record is queued, as
    always, and the record is in the spool within ``spool_interval``; :meth:`wait_durable`
    waits until the records put before are in it. With ``spool_sync="put"``, ``put`` and
    ``put_many`` return only once their records are in the spool (or resolved): the records
    of all the threads putting meanwhile share each write. :meth:`recovered` and
    :attr:`recovery` tell what became of the records found in the spool at open.
    """

    def __init__(
        self,
        stream_name: str | None = None,
        *,
        region_name: str | None = None,
        endpoint_url: str | None = None,
        credentials: StaticCredentials | None = None,
        config: ProducerConfig | None = None,
        profile_name: str | None = None,
        transport: Any = None,
        backend: str = "trio",
        backend_options: dict[str, Any] | None = None,
        on_failure: Callable[[FailedRecord], object] | None = None,
        after_fork: str = "raise",
        schema_registry: SchemaRegistry | None = None,
    ) -> None:
        if on_failure is not None and not callable(on_failure):
            raise TypeError(f"on_failure must be callable, got {on_failure!r}")
        if after_fork not in ("raise", "reopen"):
            raise ValueError(f"after_fork must be 'raise' or 'reopen', got {after_fork!r}")
        #: what a forked child does at its first call: raise, or open a producer of its own
        self._after_fork = after_fork
        self._reopen = False  # in a forked child, with after_fork="reopen": not reopened yet
        #: the Producer's arguments (a forked child with after_fork="reopen" makes one anew)
        self._producer_args: dict[str, Any] = {
            "region_name": region_name,
            "endpoint_url": endpoint_url,
            "credentials": credentials,
            "config": config,
            "profile_name": profile_name,
            "transport": transport,
            "schema_registry": schema_registry,
        }
        self._on_failure = on_failure
        # The Producer validates its arguments now, in the caller's thread.
        self._producer = Producer(stream_name, **self._producer_args)
        self._config = self._producer.config
        self._default_stream = stream_name
        self._backend = backend
        self._backend_options = backend_options
        # Checked here against what any stream could take; against the stream's own limit
        # here too when it is loaded, else by the loop's put (the error goes to the future).
        self._max_record_size = min(
            self._config.max_record_size or RECORD_MAX_SIZE_CEILING,
            self._config.max_outstanding_bytes,
        )
        #: spool_sync="put": put waits until its record is in the spool
        self._sync_put = self._config.spool_dir is not None and self._config.spool_sync == "put"
        # What callers share with the loop (guarded by its lock), and the loop's tasks.
        self._line = Line(self._config.max_outstanding_records, self._config.max_outstanding_bytes)
        self._loop = Loop(self._line, self._producer, stream_name, on_failure)
        # Lifecycle.
        self._close_lock = threading.Lock()
        self._portal_cm: contextlib.AbstractContextManager[BlockingPortal] | None = None
        self._portal: BlockingPortal | None = None
        self._main: Future[None] | None = None
        self._atexit: Callable[[], None] | None = None
        #: in a forked child that reopened: the parent's portal, loop and producer, kept
        self._parent: tuple[object, ...] = ()

    # -- lifecycle ------------------------------------------------------------------------

    @property
    def config(self) -> ProducerConfig:
        """The producer's settings."""
        return self._config

    @property
    def backend(self) -> str:
        """The background event loop's backend (``"trio"`` or ``"asyncio"``)."""
        return self._backend

    @property
    def outstanding_records(self) -> int:
        """Records accepted by :meth:`put` whose futures are not resolved yet."""
        return self._line.outstanding_records

    @property
    def outstanding_bytes(self) -> int:
        """Bytes (data + partition key) of the outstanding records."""
        return self._line.outstanding_bytes

    def open(self) -> SyncProducer:
        """Start the background thread and the producer (loads the default stream's shard
        map: a missing stream or bad credentials raise here). Call once."""
        if _runs_trio():
            # The portal's thread could never start its task while this thread blocks on it.
            raise RuntimeError(
                "SyncProducer.open() was called from a thread that is running Trio, where it "
                "would wait for ever: use `async with Producer(...)` in async code, or open "
                "the SyncProducer from a thread of its own (trio.to_thread.run_sync)"
            )
        with self._close_lock:
            self._line.start()
            cm = start_blocking_portal(self._backend, self._backend_options)
            portal = cm.__enter__()
            try:
                self._main, _ = portal.start_task(self._loop.run)
            except BaseException:
                self._line.shut()
                cm.__exit__(None, None, None)
                raise
            self._portal_cm = cm
            self._portal = portal
            ref = weakref.ref(self)

            def close_at_exit() -> None:
                producer = ref()
                if producer is not None:
                    producer.close()

            self._atexit = close_at_exit
            atexit.register(close_at_exit)
            forks.watch(self)
        return self

    def __enter__(self) -> SyncProducer:
        return self.open()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if exc_type is None:
            self.close()
            return
        with contextlib.suppress(Exception):  # the body's exception is the one to report
            self.close(abort=True, reason=f"{exc_type.__name__}: {exc}")

    def close(self, *, abort: bool = False, reason: str | None = None) -> None:
        """Flush (up to ``config.close_timeout``; with ``abort``, fail what is unconfirmed
        at once), resolve every future and stop the thread. Idempotent; any thread.

        ``put`` calls waiting for room, and later ones, raise ``ProducerClosedError``.
        """
        if self._line.loop_thread == threading.get_ident():
            raise RuntimeError("close() cannot be called from the producer's own thread")
        forks.unwatch(self)
        if self._line.state == FORKED:  # the parent's loop and records: nothing to close here
            return
        with self._close_lock:
            cm, main = self._portal_cm, self._main
            if cm is None or main is None:
                self._line.shut()
                return
            self._line.close(abort, reason)
            try:
                self._loop.stop()
                main.result()  # every future is resolved when this returns
            finally:
                self._portal_cm = None
                if self._atexit is not None:
                    atexit.unregister(self._atexit)
                    self._atexit = None
                cm.__exit__(None, None, None)
                self._line.unbind()  # its thread has ended

    def _forked(self, message: str) -> None:
        """In a child forked from the process that opened it (``_forks``): ``put``,
        ``put_many`` and ``flush`` raise ``ProducerForkedError`` with ``message``;
        ``close`` (and the exit's) returns at once: the loop, its thread and the records
        are the parent's, which sends them. Its locks are made anew (a thread of the
        parent may have held one at the fork)."""
        self._close_lock = threading.Lock()
        self._line.forked(message)
        # The portal's context (a generator, suspended in anyio's start_blocking_portal) is
        # kept, never exited here: exiting it, or collecting it, stops the portal by a call
        # into the parent's loop thread, which does not exist here and would never answer.
        # The portal is also marked not running (anyio's own check) so that a collection at
        # the child's exit skips that call instead of waiting for ever.
        portal = self._portal
        if portal is not None and hasattr(portal, "_event_loop_thread_id"):
            portal._event_loop_thread_id = None
        self._reopen = self._after_fork == "reopen"

    def _reopened(self) -> bool:
        """In a forked child with ``after_fork="reopen"``: open a producer of this process's
        own (a new loop thread, connections and books; the parent's records stay the
        parent's) and return True; else False."""
        with self._close_lock:
            if not self._reopen:
                return self._line.state != FORKED  # another thread reopened it meanwhile
            if self._config.spool_dir is not None:
                raise ProducerForkedError(
                    f"{self._line.forked_message}. after_fork='reopen' cannot reopen it here: "
                    f"its spool ({os.fspath(self._config.spool_dir)}) belongs to the parent, "
                    "which owns its records (a spool has one owner). Open a producer in the "
                    "child with a spool_dir of its own"
                )
            self._reopen = False
            # The parent's portal, its context and its loop are kept (never exited here).
            self._parent = (self._portal_cm, self._portal, self._main, self._producer)
            self._producer = Producer(self._default_stream, **self._producer_args)
            self._line = Line(
                self._config.max_outstanding_records, self._config.max_outstanding_bytes
            )
            self._loop = Loop(self._line, self._producer, self._default_stream, self._on_failure)
            self._portal_cm = self._portal = self._main = None
            self._atexit = None
        self.open()
        return True

    # -- put ------------------------------------------------------------------------------

    def put(
        self,
        data: Data,
        partition_key: str | None = None,
        explicit_hash_key: str | None = None,
        *,
        stream_name: str | None = None,
        timeout: float | None = None,
    ) -> Future[RecordResult]:
        """Accept a record; return a future resolving to its :class:`RecordResult`.

        Blocks while the producer is at its backpressure limits (``TimeoutError`` after
        ``timeout`` seconds: the record was not accepted). Bad input raises
        ``TypeError``/``ValueError`` at once, as the async ``put`` does; errors found on
        the loop (an unknown non-default stream, a spool refusing records after a failed
        write: ``SpoolWriteError``) are set on the future. Any thread.

        With ``spool_sync="put"`` it then waits (``timeout`` does not bound this) until the
        record is in the spool or its future is resolved; if writing it failed it raises
        ``SpoolWriteError`` whose ``outcome`` is the record's future: it was accepted and
        is sent all the same, but is not durable.
        """
        item = self._check(data, partition_key, explicit_hash_key, stream_name)
        if self._sync_put:
            self._line.not_on_loop("put() with spool_sync='put'")
            item.wants_durable()
        self._on_line(lambda line: line.add(item, timeout))
        if self._sync_put:
            await_durable((item,))
        return item.future

    def put_many(
        self,
        records: Iterable[tuple[Data, str] | tuple[Data, str, str | None]],
        *,
        stream_name: str | None = None,
    ) -> list[Future[RecordResult]]:
        """``put`` for many ``(data, partition_key[, explicit_hash_key])`` records, with one
        lock acquisition per run of records that fit. All are validated before any is
        accepted (a bad one raises what ``put`` would, its message led by ``records[i]:``,
        as ``Producer.put_many`` does); waits for room, and under ``spool_sync="put"`` for
        the spool, as ``put`` does (``SpoolWriteError``'s ``outcome``: every record's
        future). Any thread."""
        if stream_name is not None:
            check_stream_name(stream_name)
        items = []
        for i, record in enumerate(records):
            try:
                items.append(self._check(*unpack(record), stream_name))
            except (TypeError, ValueError) as exc:
                raise at_index(i, exc) from exc
        self._hand_over(items)
        return [item.future for item in items]

    def _hand_over(self, items: list[Item]) -> None:
        """Accept records ``_check`` made (``put_many``; the Lambda helper's batches)."""
        if self._sync_put and items:
            self._line.not_on_loop("put_many() with spool_sync='put'")
            items[-1].wants_durable()  # the pump moves them in order: the last one is enough
        self._on_line(lambda line: line.add_many(items))
        if self._sync_put and items:
            await_durable(items)

    def _hand_over_and_flush(self, items: list[Item], timeout: float | None) -> None:
        """``_hand_over(items)`` then ``flush(timeout)`` (the Lambda helper's last records
        and its wait) in one hand-over to the loop, which finds the records and the flush
        together (but under ``spool_sync="put"``: the records wait for the spool first)."""
        if self._sync_put or self._line.loop_thread == threading.get_ident():
            self._hand_over(items)
            self.flush(timeout)  # (raises on the loop's thread, as flush does)
        else:
            self._on_line(lambda line: line.add_many_and_flush(items, timeout))

    def _on_line(self, call: Callable[[Line], _T]) -> _T:
        """``call(line)``; in a forked child with ``after_fork="reopen"``, on the line of
        the producer it opens (``ProducerForkedError`` otherwise)."""
        try:
            return call(self._line)
        except ProducerForkedError:
            if not self._reopened():
                raise
            return call(self._line)

    def _check(
        self,
        data: Data,
        partition_key: str | None,
        explicit_hash_key: str | None,
        stream_name: str | None,
    ) -> Item:
        """Validate like ``Producer.put_nowait`` (same order, same errors)."""
        if stream_name is not None:
            check_stream_name(stream_name)
        elif not self._default_stream:
            raise ValueError("no stream_name given and the producer has no default stream")
        if type(data) is not bytes:
            data = coerce_data(data)
        pk_len = 0 if partition_key is None else partition_key_length(partition_key)
        size = len(data) + pk_len
        ref = stream_name or self._default_stream or ""
        if self._producer._record_checked(ref, len(data), pk_len, partition_key is None):
            pass  # the loaded stream's own limits (ValueError above if broken)
        elif size > self._max_record_size:
            raise ValueError(
                f"record too large: data ({len(data)} bytes) plus partition key "
                f"({pk_len} bytes) is {size} bytes, over max_record_size "
                f"({self._max_record_size})"
            )
        if explicit_hash_key is not None:
            parse_explicit_hash_key(explicit_hash_key)
        if self._config.spool_dir is not None and size > self._config.spool_max_bytes:
            raise ValueError(
                f"record too large: {size} bytes with its partition key, over "
                f"spool_max_bytes ({self._config.spool_max_bytes}): it could never be spooled"
            )
        return Item(data, partition_key, explicit_hash_key, stream_name, size)

    # -- flush ----------------------------------------------------------------------------

    def flush(self, timeout: float | None = None) -> None:
        """Send everything now; return when every future of an earlier ``put`` is resolved.

        Raises ``TimeoutError`` after ``timeout`` seconds (the records stay in flight).
        Any thread.
        """
        if self._line.loop_thread == threading.get_ident():
            raise RuntimeError("flush() cannot be called from the producer's own thread")
        self._on_line(lambda line: line.flush(timeout))

    # -- the spool ------------------------------------------------------------------------

    def wait_durable(self, timeout: float | None = None) -> None:
        """Return when every record accepted by an earlier ``put`` is in the spool (or its
        future is resolved): how a caller under ``spool_sync="interval"`` waits for
        durability. ``SpoolWriteError`` if the write failed, or if the close's last commit
        did not write every record it kept (called during or after the close);
        ``TimeoutError`` after ``timeout`` seconds. Returns at once without a spool. Any
        thread."""
        if self._config.spool_dir is None:
            return
        self._line.not_on_loop("wait_durable()")
        mark = self._on_line(Line.durable_mark)
        if mark is None:
            spooler = self._producer._spooler
            if self._line.state == CLOSED and spooler is not None:
                error = spooler.closed_error()  # what the close's last commit left
                if error is not None:
                    raise error
            return
        try:
            mark.result(timeout)
        except concurrent.futures.TimeoutError:
            raise TimeoutError(f"wait_durable: not in the spool within {timeout} s") from None

    def recovered(self, timeout: float | None = None) -> RecoveryReport:
        """Block until every record found in the spool at open has its outcome (or the
        producer closes); what became of them (see :attr:`recovery`). ``TimeoutError``
        after ``timeout`` seconds. Any thread but the producer's."""
        if self._line.state == FORKED:
            raise ProducerForkedError(self._line.forked_message)
        portal = self._portal
        if portal is None or self._config.spool_dir is None:
            return self._producer.recovery
        if self._line.loop_thread == threading.get_ident():
            raise RuntimeError("recovered() cannot be called from the producer's own thread")
        try:
            future = portal.start_task_soon(self._producer.recovered)
        except RuntimeError:  # the portal has stopped: the producer is closed
            return self._producer.recovery
        try:
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            future.cancel()
            raise TimeoutError(f"recovered: recovery not over within {timeout} s") from None

    @property
    def recovery(self) -> RecoveryReport:
        """What became so far of the records found in the spool at open
        (:class:`RecoveryReport`; all zero and ``done`` without a spool or a backlog)."""
        return self._producer.recovery

    def __repr__(self) -> str:
        state = ("new", "open", "closing", "closed")[self._line.state]
        return (
            f"<SyncProducer {state} stream={self._default_stream!r} backend={self._backend!r} "
            f"outstanding={self._line.outstanding_records}>"
        )
