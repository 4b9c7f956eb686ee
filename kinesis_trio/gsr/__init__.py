"""Glue Schema Registry: records any GSR reader decodes (AVRO, JSON, PROTOBUF).

``encode(schema, obj, version_id)`` writes a record (the 18-byte GSR header, then the
payload); a :class:`Decoder` reads records back, fetching writer schemas from a registry.
"""

from ._decode import Decoded as Decoded
from ._decode import Decoder as Decoder
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
