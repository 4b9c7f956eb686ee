"""SyncProducer with a spool (``ProducerConfig(spool_dir=...)``), on both of its backends
against the fake: the config goes through; ``put`` under ``spool_sync="put"`` returns once
the record is on disk (the threads putting meanwhile share the writes); ``wait_durable``
for the rest; a full disk; a close that keeps what is unresolved, and the next producer's
recovery (``recovered``, ``recovery``, ``on_failure``); one owner; and a forked child that
must not reopen its parent's spool.
"""

from __future__ import annotations

import concurrent.futures
import os
import threading
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from kinesis_trio import (
    FailedRecord,
    RecordResult,
    RecoveryReport,
    SpoolLockedError,
    SpoolWriteError,
)
from kinesis_trio._results import CLOSE_TIMEOUT
from kinesis_trio.testing import FakeKinesis
from tests.support.helpers import connect, user_data, wait_until
from tests.support.spool import BIG, FRESH_PAGES, Stores, data_on_disk, on_disk
from tests.support.sync_kit import HOLD, Never, in_child, new_fake, outcome_of, spooled

pytestmark = pytest.mark.usefixtures("spool_watchdog")


# -- durability ----------------------------------------------------------------------------


def test_the_config_goes_through_and_wait_durable_writes_what_was_put(
    tmp_path: Path, backend: str
) -> None:
    fake = new_fake(shards=2)
    spool = tmp_path / "spool"
    with spooled(fake, backend, spool, spool_interval=600, **HOLD) as producer:
        assert producer.config.spool_dir == spool
        assert producer.recovery == RecoveryReport()  # an empty spool: nothing to recover
        assert producer.recovered(timeout=10) == RecoveryReport()
        futures = [producer.put(b"r%d" % i, "k") for i in range(3)]
        assert not any(f.done() for f in futures)  # queued: put does not wait for the disk
        assert data_on_disk(spool) == []  # the interval is far away
        producer.wait_durable(timeout=10)
        assert data_on_disk(spool) == [b"r0", b"r1", b"r2"]
        assert not any(f.done() for f in futures)  # durable, still unsent
        producer.flush(timeout=10)
        assert all(f.result().ok for f in futures)
    assert on_disk(spool) == []
    assert user_data(fake) == [b"r0", b"r1", b"r2"]
    producer.wait_durable()  # closed: at once


def test_put_under_spool_sync_put_returns_once_the_record_is_on_disk(
    tmp_path: Path, backend: str, stores: Stores
) -> None:
    fake = new_fake(shards=2)
    spool = tmp_path / "spool"
    threads, per_thread = 8, 40
    seen: list[bool] = []
    with spooled(fake, backend, spool, spool_sync="put", **HOLD) as producer:

        def worker(t: int) -> None:
            for i in range(per_thread):
                data = b"%d-%d" % (t, i)
                future = producer.put(data, f"k{t}")
                seen.append(not future.done() and data in data_on_disk(spool))

        workers = [threading.Thread(target=worker, args=(t,)) for t in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        futures = producer.put_many([(b"many-%d" % i, "m") for i in range(50)])
        assert data_on_disk(spool)[-50:] == [b"many-%d" % i for i in range(50)]
        producer.flush(timeout=30)
        assert all(f.result().ok for f in futures)
    total = threads * per_thread
    assert seen == [True] * total
    written = [c for c in stores[0].commits if c.inserts]
    assert sum(len(c.inserts) for c in written) == total + 50
    assert len(user_data(fake)) == total + 50
    assert on_disk(spool) == []


def test_puts_from_threads_waiting_on_one_write_share_the_next(
    tmp_path: Path, backend: str, stores: Stores
) -> None:
    """Group commit, made deterministic: the first write is held until every other
    thread's record is accepted, so however fast the machine, the seven waiting puts are
    in the one write that follows (on the real clock, how many overlap is the machine's
    choice)."""
    fake = new_fake(shards=2)
    spool = tmp_path / "spool"
    threads = 8
    with spooled(fake, backend, spool, spool_sync="put", **HOLD) as producer:
        store = stores[0]
        release = store.hold = threading.Event()
        returned: list[bytes] = []

        def worker(t: int) -> None:
            producer.put(b"t%d" % t, f"k{t}")
            returned.append(b"t%d" % t)

        try:
            first = threading.Thread(target=worker, args=(0,))
            first.start()
            # the write with t0 in it is held
            wait_until(store.holding.is_set, what="the held spool write")
            others = [threading.Thread(target=worker, args=(t,)) for t in range(1, threads)]
            for w in others:
                w.start()
            wait_until(
                lambda: producer._producer.outstanding_records == threads,
                what="every thread's record outstanding",
            )
            assert returned == []  # every put waits for the disk
        finally:
            store.hold = None
            release.set()
        for w in [first, *others]:
            w.join()
        producer.flush(timeout=30)
    assert sorted(returned) == sorted(b"t%d" % t for t in range(threads))
    written = [c for c in store.commits if c.inserts]
    assert [len(c.inserts) for c in written] == [1, threads - 1]
    assert len(user_data(fake)) == threads


def test_wait_durable_times_out_while_the_write_is_held(
    tmp_path: Path, backend: str, stores: Stores
) -> None:
    fake = new_fake(shards=2)
    spool = tmp_path / "spool"
    with spooled(fake, backend, spool, spool_interval=600, **HOLD) as producer:
        store = stores[0]
        release = store.hold = threading.Event()
        try:
            producer.put(b"r0", "k")
            with pytest.raises(TimeoutError, match=r"not in the spool within 0\.2 s"):
                producer.wait_durable(timeout=0.2)
            assert store.holding.is_set()
        finally:
            store.hold = None
            release.set()
        producer.wait_durable(timeout=10)
        assert data_on_disk(spool) == [b"r0"]


def test_a_put_under_spool_sync_put_from_a_callback_is_refused(
    tmp_path: Path, backend: str
) -> None:
    fake = new_fake(shards=2)
    errors: list[BaseException] = []
    with spooled(fake, backend, tmp_path / "spool", spool_sync="put", **HOLD) as producer:

        def again(_: concurrent.futures.Future[RecordResult]) -> None:
            try:
                producer.put(b"from a callback", "k")
            except RuntimeError as exc:
                errors.append(exc)

        first = producer.put(b"first", "k")
        assert not first.done()  # its callback runs on the producer's thread
        first.add_done_callback(again)
        producer.flush(timeout=10)
        wait_until(lambda: errors, what="the callback's error")
    assert "would wait for the spool" in str(errors[0])


def test_a_record_larger_than_the_spool_is_refused_in_the_callers_thread(
    tmp_path: Path, backend: str
) -> None:
    fake = new_fake(shards=2)
    with spooled(fake, backend, tmp_path / "spool", spool_max_bytes=100) as producer:
        with pytest.raises(ValueError, match="spool_max_bytes"):
            producer.put(b"x" * 100, "k")  # 101 bytes with its key
        assert producer.put(b"x" * 99, "k").result(timeout=10).ok


# -- a full disk ---------------------------------------------------------------------------


def test_a_full_disk_under_spool_sync_put(tmp_path: Path, backend: str, stores: Stores) -> None:
    fake = new_fake(shards=2)
    fake.create_stream("other", shard_count=1)
    spool = tmp_path / "spool"
    stores.full_disk = FRESH_PAGES
    with spooled(fake, backend, spool, spool_sync="put", spool_interval=0.05, **HOLD) as p:
        store = stores[0]
        with pytest.raises(SpoolWriteError, match="accepted and will be sent") as info:
            # a stream not loaded yet: the producer's thread waits to load it first
            p.put(b"a" * BIG, "k", stream_name="other")
        first = info.value.outcome
        assert isinstance(first, concurrent.futures.Future)  # the record's future
        refused = p.put(b"b" * BIG, "k")  # refused on the loop: its future says why
        error = refused.exception(timeout=10)
        assert isinstance(error, SpoolWriteError) and error.outcome is None
        assert "not accepted" in str(error)
        store.make_room()
        # written again
        wait_until(lambda: data_on_disk(spool) == [b"a" * BIG], what="the record on disk")

        def accepted() -> bool:  # once the book has seen that commit
            probe = p.put(b"probe", "k")
            return not (probe.done() and probe.exception() is not None)

        wait_until(accepted, what="a put accepted again")
        third = p.put(b"c" * BIG, "k")
        assert data_on_disk(spool)[-1] == b"c" * BIG
        p.flush(timeout=10)
        assert first.result().ok and third.result().ok
    assert b"b" * BIG not in user_data(fake)
    assert user_data(fake, "other") == [b"a" * BIG]
    assert on_disk(spool) == []


def test_a_full_disk_under_spool_sync_interval(
    tmp_path: Path, backend: str, stores: Stores
) -> None:
    fake = new_fake(shards=2)
    spool = tmp_path / "spool"
    stores.full_disk = FRESH_PAGES
    with spooled(fake, backend, spool, spool_interval=0.05, **HOLD) as producer:
        store = stores[0]
        first = producer.put(b"a" * BIG, "k")
        wait_until(lambda: store.failed, what="a failed commit")
        with pytest.raises(SpoolWriteError, match="writing to the spool failed"):
            producer.wait_durable(timeout=10)
        refused = producer.put(b"b" * BIG, "k")
        assert isinstance(refused.exception(timeout=10), SpoolWriteError)
        store.make_room()
        producer.wait_durable(timeout=10)
        assert data_on_disk(spool) == [b"a" * BIG]  # kept, and written once there is room
        third = producer.put(b"c" * BIG, "k")
        producer.wait_durable(timeout=10)
        assert data_on_disk(spool) == [b"a" * BIG, b"c" * BIG]
        producer.flush(timeout=10)
        assert first.result().ok and third.result().ok
    assert b"b" * BIG not in user_data(fake)


# -- close and recovery --------------------------------------------------------------------


def test_a_close_keeps_what_is_unresolved_and_the_next_producer_recovers_it(
    tmp_path: Path, backend: str
) -> None:
    never = Never()
    fake = new_fake(never, shards=2)
    fake.create_stream("gone", shard_count=1)
    spool = tmp_path / "spool"
    failed: list[FailedRecord] = []
    with spooled(fake, backend, spool, close_timeout=0.3, on_failure=failed.append) as first:
        futures = [first.put(b"r%d" % i, "k") for i in range(4)]
        futures += [first.put(b"g%d" % i, "k", stream_name="gone") for i in range(2)]
        first.wait_durable(timeout=10)
    for future in futures:
        result = future.result()
        assert result.error_code == CLOSE_TIMEOUT
        assert "stays in the spool" in (result.error_message or ""), result.error_message
    assert failed == []  # kept for the next producer: not failures
    assert len(on_disk(spool)) == 6

    async def delete_gone() -> None:
        async with connect(fake) as client:
            await client.call("DeleteStream", {"StreamName": "gone"})

    anyio.run(delete_gone)
    never.on = False
    with spooled(fake, backend, spool, on_failure=failed.append) as second:
        report = second.recovered(timeout=30)
        assert (report.records, report.ok, report.failed, report.done) == (6, 4, 2, True)
        assert second.recovery == report
    assert sorted(f.data for f in failed) == [b"g0", b"g1"]
    assert {f.result.error_code for f in failed} == {"ResourceNotFoundException"}
    assert user_data(fake) == [b"r0", b"r1", b"r2", b"r3"]
    assert on_disk(spool) == []


def test_a_record_failed_just_before_the_close_leaves_the_spool_once_on_failure_returns(
    tmp_path: Path, backend: str
) -> None:
    """A record that fails for good while the producer closes is handed to ``on_failure``
    before the spool's last commit: its dead letter leaves the spool with that commit, and
    the next producer does not hand it over again. (It failed a loaded run of the test
    above: the close's last commit ran while ``on_failure`` still held the record.)"""
    held = threading.Event()  # PutRecords to "gone" wait until it is set

    async def hold(operation: str, body: dict[str, Any]) -> httpx.Response | None:
        if operation == "PutRecords" and body["StreamName"] == "gone":
            await anyio.to_thread.run_sync(held.wait, 10)
        return None

    fake = FakeKinesis(hold)
    fake.create_stream("s", shard_count=2)
    spool = tmp_path / "spool"
    entered, release = threading.Event(), threading.Event()
    failed: list[FailedRecord] = []

    def on_failure(record: FailedRecord) -> None:
        entered.set()
        release.wait(10)
        failed.append(record)

    fake.create_stream("gone", shard_count=1)

    async def delete_gone() -> None:
        async with connect(fake) as client:
            await client.call("DeleteStream", {"StreamName": "gone"})

    producer = spooled(fake, backend, spool, on_failure=on_failure)
    with producer:
        future = producer.put(b"lost", "k", stream_name="gone")
        producer.wait_durable(timeout=10)  # in the spool, then its stream goes
        anyio.run(delete_gone)
        held.set()
        assert future.result(timeout=10).error_code == "ResourceNotFoundException"
        assert entered.wait(10)
        # the close starts while on_failure holds the record; it lets it go a while after
        threading.Timer(0.2, release.set).start()
    assert [f.data for f in failed] == [b"lost"]
    assert on_disk(spool) == []
    again: list[FailedRecord] = []
    with spooled(fake, backend, spool, on_failure=again.append) as second:
        assert second.recovered(timeout=10).dead_letters == 0
    assert again == []


def test_a_second_producer_on_the_same_spool_is_refused(tmp_path: Path, backend: str) -> None:
    fake = new_fake(shards=2)
    spool = tmp_path / "spool"
    with spooled(fake, backend, spool) as first:
        with pytest.raises(SpoolLockedError, match="in use by another producer"):
            spooled(fake, backend, spool).open()
        assert first.put(b"still", "k").result(timeout=10).ok
    assert user_data(fake) == [b"still"]


# -- a fork --------------------------------------------------------------------------------


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
def test_reopen_after_a_fork_refuses_a_spool_it_would_share(tmp_path: Path, backend: str) -> None:
    fake = new_fake(shards=2)
    spool = tmp_path / "spool"
    with spooled(fake, backend, spool, after_fork="reopen") as producer:
        assert producer.put(b"before", "k").result(timeout=10).ok

        def calls() -> dict[str, Any]:
            return {
                "put": outcome_of(lambda: producer.put(b"child", "k")),
                "wait_durable": outcome_of(lambda: producer.wait_durable(timeout=5)),
                "close": outcome_of(producer.close),
            }

        report = in_child(calls)
        assert "unexpected" not in report, report
        for name in ("put", "wait_durable"):
            got = report[name]
            assert got["error"] == "ProducerForkedError", (name, got)
            assert "belongs to the parent" in got["message"], got["message"]
            assert str(spool) in got["message"]
        assert report["close"]["error"] is None
        assert producer.put(b"after", "k").result(timeout=10).ok  # the parent goes on
    assert user_data(fake) == [b"after", b"before"]
