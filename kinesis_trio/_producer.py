"""The Producer: a task group of per-shard workers, collectors and senders.

Pipeline, per stream::

    put() ──► shard container (aggregate in formation, plain records)        [caller's task]
               │ sealed when full / at its linger deadline / on flush
               ▼
          shard channel (bounded: ``shard_queue_size`` batches) ──► shard worker task
               ▼
          collector channel (bounded) ──► collector task: PutRecords batches (500 / 5 MiB)
               ▼
          sender tasks (at most ``max_connections`` in flight) ──► resolve Outcomes / retry

``put`` does a hash, a lookup and an append when there is room: no task switch. It waits
(backpressure) while ``max_outstanding_records`` / ``max_outstanding_bytes`` would be
exceeded or while its shard's channel is full.
"""

from __future__ import annotations

import heapq
import itertools
import json
import math
import random
import sys
from binascii import b2a_base64
from bisect import bisect_right
from collections import deque
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Any

import anyio
import anyio.lowlevel
import sniffio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from ._aggregation import AggregateSizer, _vlen, deaggregate, encode_records

if sys.version_info < (3, 11):  # pragma: no cover
    from exceptiongroup import BaseExceptionGroup
from ._client import KinesisClient
from ._config import ProducerConfig
from ._credentials import StaticCredentials
from ._errors import (
    ConnectionLostError,
    KinesisError,
    KinesisTrioError,
    ProducerClosedError,
    RequestTimeoutError,
)
from ._limiter import ShardLimiter
from ._logging import get_logger
from ._metrics import Metrics, MetricsSink
from ._outcome import (
    ABORTED,
    CLOSE_TIMEOUT,
    EXPIRED,
    R_ATTEMPT,
    R_ERROR_CODE,
    R_SEQUENCE_NUMBER,
    R_SHARD_ID,
    Attempt,
    Outcome,
    Resolution,
    failed,
    resolution_attempt,
    written,
)
from ._retry import (
    Action,
    Decision,
    backoff_delay,
    classify_entry_error,
    classify_exception,
    invalid_entries,
)
from ._shards import Shard, ShardMap, hash_key_for, parse_explicit_hash_key
from ._validate import check_stream_name, coerce_data, partition_key_length

__all__ = ["Producer"]

_log = get_logger("kinesis_trio.producer")

_INF = math.inf
_OPEN, _CLOSING, _CLOSED = 0, 1, 2
_KEY_CACHE_MAX = 1 << 16
#: Outer partition key of a multi-record aggregate (the explicit hash key routes it).
_AGG_PARTITION_KEY = "a"
#: ``put`` yields to the event loop once every this many calls, so a loop that only puts
#: still lets responses in (a checkpoint per record would cost a task switch per record).
_YIELD_EVERY = 1024
#: At most one ListShards per stream per this many seconds from this producer (plus jitter).
#: The final metrics flush: bound on a normal close, and on an exit by exception/cancel.
_CLOSE_METRICS_TIMEOUT = 10.0
_ABORT_METRICS_TIMEOUT = 1.0
_MIN_REFRESH_INTERVAL = 1.0
_REFRESH_JITTER = 0.1


class _KRecord:
    """One Kinesis record in flight: a plain user record or a KPL aggregate."""

    __slots__ = (
        "aggregated",
        "data",
        "deadline",
        "ehk",
        "members",
        "partition_key",
        "shard",
        "since",
        "size",
        "tail",
    )

    def __init__(
        self,
        members: list[Outcome],
        data: bytes,
        partition_key: str,
        ehk: str | None,
        size: int,
        shard: _ShardState,
        deadline: float,
        aggregated: bool,
    ) -> None:
        self.members = members
        self.data = data
        self.partition_key = partition_key
        self.ehk = ehk
        self.size = size
        self.shard = shard
        self.deadline = deadline
        self.aggregated = aggregated
        #: the rest of its PutRecords JSON entry after the data, made when first sent
        self.tail: bytes | None = None
        self.since = members[0]._arrival


class _ShardState:
    """A shard's open containers, its channel, its worker's wake-up scope and its limiter."""

    __slots__ = (
        "end",
        "failures",
        "limiter",
        "members",
        "open_deadline",
        "plain",
        "plain_bytes",
        "queued",
        "recv",
        "rerouted",
        "retired",
        "scope",
        "send",
        "shard_id",
        "sizer",
        "start",
    )

    def __init__(
        self, shard_id: str, start: int, end: int, queue_size: int, limiter: ShardLimiter
    ) -> None:
        self.shard_id = shard_id
        self.start = start
        self.end = end
        self.sizer = AggregateSizer()
        self.members: list[Outcome] = []
        self.plain: list[_KRecord] = []
        self.plain_bytes = 0
        self.open_deadline = _INF
        self.queued = 0
        self.rerouted = False  # the open aggregate holds re-routed (older) records
        self.retired = False
        self.scope: anyio.CancelScope | None = None
        self.limiter = limiter
        self.failures = 0  # consecutive failed writes: drives this shard's retry backoff
        # The bound (queue_size) is enforced where records enter, in put: internal re-routes
        # (retries, records of a retired shard) must never block, so the channel has room.
        send, recv = anyio.create_memory_object_stream[list[_KRecord]](math.inf)
        self.send: MemoryObjectSendStream[list[_KRecord]] = send
        self.recv: MemoryObjectReceiveStream[list[_KRecord]] = recv


class _Unverified:
    """An aggregate written to a shard we did not predict: which members does it hold?"""

    __slots__ = ("attempt", "krec", "res")

    def __init__(self, krec: _KRecord, res: Resolution, attempt: Attempt) -> None:
        self.krec = krec
        self.res = res
        self.attempt = attempt


class _StreamState:
    """Per-stream state: the shard map, shard states, the collector and the retry queue."""

    __slots__ = (
        "coll_recv",
        "coll_scope",
        "coll_send",
        "coll_waiting",
        "json_head",
        "known",
        "last_refresh",
        "map",
        "name",
        "pending",
        "received",
        "refresh_again",
        "refreshing",
        "retry_heap",
        "retry_scope",
        "shards",
        "stale",
        "unverified",
    )

    def __init__(self, name: str, shard_map: ShardMap) -> None:
        self.name = name
        self.json_head = b'{"StreamName":%s,"Records":[' % json.dumps(name).encode()
        self.map = shard_map
        self.shards: list[_ShardState] = []
        send, recv = anyio.create_memory_object_stream[list[_KRecord]](16)
        self.coll_send: MemoryObjectSendStream[list[_KRecord]] = send
        self.coll_recv: MemoryObjectReceiveStream[list[_KRecord]] = recv
        self.coll_scope: anyio.CancelScope | None = None
        self.coll_waiting = False  # waiting for a free connection (senders wake it)
        self.pending: list[_KRecord] = []
        self.retry_heap: list[tuple[float, int, list[_KRecord]]] = []
        self.retry_scope: anyio.CancelScope | None = None
        #: A write revealed that the map is out of date: aggregate nothing until it's reloaded.
        self.stale = False
        self.refreshing = False
        self.refresh_again = False
        self.last_refresh = -_INF
        #: Every shard's hash key range seen so far, closed ones included.
        self.known: dict[str, tuple[int, int]] = {
            s.shard_id: (s.start, s.end) for s in shard_map.shards
        }
        self.unverified: list[_Unverified] = []
        self.received = 0  # accepted since the last metrics update


class _StreamNotLoaded(anyio.WouldBlock):
    """put_nowait to a stream whose shard map is not loaded yet (``put`` loads it)."""


def _poke(scope: anyio.CancelScope | None, deadline: float) -> None:
    """Move a waiting task's wake-up earlier (no task switch, no channel message)."""
    if scope is not None and deadline < scope.deadline:
        scope.deadline = deadline


class Producer:
    """A Kinesis producer with KPL aggregation, per-shard batching, backpressure and outcomes.

    Use it as an async context manager, under Trio or asyncio::

        async with Producer("orders", region_name="us-east-1") as producer:
            outcome = await producer.put(b"payload", partition_key="user-1")
            result = await outcome.wait()

    ``stream_name`` is the default stream (optional). ``region_name``, ``endpoint_url`` and
    ``credentials`` default as the AWS SDKs do (``AWS_REGION``, ``AWS_ENDPOINT_URL_KINESIS``,
    the botocore credential chain). ``transport`` is an httpx transport for tests (for
    instance ``kinesis_trio.testing``'s fake Kinesis).
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
        metrics_sinks: Sequence[MetricsSink] = (),
    ) -> None:
        if config is None:
            config = ProducerConfig()
        if not isinstance(config, ProducerConfig):
            raise TypeError(f"config must be a ProducerConfig, got {type(config).__name__}")
        if stream_name is not None and (not isinstance(stream_name, str) or not stream_name):
            raise ValueError(f"stream_name must be a non-empty str, got {stream_name!r}")
        self._default_stream = stream_name
        self._config = config
        self._client_args: dict[str, Any] = {
            "region_name": region_name,
            "endpoint_url": endpoint_url,
            "credentials": credentials,
            "profile_name": profile_name,
            "max_connections": config.max_connections,
            "request_timeout": config.request_timeout,
            "connect_timeout": config.connect_timeout,
            "verify": config.verify,
            "transport": transport,
        }
        self._client: KinesisClient | None = None
        self._tg: anyio.abc.TaskGroup | None = None
        self._state = _CLOSED
        self._entered = False
        self._streams: dict[str, _StreamState] = {}
        self._stream_locks: dict[str, anyio.Lock] = {}
        self._now: Callable[[], float] = anyio.current_time
        self._conn_sem: anyio.Semaphore | None = None
        # per-record bookkeeping
        self._key_cache: dict[str, tuple[int, int, int]] = {}
        self._outstanding_records = 0
        self._outstanding_bytes = 0
        self._unresolved: set[Outcome] = set()
        # flush() waits for the records of earlier epochs: the current epoch's count is an
        # int (cheap per record), the counts of closed epochs are in a dict
        self._epoch = 0
        self._epoch_count = 0
        self._epoch_pending: dict[int, int] = {}
        self._progress: anyio.Event | None = None
        self._flushing = 0
        self._put_calls = 0
        self._seq = itertools.count()
        # derived settings
        self._linger = config.record_max_buffered_time
        self._agg = config.aggregation_enabled
        self._agg_max_size = min(config.aggregation_max_size, config.max_record_size)
        self._agg_max_count = config.aggregation_max_count
        self._coll_max_count = config.collection_max_count
        self._coll_max_size = config.collection_max_size
        self._queue_size = config.shard_queue_size
        self._max_records = config.max_outstanding_records
        self._max_bytes = config.max_outstanding_bytes
        self._max_record_size = config.max_record_size
        self._ttl = config.record_ttl
        self._fail_if_throttled = config.fail_if_throttled
        self._rand = random.Random()
        self._metrics = Metrics(
            level=config.metrics_level,
            granularity=config.metrics_granularity,
            namespace=config.metrics_namespace,
            sinks=metrics_sinks,
            upload_interval=config.metrics_upload_delay,
        )
        self._measure = self._metrics.enabled

    # -- lifecycle ----------------------------------------------------------------------

    @property
    def config(self) -> ProducerConfig:
        """The producer's settings."""
        return self._config

    @property
    def outstanding_records(self) -> int:
        """Accepted records whose outcome is not resolved yet."""
        return self._outstanding_records

    @property
    def outstanding_bytes(self) -> int:
        """Bytes (data + partition key) of the outstanding records."""
        return self._outstanding_bytes

    @property
    def metrics(self) -> Metrics:
        """The KPL-style metrics recorder: ``totals()``, ``snapshot()`` (see ``metrics``)."""
        return self._metrics

    @property
    def client(self) -> KinesisClient:
        """The underlying signed Kinesis client (open while the producer is)."""
        if self._client is None:
            raise ProducerClosedError("the producer is not open")
        return self._client

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
        self._conn_sem = anyio.Semaphore(self._config.max_connections)
        client = KinesisClient(**self._client_args)
        await client.__aenter__()
        self._client = client
        tg = anyio.create_task_group()
        await tg.__aenter__()
        self._tg = tg
        self._state = _OPEN
        if self._measure:
            tg.start_soon(self._metrics.run)
        try:
            if self._default_stream is not None:
                await self._load_stream(self._default_stream)
        except BaseException as exc:
            self._state = _CLOSED
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
        self._state = _CLOSING
        self._notify_progress()
        reason: tuple[str, str] | None = None
        try:
            if exc_type is None:
                with anyio.move_on_after(self._config.close_timeout):
                    await self._flush_all()
                if self._unresolved:
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
                self._fail_unresolved(reason or (ABORTED, "producer task failed"))
                await self._close_client()
                self._state = _CLOSED
                if len(group.exceptions) == 1:
                    raise group.exceptions[0] from group
                raise
            except BaseException:
                self._fail_unresolved(reason or (ABORTED, "producer closing was interrupted"))
                await self._close_client()
                self._state = _CLOSED
                raise
            self._fail_unresolved(reason or (ABORTED, "producer closed"))
            # A normal close gives the final metrics flush its documented bound; an exit by
            # exception or cancellation must not wait long for a slow metrics endpoint.
            await self._close_client(
                _CLOSE_METRICS_TIMEOUT if exc_type is None else _ABORT_METRICS_TIMEOUT
            )
            self._state = _CLOSED
        return None

    async def _close_client(self, metrics_timeout: float = _ABORT_METRICS_TIMEOUT) -> None:
        if self._measure:
            self._count_received()
            with anyio.CancelScope(shield=True), anyio.move_on_after(metrics_timeout):
                await self._metrics.flush()
        client, self._client = self._client, None
        if client is not None:
            with anyio.CancelScope(shield=True), anyio.move_on_after(5):
                await client.aclose()

    def _fail_unresolved(self, reason: tuple[str, str]) -> None:
        if not self._unresolved:
            return
        now = self._now()
        res = failed(reason[0], reason[1], now)
        for stream in self._streams.values():
            # Written to a shard whose range was never checked: maybe delivered (ambiguous).
            for item in stream.unverified:
                note = Attempt(
                    item.attempt.start,
                    item.attempt.delay,
                    item.attempt.duration,
                    False,
                    "WrittenOutsideShardRange",
                    f"aggregate written to {item.res[R_SHARD_ID]}, whose hash key range "
                    "was not known before the producer closed",
                    True,
                )
                for o in item.krec.members:
                    if o._resolution is None:
                        o._attempts = (*o._attempts, note)
            stream.unverified = []
        pending, self._unresolved = self._unresolved, set()
        for outcome in pending:
            outcome._resolve(res)
        self._outstanding_records = 0
        self._outstanding_bytes = 0
        self._epoch_pending.clear()
        self._epoch_count = 0
        _log.warning("records_failed_on_close", records=len(pending), error_code=reason[0])
        self._notify_progress()

    # -- put ------------------------------------------------------------------------------

    async def put(
        self,
        data: bytes | bytearray | memoryview,
        partition_key: str,
        explicit_hash_key: str | None = None,
        *,
        stream_name: str | None = None,
    ) -> Outcome:
        """Accept a record and return its :class:`Outcome`.

        Waits while the producer is at its backpressure limits; cancelling it while it waits
        means the record was not accepted. Bad input raises ``TypeError``/``ValueError`` at
        once. The first put to a stream other than the default loads that stream's shard
        map and raises the AWS error if the stream cannot be used.
        """
        self._put_calls += 1
        if self._put_calls % _YIELD_EVERY == 0:
            await anyio.lowlevel.checkpoint()
        while True:
            try:
                return self.put_nowait(
                    data, partition_key, explicit_hash_key, stream_name=stream_name
                )
            except _StreamNotLoaded:
                await self._load_stream(
                    self._require_default() if stream_name is None else stream_name
                )
            except anyio.WouldBlock:
                await self._wait_progress()

    def put_nowait(
        self,
        data: bytes | bytearray | memoryview,
        partition_key: str,
        explicit_hash_key: str | None = None,
        *,
        stream_name: str | None = None,
    ) -> Outcome:
        """Accept a record without waiting; raises ``anyio.WouldBlock`` when full.

        Also raises ``anyio.WouldBlock`` when ``stream_name`` is a stream whose shard map is
        not loaded yet (``await put()`` loads it).
        """
        if self._state != _OPEN:
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
        stream = self._streams.get(name) if name is not None else None
        if stream is None:
            if name is None:
                self._require_default()
            raise _StreamNotLoaded(name)
        if type(data) is not bytes:
            data = coerce_data(data)
        try:
            key = self._key_cache.get(partition_key)
        except TypeError:  # unhashable: _key_info names the problem
            key = None
        if key is None:
            key = self._key_info(partition_key)
        pk_len, hash_key, pk_grow = key
        n = len(data)
        size = n + pk_len
        if size > self._max_record_size:
            raise ValueError(
                f"record too large: data ({n} bytes) plus partition key "
                f"({pk_len} bytes) is {size} bytes, over max_record_size "
                f"({self._max_record_size})"
            )
        if explicit_hash_key is not None:
            hash_key = parse_explicit_hash_key(explicit_hash_key)
        if (
            self._outstanding_records >= self._max_records
            or self._outstanding_bytes + size > self._max_bytes
        ):
            raise anyio.WouldBlock
        now = self._now()
        outcome = Outcome(
            data, partition_key, explicit_hash_key, hash_key, size, now, stream.name, self._epoch
        )
        # The common case inline (aggregating, room in the shard's open aggregate): the
        # routing and sizing of _place and AggregateSizer.grow/add (tests hold them equal).
        shard_map = stream.map
        index = bisect_right(shard_map._starts, hash_key) - 1
        if (
            explicit_hash_key is None
            and self._agg
            and not stream.stale
            and index >= 0
            and hash_key <= shard_map._ends[index]
        ):
            shard = stream.shards[index]
            sizer = shard.sizer
            pks = sizer.pks
            found = pks.get(partition_key)
            if found is None:
                key_index = len(pks)
                grow = pk_grow
            else:
                key_index = found
                grow = 0
            inner = (
                (3 if key_index < 0x80 else 4 if key_index < 0x4000 else 2 + _vlen(key_index))
                + (1 if n < 0x80 else 2 if n < 0x4000 else _vlen(n))
                + n
            )
            grow += (2 if inner < 0x80 else 3 if inner < 0x4000 else 1 + _vlen(inner)) + inner
            if sizer.size + grow <= self._agg_max_size and sizer.count < self._agg_max_count:
                if found is None:
                    pks[partition_key] = key_index
                sizer.size += grow
                sizer.count += 1
                if shard.open_deadline == _INF:
                    self._open(shard, now)
                shard.members.append(outcome)
            else:
                self._place(stream, outcome, pk_len, now, check_room=True)
        else:
            self._place(stream, outcome, pk_len, now, check_room=True)
        self._outstanding_records += 1
        self._outstanding_bytes += size
        self._unresolved.add(outcome)
        self._epoch_count += 1
        stream.received += 1
        return outcome

    def _require_default(self) -> str:
        if self._default_stream is None:
            raise ValueError("no stream_name given and the producer has no default stream")
        return self._default_stream

    def _key_info(self, partition_key: str) -> tuple[int, int, int]:
        """``(UTF-8 length, hash key, bytes its aggregate key-table entry takes)``."""
        pk_len = partition_key_length(partition_key)
        info = (pk_len, hash_key_for(partition_key), 1 + _vlen(pk_len) + pk_len)
        cache = self._key_cache
        if len(cache) >= _KEY_CACHE_MAX:
            cache.clear()
        cache[partition_key] = info
        return info

    def _place(
        self, stream: _StreamState, outcome: Outcome, pk_len: int, now: float, check_room: bool
    ) -> None:
        """Route an accepted (or re-routed) record into its shard's open containers.

        With ``check_room`` it raises ``anyio.WouldBlock`` *before changing anything* when a
        seal would be needed and the shard's channel is full.
        """
        shard_map = stream.map
        hash_key = outcome._hash_key
        index = bisect_right(shard_map._starts, hash_key) - 1  # ShardMap.index_for, inlined
        if index < 0 or hash_key > shard_map._ends[index]:
            # a gap in a stale map: send it alone, Kinesis routes it anyway
            index = 0
            can_aggregate = False
        else:
            can_aggregate = self._agg and not stream.stale
        shard = stream.shards[index]
        data = outcome._data
        assert data is not None
        if can_aggregate:
            pk = outcome._partition_key
            ehk = outcome._explicit_hash_key
            sizer = shard.sizer
            # (put_nowait handles the common case inline; this is the rarer path)
            grow = sizer.grow(len(data), pk, pk_len, ehk)
            if sizer.size + grow <= self._agg_max_size and sizer.count < self._agg_max_count:
                self._add_member(shard, outcome, grow, now, not check_room)
                return
            if shard.members:  # the aggregate is full: seal it, start the next one
                if check_room and shard.queued >= self._queue_size:
                    raise anyio.WouldBlock  # nothing changed yet
                self._seal_into_channel(shard)
                sizer = shard.sizer
                grow = sizer.grow(len(data), pk, pk_len, ehk)
                if sizer.size + grow <= self._agg_max_size:
                    self._add_member(shard, outcome, grow, now, not check_room)
                    return
            # too large to aggregate: it goes alone
        # a plain Kinesis record
        size = outcome._size
        if shard.plain and (
            len(shard.plain) >= self._coll_max_count
            or shard.plain_bytes + size > self._coll_max_size
        ):
            if check_room and shard.queued >= self._queue_size:
                raise anyio.WouldBlock
            self._seal_into_channel(shard)
        if shard.open_deadline == _INF:
            self._open(shard, now)
        shard.plain.append(
            _KRecord(
                [outcome],
                data,
                outcome._partition_key,
                outcome._explicit_hash_key,
                size,
                shard,
                now + self._linger,
                False,
            )
        )
        shard.plain_bytes += size

    def _add_member(
        self, shard: _ShardState, outcome: Outcome, grow: int, now: float, rerouted: bool
    ) -> None:
        shard.sizer.add(outcome._partition_key, outcome._explicit_hash_key, grow)
        if shard.open_deadline == _INF:
            self._open(shard, now)
        if rerouted:
            shard.rerouted = True
        shard.members.append(outcome)

    def _open(self, shard: _ShardState, now: float) -> None:
        deadline = now + self._linger
        shard.open_deadline = deadline
        _poke(shard.scope, deadline)

    def _seal(self, shard: _ShardState) -> list[_KRecord]:
        """Close the shard's open containers into a batch of Kinesis records."""
        batch = shard.plain
        members = shard.members
        if members:
            deadline = shard.open_deadline
            if len(members) == 1:
                only = members[0]
                data = only._data
                assert data is not None
                batch.append(
                    _KRecord(
                        members,
                        data,
                        only._partition_key,
                        only._explicit_hash_key,
                        only._size,
                        shard,
                        deadline,
                        False,
                    )
                )
            else:
                ehks = [o._explicit_hash_key for o in members] if shard.sizer.ehks else None
                blob = encode_records(
                    [o._data for o in members],  # type: ignore[misc]
                    [o._partition_key for o in members],
                    ehks,
                )
                for o in members:
                    # The aggregate holds the data now: one copy in memory, not two.
                    # _unpack gives it back to the members if they must go another way.
                    o._data = None
                krec = _KRecord(
                    members,
                    blob,
                    _AGG_PARTITION_KEY,
                    str(members[0]._hash_key),
                    len(blob) + len(_AGG_PARTITION_KEY),
                    shard,
                    deadline,
                    True,
                )
                if shard.rerouted:  # re-routed members may be older than the first one
                    krec.since = min(o._arrival for o in members)
                batch.append(krec)
            shard.sizer = AggregateSizer()
            shard.members = []
            shard.rerouted = False
        shard.plain = []
        shard.plain_bytes = 0
        shard.open_deadline = _INF
        return batch

    def _seal_into_channel(self, shard: _ShardState) -> None:
        batch = self._seal(shard)
        shard.send.send_nowait(batch)  # room was checked (or the caller is internal)
        shard.queued += 1

    # -- flush ----------------------------------------------------------------------------

    async def flush(self) -> None:
        """Send everything buffered now; return when every outcome created before is resolved."""
        if self._state == _CLOSED:
            return
        await self._flush_all()

    async def _flush_all(self) -> None:
        target = self._epoch
        if self._epoch_count:
            self._epoch_pending[target] = self._epoch_count
            self._epoch_count = 0
        self._epoch += 1
        self._flushing += 1
        try:
            self._poke_all()
            while any(epoch <= target for epoch in self._epoch_pending):
                await self._wait_progress()
        finally:
            self._flushing -= 1

    def _poke_all(self) -> None:
        for stream in self._streams.values():
            for shard in stream.shards:
                _poke(shard.scope, -_INF)
            _poke(stream.coll_scope, -_INF)

    # -- progress notification -------------------------------------------------------------

    async def _wait_progress(self) -> None:
        if self._state == _CLOSED:
            raise ProducerClosedError("the producer is closed")
        event = self._progress
        if event is None:
            event = self._progress = anyio.Event()
        await event.wait()
        if self._state != _OPEN and self._state != _CLOSING:
            raise ProducerClosedError("the producer is closed")

    def _notify_progress(self) -> None:
        event = self._progress
        if event is not None:
            self._progress = None
            event.set()

    # -- streams --------------------------------------------------------------------------

    def _new_shard(self, shard: Shard) -> _ShardState:
        limiter = ShardLimiter(self._config.rate_limit, self._now())
        return _ShardState(shard.shard_id, shard.start, shard.end, self._queue_size, limiter)

    async def _load_stream(self, name: str) -> _StreamState:
        stream = self._streams.get(name)
        if stream is not None:
            return stream
        lock = self._stream_locks.setdefault(name, anyio.Lock())
        async with lock:
            stream = self._streams.get(name)
            if stream is not None:
                return stream
            if self._state != _OPEN:
                raise ProducerClosedError("the producer is closed")
            try:
                shards = await self.client.list_shards(name)
                shard_map = ShardMap.from_api(shards)
            except Exception as exc:
                if self._state != _OPEN:  # closed while loading: the client went away
                    raise ProducerClosedError("the producer closed while loading " + name) from exc
                raise
            if self._state != _OPEN:  # closed while loading: no task may start now
                raise ProducerClosedError(f"the producer closed while loading {name}")
            stream = _StreamState(name, shard_map)
            stream.last_refresh = self._now()
            tg = self._tg
            assert tg is not None
            for shard in shard_map.shards:
                state = self._new_shard(shard)
                stream.shards.append(state)
                tg.start_soon(self._shard_worker, stream, state)
            tg.start_soon(self._collector, stream)
            tg.start_soon(self._retrier, stream)
            if self._config.shard_map_refresh_interval is not None:
                tg.start_soon(
                    self._periodic_refresh, stream, self._config.shard_map_refresh_interval
                )
            self._streams[name] = stream
            _log.debug("stream_loaded", stream=name, shards=len(shard_map))
            return stream

    def _request_refresh(self, stream: _StreamState) -> None:
        """Reload the stream's shard map soon: deduplicated, jittered, rate-limited."""
        if stream.refreshing:
            stream.refresh_again = True
            return
        stream.refreshing = True
        assert self._tg is not None
        self._tg.start_soon(self._refresh_loop, stream)

    async def _refresh_loop(self, stream: _StreamState) -> None:
        try:
            while True:
                stream.refresh_again = False
                # ListShards allows 100 calls/s per stream, shared with every other client:
                # at most one of ours per _MIN_REFRESH_INTERVAL, jittered so that producers
                # which saw the same reshard don't all call at once.
                now = self._now()
                wait = max(0.0, stream.last_refresh + _MIN_REFRESH_INTERVAL - now)
                await anyio.sleep(wait + self._rand.uniform(0.0, _REFRESH_JITTER))
                stream.last_refresh = self._now()
                if not await self._refresh_once(stream):
                    self._expire_unverified(stream)
                    stream.refresh_again = True
                if not stream.refresh_again:
                    return
        finally:
            stream.refreshing = False

    async def _periodic_refresh(self, stream: _StreamState, interval: float) -> None:
        while True:
            await anyio.sleep(interval * self._rand.uniform(0.9, 1.1))
            self._request_refresh(stream)

    async def _refresh_once(self, stream: _StreamState) -> bool:
        try:
            new_map = ShardMap.from_api(await self.client.list_shards(stream.name))
        except (KinesisTrioError, ValueError) as exc:
            _log.warning("shard_map_refresh_failed", stream=stream.name, error=str(exc))
            return False
        self._apply_map(stream, new_map)
        pending, stream.unverified = stream.unverified, []
        if any(u.res[R_SHARD_ID] not in stream.known for u in pending):
            try:  # a shard born and closed between two refreshes: look at the history
                for entry in await self.client.list_shards(stream.name, at_latest=False):
                    shard = Shard.from_api(entry)
                    stream.known[shard.shard_id] = (shard.start, shard.end)
            except (KinesisTrioError, KeyError, TypeError, ValueError) as exc:
                _log.warning("shard_history_failed", stream=stream.name, error=str(exc))
        for item in pending:
            self._verify(stream, item)
        return True

    def _apply_map(self, stream: _StreamState, new_map: ShardMap) -> None:
        """Swap in a new shard map; re-route what was buffered for shards that changed."""
        old = {s.shard_id: s for s in stream.shards}
        tg = self._tg
        assert tg is not None
        states: list[_ShardState] = []
        for shard in new_map.shards:
            stream.known[shard.shard_id] = (shard.start, shard.end)
            state = old.pop(shard.shard_id, None)
            if state is None or (state.start, state.end) != (shard.start, shard.end):
                if state is not None:
                    old[shard.shard_id] = state  # same id, new range: retire the old state
                state = self._new_shard(shard)
                tg.start_soon(self._shard_worker, stream, state)
            states.append(state)
        stream.map = new_map
        stream.shards = states
        stream.stale = False
        now = self._now()
        for gone in old.values():
            gone.retired = True
            self._reroute(stream, self._seal(gone), now)
            _poke(gone.scope, -_INF)  # its worker re-routes what is queued, then exits
        if old:
            _log.info(
                "shard_map_changed", stream=stream.name, shards=len(new_map), retired=sorted(old)
            )

    def _reroute(self, stream: _StreamState, batch: list[_KRecord], now: float) -> None:
        for krec in batch:
            _unpack(krec)
            for outcome in krec.members:
                if outcome._resolution is None:
                    self._place(stream, outcome, len(outcome._partition_key.encode()), now, False)

    def _verify(self, stream: _StreamState, item: _Unverified) -> None:
        """An aggregate landed in a shard we did not predict: apply the KCL's rule.

        A KCL consumer drops a *whole* aggregate when any of its sub-records' hash keys lies
        outside the range of the shard holding it (``AggregatorUtil.deaggregate``). So the
        members count as written only when the actual shard's range holds every one of
        them; otherwise none does, and all of them are sent again.
        """
        krec, res = item.krec, item.res
        shard_id = res[R_SHARD_ID]
        rng = stream.known.get(shard_id or "")
        if rng is not None and all(rng[0] <= o._hash_key <= rng[1] for o in krec.members):
            records = size = 0
            for sub, outcome in enumerate(krec.members):
                if outcome._resolve(res, sub):
                    records += 1
                    size += outcome._size
                    self._forget(outcome)
            self._resolved(records, size)
            return
        again = [o for o in krec.members if o._resolution is None]
        if not again:
            return
        attempt = item.attempt
        note = Attempt(
            attempt.start,
            attempt.delay,
            attempt.duration,
            False,
            "WrittenOutsideShardRange",
            f"aggregate written to {shard_id} (sequence number {res[R_SEQUENCE_NUMBER]}) "
            + (
                "whose hash key range does not hold all of its records"
                if rng is not None
                else "whose hash key range could not be found"
            )
            + ": KCL consumers drop the whole aggregate there, so it is sent again",
            rng is None,
        )
        now = self._now()
        _unpack(krec)
        _log.info(
            "records_resent_after_reshard",
            stream=stream.name,
            shard_id=shard_id,
            records=len(again),
        )
        for outcome in again:
            outcome._attempts = (*outcome._attempts, note)
            self._place(stream, outcome, len(outcome._partition_key.encode()), now, False)

    def _expire_unverified(self, stream: _StreamState) -> None:
        now = self._now()
        keep: list[_Unverified] = []
        for item in stream.unverified:
            if item.krec.since + self._ttl <= now:
                members = [o for o in item.krec.members if o._resolution is None]
                for o in members:
                    o._attempts = (*o._attempts, item.attempt)
                self._expire(members, now, "its shard map could not be reloaded")
            else:
                keep.append(item)
        stream.unverified = keep

    # -- tasks ----------------------------------------------------------------------------

    async def _shard_worker(self, stream: _StreamState, shard: _ShardState) -> None:
        recv = shard.recv
        while True:
            batch: list[_KRecord] | None = None
            if shard.retired:
                deadline = -_INF
            elif shard.members or shard.plain:
                deadline = -_INF if self._flushing else shard.open_deadline
            else:
                deadline = _INF
            with anyio.CancelScope(deadline=deadline) as scope:
                shard.scope = scope
                batch = await recv.receive()
            shard.scope = None
            if batch is not None:
                shard.queued -= 1
                batch, _ = self._drain(shard, batch)
                self._notify_progress()
                await self._forward(stream, shard, batch)
                continue
            # A deadline passed (or a flush/retirement): drain the channel in order, then seal.
            batch, emptied = self._drain(shard, [])
            if batch:
                self._notify_progress()
            if shard.retired:
                if batch:
                    await self._forward(stream, shard, batch)
                if emptied:
                    return
                continue
            if (
                emptied
                and (shard.members or shard.plain)
                and (self._flushing or self._now() >= shard.open_deadline)
            ):
                batch += self._seal(shard)
            if batch:
                await self._forward(stream, shard, batch)

    def _drain(self, shard: _ShardState, batch: list[_KRecord]) -> tuple[list[_KRecord], bool]:
        """Add the batches already queued for the shard, up to one request's worth.

        When the caller runs ahead, the collector then gets whole requests' worth at once
        (not one request per aggregate); the cap keeps a shard from taking everything queued
        into its rate limiter at once. Returns the batch and whether the channel is empty.
        """
        count = len(batch)
        size = sum(k.size for k in batch)
        while count < self._coll_max_count and size < self._coll_max_size:
            try:
                more = shard.recv.receive_nowait()
            except anyio.WouldBlock:
                return batch, True
            shard.queued -= 1
            batch += more
            count += len(more)
            size += sum(k.size for k in more)
        return batch, False

    async def _forward(
        self, stream: _StreamState, shard: _ShardState, batch: list[_KRecord]
    ) -> None:
        """Pass a shard's batch to the collector, through the shard's rate limiter."""
        if shard.retired:
            self._reroute(stream, batch, self._now())
            return
        now = self._now()
        ttl = self._ttl
        if any(k.since + ttl <= now for k in batch):
            batch = self._drop_expired(stream, batch, now)
        if stream.stale:
            batch = self._unaggregate(batch)
        limiter = shard.limiter
        while batch:
            n = limiter.admit([k.size for k in batch], now)
            if n:
                chunk, batch = batch[:n], batch[n:]
                if self._flushing:
                    for krec in chunk:
                        krec.deadline = -_INF
                await stream.coll_send.send(chunk)
                if not batch:
                    return
            await anyio.sleep(limiter.wait_time([k.size for k in batch], self._now()))
            now = self._now()
            if shard.retired:
                self._reroute(stream, batch, now)
                return
            if any(k.since + ttl <= now for k in batch):
                batch = self._drop_expired(stream, batch, now)
            if stream.stale:
                batch = self._unaggregate(batch)

    def _drop_expired(
        self, stream: _StreamState, batch: list[_KRecord], now: float
    ) -> list[_KRecord]:
        keep: list[_KRecord] = []
        for krec in batch:
            live = [o for o in krec.members if o._resolution is None]
            expired = [o for o in live if o._arrival + self._ttl <= now]
            if not expired:
                keep.append(krec)
                continue
            self._expire(expired, now, "it waited in the producer's queues (rate limit)")
            survivors = [o for o in live if o._arrival + self._ttl > now]
            _unpack(krec)
            keep.extend(self._plain_krec(o, krec.shard) for o in survivors)
        return keep

    def _plain_krec(self, outcome: Outcome, shard: _ShardState) -> _KRecord:
        data = outcome._data
        assert data is not None
        return _KRecord(
            [outcome],
            data,
            outcome._partition_key,
            outcome._explicit_hash_key,
            outcome._size,
            shard,
            -_INF,
            False,
        )

    def _unaggregate(self, batch: list[_KRecord]) -> list[_KRecord]:
        """Split aggregates into plain records (while the shard map is known to be stale)."""
        if not any(k.aggregated for k in batch):
            return batch
        out: list[_KRecord] = []
        for krec in batch:
            if krec.aggregated:
                _unpack(krec)
                out.extend(
                    self._plain_krec(o, krec.shard) for o in krec.members if o._resolution is None
                )
            else:
                out.append(krec)
        return out

    async def _collector(self, stream: _StreamState) -> None:
        """Collect Kinesis records into PutRecords requests and hand them to senders.

        A request goes when it is full, when its earliest record's deadline has come (or on
        flush) *and* a connection is free: while every connection is busy it keeps filling
        up, so a producer that runs behind sends fewer, fuller requests, not a stream of
        tiny ones.
        """
        recv = stream.coll_recv
        sem = self._conn_sem
        assert sem is not None
        max_count = self._coll_max_count
        max_size = self._coll_max_size
        incoming: deque[_KRecord] = deque()
        pending_bytes = 0
        pending_deadline = _INF
        while True:
            pending = stream.pending
            while incoming:
                krec = incoming[0]
                if pending and (len(pending) >= max_count or pending_bytes + krec.size > max_size):
                    break  # full: the rest waits for the next request
                pending.append(incoming.popleft())
                pending_bytes += krec.size
                if krec.deadline < pending_deadline:
                    pending_deadline = krec.deadline
            full = bool(incoming)
            wait = pending_deadline if pending else _INF
            if pending and (full or self._flushing or self._now() >= pending_deadline):
                if full or sem.value > 0:
                    await self._dispatch(stream)
                    pending_bytes = 0
                    pending_deadline = _INF
                    continue
                wait = _INF  # due, but every connection is busy: keep filling until one frees
                stream.coll_waiting = True
            if wait > self._now():
                with anyio.CancelScope(deadline=wait) as scope:
                    stream.coll_scope = scope
                    incoming.extend(await recv.receive())
                stream.coll_scope = None
                stream.coll_waiting = False
            while True:
                try:
                    incoming.extend(recv.receive_nowait())
                except anyio.WouldBlock:
                    break

    def _connection_freed(self) -> None:
        for stream in self._streams.values():
            if stream.coll_waiting:
                _poke(stream.coll_scope, -_INF)

    async def _dispatch(self, stream: _StreamState) -> None:
        sem = self._conn_sem
        tg = self._tg
        assert sem is not None and tg is not None
        krecs, stream.pending = stream.pending, []
        if stream.stale:
            krecs = self._unaggregate(krecs)
        elif any(k.aggregated and k.shard.retired for k in krecs):
            # Sealed for a shard that a reshard retired since: it would straddle the new
            # shards (and KCL consumers would drop it), so its members are placed anew.
            now = self._now()
            keep: list[_KRecord] = []
            for krec in krecs:
                if krec.aggregated and krec.shard.retired:
                    self._reroute(stream, [krec], now)
                else:
                    keep.append(krec)
            krecs = keep
        if not krecs:
            return
        for chunk in self._chunks(krecs):
            await sem.acquire()
            tg.start_soon(self._send, stream, chunk)

    def _chunks(self, krecs: list[_KRecord]) -> list[list[_KRecord]]:
        max_count = self._coll_max_count
        max_size = self._coll_max_size
        if len(krecs) <= max_count and sum(k.size for k in krecs) <= max_size:
            return [krecs]
        chunks: list[list[_KRecord]] = []
        chunk: list[_KRecord] = []
        size = 0
        for krec in krecs:
            if chunk and (len(chunk) >= max_count or size + krec.size > max_size):
                chunks.append(chunk)
                chunk, size = [], 0
            chunk.append(krec)
            size += krec.size
        if chunk:
            chunks.append(chunk)
        return chunks

    async def _retrier(self, stream: _StreamState) -> None:
        """Send failed records back through their shard (and its limiter) when due."""
        heap = stream.retry_heap
        while True:
            deadline = heap[0][0] if heap else _INF
            if deadline > self._now():
                with anyio.CancelScope(deadline=deadline) as scope:
                    stream.retry_scope = scope
                    await anyio.sleep_forever()
                stream.retry_scope = None
            now = self._now()
            by_shard: dict[_ShardState, list[_KRecord]] = {}
            while heap and heap[0][0] <= now:
                for krec in heapq.heappop(heap)[2]:
                    if all(o._resolution is not None for o in krec.members):
                        continue
                    shard = krec.shard
                    if shard.retired or (krec.aggregated and stream.stale):
                        self._reroute(stream, [krec], now)
                    else:
                        krec.deadline = -_INF
                        by_shard.setdefault(shard, []).append(krec)
            for shard, krecs in by_shard.items():
                shard.send.send_nowait(krecs)
                shard.queued += 1

    # -- sending --------------------------------------------------------------------------

    def _body(self, stream: _StreamState, krecs: list[_KRecord]) -> bytes:
        """The PutRecords JSON body, joined once from pieces (no copy of each record's
        base64 text into a per-record string first)."""
        parts = [stream.json_head]
        append = parts.append
        opening = b'{"Data":"'
        for krec in krecs:
            tail = krec.tail
            if tail is None:
                tail = krec.tail = _json_tail(krec.partition_key, krec.ehk)
            append(opening)
            # base64 made for each attempt, not kept: only the raw bytes stay in memory
            append(b2a_base64(krec.data, newline=False))
            append(tail)
            opening = b',{"Data":"'
        append(b"]}")
        return b"".join(parts)

    async def _send(self, stream: _StreamState, krecs: list[_KRecord]) -> None:
        sem = self._conn_sem
        assert sem is not None
        try:
            body = self._body(stream, krecs)
            client = self.client
            start = self._now()
            limit = self._config.request_timeout + self._config.connect_timeout
            response: dict[str, Any] | None = None
            error: BaseException | None = None
            try:
                with anyio.move_on_after(limit):  # swallows only its own deadline
                    try:
                        response = await client.call_raw("PutRecords", body)
                    except (KinesisTrioError, ValueError) as exc:
                        error = exc
            except anyio.get_cancelled_exc_class():
                # The producer is closing (close timeout, exit by exception or
                # cancellation) while the request is out: it may have written them.
                self._mark_in_flight(krecs, start)
                raise
            end = self._now()
            if response is None and error is None:
                error = RequestTimeoutError(
                    f"PutRecords did not complete within {limit} s", operation="PutRecords"
                )
            if error is not None:
                self._on_request_error(stream, krecs, error, start, end)
            else:
                assert response is not None
                self._on_response(stream, krecs, response, start, end)
        finally:
            sem.release()
            self._connection_freed()

    def _mark_in_flight(self, krecs: list[_KRecord], start: float) -> None:
        now = self._now()
        attempt = Attempt(
            start,
            0.0,
            now - start,
            False,
            "RequestInFlight",
            "the producer stopped while the PutRecords request was in flight",
            True,
        )
        for krec in krecs:
            for outcome in krec.members:
                if outcome._resolution is None:
                    outcome._attempts = (*outcome._attempts, attempt)

    def _on_response(
        self,
        stream: _StreamState,
        krecs: list[_KRecord],
        response: dict[str, Any],
        start: float,
        end: float,
    ) -> None:
        entries = response.get("Records")
        if not isinstance(entries, list) or len(entries) != len(krecs):
            self._on_request_error(
                stream,
                krecs,
                ConnectionLostError(
                    "PutRecords answered with a malformed result", operation="PutRecords"
                ),
                start,
                end,
            )
            return
        duration = end - start
        retry: list[tuple[_KRecord, Attempt]] = []
        resolved_records = 0
        resolved_bytes = 0
        discard = self._unresolved.discard
        ok_shards: set[_ShardState] = set()
        bad_shards: set[_ShardState] = set()
        throttled_shards: set[_ShardState] = set()
        malformed: list[_KRecord] = []
        for krec, entry in zip(krecs, entries, strict=True):
            shard = krec.shard
            if type(entry) is not dict:
                malformed.append(krec)
                continue
            sequence_number = entry.get("SequenceNumber")
            if sequence_number is not None:
                if type(sequence_number) is not str or type(entry.get("ShardId")) is not str:
                    malformed.append(krec)  # no proof of where it landed: not ok
                    continue
                ok_shards.add(shard)
                shard_id = entry.get("ShardId")
                res = written(
                    shard_id,
                    sequence_number,
                    krec.aggregated,
                    end,
                    start,
                    start - krec.since,
                    duration,
                )
                if shard_id != shard.shard_id:
                    # The map was out of date (a reshard), or the shard was retired since.
                    if not shard.retired:
                        stream.stale = True
                        self._request_refresh(stream)
                    if krec.aggregated:
                        # Kinesis routed the aggregate by its explicit hash key: only the
                        # members the actual shard holds are where consumers will find them.
                        attempt = resolution_attempt(res)
                        assert attempt is not None
                        item = _Unverified(krec, res, attempt)
                        if shard_id in stream.known:
                            self._verify(stream, item)
                        else:
                            stream.unverified.append(item)
                            self._request_refresh(stream)
                        continue
                # self._forget, inlined: this runs once per record
                epoch = self._epoch
                for sub, outcome in enumerate(krec.members):
                    if not outcome._resolve(res, sub):
                        continue
                    resolved_records += 1
                    resolved_bytes += outcome._size
                    discard(outcome)
                    if outcome._epoch == epoch:
                        self._epoch_count -= 1
                    else:
                        self._forget_epoch(outcome._epoch)
                continue
            code = entry.get("ErrorCode")
            if not code or type(code) is not str:
                malformed.append(krec)  # neither written nor failed: we cannot tell
                continue
            message = str(entry.get("ErrorMessage") or "")
            decision = classify_entry_error(code, fail_if_throttled=self._fail_if_throttled)
            attempt = Attempt(start, start - krec.since, duration, False, code, message)
            if decision.throttled:
                throttled_shards.add(shard)
            bad_shards.add(shard)
            if decision.action is Action.FAIL:
                r, b = self._fail_krec(
                    krec,
                    failed(code, message, end, attempt, krec.aggregated),
                )
                resolved_records += r
                resolved_bytes += b
            else:
                retry.append((krec, attempt))
        if malformed:
            # An entry that is not an object, a success without a shard id or sequence
            # number, or neither a success nor an error: the request may have written the
            # record, so it is retried and marked ambiguous (a possible duplicate).
            bad_shards.update(k.shard for k in malformed)
            _log.warning(
                "put_records_malformed_entries", stream=stream.name, records=len(malformed)
            )
            attempt = Attempt(
                start,
                0.0,
                duration,
                False,
                "MalformedResponse",
                "PutRecords answered with an entry that is neither a success nor an error",
                True,
            )
            retry.extend((k, attempt) for k in malformed)
        for shard in throttled_shards:
            shard.limiter.on_throttled(end)
        for shard in bad_shards:
            shard.failures += 1
        for shard in ok_shards - bad_shards:
            shard.failures = 0
            shard.limiter.on_success(end)
        self._resolved(resolved_records, resolved_bytes)
        if self._measure:
            self._measure_response(stream, krecs, entries, start, end)
        if retry:
            self._schedule_retries(stream, retry, end)

    def _count_received(self) -> None:
        for stream in self._streams.values():
            if stream.received:
                self._metrics.user_records_received(stream.name, stream.received)
                stream.received = 0

    def _measure_response(
        self,
        stream: _StreamState,
        krecs: list[_KRecord],
        entries: list[Any],
        start: float,
        end: float,
    ) -> None:
        """KPL metrics for one PutRecords answer, grouped per shard (a few calls a request)."""
        metrics = self._metrics
        name = stream.name
        self._count_received()
        metrics.user_records_pending(self._outstanding_records)
        metrics.request_time(name, end - start)
        metrics.kinesis_records_per_request(name, len(krecs))
        metrics.user_records_per_request(name, sum(len(k.members) for k in krecs))
        # shard -> [user records, user bytes, Kinesis records, Kinesis bytes, buffering sum]
        groups: dict[str, list[float]] = {}
        retries: dict[tuple[str, int], int] = {}
        errors: dict[tuple[str, str], int] = {}
        for krec, entry in zip(krecs, entries, strict=True):
            code = _entry_error(entry)
            if code is not None:
                key = (krec.shard.shard_id, code)
                errors[key] = errors.get(key, 0) + 1
                continue
            shard_id = entry["ShardId"]
            members = krec.members
            n = len(members)
            group = groups.get(shard_id)
            if group is None:
                group = groups[shard_id] = [0, 0, 0, 0, 0.0]
            group[0] += n
            group[1] += sum(o._size for o in members) if krec.aggregated else krec.size
            group[2] += 1
            group[3] += krec.size
            group[4] += (start - krec.since) * n
            if krec.aggregated:
                metrics.user_records_per_kinesis_record(name, shard_id, n)
            tries = len(members[0]._attempts)
            retries[(shard_id, tries)] = retries.get((shard_id, tries), 0) + n
        for shard_id, (users, user_bytes, kinesis, kinesis_bytes, buffering) in groups.items():
            metrics.user_records_put(name, shard_id, int(users), int(user_bytes))
            metrics.kinesis_records_put(name, shard_id, int(kinesis), int(kinesis_bytes))
            metrics.buffering_time(name, shard_id, buffering / users, int(users))
        for (shard_id, tries), n in retries.items():
            metrics.retries_per_record(name, shard_id, tries, n)
        for (shard_id, code), n in errors.items():
            metrics.errors(name, shard_id, code, n)

    def _on_request_error(
        self,
        stream: _StreamState,
        krecs: list[_KRecord],
        error: BaseException,
        start: float,
        end: float,
    ) -> None:
        code = error.code if isinstance(error, KinesisError) else type(error).__name__
        message = str(error)[:500]
        decision = classify_exception(error, fail_if_throttled=self._fail_if_throttled)
        attempt = Attempt(start, 0.0, end - start, False, code, message, decision.ambiguous)
        _log.info(
            "put_records_failed",
            stream=stream.name,
            error_code=code,
            attempt=1 + max(len(k.members[0]._attempts) for k in krecs),
            records=sum(len(k.members) for k in krecs),
            bytes=sum(k.size for k in krecs),
            action=decision.action.value,
            ambiguous=decision.ambiguous,
        )
        if self._measure:
            self._metrics.request_time(stream.name, end - start)
            self._metrics.errors(stream.name, None, code, len(krecs))
        if decision.action is Action.REFRESH_CREDENTIALS and isinstance(
            self._client_args["credentials"], StaticCredentials
        ):
            decision = Decision(Action.FAIL)  # static credentials cannot be refreshed
        if (
            decision.action is Action.FAIL
            and len(krecs) > 1
            and code in ("ValidationException", "InvalidArgumentException")
        ):
            bad = invalid_entries(message, len(krecs))
            if bad is not None:
                self._fail_named_entries(stream, krecs, bad, attempt, code, message, end)
                return
            if self._tg is not None and "stream" not in message.lower():
                # It names no entry (kinesis-local's messages don't): find the bad record
                # by halves, each sent as its own request, so its neighbours still go.
                self._bisect(stream, krecs, attempt, code, message)
                return
        shards = {k.shard for k in krecs}
        for shard in shards:
            shard.failures += 1
            if decision.throttled:
                shard.limiter.on_throttled(end)
        if decision.action is Action.FAIL:
            total_r = total_b = 0
            for krec in krecs:
                r, b = self._fail_krec(
                    krec,
                    failed(code, message, end, attempt, krec.aggregated),
                )
                total_r += r
                total_b += b
            self._resolved(total_r, total_b)
            return
        if decision.action is Action.REFRESH_CREDENTIALS and self._tg is not None:
            self._tg.start_soon(self._refresh_credentials)
        self._schedule_retries(stream, [(k, attempt) for k in krecs], end)

    def _fail_named_entries(
        self,
        stream: _StreamState,
        krecs: list[_KRecord],
        bad: list[int],
        attempt: Attempt,
        code: str,
        message: str,
        end: float,
    ) -> None:
        """A request rejected for the entries its error names: fail those, send the rest
        again (one bad record never fails its neighbours)."""
        total_r = total_b = 0
        for i in bad:
            krec = krecs[i]
            r, b = self._fail_krec(krec, failed(code, message, end, attempt, krec.aggregated))
            total_r += r
            total_b += b
        self._resolved(total_r, total_b)
        named = set(bad)
        note = Attempt(
            attempt.start,
            attempt.delay,
            attempt.duration,
            False,
            code,
            f"the request was rejected for another record in it ({message[:200]}); "
            "sent again without it",
        )
        again = [(k, note) for i, k in enumerate(krecs) if i not in named]
        _log.info(
            "records_resent_without_invalid_entry",
            stream=stream.name,
            error_code=code,
            failed=len(bad),
            records=len(again),
        )
        self._schedule_retries(stream, again, end)

    def _bisect(
        self,
        stream: _StreamState,
        krecs: list[_KRecord],
        attempt: Attempt,
        code: str,
        message: str,
    ) -> None:
        note = Attempt(
            attempt.start,
            attempt.delay,
            attempt.duration,
            False,
            code,
            f"{message[:200]} (the request was rejected for a record it holds: sent again "
            "in halves to find that record)",
        )
        for krec in krecs:
            for outcome in krec.members:
                if outcome._resolution is None:
                    outcome._attempts = (*outcome._attempts, note)
        half = len(krecs) // 2
        _log.info(
            "put_records_rejected_split",
            stream=stream.name,
            error_code=code,
            records=sum(len(k.members) for k in krecs),
        )
        assert self._tg is not None
        for part in (krecs[:half], krecs[half:]):
            self._tg.start_soon(self._send_part, stream, part)

    async def _send_part(self, stream: _StreamState, krecs: list[_KRecord]) -> None:
        sem = self._conn_sem
        assert sem is not None
        await sem.acquire()
        await self._send(stream, krecs)

    async def _refresh_credentials(self) -> None:
        client = self._client
        if client is not None:
            try:
                await client.credentials.force_refresh()
            except KinesisTrioError as exc:
                _log.warning("credentials_refresh_failed", error=str(exc))

    def _forget(self, outcome: Outcome) -> None:
        """Bookkeeping for a resolved record (the caller updates the outstanding totals)."""
        self._unresolved.discard(outcome)
        epoch = outcome._epoch
        if epoch == self._epoch:
            self._epoch_count -= 1
        else:
            self._forget_epoch(epoch)

    def _forget_epoch(self, epoch: int) -> None:
        epoch_pending = self._epoch_pending
        left = epoch_pending[epoch] - 1
        if left:
            epoch_pending[epoch] = left
        else:
            del epoch_pending[epoch]

    def _fail_krec(self, krec: _KRecord, res: Resolution) -> tuple[int, int]:
        return self._fail_outcomes(krec.members, res, krec.shard.shard_id)

    def _fail_outcomes(
        self, members: list[Outcome], res: Resolution, shard_id: str
    ) -> tuple[int, int]:
        records = size = 0
        for sub, outcome in enumerate(members):
            if outcome._resolve(res, sub):
                records += 1
                size += outcome._size
                self._forget(outcome)
        if records:
            if self._measure:
                self._metrics.user_records_put(members[0]._stream, shard_id, 0, 0, failed=records)
            _log.info(
                "records_failed",
                stream=members[0]._stream,
                shard_id=shard_id,
                error_code=res[R_ERROR_CODE],
                attempt=len(members[0]._attempts) + (res[R_ATTEMPT] is not None),
                records=records,
                bytes=size,
            )
        return records, size

    def _expire(self, outcomes: list[Outcome], now: float, why: str) -> None:
        records = size = 0
        for outcome in outcomes:
            last = outcome._attempts[-1] if outcome._attempts else None
            message = (
                f"not written within record_ttl ({self._ttl} s) after "
                f"{len(outcome._attempts)} attempts"
                + (f"; last error: {last.error_code}: {last.error_message}" if last else "")
                + f"; {why}"
            )
            res = failed(EXPIRED, message, now)
            if outcome._resolve(res):
                records += 1
                size += outcome._size
                self._forget(outcome)
        if records:
            if self._measure:
                self._metrics.user_record_expired(outcomes[0]._stream, None, records)
            _log.info(
                "records_expired",
                stream=outcomes[0]._stream,
                error_code=EXPIRED,
                records=records,
                bytes=size,
            )
        self._resolved(records, size)

    def _resolved(self, records: int, size: int) -> None:
        if records:
            self._outstanding_records -= records
            self._outstanding_bytes -= size
            self._notify_progress()

    def _schedule_retries(
        self, stream: _StreamState, failed: list[tuple[_KRecord, Attempt]], now: float
    ) -> None:
        ttl = self._ttl
        base = self._config.retry_backoff_base
        cap = self._config.retry_backoff_max
        by_due: dict[float, list[_KRecord]] = {}
        for krec, attempt in failed:
            shard = krec.shard
            due = now + backoff_delay(max(1, shard.failures), base=base, cap=cap, rand=self._rand)
            live = [o for o in krec.members if o._resolution is None]
            for outcome in live:
                outcome._attempts = (*outcome._attempts, attempt)
            expired = [o for o in live if o._arrival + ttl <= due]
            if expired:
                self._expire(expired, now, "retrying was not done in time")
                live = [o for o in live if o._arrival + ttl > due]
                if not live:
                    continue
                _unpack(krec)
                retry = [self._plain_krec(o, shard) for o in live]
            else:
                retry = [krec]
            krec.since = now
            by_due.setdefault(due, []).extend(retry)
        for due, krecs in by_due.items():
            heapq.heappush(stream.retry_heap, (due, next(self._seq), krecs))
            _poke(stream.retry_scope, due)


def _unpack(krec: _KRecord) -> None:
    """Give an aggregate's unresolved members their data back from the aggregate.

    Sealing drops the members' copies (the aggregate holds the bytes); a member that must be
    sent another way (split after a reshard, re-routed, or re-sent alone) needs its own.
    """
    if not krec.aggregated:
        return
    members = krec.members
    if all(o._data is not None or o._resolution is not None for o in members):
        return
    records = deaggregate(krec.data, krec.partition_key)
    if len(records) != len(members):  # pragma: no cover - our own encoding
        raise AssertionError("an aggregate does not decode to its members")
    for outcome, record in zip(members, records, strict=True):
        if outcome._data is None and outcome._resolution is None:
            outcome._data = record.data


def _entry_error(entry: Any) -> str | None:
    """None for a well-formed success entry; else its error code (``MalformedResponse``
    for an entry that is neither a success nor an error)."""
    if type(entry) is not dict:
        return "MalformedResponse"
    if type(entry.get("SequenceNumber")) is str and type(entry.get("ShardId")) is str:
        return None
    code = entry.get("ErrorCode")
    if entry.get("SequenceNumber") is None and type(code) is str and code:
        return code
    return "MalformedResponse"


def _json_tail(partition_key: str, ehk: str | None) -> bytes:
    """A PutRecords entry after its base64 data: ``","PartitionKey":...}``."""
    tail = b'","PartitionKey":' + json.dumps(partition_key).encode()
    if ehk is not None:
        tail += b',"ExplicitHashKey":"' + ehk.encode() + b'"'
    return tail + b"}"
