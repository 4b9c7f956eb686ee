"""The fake Glue's PROTOBUF compatibility check: descriptors compiled by protoc (grpcio-tools,
the ``gsr-protobuf`` extra, as ``gsr/_protobuf.py`` compiles them), compared by the rules of
"Updating A Message Type" in the protobuf language guide, which the Glue developer guide names:
"All compatibility rules are determined based on the understanding of the Protocol Buffers
specifications as well as the guidance from the Google Protocol Buffers documentation".

``reads(reader, writer)`` lists what keeps a reader of one definition from reading what a writer
of the other wrote:

- top-level messages are matched by full name, nested and imported ones through the fields
  that use them; a top-level message (a record's type) or an RPC method the writer declares
  and the reader lacks is a problem (the guide: removing RPC method ``Foo`` fails BACKWARD,
  adding ``Baz`` fails FORWARD);
- a field number both use keeps a wire-compatible type: "int32, uint32, int64, uint64, and
  bool are all compatible" (enums too), sint32 with sint64, fixed32 with sfixed32, fixed64
  with sfixed64, string with bytes, bytes with an embedded message; a message-typed field is
  compared with the writer's message type in turn (so ``map<k, v>`` equals a repeated entry
  message with ``key = 1`` and ``value = 2``);
- singular is compatible with repeated, except a packed numeric writer read as singular ("not
  generally safe for numeric types ... serialized in the packed format");
- a field the reader requires (proto2 ``required``) must be required by the writer;
- oneofs: fields of one reader oneof that the writer does not keep in one oneof ("Moving any
  fields into an existing oneof is not safe"; a single field may move into a new oneof);
- ``reused(new, old)``: a field number or name the old version reserves that the new one uses.

Enum values are not compared: an unknown value is kept, not refused, by every reader.
"""

from __future__ import annotations

import functools
import importlib.util
from typing import Any

__all__ = ["definition_problem", "reads", "reused"]

_VARINT = {"int32", "uint32", "int64", "uint64", "bool", "enum"}
_GROUPS = (_VARINT, {"sint32", "sint64"}, {"fixed32", "sfixed32"}, {"fixed64", "sfixed64"})
_COMPATIBLE = [*_GROUPS, {"string", "bytes"}, {"bytes", "message"}]
_NUMERIC = set().union(*_GROUPS) | {"float", "double"}


class _Index:
    """One compiled definition: its messages and services by full name (imports included)."""

    def __init__(self, files: list[Any], main: Any) -> None:
        self.messages: dict[str, Any] = {}
        self.proto3: dict[str, bool] = {}
        self.own: list[str] = []  # the definition's top-level messages (a record's type)
        self.declared: list[str] = []  # all the definition's messages, nested ones too
        self.services: dict[str, Any] = {}
        for file in files:
            prefix = f"{file.package}." if file.package else ""
            self._add(file.message_type, prefix, file.syntax == "proto3", file is main)
            if file is main:
                self.services = {prefix + s.name: s for s in file.service}

    def _add(self, messages: Any, prefix: str, proto3: bool, own: bool) -> None:
        for msg in messages:
            name = prefix + msg.name
            self.messages[name], self.proto3[name] = msg, proto3
            if own:
                self.own.append(name)
            if own or prefix.rstrip(".") in self.declared:
                self.declared.append(name)
            self._add(msg.nested_type, name + ".", proto3, own=False)


def _grpc_tools() -> Any:
    if importlib.util.find_spec("grpc_tools") is None:  # pragma: no cover
        raise ImportError(
            "PROTOBUF schemas in the fake need grpcio-tools: "
            "pip install 'kinesis-trio[gsr-protobuf]'"
        )
    from kinesis_trio.gsr import _protobuf

    return _protobuf


@functools.lru_cache(maxsize=64)
def _index(definition: str) -> _Index:
    protobuf = _grpc_tools()
    files = protobuf.compile_files(definition)
    main = next(f for f in files if f.name == protobuf.PROTO_FILE)
    return _Index(files, main)


def definition_problem(definition: str) -> str | None:
    """Why ``definition`` is not a ``.proto`` file with a message (``None``: it is one)."""
    from kinesis_trio.gsr._types import SchemaError

    try:
        index = _index(definition)
    except SchemaError as exc:
        return str(exc)
    return None if index.own else "no message type found"


def _kind(field: Any) -> str:
    name: str = field.Type.Name(field.type)
    return name.removeprefix("TYPE_").lower()


def _packed(field: Any, proto3: bool) -> bool:
    if field.options.HasField("packed"):
        return bool(field.options.packed)
    return proto3


class _Check:
    def __init__(self, reader: _Index, writer: _Index) -> None:
        self.reader, self.writer = reader, writer
        self.seen: set[tuple[str, str]] = set()
        self.problems: list[str] = []

    def message(self, r_name: str, w_name: str) -> None:
        if (r_name, w_name) in self.seen:
            return
        self.seen.add((r_name, w_name))
        r_msg, w_msg = self.reader.messages[r_name], self.writer.messages[w_name]
        r_fields = {f.number: f for f in r_msg.field}
        w_fields = {f.number: f for f in w_msg.field}
        for number, r_field in r_fields.items():
            w_field = w_fields.get(number)
            if r_field.label == r_field.LABEL_REQUIRED and (
                w_field is None or w_field.label != w_field.LABEL_REQUIRED
            ):
                self.problems.append(f"{r_name}: field {number} is required here, not there")
            if w_field is not None:
                self.field(r_name, r_field, w_field, self.writer.proto3[w_name])
        self.oneofs(r_name, r_msg, w_fields)

    def field(self, at: str, r_field: Any, w_field: Any, w_proto3: bool) -> None:
        number, r_kind, w_kind = r_field.number, _kind(r_field), _kind(w_field)
        if r_kind != w_kind and not any({r_kind, w_kind} <= g for g in _COMPATIBLE):
            self.problems.append(f"{at}: field {number} is {w_kind} there, {r_kind} here")
            return
        r_repeated = r_field.label == r_field.LABEL_REPEATED
        w_repeated = w_field.label == w_field.LABEL_REPEATED
        if w_repeated and not r_repeated and w_kind in _NUMERIC and _packed(w_field, w_proto3):
            self.problems.append(f"{at}: field {number} is packed repeated there, singular here")
        if r_kind == w_kind == "message":
            self.message(r_field.type_name.lstrip("."), w_field.type_name.lstrip("."))

    def oneofs(self, at: str, r_msg: Any, w_fields: dict[int, Any]) -> None:
        for index, decl in enumerate(r_msg.oneof_decl):
            members = [
                f
                for f in r_msg.field
                if f.HasField("oneof_index") and f.oneof_index == index and not f.proto3_optional
            ]
            shared = [w_fields[f.number] for f in members if f.number in w_fields]
            groups = {
                w.oneof_index if w.HasField("oneof_index") and not w.proto3_optional else None
                for w in shared
            }
            if len(shared) > 1 and (len(groups) > 1 or None in groups):
                numbers = sorted(w.number for w in shared)
                self.problems.append(
                    f"{at}: fields {numbers} share oneof {decl.name} here, not there"
                )

    def services(self) -> None:
        for name, w_service in self.writer.services.items():
            r_service = self.reader.services.get(name)
            r_methods = {m.name: m for m in r_service.method} if r_service else {}
            for method in w_service.method:
                r_method = r_methods.get(method.name)
                if r_method is None:
                    self.problems.append(f"{name}: RPC method {method.name} is missing here")
                    continue
                for r_type, w_type in (
                    (r_method.input_type, method.input_type),
                    (r_method.output_type, method.output_type),
                ):
                    self.message(r_type.lstrip("."), w_type.lstrip("."))


def reads(reader: str, writer: str) -> list[str]:
    """What keeps a reader of the ``.proto`` text ``reader`` from reading ``writer``'s data."""
    check = _Check(_index(reader), _index(writer))
    for name in check.writer.own:
        if name not in check.reader.messages:
            check.problems.append(f"{name}: message is missing here")
        else:
            check.message(name, name)
    check.services()
    return check.problems


def reused(new: str, old: str) -> list[str]:
    """Field numbers and names the old version reserves that the new one uses."""
    new_index, old_index = _index(new), _index(old)
    problems: list[str] = []
    for name in new_index.declared:
        old_msg = old_index.messages.get(name)
        if old_msg is None:
            continue
        names = set(old_msg.reserved_name)
        for field in new_index.messages[name].field:
            if any(r.start <= field.number < r.end for r in old_msg.reserved_range):
                problems.append(f"{name}: field {field.number} reuses a reserved number")
            if field.name in names:
                problems.append(f"{name}: field {field.name!r} reuses a reserved name")
    return problems
