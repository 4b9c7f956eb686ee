"""A busy server: workers, a queue and service times for the fake's requests."""

from __future__ import annotations

import heapq
import time
from collections.abc import Callable


class ServerModel:
    """A busy server: ``workers`` serve requests first come, first served, each for
    ``per_request + per_byte * body bytes`` seconds, times ``slowdown`` (change it at any
    time to make the server slow down and recover: the work in progress and in the queue
    goes at the new speed from then on, as on a server that got its capacity back).

    A request waits for a free worker, as in a server whose threads are all busy. One the
    client gives up on (its timeout) is still served, as by a real endpoint: its records
    are stored (at once, where a real server would store them when its turn comes) and its
    worker stays busy for its turn. So requests sent too many at once pass their timeout
    while they queue, and each retry queues again.
    """

    def __init__(self, workers: int = 1, per_request: float = 0.005, per_byte: float = 0.0):
        if workers < 1 or per_request < 0 or per_byte < 0:
            raise ValueError("workers must be at least 1, service times at least 0")
        self.workers = workers
        self.per_request = per_request
        self.per_byte = per_byte
        #: the clock ``slowdown`` changes are timed by (the fake's server sets its own)
        self.clock: Callable[[], float] = time.monotonic
        #: called after each change of ``slowdown`` (the server wakes its waiting requests)
        self.on_change: list[Callable[[], None]] = []
        self._slowdown = 1.0
        # Work is counted in seconds at full speed: the work clock reads ``_work_at`` at
        # ``_changed_at`` and runs at ``1 / slowdown`` since.
        self._work_at = 0.0
        self._changed_at = 0.0
        self._free = [0.0] * workers  # when each worker is next free, on the work clock
        #: requests served in all, and of those, how many the client had given up on
        self.served: int = 0
        self.abandoned: int = 0

    @property
    def slowdown(self) -> float:
        """How many times slower than ``per_request + per_byte * bytes`` it serves now."""
        return self._slowdown

    @slowdown.setter
    def slowdown(self, factor: float) -> None:
        if not factor > 0:
            raise ValueError(f"slowdown must be positive, not {factor!r}")
        now = self.clock()
        self._work_at = self.work_clock(now)
        self._changed_at = now
        self._slowdown = float(factor)
        for wake in list(self.on_change):
            wake()

    def _attach(self, clock: Callable[[], float], wake: Callable[[], None]) -> None:
        """A fake serves through this model: time ``slowdown`` changes by its ``clock`` and
        call ``wake`` after each."""
        self.clock = clock
        self.on_change.append(wake)

    def _abandon(self) -> None:
        """Count a request the client gave up on (it is still served)."""
        self.abandoned += 1

    def work_clock(self, now: float) -> float:
        """Seconds of full-speed work the server has had time for by ``now``."""
        return self._work_at + max(0.0, now - self._changed_at) / self._slowdown

    def admit(self, now: float, nbytes: int) -> float:
        """Queue a request of ``nbytes`` arriving at ``now``; returns the reading of the work
        clock at which it is done (:meth:`remaining` turns it into seconds)."""
        free = heapq.heappop(self._free)
        end = max(self.work_clock(now), free) + self.per_request + self.per_byte * nbytes
        heapq.heappush(self._free, end)
        self.served += 1
        return end

    def remaining(self, done_at: float, now: float) -> float:
        """Seconds until the work clock reads ``done_at``, at the present speed (0 within a
        nanosecond: rounding must not keep a request waiting for ever smaller sleeps)."""
        left = (done_at - self.work_clock(now)) * self._slowdown
        return left if left > 1e-9 else 0.0
