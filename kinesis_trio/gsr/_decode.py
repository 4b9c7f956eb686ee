"""Reading GSR records: the header, the writer's schema (from the registry, cached) and the
object, for records as ``deaggregate`` returns them."""

from __future__ import annotations

import base64
import datetime
import decimal
import functools
import uuid
from collections import OrderedDict
from dataclasses import dataclass

from google.protobuf import json_format, message

from ._avro import AvroCodec
from ._codec import FormatCodec
from ._json import JsonCodec
from ._protobuf import ProtobufReader
from ._types import DataFormat, SchemaError, SchemaRegistry
from ._wire import decode_frame


@dataclass(frozen=True)
class Decoded:
    """A GSR record read: the writer's schema version, its format and the object.

    ``value`` is a dict (AVRO), a JSON value (JSON) or a protobuf message (PROTOBUF).
    """

    version_id: uuid.UUID
    data_format: DataFormat
    compressed: bool
    value: object

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
def reader_for(data_format: DataFormat, definition: str) -> FormatCodec:
    """The codec that reads payloads written with ``definition`` (parsed once, cached)."""
    if data_format == "AVRO":
        return AvroCodec(definition)
    if data_format == "JSON":
        return JsonCodec(definition)
    if data_format == "PROTOBUF":
        return ProtobufReader(definition)
    raise SchemaError(f"unknown data format {data_format!r}")


class Decoder:
    """Decodes GSR records, fetching each writer schema once through ``registry``.

    Parsed readers are kept per version id, at most ``max_schemas`` (least recently used go).
    """

    def __init__(self, registry: SchemaRegistry, *, max_schemas: int = 1000) -> None:
        self._registry = registry
        self._max = max_schemas
        self._readers: OrderedDict[uuid.UUID, tuple[DataFormat, FormatCodec]] = OrderedDict()

    async def decode(self, data: bytes) -> Decoded:
        """Read one record; :class:`DecodeError` for bytes that are not a GSR record."""
        frame = decode_frame(data)
        known = self._readers.get(frame.version_id)
        if known is None:
            schema = await self._registry.schema_of(frame.version_id)
            known = (schema.data_format, reader_for(schema.data_format, schema.definition))
            self._readers[frame.version_id] = known
            while len(self._readers) > self._max:
                self._readers.popitem(last=False)
        else:
            self._readers.move_to_end(frame.version_id)
        data_format, reader = known
        value = reader.decode(frame.payload)
        return Decoded(frame.version_id, data_format, frame.compressed, value)
