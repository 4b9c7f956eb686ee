"""The fake Glue's compatibility checks: can a reader of one schema version read what a
writer of another wrote, for each format; and which versions a mode compares (pure).

The modes, as botocore's Glue model documents ``Compatibility``: BACKWARD "allows data
receivers to read both the current and one previous schema version" (the new version
reads what the latest wrote), FORWARD "allows data receivers to read both the current and
one next schema version" (the latest reads what the new one writes), FULL both; the
``_ALL`` modes check "against all previous schema versions"; NONE: "Any new version added
will be accepted without undergoing a compatibility check".

- AVRO: the Avro specification's schema resolution, by the Apache ``avro`` package's
  ``ReaderWriterCompatibilityChecker`` (the ``gsr`` extra).
- JSON (a subset of JSON Schema, Draft-04 to 07): ``type`` (a writer's types must be the
  reader's, ``integer`` read as ``number``), ``enum`` (the writer's values among the
  reader's), objects (a property the reader requires must be required by the writer; a
  reader closed with ``additionalProperties: false`` needs a writer closed too, with no
  property the reader lacks; shared properties and ``additionalProperties`` schemas
  compared in turn), arrays (``items``), and the bounds ``maxLength``/``minLength``,
  ``maximum``/``minimum``, ``maxItems``/``minItems`` (a reader's may not be narrower).
  ``$ref``, ``allOf``/``anyOf``/``oneOf``, ``pattern`` and ``format`` are not compared.
- PROTOBUF (a subset of "Updating A Message Type" in the protobuf guide): messages matched
  by their (nested) name; a field number both use must keep a wire-compatible type
  (int32, uint32, int64, uint64, bool and enums are one group; sint32 and sint64; fixed32
  and sfixed32; fixed64 and sfixed64; string, bytes and messages); a ``required`` field
  of the reader must be required by the writer. Oneofs, maps and options are read as fields.
"""

from __future__ import annotations

import json
import re
from typing import Any

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
        elif not proto_messages(definition):
            return "no message type found"
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
        return _json_reads(json.loads(reader), json.loads(writer), "#")
    return _proto_reads(reader, writer)


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


# -- JSON Schema (a subset) ---------------------------------------------------------------

_BOUNDS = (
    ("maxLength", max),
    ("maximum", max),
    ("maxItems", max),
    ("minLength", min),
    ("minimum", min),
    ("minItems", min),
)


def _types(schema: dict[str, Any]) -> set[str] | None:
    found = schema.get("type")
    if found is None:
        return None
    return {found} if isinstance(found, str) else set(found)


def _json_reads(reader: Any, writer: Any, at: str) -> list[str]:
    if not isinstance(reader, dict) or not isinstance(writer, dict):
        return [] if reader is not False else [f"{at}: the reader accepts nothing"]
    problems: list[str] = []
    r_types, w_types = _types(reader), _types(writer)
    if r_types is not None:
        widened = r_types | ({"integer"} if "number" in r_types else set())
        if w_types is None or not w_types <= widened:
            problems.append(f"{at}: type {sorted(w_types or ['any'])} not in {sorted(r_types)}")
    if "enum" in reader:
        extra = [v for v in writer.get("enum", [None, "any"]) if v not in reader["enum"]]
        if "enum" not in writer or extra:
            problems.append(f"{at}: enum values {extra} not in the reader's enum")
    for name, wider in _BOUNDS:
        if name in reader:
            bound = writer.get(name)
            if bound is None or wider(bound, reader[name]) != reader[name]:
                problems.append(f"{at}: {name} {reader[name]} narrower than the writer's {bound}")
    problems += _json_object(reader, writer, at)
    if isinstance(reader.get("items"), dict):
        problems += _json_reads(reader["items"], writer.get("items", {}), f"{at}/items")
    return problems


def _json_object(reader: dict[str, Any], writer: dict[str, Any], at: str) -> list[str]:
    problems: list[str] = []
    r_props: dict[str, Any] = reader.get("properties") or {}
    w_props: dict[str, Any] = writer.get("properties") or {}
    w_required = set(writer.get("required") or [])
    for name in reader.get("required") or []:
        if name not in w_required:
            problems.append(f"{at}: property {name!r} is required by the reader, not the writer")
    r_extra = reader.get("additionalProperties", True)
    w_extra = writer.get("additionalProperties", True)
    if r_extra is False:
        if w_extra is not False:
            problems.append(f"{at}: the reader allows no other properties, the writer does")
        for name in w_props:
            if name not in r_props:
                problems.append(f"{at}: property {name!r} of the writer unknown to the reader")
    for name, w_schema in w_props.items():
        r_schema = r_props.get(name, r_extra if isinstance(r_extra, dict) else None)
        if r_schema is not None:
            problems += _json_reads(r_schema, w_schema, f"{at}/properties/{name}")
    if isinstance(r_extra, dict) and isinstance(w_extra, dict):
        problems += _json_reads(r_extra, w_extra, f"{at}/additionalProperties")
    return problems


# -- Protobuf (a subset) ------------------------------------------------------------------

_WIRE_GROUPS = (
    {"int32", "uint32", "int64", "uint64", "bool", "enum"},
    {"sint32", "sint64"},
    {"fixed32", "sfixed32"},
    {"fixed64", "sfixed64"},
    {"string", "bytes", "message"},
    {"float"},
    {"double"},
)
_SCALARS = set().union(*_WIRE_GROUPS) - {"enum", "message"}
_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[A-Za-z_][\w.]*|\d+|[{}=;<>,\[\]()-]')
_LABELS = {"optional", "required", "repeated"}


def _proto_tokens(text: str) -> list[str]:
    text = re.sub(r"//[^\n]*|/\*.*?\*/", " ", text, flags=re.S)
    return _TOKEN.findall(text)


def proto_messages(text: str) -> dict[str, dict[int, tuple[str, str]]]:
    """Each message's (nested, dotted) name -> field number -> (label, type kind or name)."""
    tokens = _proto_tokens(text)
    messages: dict[str, dict[int, tuple[str, str]]] = {}
    enums: set[str] = set()
    stack: list[str] = []  # "message:Name", "enum:Name" or "other"
    i = 0
    while i < len(tokens):
        tok = tokens[i]
        if tok in ("message", "enum") and i + 2 < len(tokens) and tokens[i + 2] == "{":
            name = tokens[i + 1]
            path = ".".join([s.split(":", 1)[1] for s in stack if s != "other"] + [name])
            stack.append(f"{tok}:{name}")
            if tok == "message":
                messages.setdefault(path, {})
            else:
                enums.add(name)
            i += 3
            continue
        if tok == "{":
            stack.append("other")
        elif tok == "}":
            if stack:
                stack.pop()
        elif stack and stack[-1].startswith("message:") and tok not in ("option", "reserved"):
            field = _proto_field(tokens, i)
            if field is not None:
                label, kind, number, i = field
                path = ".".join(s.split(":", 1)[1] for s in stack if s != "other")
                messages[path][number] = (label, kind)
                continue
        i += 1
    return {
        name: {n: (lb, "enum" if k.rsplit(".", 1)[-1] in enums else k) for n, (lb, k) in f.items()}
        for name, f in messages.items()
    }


def _proto_field(tokens: list[str], i: int) -> tuple[str, str, int, int] | None:
    """``[label] type name = number ...;`` at ``tokens[i]``: (label, type, number, next)."""
    label = tokens[i] if tokens[i] in _LABELS else ""
    j = i + 1 if label else i
    if tokens[j] == "map" and tokens[j + 1] == "<":
        close = tokens.index(">", j)
        kind, j = "message", close + 1
    else:
        kind, j = tokens[j], j + 1
    if j + 2 < len(tokens) and tokens[j + 1] == "=" and tokens[j + 2].isdigit():
        end = tokens.index(";", j)
        return label, kind, int(tokens[j + 2]), end + 1
    return None


def _group(kind: str) -> int:
    kind = kind if kind in _SCALARS or kind == "enum" else "message"
    return next(n for n, g in enumerate(_WIRE_GROUPS) if kind in g)


def _proto_reads(reader: str, writer: str) -> list[str]:
    readers, writers = proto_messages(reader), proto_messages(writer)
    problems: list[str] = []
    for name, r_fields in readers.items():
        w_fields = writers.get(name)
        if w_fields is None:
            continue
        for number, (label, kind) in r_fields.items():
            found = w_fields.get(number)
            if label == "required" and (found is None or found[0] != "required"):
                problems.append(f"{name}: required field {number} not required by the writer")
            if found is None:
                continue
            if _group(kind) != _group(found[1]):
                problems.append(f"{name}: field {number} is {found[1]} there, {kind} here")
    return problems
