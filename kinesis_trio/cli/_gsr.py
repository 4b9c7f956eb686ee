"""The Glue Schema Registry on the command line: ``produce --schema FILE`` (JSON lines
written as schema-registered records) and ``tail --decode gsr`` (records read back as JSON
lines), and the registry both reach (Glue on ``--glue-endpoint-url``)."""

from __future__ import annotations

import argparse
import base64
import importlib
import json
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ._options import _Target, _UsageError

if TYPE_CHECKING:
    from ..gsr._decode import Decoded
    from ..gsr._registry import GlueSchemaRegistry
    from ..gsr._schemas import Schema

__all__ = [
    "SchemaInput",
    "decoded_line",
    "registry_for",
    "schema_input",
    "secondary_deserializer",
]

#: ``--secondary-deserializer``'s names for the usual ones (else ``MODULE:CALLABLE``)
SECONDARY_DESERIALIZERS: dict[str, Callable[[bytes], object]] = {
    "utf8": lambda data: data.decode("utf-8"),
    "json": json.loads,
    "base64": lambda data: base64.b64encode(data).decode(),
}


def secondary_deserializer(spec: str) -> Callable[[bytes], object]:
    """``--secondary-deserializer``: ``utf8``, ``json``, ``base64`` or ``MODULE:CALLABLE`` (a
    function of the record's bytes, imported), for records without the GSR header."""
    if spec in SECONDARY_DESERIALIZERS:
        return SECONDARY_DESERIALIZERS[spec]
    module, _, name = spec.partition(":")
    if not module or not name:
        raise _UsageError(
            f"--secondary-deserializer {spec!r}: utf8, json, base64 or MODULE:CALLABLE"
        )
    try:
        found: Any = importlib.import_module(module)
        for part in name.split("."):
            found = getattr(found, part)
    except (ImportError, AttributeError) as exc:
        raise _UsageError(f"--secondary-deserializer {spec!r}: {exc}") from None
    if not callable(found):
        raise _UsageError(f"--secondary-deserializer {spec!r} is not callable")
    return found  # type: ignore[no-any-return]


def glue_endpoint(args: argparse.Namespace, target: _Target) -> str | None:
    """``--glue-endpoint-url``, else ``AWS_ENDPOINT_URL_GLUE``, else the Kinesis endpoint when
    one is configured (``kinesis-trio local`` serves Glue there), else ``None`` (Glue's own)."""
    explicit: str | None = getattr(args, "glue_endpoint_url", None)
    return explicit or os.environ.get("AWS_ENDPOINT_URL_GLUE") or target.endpoint_url


def registry_for(
    args: argparse.Namespace, target: _Target, *, auto_register: bool = False
) -> GlueSchemaRegistry:
    """A registry client for the command's target (closed by ``async with``)."""
    from ..gsr._registry import GlueSchemaRegistry

    try:
        return GlueSchemaRegistry.connect(
            region_name=target.region,
            endpoint_url=glue_endpoint(args, target),
            credentials=target.credentials,
            profile_name=target.profile,
            auto_register=auto_register,
        )
    except ValueError as exc:  # no region, malformed endpoint URL
        raise _UsageError(str(exc).replace("region_name=...", "--region")) from None


class SchemaInput:
    """``produce --schema``: the schema records are written with, and a JSON line as the
    object it encodes (a dict or JSON value; for PROTOBUF, a message parsed from it)."""

    def __init__(self, schema: Schema, message_class: Any = None) -> None:
        self.schema = schema
        self._message_class = message_class

    @property
    def mismatch(self) -> tuple[type[Exception], ...]:
        """The error of a line that does not match the schema."""
        from ..gsr._types import SchemaMismatchError

        return (SchemaMismatchError,)

    def value(self, obj: object) -> object:
        """The object to encode for a parsed JSON line; ``SchemaMismatchError`` when a
        PROTOBUF line does not fit its message."""
        if self._message_class is None:
            return obj
        from google.protobuf import json_format

        from ..gsr._types import SchemaMismatchError

        if not isinstance(obj, dict):
            raise SchemaMismatchError("a PROTOBUF record's line must be a JSON object")
        try:
            return json_format.ParseDict(obj, self._message_class())
        except json_format.ParseError as exc:
            raise SchemaMismatchError(str(exc)) from None


def schema_input(args: argparse.Namespace) -> SchemaInput | None:
    """The ``--schema`` options as a :class:`SchemaInput` (``None`` without ``--schema``)."""
    if args.schema is None:
        for name in ("schema_format", "schema_name", "schema_message", "registry"):
            if getattr(args, name) is not None:
                raise _UsageError(f"--{name.replace('_', '-')} needs --schema FILE")
        for name in ("auto_register", "compress"):
            if getattr(args, name):
                raise _UsageError(f"--{name.replace('_', '-')} needs --schema FILE")
        return None
    if args.records:
        raise _UsageError("--schema cannot be used with --records (their data is already bytes)")
    if args.schema_format is None or args.schema_name is None:
        raise _UsageError("--schema needs --schema-format and --schema-name")
    try:
        with open(args.schema, encoding="utf-8") as f:
            definition = f.read()
    except OSError as exc:
        raise _UsageError(f"cannot read {args.schema}: {exc.strerror}") from None
    from ..gsr._schemas import AvroSchema, JsonSchema
    from ..gsr._types import DEFAULT_REGISTRY, SchemaError

    options: dict[str, Any] = {
        "registry": args.registry or DEFAULT_REGISTRY,
        "compress": args.compress,
    }
    fmt: str = args.schema_format
    if fmt != "PROTOBUF" and args.schema_message is not None:
        raise _UsageError("--schema-message is for --schema-format PROTOBUF")
    try:
        if fmt == "AVRO":
            return SchemaInput(AvroSchema(args.schema_name, definition, **options))
        if fmt == "JSON":
            return SchemaInput(JsonSchema(args.schema_name, definition, **options))
        return _protobuf_input(args.schema_name, definition, args.schema_message, options)
    except SchemaError as exc:
        raise _UsageError(f"--schema {args.schema}: {exc}") from None


def _protobuf_input(
    name: str, definition: str, message: str | None, options: dict[str, Any]
) -> SchemaInput:
    from google.protobuf import message_factory

    from ..gsr._protobuf import compile_definition
    from ..gsr._schemas import ProtobufSchema

    file = compile_definition(definition)
    top = list(file.message_types_by_name.values())
    if not top:
        raise _UsageError("--schema: the .proto definition declares no message")
    if message is None:
        desc = top[0]
    else:
        found = [d for d in top if message in (d.name, d.full_name)]
        if not found:
            names = ", ".join(d.full_name for d in top)
            raise _UsageError(f"--schema-message {message!r} is not in the .proto ({names})")
        desc = found[0]
    cls = message_factory.GetMessageClass(desc)
    return SchemaInput(ProtobufSchema(name, cls, definition, **options), cls)


def decoded_line(
    shard_id: str,
    record: dict[str, Any],
    partition_key: str | None,
    explicit_hash_key: str | None,
    sub_sequence_number: int | None,
    arrival: str | None,
    decoded: Decoded | None,
    error: str | None,
) -> bytes:
    """``tail --decode gsr``'s line for one user record: its place, its schema version and
    the object (``value``), or ``error`` when it is not a GSR record the registry knows."""
    line: dict[str, Any] = {
        "shard_id": shard_id,
        "sequence_number": record.get("SequenceNumber"),
        "sub_sequence_number": sub_sequence_number,
        "partition_key": partition_key,
        "explicit_hash_key": explicit_hash_key,
        "approximate_arrival_timestamp": arrival,
    }
    if decoded is not None:
        line["schema_version_id"] = None if decoded.secondary else str(decoded.version_id)
        line["data_format"] = decoded.data_format
        if decoded.secondary:
            line["secondary"] = True
        line["compressed"] = decoded.compressed
        line["value"] = decoded.jsonable()
    else:
        line["error"] = error
    return json.dumps(line, ensure_ascii=False, default=str).encode("utf-8") + b"\n"
