"""Reading GSR records: the header, the writer's schema (from the registry, cached) and the
object, for records as ``deaggregate`` returns them."""

from __future__ import annotations

import uuid
from collections import OrderedDict
from dataclasses import dataclass

from ._codec import FormatCodec, reader_for
from ._types import DataFormat, SchemaRegistry
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
