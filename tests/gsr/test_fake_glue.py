"""The fake's Glue schema registry through the Glue client: shapes, errors and messages."""

from __future__ import annotations

import json
import sqlite3
import uuid
from pathlib import Path

import pytest

from kinesis_trio.gsr._types import SchemaNotFoundError, SchemaRegistryError
from kinesis_trio.testing import FakeKinesis
from kinesis_trio.testing._glue import FakeGlue
from kinesis_trio.testing._persist import StateStore
from tests.gsr.conftest import AVRO_BAD, AVRO_V1, AVRO_V2, client_of

pytestmark = pytest.mark.anyio


async def test_registries(fake: FakeKinesis) -> None:
    async with client_of(fake) as glue:
        await glue.create_registry("team", description="ours")
        found = await glue.get_registry("team")
        assert found["RegistryArn"] == "arn:aws:glue:us-east-1:123456789012:registry/team"
        assert found["Status"] == "AVAILABLE" and found["Description"] == "ours"
        with pytest.raises(SchemaRegistryError, match="Registry already exists") as caught:
            await glue.create_registry("team")
        assert caught.value.code == "AlreadyExistsException"
        with pytest.raises(SchemaNotFoundError, match=r"Registry is not found\. RegistryName: x"):
            await glue.get_registry("x")
        with pytest.raises(SchemaNotFoundError, match="Registry is not found"):
            await glue.create_schema("x", "s", "AVRO", AVRO_V1)


async def test_a_schema_and_its_versions(fake: FakeKinesis) -> None:
    async with client_of(fake) as glue:
        created = await glue.create_schema(
            "default-registry", "orders", "AVRO", AVRO_V1, compatibility="FULL"
        )
        assert created["SchemaVersionStatus"] == "AVAILABLE"
        assert created["Compatibility"] == "FULL" and created["LatestSchemaVersion"] == 1
        assert "default-registry" in fake.glue.registries  # made on first use, as moto does
        with pytest.raises(SchemaRegistryError, match="Schema already exists") as caught:
            await glue.create_schema("default-registry", "orders", "AVRO", AVRO_V1)
        assert caught.value.code == "AlreadyExistsException"
        second = await glue.register_schema_version("default-registry", "orders", AVRO_V2)
        assert second["VersionNumber"] == 2 and second["Status"] == "AVAILABLE"
        # the same definition again (spaces aside): the same version
        again = await glue.register_schema_version(
            "default-registry", "orders", AVRO_V2.replace(",", ", ")
        )
        assert again["SchemaVersionId"] == second["SchemaVersionId"]
        bad = await glue.register_schema_version("default-registry", "orders", AVRO_BAD)
        assert bad["Status"] == "FAILURE" and bad["VersionNumber"] == 3
        found = await glue.get_schema_version(second["SchemaVersionId"])
        assert found["SchemaDefinition"] == AVRO_V2 and found["DataFormat"] == "AVRO"
        by_definition = await glue.get_schema_by_definition("default-registry", "orders", AVRO_V1)
        assert by_definition["SchemaVersionId"] == created["SchemaVersionId"]
        latest = await glue.call(
            "GetSchemaVersion",
            {
                "SchemaId": {"RegistryName": "default-registry", "SchemaName": "orders"},
                "SchemaVersionNumber": {"LatestVersion": True},
            },
        )
        assert latest["VersionNumber"] == 3


async def test_the_messages_the_java_client_branches_on(fake: FakeKinesis) -> None:
    async with client_of(fake) as glue:
        with pytest.raises(SchemaNotFoundError) as no_schema:
            await glue.get_schema_by_definition("default-registry", "orders", AVRO_V1)
        await glue.create_schema("default-registry", "orders", "AVRO", AVRO_V1)
        with pytest.raises(SchemaNotFoundError) as no_version:
            await glue.get_schema_by_definition("default-registry", "orders", AVRO_V2)
        with pytest.raises(SchemaNotFoundError) as no_id:
            await glue.get_schema_version(str(uuid.UUID(int=1)))
    assert "Schema is not found. RegistryName: default-registry, SchemaName: orders" in str(
        no_schema.value
    )
    assert "Schema version is not found. RegistryName: default-registry" in str(no_version.value)
    assert "Schema version is not found. SchemaVersionId: 00000000-" in str(no_id.value)
    assert {no_schema.value.code, no_version.value.code} == {"EntityNotFoundException"}


@pytest.mark.parametrize(
    ("data_format", "definition"),
    [
        ("AVRO", '{"type": "record", "name": "r"}'),  # a record without fields
        ("JSON", "[1, 2]"),
        ("JSON", "{not json"),
        ("PROTOBUF", "syntax = 'proto3';"),
    ],
)
async def test_invalid_definitions_are_refused(
    fake: FakeKinesis, data_format: str, definition: str
) -> None:
    async with client_of(fake) as glue:
        with pytest.raises(SchemaRegistryError, match="data format is invalid") as caught:
            await glue.create_schema("default-registry", "s", data_format, definition)
    assert caught.value.code == "InvalidInputException"


async def test_bad_settings_are_refused(fake: FakeKinesis) -> None:
    async with client_of(fake) as glue:
        with pytest.raises(SchemaRegistryError, match=r"Data format is not valid\."):
            await glue.create_schema("default-registry", "s", "XML", "<a/>")
        with pytest.raises(SchemaRegistryError, match=r"Compatibility is not valid\."):
            await glue.create_schema("default-registry", "s", "AVRO", AVRO_V1, compatibility="X")


async def test_metadata(fake: FakeKinesis) -> None:
    async with client_of(fake) as glue:
        created = await glue.create_schema("default-registry", "orders", "AVRO", AVRO_V1)
        version = created["SchemaVersionId"]
        await glue.put_schema_version_metadata(version, "team", "payments")
        with pytest.raises(SchemaRegistryError, match="Resource already exist") as caught:
            await glue.put_schema_version_metadata(version, "team", "payments")
        assert caught.value.code == "AlreadyExistsException"
        for n in range(9):
            await glue.put_schema_version_metadata(version, "k", f"v{n}")
        with pytest.raises(SchemaRegistryError, match="limits for Schema Version Metadata") as full:
            await glue.put_schema_version_metadata(version, "k", "more")
        assert full.value.code == "ResourceNumberLimitExceededException"
        queried = await glue.call("QuerySchemaVersionMetadata", {"SchemaVersionId": version})
    assert queried["MetadataInfoMap"]["team"]["MetadataValue"] == "payments"
    assert fake.glue.versions("orders")[0].metadata["k"] == [f"v{n}" for n in range(9)]


async def test_kinesis_and_glue_share_the_endpoint(fake: FakeKinesis) -> None:
    fake.create_stream("orders")
    async with client_of(fake) as glue:
        await glue.create_schema("default-registry", "orders", "JSON", '{"type": "object"}')
        with pytest.raises(SchemaRegistryError) as caught:
            await glue.call("DescribeStreamSummary", {"StreamName": "orders"})
    assert caught.value.code == "UnknownOperationException"
    assert fake.calls == ["CreateSchema", "DescribeStreamSummary"]


async def test_the_registry_is_kept_with_the_engines_state(
    fake: FakeKinesis, tmp_path: Path
) -> None:
    """``kinesis-trio local --data DIR`` keeps the registry with the streams (``meta``)."""
    fake.create_stream("orders")
    store = StateStore(tmp_path / "state.sqlite")
    assert store.save(fake) is True
    assert "glue" not in store.meta  # no registry yet: nothing written for it
    async with client_of(fake) as glue:
        created = await glue.create_schema("default-registry", "orders", "AVRO", AVRO_V1)
        await glue.register_schema_version("default-registry", "orders", AVRO_BAD)
        await glue.put_schema_version_metadata(created["SchemaVersionId"], "k", "v")
    assert store.save(fake) is True
    assert store.save(fake) is False  # nothing changed since
    store.close()
    loaded = FakeKinesis()
    store = StateStore(tmp_path / "state.sqlite")
    assert store.load(loaded) is True
    assert store.save(loaded) is False
    store.close()
    assert loaded.glue.versions("orders") == fake.glue.versions("orders")
    assert loaded.glue.registries == fake.glue.registries
    async with client_of(loaded) as glue:
        again = await glue.register_schema_version("default-registry", "orders", AVRO_V2)
    assert again["VersionNumber"] == 3


def test_a_damaged_registry_state_is_refused(tmp_path: Path) -> None:
    fake = FakeKinesis()
    fake.glue.restore(FakeGlue().snapshot())  # empty: fine
    with pytest.raises(ValueError, match="not a Glue registry state"):
        fake.glue.restore('{"registries": {}, "schemas": [{"name": 1}]}')
    fake.create_stream("orders")
    fake.glue.restore(json.dumps({"registries": {"r": {"RegistryName": "r"}}, "schemas": []}))
    path = tmp_path / "state.sqlite"
    store = StateStore(path)
    store.save(fake)
    store.close()
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE meta SET value = '{' WHERE key = 'glue'")
    conn.close()
    loaded = FakeKinesis()
    store = StateStore(path)
    with pytest.raises(ValueError, match="meta: glue: not a Glue registry state"):
        store.load(loaded)
    store.close()
    assert not loaded.streams and not loaded.glue.registries  # nothing changed


async def test_names_are_checked(fake: FakeKinesis) -> None:
    async with client_of(fake) as glue:
        with pytest.raises(SchemaRegistryError, match=r"not valid\. Parameter Name: schemaName"):
            await glue.create_schema("default-registry", "a b", "AVRO", AVRO_V1)
        with pytest.raises(SchemaRegistryError, match="too many or too few characters"):
            await glue.create_registry("r" * 256)
        await glue.create_registry("ok-name_$#.1")
