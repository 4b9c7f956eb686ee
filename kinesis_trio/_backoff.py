"""The one backoff: full-jitter exponential, for every floor that waits before another
try (the retry scheduler, the client's own retries, the metrics sink, ``tail``)."""

from __future__ import annotations

import random

__all__ = ["backoff_delay"]


def backoff_delay(
    failures: int,
    *,
    base: float = 0.1,
    cap: float = 5.0,
    rand: random.Random | None = None,
) -> float:
    """Full-jitter exponential backoff after ``failures`` consecutive failures (>= 1)."""
    ceiling = min(cap, base * 2.0 ** max(0, failures - 1))
    r: float = rand.random() if rand is not None else random.random()
    return ceiling * r
