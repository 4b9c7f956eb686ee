"""What each format's codec does, and the bounded cache of codecs by definition.

A codec is built once per schema definition (the definition parsed, a validator compiled);
``encode`` validates an object and returns the payload (no header), ``decode`` reads a payload.
fastavro, jsonschema and grpcio-tools are optional: imported on first use, with an error that
names the extra that brings them.
"""

from __future__ import annotations

import functools
import importlib
from types import ModuleType
from typing import Protocol

from ._types import DataFormat, SchemaError


class PayloadEncoder(Protocol):
    """One schema definition's encoder."""

    def encode(self, obj: object) -> bytes:
        """The payload of ``obj`` (validated; :class:`SchemaMismatchError` when it is not)."""


class FormatCodec(PayloadEncoder, Protocol):
    """One schema definition's encoder and decoder."""

    def decode(self, payload: bytes) -> object:
        """The object a payload holds (:class:`DecodeError` when it does not read)."""


def require(module: str, extra: str) -> ModuleType:
    """Import an optional dependency, or say which extra installs it."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise SchemaError(
            f"the Glue Schema Registry {extra!r} support needs {module.split('.')[0]}: "
            f"pip install 'kinesis-trio[{extra}]'"
        ) from None


@functools.lru_cache(maxsize=256)
def reader_for(data_format: DataFormat, definition: str) -> FormatCodec:
    """The codec that reads payloads written with ``definition`` (parsed once, cached)."""
    if data_format == "AVRO":
        from ._avro import AvroCodec

        return AvroCodec(definition)
    if data_format == "JSON":
        from ._json import JsonCodec

        return JsonCodec(definition)
    if data_format == "PROTOBUF":
        from ._protobuf import ProtobufReader

        return ProtobufReader(definition)
    raise SchemaError(f"unknown data format {data_format!r}")
