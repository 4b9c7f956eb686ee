"""The Java serde's registry options: the compatibility, description and tags CreateSchema
sends when auto-registration creates a schema, and the schema's name made by a naming
(the stream's, the record type's, both), on the fake, the local engine and a producer."""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping
from typing import Any

import pytest

from kinesis_trio import Producer, SyncProducer, deaggregate
from kinesis_trio._aws._glue import GlueClient
from kinesis_trio._shell._schema_puts import SchemaNotCached
from kinesis_trio.gsr import (
    BY_RECORD_TYPE,
    BY_STREAM,
    BY_STREAM_AND_RECORD_TYPE,
    AvroSchema,
    Decoder,
    GlueSchemaRegistry,
    JsonSchema,
    ProtobufSchema,
    SchemaError,
    SchemaNaming,
)
from kinesis_trio.gsr._types import SchemaSpec
from kinesis_trio.testing import FakeKinesis
from tests.gsr.conftest import AVRO_V1, CREDS
from tests.support.emulators import EmulatorEndpoint

SHOP_ORDER = (
    '{"type":"record","name":"Order","namespace":"shop","fields":[{"name":"id","type":"int"}]}'
)
TITLED = json.dumps({"title": "Event", "type": "object"})


class RecordingGlue(GlueClient):
    """A Glue client that keeps each request's operation and body."""

    def __init__(self, **options: Any) -> None:
        super().__init__(region_name="us-east-1", credentials=CREDS, **options)
        self.sent: list[tuple[str, dict[str, Any]]] = []

    async def call(self, operation: str, body: Mapping[str, Any]) -> dict[str, Any]:
        self.sent.append((operation, dict(body)))
        return await super().call(operation, body)

    def bodies(self, operation: str) -> list[dict[str, Any]]:
        return [b for op, b in self.sent if op == operation]


def recording(fake: FakeKinesis) -> RecordingGlue:
    return RecordingGlue(endpoint_url="http://fake", transport=fake.transport())


# -- compatibility, description, tags --------------------------------------------------------


@pytest.mark.anyio
async def test_create_schema_sends_the_registrys_settings(fake: FakeKinesis) -> None:
    glue = recording(fake)
    registry = GlueSchemaRegistry(
        glue, auto_register=True, compatibility="FULL", description="orders", tags={"team": "a"}
    )
    async with registry:
        await registry.version_for(SchemaSpec("orders", AVRO_V1, "AVRO"))
        (body,) = glue.bodies("CreateSchema")
        assert body["Compatibility"] == "FULL"
        assert body["Description"] == "orders"
        assert body["Tags"] == {"team": "a"}
        shown = await glue.call(
            "GetSchema", {"SchemaId": {"RegistryName": "default-registry", "SchemaName": "orders"}}
        )
        assert (shown["Compatibility"], shown["Description"]) == ("FULL", "orders")


@pytest.mark.anyio
async def test_a_schemas_own_settings_win_and_tags_add_up(fake: FakeKinesis) -> None:
    glue = recording(fake)
    registry = GlueSchemaRegistry(
        glue, auto_register=True, compatibility="FULL", description="all", tags={"team": "a"}
    )
    schema = AvroSchema(
        "orders",
        AVRO_V1,
        compatibility="NONE",
        description="just orders",
        tags={"team": "b", "env": "dev"},
    )
    async with registry:
        await registry.version_for(schema.spec)
    (body,) = glue.bodies("CreateSchema")
    assert body["Compatibility"] == "NONE"
    assert body["Description"] == "just orders"
    assert body["Tags"] == {"team": "b", "env": "dev"}


@pytest.mark.anyio
async def test_by_default_backward_and_neither_description_nor_tags(fake: FakeKinesis) -> None:
    glue = recording(fake)
    async with GlueSchemaRegistry(glue, auto_register=True) as registry:
        await registry.version_for(SchemaSpec("orders", AVRO_V1, "AVRO"))
    (body,) = glue.bodies("CreateSchema")
    assert body["Compatibility"] == "BACKWARD"
    assert "Description" not in body and "Tags" not in body


@pytest.mark.anyio
async def test_the_local_engine_keeps_them(python_engine: EmulatorEndpoint) -> None:
    name = f"orders-{uuid.uuid4().hex[:10]}"
    glue = RecordingGlue(endpoint_url=python_engine.endpoint_url)
    registry = GlueSchemaRegistry(
        glue, auto_register=True, poll_interval=0.01, description="kept", tags={"k": "v"}
    )
    async with registry:
        await registry.version_for(AvroSchema(name, AVRO_V1, compatibility="FORWARD").spec)
        shown = await glue.call(
            "GetSchema", {"SchemaId": {"RegistryName": "default-registry", "SchemaName": name}}
        )
        assert (shown["Compatibility"], shown["Description"]) == ("FORWARD", "kept")
        created = await glue.create_schema(
            "default-registry", name + "-2", "AVRO", AVRO_V1, tags={"a": "1"}
        )
        assert created["Tags"] == {"a": "1"}


@pytest.mark.parametrize(
    "options",
    [
        {"compatibility": "SOMETIMES"},
        {"description": "no\x00nul"},
        {"description": "x" * 2049},
        {"tags": {"": "empty key"}},
        {"tags": {"k" * 129: "v"}},
        {"tags": {"k": "v" * 257}},
        {"tags": {f"k{i}": "v" for i in range(51)}},
    ],
)
def test_bad_settings_are_refused_at_once(options: dict[str, Any]) -> None:
    with pytest.raises(SchemaError):
        AvroSchema("orders", AVRO_V1, **options)
    with pytest.raises(SchemaError):
        GlueSchemaRegistry(RecordingGlue(endpoint_url="http://fake"), **options)


def test_settings_at_their_limits_are_taken() -> None:
    tags = {f"{i:0>128}": "v" * 256 for i in range(50)}
    schema = AvroSchema("orders", AVRO_V1, description="é\t\n" + "x" * 2045, tags=tags)
    assert schema.spec.tags == tags
    assert schema.spec == SchemaSpec("orders", AVRO_V1, "AVRO")  # they name no other schema


# -- naming ----------------------------------------------------------------------------------


def test_naming_by_record_type() -> None:
    from google.protobuf import timestamp_pb2

    assert AvroSchema(BY_RECORD_TYPE, SHOP_ORDER).spec.name == "shop.Order"
    assert AvroSchema(BY_RECORD_TYPE, AVRO_V1).spec.name == "Order"
    assert JsonSchema(BY_RECORD_TYPE, TITLED).spec.name == "Event"
    stamp = ProtobufSchema(BY_RECORD_TYPE, timestamp_pb2.Timestamp)
    assert stamp.spec.name == "google.protobuf.Timestamp"


def test_naming_by_stream_is_known_per_stream() -> None:
    schema = AvroSchema(BY_STREAM, AVRO_V1)
    assert schema.needs_stream
    with pytest.raises(SchemaError, match="spec_for"):
        _ = schema.spec
    assert schema.spec_for("orders").name == "orders"
    assert schema.spec_for("orders") is schema.spec_for("orders")
    both = AvroSchema(BY_STREAM_AND_RECORD_TYPE, SHOP_ORDER)
    assert both.spec_for("s").name == "s-shop.Order"
    assert SchemaNaming("{record_type}.v1").name("Order") == "Order.v1"


@pytest.mark.parametrize(
    "make",
    [
        lambda: SchemaNaming("{topic}"),
        lambda: SchemaNaming("fixed"),
        lambda: JsonSchema(BY_RECORD_TYPE, '{"type": "object"}'),  # no title
        lambda: JsonSchema(BY_RECORD_TYPE, json.dumps({"title": "An Event"})),  # a space
        lambda: AvroSchema(BY_RECORD_TYPE, '{"type": "array", "items": "int"}'),  # no name
    ],
)
def test_a_naming_that_cannot_name_is_refused_at_once(make: Any) -> None:
    with pytest.raises(SchemaError):
        make()


def new_fake() -> FakeKinesis:
    fake = FakeKinesis()
    fake.create_stream("alpha", shard_count=1)
    fake.create_stream("beta", shard_count=1)
    return fake


@pytest.mark.anyio
async def test_a_producer_names_schemas_by_the_stream_put_to() -> None:
    fake = new_fake()
    registry = GlueSchemaRegistry(recording(fake), auto_register=True)
    schema = AvroSchema(BY_STREAM, AVRO_V1)
    producer = Producer(
        "alpha",
        region_name="us-east-1",
        endpoint_url="http://fake.local",
        credentials=CREDS,
        transport=fake.transport(),
        schema_registry=registry,
    )
    async with registry, producer:
        with pytest.raises(SchemaNotCached):
            producer.put_object_nowait({"id": 0}, "k", schema=schema)
        a = await producer.put_object({"id": 1}, "k", schema=schema)
        b = await producer.put_object(
            {"id": 2}, "k", schema=schema, stream_arn=fake.stream_arn("beta")
        )
        c = producer.put_object_nowait(
            {"id": 3}, "k", schema=schema, stream_arn=fake.stream_arn("beta")
        )
        await producer.flush()
        assert all([(await o.wait()).ok for o in (a, b, c)])
        decoder = Decoder(registry)
        for stream, values in (("alpha", [{"id": 1}]), ("beta", [{"id": 2}, {"id": 3}])):
            (version,) = fake.glue.versions(stream)  # one schema a stream, named after it
            records = [
                u.data
                for r in fake.records(stream)
                for u in deaggregate(r.data, r.partition_key or "")
            ]
            decoded = [await decoder.decode(data) for data in records]
            assert [d.value for d in decoded] == values
            assert {str(d.version_id) for d in decoded} == {version.version_id}


@pytest.mark.anyio
async def test_put_objects_names_a_schema_by_the_stream_put_to() -> None:
    fake = new_fake()
    registry = GlueSchemaRegistry(recording(fake), auto_register=True)
    schema = AvroSchema(BY_STREAM, AVRO_V1)
    producer = Producer(
        "alpha",
        region_name="us-east-1",
        endpoint_url="http://fake.local",
        credentials=CREDS,
        transport=fake.transport(),
        schema_registry=registry,
    )
    async with registry, producer:
        outcomes = await producer.put_objects(
            [({"id": 1}, "k"), ({"id": 2}, "k")], schema=schema, stream_name="beta"
        )
        await producer.flush()
        assert all([(await o.wait()).ok for o in outcomes])
        (version,) = fake.glue.versions("beta")  # named after the stream put to
        assert fake.glue.versions("alpha") == []
        decoder = Decoder(registry)
        records = [
            u.data for r in fake.records("beta") for u in deaggregate(r.data, r.partition_key or "")
        ]
        decoded = [await decoder.decode(data) for data in records]
        assert [d.value for d in decoded] == [{"id": 1}, {"id": 2}]
        assert {str(d.version_id) for d in decoded} == {version.version_id}


def test_a_sync_producer_names_schemas_by_its_default_stream() -> None:
    fake = new_fake()
    glue = recording(fake)
    registry = GlueSchemaRegistry(glue, auto_register=True)
    schema = AvroSchema(BY_STREAM, AVRO_V1)
    with SyncProducer(
        "beta",
        region_name="us-east-1",
        endpoint_url="http://fake.local",
        credentials=CREDS,
        transport=fake.transport(),
        schema_registry=registry,
    ) as producer:
        assert producer.put_object({"id": 1}, "k", schema=schema).result(timeout=30).ok
    assert [b["SchemaName"] for b in glue.bodies("CreateSchema")] == ["beta"]
