"""Virtual time for the tests, on both backends, waiting for the spool's disk.

Trio: ``MockClock(autojump_threshold=0)`` jumps to the next deadline whenever no task can
run. asyncio: :func:`virtual_asyncio_loop`, an event loop whose clock leaps to its next
timer whenever it would sleep (its selector has nothing ready), and with no timer at all
blocks until a thread wakes it. ``tests/conftest.py`` gives one or the other to every test
marked ``virtual_time``; ``benchmarks/_steady_cpu.py`` runs its arrival loop on them.

A task waiting for a worker thread cannot run, so while the spool's store worked in its
thread (SQLite: an open, a commit, a read) the clock leapt from deadline to deadline,
every timer of the producer, each leap a turn of the loop that competed with the thread
for the GIL: 0.2 s in a thread beside a 10 ms timer was 9 virtual seconds and 900 turns
(``trio.run`` alone; anyio's pytest runner drives trio as a guest of the main thread, a
queue's put and get more per turn). Beside two busy loops one test of test_spool.py ran
the clock 75 virtual hours ahead: the tests needed a year's retention and TTLs of 1e6 s,
and no timing they read was the disk's.

:func:`wait_for_disk` makes a test's clock stand still while a store call is in its
thread: the disk's work takes no virtual time, as no work a task does without awaiting
does. The loop waits for the thread (no turns meanwhile) and goes on at the same virtual
instant. The calls still cross threads: only the clock waits for them. The seam: the
spooler's ``_in_thread``, every store call's way to its thread (``tests/conftest.py`` wraps
it around every test on virtual time). A large body's hash for the signature, the other
worker thread of a producer, is not sent to a thread on a virtual clock: the package knows
trio's ``MockClock``, and :func:`hash_in_loop` tells it of the asyncio loop.

A store call that waits in its thread for something the loop would do after virtual time
passes would wait for ever (its own real-time bound aside): a test that holds a commit
(``CountingStore.hold``) only checkpoints until it lets it go.
"""

from __future__ import annotations

import asyncio
import math
import selectors
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

import sniffio
import trio.lowlevel
from trio.testing import MockClock

from kinesis_trio._aws import _service
from kinesis_trio._shell import _spooler

if TYPE_CHECKING:
    import pytest

T = TypeVar("T")


class _LeapingSelector(selectors.DefaultSelector):
    """A selector that, asked to wait with nothing ready, moves its clock ``now`` on by the
    wait instead of sleeping; unless a worker thread the clock waits for is in flight
    (``waiting``): then it blocks until something is ready (the thread's end wakes it)."""

    def __init__(self) -> None:
        super().__init__()
        self.now = 0.0
        self.waiting = 0  # worker-thread calls in flight that take no virtual time

    def select(self, timeout: float | None = None) -> Any:
        ready = super().select(0)
        if ready or timeout == 0:
            return ready
        if timeout is None or self.waiting:  # only a thread (or a socket) can wake the loop
            return super().select(None)
        self.now += timeout
        return []


class VirtualLoop(asyncio.SelectorEventLoop):
    """An asyncio event loop on virtual time: ``time()`` is its selector's clock."""

    def __init__(self) -> None:
        self.leaping = _LeapingSelector()
        super().__init__(self.leaping)

    def time(self) -> float:
        return self.leaping.now


def virtual_asyncio_loop() -> VirtualLoop:
    """An asyncio event loop whose clock jumps to its next timer instead of sleeping (the
    asyncio side of the tests on virtual time, and of ``benchmarks/_steady_cpu.py``)."""
    return VirtualLoop()


def _virtual_loop() -> VirtualLoop | None:
    """The running asyncio loop if it is a :class:`VirtualLoop`."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return None
    return loop if isinstance(loop, VirtualLoop) else None


def hash_in_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    """From now on, a large body is hashed in the event loop on a :class:`VirtualLoop` too,
    not in a worker thread the clock would leap past (the package sees trio's ``MockClock``
    itself)."""
    known = _service._virtual_clock
    monkeypatch.setattr(_service, "_virtual_clock", lambda: known() or _virtual_loop() is not None)


def wait_for_disk(monkeypatch: pytest.MonkeyPatch, clock: MockClock | None = None) -> None:
    """From now on, the clock does not move while a spool store call runs in its worker
    thread (the spooler's ``_in_thread``): on trio, ``clock``'s autojump waits for the
    thread; on asyncio, a :class:`VirtualLoop`'s selector does. Calls made on any other
    clock (a ``SyncProducer``'s own loop) go as they are."""
    in_thread = _spooler._in_thread
    threshold = math.inf if clock is None else clock.autojump_threshold
    busy = 0  # store calls in their threads now, on ``clock``

    async def waited(call: Callable[..., T], *args: object) -> T:
        nonlocal busy
        if sniffio.current_async_library() == "asyncio":
            loop = _virtual_loop()
            if loop is None:
                return await in_thread(call, *args)
            loop.leaping.waiting += 1
            try:
                return await in_thread(call, *args)
            finally:
                loop.leaping.waiting -= 1
        if clock is None or trio.lowlevel.current_clock() is not clock:
            return await in_thread(call, *args)
        busy += 1
        clock.autojump_threshold = math.inf
        try:
            return await in_thread(call, *args)
        finally:
            busy -= 1
            if not busy:
                clock.autojump_threshold = threshold

    monkeypatch.setattr(_spooler, "_in_thread", waited)
