"""asyncio on virtual time: an event loop whose clock jumps to its next timer instead of
sleeping (trio has ``MockClock``; asyncio has nothing of the kind). For tests whose
scenario spans minutes of the producer's time on both backends."""

from __future__ import annotations

import asyncio
import selectors
from typing import Any


def virtual_asyncio_loop() -> asyncio.AbstractEventLoop:
    """A new asyncio event loop whose ``time()`` starts at 0 and leaps to the next timer
    whenever nothing is ready (I/O is still polled: in-memory streams need none)."""

    class Selector(selectors.DefaultSelector):
        def __init__(self) -> None:
            super().__init__()
            self.now = 0.0

        def select(self, timeout: float | None = None) -> Any:
            ready = super().select(0)
            if ready or timeout == 0:
                return ready
            if timeout is None:  # no timer at all: only a thread can wake the loop
                return super().select(None)
            self.now += timeout
            return []

    selector = Selector()

    class Loop(asyncio.SelectorEventLoop):
        def time(self) -> float:
            return selector.now

    return Loop(selector)
