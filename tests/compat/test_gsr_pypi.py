"""Compatibility with the PyPI ``aws-glue-schema-registry`` 1.1.3 (AVRO and JSON; it has no
PROTOBUF): records we write decode with its ``KafkaDeserializer``, records its
``KafkaSerializer`` (and its codec, with zlib) writes decode with ours. Its registry client
is duck-typed: a stub with the two methods its serde calls stands in for Glue."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from aws_schema_registry import DataAndSchema, KafkaDeserializer, KafkaSerializer
from aws_schema_registry import codec as their_codec
from aws_schema_registry.avro import AvroSchema as TheirAvro
from aws_schema_registry.jsonschema import JsonSchema as TheirJson
from aws_schema_registry.schema import SchemaVersion

from kinesis_trio.gsr import Decoder, encode
from tests.support.gsr import InMemorySchemaRegistry, case_schema, load_cases

CASES = [c for c in load_cases() if c["format"] in ("AVRO", "JSON")]


class StubGlueClient:
    """What ``KafkaSerializer``/``KafkaDeserializer`` call on their ``SchemaRegistryClient``."""

    def __init__(self) -> None:
        self.versions: dict[uuid.UUID, SchemaVersion] = {}

    def add(self, version_id: uuid.UUID, name: str, definition: str, data_format: str) -> None:
        self.versions[version_id] = SchemaVersion(
            name, version_id, definition, data_format, "AVAILABLE"
        )

    def get_or_register_schema_version(
        self, definition: str, schema_name: str, data_format: str, **_: Any
    ) -> SchemaVersion:
        version_id = uuid.uuid5(uuid.NAMESPACE_URL, schema_name + definition)
        self.add(version_id, schema_name, definition, data_format)
        return self.versions[version_id]

    def get_schema_version(self, version_id: uuid.UUID) -> SchemaVersion:
        return self.versions[version_id]


def their_schema(case: dict[str, Any]) -> TheirAvro | TheirJson:
    cls = TheirAvro if case["format"] == "AVRO" else TheirJson
    return cls(case["definition"])


@pytest.mark.parametrize("case", CASES, ids=[c["format"] for c in CASES])
@pytest.mark.parametrize("compress", [False, True], ids=["none", "zlib"])
def test_records_we_write_decode_with_the_pypi_library(
    case: dict[str, Any], compress: bool
) -> None:
    client, vid = StubGlueClient(), uuid.uuid4()
    client.add(vid, case["schema_name"], case["definition"], case["format"])
    record = encode(case_schema(case), case["value"], vid, compress=compress)
    decoded = KafkaDeserializer(client).deserialize("stream", record)
    assert decoded.data == case["value"]


@pytest.mark.anyio
@pytest.mark.parametrize("case", CASES, ids=[c["format"] for c in CASES])
async def test_records_the_pypi_library_writes_decode_with_ours(case: dict[str, Any]) -> None:
    client = StubGlueClient()
    record = KafkaSerializer(client).serialize(
        "stream", DataAndSchema(case["value"], their_schema(case))
    )
    vid = uuid.UUID(bytes=record[2:18])
    zipped = their_codec.encode(their_schema(case).write(case["value"]), vid, compression=True)
    registry = InMemorySchemaRegistry()
    registry.add(vid, case["format"], client.versions[vid].definition)
    decoder = Decoder(registry)
    for data, compressed in ((record, False), (zipped, True)):
        decoded = await decoder.decode(data)
        assert (decoded.version_id, decoded.compressed) == (vid, compressed)
        assert decoded.value == case["value"]
