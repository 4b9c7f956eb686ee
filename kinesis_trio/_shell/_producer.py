"""The Producer: the public face of the pipeline (``_shell``) and its engine (``_engine``).

``put`` does a hash, a lookup and an append when there is room: no task switch. It waits
(backpressure) while ``max_outstanding_records`` / ``max_outstanding_bytes`` would be
exceeded or while its shard's channel is full. ``docs/architecture.md`` draws the whole
pipeline and names the module that owns each decision.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import TYPE_CHECKING, Any

import anyio
import anyio.abc
import anyio.lowlevel
import sniffio

if sys.version_info < (3, 11):  # pragma: no cover
    from exceptiongroup import BaseExceptionGroup
from .._aws._client import KinesisClient
from .._aws._credentials import StaticCredentials
from .._config import ProducerConfig
from .._core import (
    Engine,
    NoRoom,
    Outbox,
    StreamState,
    arn_ref,
    check_stream_name,
    coerce_data,
    default_stream_ref,
    dry_run_body,
    is_arn,
    name_and_arn,
    parse_stream_arn,
)
from .._errors import KinesisError, ProducerClosedError, ProducerForkedError
from .._logging import get_logger
from .._metric_names import MetricsSink
from .._results import ABORTED, CLOSE_TIMEOUT
from ..metrics._recorder import metrics_for
from . import _forks as forks
from ._batch_puts import BatchPuts
from ._failure_feed import FailureFeed
from ._outcome import Outcome
from ._pipeline import Pipeline
from ._schema_puts import SchemaPuts
from ._states import CLOSED, CLOSING, FORKED, OPEN
from ._views import ProducerViews

if TYPE_CHECKING:
    from ..gsr._types import SchemaRegistry
    from . import _spooler

__all__ = ["Producer"]

_log = get_logger("kinesis_trio.producer")

_OPEN, _CLOSING, _CLOSED, _FORKED = OPEN, CLOSING, CLOSED, FORKED
#: ``put`` yields to the event loop once every this many calls, so a loop that only puts
#: still lets responses in (a checkpoint per record would cost a task switch per record).
_YIELD_EVERY = 1024
#: The final metrics flush: bound on a normal close, and on an exit by exception/cancel.
_CLOSE_METRICS_TIMEOUT = 10.0
_ABORT_METRICS_TIMEOUT = 1.0


async def _dry_run(client: KinesisClient, name: str, arn: str | None) -> None:
    """``Producer.check_access``'s request: a PutRecords with ``DryRun``."""
    try:
        await client.call_raw("PutRecords", dry_run_body(name, arn), stream_arn=arn)
    except KinesisError as exc:
        if exc.code == "DryRunOperationException":
            _log.debug("access_checked", stream=name)
            return
        raise
    _log.warning(
        "dry_run_ignored",
        stream=name,
        reason="the endpoint answered a DryRun PutRecords with success: it ignores "
        "DryRun, so the probe (one empty record) was written",
    )


class _StreamNotLoaded(anyio.WouldBlock):
    """put_nowait to a stream whose shard map is not loaded yet (``put`` loads it)."""


#: Connections the producer's client has beyond ``max_connections``, for calls that are not
#: PutRecords (ListShards, DescribeStreamSummary).
_CONTROL_CONNECTIONS = 2


class Producer(ProducerViews, SchemaPuts, BatchPuts):
    """A Kinesis producer with KPL aggregation, per-shard batching, backpressure and outcomes.

    Use it as an async context manager, under Trio or asyncio::

        async with Producer("orders", region_name="us-east-1") as producer:
            outcome = await producer.put(b"payload", partition_key="user-1")
            result = await outcome.wait()

    ``stream_name`` is the default stream (optional): a name, or an ARN (``stream_arn``
    says the same; another account's stream is reached only by its ARN, which must be in
    the client's region). ``region_name``, ``endpoint_url`` and
    ``credentials`` default as the AWS SDKs do (``AWS_REGION``, ``AWS_ENDPOINT_URL_KINESIS``,
    the botocore credential chain). ``transport`` replaces the network for tests:
    ``kinesis_trio.testing``'s fake Kinesis (reached through the producer's own connection
    pool and HTTP framing), or any ``httpx.AsyncBaseTransport``. ``schema_registry`` (a
    ``kinesis_trio.gsr.GlueSchemaRegistry``): where ``put_object`` finds schema versions.
    """

    def __init__(
        self,
        stream_name: str | None = None,
        *,
        stream_arn: str | None = None,
        region_name: str | None = None,
        endpoint_url: str | None = None,
        credentials: StaticCredentials | None = None,
        config: ProducerConfig | None = None,
        profile_name: str | None = None,
        transport: Any = None,
        metrics_sinks: Sequence[MetricsSink] = (),
        schema_registry: SchemaRegistry | None = None,
    ) -> None:
        self._schema_registry = schema_registry
        if config is None:
            config = ProducerConfig()
        if not isinstance(config, ProducerConfig):
            raise TypeError(f"config must be a ProducerConfig, got {type(config).__name__}")
        self._default_stream = default_stream_ref(stream_name, stream_arn)
        self._config = config
        self._client_args: dict[str, Any] = {
            "region_name": region_name,
            "endpoint_url": endpoint_url,
            "credentials": credentials,
            "profile_name": profile_name,
            # PutRecords take at most max_connections; the rest keep shard-map refreshes
            # and dry runs from waiting behind requests that hang
            "max_connections": config.max_connections + _CONTROL_CONNECTIONS,
            "request_timeout": config.request_timeout,
            "connect_timeout": config.connect_timeout,
            "verify": config.verify,
            "transport": transport,
        }
        self._client: KinesisClient | None = None
        self._tg: anyio.abc.TaskGroup | None = None
        self._pipeline: Pipeline | None = None
        self._engine: Engine[Outcome] | None = None
        #: where the engine leaves what the tasks must do (given to it when it opens)
        self._outbox = Outbox()
        self._spooler: _spooler.Spooler | None = None
        self._state = _CLOSED
        self._forked_message = ""
        self._entered = False
        self._stream_locks: dict[str, anyio.Lock] = {}
        self._now: Callable[[], float] = anyio.current_time
        self._put_calls = 0
        self._metrics = metrics_for(config, metrics_sinks)
        self._measure = self._metrics.enabled
        self._failures = FailureFeed(
            config.failures_buffer_records, config.failures_buffer_bytes, self._metrics
        )

    # -- lifecycle ----------------------------------------------------------------------

    async def __aenter__(self) -> Producer:
        if self._entered:
            raise RuntimeError("a Producer can be entered only once")
        self._entered = True
        if sniffio.current_async_library() == "trio":
            import trio

            # the run's clock itself (MockClock in tests): one call instead of three
            self._now = trio.lowlevel.current_clock().current_time
        else:
            import asyncio

            self._now = asyncio.get_running_loop().time
        client = KinesisClient(**self._client_args)
        await client.__aenter__()
        self._client = client
        tg = anyio.create_task_group()
        await tg.__aenter__()
        self._tg = tg
        refreshable = not isinstance(self._client_args["credentials"], StaticCredentials)
        config, metrics = self._config, self._metrics
        outbox = self._outbox
        self._engine = engine = Engine(config, metrics, refreshable, True, outbox, Outcome)
        self._pipeline = Pipeline(
            config, client, tg, self._now, engine, outbox, self._failures.failed
        )
        self._state = _OPEN
        forks.watch(self)
        if self._measure:
            tg.start_soon(self._metrics.run)
        try:
            if config.spool_dir is not None:
                from ._spooler import Spooler  # sqlite3 is loaded only with a spool

                self._spooler = spooler = Spooler(
                    config,
                    engine,
                    self._now,
                    self._notify_progress,
                    self._wait_progress,
                    self._pipeline.apply,
                    dead_letters=self._failures.failed,
                )
                await spooler.open()
                self._failures.use_spool(spooler.release)
            if self._default_stream is not None:
                await self._load_stream(self._default_stream)
            if self._spooler is not None:
                self._spooler.start(tg, self._stream)
        except BaseException as exc:
            self._set_closed()
            tg.cancel_scope.cancel()
            try:
                await tg.__aexit__(None, None, None)
            finally:
                await self._close_client()
            raise exc from None
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        tg = self._tg
        assert tg is not None
        if self._state == _FORKED:  # a forked child's copy: the close is the parent's
            await forks.leave(tg)
            return None
        self._state = _CLOSING
        self._notify_progress()
        reason: tuple[str, str] | None = None
        try:
            if exc_type is None:
                with anyio.move_on_after(self._config.close_timeout):
                    await self._flush_all()
                if self._engine is not None and self._engine.status().unresolved:
                    reason = (
                        CLOSE_TIMEOUT,
                        f"not confirmed within close_timeout ({self._config.close_timeout} s)",
                    )
            else:
                what = (
                    "cancelled"
                    if isinstance(exc, anyio.get_cancelled_exc_class())
                    else f"{exc_type.__name__}: {exc}"[:200]
                )
                reason = (
                    ABORTED,
                    f"producer scope exited ({what}) before the record was confirmed; "
                    "a request in flight may still have written it",
                )
        except BaseException as inner:
            reason = (ABORTED, f"producer closing was interrupted ({type(inner).__name__})")
            raise
        finally:
            tg.cancel_scope.cancel()
            try:
                # The body's own exception (if any) propagates by itself: we return None.
                await tg.__aexit__(None, None, None)
            except BaseExceptionGroup as group:
                await self._finish(reason or (ABORTED, "producer task failed"))
                if len(group.exceptions) == 1:
                    raise group.exceptions[0] from group
                raise
            except BaseException:
                await self._finish(reason or (ABORTED, "producer closing was interrupted"))
                raise
            # A normal close gives the final metrics flush its documented bound; an exit by
            # exception or cancellation must not wait long for a slow metrics endpoint.
            await self._finish(reason or (ABORTED, "producer closed"), exc_type is None)
        return None

    async def _close_client(self, metrics_timeout: float = _ABORT_METRICS_TIMEOUT) -> None:
        if self._spooler is not None and self._state != _FORKED:
            await self._spooler.close()  # (closed already, but when entering failed)
        if self._measure and self._engine is not None:
            self._engine.count_received()
            with anyio.CancelScope(shield=True), anyio.move_on_after(metrics_timeout):
                await self._metrics.flush()
        client, self._client = self._client, None
        if client is not None:
            with anyio.CancelScope(shield=True), anyio.move_on_after(5):
                await client.aclose()

    def _set_closed(self) -> None:
        forks.unwatch(self)
        if self._state != _FORKED:
            self._state = _CLOSED
        self._failures.close(self._now())  # the iterators end once they have taken the rest

    async def _finish(self, reason: tuple[str, str], slow: bool = False) -> None:
        """The close's end: the spool's last commit first (each outcome then says whether it
        is in the spool), the rest failed with ``reason``, then the client (``slow``: a
        normal close, whose final metrics flush gets its documented bound)."""
        if self._spooler is not None and self._state != _FORKED:
            await self._spooler.close()
        if self._engine is not None and self._pipeline is not None:
            self._engine.fail_unresolved(reason[0], reason[1], self._now())
            self._pipeline.apply()  # the dead letters
        self._notify_progress()
        await self._close_client(_CLOSE_METRICS_TIMEOUT if slow else _ABORT_METRICS_TIMEOUT)
        self._set_closed()

    # -- put ------------------------------------------------------------------------------

    async def put(
        self,
        data: bytes | bytearray | memoryview,
        partition_key: str | None = None,
        explicit_hash_key: str | None = None,
        *,
        stream_name: str | None = None,
        stream_arn: str | None = None,
    ) -> Outcome:
        """Accept a record and return its :class:`Outcome`.

        Waits while the producer is at its backpressure limits; cancelling it while it waits
        means the record was not accepted. Bad input raises ``TypeError``/``ValueError`` at
        once: a record over the stream's limit, a missing ``partition_key`` (optional only on
        a stream whose ``RecordDistributionStrategy`` is ``AUTO``), a malformed ARN. The
        first put to a stream other than the default (by name, or by ARN: ``stream_arn`` or
        an ARN as ``stream_name``) loads it and raises the AWS error if it cannot be used.
        With ``spool_sync="put"`` it returns once the record is in the spool (or resolved).
        """
        if stream_arn is not None:
            stream_name = arn_ref(stream_name, stream_arn)
        self._put_calls += 1
        if self._put_calls % _YIELD_EVERY == 0:
            await anyio.lowlevel.checkpoint()
        try:  # the common case, without a coroutine more per record
            outcome = self.put_nowait(
                data, partition_key, explicit_hash_key, stream_name=stream_name
            )
        except anyio.WouldBlock:  # no room, or the stream is not loaded yet
            outcome = await self._accept_waiting(
                data, partition_key, explicit_hash_key, stream_name
            )
        spooler = self._spooler
        if spooler is not None and spooler.sync_on_put():
            return await spooler.durable(outcome)
        return outcome

    async def _accept(
        self,
        data: bytes | bytearray | memoryview,
        partition_key: str | None,
        explicit_hash_key: str | None,
        stream_name: str | None,
    ) -> Outcome:
        """``put`` without the wait for durability (SyncProducer's pump waits for it apart,
        for every record it moved meanwhile)."""
        self._put_calls += 1
        if self._put_calls % _YIELD_EVERY == 0:
            await anyio.lowlevel.checkpoint()
        return await self._accept_waiting(data, partition_key, explicit_hash_key, stream_name)

    async def _accept_waiting(
        self,
        data: bytes | bytearray | memoryview,
        partition_key: str | None,
        explicit_hash_key: str | None,
        stream_name: str | None,
    ) -> Outcome:
        """Accept the record, waiting for room or loading its stream as long as needed (the
        wait for room is sampled as ``PutAdmissionWait``)."""
        since = None
        while True:
            try:
                outcome = self.put_nowait(
                    data, partition_key, explicit_hash_key, stream_name=stream_name
                )
            except _StreamNotLoaded:
                await self._load_stream(stream_name or self._require_default())
            except anyio.WouldBlock:
                since = self._now() if since is None else since
                await self._wait_progress()
            else:
                if since is not None:
                    self._metrics.stream_sample(
                        "PutAdmissionWait", outcome.stream, self._now() - since
                    )
                return outcome

    def put_nowait(
        self,
        data: bytes | bytearray | memoryview,
        partition_key: str | None = None,
        explicit_hash_key: str | None = None,
        *,
        stream_name: str | None = None,
        stream_arn: str | None = None,
    ) -> Outcome:
        """Accept a record without waiting; raises ``anyio.WouldBlock`` when full.

        Also raises ``anyio.WouldBlock`` when the stream is one whose shard map is not
        loaded yet (``await put()`` loads it).
        """
        if stream_arn is not None:
            stream_name = arn_ref(stream_name, stream_arn)
        if self._state != _OPEN:
            if self._state == _FORKED:
                raise ProducerForkedError(self._forked_message)
            raise ProducerClosedError(
                "the producer is closed"
                if self._entered
                else "the producer is not open: use `async with Producer(...)`"
            )
        if stream_name is None:
            name = self._default_stream
        else:
            name = stream_name
            if type(name) is not str or not name:
                check_stream_name(name)
        assert self._engine is not None
        stream = self._engine.stream(name) if name is not None else None
        if stream is None:
            if name is None:
                self._require_default()
            elif is_arn(name):
                parse_stream_arn(name, self.client.region_name)  # a bad ARN: ValueError now
            raise _StreamNotLoaded(name)
        if type(data) is not bytes:
            data = coerce_data(data)
        engine = self._engine
        try:
            outcome = engine.accept(stream, data, partition_key, explicit_hash_key, self._now())
        except NoRoom:
            raise anyio.WouldBlock from None
        if self._outbox.effects:  # a batch sealed, a linger deadline set
            self._pipeline.apply()  # type: ignore[union-attr]
        return outcome

    # -- flush ----------------------------------------------------------------------------

    async def flush(self) -> None:
        """Send everything buffered now; return when every outcome created before is resolved."""
        if self._state == _FORKED:
            raise ProducerForkedError(self._forked_message)
        if self._state == _CLOSED:
            return
        await self._flush_all()

    def _forked(self, message: str) -> None:
        """In a child forked from the process that opened it (``_forks``): every call
        raises ``ProducerForkedError`` with ``message``; its spool is the parent's."""
        self._state = _FORKED
        self._forked_message = message
        if self._spooler is not None:
            self._spooler.abandon()

    # -- the spool ------------------------------------------------------------------------

    async def _stream(self, ref: str) -> StreamState:
        if self._state != _OPEN:  # recovery accepts nothing once the producer closes
            raise ProducerClosedError("the producer is closing")
        await self._load_stream(ref)  # the loaded stream ``ref`` names: for recovery
        assert self._engine is not None
        stream = self._engine.stream(ref)
        assert stream is not None
        return stream

    async def _flush_all(self) -> None:
        await _flush_rest(self, _flush_begin(self))

    # -- progress notification -------------------------------------------------------------

    async def _wait_progress(self) -> None:
        if self._state == _CLOSED or self._pipeline is None:
            raise ProducerClosedError("the producer is closed")
        await self._pipeline.wait_progress()
        if self._state != _OPEN and self._state != _CLOSING:
            raise ProducerClosedError("the producer is closed")

    def _notify_progress(self) -> None:
        if self._pipeline is not None:
            self._pipeline.progress()

    # -- streams --------------------------------------------------------------------------

    async def _load_stream(self, ref: str) -> None:
        """Load a stream (``ref``: its name or ARN): its facts, its shards, its tasks."""
        engine, pipeline = self._engine, self._pipeline
        assert engine is not None and pipeline is not None
        if engine.stream(ref) is not None:
            return
        name, arn = name_and_arn(ref, self.client.region_name)
        lock = self._stream_locks.setdefault(ref, anyio.Lock())
        async with lock:
            if engine.stream(ref) is not None:
                return
            if self._state != _OPEN:
                raise ProducerClosedError("the producer is closed")
            try:
                await self.client.endpoint_for("PutRecords", (("StreamARN", arn),) if arn else ())
                facts, shard_map = await pipeline.load(name, arn)
                why = engine.refusal(facts)  # per-key ordering on an AUTO stream
                if why is not None:
                    raise ValueError(why)
                if self._config.check_access:
                    await self.check_access(ref)
            except Exception as exc:
                if self._state != _OPEN:  # closed while loading: the client went away
                    raise ProducerClosedError("the producer closed while loading " + name) from exc
                raise
            if self._state != _OPEN:  # closed while loading: no task may start now
                raise ProducerClosedError(f"the producer closed while loading {name}")
            pipeline.start_stream(ref, name, arn, facts, shard_map)
            _log.debug("stream_loaded", stream=name, shards=len(shard_map))

    # -- access ---------------------------------------------------------------------------

    async def check_access(self, stream_name: str | None = None) -> None:
        """Check that this producer may write to a stream, without writing to it.

        Sends a PutRecords with ``DryRun`` (one empty record) and returns when Kinesis
        answers ``DryRunOperationException`` (the request would have succeeded). An error
        that would fail the records raises at once as its exception
        (:class:`AccessDeniedError`, :class:`ResourceNotFoundError`, :class:`KMSError`, ...).
        An endpoint that ignores ``DryRun`` (both npm emulators, older proxies) writes the
        probe: a 200 answer logs a WARNING saying so. ``stream_name``: a name or an ARN
        (default: the producer's stream). ``ProducerConfig(check_access=True)`` runs it
        for each stream as it is loaded.
        """
        ref = self._require_default() if stream_name is None else stream_name
        check_stream_name(ref)
        await _dry_run(self.client, *name_and_arn(ref, self.client.region_name))


def _flush_begin(producer: Producer) -> int:
    """Begin a flush here (no checkpoint): what is held is sealed and on its way now.
    The flush's target, for ``_flush_rest`` (which ends it)."""
    engine, pipeline = producer._engine, producer._pipeline
    assert engine is not None and pipeline is not None
    target = engine.flush_started()
    try:
        pipeline.poke_all()
    except BaseException:
        engine.flush_ended()
        raise
    return target


async def _flush_rest(producer: Producer, target: int) -> None:
    """A flush begun (``Producer._flush_begin``): until every outcome of ``target`` or
    before is resolved; then it ends."""
    engine = producer._engine
    assert engine is not None
    try:
        while engine.pending_through(target):
            await producer._wait_progress()
    finally:
        engine.flush_ended()
