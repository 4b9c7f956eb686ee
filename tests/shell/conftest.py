"""The shell tests' shared fixtures: the SyncProducer's kit (both backends, the thread
watchdogs) and the spool stores a test's producers open."""

from __future__ import annotations

import pytest

from tests.support.spool import Stores, count_stores
from tests.support.sync_kit import backend, spool_watchdog, watchdog

__all__ = ["backend", "spool_watchdog", "stores", "watchdog"]


@pytest.fixture
def stores(monkeypatch: pytest.MonkeyPatch) -> Stores:
    """Every spool store the test's producers open (``CountingStore``s)."""
    return count_stores(monkeypatch)
