"""Compatibility with the AWS Java serde (``software.amazon.glue:schema-registry-serde``
1.1.24): the committed vectors (``gsr/regenerate.sh``) everywhere, and the Java program on
records written now where Java and Maven are present."""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import json_format, message

from kinesis_trio.gsr import Decoder, encode
from kinesis_trio.gsr._wire import decode_frame
from tests.support.gsr import (
    VECTORS,
    InMemorySchemaRegistry,
    case_schema,
    case_value,
    load_cases,
    message_class,
    python_vectors,
    read_jsonl,
    read_with_java,
)


def as_plain(value: object) -> object:
    if isinstance(value, message.Message):
        return json_format.MessageToDict(value, preserving_proto_field_name=True)
    return value


def expected(row: dict[str, Any], definition: str | None = None) -> object:
    return as_plain(case_value(row, definition))


@pytest.mark.anyio
async def test_records_the_java_serde_wrote_decode_with_ours() -> None:
    rows = read_jsonl(VECTORS / "java-written.jsonl")
    assert {(r["format"], r["compression"]) for r in rows} == {
        (f, c) for f in ("AVRO", "JSON", "PROTOBUF") for c in ("NONE", "ZLIB")
    }
    registry = InMemorySchemaRegistry()
    for row in rows:
        registry.add(uuid.UUID(row["version_id"]), row["format"], row["definition"])
    decoder = Decoder(registry)
    for row in rows:
        decoded = await decoder.decode(bytes.fromhex(row["record_hex"]))
        assert decoded.version_id == uuid.UUID(row["version_id"])
        assert decoded.compressed == (row["compression"] == "ZLIB")
        # PROTOBUF: the Java serializer registers its own .proto text (map fields as entries).
        assert as_plain(decoded.value) == expected(row, row["definition"])


def test_we_write_the_bytes_the_java_serde_writes() -> None:
    """Same version id, same object: the same record (zlib too: both use zlib's level 6)."""
    cases = {(c["format"], c.get("message")): c for c in load_cases()}
    for row in read_jsonl(VECTORS / "java-written.jsonl"):
        case = cases[row["format"], row.get("message")]
        ours = encode(
            case_schema(case),
            case_value(case),
            uuid.UUID(row["version_id"]),
            compress=row["compression"] == "ZLIB",
        )
        theirs = bytes.fromhex(row["record_hex"])
        assert ours[:18] == theirs[:18]
        assert decode_frame(ours).payload == decode_frame(theirs).payload


def test_the_committed_records_of_ours_are_what_we_write_now() -> None:
    now = python_vectors()
    committed = read_jsonl(VECTORS / "python-written.jsonl")
    assert [r["record_hex"] for r in now] == [r["record_hex"] for r in committed]


def check_java_read(written: list[dict[str, Any]], read: list[dict[str, Any]]) -> None:
    assert len(read) == len(written) == 2 * len(load_cases())
    for ours, java in zip(written, read, strict=True):
        assert java["version_id"] == ours["version_id"]
        if ours["format"] == "PROTOBUF":
            assert java["message"] == ours["message"]
            cls = message_class(ours["definition"], ours["message"])
            assert as_plain(cls.FromString(bytes.fromhex(java["message_hex"]))) == expected(ours)
        else:
            assert java["value"] == ours["value"]


def test_records_we_wrote_decode_with_the_java_serde_committed() -> None:
    check_java_read(
        read_jsonl(VECTORS / "python-written.jsonl"), read_jsonl(VECTORS / "java-read.jsonl")
    )


@pytest.mark.integration
@pytest.mark.subprocess
@pytest.mark.skipif(
    not (shutil.which("java") and shutil.which("mvn")), reason="needs Java 17+ and Maven"
)
def test_records_we_write_now_decode_with_the_java_serde(tmp_path: Path) -> None:
    written = python_vectors()
    check_java_read(written, read_with_java(written, tmp_path))
