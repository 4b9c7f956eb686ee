"""PROTOBUF payloads, as the Java ``ProtobufWireFormatEncoder`` frames them: one varint (the
message's index in its ``.proto`` file), then the message's bytes. The index counts every
message type of the file, nested ones included, sorted by full name (``MessageIndexFinder``).

The schema definition is the ``.proto`` text: the Java reader parses it (Square Wire's
``ProtoParser``). Python's protobuf neither prints nor parses ``.proto`` text, so a writer gives
the text with its message class, and the reader compiles the text with protoc from
grpcio-tools (the ``gsr-protobuf`` extra) into a descriptor pool of its own; a definition may
import the well-known types and ``google/type/*.proto`` (googleapis-common-protos, the same
extra), as the Java reader's base dependencies allow.
"""

from __future__ import annotations

import importlib.resources
import os
import re
import tempfile
from pathlib import Path
from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message, message_factory
from google.protobuf.descriptor import FileDescriptor

from .._varint import varint
from ._optional import require
from ._types import DecodeError, SchemaError, SchemaMismatchError

#: The file name a definition is compiled under (Java uses the schema name plus ``.proto``).
PROTO_FILE = "gsr_schema.proto"


def message_table(file: Any) -> list[Any]:
    """The file's message types, nested ones included, in the Java serde's index order."""
    found: list[Any] = []
    queue = list(file.message_types_by_name.values())
    while queue:
        desc = queue.pop(0)
        found.append(desc)
        queue.extend(desc.nested_types)
    return sorted(found, key=lambda d: d.full_name)


def read_varint(data: bytes) -> tuple[int, int]:
    """The varint at the start of ``data`` (as ``readUInt32``) and the bytes it took."""
    value = 0
    for i, byte in enumerate(data[:10]):
        value |= (byte & 0x7F) << (7 * i)
        if not byte & 0x80:
            return value & 0xFFFFFFFF, i + 1
    raise DecodeError("PROTOBUF payload does not start with a message index (a varint)")


# The Java serializer registers map fields as their entry messages, marked with an option that
# protoc refuses in source ("map_entry should not be set explicitly"): the text is compiled
# without it and the entries marked again in the descriptors.
_MAP_ENTRY = re.compile(r"message\s+(\w+)\s*\{\s*option\s+map_entry\s*=\s*true\s*;")


def _includes(definition: str) -> list[str]:
    """protoc's ``-I`` folders: grpcio-tools' well-known types, and googleapis-common-protos'
    ``google/type/*.proto`` (the Java reader's ``FileDescriptorUtils.baseDependencies()``)."""
    found = [str(importlib.resources.files("grpc_tools") / "_proto")]
    if "google/type/" in definition:
        date_pb2 = require("google.type.date_pb2", "gsr-protobuf")
        found.append(str(Path(str(date_pb2.__file__)).parents[2]))
    return found


def compile_files(definition: str) -> list[descriptor_pb2.FileDescriptorProto]:
    """The ``.proto`` text compiled by protoc: its imports first, the definition last."""
    protoc = require("grpc_tools.protoc", "gsr-protobuf")
    entries = set(_MAP_ENTRY.findall(definition))
    source = _MAP_ENTRY.sub(lambda m: f"message {m.group(1)} {{", definition)
    with tempfile.TemporaryDirectory(prefix="kinesis-trio-gsr-") as tmp:
        with open(os.path.join(tmp, PROTO_FILE), "w", encoding="utf-8") as text:
            text.write(source)
        out = os.path.join(tmp, "set.pb")
        args = ["protoc", f"-I{tmp}", *(f"-I{i}" for i in _includes(definition))]
        args += ["--include_imports", f"--descriptor_set_out={out}", PROTO_FILE]
        if protoc.main(args) != 0:
            raise SchemaError("the .proto definition does not compile (protoc's errors above)")
        with open(out, "rb") as f:
            files = list(descriptor_pb2.FileDescriptorSet.FromString(f.read()).file)
    if entries:
        main = next(f for f in files if f.name == PROTO_FILE)
        _mark_map_entries(main.message_type, entries)
    return files


def compile_definition(definition: str) -> FileDescriptor:
    """The ``.proto`` text compiled by protoc into a descriptor pool of its own."""
    pool = descriptor_pool.DescriptorPool()
    for file_proto in compile_files(definition):  # dependencies first (protoc's order)
        pool.AddSerializedFile(file_proto.SerializeToString())
    return pool.FindFileByName(PROTO_FILE)


def _mark_map_entries(messages: Any, names: set[str]) -> None:
    for msg in messages:
        for nested in msg.nested_type:
            fields = [(f.name, f.number) for f in nested.field]
            if nested.name in names and fields == [("key", 1), ("value", 2)]:
                nested.options.map_entry = True
        _mark_map_entries(msg.nested_type, names)


class ProtobufWriter:
    """One message type written with its ``.proto`` definition."""

    def __init__(self, message_type: type[message.Message]) -> None:
        self.descriptor: Any = message_type.DESCRIPTOR
        table = message_table(self.descriptor.file)
        self._prefix = varint(table.index(self.descriptor))

    def encode(self, obj: object) -> bytes:
        """The index prefix and the message's bytes."""
        if not isinstance(obj, message.Message) or obj.DESCRIPTOR.full_name != (
            self.descriptor.full_name
        ):
            got = obj.DESCRIPTOR.full_name if isinstance(obj, message.Message) else type(obj)
            raise SchemaMismatchError(f"expected a {self.descriptor.full_name} message, got {got}")
        if not obj.IsInitialized():
            missing = ", ".join(getattr(obj, "FindInitializationErrors")())  # noqa: B009
            raise SchemaMismatchError(
                f"{self.descriptor.full_name} is missing required fields: {missing}"
            )
        return self._prefix + obj.SerializeToString()

    def check(self, definition: str) -> None:
        """Refuse a definition whose message table differs from the message class's."""
        ours = [d.full_name for d in message_table(self.descriptor.file)]
        theirs = [d.full_name for d in message_table(compile_definition(definition))]
        if ours != theirs:
            raise SchemaError(
                f"the .proto definition declares messages {theirs}, but "
                f"{self.descriptor.full_name}'s file declares {ours}"
            )


class ProtobufReader:
    """Reads payloads written with one ``.proto`` definition (compiled once); a message whose
    full name is one of ``classes``' is read into that (generated) class instead, whatever
    version of the message it was generated from (protobuf's own evolution rules: unknown
    fields kept, missing ones at their defaults)."""

    def __init__(self, definition: str, classes: tuple[type[message.Message], ...] = ()) -> None:
        table = message_table(compile_definition(definition))
        given = {cls.DESCRIPTOR.full_name: cls for cls in classes}
        self._classes: list[Any] = [
            given.get(d.full_name) or message_factory.GetMessageClass(d) for d in table
        ]

    def encode(self, obj: object) -> bytes:
        """The payload of a message of this definition (the reader can write, too)."""
        if not isinstance(obj, message.Message):
            raise SchemaMismatchError(f"expected a protobuf message, got {type(obj)}")
        for index, cls in enumerate(self._classes):
            if cls.DESCRIPTOR.full_name == obj.DESCRIPTOR.full_name:
                return varint(index) + obj.SerializeToString()
        raise SchemaMismatchError(f"{obj.DESCRIPTOR.full_name} is not in this definition")

    def decode(self, payload: bytes) -> message.Message:
        """The message a payload holds, as a class of this definition's own pool."""
        index, used = read_varint(payload)
        if index >= len(self._classes):
            raise DecodeError(
                f"message index {index}, but the definition has {len(self._classes)} messages"
            )
        try:
            msg: message.Message = self._classes[index].FromString(payload[used:])
        except message.DecodeError as exc:
            raise DecodeError(f"PROTOBUF payload does not parse: {exc}") from None
        return msg
