"""SyncProducer's spool when its writes fail and it closes (issue 51), on both of its
backends against the fake, with several threads: a close after a failed commit ends; a wait
for durability is answered "durable" only when the records are on disk."""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kinesis_trio import SpoolWriteError
from tests.shell.test_sync_spool import HOLD, Never, new_fake, spooled, watchdog  # noqa: F401
from tests.support.spool import BIG, FRESH_PAGES, RoomLater, Stores, count_stores

pytestmark = pytest.mark.usefixtures("watchdog")

#: real seconds a test waits for its threads
THREAD_BOUND = 10.0


@pytest.fixture(params=["trio", "asyncio"])
def backend(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def stores(monkeypatch: pytest.MonkeyPatch) -> Stores:
    return count_stores(monkeypatch)


def in_threads(calls: list[Callable[[], Any]]) -> list[concurrent.futures.Future[Any]]:
    """Run each call in a thread of its own, at once: how each ended."""
    with concurrent.futures.ThreadPoolExecutor(len(calls)) as pool:
        futures = [pool.submit(call) for call in calls]
        concurrent.futures.wait(futures, timeout=THREAD_BOUND)
    return futures


def spool_error(ended: concurrent.futures.Future[Any]) -> bool:
    """A put under ``"put"`` that raised ``SpoolWriteError`` (accepted, not durable), or
    whose record's future says it (refused after a failed write)."""
    error = ended.exception()
    if error is None:
        error = ended.result().exception(timeout=THREAD_BOUND)
    return isinstance(error, SpoolWriteError)


def test_a_close_after_a_failed_commit_under_put_ends(
    tmp_path: Path, backend: str, stores: Stores
) -> None:
    """Before, the writer tried the failed commit again at once, over and over, and never
    saw the close's cancel: ``close()`` hung until the disk had room."""
    never = Never()  # the records stay unresolved: the writer has them to write
    fake = new_fake(never)
    spool = tmp_path / "spool"
    stores.full_disk = FRESH_PAGES
    producer = spooled(
        fake, backend, spool, spool_sync="put", spool_interval=60, close_timeout=0.2, **HOLD
    )

    def put(i: int) -> Callable[[], Any]:
        return lambda: producer.put(b"%d" % i * BIG, "k")

    # the close runs out of close_timeout (nothing answers), and must end
    with RoomLater(stores) as room_later, producer:
        puts = in_threads([put(i) for i in range(4)])
        # each put was accepted and not made durable, or refused after the failure
        assert all(spool_error(ended) for ended in puts)
    assert not room_later.hung, "close() waited for the disk to have room"
    assert len(stores[0].failed) < 10, len(stores[0].failed)
