"""The fake Glue's compatibility checks: can a reader of one schema version read what a
writer of another wrote, for each format; and which versions a mode compares (pure).

The modes, as botocore's Glue model documents ``Compatibility``: BACKWARD "allows data
receivers to read both the current and one previous schema version" (the new version
reads what the latest wrote), FORWARD "allows data receivers to read both the current and
one next schema version" (the latest reads what the new one writes), FULL both; the
``_ALL`` modes check "against all previous schema versions"; NONE: "Any new version added
will be accepted without undergoing a compatibility check".

The rules for each format, as the Glue developer guide (``schema-registry.html``, "Schema
versioning and compatibility") states them: BACKWARD "allows consumers to read both the current
and the previous schema version"; "In the Avro data format, fields may be optional or required";
"In the Protobuf data format, fields can be optional (including repeated) or required in proto2
syntax, while all fields are optional (including repeated) in proto3 syntax. All compatibility
rules are determined based on the understanding of the Protocol Buffers specifications as well
as the guidance from the Google Protocol Buffers documentation".

- AVRO: the Avro specification's schema resolution, by the Apache ``avro`` package's
  ``ReaderWriterCompatibilityChecker`` (the ``gsr`` extra).
- JSON: does the reader's schema validate every document the writer's does
  (``_compat_json``: what it compares and what it does not).
- PROTOBUF: descriptors compiled by protoc, compared by "Updating A Message Type"
  (``_compat_proto``, the ``gsr-protobuf`` extra); and a new version may not use a field
  number or name an old one reserves.
"""

from __future__ import annotations

import json
from typing import Any

from . import _compat_json, _compat_proto

__all__ = ["COMPATIBILITIES", "definition_problem", "incompatibility", "reads"]

COMPATIBILITIES = (
    "NONE",
    "DISABLED",
    "BACKWARD",
    "BACKWARD_ALL",
    "FORWARD",
    "FORWARD_ALL",
    "FULL",
    "FULL_ALL",
)


def incompatibility(
    data_format: str, compatibility: str, new: str, previous: list[str]
) -> str | None:
    """Why ``new`` may not follow ``previous`` (the schema's available versions, oldest
    first) under ``compatibility``, or ``None`` when it may."""
    if compatibility in ("NONE", "DISABLED") or not previous:
        return None
    against = previous if compatibility.endswith("_ALL") else previous[-1:]
    backward = compatibility.startswith(("BACKWARD", "FULL"))
    forward = compatibility.startswith(("FORWARD", "FULL"))
    for old in reversed(against):
        if data_format == "PROTOBUF" and (reuses := _compat_proto.reused(new, old)):
            return f"{compatibility}: {reuses[0]}"
        if backward:
            problems = reads(data_format, new, old)
            if problems:
                return f"{compatibility}: the new version cannot read the old: {problems[0]}"
        if forward:
            problems = reads(data_format, old, new)
            if problems:
                return f"{compatibility}: the old version cannot read the new: {problems[0]}"
    return None


def definition_problem(data_format: str, definition: str) -> str | None:
    """Why ``definition`` is not a schema of ``data_format`` (``None``: it is one)."""
    try:
        if data_format == "AVRO":
            _avro().parse(definition)
        elif data_format == "JSON":
            if not isinstance(json.loads(definition), (dict, bool)):
                return "not a JSON Schema object"
        else:
            return _compat_proto.definition_problem(definition)
    except ImportError:
        raise
    except Exception as exc:  # the parsers' own errors (avro's SchemaParseException, ...)
        return str(exc) or type(exc).__name__
    return None


def reads(data_format: str, reader: str, writer: str) -> list[str]:
    """What keeps a reader of schema ``reader`` from reading data written with ``writer``."""
    if data_format == "AVRO":
        return _avro_reads(reader, writer)
    if data_format == "JSON":
        return _compat_json.reads(json.loads(reader), json.loads(writer))
    return _compat_proto.reads(reader, writer)


# -- Avro ---------------------------------------------------------------------------------


def _avro() -> Any:
    """The ``avro.schema`` module (the ``gsr`` extra)."""
    try:
        import avro.compatibility
        import avro.schema
    except ImportError as exc:  # pragma: no cover
        raise ImportError(
            "Avro schemas in the fake need the avro package: pip install 'kinesis-trio[gsr]'"
        ) from exc
    return avro.schema


def _avro_reads(reader: str, writer: str) -> list[str]:
    schema = _avro()
    from avro.compatibility import ReaderWriterCompatibilityChecker, SchemaCompatibilityType

    result = ReaderWriterCompatibilityChecker().get_compatibility(  # type: ignore[no-untyped-call]
        schema.parse(reader), schema.parse(writer)
    )
    if result.compatibility is SchemaCompatibilityType.compatible:
        return []
    where = sorted(result.locations)
    return [f"{m} (at {', '.join(where)})" if where else m for m in sorted(result.messages)]
