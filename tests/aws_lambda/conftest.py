"""The Lambda tests' shared fixtures: the SyncProducer's two backends (``sync_kit``), and
the real runtime's emulator, engine and stream (``runtime_kit``), the producers to close."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from kinesis_trio.aws_lambda import LambdaProducer
from tests.aws_lambda.runtime_kit import engine, rie, stream
from tests.support.sync_kit import backend

__all__ = ["backend", "closing", "engine", "rie", "stream"]


@pytest.fixture
def closing() -> Iterator[list[LambdaProducer]]:
    """The producers a test made, closed after it."""
    made: list[LambdaProducer] = []
    yield made
    for producer in made:
        producer.close()
