"""Deleted schemas and versions on the serializers' path, the registry's new state on disk
and malformed members of the new calls: the fake's Glue through the Glue client and
:class:`GlueSchemaRegistry`.

What a registry does after a deletion is what it does against Glue: a version id it has
not cached is looked up and not found (GetSchemaVersion: "Schema versions in Deleted
status will not be included in the results."), a definition whose version was deleted is
registered again under a new number, a deleted schema is created again. A registry that
cached the id keeps it until ``time_to_live``, as the Java client's cache does.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kinesis_trio.gsr._registry import GlueSchemaRegistry
from kinesis_trio.gsr._types import SchemaNotFoundError, SchemaRegistryError, SchemaSpec
from kinesis_trio.testing import FakeKinesis
from kinesis_trio.testing._persist import StateStore
from tests.gsr.conftest import AVRO_V1, AVRO_V2, client_of

pytestmark = pytest.mark.anyio

ORDERS = {"RegistryName": "default-registry", "SchemaName": "orders"}
ARN = "arn:aws:glue:us-east-1:123456789012:schema"


async def test_a_deleted_version_is_not_found_and_registered_again(fake: FakeKinesis) -> None:
    async with client_of(fake) as glue:
        producer = GlueSchemaRegistry(glue, auto_register=True, poll_interval=0.01)
        first = await producer.version_for(SchemaSpec("orders", AVRO_V1, "AVRO"))
        second = await producer.version_for(SchemaSpec("orders", AVRO_V2, "AVRO"))
        answer = await glue.call("DeleteSchemaVersions", {"SchemaId": ORDERS, "Versions": "2"})
        assert answer == {"SchemaVersionErrors": []}

        reader = GlueSchemaRegistry(glue)
        assert (await reader.schema_of(first)).definition == AVRO_V1
        with pytest.raises(SchemaNotFoundError, match="Schema version is not found"):
            await reader.schema_of(second)
        with pytest.raises(SchemaNotFoundError, match="Schema version is not found"):
            await reader.version_for(SchemaSpec("orders", AVRO_V2, "AVRO"))
        # the producer that cached it keeps it until its time to live
        assert await producer.version_for(SchemaSpec("orders", AVRO_V2, "AVRO")) == second

        again = GlueSchemaRegistry(glue, auto_register=True, poll_interval=0.01)
        third = await again.version_for(SchemaSpec("orders", AVRO_V2, "AVRO"))
        assert third not in (first, second)
        assert [v.number for v in fake.glue.versions("orders")] == [1, 3]
        assert (await reader.schema_of(third)).definition == AVRO_V2


async def test_a_deleted_schema_is_created_again(fake: FakeKinesis) -> None:
    async with client_of(fake) as glue:
        producer = GlueSchemaRegistry(glue, auto_register=True, poll_interval=0.01)
        spec = SchemaSpec("orders", AVRO_V1, "AVRO", compatibility="FULL", metadata={"a": "b"})
        first = await producer.version_for(spec)
        deleted = await glue.call("DeleteSchema", {"SchemaId": ORDERS})
        assert deleted["Status"] == "DELETING"
        with pytest.raises(SchemaNotFoundError, match="Schema is not found"):
            await GlueSchemaRegistry(glue).version_for(spec)
        with pytest.raises(SchemaNotFoundError):
            await GlueSchemaRegistry(glue).schema_of(first)

        again = await GlueSchemaRegistry(glue, auto_register=True).version_for(spec)
        assert again != first
        schema = await glue.call("GetSchema", {"SchemaId": ORDERS})
        assert (schema["Compatibility"], schema["LatestSchemaVersion"]) == ("FULL", 1)
        meta = await glue.call("QuerySchemaVersionMetadata", {"SchemaVersionId": str(again)})
        assert meta["MetadataInfoMap"]["a"]["MetadataValue"] == "b"


async def test_a_version_registered_after_a_checkpoint_is_checked_from_it(
    fake: FakeKinesis,
) -> None:
    """Versions before the checkpoint are not checked (SchemaCheckpoint: "the last time the
    compatibility mode was changed")."""
    bad = AVRO_V1.replace('"int"', '"string"')
    async with client_of(fake) as glue:
        await glue.create_schema(
            "default-registry", "orders", "AVRO", AVRO_V1, compatibility="NONE"
        )
        await glue.register_schema_version("default-registry", "orders", bad)
        await glue.call(
            "UpdateSchema",
            {
                "SchemaId": ORDERS,
                "Compatibility": "FULL_ALL",
                "SchemaVersionNumber": {"LatestVersion": True},
            },
        )
        later = bad.replace('"fields":[', '"fields":[{"name":"n","type":"int","default":0},')
        answer = await glue.register_schema_version("default-registry", "orders", later)
        assert answer["Status"] == "AVAILABLE"  # version 1 (an int id) is before the checkpoint
        back = await glue.register_schema_version("default-registry", "orders", AVRO_V2)
        assert back["Status"] == "FAILURE"


async def test_a_registry_and_its_schemas_go_together(fake: FakeKinesis) -> None:
    async with client_of(fake) as glue:
        await glue.create_registry("team")
        await glue.create_schema("team", "orders", "AVRO", AVRO_V1)
        await glue.call("DeleteRegistry", {"RegistryId": {"RegistryName": "team"}})
        assert fake.glue.schemas() == [] and "team" not in fake.glue.registries
        with pytest.raises(SchemaNotFoundError, match="Registry is not found"):
            await glue.create_schema("team", "orders", "AVRO", AVRO_V1)
        with pytest.raises(SchemaRegistryError) as refused:
            await glue.call("DeleteSchemaVersions", {"SchemaId": ORDERS, "Versions": "1,2"})
        assert refused.value.code == "EntityNotFoundException"  # no such schema: looked up first


async def test_the_new_state_survives_a_restart(fake: FakeKinesis, tmp_path: Path) -> None:
    """Tags, checkpoints, descriptions, metadata times and the next version number are kept
    with the engine's state (``--data``); a state written before them still loads."""
    async with client_of(fake) as glue:
        await glue.call(
            "CreateSchema",
            {
                "SchemaName": "orders",
                "DataFormat": "AVRO",
                "SchemaDefinition": AVRO_V1,
                "Description": "orders",
                "Tags": {"team": "shop"},
            },
        )
        second = await glue.register_schema_version("default-registry", "orders", AVRO_V2)
        await glue.put_schema_version_metadata(second["SchemaVersionId"], "k", "v")
        await glue.call(
            "UpdateSchema", {"SchemaId": ORDERS, "SchemaVersionNumber": {"VersionNumber": 2}}
        )
        third = AVRO_V2.replace("]}", ',{"name":"n","type":"int","default":0}]}')
        assert (await glue.register_schema_version("default-registry", "orders", third))[
            "VersionNumber"
        ] == 3
        deleted = await glue.call("DeleteSchemaVersions", {"SchemaId": ORDERS, "Versions": "3"})
        assert deleted == {"SchemaVersionErrors": []}
        calls = [
            ("GetSchema", {"SchemaId": ORDERS}),
            ("QuerySchemaVersionMetadata", {"SchemaVersionId": second["SchemaVersionId"]}),
            ("GetTags", {"ResourceArn": f"{ARN}/default-registry/orders"}),
            ("ListSchemaVersions", {"SchemaId": ORDERS}),
        ]
        before = {op: await glue.call(op, body) for op, body in calls}
    store = StateStore(tmp_path / "state.sqlite")
    assert store.save(fake) is True
    store.close()
    loaded = FakeKinesis()
    store = StateStore(tmp_path / "state.sqlite")
    assert store.load(loaded) is True
    store.close()
    async with client_of(loaded) as glue:
        for op, body in calls:
            assert await glue.call(op, body) == before[op], op
    assert before["GetSchema"]["NextSchemaVersion"] == 4  # 3 is not handed out again

    # a state from before: no tags, checkpoints, next numbers or metadata times
    old = json.loads(fake.glue.snapshot())
    old.pop("tags")
    for schema in old["schemas"]:
        for member in ("checkpoint", "next_number", "updated"):
            schema.pop(member)
        for version in schema["versions"]:
            version.pop("metadata_times")
    restored = FakeKinesis()
    restored.glue.restore(json.dumps(old))
    async with client_of(restored) as glue:
        schema = await glue.call("GetSchema", {"SchemaId": ORDERS})
        assert (schema["SchemaCheckpoint"], schema["NextSchemaVersion"]) == (1, 3)
        meta = await glue.call(
            "QuerySchemaVersionMetadata", {"SchemaVersionId": second["SchemaVersionId"]}
        )
        assert meta["MetadataInfoMap"]["k"]["MetadataValue"] == "v"


@pytest.mark.parametrize(
    ("operation", "body"),
    [
        ("PutSchemaVersionMetadata", {"SchemaId": ORDERS, "MetadataKeyValue": "k=v"}),
        ("RemoveSchemaVersionMetadata", {"SchemaId": ORDERS, "MetadataKeyValue": ["k"]}),
        ("QuerySchemaVersionMetadata", {"SchemaId": ORDERS, "MetadataList": "k"}),
        ("QuerySchemaVersionMetadata", {"MetadataList": []}),
        ("DeleteSchemaVersions", {"SchemaId": ORDERS, "Versions": 2}),
        ("DeleteSchemaVersions", {"SchemaId": ORDERS}),
        ("ListSchemas", {"RegistryId": "default-registry"}),
        ("ListSchemaVersions", {"SchemaId": ORDERS, "MaxResults": "2"}),
        ("ListSchemaVersions", {"SchemaId": ORDERS, "MaxResults": True}),
        ("ListRegistries", {"NextToken": 7}),
        # a token of the right list whose place is of another kind
        ("ListRegistries", {"NextToken": "eyJvcCI6ICJMaXN0UmVnaXN0cmllcyIsICJhZnRlciI6IDF9"}),
        ("UpdateSchema", {"SchemaId": ORDERS, "Description": 3}),
        ("UpdateSchema", {"SchemaId": ORDERS, "Compatibility": "SOME"}),
        ("UpdateRegistry", {"RegistryId": {"RegistryName": "default-registry"}}),
        ("TagResource", {"ResourceArn": f"{ARN}/default-registry/orders", "TagsToAdd": ["a"]}),
        ("TagResource", {"ResourceArn": f"{ARN}/default-registry/orders", "TagsToAdd": {"": "v"}}),
        ("UntagResource", {"ResourceArn": f"{ARN}/default-registry/orders", "TagsToRemove": "a"}),
        ("GetTags", {"ResourceArn": 5}),
        ("CheckSchemaVersionValidity", {"DataFormat": "AVRO"}),
        ("CreateSchema", {"SchemaName": "x", "DataFormat": "AVRO", "Tags": {"k": 1}}),
        ("CreateRegistry", {"RegistryName": "x", "Description": "\ud800"}),
    ],
)
async def test_malformed_members_are_invalid_input(
    fake: FakeKinesis, operation: str, body: dict[str, object]
) -> None:
    async with client_of(fake) as glue:
        await glue.create_schema("default-registry", "orders", "AVRO", AVRO_V1)
        with pytest.raises(SchemaRegistryError) as refused:
            await glue.call(operation, body)
    assert refused.value.code == "InvalidInputException", str(refused.value)
