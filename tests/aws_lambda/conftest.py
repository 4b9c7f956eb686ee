"""The Lambda tests' shared fixtures: the SyncProducer's two backends (``sync_kit``), and
the real runtime's emulator, engine and stream (``runtime_kit``)."""

from __future__ import annotations

from tests.aws_lambda.runtime_kit import engine, rie, stream
from tests.support.sync_kit import backend

__all__ = ["backend", "engine", "rie", "stream"]
