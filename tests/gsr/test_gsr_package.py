"""The ``kinesis_trio.gsr`` package: its names, either import order, ``connect``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from kinesis_trio import gsr
from kinesis_trio.testing import FakeKinesis
from tests.gsr.conftest import AVRO_V1, CREDS
from tests.support.emulators import EmulatorEndpoint


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


EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "gsr_registry.py"


def run_example(env: dict[str, str]) -> str:
    done = subprocess.run(
        [sys.executable, str(EXAMPLE)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **env},
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


@pytest.mark.subprocess
def test_the_example_runs_offline() -> None:
    out = run_example({"AWS_ENDPOINT_URL_GLUE": ""})
    assert " v1: " in out and " v2: " in out and "v3 refused" in out and "is AVRO" in out


@pytest.mark.subprocess
def test_the_example_runs_against_the_local_engine(python_engine: EmulatorEndpoint) -> None:
    out = run_example(
        {
            "AWS_ENDPOINT_URL_GLUE": python_engine.endpoint_url,
            "AWS_REGION": "us-east-1",
            "AWS_ACCESS_KEY_ID": "x",
            "AWS_SECRET_ACCESS_KEY": "y",
        }
    )
    assert "v3 refused" in out and "FAILURE" in out


PRODUCER_EXAMPLE = EXAMPLE.with_name("gsr_producer.py")


def run_producer_example(env: dict[str, str]) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, str(PRODUCER_EXAMPLE)],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **env},
    )
    assert done.returncode == 0, done.stderr
    assert "refused at put: record does not match Avro schema shop.Order" in done.stdout
    summary: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return summary


@pytest.mark.subprocess
def test_the_producer_example_runs_offline() -> None:
    summary = run_producer_example({"AWS_ENDPOINT_URL": ""})
    assert summary["orders"] == 100 and summary["events"] == [{"order": 7, "event": "paid"}]


@pytest.mark.subprocess
def test_the_producer_example_runs_against_the_local_engine(
    python_engine: EmulatorEndpoint,
) -> None:
    summary = run_producer_example(
        {
            "AWS_ENDPOINT_URL": python_engine.endpoint_url,
            "AWS_REGION": "us-east-1",
            "AWS_ACCESS_KEY_ID": "x",
            "AWS_SECRET_ACCESS_KEY": "y",
        }
    )
    assert summary["orders"] == 100 and summary["events"] == [{"order": 7, "event": "paid"}]
