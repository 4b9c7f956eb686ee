"""JSON payloads: the object's JSON text in UTF-8, compact, as the Java ``JsonSerializer``
writes it (``objectMapper.writeValueAsBytes(dataNode)``: no wrapper, no schema inside).

jsonschema validates (the validator for the definition's ``$schema``, built once); the
standard library writes the text.
"""

from __future__ import annotations

import json

from ._optional import require
from ._types import DecodeError, SchemaError, SchemaMismatchError


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
        if not self._validator.is_valid(obj):
            error = self._best_match(self._validator.iter_errors(obj))
            where = "/".join(str(p) for p in error.absolute_path) or "(the document)"
            raise SchemaMismatchError(
                f"record does not match {self.name}: at {where}: {error.message}"
            )
        try:
            text = json.dumps(obj, separators=(",", ":"), ensure_ascii=False, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise SchemaMismatchError(f"record is not JSON: {exc}") from None
        return text.encode()

    def decode(self, payload: bytes) -> object:
        """The JSON value a payload holds (not validated, as the Java deserializer does)."""
        try:
            return json.loads(payload)
        except ValueError as exc:
            raise DecodeError(f"JSON payload does not parse: {exc}") from None
