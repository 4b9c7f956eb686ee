"""AVRO payloads: the record's schemaless Avro binary, as the Java ``AvroSerializer`` writes it
(``EncoderFactory.get().directBinaryEncoder``: no container, no schema fingerprint).

fastavro does the encoding; a record is validated first, because fastavro's writer coerces
some wrong values silently (a float written to a ``long`` field), and written with
``strict_allow_default=True``, which refuses unknown fields and missing ones that have
no default.
"""

from __future__ import annotations

import io
import json
from typing import Any

from ._optional import require
from ._types import DecodeError, SchemaError, SchemaMismatchError


class AvroCodec:
    """One Avro schema, parsed once."""

    def __init__(self, definition: str) -> None:
        self._fastavro = require("fastavro", "gsr")
        self._validation = require("fastavro.validation", "gsr")
        try:
            self._schema = self._fastavro.parse_schema(json.loads(definition))
        except (ValueError, TypeError, KeyError, self._fastavro.schema.SchemaParseException) as exc:
            raise SchemaError(f"not an Avro schema: {exc}") from None
        self.name = str(self._schema.get("name", self._schema.get("type", "")))

    def encode(self, obj: object) -> bytes:
        """The schemaless Avro binary of ``obj``; :class:`SchemaMismatchError` names the field."""
        if not self._validation.validate(obj, self._schema, raise_errors=False):
            raise SchemaMismatchError(self._mismatch(obj))
        out = io.BytesIO()
        try:
            self._fastavro.schemaless_writer(out, self._schema, obj, strict_allow_default=True)
        except (ValueError, TypeError) as exc:
            detail = f"record does not match Avro schema {self.name}: {exc}"
            raise SchemaMismatchError(detail) from None
        return out.getvalue()

    def _mismatch(self, obj: object) -> str:
        # A missing field fails validation with an unhelpful message; the strict writer names
        # it. Wrong types are named by the validator ("shop.Order.id is <x> ... expected long").
        try:
            self._fastavro.schemaless_writer(
                io.BytesIO(), self._schema, obj, strict_allow_default=True
            )
        except (ValueError, TypeError, AttributeError) as exc:
            detail = str(exc)
            if "missing from the record" in detail or "more fields than" in detail:
                return f"record does not match Avro schema {self.name}: {detail}"
        else:
            detail = ""
        try:
            self._validation.validate(obj, self._schema, raise_errors=True)
        except self._validation.ValidationError as exc:
            errors: list[Any] = list(exc.errors)
            named = [e for e in errors if getattr(e, "field", "")]
            if named or not detail:
                first = named[0] if named else errors[0]
                same = [e for e in errors if e.field == first.field and e.datum is first.datum]
                expected = " or ".join(dict.fromkeys(_type_name(e.schema) for e in same))
                detail = f"field {first.field}: {first.datum!r} is not a valid {expected}"
        return f"record does not match Avro schema {self.name}: {detail}"

    def decode(self, payload: bytes) -> object:
        """The record a schemaless Avro payload holds."""
        try:
            return self._fastavro.schemaless_reader(io.BytesIO(payload), self._schema, None)
        except (EOFError, ValueError, TypeError, IndexError, UnicodeDecodeError) as exc:
            raise DecodeError(f"Avro payload does not read with {self.name}: {exc!r}") from None


def _type_name(schema: object) -> str:
    if isinstance(schema, dict):
        return str(schema.get("name", schema.get("type")))
    if isinstance(schema, list):
        return "one of " + ", ".join(_type_name(s) for s in schema)
    return str(schema)
