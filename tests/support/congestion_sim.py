"""A discrete-event simulation of a producer's sender against a busy server (virtual time).

The server has ``workers`` that serve requests first come, first served, each taking
``per_request + per_byte * bytes`` (times ``slowdown(t)``). The client sends a backlog of
requests through a :class:`ConcurrencyLimit`; a request not answered within ``timeout`` is
a timeout for the client (sent again), while the server still works on it, as a real one
does. Deterministic: the same inputs give the same run.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Callable
from dataclasses import dataclass, field

from kinesis_trio._core._congestion import ConcurrencyLimit, Signal


@dataclass(frozen=True)
class Server:
    """``workers`` serving first come, first served, ``per_request + per_byte * bytes``
    seconds a request, times ``slowdown(t)``."""

    workers: int
    per_request: float
    per_byte: float
    slowdown: Callable[[float], float] = lambda t: 1.0


@dataclass
class Run:
    elapsed: float
    timeouts: int
    #: (time, limit) after each request's end
    limits: list[tuple[float, int]] = field(default_factory=list)
    #: time of each timeout
    timeout_at: list[float] = field(default_factory=list)
    #: (time, requests in flight) after each request's end
    in_flight: list[tuple[float, int]] = field(default_factory=list)


def simulate(
    sizes: list[int],
    server: Server,
    gate: ConcurrencyLimit,
    *,
    timeout: float = 12.0,
    give_up: float = 3600.0,
) -> Run:
    """Send every request until answered; past ``give_up`` seconds (a collapse: timeouts
    feeding the server's queue faster than it drains), ``elapsed`` is infinite."""
    free = [0.0] * server.workers  # when each worker is next free
    backlog = list(reversed(sizes))
    events: list[tuple[float, int, str, float, int]] = []  # (time, seq, kind, start, size)
    seq = itertools.count()
    now = 0.0
    run = Run(0.0, 0)
    done = 0

    def send() -> None:
        while backlog and gate.try_acquire(backlog[-1]):
            size = backlog.pop()
            worker_free = heapq.heappop(free)
            begin = max(now, worker_free)
            end = begin + (server.per_request + server.per_byte * size) * server.slowdown(begin)
            heapq.heappush(free, end)
            if end - now > timeout:
                heapq.heappush(events, (now + timeout, next(seq), "timeout", now, size))
            else:
                heapq.heappush(events, (end, next(seq), "answer", now, size))

    send()
    while events:
        now, _, kind, start, size = heapq.heappop(events)
        if now > give_up:
            run.elapsed = float("inf")
            return run
        if kind == "answer":
            gate.observe(now, start, size, Signal.ANSWER)
            done += 1
        else:
            gate.observe(now, start, size, Signal.OVERLOAD)
            run.timeouts += 1
            run.timeout_at.append(now)
            backlog.append(size)  # sent again
        gate.release(size)
        run.limits.append((now, gate.allowed))
        run.in_flight.append((now, gate.in_flight))
        send()
    assert done == len(sizes) and not backlog, "every request ends answered"
    run.elapsed = now
    return run


def best_fixed(
    sizes: list[int], server: Server, ceilings: tuple[int, ...] = (1, 2, 4, 8, 24)
) -> tuple[int, Run]:
    """The fastest fixed concurrency among ``ceilings`` (KPL-style MaxConnections)."""
    runs = [(c, simulate(sizes, server, ConcurrencyLimit(c, adaptive=False))) for c in ceilings]
    return min(runs, key=lambda r: r[1].elapsed)
