"""What the SyncProducer tests share: both backends, a producer on the fake (with or without a
spool), a gate a plain thread opens, thread watchdogs, and a forked child that reports.

The fixtures (``backend``, ``watchdog``, ``spool_watchdog``) reach ``tests/shell`` through its
``conftest.py``; elsewhere a module imports the ones it uses.
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from kinesis_trio import FailedRecord, ProducerClosedError, ProducerConfig, SyncProducer
from kinesis_trio.testing import FakeKinesis
from kinesis_trio.testing._server import Handler
from tests.support.helpers import CREDS, wait_until

#: records stay unresolved until a flush (the linger and the TTL far away)
HOLD: dict[str, Any] = {"record_max_buffered_time": 600, "record_ttl": 3600}

#: how long a forked child may take to answer (it should answer at once; a hang is the bug,
#: and a busy machine's slowness is not: the bound is far above it)
CHILD_BOUND = 60.0


@pytest.fixture(params=["trio", "asyncio"])
def backend(request: pytest.FixtureRequest) -> str:
    """The SyncProducer's background backend: each test runs on both."""
    return str(request.param)


def _threads_stop(ignore: Callable[[threading.Thread], bool]) -> Iterator[None]:
    before = set(threading.enumerate())
    yield

    def stopped() -> bool:
        left = set(threading.enumerate()) - before
        return not [t for t in left if t.is_alive() and not ignore(t)]

    wait_until(stopped, what="the test's threads to stop")


@pytest.fixture
def watchdog() -> Iterator[None]:
    """Fail (rather than hang) a test whose producer thread never stops."""
    yield from _threads_stop(lambda thread: False)


@pytest.fixture
def spool_watchdog() -> Iterator[None]:
    """:func:`watchdog` for producers with a spool. Trio's idle worker threads (the spool's
    writes ran there) stay cached for a while: not counted."""
    yield from _threads_stop(lambda thread: thread.name.startswith("Trio thread"))


class Gate:
    """A FakeKinesis hook holding every PutRecords until ``opened`` is set (any thread)."""

    def __init__(self) -> None:
        self.opened = threading.Event()
        self.held = 0

    async def __call__(self, operation: str, body: dict[str, Any]) -> httpx.Response | None:
        if operation == "PutRecords":
            self.held += 1
            try:
                while not self.opened.is_set():  # noqa: ASYNC110 -- a threading.Event
                    await anyio.sleep(0.005)
            finally:
                self.held -= 1
        return None


class Never:
    """A fake hook that never answers PutRecords while ``on`` (the producer times out)."""

    def __init__(self) -> None:
        self.on = True

    async def __call__(self, operation: str, body: dict[str, Any]) -> httpx.Response | None:
        if operation == "PutRecords" and self.on:
            await anyio.sleep_forever()
        return None


def new_fake(hook: Handler | None = None, shards: int = 4) -> FakeKinesis:
    """A fake with the stream ``"s"`` of ``shards`` shards, answering through ``hook``."""
    fake = FakeKinesis(hook)
    fake.create_stream("s", shard_count=shards)
    return fake


def sync_producer(
    fake: FakeKinesis,
    backend: str,
    stream: str | None = "s",
    *,
    on_failure: Callable[[FailedRecord], object] | None = None,
    after_fork: str = "raise",
    **config: Any,
) -> SyncProducer:
    """A SyncProducer on ``fake``'s transport; ``config`` goes to its ``ProducerConfig``."""
    return SyncProducer(
        stream,
        region_name="us-east-1",
        endpoint_url="http://fake.local",
        credentials=CREDS,
        config=ProducerConfig(**config),
        transport=fake.transport(),
        backend=backend,
        on_failure=on_failure,
        after_fork=after_fork,
    )


def spooled(
    fake: FakeKinesis,
    backend: str,
    spool: Path,
    *,
    on_failure: Any = None,
    after_fork: str = "raise",
    **config: Any,
) -> SyncProducer:
    """A SyncProducer with its spool in ``spool`` (a linger of 10 ms unless ``config`` says)."""
    config.setdefault("record_max_buffered_time", 0.01)
    return sync_producer(
        fake, backend, on_failure=on_failure, after_fork=after_fork, spool_dir=spool, **config
    )


def in_child(calls: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """Fork; run ``calls`` in the child and return what it reported (the child is killed,
    and the test fails, if it does not report within ``CHILD_BOUND``)."""
    read, write = os.pipe()
    with warnings.catch_warnings():
        # Python 3.12+ warns that forking a multi-threaded process may deadlock: that
        # process is what these tests are about
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
    if pid == 0:  # the child
        os.close(read)
        try:
            report = calls()
        except BaseException as exc:
            report = {"unexpected": f"{type(exc).__name__}: {exc}"}
        os.write(write, json.dumps(report).encode())
        os.close(write)
        os._exit(0)
    os.close(write)
    deadline = time.monotonic() + CHILD_BOUND
    while True:
        done, _ = os.waitpid(pid, os.WNOHANG)
        if done:
            break
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            os.close(read)
            pytest.fail(f"the forked child did not answer within {CHILD_BOUND} s (it hangs)")
        time.sleep(0.01)
    with os.fdopen(read, "rb") as pipe:
        data = pipe.read()
    got: dict[str, Any] = json.loads(data)
    return got


def outcome_of(call: Callable[[], object]) -> dict[str, Any]:
    """What a call did: its error's type and message, or that it returned."""
    started = time.monotonic()
    try:
        call()
    except Exception as exc:
        return {
            "error": type(exc).__name__,
            "closed": isinstance(exc, ProducerClosedError),
            "message": str(exc),
            "seconds": time.monotonic() - started,
        }
    return {"error": None, "seconds": time.monotonic() - started}
