"""What fastavro lets through and Avro cannot hold: numbers a ``float`` or ``double`` would
round, and union branches fastavro would pick for a number that another branch holds exactly.

fastavro's validation accepts any int or real number for ``float`` and ``double`` (and writes
it rounded), and in a union writes a number to the first branch that validates (an int goes
to ``double`` before ``long`` when ``double`` comes first). :func:`exactness` compiles, once
per parsed schema, a check of only the places under which a ``float`` or ``double`` lies
(a schema without one costs nothing). It returns the object as fastavro should write it: the
same object, or, where a union's branch must be named, a copy with that value in fastavro's
tuple notation (``("long", value)``). Ranges of ``int``/``long``, types, strings and keys are
fastavro's validation and writer; this module adds nothing there.
"""

from __future__ import annotations

import math
import numbers
import struct
from collections.abc import Callable, Mapping, Sequence
from typing import Any

#: A check: the value (as fastavro should write it) or :class:`Misfit`.
Check = Callable[[Any], Any]

_FLOAT32 = struct.Struct("<f")
_INT_RANGE = {"int": (-(2**31), 2**31 - 1), "long": (-(2**63), 2**63 - 1)}
_NUMERIC = ("int", "long", "float", "double")
_PRIMITIVES = (*_NUMERIC, "null", "boolean", "string", "bytes")


class Misfit(Exception):
    """A value the schema's type cannot hold exactly: why, and where (the path is built as
    the exception passes the containers up, so a check that passes builds none)."""

    def __init__(self, reason: str) -> None:
        reason = reason if len(reason) < 200 else reason[:80] + "..." + reason[-60:]
        super().__init__(reason)
        self.reason = reason
        self.path = ""

    def inside(self, part: str) -> Misfit:
        """The same misfit, one container further out (``.field``, ``[2]``, ``['key']``)."""
        self.path = part + self.path
        return self

    def __str__(self) -> str:
        return f"field {self.path}: {self.reason}" if self.path else self.reason


def holds_double(value: Any) -> bool:
    """A ``double`` holds ``value`` exactly (a Python float always; an int up to 2**53
    or a multiple of a power of two that fits; never a bool)."""
    if type(value) is float:
        return True
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return False
    try:
        return float(value) == value
    except OverflowError:
        return False


def holds_float(value: Any) -> bool:
    """A 32-bit ``float`` takes ``value``: a Python float within its range (written at the
    float's precision, the one the schema chose: Python has no 32-bit float to give),
    NaN and the infinities; any other number (an int) only if it holds it exactly."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        return False
    try:
        as_double = float(value)
        if math.isnan(as_double) or math.isinf(as_double):
            return isinstance(value, float)
        rounded = _FLOAT32.unpack(_FLOAT32.pack(as_double))[0]
        return isinstance(value, float) or bool(rounded == value)
    except OverflowError:  # beyond a float's range: struct refuses, fastavro writes inf
        return False


def _plain(schema: Any) -> str | None:
    """The primitive type name of a schema without a logical type, else None."""
    if isinstance(schema, str):
        return schema if schema in _PRIMITIVES else None
    if isinstance(schema, dict) and "logicalType" not in schema:
        kind = schema.get("type")
        if kind in _NUMERIC or kind in ("null", "boolean", "string", "bytes"):
            return str(kind)
    return None


def _kind(schema: Any) -> Any:
    return schema if isinstance(schema, (str, list)) else schema.get("type")


class _Compiler:
    def __init__(self, named: Mapping[str, Any]) -> None:
        self.named = named
        self.checks: dict[str, Check | None] = {}
        # the named types under which a float or double lies, to a fixed point (a reference
        # to a type counts as what that type holds, recursive ones included)
        self.inexact_names: set[str] = set()
        while True:
            found = {n for n, body in named.items() if self.inexact(body)}
            if found == self.inexact_names:
                break
            self.inexact_names = found

    # -- does a schema hold a float or a double anywhere (the only places checked)?

    def inexact(self, schema: Any) -> bool:
        if isinstance(schema, str):
            return schema in ("float", "double") or schema in self.inexact_names
        if isinstance(schema, list):
            return any(self.inexact(s) for s in schema)
        kind = schema.get("type")
        if kind == "record" or kind == "error":
            return any(self.inexact(f["type"]) for f in schema["fields"])
        if kind == "array":
            return self.inexact(schema["items"])
        if kind == "map":
            return self.inexact(schema["values"])
        if kind in ("float", "double"):
            return "logicalType" not in schema
        return False

    # -- the checks

    def check(self, schema: Any) -> Check | None:
        """The check of ``schema``'s values, or None when nothing in it can round."""
        if not self.inexact(schema):
            return None
        if isinstance(schema, list):
            return self._union(schema)
        if isinstance(schema, str) and schema in self.named:
            return self._named(schema)
        kind = _kind(schema)
        if kind in ("float", "double"):
            return _number(kind)
        if kind in ("record", "error"):
            self.checks[schema["name"]] = None  # a recursive reference resolves late
            made = self._record(schema)
            self.checks[schema["name"]] = made
            return made
        if kind == "array":
            return _array(self.check(schema["items"]))
        if kind == "map":
            return _map(self.check(schema["values"]))
        return None

    def _named(self, name: str) -> Check:
        def check(value: Any) -> Any:
            found = self.checks.get(name)
            if found is None:
                found = self.checks[name] = self.check(self.named[name]) or _same
            return found(value)

        return check

    def _record(self, schema: Any) -> Check:
        fields = [(f["name"], self.check(f["type"])) for f in schema["fields"]]
        checked = [(name, check) for name, check in fields if check is not None]

        def check(value: Any) -> Any:
            if type(value) is not dict and not isinstance(value, Mapping):
                return value  # fastavro's validation refuses it
            changed: dict[str, Any] | None = None
            for name, field_check in checked:
                if name in value:
                    got = value[name]
                    try:
                        new = field_check(got)
                    except Misfit as exc:
                        raise exc.inside(f".{name}") from None
                    if new is not got:
                        changed = changed if changed is not None else dict(value)
                        changed[name] = new
            return value if changed is None else changed

        return check

    def _union(self, branches: list[Any]) -> Check:
        plain = [_plain(b) for b in branches]
        ints = [(i, b) for i, b in enumerate(plain) if b in ("int", "long")]
        doubles = [i for i, b in enumerate(plain) if b == "double"]
        floats = [i for i, b in enumerate(plain) if b == "float"]
        # the branch fastavro picks for an int: the first that validates, or None when a
        # branch it might pick is one this module does not model (a logical type)
        others = [
            (self.check(b), self.named.get(b, b) if isinstance(b, str) else b)
            for i, b in enumerate(branches)
            if plain[i] is None
            and _kind(self.named.get(b, b) if isinstance(b, str) else b)
            in ("record", "error", "map", "array")
        ]
        others = others if any(check is not None for check, _ in others) else []
        # a branch this module does not model that might take a number (a logical type):
        # the number's branch is then always named
        resolved = [self.named.get(b, b) if isinstance(b, str) else b for b in branches]
        unmodelled = bool(ints or doubles or floats) and any(
            p is None and _kind(b) not in ("record", "error", "map", "array", "enum", "fixed")
            for p, b in zip(plain, resolved, strict=True)
        )

        def check(value: Any) -> Any:
            if isinstance(value, bool) or not isinstance(value, numbers.Real):
                return _union_other(others, value)
            if not (ints or doubles or floats):
                return value  # fastavro's validation has refused it
            pick = _pick_number(value, ints, doubles, floats)
            if pick is None:
                raise Misfit(f"{short(value)}: no branch of the union holds it exactly")
            if unmodelled or pick != _fastavro_pick(value, plain):
                return (plain[pick], value)  # tuple notation: fastavro writes that branch
            return value

        return check


def _same(value: Any) -> Any:
    return value


def _number(kind: str) -> Check:
    holds = holds_double if kind == "double" else holds_float
    exact_type = float if kind == "double" else None  # a double holds any Python float

    def check(value: Any) -> Any:
        if type(value) is exact_type or holds(value):
            return value
        if isinstance(value, float):  # a float beyond a 32-bit float's range
            raise Misfit(f"{short(value)} is beyond the range of an Avro {kind}")
        if isinstance(value, numbers.Real) and not isinstance(value, bool):
            raise Misfit(f"{short(value)} does not fit a {kind} exactly")
        return value  # not a number: fastavro's validation has refused it

    return check


def _array(item: Check | None) -> Check | None:
    if item is None:
        return None

    def check(value: Any) -> Any:
        if isinstance(value, str) or not isinstance(value, Sequence):
            return value
        changed: list[Any] | None = None
        for i, got in enumerate(value):
            try:
                new = item(got)
            except Misfit as exc:
                raise exc.inside(f"[{i}]") from None
            if new is not got:
                changed = changed if changed is not None else list(value)
                changed[i] = new
        return value if changed is None else changed

    return check


def _map(values: Check | None) -> Check | None:
    if values is None:
        return None

    def check(value: Any) -> Any:
        if not isinstance(value, Mapping):
            return value
        changed: dict[Any, Any] | None = None
        for key, got in value.items():
            try:
                new = values(got)
            except Misfit as exc:
                raise exc.inside(f"[{key!r}]") from None
            if new is not got:
                changed = changed if changed is not None else dict(value)
                changed[key] = new
        return value if changed is None else changed

    return check


def _pick_number(
    value: Any, ints: Sequence[tuple[int, str | None]], doubles: list[int], floats: list[int]
) -> int | None:
    """The branch that holds a number exactly: an int or long first, then a double, then a
    float."""
    if isinstance(value, int):
        for i, kind in ints:
            low, high = _INT_RANGE[str(kind)]
            if low <= value <= high:
                return i
    if doubles and holds_double(value):
        return doubles[0]
    if floats and holds_float(value):
        return floats[0]
    return None


def _fastavro_pick(value: Any, plain: list[str | None]) -> int | None:
    """The branch fastavro's writer picks for a number (``write_union``: the first branch
    that validates, but a later ``double`` before a ``float``)."""
    first_float = None
    for i, kind in enumerate(plain):
        if kind in ("int", "long") and isinstance(value, int):
            low, high = _INT_RANGE[str(kind)]
            if low <= value <= high and first_float is None:
                return i
        elif kind == "double":
            return i
        elif kind == "float" and first_float is None:
            first_float = i
    return first_float


def _union_other(others: list[tuple[Check | None, Any]], value: Any) -> Any:
    """A value that is not a number, in a union: checked with the branch fastavro would write
    it with, when that branch holds a float or a double (records: the one with the most of the
    value's fields, as ``write_union`` picks; arrays, maps: the first)."""
    if not others:
        return value
    if isinstance(value, Mapping):
        best: Check | None = None
        most = -1
        for check, schema in others:
            if schema["type"] in ("record", "error"):
                count = sum(1 for f in schema["fields"] if f["name"] in value)
                if count > most:
                    best, most = check, count
            elif schema["type"] == "map" and most < 0:
                best, most = check, 0
        return best(value) if best is not None else value
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes, tuple)):
        for check, schema in others:
            if schema["type"] == "array":
                return check(value) if check is not None else value
    return value


def exactness(parsed: Any) -> Callable[[Any], Any] | None:
    """The check of a parsed schema's objects (None: nothing in it can round). It returns the
    object to write (the same one, or a copy naming union branches) or raises
    :class:`Misfit`."""
    named = parsed.get("__named_schemas", {}) if isinstance(parsed, dict) else {}
    check = _Compiler(named).check(parsed)
    if check is None:
        return None
    if isinstance(parsed, dict) and parsed.get("type") in ("record", "error"):
        top, full = check, parsed["name"]

        def run(obj: Any) -> Any:
            try:
                return top(obj)
            except Misfit as exc:
                raise exc.inside(full) from None

        return run
    return check


def unwritable(parsed: Any, obj: Any) -> str | None:
    """Where and why fastavro cannot write ``obj`` though its types are right (the error
    path only: an int beyond its type's range, a string or map key UTF-8 cannot encode, a map
    key that is not a string), or None."""
    named = parsed.get("__named_schemas", {}) if isinstance(parsed, dict) else {}
    return _unwritable(named, parsed, obj, "", 0)


def _unwritable(
    named: Mapping[str, Any], schema: Any, value: Any, path: str, depth: int
) -> str | None:
    if depth > 200:
        return None
    if isinstance(schema, str) and schema in named:
        schema = named[schema]
    where = f"field {path}: " if path else ""
    if isinstance(schema, list):
        problems = [
            _unwritable(named, s, value, path, depth + 1)
            for s in schema
            if _takes(_kind(named.get(s, s) if isinstance(s, str) else s), value)
        ]
        return None if not problems or None in problems else problems[-1]
    kind = _kind(schema)
    if kind in ("int", "long"):
        low, high = _INT_RANGE[kind]
        if isinstance(value, int) and not isinstance(value, bool) and not low <= value <= high:
            return f"{where}{short(value)} is beyond the range of an Avro {kind}"
    elif kind == "string" and isinstance(value, str):
        return _unencodable(value, where)
    elif kind in ("record", "error") and isinstance(value, Mapping):
        full = schema["name"]
        for f in schema["fields"]:
            if f["name"] in value:
                sub = f"{path}.{f['name']}" if path else f"{full}.{f['name']}"
                found = _unwritable(named, f["type"], value[f["name"]], sub, depth + 1)
                if found:
                    return found
    elif kind == "array" and isinstance(value, Sequence) and not isinstance(value, str):
        for i, item in enumerate(value):
            found = _unwritable(named, schema["items"], item, f"{path}[{i}]", depth + 1)
            if found:
                return found
    elif kind == "map" and isinstance(value, Mapping):
        for key, item in value.items():
            if not isinstance(key, str):
                return f"{where}map key {key!r} is not a string"
            found = _unencodable(key, f"{where}map key: ") or _unwritable(
                named, schema["values"], item, f"{path}[{key!r}]", depth + 1
            )
            if found:
                return found
    return None


def _takes(kind: Any, value: Any) -> bool:
    """A branch of this kind takes a value of this Python type (fastavro's validation)."""
    if kind in ("int", "long", "float", "double"):
        return isinstance(value, numbers.Real) and not isinstance(value, bool)
    if kind in ("string", "enum"):
        return isinstance(value, str)
    if kind in ("record", "error", "map"):
        return isinstance(value, Mapping)
    if kind == "array":
        return isinstance(value, Sequence) and not isinstance(value, str)
    return kind != "null" or value is None


def short(value: Any) -> str:
    """``repr(value)``, cut in the middle when long (a 400-digit int)."""
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:30]}...{text[-20:]} ({len(text)} chars)"


def _unencodable(text: str, where: str) -> str | None:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as exc:
        return f"{where}{short(text)} cannot be encoded in UTF-8 ({exc.reason} at {exc.start})"
    return None
