"""The registry client over real HTTP: against the local engine (``kinesis-trio local``,
which serves Glue's schema subset on its Kinesis port) and against moto's server."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest

from kinesis_trio._aws._glue import GlueClient
from kinesis_trio.gsr._registry import GlueSchemaRegistry
from kinesis_trio.gsr._types import (
    SchemaIncompatibleError,
    SchemaNotFoundError,
    SchemaRegistryError,
    SchemaSpec,
)
from tests.gsr.conftest import AVRO_BAD, AVRO_V1, AVRO_V2, CREDS
from tests.support.emulators import EmulatorEndpoint

pytestmark = pytest.mark.anyio


def client_at(url: str) -> GlueClient:
    return GlueClient(region_name="us-east-1", endpoint_url=url, credentials=CREDS)


def unique(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


async def test_the_local_engine_serves_the_registry(python_engine: EmulatorEndpoint) -> None:
    name = unique("orders")
    async with client_at(python_engine.endpoint_url) as glue:
        registry = GlueSchemaRegistry(glue, auto_register=True, poll_interval=0.01)
        first = await registry.version_for(SchemaSpec(name, AVRO_V1, "AVRO", metadata={"a": "b"}))
        second = await registry.version_for(SchemaSpec(name, AVRO_V2, "AVRO"))
        assert first != second
        with pytest.raises(SchemaIncompatibleError):
            await registry.version_for(SchemaSpec(name, AVRO_BAD, "AVRO"))
        reader = GlueSchemaRegistry(glue)
        assert (await reader.schema_of(second)).definition == AVRO_V2
        assert await reader.version_for(SchemaSpec(name, AVRO_V1, "AVRO")) == first
        meta = await glue.call("QuerySchemaVersionMetadata", {"SchemaVersionId": str(first)})
        assert meta["MetadataInfoMap"]["a"]["MetadataValue"] == "b"


@pytest.fixture(scope="module")
def moto_url() -> Iterator[str]:
    """moto's server (in this process, on a free port) for the module's tests."""
    from moto.server import ThreadedMotoServer

    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        yield f"http://{host}:{port}"
    finally:
        server.stop()


@pytest.mark.integration
async def test_the_registry_against_moto(moto_url: str) -> None:
    """moto answers "Schema is not found." for a new definition of a known schema (AWS:
    "Schema version is not found."): CreateSchema then finds the schema there and the
    client registers a version, the Java client's fallback for a schema created meanwhile."""
    name = unique("orders")
    async with client_at(moto_url) as glue:
        with pytest.raises(SchemaNotFoundError, match="Auto registration of schema is not"):
            await GlueSchemaRegistry(glue).version_for(SchemaSpec(name, AVRO_V1, "AVRO"))
        registry = GlueSchemaRegistry(glue, auto_register=True)
        spec = SchemaSpec(name, AVRO_V1, "AVRO", metadata={"team": "payments"})
        first = await registry.version_for(spec)
        second = await registry.version_for(SchemaSpec(name, AVRO_V2, "AVRO"))
        assert first != second
        reader = GlueSchemaRegistry(glue)
        assert await reader.version_for(SchemaSpec(name, AVRO_V1, "AVRO")) == first
        found = await reader.schema_of(second)
        assert (found.data_format, found.definition) == ("AVRO", AVRO_V2)
        version = await glue.get_schema_version(str(first))
        assert version["VersionNumber"] == 1
        with pytest.raises(SchemaNotFoundError):
            await reader.schema_of(uuid.uuid4())


@pytest.mark.integration
async def test_glue_errors_from_moto(moto_url: str) -> None:
    name = unique("reg")
    async with client_at(moto_url) as glue:
        await glue.create_registry(name)
        assert (await glue.get_registry(name))["RegistryName"] == name
        with pytest.raises(SchemaRegistryError) as exists:
            await glue.create_registry(name)
        assert exists.value.code == "AlreadyExistsException"
        with pytest.raises(SchemaNotFoundError):
            await glue.get_registry(unique("none"))
        with pytest.raises(SchemaRegistryError) as invalid:
            await glue.create_schema(name, "s", "AVRO", AVRO_V1, compatibility="SOMETIMES")
        assert invalid.value.code == "InvalidInputException"
        created = await glue.create_schema(name, "s", "AVRO", AVRO_V1, compatibility="DISABLED")
        with pytest.raises(SchemaIncompatibleError, match="DISABLED does not allow versioning"):
            await GlueSchemaRegistry(glue, auto_register=True).version_for(
                SchemaSpec("s", AVRO_V2, "AVRO", registry=name)
            )
        await glue.put_schema_version_metadata(created["SchemaVersionId"], "k", "v")
        with pytest.raises(SchemaRegistryError) as again:
            await glue.put_schema_version_metadata(created["SchemaVersionId"], "k", "v")
        assert again.value.code == "AlreadyExistsException"
