"""Pytest plugin: session fixtures that run the local Kinesis engines.

``kinesalite``, ``kinesis_local`` and ``python_engine`` start their engine once per session
(per xdist worker) on free ports; set ``KINESIS_TRIO_KINESALITE_URL`` /
``KINESIS_TRIO_KINESIS_LOCAL_URL`` / ``KINESIS_TRIO_PYTHON_ENGINE_URL`` to use an already
running one instead. ``emulator`` runs a test against each of them. Without Node.js the two
npm emulators are skipped (with that reason); the Python engine always runs. Tests using any
of these fixtures are marked ``integration``.

``KINESIS_TRIO_EMULATOR_CPUS`` (e.g. ``0`` or ``0,1``) pins the engines this session starts
to those CPUs (every thread of the process and of its children): a slow emulator on a busy
machine, without slowing the tests themselves as ``taskset`` around pytest would.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

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


_CPUS_ENV = "KINESIS_TRIO_EMULATOR_CPUS"


def emulator_cpus() -> set[int] | None:
    """The CPUs ``KINESIS_TRIO_EMULATOR_CPUS`` names (``0,1``; ranges as ``0-1``), or None."""
    spec = os.environ.get(_CPUS_ENV, "").strip()
    if not spec:
        return None
    cpus: set[int] = set()
    for part in spec.split(","):
        first, _, last = part.strip().partition("-")
        cpus.update(range(int(first), int(last or first) + 1))
    return cpus


def _descendants(pid: int) -> list[int]:
    """``pid`` and every process below it (from /proc: Linux only, as the pinning is)."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:  # gone meanwhile
            continue
        children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        found.append(todo.pop())
        todo += children.get(found[-1], [])
    return found


def pin(pid: int, cpus: set[int]) -> int:
    """Pin every thread of ``pid`` and of its descendants to ``cpus``; how many were."""
    pinned = 0
    for proc in _descendants(pid):
        for task in Path(f"/proc/{proc}/task").glob("[0-9]*"):
            try:
                os.sched_setaffinity(int(task.name), cpus)
            except (ProcessLookupError, FileNotFoundError):  # ended meanwhile
                continue
            pinned += 1
    return pinned


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
        cpus = emulator_cpus()
        if cpus is not None and emu.pid is not None:
            assert pin(emu.pid, cpus), f"{kind} (pid {emu.pid}): no thread pinned"
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
