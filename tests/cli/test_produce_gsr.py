"""``produce --schema``: JSON lines encoded with a schema file (AVRO, JSON, PROTOBUF), in
process against the fake (Kinesis and Glue on one endpoint), and the option errors."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from kinesis_trio import deaggregate
from kinesis_trio.cli import main
from kinesis_trio.cli._commands import _parser
from kinesis_trio.cli._gsr import schema_input
from kinesis_trio.cli._output import _Tracker
from kinesis_trio.cli._produce import _ChunkReader, _Keying, _LineCounts, _read_and_put
from kinesis_trio.gsr import Decoded, Decoder, GlueSchemaRegistry
from kinesis_trio.testing import FakeKinesis
from tests.gsr.conftest import client_of
from tests.support.helpers import CREDS

AVRO = json.dumps(
    {
        "type": "record",
        "name": "Order",
        "fields": [{"name": "id", "type": "long"}, {"name": "user", "type": "string"}],
    }
)
JSON = json.dumps(
    {
        "type": "object",
        "properties": {"id": {"type": "integer"}, "user": {"type": "string"}},
        "required": ["id", "user"],
    }
)
PROTO = """syntax = "proto3";
package shop;
message Order { int64 id = 1; string user = 2; }
message Other { string x = 1; }
"""
SCHEMAS = {
    "AVRO": ("order.avsc", AVRO),
    "JSON": ("order.json", JSON),
    "PROTOBUF": ("o.proto", PROTO),
}


def args_of(tmp_path: Path, fmt: str, *extra: str) -> Any:
    name, text = SCHEMAS[fmt]
    path = tmp_path / name
    path.write_text(text, "utf-8")
    return _parser().parse_args(
        [
            "produce",
            "--stream",
            "s",
            "--schema",
            str(path),
            "--schema-format",
            fmt,
            "--schema-name",
            f"orders-{fmt.lower()}",
            "--key-field",
            "user",
            "--auto-register",
            *extra,
        ]
    )


Read = tuple[list[tuple[str, Decoded]], _Tracker, FakeKinesis]


async def produce_lines(tmp_path: Path, args: Any, lines: list[str]) -> Read:
    """``produce``'s read-and-put loop over ``lines``, against a fresh fake."""
    from kinesis_trio import Producer

    fake = FakeKinesis()
    fake.create_stream("s", shard_count=2)
    schema = schema_input(args)
    assert schema is not None
    args.json = True
    keying = _Keying(args)
    source = tmp_path / "in.jsonl"
    source.write_text("".join(line + "\n" for line in lines), "utf-8")
    fd = os.open(source, os.O_RDONLY)
    tracker = _Tracker(keep_times=False)
    registry = GlueSchemaRegistry(client_of(fake), auto_register=args.auto_register)
    try:
        async with (
            registry,
            Producer(
                "s",
                region_name="us-east-1",
                endpoint_url="http://fake.local",
                credentials=CREDS,
                transport=fake.transport(),
                schema_registry=registry,
            ) as producer,
        ):
            await _read_and_put(
                producer, _ChunkReader(fd), keying, tracker, _LineCounts(), None, schema
            )
            await producer.flush()
        tracker.reap()
        users = [u for r in fake.records("s") for u in deaggregate(r.data, r.partition_key or "")]
        async with GlueSchemaRegistry(client_of(fake)) as reader:
            decoder = Decoder(reader)
            decoded = [(u.partition_key, await decoder.decode(u.data)) for u in users]
    finally:
        os.close(fd)
    return decoded, tracker, fake


@pytest.mark.anyio
@pytest.mark.parametrize("fmt", ["AVRO", "JSON", "PROTOBUF"])
async def test_json_lines_are_written_with_the_schema(tmp_path: Path, fmt: str) -> None:
    args = args_of(tmp_path, fmt, "--compress")
    lines = [json.dumps({"id": i, "user": f"u{i % 3}"}) for i in range(20)]
    lines.insert(5, json.dumps({"id": "five", "user": "u5"}))  # does not match: fails alone
    decoded, tracker, fake = await produce_lines(tmp_path, args, lines)
    assert tracker.failed == 1 and tracker.ok == 20
    assert set(tracker.codes) == {"SchemaMismatch"}
    assert {d.data_format for _, d in decoded} == {fmt}
    assert all(d.compressed for _, d in decoded)
    # protobuf's JSON form writes an int64 as a string, and leaves out a field at its default
    ids = sorted(int(d.jsonable().get("id", 0)) for _, d in decoded)  # type: ignore[attr-defined]
    assert ids == list(range(20))
    assert {key for key, _ in decoded} == {"u0", "u1", "u2"}
    assert len(fake.glue.versions(f"orders-{fmt.lower()}")) == 1


@pytest.mark.anyio
async def test_schema_message_picks_the_protobuf_message(tmp_path: Path) -> None:
    args = args_of(tmp_path, "PROTOBUF", "--schema-message", "Other")
    args.key_field = None
    decoded, tracker, _ = await produce_lines(tmp_path, args, ['{"x": "a"}', '{"id": 1}'])
    assert tracker.ok == 1 and tracker.failed == 1  # "id" is not a field of shop.Other
    ((_, only),) = decoded
    assert only.jsonable() == {"x": "a"}


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--schema-format", "AVRO"], "--schema-format needs --schema FILE"),
        (["--auto-register"], "--auto-register needs --schema FILE"),
        (["--schema", "x.avsc"], "--schema needs --schema-format and --schema-name"),
        (["--schema", "x", "--records"], "--schema cannot be used with --records"),
        (
            ["--schema", "/nonexistent.avsc", "--schema-format", "AVRO", "--schema-name", "n"],
            "cannot read /nonexistent.avsc",
        ),
    ],
)
def test_option_errors_exit_2(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    status = main(["produce", "--stream", "s", "--endpoint-url", "http://127.0.0.1:9", *argv])
    assert status == 2
    assert message in capsys.readouterr().err


def test_a_schema_that_does_not_parse_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = tmp_path / "bad.avsc"
    bad.write_text('{"type": "recordx"}', "utf-8")  # no such type
    argv = ["--schema", str(bad), "--schema-format", "AVRO", "--schema-name", "n"]
    status = main(["produce", "--stream", "s", "--endpoint-url", "http://127.0.0.1:9", *argv])
    assert status == 2
    assert f"--schema {bad}" in capsys.readouterr().err
