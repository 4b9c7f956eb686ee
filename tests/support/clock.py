"""Trio's virtual clock, waiting for the spool's disk.

``MockClock(autojump_threshold=0)`` jumps to the next deadline whenever no task can run.
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
it around every test on a ``MockClock``).

A store call that waits in its thread for something the loop would do after virtual time
passes would wait for ever (its own real-time bound aside): a test that holds a commit
(``CountingStore.hold``) only checkpoints until it lets it go.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TypeVar

import pytest
import sniffio
import trio.lowlevel
from trio.testing import MockClock

from kinesis_trio._shell import _spooler

T = TypeVar("T")


def wait_for_disk(monkeypatch: pytest.MonkeyPatch, clock: MockClock) -> None:
    """From now on, ``clock`` does not jump while a spool store call runs in its worker
    thread (the spooler's ``_in_thread``): its autojump waits for the thread. Calls made
    on any other clock (a ``SyncProducer``'s own loop) or on asyncio go as they are."""
    in_thread = _spooler._in_thread
    threshold = clock.autojump_threshold
    busy = 0  # store calls in their threads now

    async def waited(call: Callable[..., T], *args: object) -> T:
        nonlocal busy
        if sniffio.current_async_library() != "trio" or trio.lowlevel.current_clock() is not clock:
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
