"""The ``kinesis_trio.gsr`` package: its names, either import order, ``connect``."""

from __future__ import annotations

import subprocess
import sys

import pytest

from kinesis_trio import gsr
from kinesis_trio.testing import FakeKinesis
from tests.gsr.conftest import AVRO_V1, CREDS


@pytest.mark.subprocess
@pytest.mark.parametrize(
    "first", ["kinesis_trio._aws._glue", "kinesis_trio.gsr", "kinesis_trio.gsr._registry"]
)
def test_either_module_imports_first(first: str) -> None:
    code = f"import {first}\nfrom kinesis_trio.gsr import GlueClient, GlueSchemaRegistry\n"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)


def test_the_client_is_reachable_from_the_package() -> None:
    from kinesis_trio._aws._glue import GlueClient

    assert gsr.GlueClient is GlueClient
    with pytest.raises(AttributeError):
        _ = gsr.Nothing


@pytest.mark.anyio
async def test_connect_makes_and_closes_a_client() -> None:
    fake = FakeKinesis()
    registry = gsr.GlueSchemaRegistry.connect(
        region_name="us-east-1",
        endpoint_url="http://fake",
        credentials=CREDS,
        transport=fake.transport(),
        auto_register=True,
    )
    async with registry:
        version = await registry.version_for(gsr.SchemaSpec("orders", AVRO_V1, "AVRO"))
    assert str(version) == fake.glue.versions("orders")[0].version_id
    with pytest.raises(RuntimeError, match="closed"):
        await registry.client.get_registry("default-registry")
