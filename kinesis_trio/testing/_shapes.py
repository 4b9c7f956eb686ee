"""Request bodies checked against botocore's Kinesis service model, as the service checks them.

Each operation's input shape (``kinesis/2013-12-02/service-2.json``) is compiled once into a
checker. The rules, as the JSON 1.1 protocol applies them:

- a member of the wrong JSON type (a string where an integer goes, ``NaN``, ``1e400``, a
  list where an object goes): ``400 SerializationException``;
- a required member missing or null, a string or list outside its ``min``/``max`` length,
  an integer outside its range, a value outside its ``enum``: ``400 ValidationException``
  ("1 validation error detected: Value ... at '...' failed to satisfy constraint: ...");
- members the model does not name are ignored, as the service ignores them.

Patterns (Java regular expressions in the model) are left to the operations, which check the
ones that matter (stream names, ARNs, hash keys, sequence numbers) themselves.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import botocore.session

from ._model import _Fail

__all__ = ["check_input"]

_Check = Callable[[Any, str], None]

#: Lists whose members the operation validates itself, one by one, with its own messages
#: (PutRecords' entries: base64, sizes and keys are checked per entry as Kinesis reports them).
_OWN_MEMBERS = frozenset({("PutRecords", "Records")})
#: Values over a maximum the service answers with another code than ValidationException. The
#: model's GetRecords.Limit documentation: "If you specify a value that is greater than
#: 10,000, GetRecords throws InvalidArgumentException."
_RANGE_CODES = {("GetRecords", "Limit"): "InvalidArgumentException"}


def check_input(operation: str, body: dict[str, Any]) -> None:
    """Raise the service's 400 error if ``body`` does not fit ``operation``'s input shape.

    Operations the model does not have are left alone (the caller answers them)."""
    check = _checkers().get(operation)
    if check is not None:
        check(body, "")


def _serialization(where: str, value: Any, expected: str) -> _Fail:
    shown = repr(value) if isinstance(value, float) else f"of JSON type {_json_type(value)}"
    return _Fail(
        400,
        "SerializationException",
        f"Value at '{where or '$'}' is {shown}, not {expected}",
    )


def _json_type(value: Any) -> str:
    for kind, name in ((bool, "boolean"), (int, "number"), (str, "string"), (list, "array")):
        if isinstance(value, kind):
            return name
    return "object" if isinstance(value, dict) else "null"


def _validation(
    where: str, value: Any, constraint: str, code: str = "ValidationException"
) -> _Fail:
    shown = "null" if value is None else f"'{_short(value)}'"
    return _Fail(
        400,
        code,
        f"1 validation error detected: Value {shown} at '{where}' failed to satisfy "
        f"constraint: {constraint}",
    )


def _short(value: Any) -> str:
    text = str(value) if not isinstance(value, (list, dict)) else type(value).__name__
    return text if len(text) <= 64 else text[:64] + "..."


def _member_path(parent: str, name: str) -> str:
    """Where a member sits, as the service names it (lower camel case, dotted)."""
    here = name[0].lower() + name[1:]
    return f"{parent}.{here}" if parent else here


@functools.lru_cache(maxsize=1)
def _checkers() -> dict[str, _Check]:
    model = botocore.session.get_session().get_service_model("kinesis")
    checkers: dict[str, _Check] = {}
    for name in model.operation_names:
        shape = model.operation_model(name).input_shape
        if shape is not None:
            checkers[name] = _compile(shape, name)
    return checkers


def _compile(shape: Any, operation: str, member: str = "") -> _Check:
    kind = shape.type_name
    meta = shape.metadata
    if kind == "structure":
        return _structure(shape, operation)
    if kind == "list":
        item = None if (operation, member) in _OWN_MEMBERS else _compile(shape.member, operation)
        return _list(item, meta.get("min"), meta.get("max"))
    if kind == "map":
        return _map()
    if kind == "string":
        return _string(meta.get("min"), meta.get("max"), shape.enum or None)
    if kind in ("integer", "long"):
        code = _RANGE_CODES.get((operation, member), "ValidationException")
        return _integer(meta.get("min"), meta.get("max"), code)
    if kind == "boolean":
        return _boolean
    if kind == "timestamp":
        return _timestamp
    if kind == "blob":
        return _blob
    raise AssertionError(f"unexpected shape type {kind!r}")  # pragma: no cover


def _structure(shape: Any, operation: str) -> _Check:
    members = {
        name: _compile(member, operation, member=name) for name, member in shape.members.items()
    }
    required = tuple(shape.required_members)

    def check(value: Any, where: str) -> None:
        if not isinstance(value, dict):
            raise _serialization(where, value, "an object")
        for name in required:
            if value.get(name) is None:
                raise _validation(_member_path(where, name), None, "Member must not be null")
        for name, item in value.items():
            inner = members.get(name)
            if inner is not None and item is not None:
                inner(item, _member_path(where, name))

    return check


def _list(item: _Check | None, low: int | None, high: int | None) -> _Check:
    def check(value: Any, where: str) -> None:
        if not isinstance(value, list):
            raise _serialization(where, value, "a list")
        _length(value, len(value), where, low, high)
        if item is not None:
            for i, each in enumerate(value):
                if each is None:
                    raise _validation(f"{where}.{i + 1}.member", None, "Member must not be null")
                item(each, f"{where}.{i + 1}.member")

    return check


def _map() -> _Check:
    def check(value: Any, where: str) -> None:
        if not isinstance(value, dict):
            raise _serialization(where, value, "an object")

    return check


def _string(low: int | None, high: int | None, enum: list[str] | None) -> _Check:
    choices = frozenset(enum) if enum else None

    def check(value: Any, where: str) -> None:
        if not isinstance(value, str):
            raise _serialization(where, value, "a string")
        if choices is not None and value not in choices:
            listed = ", ".join(sorted(choices))
            raise _validation(where, value, f"Member must satisfy enum value set: [{listed}]")
        _length(value, len(value), where, low, high)

    return check


def _length(value: Any, size: int, where: str, low: int | None, high: int | None) -> None:
    if low is not None and size < low:
        raise _validation(where, value, f"Member must have length greater than or equal to {low}")
    if high is not None and size > high:
        raise _validation(where, value, f"Member must have length less than or equal to {high}")


def _integer(low: int | None, high: int | None, code: str) -> _Check:
    def check(value: Any, where: str) -> None:
        if isinstance(value, bool) or not isinstance(value, int):
            raise _serialization(where, value, "an integer")
        if low is not None and value < low:
            constraint = f"Member must have value greater than or equal to {low}"
            raise _validation(where, value, constraint)
        if high is not None and value > high:
            constraint = f"Member must have value less than or equal to {high}"
            raise _validation(where, value, constraint, code)

    return check


def _boolean(value: Any, where: str) -> None:
    if not isinstance(value, bool):
        raise _serialization(where, value, "true or false")


def _timestamp(value: Any, where: str) -> None:
    """Epoch seconds, as botocore sends a timestamp in JSON 1.1."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise _serialization(where, value, "a timestamp (epoch seconds)")
    if isinstance(value, float) and not math.isfinite(value):
        raise _serialization(where, value, "a timestamp (epoch seconds)")


def _blob(value: Any, where: str) -> None:
    if not isinstance(value, str):
        raise _serialization(where, value, "a base64 string")
