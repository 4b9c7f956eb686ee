"""JSON payloads: the object's JSON text in UTF-8, compact, as the Java ``JsonSerializer``
writes it (``objectMapper.writeValueAsBytes(dataNode)``: no wrapper, no schema inside).

jsonschema validates (the validator for the definition's ``$schema``, built once); the
standard library writes the text, and reads it back to check it is the object given: what
``json.dumps`` changes silently (a key that is not a string, a tuple) is refused, as is
what UTF-8 cannot hold (a lone surrogate), naming the path.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

from ._optional import require
from ._types import DecodeError, SchemaError, SchemaMismatchError

#: built once (``json.dumps`` with these options builds an encoder per call); a cycle is a
#: RecursionError, refused as any value JSON cannot write
_ENCODER = json.JSONEncoder(
    separators=(",", ":"), ensure_ascii=False, allow_nan=False, check_circular=False
)


class JsonCodec:
    """One JSON Schema, checked and compiled once."""

    def __init__(self, definition: str) -> None:
        jsonschema = require("jsonschema", "gsr")
        try:
            schema = json.loads(definition)
            cls = jsonschema.validators.validator_for(schema)
            cls.check_schema(schema)
        except (ValueError, jsonschema.exceptions.SchemaError) as exc:
            raise SchemaError(f"not a JSON Schema: {exc}") from None
        self._validator = cls(schema)
        self._best_match = jsonschema.exceptions.best_match
        title = schema.get("title") if isinstance(schema, dict) else None
        self.name = f"JSON Schema {title}" if title else "its JSON Schema"

    def encode(self, obj: object) -> bytes:
        """The UTF-8 JSON of ``obj``; :class:`SchemaMismatchError` names the failing path."""
        try:
            valid = self._validator.is_valid(obj)
        except RecursionError:  # a cycle, or nesting deeper than the validator goes
            raise SchemaMismatchError(self._not_json(obj, "nested too deep")) from None
        if not valid:
            error = self._best_match(self._validator.iter_errors(obj))
            where = "/".join(str(p) for p in error.absolute_path) or "(the document)"
            raise SchemaMismatchError(
                f"record does not match {self.name}: at {where}: {error.message}"
            )
        try:
            text = _ENCODER.encode(obj)
            payload = text.encode()
        except (TypeError, ValueError, RecursionError) as exc:  # UnicodeEncodeError: ValueError
            raise SchemaMismatchError(self._not_json(obj, str(exc))) from None
        if json.loads(text) != obj:  # what the reader gets is not what was given
            raise SchemaMismatchError(self._not_json(obj, "JSON would change it"))
        return payload

    def _not_json(self, obj: object, fallback: str) -> str:
        found = _not_json(obj, "")
        return f"record does not match {self.name}: {found or fallback}"

    def decode(self, payload: bytes) -> object:
        """The JSON value a payload holds (not validated, as the Java deserializer does)."""
        try:
            return json.loads(payload)
        except ValueError as exc:
            raise DecodeError(f"JSON payload does not parse: {exc}") from None


def _not_json(value: Any, path: str, depth: int = 0) -> str | None:
    """Where and why ``value`` is not a JSON value that reads back as itself, or None."""
    shown = path if len(path) <= 80 else f"{path[:40]}...{path[-30:]}"
    where = f"at {shown or '(the document)'}: "
    if value is None or isinstance(value, (bool, int)):
        return None
    if isinstance(value, float):
        return None if math.isfinite(value) else f"{where}{value!r} is not a JSON number"
    if isinstance(value, str):
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as exc:
            return f"{where}{value[:40]!r} cannot be encoded in UTF-8 ({exc.reason} at {exc.start})"
        return None
    if depth > 500:
        return f"{where}nested more than 500 deep (a cycle?)"
    if isinstance(value, list):
        for i, item in enumerate(value):
            found = _not_json(item, f"{path}/{i}" if path else str(i), depth + 1)
            if found:
                return found
        return None
    if isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                return f"{where}key {key!r} is not a string (JSON would write it as one)"
            sub = f"{path}/{key}" if path else key
            found = _not_json(key, path, depth + 1) or _not_json(item, sub, depth + 1)
            if found:
                return found
        return None
    kind = type(value).__name__
    return f"{where}a {kind} is not a JSON value (JSON would write {kind} as something else)"
