"""Shared fixtures: every async test runs on trio and on asyncio."""

from __future__ import annotations

import pytest

pytest_plugins = ("tests.emulator_fixtures",)


@pytest.fixture(params=["trio", "asyncio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)
