"""``Producer.put_many``: a batch of records accepted in one call (issue 66).

The rule is the engine's (``_core/_batch``): the batch is validated in one pass (a bad
record is named by its index, none is accepted), then admitted as a whole or not at all.
Here the shell only waits: for the stream's shard map, and for room for the whole batch,
validating it once. A wait that is cancelled accepted nothing; once ``put_many`` returns,
every record has its Outcome, in order, resolved on its own.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any

import anyio
import anyio.lowlevel

from .._core import (
    Batch,
    NoRoom,
    Outbox,
    StreamState,
    arn_ref,
    at_index,
    check_stream_name,
    is_arn,
    parse_stream_arn,
)
from ._schema_puts import cached_record, registry_and_spec
from ._states import OPEN, closed_error

if TYPE_CHECKING:
    from .._core import Engine
    from ..gsr._schemas import Schema
    from ..gsr._types import SchemaRegistry
    from ..metrics._recorder import Metrics
    from ._outcome import Outcome
    from ._pipeline import Pipeline
    from ._spooler import Spooler

__all__ = ["BatchPuts", "BatchRecord"]

Data = bytes | bytearray | memoryview
#: A record of ``put_many``: ``(data, partition_key)`` or ``(data, partition_key,
#: explicit_hash_key)``, as ``SyncProducer.put_many`` takes them.
BatchRecord = tuple[Data, str | None] | tuple[Data, str | None, str | None]


class BatchPuts:
    """``Producer.put_many``, ``put_many_nowait`` and ``put_objects``."""

    if TYPE_CHECKING:  # the producer's own
        _engine: Engine[Outcome] | None
        _pipeline: Pipeline | None
        _outbox: Outbox
        _spooler: Spooler | None
        _metrics: Metrics
        _default_stream: str | None
        _schema_registry: SchemaRegistry | None
        _now: Callable[[], float]
        _load_stream: Callable[[str], Awaitable[None]]
        _wait_progress: Callable[[], Awaitable[None]]
        _require_default: Callable[[], str]
        _state: int
        _entered: bool
        _forked_message: str
        client: Any

    async def put_many(
        self,
        records: Iterable[BatchRecord],
        *,
        stream_name: str | None = None,
        stream_arn: str | None = None,
    ) -> list[Outcome]:
        """Accept a batch of ``(data, partition_key[, explicit_hash_key])`` records to one
        stream as a whole; return their :class:`Outcome` objects in order.

        Every record is validated first: a bad one raises what ``put`` would raise for it
        (``TypeError``/``ValueError``), its message led by ``records[i]:``, and none is
        accepted. A batch over ``max_outstanding_records`` or ``max_outstanding_bytes`` on
        its own raises ``ValueError``. The batch is then admitted whole: it waits until
        there is room for all of it (the caps, and every shard it goes to; ``put`` calls
        that fit may go first meanwhile); cancelled while it waits, none of it was
        accepted. Once it returns, each record has its own Outcome, resolved on its own.
        With ``spool_sync="put"`` it returns once they are all in the spool (or resolved);
        ``SpoolWriteError``'s ``outcome`` is then the list of outcomes.
        """
        if stream_arn is not None:
            stream_name = arn_ref(stream_name, stream_arn)
        if not isinstance(records, (list, tuple)):
            records = list(records)
        # a checkpoint per batch (put's, one per 1,024 records, would let a loop of
        # put_many never yield): a cancellation here accepts nothing
        await anyio.lowlevel.checkpoint()
        since = batch = None
        while True:
            try:
                stream = self._stream_for(stream_name)
                if batch is None:  # validated once, while it waits for room too
                    batch = self._engine.batch(stream, records)  # type: ignore[union-attr]
                outcomes = self._accept_many(stream, batch)
            except _NotLoaded:
                await self._load_stream(stream_name or self._require_default())
            except anyio.WouldBlock:
                since = self._now() if since is None else since
                await self._wait_progress()
            else:
                break
        if since is not None and outcomes:
            waited = self._now() - since
            self._metrics.stream_sample("PutAdmissionWait", outcomes[0].stream, waited)
        spooler = self._spooler
        if spooler is not None and outcomes and spooler.sync_on_put():
            return await spooler.durable_many(outcomes)
        return outcomes

    def put_many_nowait(
        self,
        records: Iterable[BatchRecord],
        *,
        stream_name: str | None = None,
        stream_arn: str | None = None,
    ) -> list[Outcome]:
        """``put_many`` without waiting: raises ``anyio.WouldBlock`` (nothing accepted) when
        there is no room for the whole batch, or the stream's shard map is not loaded yet."""
        if stream_arn is not None:
            stream_name = arn_ref(stream_name, stream_arn)
        stream = self._stream_for(stream_name)
        return self._accept_many(stream, self._engine.batch(stream, records))  # type: ignore[union-attr]

    async def put_objects(
        self,
        objects: Iterable[tuple[object, str | None] | tuple[object, str | None, str | None]],
        *,
        schema: Schema,
        stream_name: str | None = None,
        stream_arn: str | None = None,
    ) -> list[Outcome]:
        """``put_object`` for a batch of ``(obj, partition_key[, explicit_hash_key])``, all
        with ``schema``: each encoded (an object that does not match raises
        ``SchemaMismatchError`` naming its index, and nothing is accepted), then
        :meth:`put_many`'s rules."""
        registry, spec = registry_and_spec(
            self._schema_registry, schema, stream_arn or stream_name or self._default_stream
        )
        records: list[BatchRecord] = []
        if registry.cached_version(spec) is None:
            # every object checked before the registry is asked (or a version registered)
            items = list(objects)
            payloads: list[bytes] = []
            for i, item in enumerate(items):
                try:
                    payloads.append(schema.payload(item[0]))
                except (TypeError, ValueError) as exc:  # SchemaMismatchError, not a tuple
                    raise at_index(i, exc) from exc
            version = await registry.version_for(spec)
            for item, payload in zip(items, payloads, strict=True):
                records.append((schema._frame(payload, version), *item[1:]))
            return await self.put_many(records, stream_name=stream_name, stream_arn=stream_arn)
        for i, item in enumerate(objects):
            try:
                records.append((cached_record(registry, schema, spec, item[0]), *item[1:]))
            except (TypeError, ValueError) as exc:  # SchemaMismatchError, not a tuple
                raise at_index(i, exc) from exc
        return await self.put_many(records, stream_name=stream_name, stream_arn=stream_arn)

    def _accept_many(self, stream: StreamState, batch: Batch) -> list[Outcome]:
        engine = self._engine
        assert engine is not None
        try:
            outcomes = engine.accept_many(stream, batch, self._now())
        except NoRoom:
            raise anyio.WouldBlock from None
        if self._outbox.effects:  # batches sealed, a linger deadline set
            self._pipeline.apply()  # type: ignore[union-attr]
        return outcomes

    def _stream_for(self, stream_name: str | None) -> StreamState:
        """The loaded stream a batch goes to (``put_nowait``'s checks, in its order)."""
        if self._state != OPEN:
            raise closed_error(self._state, self._entered, self._forked_message)
        if stream_name is None:
            name = self._default_stream
        else:
            check_stream_name(stream_name)
            name = stream_name
        engine = self._engine
        assert engine is not None
        stream = engine.stream(name) if name is not None else None
        if stream is None:
            if name is None:
                self._require_default()
            elif is_arn(name):
                parse_stream_arn(name, self.client.region_name)  # a bad ARN: ValueError now
            raise _NotLoaded(name)
        return stream


class _NotLoaded(anyio.WouldBlock):
    """A batch to a stream whose shard map is not loaded yet (``put_many`` loads it)."""
