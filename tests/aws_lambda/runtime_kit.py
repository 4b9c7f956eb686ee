"""What the real-runtime tests share (``test_runtime.py``, ``test_runtime_batch.py``): the
emulator, the Python local engine (its own process, idle connections closed after 1 s), a
fresh stream, and what the stream holds. The fixtures reach the tests through
``conftest.py``."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest

from kinesis_trio import KinesisClient, StaticCredentials
from kinesis_trio.testing._emulators import LocalKinesis
from tests.aws_lambda.rie import ensure_rie

#: the engine closes connections idle this long: shorter than a freeze
IDLE_TIMEOUT = 1.0
CREDS = {
    "AWS_ACCESS_KEY_ID": "AKIDLAMBDA",
    "AWS_SECRET_ACCESS_KEY": "lambda-secret",
    "AWS_SESSION_TOKEN": "lambda-token",
    "AWS_REGION": "us-east-1",
}


@pytest.fixture(scope="module")
def rie() -> Path:
    path, why = ensure_rie()
    if path is None:
        pytest.skip(why)
    return path


@pytest.fixture(scope="module")
def engine() -> Iterator[LocalKinesis]:
    with LocalKinesis("python", args=["--idle-timeout", str(IDLE_TIMEOUT)]) as local:
        yield local


def _client(engine: LocalKinesis) -> KinesisClient:
    return KinesisClient(
        region_name="us-east-1",
        endpoint_url=engine.endpoint_url,
        credentials=StaticCredentials("AKIDLAMBDA", "lambda-secret"),
    )


@pytest.fixture
def stream(engine: LocalKinesis) -> str:
    name = f"lambda-{time.monotonic_ns()}"

    async def create() -> None:
        async with _client(engine) as client:
            await client.create_stream(name, 2)
            await client.wait_for_stream(name)

    anyio.run(create)
    return name


def stored(engine: LocalKinesis, stream: str) -> Counter[bytes]:
    """How many times each user record is in the stream (aggregates taken apart)."""
    from kinesis_trio import deaggregate

    async def read() -> list[Any]:
        async with _client(engine) as client:
            found = await client.read_all(stream)
        return [r for records in found.values() for r in records]

    return Counter(
        u.data for r in anyio.run(read) for u in deaggregate(r["Data"], r["PartitionKey"])
    )


def runtime_env(engine: LocalKinesis, stream: str, **more: str) -> dict[str, str]:
    """The function's environment: credentials, the engine's endpoint, the stream."""
    return {
        **CREDS,
        "AWS_ENDPOINT_URL_KINESIS": engine.endpoint_url,
        "STREAM": stream,
        **more,
    }
