"""Pytest plugin: session fixtures that run the local Kinesis engines.

``kinesalite``, ``kinesis_local`` and ``python_engine`` start their engine once per session
(per xdist worker) on free ports; set ``KINESIS_TRIO_KINESALITE_URL`` /
``KINESIS_TRIO_KINESIS_LOCAL_URL`` / ``KINESIS_TRIO_PYTHON_ENGINE_URL`` to use an already
running one instead. ``emulator`` runs a test against each of them. Without Node.js the two
npm emulators are skipped (with that reason); the Python engine always runs. Tests using any
of these fixtures are marked ``integration``.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from kinesis_trio import KinesisClient, StaticCredentials
from kinesis_trio.testing._emulators import (
    ENGINES,
    EmulatorKind,
    LocalKinesis,
    default_engine,
    node_available,
)

EMULATOR_FIXTURES = {
    "kinesalite": "kinesalite",
    "kinesis-local": "kinesis_local",
    "python": "python_engine",
}
"""Engine kind -> fixture name."""

_URL_ENV = {
    "kinesalite": "KINESIS_TRIO_KINESALITE_URL",
    "kinesis-local": "KINESIS_TRIO_KINESIS_LOCAL_URL",
    "python": "KINESIS_TRIO_PYTHON_ENGINE_URL",
}


@dataclass(frozen=True)
class EmulatorEndpoint:
    """A running emulator: its kind and plain-HTTP endpoint.

    ``process`` is the :class:`LocalKinesis` this session started, or ``None`` when the
    endpoint came from an environment variable.
    """

    kind: EmulatorKind
    endpoint_url: str
    process: LocalKinesis | None = None


def _run_emulator(
    kind: EmulatorKind, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[EmulatorEndpoint]:
    url = os.environ.get(_URL_ENV[kind])
    if url:
        yield EmulatorEndpoint(kind, url.rstrip("/"))
        return
    if kind != "python" and not node_available():
        pytest.skip(f"{kind} is an npm package and needs Node.js 18+ (node and npm on PATH)")
    log_file = tmp_path_factory.mktemp("emulators") / f"{kind}.log"
    with LocalKinesis(kind, log_file=log_file) as emu:
        yield EmulatorEndpoint(kind, emu.endpoint_url, emu)


@pytest.fixture(scope="session")
def kinesalite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmulatorEndpoint]:
    """A kinesalite emulator shared by the whole session."""
    yield from _run_emulator("kinesalite", tmp_path_factory)


@pytest.fixture(scope="session")
def kinesis_local(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmulatorEndpoint]:
    """A kinesis-local (kinesis-mock) emulator shared by the whole session."""
    yield from _run_emulator("kinesis-local", tmp_path_factory)


@pytest.fixture(scope="session")
def python_engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmulatorEndpoint]:
    """The Python engine (``kinesis-trio local --emulator python``) shared by the session."""
    yield from _run_emulator("python", tmp_path_factory)


@pytest.fixture(scope="session", params=list(EMULATOR_FIXTURES), ids=list(EMULATOR_FIXTURES))
def emulator(request: pytest.FixtureRequest) -> EmulatorEndpoint:
    """Each emulator in turn; only the ones actually requested are started."""
    endpoint = request.getfixturevalue(EMULATOR_FIXTURES[request.param])
    assert isinstance(endpoint, EmulatorEndpoint)
    return endpoint


@pytest.fixture(scope="session")
def local_engine(request: pytest.FixtureRequest) -> EmulatorEndpoint:
    """The engine for tests that need any local Kinesis: kinesalite with Node.js, else python.

    ``KINESIS_TRIO_LOCAL_ENGINE=python`` (or another kind) picks one.
    """
    kind = os.environ.get("KINESIS_TRIO_LOCAL_ENGINE") or default_engine()
    if kind not in EMULATOR_FIXTURES:
        raise pytest.UsageError(f"KINESIS_TRIO_LOCAL_ENGINE={kind!r}: one of {list(ENGINES)}")
    endpoint = request.getfixturevalue(EMULATOR_FIXTURES[kind])
    assert isinstance(endpoint, EmulatorEndpoint)
    return endpoint


_INTEGRATION_FIXTURES = frozenset({"emulator", "local_engine", *EMULATOR_FIXTURES.values()})


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test that uses an emulator fixture as an integration test."""
    for item in items:
        if _INTEGRATION_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.integration)


def client_for(emulator: EmulatorEndpoint) -> KinesisClient:
    """A client of ``emulator`` (any credentials pass)."""
    return KinesisClient(
        region_name="us-east-1",
        endpoint_url=emulator.endpoint_url,
        credentials=StaticCredentials("AKIDLOCAL", "local-secret"),
    )


async def new_stream(emulator: EmulatorEndpoint, shards: int) -> str:
    name = f"it-{uuid.uuid4().hex[:12]}"
    async with client_for(emulator) as client:
        await client.create_stream(name, shards)
        await client.wait_for_stream(name)
    return name
