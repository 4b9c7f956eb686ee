"""SyncProducer's spool when its writes fail and it closes (issue 51), on both of its
backends against the fake, with several threads: a close after a failed commit ends; a wait
for durability is answered "durable" only when the records are on disk; the records queued
behind a held pump at the close are kept in the spool as the producer's own are."""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from kinesis_trio import FailedRecord, RecoveryReport, SpoolWriteError, SyncProducer
from kinesis_trio._core._spool import Row
from kinesis_trio._disk._store import Damage, SpoolStore
from kinesis_trio._results import ABORTED, CLOSE_TIMEOUT
from kinesis_trio._shell._producer import _OPEN
from kinesis_trio.testing import FakeKinesis
from tests.support.helpers import user_data, wait_until
from tests.support.spool import (
    BIG,
    FRESH_PAGES,
    RoomLater,
    Stores,
    left_behind,
    on_disk,
)
from tests.support.sync_kit import HOLD, Never, new_fake, spooled

pytestmark = pytest.mark.usefixtures("spool_watchdog")

#: real seconds a test waits for its threads
THREAD_BOUND = 10.0


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
    fake = new_fake(never, shards=2)
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
    fake = new_fake(Never(), shards=2)  # the records stay unresolved: the close keeps them
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
            # the commit they wait for, held, and all three accepted (a put still on its way
            # to the producer when the close begins is refused: ProducerClosedError)
            wait_until(
                lambda: store.holding.is_set() and producer.outstanding_records == 3,
                what="a held spool write and three records outstanding",
            )
            closing = pool.submit(producer.close, abort=True)
            # the producer's scope is closing: the task that answered them is cancelled
            wait_until(
                lambda: producer._producer._state != _OPEN, what="the producer to leave open"
            )
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
    fake = new_fake(Never(), shards=2)  # the records stay unresolved: the close keeps them
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
        wait_until(lambda: "closing" in repr(producer), what="the producer closing")
        waits = [pool.submit(wait) for _ in range(3)]
        closing.result(THREAD_BOUND)
        assert [ended.exception(THREAD_BOUND) for ended in waits] == [None] * 3
    assert seen == [3, 3, 3]
    assert len(on_disk(spool)) == 3  # kept for the next producer


def test_wait_durable_after_a_close_that_left_records_unwritten_raises(
    tmp_path: Path, backend: str, stores: Stores
) -> None:
    """Before, it returned: the records it vouched for were not on disk."""
    fake = new_fake(Never(), shards=2)  # the records stay unresolved: the close keeps them
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


# -- the records queued behind a held pump at the close ------------------------------------------


class HeldLoad:
    """A fake hook holding the load of one stream (its DescribeStreamSummary) while ``on``:
    recovery waits there, and new records wait until it has read the spool back."""

    def __init__(self, stream: str) -> None:
        self.stream = stream
        self.on = True
        self.loading = threading.Event()

    async def __call__(self, operation: str, body: dict[str, Any]) -> httpx.Response | None:
        if (
            self.on
            and operation == "DescribeStreamSummary"
            and body.get("StreamName") == self.stream
        ):
            self.loading.set()
            await anyio.sleep_forever()
        return None


def read_back(spool: Path) -> list[Row]:
    """The spool's records as recovery reads them back (the package's store, id order)."""
    store = SpoolStore(spool)
    store.open()
    try:
        items = store.read(0, 10_000)
    finally:
        store.close()
    rows = [item[0] for item in items if not isinstance(item, Damage)]
    assert len(rows) == len(items), items
    return rows


def puts_of(producer: SyncProducer, t: int, n: int, sync: str) -> Callable[[], Any]:
    """A call that puts thread ``t``'s ``n`` records, in order (under ``"put"``, at once:
    ``put`` would wait for the spool after the first): their futures."""
    records = [(b"t%d-%d" % (t, i), f"k{t}") for i in range(n)]
    if sync == "put":
        return lambda: producer.put_many(records)
    return lambda: [producer.put(data, key) for data, key in records]


@pytest.mark.parametrize("sync", ["interval", "put"])
@pytest.mark.parametrize("abort", [False, True], ids=["close", "abort"])
def test_records_queued_behind_a_recovering_spool_at_the_close_stay_in_the_spool(
    tmp_path: Path, backend: str, abort: bool, sync: str
) -> None:
    """Before, the records ``put`` had accepted but still queued between the threads and
    the loop (the pump held back: new records wait while the spool is read back) were
    failed by the close and never reached the spool, unlike the records the producer
    held: lost, though ``put`` had returned for them (under ``"interval"``), or returned
    at the close as if they had their outcome (under ``"put"``)."""
    spool = tmp_path / "spool"
    left_behind(spool, [Row(1, "old", "k", None, b"old-1"), Row(2, "old", "k", None, b"old-2")])
    hook = HeldLoad("old")
    fake = FakeKinesis(hook)
    fake.create_stream("s", shard_count=2)
    fake.create_stream("old", shard_count=1)
    failed: list[FailedRecord] = []
    threads, per_thread = 4, 5
    producer = spooled(
        fake, backend, spool, spool_sync=sync, close_timeout=0.2, on_failure=failed.append
    )
    with producer, concurrent.futures.ThreadPoolExecutor(threads) as pool:
        # recovery is held: the pump waits behind it
        wait_until(hook.loading.is_set, what="recovery held")
        puts = [pool.submit(puts_of(producer, t, per_thread, sync)) for t in range(threads)]
        wait_until(  # queued
            lambda: producer.outstanding_records == threads * per_thread,
            what="every thread's records queued",
        )
        if sync == "interval":  # put returned: accepted
            assert not any(f.done() for ended in puts for f in ended.result(THREAD_BOUND))
        else:  # put_many waits until they are in the spool, or resolved
            assert not any(ended.done() for ended in puts)
        producer.close(abort=abort)
        futures = [f for ended in puts for f in ended.result(THREAD_BOUND)]
    put = [b"t%d-%d" % (t, i) for t in range(threads) for i in range(per_thread)]
    for future in futures:  # failed by the close, as the producer's own records are
        result = future.result(0)
        assert not result.ok
        assert result.error_code == (ABORTED if abort else CLOSE_TIMEOUT)
        assert "it stays in the spool" in (result.error_message or ""), result.error_message
    assert failed == []  # not failed for good: kept
    rows = read_back(spool)  # as the next producer's recovery reads it
    assert [r.data for r in rows[:2]] == [b"old-1", b"old-2"]  # still first
    kept = [r.data for r in rows[2:]]
    assert sorted(kept) == sorted(put)
    for t in range(threads):  # each thread's records in the order it put them
        assert [d for d in kept if d.startswith(b"t%d-" % t)] == put[t * per_thread :][:per_thread]
    assert {(r.stream, r.partition_key) for r in rows[2:]} == {("s", f"k{t}") for t in range(4)}

    hook.on = False  # the next producer on the spool recovers them and sends them
    with spooled(fake, backend, spool) as after:
        report = after.recovered(timeout=THREAD_BOUND)
    assert report == RecoveryReport(records=2 + len(put), ok=2 + len(put), done=True)
    assert user_data(fake) == sorted(put)
    assert user_data(fake, "old") == [b"old-1", b"old-2"]
    assert on_disk(spool) == []


def test_records_queued_behind_a_full_spool_at_the_close_fail_saying_it_had_no_room(
    tmp_path: Path, backend: str
) -> None:
    """The spool full (the producer's records unsent fill ``spool_max_bytes``), the records
    queued behind it cannot be kept: they fail for good (``on_failure``), saying why."""
    fake = new_fake(Never(), shards=2)  # the records stay unresolved: the producer keeps them
    spool = tmp_path / "spool"
    size = 1000  # with its key "k": 1001 bytes; the spool has room for three
    failed: list[FailedRecord] = []
    producer = spooled(
        fake,
        backend,
        spool,
        spool_max_bytes=3 * (size + 1) + size // 2,
        close_timeout=0.2,
        on_failure=failed.append,
        **HOLD,
    )
    with producer:

        def three(t: int) -> Callable[[], list[concurrent.futures.Future[Any]]]:
            return lambda: [producer.put(b"%d" % t * size, "k") for _ in range(3)]

        puts = in_threads([three(t) for t in range(4)])
        futures = [f for ended in puts for f in ended.result(0)]
        wait_until(  # the spool is full
            lambda: producer._producer.outstanding_records == 3, what="three records outstanding"
        )
    results = [f.result(0) for f in futures]
    assert [r.error_code for r in results] == [CLOSE_TIMEOUT] * 12
    kept = [r for r in results if "it stays in the spool" in (r.error_message or "")]
    lost = [r for r in results if "the spool had no room for it" in (r.error_message or "")]
    assert (len(kept), len(lost)) == (3, 9), [r.error_message for r in results]
    assert len(on_disk(spool)) == 3  # the producer's, kept
    assert [f.result.partition_key for f in failed] == ["k"] * 9  # failed for good
    assert all("no room" in (f.result.error_message or "") for f in failed)


def test_records_queued_at_a_close_whose_last_commit_fails_fail_saying_so(
    tmp_path: Path, backend: str, stores: Stores
) -> None:
    """Kept for the spool, but its last commit could not write them (a full disk): they
    fail for good (``on_failure``), saying so, rather than that they stay in the spool."""
    spool = tmp_path / "spool"
    left_behind(spool, [Row(1, "old", "k", None, b"old-1")])
    hook = HeldLoad("old")
    fake = FakeKinesis(hook)
    fake.create_stream("s", shard_count=2)
    fake.create_stream("old", shard_count=1)
    stores.full_disk = FRESH_PAGES
    failed: list[FailedRecord] = []
    producer = spooled(fake, backend, spool, close_timeout=0.2, on_failure=failed.append)
    with producer:
        # recovery is held: the pump waits behind it
        wait_until(hook.loading.is_set, what="recovery held")
        puts = in_threads([put_in(producer, i) for i in range(4)])
        futures = [ended.result(0) for ended in puts]
    for future in futures:
        message = future.result(0).error_message or ""
        assert "last commit did not write it to the spool" in message, message
    assert len(failed) == 4
    assert [r[3] for r in on_disk(spool)] == [b"old-1"]
    assert stores[0].failed  # the close's last commit
    with pytest.raises(SpoolWriteError):
        producer.wait_durable()
