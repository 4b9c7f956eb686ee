"""SyncProducer's spool when its writes fail and it closes (issue 51), on both of its
backends against the fake, with several threads: a close after a failed commit ends; a wait
for durability is answered "durable" only when the records are on disk."""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from kinesis_trio import SpoolWriteError, SyncProducer
from kinesis_trio._shell._producer import _OPEN
from tests.shell.test_sync_spool import (  # noqa: F401 (watchdog: a fixture)
    HOLD,
    Never,
    new_fake,
    spooled,
    wait_until,
    watchdog,
)
from tests.support.spool import BIG, FRESH_PAGES, RoomLater, Stores, count_stores, on_disk

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


def put_in(producer: SyncProducer, i: int) -> Callable[[], Any]:
    """A call that puts record ``i`` (a page of its own: ``BIG``)."""
    return lambda: producer.put(b"%d" % i * BIG, "k")


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

    # the close runs out of close_timeout (nothing answers), and must end
    with RoomLater(stores) as room_later, producer:
        puts = in_threads([put_in(producer, i) for i in range(4)])
        # each put was accepted and not made durable, or refused after the failure
        assert all(spool_error(ended) for ended in puts)
    assert not room_later.hung, "close() waited for the disk to have room"
    assert len(stores[0].failed) < 10, len(stores[0].failed)


# -- a wait for durability and the close -------------------------------------------------------


@pytest.mark.parametrize("sync", ["put", "interval"])
def test_a_wait_for_durability_pending_when_the_close_fails_to_write_raises(
    tmp_path: Path, backend: str, stores: Stores, sync: str
) -> None:
    """Before, the close answered every pending wait for durability (``put`` under
    ``"put"``, ``wait_durable``) "durable", although its last commit had failed and not a
    record was on disk."""
    fake = new_fake(Never())  # the records stay unresolved: the close keeps them
    spool = tmp_path / "spool"
    stores.full_disk = FRESH_PAGES
    producer = spooled(fake, backend, spool, spool_sync=sync, spool_interval=60, **HOLD)
    with producer, concurrent.futures.ThreadPoolExecutor(4) as pool:
        store = stores[0]
        release = store.hold = threading.Event()
        try:
            if sync == "put":  # the puts wait for the commit
                waits = [pool.submit(put_in(producer, i)) for i in range(3)]
            else:
                for i in range(3):
                    producer.put(b"%d" % i * BIG, "k")
                waits = [pool.submit(producer.wait_durable, THREAD_BOUND) for _ in range(3)]
            wait_until(store.holding.is_set)  # the commit they wait for, held
            closing = pool.submit(producer.close, abort=True)
            # the producer's scope is closing: the task that answered them is cancelled
            wait_until(lambda: producer._producer._state != _OPEN)
        finally:
            store.hold = None
            release.set()
        closing.result(THREAD_BOUND)
        for ended in waits:
            error = ended.exception(THREAD_BOUND)
            assert isinstance(error, SpoolWriteError), error
    assert on_disk(spool) == []
    assert len(store.failed) >= 2  # the held commit and the close's


def test_wait_durable_during_a_close_waits_for_its_last_commit(
    tmp_path: Path, backend: str, stores: Stores
) -> None:
    """Before, ``wait_durable()`` called while another thread closed the producer returned
    at once, before anything was on disk (the close's last commit wrote the records
    later): a kill during that close lost what the caller was told was durable."""
    fake = new_fake(Never())  # the records stay unresolved: the close keeps them
    spool = tmp_path / "spool"
    producer = spooled(fake, backend, spool, spool_interval=60, close_timeout=0.5, **HOLD)
    seen: list[int] = []

    def wait() -> None:
        producer.wait_durable(THREAD_BOUND)
        seen.append(len(on_disk(spool)))  # what a kill at this moment would leave

    with producer, concurrent.futures.ThreadPoolExecutor(4) as pool:
        puts = in_threads([put_in(producer, i) for i in range(3)])
        assert all(ended.exception() is None for ended in puts)
        closing = pool.submit(producer.close)
        wait_until(lambda: "closing" in repr(producer))
        waits = [pool.submit(wait) for _ in range(3)]
        closing.result(THREAD_BOUND)
        assert [ended.exception(THREAD_BOUND) for ended in waits] == [None] * 3
    assert seen == [3, 3, 3]
    assert len(on_disk(spool)) == 3  # kept for the next producer


def test_wait_durable_after_a_close_that_left_records_unwritten_raises(
    tmp_path: Path, backend: str, stores: Stores
) -> None:
    """Before, it returned: the records it vouched for were not on disk."""
    fake = new_fake(Never())  # the records stay unresolved: the close keeps them
    spool = tmp_path / "spool"
    stores.full_disk = FRESH_PAGES
    producer = spooled(fake, backend, spool, spool_interval=60, close_timeout=0.2, **HOLD)
    with producer:
        puts = in_threads([put_in(producer, i) for i in range(3)])
        assert all(ended.exception() is None for ended in puts)
    waits = in_threads([lambda: producer.wait_durable(THREAD_BOUND) for _ in range(3)])
    for ended in waits:
        assert isinstance(ended.exception(), SpoolWriteError), ended.exception()
        assert "closed" in str(ended.exception())
    assert on_disk(spool) == []
