"""Glue Schema Registry: typed records any GSR reader decodes (AVRO, JSON, PROTOBUF).

``encode(schema, obj, version_id)`` writes a record (the 18-byte GSR header, then the
payload); a :class:`Decoder` reads records back, fetching writer schemas from a registry.
:class:`GlueSchemaRegistry` finds (and, with ``auto_register``, registers) the schema
version of each definition, cached, as the Java client does, creating schemas with the Java
serde's options (compatibility, description, tags; names made by a :class:`SchemaNaming`);
``GlueClient`` is the Glue API client under it (Glue's JSON 1.1 API on the package's signed
HTTP stack).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ._decode import Decoded as Decoded
from ._decode import Decoder as Decoder
from ._options import BY_RECORD_TYPE as BY_RECORD_TYPE
from ._options import BY_STREAM as BY_STREAM
from ._options import BY_STREAM_AND_RECORD_TYPE as BY_STREAM_AND_RECORD_TYPE
from ._options import SchemaNaming as SchemaNaming
from ._registry import GlueSchemaRegistry as GlueSchemaRegistry
from ._schemas import AvroSchema as AvroSchema
from ._schemas import JsonSchema as JsonSchema
from ._schemas import ProtobufSchema as ProtobufSchema
from ._schemas import Schema as Schema
from ._schemas import encode as encode
from ._types import DecodeError as DecodeError
from ._types import RegisteredSchema as RegisteredSchema
from ._types import SchemaError as SchemaError
from ._types import SchemaIncompatibleError as SchemaIncompatibleError
from ._types import SchemaMismatchError as SchemaMismatchError
from ._types import SchemaNotFoundError as SchemaNotFoundError
from ._types import SchemaRegistry as SchemaRegistry
from ._types import SchemaRegistryError as SchemaRegistryError
from ._types import SchemaSpec as SchemaSpec

if TYPE_CHECKING:
    from .._aws._glue import GlueClient as GlueClient


def __getattr__(name: str) -> Any:
    # the Glue client (and the signed HTTP stack under it) is imported when first asked
    # for: encoding and decoding with a registry of one's own do not need it
    if name == "GlueClient":
        from .._aws._glue import GlueClient

        return GlueClient
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
