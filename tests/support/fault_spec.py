"""The faults the fault proxy injects: their settings, the kinds of request it counts, its events.

Holds :class:`Faults` (the probabilities per PutRecords request, per entry for throttling,
and the delay; checked when made: numbers >= 0, probabilities at most 1, the request-level
ones summing to at most 1), :data:`KINDS` (the request kinds in ``FaultProxy.stats``) and
:class:`ProxyEvent` (one PutRecords request as the proxy saw it). Used by
``tests/support/fault_proxy.py`` (``FaultProxy.set_faults`` and its events) and by the tests
that set faults or read events (``tests/emulators``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, NamedTuple

__all__ = ["KINDS", "Faults", "ProxyEvent"]

KINDS = (
    "passthrough",  # not a PutRecords request: forwarded untouched, no event
    "forward",  # PutRecords forwarded untouched (no fault drawn)
    "http_500",
    "http_503",
    "proxy_400",  # refused by "a proxy in front" (HTML, no __type): nothing written
    "endless_answer",  # a 200 head, then 16 KiB of spaces every 10 ms for ever: not written
    "throttle_entries",  # some (maybe all) entries dropped and answered as throttled
    "reset_before",
    "reset_after",
    "hang_after",
    "upstream_error",  # the upstream failed (connect error, reset, bad HTTP): 502 + close
)
"""Request kinds counted in :attr:`FaultProxy.stats` (``events`` omits ``passthrough``)."""

_REQUEST_FAULTS = (
    "http_500",
    "http_503",
    "proxy_400",
    "endless_answer",
    "reset_before",
    "reset_after",
    "hang_after",
)


@dataclass(frozen=True)
class Faults:
    """Fault settings; probabilities are per PutRecords request (per entry for throttling)."""

    http_500: float = 0.0
    http_503: float = 0.0
    proxy_400: float = 0.0
    endless_answer: float = 0.0
    throttle_entries: float = 0.0
    reset_before: float = 0.0
    reset_after: float = 0.0
    hang_after: float = 0.0
    delay: float = 0.0
    """Seconds to wait before acting on each PutRecords request."""
    delay_jitter: float = 0.0
    """Extra uniform random wait in ``[0, delay_jitter]`` seconds."""

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if not isinstance(value, (int, float)) or value < 0:
                raise ValueError(f"{f.name} must be a number >= 0, got {value!r}")
            if f.name not in ("delay", "delay_jitter") and value > 1:
                raise ValueError(f"{f.name} is a probability, got {value!r}")
        total = sum(getattr(self, name) for name in _REQUEST_FAULTS)
        if total > 1 + 1e-9:
            raise ValueError(f"request-level fault probabilities sum to {total} > 1")


class ProxyEvent(NamedTuple):
    """One PutRecords request seen by the proxy."""

    kind: str
    n_entries: int
    records: list[dict[str, Any]] | None
