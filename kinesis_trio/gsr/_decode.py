"""Reading GSR records: the header, the writer's schema (from the registry, cached) and the
object, for records as ``deaggregate`` returns them."""

from __future__ import annotations

import base64
import datetime
import decimal
import functools
import uuid
from collections import OrderedDict
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from google.protobuf import json_format, message

from ._avro import AvroCodec
from ._codec import FormatCodec
from ._json import JsonCodec
from ._protobuf import ProtobufReader
from ._schemas import AvroSchema
from ._types import DataFormat, DecodeError, SchemaError, SchemaRegistry
from ._wire import HEADER_VERSION, decode_frame

#: What a secondary deserializer is: the record's bytes to the object they hold.
SecondaryDeserializer = Callable[[bytes], object]


@dataclass(frozen=True)
class Decoded:
    """A GSR record read: the writer's schema version, its format and the object.

    ``value`` is a dict (AVRO), a JSON value (JSON) or a protobuf message (PROTOBUF). A record
    without the GSR header that the secondary deserializer read has ``version_id`` and
    ``data_format`` ``None`` and ``value`` what the deserializer returned.
    """

    version_id: uuid.UUID | None
    data_format: DataFormat | None
    compressed: bool
    value: object

    @property
    def secondary(self) -> bool:
        """The record had no GSR header: the secondary deserializer read it."""
        return self.version_id is None

    def jsonable(self) -> object:
        """``value`` as plain JSON values (a message by field name, bytes in base64)."""
        return _jsonable(self.value)


def _jsonable(value: object) -> object:
    if isinstance(value, message.Message):
        return json_format.MessageToDict(value, preserving_proto_field_name=True)
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if isinstance(value, (decimal.Decimal, uuid.UUID)):
        return str(value)
    if isinstance(value, (datetime.date, datetime.time)):
        return value.isoformat()
    return value


@functools.lru_cache(maxsize=256)
def reader_for(
    data_format: DataFormat,
    definition: str,
    avro_reader: str | None = None,
    classes: tuple[type[message.Message], ...] = (),
) -> FormatCodec:
    """The codec that reads payloads written with ``definition`` (parsed once, cached): into
    the Avro reader schema ``avro_reader``, protobuf messages into ``classes`` if given."""
    if data_format == "AVRO":
        return AvroCodec(definition, avro_reader)
    if data_format == "JSON":
        return JsonCodec(definition)
    if data_format == "PROTOBUF":
        return ProtobufReader(definition, classes)
    raise SchemaError(f"unknown data format {data_format!r}")


class Decoder:
    """Decodes GSR records, fetching each writer schema once through ``registry``.

    Parsed readers are kept per version id, at most ``max_schemas`` (least recently used go).

    Reading into the consumer's own schemas (evolution on read, the Java serde's specific
    records and POJOs): ``reader_schemas``, Avro schemas (text or :class:`AvroSchema`), each
    read into by Avro's schema resolution when the writer's record has its full name or one
    of its aliases; ``message_classes``, generated protobuf classes, each read into when the
    writer's message has its full name.

    ``secondary_deserializer``: records whose first byte is not the GSR header version (3)
    are given to it and its answer returned (as the Java serde's ``secondaryDeserializer``);
    without one they are a :class:`DecodeError`.
    """

    def __init__(
        self,
        registry: SchemaRegistry,
        *,
        max_schemas: int = 1000,
        reader_schemas: Iterable[str | AvroSchema] = (),
        message_classes: Iterable[type[message.Message]] = (),
        secondary_deserializer: SecondaryDeserializer | None = None,
    ) -> None:
        self._registry = registry
        self._max = max_schemas
        self._readers: OrderedDict[uuid.UUID, tuple[DataFormat, FormatCodec]] = OrderedDict()
        self._avro_readers: dict[str, str] = {}
        for reader in reader_schemas:
            text = reader.spec.definition if isinstance(reader, AvroSchema) else reader
            for name in AvroCodec(text).names:
                if self._avro_readers.setdefault(name, text) != text:
                    raise SchemaError(f"two reader schemas are for {name}")
        self._classes = tuple(message_classes)
        for cls in self._classes:
            if not (isinstance(cls, type) and issubclass(cls, message.Message)):
                raise TypeError(f"message_classes: {cls!r} is not a protobuf message class")
        self._secondary = secondary_deserializer

    def _reader(self, data_format: DataFormat, definition: str) -> FormatCodec:
        if data_format == "AVRO" and self._avro_readers:
            name = getattr(reader_for("AVRO", definition), "name", None)
            if name in self._avro_readers:
                return reader_for("AVRO", definition, self._avro_readers[name])
        if data_format == "PROTOBUF" and self._classes:
            return reader_for("PROTOBUF", definition, classes=self._classes)
        return reader_for(data_format, definition)

    async def decode(self, data: bytes) -> Decoded:
        """Read one record; :class:`DecodeError` for bytes that are not a GSR record (and no
        secondary deserializer to give them to)."""
        if self._secondary is not None and (not data or data[0] != HEADER_VERSION):
            # GlueSchemaRegistryKafkaDeserializer.deserializeByHeaderVersionByte: the header
            # version byte decides, nothing else
            try:
                value = self._secondary(bytes(data))
            except Exception as exc:
                raise DecodeError(
                    f"not a GSR record, and the secondary deserializer failed: "
                    f"{type(exc).__name__}: {exc}"
                ) from exc
            return Decoded(None, None, False, value)
        frame = decode_frame(data)
        known = self._readers.get(frame.version_id)
        if known is None:
            schema = await self._registry.schema_of(frame.version_id)
            known = (schema.data_format, self._reader(schema.data_format, schema.definition))
            self._readers[frame.version_id] = known
            while len(self._readers) > self._max:
                self._readers.popitem(last=False)
        else:
            self._readers.move_to_end(frame.version_id)
        data_format, reader = known
        value = reader.decode(frame.payload)
        return Decoded(frame.version_id, data_format, frame.compressed, value)
