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

from ._avro_check import Misfit, exactness, unwritable
from ._optional import require
from ._types import DecodeError, SchemaError, SchemaMismatchError


class AvroCodec:
    """One Avro schema, parsed once; ``reader`` (a reader schema's text): payloads are read
    into it by Avro's schema resolution (fastavro's ``reader_schema``: defaults for added
    fields, promoted types, aliases)."""

    def __init__(self, definition: str, reader: str | None = None) -> None:
        self._fastavro = require("fastavro", "gsr")
        self._validation = require("fastavro.validation", "gsr")
        self._schema = self._parse(definition)
        self._reader = None if reader is None else self._parse(reader)
        schema = self._schema  # a dict, or a primitive's name, or a union's list
        if isinstance(schema, dict):
            self.name = str(schema.get("name", schema.get("type", "")))
        else:
            self.name = schema if isinstance(schema, str) else "union"
        self._exact = exactness(self._schema)

    def _parse(self, definition: str) -> Any:
        try:
            return self._fastavro.parse_schema(json.loads(definition))
        except (ValueError, TypeError, KeyError, self._fastavro.schema.SchemaParseException) as exc:
            raise SchemaError(f"not an Avro schema: {exc}") from None

    @property
    def names(self) -> set[str]:
        """The full name of the (named) top-level type and its aliases' (a reader's names)."""
        if not isinstance(self._schema, dict) or "name" not in self._schema:
            return set()
        namespace = self._schema["name"].rpartition(".")[0]
        aliases = self._schema.get("aliases", ())
        full = {a if "." in a or not namespace else f"{namespace}.{a}" for a in aliases}
        return {self._schema["name"], *full}

    def encode(self, obj: object) -> bytes:
        """The schemaless Avro binary of ``obj``; :class:`SchemaMismatchError` names the field."""
        try:
            valid = self._validation.validate(obj, self._schema, raise_errors=False)
        except (OverflowError, ValueError, TypeError):  # an int beyond a C long
            valid = False
        if not valid:
            raise SchemaMismatchError(self._mismatch(obj))
        if self._exact is not None:
            try:
                obj = self._exact(obj)
            except Misfit as exc:
                raise SchemaMismatchError(
                    f"record does not match Avro schema {self.name}: {exc}"
                ) from None
        out = io.BytesIO()
        try:
            self._fastavro.schemaless_writer(out, self._schema, obj, strict_allow_default=True)
        except (ValueError, TypeError, OverflowError) as exc:  # UnicodeEncodeError is a ValueError
            raise SchemaMismatchError(self._mismatch(obj, exc)) from None
        return out.getvalue()

    def _mismatch(self, obj: object, error: Exception | None = None) -> str:
        found = unwritable(self._schema, obj)
        if found is not None:
            return f"record does not match Avro schema {self.name}: {found}"
        if error is not None:
            return f"record does not match Avro schema {self.name}: {error}"
        # A missing field fails validation with an unhelpful message; the strict writer names
        # it. Wrong types are named by the validator ("shop.Order.id is <x> ... expected long").
        try:
            self._fastavro.schemaless_writer(
                io.BytesIO(), self._schema, obj, strict_allow_default=True
            )
        except (ValueError, TypeError, AttributeError, OverflowError) as exc:
            detail = str(exc)
            if "missing from the record" in detail or "more fields than" in detail:
                return f"record does not match Avro schema {self.name}: {detail}"
        else:
            detail = ""
        try:
            self._validation.validate(obj, self._schema, raise_errors=True)
        except (OverflowError, ValueError, TypeError) as exc:
            detail = detail or str(exc)
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
        """The record a schemaless Avro payload holds (in the reader schema, if one is set)."""
        try:
            return self._fastavro.schemaless_reader(io.BytesIO(payload), self._schema, self._reader)
        except self._fastavro.read.SchemaResolutionError as exc:
            raise DecodeError(
                f"the reader schema does not resolve {self.name}'s records: {exc}"
            ) from None
        except (EOFError, ValueError, TypeError, IndexError, UnicodeDecodeError) as exc:
            raise DecodeError(f"Avro payload does not read with {self.name}: {exc!r}") from None


def _type_name(schema: object) -> str:
    if isinstance(schema, dict):
        return str(schema.get("name", schema.get("type")))
    if isinstance(schema, list):
        return "one of " + ", ".join(_type_name(s) for s in schema)
    return str(schema)
