"""Shared fixtures: every async test runs on trio and on asyncio."""

from __future__ import annotations

import os
from typing import Any

import pytest
from hypothesis import settings
from trio.testing import MockClock

from kinesis_trio import Outcome
from tests.support.clock import hash_in_loop, virtual_asyncio_loop, wait_for_disk

# Property tests are deterministic by default (the same examples on every run: a CI run
# never fails on an example nobody saw); HYPOTHESIS_PROFILE=explore searches afresh. No
# per-example deadline: on a loaded machine a slow example is not a failure (it flaked so).
settings.register_profile("deterministic", derandomize=True, deadline=None)
settings.register_profile("explore", derandomize=False, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "deterministic"))

pytest_plugins = ("tests.support.emulators", "tests.support.hangs")


@pytest.fixture(params=["trio", "asyncio"])
def anyio_backend(request: pytest.FixtureRequest) -> Any:
    """Every async test on trio and on asyncio. A test marked ``virtual_time`` (or its
    module, ``pytestmark``) runs on virtual time on both: trio on a ``MockClock``, jumping
    ahead whenever every task sleeps; asyncio on a loop whose clock leaps to its next timer
    instead of sleeping (``virtual_asyncio_loop``). Neither moves while the spool's disk
    works (``wait_for_disk``): linger, TTL and backoff take no real time there. A test marked
    ``real_time`` keeps the real clock in a ``virtual_time`` module."""
    node = request.node
    if node.get_closest_marker("virtual_time") and not node.get_closest_marker("real_time"):
        if request.param == "trio":
            return ("trio", {"clock": MockClock(autojump_threshold=0)})
        return ("asyncio", {"loop_factory": virtual_asyncio_loop})
    return request.param


@pytest.fixture(autouse=True)
def _fresh_virtual_clock(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test on ``("trio", {"clock": MockClock(...)})`` gets a clock of its own at 0
    (on asyncio each run makes a loop of its own, its clock at 0), and on either backend
    the clock waits for the spool's disk (``wait_for_disk``: a store call in its worker
    thread takes no virtual time); on asyncio a large body is hashed in the loop, not in a
    thread the clock would leap past (``hash_in_loop``; the package sees a ``MockClock``).

    A parametrize value is built once per module, so without this every test would share
    one virtual clock and start where the previous one stopped: its timing (linger windows,
    backoff jitter seeds by time) would depend on which tests ran before it."""
    if "anyio_backend" not in request.fixturenames:
        return
    backend = request.getfixturevalue("anyio_backend")
    if not isinstance(backend, tuple):
        return
    if isinstance(backend[1].get("clock"), MockClock):
        old = backend[1]["clock"]
        clock = MockClock(rate=old.rate, autojump_threshold=old.autojump_threshold)
        backend[1]["clock"] = clock
        wait_for_disk(monkeypatch, clock)
    elif backend[1].get("loop_factory") is virtual_asyncio_loop:
        wait_for_disk(monkeypatch)
        hash_in_loop(monkeypatch)


@pytest.fixture
def double_resolutions(monkeypatch: pytest.MonkeyPatch) -> list[Outcome]:
    """Every attempt to resolve an already resolved outcome (a test asserts it stays empty)."""
    seen: list[Outcome] = []
    original = Outcome.resolve

    def resolve(self: Outcome, resolution: Any, sub: int = 0) -> bool:
        done = original(self, resolution, sub)
        if not done:
            seen.append(self)
        return done

    monkeypatch.setattr(Outcome, "resolve", resolve)
    return seen


#: Folders and files whose tests take seconds each (real engines, subprocesses): run first,
#: so the four workers do not end the run waiting on one of them.
_SLOW_FIRST = ("emulators/", "tail/test_cli.py", "cli/", "testing/test_boto3.py", "producer/")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The slow tests first (a stable sort: the order within each group is kept)."""

    def rank(item: pytest.Item) -> int:
        path = item.path.as_posix()
        return next((i for i, part in enumerate(_SLOW_FIRST) if f"tests/{part}" in path), 99)

    items.sort(key=rank)
