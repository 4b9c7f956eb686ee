"""Glue Schema Registry test helpers: an in-memory registry double and the compatibility
vectors' cases (``tests/compat/gsr``).

``python -m tests.support.gsr write OUT`` writes our records of every case as JSON lines
(``tests/compat/gsr/regenerate.sh`` runs it).
"""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

from google.protobuf import json_format, message, message_factory

from kinesis_trio.gsr import (
    AvroSchema,
    JsonSchema,
    ProtobufSchema,
    RegisteredSchema,
    Schema,
    SchemaNotFoundError,
    SchemaSpec,
    encode,
)
from kinesis_trio.gsr._protobuf import compile_definition
from kinesis_trio.gsr._types import DataFormat

GSR_DIR = Path(__file__).resolve().parents[1] / "compat" / "gsr"
VECTORS = GSR_DIR / "vectors"


class InMemorySchemaRegistry:
    """A ``SchemaRegistry`` test double: versions in dicts, no I/O, every call counted.

    A definition gets one version id per (registry, schema name, definition); ``add``
    stores a version written elsewhere (a vector's id).
    """

    def __init__(self) -> None:
        self.calls: Counter[str] = Counter()
        self._ids: dict[tuple[str, str, str], uuid.UUID] = {}
        self._schemas: dict[uuid.UUID, RegisteredSchema] = {}

    def add(self, version_id: uuid.UUID, data_format: DataFormat, definition: str) -> None:
        self._schemas[version_id] = RegisteredSchema(version_id, data_format, definition)

    def cached_version(self, spec: SchemaSpec) -> uuid.UUID | None:
        self.calls["cached_version"] += 1
        return self._ids.get((spec.registry, spec.name, spec.definition))

    async def version_for(self, spec: SchemaSpec) -> uuid.UUID:
        self.calls["version_for"] += 1
        key = (spec.registry, spec.name, spec.definition)
        if key not in self._ids:
            self._ids[key] = uuid.uuid4()
            self.add(self._ids[key], spec.data_format, spec.definition)
        return self._ids[key]

    async def schema_of(self, version_id: uuid.UUID) -> RegisteredSchema:
        self.calls["schema_of"] += 1
        try:
            return self._schemas[version_id]
        except KeyError:
            raise SchemaNotFoundError(
                f"Schema version is not found: {version_id}", code="EntityNotFoundException"
            ) from None


def load_cases() -> list[dict[str, Any]]:
    cases: list[dict[str, Any]] = json.loads((GSR_DIR / "cases.json").read_text("utf-8"))
    return cases


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text("utf-8").splitlines() if line.strip()]


def message_class(definition: str, full_name: str) -> type[message.Message]:
    """The generated-like class of ``full_name`` in a ``.proto`` text (compiled by protoc)."""
    file = compile_definition(definition)
    package = f"{file.package}." if file.package else ""
    path = full_name.removeprefix(package).split(".")
    desc = file.message_types_by_name[path[0]]
    for name in path[1:]:
        desc = desc.nested_types_by_name[name]
    cls: type[message.Message] = message_factory.GetMessageClass(desc)
    return cls


def case_schema(case: dict[str, Any]) -> Schema:
    name, definition = case["schema_name"], case["definition"]
    if case["format"] == "AVRO":
        return AvroSchema(name, definition)
    if case["format"] == "JSON":
        return JsonSchema(name, definition)
    return ProtobufSchema(name, message_class(definition, case["message"]), definition)


def case_value(case: dict[str, Any], definition: str | None = None) -> object:
    """The case's object: its JSON value, or a message parsed from it (PROTOBUF)."""
    if case["format"] != "PROTOBUF":
        return case["value"]
    cls = message_class(definition or case["definition"], case["message"])
    return json_format.ParseDict(case["value"], cls())


def python_vectors() -> list[dict[str, Any]]:
    """Every case written by us, uncompressed and with zlib (version ids fixed by name)."""
    out: list[dict[str, Any]] = []
    for case in load_cases():
        schema = case_schema(case)
        for compression in ("NONE", "ZLIB"):
            version_id = uuid.uuid5(uuid.NAMESPACE_URL, f"python-{len(out) + 1}")
            record = encode(schema, case_value(case), version_id, compress=compression == "ZLIB")
            out.append(
                {
                    "format": case["format"],
                    "compression": compression,
                    "schema_name": case["schema_name"],
                    "version_id": str(version_id),
                    "definition": case["definition"],
                    **({"message": case["message"]} if "message" in case else {}),
                    "value": case["value"],
                    "record_hex": record.hex(),
                }
            )
    return out


def write_jsonl(rows: list[dict[str, Any]], path: Path) -> None:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), "utf-8")


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] != "write":
        sys.exit("usage: python -m tests.support.gsr write OUT")
    write_jsonl(python_vectors(), Path(sys.argv[2]))


def read_with_java(rows: list[dict[str, Any]], tmp_path: Path) -> list[dict[str, Any]]:
    """What the AWS Java serde (``tests/compat/gsr-java``, ``read``) makes of ``rows``'
    records; asserts the Maven run succeeded."""
    write_jsonl(rows, tmp_path / "ours.jsonl")
    out = subprocess.run(
        [
            "mvn",
            "-q",
            "-B",
            "compile",
            "exec:java",
            f"-Dexec.args=read {tmp_path / 'ours.jsonl'} {tmp_path / 'read.jsonl'}",
        ],
        cwd=GSR_DIR.parent / "gsr-java",
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    return read_jsonl(tmp_path / "read.jsonl")
