"""The Lambda tests' shared fixture: the SyncProducer's two backends (``sync_kit``)."""

from __future__ import annotations

from tests.support.sync_kit import backend

__all__ = ["backend"]
