"""The fake Glue's JSON compatibility check (JSON Schema Draft-04 to 07): can every document a
writer's schema accepts be read, that is validated, by a reader's schema (pure).

The Glue developer guide's rule (``schema-registry.html``, "Schema versioning and
compatibility", JSON): a new version "adds the optional phone number property, this would
successfully register as long as the original schema version does not allow any additional
properties by setting the ``additionalProperties`` field to false", and fails BACKWARD "when
the original schema version sets the ``additionalProperties`` field to true ... as they cannot
read data with phone number property in a different type". So a property is compared with
what the other side allows under that name: its ``properties`` entry, the
``patternProperties`` it matches, else its ``additionalProperties`` (absent: anything).

Compared, recursively, a reader's constraint needing the writer's to be as strict:
``type`` (``integer`` read as ``number``), ``enum``/``const`` (a writer's values are validated
against the reader by ``jsonschema``), ``required``, properties as above,
``dependencies``/``dependentRequired``, ``items`` (a schema or a tuple, ``additionalItems``),
``contains``, ``uniqueItems``, the bounds (``maxLength``, ``minimum``, ``exclusiveMaximum``,
``maxItems``, ``maxProperties``, ...) and ``multipleOf``; ``pattern`` and ``format`` must be the
writer's own (regular languages are not compared); ``$ref`` within the document (``#/...``,
recursion allowed); ``allOf`` (the reader's: each part; the writer's: all parts together),
``anyOf``/``oneOf`` (each writer branch must be read by some reader branch; a reader's
``oneOf`` is read as ``anyOf``). A reader's ``not``, ``if``/``then``/``else`` and
``propertyNames`` must equal the writer's. ``$ref`` to another document is not followed.
"""

from __future__ import annotations

import importlib
import json
import re
from typing import Any

__all__ = ["reads"]

_UPPER = ("maxLength", "maximum", "exclusiveMaximum", "maxItems", "maxProperties")
_LOWER = ("minLength", "minimum", "exclusiveMinimum", "minItems", "minProperties")
_ANNOTATIONS = {"title", "description", "default", "examples", "$id", "id", "$schema", "$comment"}
_ANNOTATIONS |= {"definitions", "$defs", "readOnly", "writeOnly", "contentMediaType"}
_SAME = ("not", "if", "then", "else", "propertyNames")
_COMBINATORS = ("allOf", "anyOf", "oneOf")


def reads(reader: Any, writer: Any) -> list[str]:
    """What keeps a reader of JSON Schema ``reader`` from reading what ``writer`` accepts."""
    return _Check(reader, writer).reads(reader, writer, "#")


def _pointer(root: Any, ref: str) -> Any:
    node = root
    for part in ref[1:].split("/")[1:] if ref != "#" else []:
        part = part.replace("~1", "/").replace("~0", "~")
        node = node[int(part)] if isinstance(node, list) else node[part]
    return node


def _types(schema: dict[str, Any]) -> set[str] | None:
    found = schema.get("type")
    if found is None:
        return None
    return {found} if isinstance(found, str) else set(found)


def _may_be(schema: dict[str, Any], kind: str) -> bool:
    types = _types(schema)
    return types is None or kind in types or (kind == "number" and "integer" in types)


class _Check:
    def __init__(self, reader: Any, writer: Any) -> None:
        self.roots = (reader, writer)
        self.seen: set[tuple[int, int]] = set()
        self.keep: list[Any] = []  # what ``seen`` names stays alive (ids are not reused)

    def resolve(self, schema: Any, side: int) -> Any:
        hops = 0
        while isinstance(schema, dict) and isinstance(schema.get("$ref"), str) and hops < 32:
            ref = schema["$ref"]
            if not ref.startswith("#"):
                return schema
            schema, hops = _pointer(self.roots[side], ref), hops + 1
        return {} if schema is True else schema

    def reads(self, reader: Any, writer: Any, at: str) -> list[str]:
        reader, writer = self.resolve(reader, 0), self.resolve(writer, 1)
        if writer is False or (isinstance(reader, dict) and not set(reader) - _ANNOTATIONS):
            return []
        if reader is False:
            return [f"{at}: the reader accepts nothing"]
        if (id(reader), id(writer)) in self.seen:
            return []  # a recursive $ref met again: assume it reads, as the rest decides
        self.seen.add((id(reader), id(writer)))
        self.keep.append((reader, writer))
        if "$ref" in reader or "$ref" in writer:
            same = reader.get("$ref") == writer.get("$ref")
            return [] if same else [f"{at}: $ref to another document not compared"]
        return self.split_writer(reader, writer, at)

    def split_writer(self, reader: dict[str, Any], writer: dict[str, Any], at: str) -> list[str]:
        parts = self.conjuncts(writer)
        for i, part in enumerate(parts):
            for key in ("anyOf", "oneOf"):
                if key in part:
                    rest = {k: v for k, v in part.items() if k != key}
                    problems: list[str] = []
                    for n, branch in enumerate(part[key]):
                        merged = {"allOf": [*parts[:i], rest, branch, *parts[i + 1 :]]}
                        problems += self.reads(reader, merged, f"{at}/{key}/{n}")
                    return problems
        return self.split_reader(reader, _merge(parts), at)

    def conjuncts(self, writer: dict[str, Any]) -> list[dict[str, Any]]:
        out = [{k: v for k, v in writer.items() if k != "allOf"}]
        for part in writer.get("allOf", []):
            part = self.resolve(part, 1)
            if part is False:
                return [{"not": {}}]
            out += self.conjuncts(part)
        return out

    def split_reader(self, reader: dict[str, Any], writer: dict[str, Any], at: str) -> list[str]:
        problems: list[str] = []
        for n, part in enumerate(reader.get("allOf", [])):
            problems += self.reads(part, writer, f"{at}/allOf/{n}")
        for key in ("anyOf", "oneOf"):
            if key in reader:
                branches = enumerate(reader[key])
                tries = [self.reads(b, writer, f"{at}/{key}/{n}") for n, b in branches]
                if all(tries):
                    problems.append(f"{at}: no {key} branch reads the writer ({tries[0][0]})")
        return problems + self.compare({k: v for k, v in reader.items()}, writer, at)

    def compare(self, reader: dict[str, Any], writer: dict[str, Any], at: str) -> list[str]:
        if "not" in writer and writer["not"] == {}:
            return []  # the writer accepts nothing (a false part)
        values = [writer["const"]] if "const" in writer else writer.get("enum")
        if values is not None and "$ref" not in json.dumps(reader):
            return _values(reader, values, at)
        problems: list[str] = []
        r_types, w_types = _types(reader), _types(writer)
        if r_types is not None:
            widened = r_types | ({"integer"} if "number" in r_types else set())
            if w_types is None or not w_types <= widened:
                problems.append(f"{at}: type {sorted(w_types or ['any'])} not in {sorted(r_types)}")
        if ("enum" in reader or "const" in reader) and values is None:
            problems.append(f"{at}: the reader's enum/const, the writer has none")
        elif "enum" in reader or "const" in reader:
            allowed = reader.get("enum", [reader.get("const")])
            if any(v not in allowed for v in values or []):
                problems.append(f"{at}: the writer's values are not all in the reader's enum")
        for name in _UPPER + _LOWER:
            wider = max if name in _UPPER else min
            if name in reader:
                bound = writer.get(name)
                if bound is None or wider(bound, reader[name]) != reader[name]:
                    problems.append(f"{at}: {name} {reader[name]} narrower than {bound}")
        if "multipleOf" in reader:
            step = writer.get("multipleOf")
            if step is None or (step / reader["multipleOf"]) % 1:
                problems.append(f"{at}: multipleOf {reader['multipleOf']}, the writer's {step}")
        for key in ("pattern", "format"):
            if key in reader and reader[key] not in writer.get(key, ()):
                problems.append(f"{at}: {key} {reader[key]!r} is not the writer's")
        for key in _SAME:
            if key in reader and reader[key] != writer.get(key):
                problems.append(f"{at}: {key} differs from the writer's (not compared)")
        if _may_be(writer, "object") and _may_be(reader, "object"):
            problems += self.objects(reader, writer, at)
        if _may_be(writer, "array") and _may_be(reader, "array"):
            problems += self.arrays(reader, writer, at)
        return problems

    def property_schema(self, schema: dict[str, Any], name: str) -> Any:
        patterns = (schema.get("patternProperties") or {}).items()
        found = [s for p, s in patterns if re.search(p, name)]
        if name in (schema.get("properties") or {}):
            found.append(schema["properties"][name])
        if not found:
            return schema.get("additionalProperties", True)
        return found[0] if len(found) == 1 else {"allOf": found}

    def objects(self, reader: dict[str, Any], writer: dict[str, Any], at: str) -> list[str]:
        problems: list[str] = []
        w_required = set(writer.get("required") or [])
        for name in reader.get("required") or []:
            if name not in w_required:
                problems.append(f"{at}: property {name!r} required by the reader, not the writer")
        names = set(reader.get("properties") or {}) | set(writer.get("properties") or {})
        for name in sorted(names):
            r_schema = self.property_schema(reader, name)
            w_schema = self.property_schema(writer, name)
            problems += self.reads(r_schema, w_schema, f"{at}/properties/{name}")
        w_rest = writer.get("additionalProperties", True)
        for pattern, w_schema in (writer.get("patternProperties") or {}).items():
            r_schema = (reader.get("patternProperties") or {}).get(pattern)
            r_schema = reader.get("additionalProperties", True) if r_schema is None else r_schema
            problems += self.reads(r_schema, w_schema, f"{at}/patternProperties/{pattern}")
        for pattern, r_schema in (reader.get("patternProperties") or {}).items():
            if pattern not in (writer.get("patternProperties") or {}):
                problems += self.reads(r_schema, w_rest, f"{at}/patternProperties/{pattern}")
        r_rest = reader.get("additionalProperties", True)
        problems += self.reads(r_rest, w_rest, f"{at}/additionalProperties")
        return problems + self.dependencies(reader, writer, w_required, at)

    def dependencies(
        self, reader: dict[str, Any], writer: dict[str, Any], w_required: set[str], at: str
    ) -> list[str]:
        problems: list[str] = []
        w_deps = {**(writer.get("dependencies") or {}), **(writer.get("dependentRequired") or {})}
        r_deps = {**(reader.get("dependencies") or {}), **(reader.get("dependentRequired") or {})}
        for name, need in r_deps.items():
            if self.resolve(self.property_schema(writer, name), 1) is False:
                continue  # the writer never writes it
            got = w_deps.get(name)
            if isinstance(need, list):
                have = w_required | set(got if isinstance(got, list) else [])
                if set(need) - have:
                    problems.append(f"{at}: dependencies of {name!r} {need}, the writer's {got}")
            elif got is None or isinstance(got, list):
                problems.append(f"{at}: a schema dependency of {name!r} the writer lacks")
            else:
                problems += self.reads(need, got, f"{at}/dependencies/{name}")
        return problems

    def arrays(self, reader: dict[str, Any], writer: dict[str, Any], at: str) -> list[str]:
        problems: list[str] = []
        if reader.get("uniqueItems") and not writer.get("uniqueItems"):
            problems.append(f"{at}: uniqueItems in the reader, not the writer")
        if "contains" in reader:
            if "contains" not in writer:
                problems.append(f"{at}: contains in the reader, not the writer")
            else:
                problems += self.reads(reader["contains"], writer["contains"], f"{at}/contains")
        r_items, w_items = reader.get("items", True), writer.get("items", True)
        width = max(len(s) if isinstance(s, list) else 0 for s in (r_items, w_items))
        for i in range(width):
            r_at, w_at = _item(reader, i), _item(writer, i)
            problems += self.reads(r_at, w_at, f"{at}/items/{i}")
        problems += self.reads(_item(reader, width), _item(writer, width), f"{at}/items")
        return problems


def _item(schema: dict[str, Any], i: int) -> Any:
    items = schema.get("items", True)
    if not isinstance(items, list):
        return items
    return items[i] if i < len(items) else schema.get("additionalItems", True)


def _values(reader: dict[str, Any], values: list[Any], at: str) -> list[str]:
    try:
        jsonschema = importlib.import_module("jsonschema")
    except ImportError as exc:  # pragma: no cover
        raise ImportError(
            "JSON schemas in the fake need jsonschema: pip install 'kinesis-trio[gsr]'"
        ) from exc
    validator = jsonschema.validators.validator_for(reader, default=jsonschema.Draft7Validator)
    bad = [v for v in values if not validator(reader).is_valid(v)]
    return [f"{at}: the writer's values {bad} do not validate against the reader"] if bad else []


def _merge(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """The writer's ``allOf`` parts as one schema (each constraint at its tightest)."""
    out: dict[str, Any] = {}
    for part in parts:
        for key, value in part.items():
            if key in ("pattern", "format"):
                out.setdefault(key, []).append(value)
            elif key not in out:
                out[key] = value
            elif key == "type":
                out[key] = sorted(_meet(_types(out), _types(part)))
            elif key == "required":
                out[key] = sorted(set(out[key]) | set(value))
            elif key == "enum":
                out[key] = [v for v in out[key] if v in value]
            elif key in _UPPER:
                out[key] = min(out[key], value)
            elif key in _LOWER:
                out[key] = max(out[key], value)
            elif key in ("properties", "patternProperties", "dependencies"):
                out[key] = {**value, **out[key]} | {
                    k: {"allOf": [out[key][k], v]} for k, v in value.items() if k in out[key]
                }
            elif isinstance(value, (dict, bool)):
                out[key] = {"allOf": [out[key], value]}
    return out


def _meet(left: set[str] | None, right: set[str] | None) -> set[str]:
    if left is None or right is None:
        return (left if right is None else right) or set()
    both = left & right
    if "integer" in left | right and "number" in left | right:
        both |= {"integer"} & (left | right)
    return both
