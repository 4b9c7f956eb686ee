"""The schemas a producer writes with, and ``encode``: an object to a GSR record.

Each schema holds its :class:`SchemaSpec` (what the registry is asked about) and a codec
built once; ``encode`` is pure and synchronous, so the put path does no I/O once the
registry has given the version id (``SchemaRegistry.cached_version``).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping

from google.protobuf import message

from ._avro import AvroCodec
from ._codec import PayloadEncoder
from ._json import JsonCodec
from ._proto_text import class_definition
from ._protobuf import ProtobufWriter
from ._types import DEFAULT_REGISTRY, DataFormat, SchemaSpec
from ._wire import encode_frame


class Schema:
    """A schema to write records with: its registry spec and its validating encoder."""

    data_format: DataFormat

    def __init__(
        self,
        name: str,
        definition: str,
        codec: PayloadEncoder,
        *,
        registry: str,
        compatibility: str,
        metadata: Mapping[str, str] | None,
        compress: bool = False,
    ) -> None:
        #: records are written zlib-compressed (header byte 1 = 5), as the Java serde's
        #: ``compression`` setting ``ZLIB`` does
        self.compress = compress
        self.spec: SchemaSpec = SchemaSpec(
            name=name,
            definition=definition,
            data_format=self.data_format,
            registry=registry,
            compatibility=compatibility,
            metadata=dict(metadata or {}),
        )
        self._codec = codec

    def payload(self, obj: object) -> bytes:
        """The validated payload of ``obj`` (no header); :class:`SchemaMismatchError` if not."""
        return self._codec.encode(obj)

    def encode(self, obj: object, version_id: uuid.UUID) -> bytes:
        """The GSR record of ``obj`` (compressed if the schema says so); see :func:`encode`."""
        return encode_frame(self._codec.encode(obj), version_id, compress=self.compress)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.spec.name!r}, registry={self.spec.registry!r})"


class _TextSchema(Schema):
    """A schema whose encoder is built from its definition's text alone."""

    #: the format's codec, built from the definition
    _codec_type: Callable[[str], PayloadEncoder]

    def __init__(
        self,
        name: str,
        definition: str,
        *,
        registry: str = DEFAULT_REGISTRY,
        compatibility: str = "BACKWARD",
        metadata: Mapping[str, str] | None = None,
        compress: bool = False,
    ) -> None:
        super().__init__(
            name,
            definition,
            type(self)._codec_type(definition),
            registry=registry,
            compatibility=compatibility,
            metadata=metadata,
            compress=compress,
        )


class AvroSchema(_TextSchema):
    """An Avro schema (its JSON text); records are dicts, written with fastavro."""

    data_format: DataFormat = "AVRO"
    _codec_type = AvroCodec


class JsonSchema(_TextSchema):
    """A JSON Schema (its text); records are JSON values, validated with jsonschema."""

    data_format: DataFormat = "JSON"
    _codec_type = JsonCodec


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
        name: str,
        message_type: type[message.Message],
        definition: str | None = None,
        *,
        registry: str = DEFAULT_REGISTRY,
        compatibility: str = "BACKWARD",
        metadata: Mapping[str, str] | None = None,
        compress: bool = False,
        check: bool = False,
    ) -> None:
        writer = ProtobufWriter(message_type)
        if definition is None:
            definition = class_definition(message_type)
        elif check:
            writer.check(definition)
        super().__init__(
            name,
            definition,
            writer,
            registry=registry,
            compatibility=compatibility,
            metadata=metadata,
            compress=compress,
        )


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
