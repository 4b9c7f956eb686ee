"""``tail --decode gsr`` in process against the fake: each user record (aggregated or not)
decoded with its writer schema, fetched once per version; what is not a GSR record, or a
version the registry lacks, gets a line with its error."""

from __future__ import annotations

import io
import json
import uuid
from typing import Any

import pytest

from kinesis_trio import Producer
from kinesis_trio.cli._tail import TailOptions, tail
from kinesis_trio.gsr import AvroSchema, Decoder, GlueSchemaRegistry, JsonSchema, encode
from kinesis_trio.testing import FakeKinesis
from tests.gsr.conftest import AVRO_V1, client_of
from tests.support.helpers import CREDS, connect

pytestmark = [pytest.mark.anyio, pytest.mark.virtual_time]

ORDER = AvroSchema("orders", AVRO_V1)
NOTE = JsonSchema("notes", '{"type": "string"}', compress=True)


async def decoded_tail(fake: FakeKinesis, decoder: Decoder) -> list[dict[str, Any]]:
    out, err = io.BytesIO(), io.StringIO()
    async with connect(fake) as client:
        await tail(client, TailOptions(stream="s", idle_interval=0.2), out, err, decoder)
    return [json.loads(line) for line in out.getvalue().splitlines()]


async def test_records_are_printed_decoded_as_json_lines() -> None:
    fake = FakeKinesis()
    fake.create_stream("s", shard_count=2)
    registry = GlueSchemaRegistry(client_of(fake), auto_register=True)
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
        for i in range(30):
            await producer.put_object({"id": i}, f"k{i}", schema=ORDER)
        await producer.put_object("é and more", "note", schema=NOTE)
        await producer.put(b"not a GSR record", "plain")
        unknown = encode(NOTE, "x", uuid.uuid4())  # a version id no registry has
        await producer.put(unknown, "unknown")
    async with GlueSchemaRegistry(client_of(fake)) as reader:
        fake.calls.clear()
        rows = await decoded_tail(fake, Decoder(reader))
    assert len(rows) == 33
    avro = [r for r in rows if r.get("data_format") == "AVRO"]
    assert sorted(r["value"]["id"] for r in avro) == list(range(30))
    assert {r["schema_version_id"] for r in avro} == {str(registry.cached_version(ORDER.spec))}
    assert all(r["sub_sequence_number"] is not None for r in avro)  # aggregated
    (note,) = [r for r in rows if r.get("data_format") == "JSON"]
    assert note["value"] == "é and more" and note["compressed"] is True
    errors = {r["partition_key"]: r["error"] for r in rows if "error" in r}
    assert errors.keys() == {"plain", "unknown"}
    assert errors["plain"].startswith("DecodeError")
    assert errors["unknown"].startswith("SchemaNotFoundError")
    # each writer schema was fetched once (the unknown id too: once, refused)
    assert fake.calls.count("GetSchemaVersion") == 3


async def test_the_secondary_deserializer_reads_records_without_the_header() -> None:
    fake = FakeKinesis()
    fake.create_stream("s", shard_count=1)
    async with GlueSchemaRegistry(client_of(fake), auto_register=True) as registry:
        async with Producer(
            "s",
            region_name="us-east-1",
            endpoint_url="http://fake.local",
            credentials=CREDS,
            transport=fake.transport(),
            schema_registry=registry,
        ) as producer:
            await producer.put_object({"id": 1}, "gsr", schema=ORDER)
            await producer.put("plain text é".encode(), "plain")
            await producer.put(b"\xff\xfe", "binary")
        rows = await decoded_tail(
            fake, Decoder(registry, secondary_deserializer=lambda data: data.decode("utf-8"))
        )
    by_key = {r["partition_key"]: r for r in rows}
    assert by_key["gsr"]["value"] == {"id": 1} and "secondary" not in by_key["gsr"]
    plain = by_key["plain"]
    assert plain["secondary"] is True and plain["value"] == "plain text é"
    assert plain["schema_version_id"] is None and plain["data_format"] is None
    assert by_key["binary"]["error"].startswith(
        "DecodeError: not a GSR record, and the secondary deserializer failed: UnicodeDecodeError"
    )
