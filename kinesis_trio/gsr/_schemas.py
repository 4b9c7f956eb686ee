"""The schemas a producer writes with, and ``encode``: an object to a GSR record.

Each schema holds its :class:`SchemaSpec` (what the registry is asked about; one a stream
when a :class:`SchemaNaming` makes the name from the stream) and a codec built once;
``encode`` is pure and synchronous, so the put path does no I/O once the registry has given
the version id (``SchemaRegistry.cached_version``).
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from google.protobuf import message

from ._avro import AvroCodec
from ._codec import PayloadEncoder
from ._json import JsonCodec
from ._options import SchemaNaming
from ._proto_text import class_definition
from ._protobuf import ProtobufWriter
from ._types import DEFAULT_REGISTRY, DataFormat, SchemaError, SchemaSpec
from ._wire import encode_frame


class Schema:
    """A schema to write records with: its registry spec and its validating encoder.

    ``name``: the schema's name in the registry, or a :class:`SchemaNaming` making it from
    the record type and the stream a record is put to (then :meth:`spec_for` gives a
    stream's spec). ``compatibility``, ``description``, ``tags``: what auto-registration's
    CreateSchema sends for this schema (``None``: the registry's settings); ``metadata``:
    put on each version auto-registration makes.
    """

    data_format: DataFormat
    #: the format's validating encoder, built from the definition (:meth:`_encoder`)
    _codec_type: Callable[[str], PayloadEncoder]

    def __init__(
        self,
        name: str | SchemaNaming,
        definition: str,
        *,
        registry: str = DEFAULT_REGISTRY,
        compatibility: str | None = None,
        metadata: Mapping[str, str] | None = None,
        compress: bool = False,
        description: str | None = None,
        tags: Mapping[str, str] | None = None,
    ) -> None:
        #: the definition registered (its text)
        self.definition = definition
        #: records are written zlib-compressed (header byte 1 = 5), as the Java serde's
        #: ``compression`` setting ``ZLIB`` does
        self.compress = compress
        self._codec = self._encoder(definition)
        self._naming = name if isinstance(name, SchemaNaming) else None
        #: the name comes from the stream: :meth:`spec_for` a stream (``spec`` raises)
        self.needs_stream: bool = self._naming is not None and self._naming.needs_stream
        self._by_stream: dict[str, SchemaSpec] = {}
        # the spec's own checks, now, whatever the name will be
        self._template = SchemaSpec(
            name=name if isinstance(name, str) else "",
            definition=definition,
            data_format=self.data_format,
            registry=registry,
            compatibility=compatibility,
            metadata=dict(metadata or {}),
            description=description,
            tags=dict(tags or {}),
        )
        self._spec: SchemaSpec | None = self._template
        if self._naming is not None:
            record_type = self.record_type()  # SchemaError now if there is none
            self._spec = None
            if not self.needs_stream:
                self._spec = replace(self._template, name=self._naming.name(record_type))

    @property
    def spec(self) -> SchemaSpec:
        """What the registry is asked about (a schema named by the stream has none:
        :meth:`spec_for`)."""
        spec = self._spec
        if spec is None:
            raise SchemaError(
                f"the schema's name comes from the stream ({self._naming}): use spec_for(stream)"
            )
        return spec

    def spec_for(self, stream: str | None) -> SchemaSpec:
        """The spec of records put to ``stream`` (a stream's name): ``spec``, unless the
        name comes from the stream."""
        if self._spec is not None:
            return self._spec
        if not stream:
            raise SchemaError(f"the schema's name comes from the stream ({self._naming}): none")
        found = self._by_stream.get(stream)
        if found is None:
            assert self._naming is not None
            name = self._naming.name(self.record_type(), stream)
            found = self._by_stream[stream] = replace(self._template, name=name)
        return found

    def record_type(self) -> str:
        """The record type's full name (``{record_type}`` in a :class:`SchemaNaming`)."""
        raise SchemaError(f"a {type(self).__name__} has no record type to be named by")

    def _encoder(self, definition: str) -> PayloadEncoder:
        """The validating encoder of payloads, built once from the definition."""
        return type(self)._codec_type(definition)

    def payload(self, obj: object) -> bytes:
        """The validated payload of ``obj`` (no header); :class:`SchemaMismatchError` if not."""
        return self._codec.encode(obj)

    def encode(self, obj: object, version_id: uuid.UUID) -> bytes:
        """The GSR record of ``obj`` (compressed if the schema says so); see :func:`encode`."""
        return encode_frame(self._codec.encode(obj), version_id, compress=self.compress)

    def _frame(self, payload: bytes, version_id: uuid.UUID) -> bytes:
        """The GSR record of a payload from :meth:`payload` (``encode`` in two steps: the
        object checked before the registry is asked for its version id)."""
        return encode_frame(payload, version_id, compress=self.compress)

    def __repr__(self) -> str:
        name = self._spec.name if self._spec is not None else self._naming
        return f"{type(self).__name__}({name!r}, registry={self._template.registry!r})"


class AvroSchema(Schema):
    """An Avro schema (its JSON text); records are dicts, written with fastavro."""

    data_format: DataFormat = "AVRO"
    _codec_type = AvroCodec

    def record_type(self) -> str:
        """The named type's full name (``namespace.name``)."""
        parsed, name = _top_member(self.definition, "name")
        if not isinstance(name, str):
            raise SchemaError("an Avro schema without a named type has no record type")
        namespace = parsed.get("namespace")
        return f"{namespace}.{name}" if namespace and "." not in name else name


class JsonSchema(Schema):
    """A JSON Schema (its text); records are JSON values, validated with jsonschema."""

    data_format: DataFormat = "JSON"
    _codec_type = JsonCodec

    def record_type(self) -> str:
        """The schema's ``title``."""
        _, title = _top_member(self.definition, "title")
        if not isinstance(title, str) or not title:
            raise SchemaError("a JSON Schema without a title has no record type")
        return title


class ProtobufSchema(Schema):
    """A protobuf message class (generated, or made from a descriptor) and the definition
    registered for it.

    ``definition`` ``None`` (the default): the ``.proto`` text the AWS Java serde registers
    for the same message, derived from the class's file descriptor as its
    ``ProtobufSerializer.getSchemaDefinition`` does, so Java and Python producers of one
    ``.proto`` share schema versions. Or the ``.proto`` text to register, as given;
    ``check=True`` compiles it (grpcio-tools) and refuses it unless it declares the same
    messages as the class's file.
    """

    data_format: DataFormat = "PROTOBUF"

    def __init__(
        self,
        name: str | SchemaNaming,
        message_type: type[message.Message],
        definition: str | None = None,
        *,
        registry: str = DEFAULT_REGISTRY,
        compatibility: str | None = None,
        metadata: Mapping[str, str] | None = None,
        compress: bool = False,
        check: bool = False,
        description: str | None = None,
        tags: Mapping[str, str] | None = None,
    ) -> None:
        self._writer = writer = ProtobufWriter(message_type)
        self._message_name: str = writer.descriptor.full_name
        if definition is None:
            definition = class_definition(message_type)
        elif check:
            writer.check(definition)
        super().__init__(
            name,
            definition,
            registry=registry,
            compatibility=compatibility,
            metadata=metadata,
            compress=compress,
            description=description,
            tags=tags,
        )

    def record_type(self) -> str:
        """The message's full name."""
        return self._message_name

    def _encoder(self, definition: str) -> PayloadEncoder:
        return self._writer


def _top_member(definition: str, key: str) -> tuple[dict[str, Any], Any]:
    """A JSON definition's top object and its ``key`` member (``None`` when the definition
    is not an object or has no such member)."""
    parsed: Any = json.loads(definition)
    if not isinstance(parsed, dict):
        return {}, None
    return parsed, parsed.get(key)


def encode(
    schema: Schema, obj: object, version_id: uuid.UUID, *, compress: bool | None = None
) -> bytes:
    """The GSR record of ``obj``: header, then its payload (zlib-compressed if asked;
    ``None``: as ``schema.compress`` says).

    Raises :class:`SchemaMismatchError` when ``obj`` does not match ``schema``. The size
    limit applies to the returned bytes.
    """
    if compress is None:
        compress = schema.compress
    return encode_frame(schema.payload(obj), version_id, compress=compress)
