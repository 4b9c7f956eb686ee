"""Shared fixtures: every async test runs on trio and on asyncio."""

from __future__ import annotations

import os
from typing import Any

import pytest
from hypothesis import settings
from trio.testing import MockClock

from kinesis_trio._outcome import Outcome

# Property tests are deterministic by default (the same examples on every run: a CI run
# never fails on an example nobody saw); HYPOTHESIS_PROFILE=explore searches afresh.
settings.register_profile("deterministic", derandomize=True)
settings.register_profile("explore", derandomize=False)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "deterministic"))

pytest_plugins = ("tests.emulator_fixtures",)


@pytest.fixture(params=["trio", "asyncio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture(autouse=True)
def _fresh_mock_clock(request: pytest.FixtureRequest) -> None:
    """Each test on ``("trio", {"clock": MockClock(...)})`` gets a clock of its own at 0.

    A parametrize value is built once per module, so without this every test would share
    one virtual clock and start where the previous one stopped: its timing (linger windows,
    backoff jitter seeds by time) would depend on which tests ran before it."""
    if "anyio_backend" not in request.fixturenames:
        return
    backend = request.getfixturevalue("anyio_backend")
    if isinstance(backend, tuple) and isinstance(backend[1].get("clock"), MockClock):
        old = backend[1]["clock"]
        backend[1]["clock"] = MockClock(rate=old.rate, autojump_threshold=old.autojump_threshold)


@pytest.fixture
def double_resolutions(monkeypatch: pytest.MonkeyPatch) -> list[Outcome]:
    """Every attempt to resolve an already resolved outcome (a test asserts it stays empty)."""
    seen: list[Outcome] = []
    original = Outcome._resolve

    def resolve(self: Outcome, resolution: Any, sub: int = 0) -> bool:
        done = original(self, resolution, sub)
        if not done:
            seen.append(self)
        return done

    monkeypatch.setattr(Outcome, "_resolve", resolve)
    return seen
