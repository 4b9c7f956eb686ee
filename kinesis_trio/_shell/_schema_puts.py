"""Typed records through a schema (issue 52): ``put_object`` encodes an object as a Glue
Schema Registry record, then puts its bytes as any record.

Encoding happens here, per user record and before the engine sees any bytes: the engine
aggregates, sizes and sends GSR records as it does any record (the record size checked is
the encoded one, header included), as the KPL's ``addUserRecord(..., schema)`` encodes each
user record before aggregation. Once the registry knows a schema's version id the path does
no I/O and no await more than ``put``'s; the first use of a schema awaits the registry.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Awaitable, Callable
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

import anyio

from .._core import is_arn, parse_stream_arn
from .._errors import ProducerClosedError

if TYPE_CHECKING:
    from anyio.from_thread import BlockingPortal

    from .._results import RecordResult
    from ..gsr._schemas import Schema
    from ..gsr._types import SchemaRegistry, SchemaSpec
    from ._outcome import Outcome
    from ._sync_handoff import Line

__all__ = ["SchemaNotCached", "SchemaPuts", "SyncSchemaPuts"]


class SchemaNotCached(anyio.WouldBlock):
    """``put_object_nowait`` with a schema whose version id the registry does not know yet
    (``await put_object()`` looks it up, or registers it)."""


def registry_and_spec(
    registry: SchemaRegistry | None, schema: Schema, stream: str | None
) -> tuple[SchemaRegistry, SchemaSpec]:
    """The producer's registry (a clear error when it was given none) and the spec of
    ``schema`` for a put to ``stream`` (a name or an ARN; the put's, else the producer's
    default): ``schema.spec``, unless the schema is named by the stream
    (``schema.needs_stream``)."""
    if registry is None:
        raise ValueError(
            "put_object needs a schema registry: Producer(..., schema_registry="
            "GlueSchemaRegistry.connect(...)) (kinesis_trio.gsr)"
        )
    if not schema.needs_stream:
        return registry, schema.spec
    if stream is None:
        raise ValueError("no stream_name given and the producer has no default stream")
    return registry, schema.spec_for(parse_stream_arn(stream).name if is_arn(stream) else stream)


def cached_record(registry: SchemaRegistry, schema: Schema, spec: SchemaSpec, obj: object) -> bytes:
    """``obj`` as a GSR record if the spec's version id is known (no I/O), else
    :class:`SchemaNotCached`; :class:`SchemaMismatchError` if ``obj`` does not match
    (known or not)."""
    version = registry.cached_version(spec)
    if version is None:
        schema.payload(obj)  # an object that does not fit: that error first
        raise SchemaNotCached(
            f"schema {spec.name!r}: its version id is not known yet "
            "(await put_object() looks it up)"
        )
    return schema.encode(obj, version)


class SchemaPuts:
    """``Producer.put_object`` and ``put_object_nowait``: an object in, a GSR record put."""

    _schema_registry: SchemaRegistry | None
    _default_stream: str | None

    if TYPE_CHECKING:  # the producer's own (``Producer.put``, ``put_nowait``)
        put: Callable[..., Awaitable[Outcome]]
        put_nowait: Callable[..., Outcome]

    @property
    def schema_registry(self) -> SchemaRegistry | None:
        """The registry ``put_object`` finds schema version ids in (``schema_registry=``)."""
        return self._schema_registry

    async def put_object(
        self,
        obj: object,
        partition_key: str | None = None,
        explicit_hash_key: str | None = None,
        *,
        schema: Schema,
        stream_name: str | None = None,
        stream_arn: str | None = None,
    ) -> Outcome:
        """Encode ``obj`` with ``schema`` (``kinesis_trio.gsr``'s ``AvroSchema``,
        ``JsonSchema``, ``ProtobufSchema``) as a Glue Schema Registry record and ``put`` it.

        The schema's version id comes from the producer's ``schema_registry``: cached after
        the first use (no request), else looked up, or registered if the registry
        auto-registers (concurrent first uses make one set of requests); a schema named by
        the stream (a ``SchemaNaming`` of ``{stream}``) under the name of the stream put to.
        Raises
        :class:`~kinesis_trio.gsr.SchemaMismatchError` when ``obj`` does not match the schema
        (nothing was accepted), the registry's typed errors
        (:class:`~kinesis_trio.gsr.SchemaIncompatibleError`,
        :class:`~kinesis_trio.gsr.SchemaNotFoundError`,
        :class:`~kinesis_trio.gsr.SchemaRegistryError`, e.g. access denied) when it refuses
        the schema, and what ``put`` raises, the size limit checked on the encoded record.
        Cancelled while the registry is asked: nothing was accepted.
        """
        registry, spec = registry_and_spec(
            self._schema_registry, schema, stream_arn or stream_name or self._default_stream
        )
        version = registry.cached_version(spec)
        if version is None:
            # a mismatch is refused before the registry is asked (or a version registered)
            payload = schema.payload(obj)
            data = schema._frame(payload, await registry.version_for(spec))
        else:
            data = schema.encode(obj, version)
        return await self.put(
            data, partition_key, explicit_hash_key, stream_name=stream_name, stream_arn=stream_arn
        )

    def put_object_nowait(
        self,
        obj: object,
        partition_key: str | None = None,
        explicit_hash_key: str | None = None,
        *,
        schema: Schema,
        stream_name: str | None = None,
        stream_arn: str | None = None,
    ) -> Outcome:
        """``put_object`` without waiting: raises ``anyio.WouldBlock`` when the producer is
        full, the stream not loaded, or the schema's version id not cached yet (one
        ``await put_object()`` with the schema caches it)."""
        registry, spec = registry_and_spec(
            self._schema_registry, schema, stream_arn or stream_name or self._default_stream
        )
        data = cached_record(registry, schema, spec, obj)
        return self.put_nowait(
            data, partition_key, explicit_hash_key, stream_name=stream_name, stream_arn=stream_arn
        )


class SyncSchemaPuts:
    """``SyncProducer.put_object``: an object in, a GSR record put, from any thread."""

    _producer_args: dict[str, Any]
    _default_stream: str | None
    _portal: BlockingPortal | None
    _line: Line

    if TYPE_CHECKING:  # the producer's own (``SyncProducer.put``)
        put: Callable[..., Future[RecordResult]]

    def put_object(
        self,
        obj: object,
        partition_key: str | None = None,
        explicit_hash_key: str | None = None,
        *,
        schema: Schema,
        stream_name: str | None = None,
        timeout: float | None = None,
    ) -> Future[RecordResult]:
        """Encode ``obj`` with ``schema`` as a Glue Schema Registry record and ``put`` it.

        The encoding runs in the caller's thread. A schema whose version id the registry
        does not know yet is looked up (or registered) on the producer's loop first, this
        call blocking meanwhile (not from a future's callback: ``RuntimeError``). Raises as
        ``Producer.put_object`` does: ``SchemaMismatchError``, the registry's typed errors,
        and what ``put`` raises.
        """
        registry, spec = registry_and_spec(
            self._producer_args["schema_registry"], schema, stream_name or self._default_stream
        )
        version = registry.cached_version(spec)
        if version is None:
            # a mismatch is refused before the registry is asked (or a version registered)
            payload = schema.payload(obj)
            data = schema._frame(payload, self._version_on_loop(registry, spec))
        else:
            data = schema.encode(obj, version)
        return self.put(
            data, partition_key, explicit_hash_key, stream_name=stream_name, timeout=timeout
        )

    def _version_on_loop(self, registry: SchemaRegistry, spec: SchemaSpec) -> uuid.UUID:
        if self._line.loop_thread == threading.get_ident():
            raise RuntimeError(
                "put_object from the producer's own thread (a future's callback) with a "
                f"schema not cached yet ({spec.name!r}) would wait for ever"
            )
        portal = self._portal
        if portal is None:
            raise ProducerClosedError("the producer is not open: use `with SyncProducer(...)`")
        return portal.call(registry.version_for, spec)
