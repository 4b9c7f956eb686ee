"""What the engine's parts that place records anew hold (pure, no awaits).

A retry due on a retired shard (:class:`~kinesis_trio._core._retry_schedule.Retries`) and a
shard map that changed under buffered or unverified records
(:class:`~kinesis_trio._core._reshard.ShardMaps`) send records back the same way: through
the accumulator, or per-key ordering around it. Both fail or expire what their
``record_ttl`` ran out for through the endings, and leave their effects in the outbox.
"""

from __future__ import annotations

from typing import NamedTuple

from .._config import ProducerConfig
from ._accumulator import Accumulator
from ._effects import Outbox
from ._endings import Endings
from ._ordering import KeyOrder

__all__ = ["Parts", "Placing"]


class Parts(NamedTuple):
    """What the engine hands each part that places records anew."""

    config: ProducerConfig
    acc: Accumulator
    #: where records are placed anew (the accumulator, or per-key ordering around it)
    place: Accumulator | KeyOrder
    endings: Endings
    outbox: Outbox


class Placing:
    """A part that places records anew: the engine's :class:`Parts`, as attributes."""

    def __init__(self, parts: Parts) -> None:
        self.config, self.acc, self.place, self.endings, self.outbox = parts
        self.ttl = parts.config.record_ttl
