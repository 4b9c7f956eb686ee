"""The spool as a producer's user sees it (``ProducerConfig(spool_dir=...)``), on both
backends against the fake: when ``put`` returns the record is on disk (``"put"``) or soon
is (``"interval"``); what is resolved leaves; a close keeps what is unresolved and the next
producer sends it first; the spool bounds itself, survives a full disk, has one owner and
stays the parent's across a fork.

The spool's file is read with a read-only SQLite connection of the test's own. The store is
reached through the spooler's ``SpoolStore`` name (the seam: a subclass that counts
commits and reads, and can fill the disk).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import select
import signal
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import anyio.from_thread
import anyio.lowlevel
import httpx
import pytest

from kinesis_trio import (
    Outcome,
    Producer,
    ProducerForkedError,
    RecoveryReport,
    SpoolLockedError,
    SpoolWriteError,
    deaggregate,
)
from kinesis_trio._core import _ledger
from kinesis_trio._core._spool import Row
from kinesis_trio._disk._store import SpoolStore
from kinesis_trio._results import CLOSE_TIMEOUT
from kinesis_trio.testing import FakeKinesis
from tests.support.helpers import connect, fake_producer
from tests.support.spool import (
    BIG,
    FRESH_PAGES,
    CountingStore,
    Stores,
    data_on_disk,
    left_behind,
    on_disk,
)

pytestmark = [pytest.mark.anyio, pytest.mark.virtual_time]

#: real seconds a test waits for a commit in a worker thread before it fails
COMMIT_BOUND = 10.0
#: real seconds a test waits for the end of a recovery before it fails
RECOVERY_BOUND = 60.0


# -- the seam, the file, the fake -------------------------------------------------------------


async def commit_done(store: CountingStore, before: int, *, failed: bool = False) -> None:
    """Wait until the store has written (or failed) a commit more than ``before``.

    Polls with bare checkpoints: a task that is never blocked keeps trio's MockClock from
    jumping to the next deadline, so the virtual time the test reads afterwards is the
    commit's. Fails after ``COMMIT_BOUND`` real seconds."""
    seen = store.failed if failed else store.commits
    deadline = time.monotonic() + COMMIT_BOUND
    while len(seen) <= before:
        if time.monotonic() > deadline:
            pytest.fail(f"no commit within {COMMIT_BOUND} s")
        await anyio.lowlevel.checkpoint()


async def eventually(check: Callable[[], bool], interval: float) -> None:
    """Sleep ``interval`` (the spool's: a commit is due by then), then wait until
    ``check()`` holds, polling with bare checkpoints (see :func:`commit_done`)."""
    await anyio.sleep(interval)
    deadline = time.monotonic() + COMMIT_BOUND
    while not check():
        if time.monotonic() > deadline:
            pytest.fail(f"not so within {COMMIT_BOUND} s")
        await anyio.lowlevel.checkpoint()


async def _spin() -> None:
    while True:
        await anyio.lowlevel.checkpoint()


@asynccontextmanager
async def frozen_clock() -> AsyncIterator[None]:
    """Virtual time stands still inside (a task that never blocks keeps trio's MockClock
    from jumping to the next deadline): what is unresolved stays so, and a commit asked
    of the writer comes at once or never. Nothing inside may sleep."""
    async with anyio.create_task_group() as tg:
        tg.start_soon(_spin)
        yield
        tg.cancel_scope.cancel()


class Gate:
    """A fake hook holding every PutRecords while closed (``open`` lets them through);
    ``never`` holds them for good."""

    def __init__(self, *, opened: bool = True) -> None:
        self.event = anyio.Event()
        if opened:
            self.event.set()
        self.never = False

    def close(self) -> None:
        if self.event.is_set():
            self.event = anyio.Event()

    def open(self) -> None:
        self.event.set()

    async def __call__(self, operation: str, body: dict[str, Any]) -> httpx.Response | None:
        if operation == "PutRecords":
            if self.never:
                await anyio.sleep_forever()
            await self.event.wait()
        return None


def new_fake(hook: Gate | None = None, shards: int = 1) -> FakeKinesis:
    fake = FakeKinesis(hook)
    create(fake, "s", shards)
    return fake


def create(fake: FakeKinesis, name: str, shards: int = 1) -> None:
    fake.create_stream(name, shard_count=shards)


def spooled(fake: FakeKinesis, spool: Path, **config: Any) -> Producer:
    config.setdefault("record_max_buffered_time", 0.01)
    # records must not expire on the way
    config.setdefault("record_ttl", 1e6)
    return fake_producer(fake, spool_dir=spool, **config)


def stored(fake: FakeKinesis, stream: str = "s") -> list[tuple[str | None, bytes]]:
    """The user records the fake holds (partition key, data), each shard in the order it
    stored them."""
    out: list[tuple[str | None, bytes]] = []
    for record in fake.records(stream):
        for user in deaggregate(record.data, record.partition_key):
            out.append((user.partition_key, user.data))
    return out


#: settings that keep records unresolved until a flush: the linger and the TTL far away
HOLD: dict[str, Any] = {"record_max_buffered_time": 1e5, "record_ttl": 1e6}


async def recovered(producer: Producer) -> RecoveryReport:
    """``producer.recovered()``, failing instead of hanging if recovery never ends: a
    watchdog thread bounds it in real time, on either backend."""
    token = anyio.lowlevel.current_token()
    done = threading.Event()
    with anyio.CancelScope() as scope:

        def watchdog() -> None:
            if not done.wait(RECOVERY_BOUND):
                with contextlib.suppress(RuntimeError):  # the loop is gone
                    anyio.from_thread.run_sync(scope.cancel, token=token)

        threading.Thread(target=watchdog, daemon=True).start()
        try:
            return await producer.recovered()
        finally:
            done.set()
    pytest.fail(f"recovery did not end within {RECOVERY_BOUND} s")


async def leave_unresolved(
    spool: Path, records: list[tuple[bytes, str]], *, stream: str | None = None, **config: Any
) -> list[Outcome]:
    """A producer that puts ``records`` to a fake that never answers and closes: they stay
    in the spool for the next producer. Returns their outcomes."""
    gate = Gate()
    gate.never = True
    fake = new_fake(gate)
    if stream is not None:
        create(fake, stream)
    async with spooled(fake, spool, close_timeout=0.2, **config) as producer:
        outcomes = [
            await producer.put(data, key, stream_name=stream if i % 2 else None)
            for i, (data, key) in enumerate(records)
        ]
    return outcomes


# -- spool_sync="put" ----------------------------------------------------------------------


async def test_put_returns_once_the_record_is_in_the_spool(tmp_path: Path, stores: Stores) -> None:
    fake = new_fake()
    spool = tmp_path / "spool"
    async with spooled(fake, spool, spool_sync="put", **HOLD) as producer, frozen_clock():
        for i in range(3):
            outcome = await producer.put(b"r%d" % i, "k")
            assert not outcome.done()  # still in the producer's buffers, unsent
            assert data_on_disk(spool)[-1] == b"r%d" % i  # and on disk already
        await producer.flush()
        assert outcome.result().ok
    assert [c.inserts[0].data for c in stores[0].commits if c.inserts] == [b"r0", b"r1", b"r2"]
    assert on_disk(spool) == []  # sent: deleted


async def test_on_the_virtual_clock_the_disk_takes_no_time(tmp_path: Path, stores: Stores) -> None:
    """The tests' own clock (``tests/support/clock.py``): on virtual time (trio's and
    asyncio's) a store call in its worker thread takes no virtual time. Before, trio's
    MockClock leapt from timer to timer of the producer while each commit ran (hours of
    virtual time in a test)."""
    fake = new_fake()
    spool = tmp_path / "spool"
    async with spooled(fake, spool, spool_sync="put", **HOLD) as producer:
        started = anyio.current_time()
        for i in range(20):
            await producer.put(b"r%d" % i, "k")  # each waits for a commit in a thread
        assert anyio.current_time() == started
        await producer.flush()
    assert len([c for c in stores[0].commits if c.inserts]) == 20
    assert len(stored(fake)) == 20


async def test_concurrent_puts_share_commits(tmp_path: Path, stores: Stores) -> None:
    fake = new_fake(shards=4)
    spool = tmp_path / "spool"
    durable: list[bool] = []
    async with spooled(fake, spool, spool_sync="put", **HOLD) as producer:

        async def put(i: int) -> None:
            outcome = await producer.put(b"r%d" % i, f"k{i}")
            durable.append(not outcome.done() and b"r%d" % i in data_on_disk(spool))

        async with frozen_clock(), anyio.create_task_group() as tg:
            for i in range(200):
                tg.start_soon(put, i)
        written = [c for c in stores[0].commits if c.inserts]
        assert sum(len(c.inserts) for c in written) == 200
        # group commit: the puts waiting while one commit runs share the next one
        assert len(written) <= 10, [len(c.inserts) for c in written]
    assert durable == [True] * 200
    assert len(stored(fake)) == 200


# -- spool_sync="interval" -----------------------------------------------------------------


async def test_interval_put_returns_at_once_and_the_record_is_written_within_the_interval(
    tmp_path: Path, stores: Stores
) -> None:
    fake = new_fake()
    spool = tmp_path / "spool"
    interval = 0.2
    async with spooled(fake, spool, spool_interval=interval, **HOLD) as p:
        store = stores[0]
        before = len(store.commits)
        started = anyio.current_time()
        await p.put(b"r0", "k")
        assert anyio.current_time() == started  # no wait for the disk
        assert data_on_disk(spool) == []
        await anyio.sleep(interval)
        await commit_done(store, before)
        assert data_on_disk(spool) == [b"r0"]
        # virtual time: the loss window is the interval
        assert anyio.current_time() - started <= interval + 1e-6
        # put_nowait, then wait for durability
        async with frozen_clock():
            for i in range(1, 4):
                p.put_nowait(b"r%d" % i, "k")
            await p.wait_durable()
        assert data_on_disk(spool) == [b"r0", b"r1", b"r2", b"r3"]
        await p.flush()
    assert on_disk(spool) == []


async def test_a_record_confirmed_before_the_next_commit_is_never_written(
    tmp_path: Path, stores: Stores
) -> None:
    gate = Gate()
    fake = new_fake(gate)
    spool = tmp_path / "spool"
    async with spooled(fake, spool, spool_interval=60) as producer:
        quick = await producer.put(b"quick", "k")
        assert (await quick.wait()).ok  # sent long before the interval's commit
        gate.close()
        async with frozen_clock():
            slow = await producer.put(b"slow", "k")
            await producer.wait_durable()
        assert data_on_disk(spool) == [b"slow"]
        gate.open()
        assert (await slow.wait()).ok
    inserted = [row.data for c in stores[0].commits for row in c.inserts]
    assert inserted == [b"slow"]
    deleted = [row_id for c in stores[0].commits for row_id in c.deletes]
    assert len(deleted) == 1  # the slow one, once done
    assert on_disk(spool) == []


@pytest.mark.parametrize("fails", [False, True])
async def test_wait_durable_waits_for_the_commit_under_way(
    tmp_path: Path, stores: Stores, fails: bool
) -> None:
    """A record taken by a commit that is still being written is not durable yet: before,
    ``wait_durable()`` returned at once when it was called while that commit ran (and
    returned even when the commit then failed)."""
    fake = new_fake()
    spool = tmp_path / "spool"
    if fails:
        stores.full_disk = FRESH_PAGES  # that commit fails, and the next ones
    record = b"r" * BIG
    async with spooled(fake, spool, spool_interval=0.05, **HOLD) as producer:
        store = stores[0]
        release = store.hold = threading.Event()
        await producer.put(record, "k")
        await eventually(store.holding.is_set, 0.05)  # the interval's commit, held
        waited: list[str] = []

        async def wait() -> None:
            try:
                await producer.wait_durable()
            except SpoolWriteError:
                waited.append("failed")
            else:
                waited.append("durable")

        try:
            async with frozen_clock(), anyio.create_task_group() as tg:
                tg.start_soon(wait)
                for _ in range(100):
                    await anyio.lowlevel.checkpoint()
                assert waited == []  # the commit is still under way
                store.hold = None
                release.set()
        finally:
            store.hold = None
            release.set()
        assert waited == (["failed"] if fails else ["durable"])
        assert data_on_disk(spool) == ([] if fails else [record])
        await producer.flush()


async def test_wait_durable_asked_as_the_writers_interval_ends_commits_at_once(
    tmp_path: Path, stores: Stores
) -> None:
    """A wait for durability has the writer commit at once. Before, a wait that asked in
    the very turn the writer's wait for its interval ended was lost (the writer made a new
    wake-up event, dropping the one just set), and its commit waited one more interval (for
    ever inside ``frozen_clock()``). On trio both wake up at the same virtual instant, in an
    order trio draws by chance: 30 tries meet both orders."""
    fake = new_fake()
    spool = tmp_path / "spool"
    interval = 0.02
    async with spooled(fake, spool, spool_interval=interval, **HOLD) as producer:
        for i in range(30):
            await anyio.sleep(interval)  # ends as the writer's wait does (it began with ours)
            asked = anyio.current_time()
            producer.put_nowait(b"r%d" % i, "k")
            await producer.wait_durable()  # asked in this very turn: no checkpoint before
            # the disk takes no virtual time: at once, not an interval later
            assert anyio.current_time() == asked, i
            assert data_on_disk(spool)[-1] == b"r%d" % i
        await producer.flush()
    assert len(stored(fake)) == 30


async def test_done_records_leave_the_spool_at_the_next_commit(
    tmp_path: Path, stores: Stores
) -> None:
    fake = new_fake()
    spool = tmp_path / "spool"
    async with spooled(fake, spool, spool_sync="put", spool_interval=0.05, **HOLD) as producer:
        async with frozen_clock():
            for i in range(5):
                await producer.put(b"r%d" % i, "k")
            assert len(on_disk(spool)) == 5
            await producer.flush()
        await eventually(lambda: on_disk(spool) == [], 0.05)  # deletes wait for the interval
        assert len(fake.records("s")) >= 1


# -- close and recovery --------------------------------------------------------------------


async def test_close_keeps_unresolved_records_in_the_spool_and_the_next_producer_sends_them(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    spool = tmp_path / "spool"
    gate = Gate()
    gate.never = True  # the first producer never hears back
    fake = new_fake(gate)
    async with spooled(fake, spool, close_timeout=0.2) as first:
        outcomes = [await first.put(b"r%d" % i, "k") for i in range(5)]
    for outcome in outcomes:
        result = outcome.result()
        assert not result.ok and result.error_code == CLOSE_TIMEOUT
        assert "stays in the spool" in (result.error_message or "")
    assert [f async for f in first.failures()] == []  # not dead letters: they are kept
    assert data_on_disk(spool) == [b"r%d" % i for i in range(5)]

    fake.hook = None
    with caplog.at_level(logging.INFO, logger="kinesis_trio"):
        async with spooled(fake, spool) as second:
            report = await recovered(second)
            assert report == RecoveryReport(records=5, ok=5, failed=0, damaged=0, done=True)
            assert second.recovery == report
            assert second.metrics.totals()["SpoolRecordsRecovered"] == 5
    assert [f async for f in second.failures()] == []
    assert sorted(data for _, data in stored(fake)) == [b"r%d" % i for i in range(5)]
    assert on_disk(spool) == []
    line = next(r.getMessage() for r in caplog.records if "spool_recovered" in r.getMessage())
    assert "records=5" in line and "ok=5" in line and "failed=0" in line


async def test_recovered_records_go_first_in_put_order_per_key(tmp_path: Path) -> None:
    spool = tmp_path / "spool"
    old = [(b"%s-old-%02d" % (k.encode(), i), k) for i in range(40) for k in ("a", "b", "c")]
    await leave_unresolved(spool, old, ordering="per_key")
    assert len(on_disk(spool)) == 120

    fake = new_fake(shards=2)
    async with spooled(fake, spool, ordering="per_key") as producer:
        assert not producer.recovery.done  # new records come while it recovers
        for i in range(5):
            for k in ("a", "b", "c"):
                await producer.put(b"%s-new-%02d" % (k.encode(), i), k)
        report = await recovered(producer)
        assert (report.records, report.ok, report.failed) == (120, 120, 0)
        await producer.flush()
    landed = stored(fake)
    for k in ("a", "b", "c"):
        got = [data for key, data in landed if key == k]
        old_k = [b"%s-old-%02d" % (k.encode(), i) for i in range(40)]
        new_k = [b"%s-new-%02d" % (k.encode(), i) for i in range(5)]
        assert got == old_k + new_k
    assert on_disk(spool) == []


async def test_recovered_records_of_a_stream_gone_fail_for_good(tmp_path: Path) -> None:
    spool = tmp_path / "spool"
    records = [(b"r%d" % i, "k") for i in range(6)]  # odd ones to "gone"
    await leave_unresolved(spool, records, stream="gone")
    assert len(on_disk(spool)) == 6

    fake = new_fake()  # "gone" does not exist here
    async with spooled(fake, spool) as producer:
        report = await recovered(producer)
        assert (report.records, report.ok, report.failed) == (6, 3, 3)
        totals = producer.metrics.totals()
        assert totals["SpoolRecordsRecovered"] == 6
        assert totals["SpoolRecordsRecoveredFailed"] == 3
    failed = [f async for f in producer.failures()]
    assert sorted(f.data for f in failed) == [b"r1", b"r3", b"r5"]
    assert {f.stream_name for f in failed} == {"gone"}
    assert {f.result.error_code for f in failed} == {"ResourceNotFoundException"}
    assert sorted(data for _, data in stored(fake)) == [b"r0", b"r2", b"r4"]
    # the failed ones are dead letters, taken after the close: they stay, to be handed to
    # failures() again by the next producer, never sent (test_spool_dead_letters.py)
    assert sorted(data_on_disk(spool)) == [b"r1", b"r3", b"r5"]


async def test_a_stream_deleted_between_two_producers(tmp_path: Path) -> None:
    """The same through the API: DeleteStream on the fake the first producer used."""
    spool = tmp_path / "spool"
    gate = Gate()
    gate.never = True
    fake = new_fake(gate)
    create(fake, "other")
    async with spooled(fake, spool, close_timeout=0.2) as first:
        await first.put(b"kept", "k")
        await first.put(b"lost", "k", stream_name="other")
    async with connect(fake) as client:
        await client.call("DeleteStream", {"StreamName": "other"})
    fake.hook = None
    async with spooled(fake, spool) as second:
        report = await recovered(second)
    assert (report.records, report.ok, report.failed) == (2, 1, 1)
    assert [f.data async for f in second.failures()] == [b"lost"]
    assert data_on_disk(spool) == [b"lost"]  # a dead letter taken after the close stays


async def test_a_wait_for_recovery_ends_when_the_producer_closes(tmp_path: Path) -> None:
    """Before, a task waiting in ``recovered()`` while the producer closed with recovered
    records unsent waited for ever (its recovery task was cancelled, and nothing woke it
    once the producer was closed)."""
    spool = tmp_path / "spool"
    await leave_unresolved(spool, [(b"r%d" % i, "k") for i in range(3)])
    gate = Gate()
    gate.never = True  # the second producer never hears back either
    fake = new_fake(gate)
    reports: list[RecoveryReport] = []
    async with anyio.create_task_group() as tg:
        async with spooled(fake, spool, close_timeout=0.2) as producer:

            async def wait() -> None:
                reports.append(await recovered(producer))

            tg.start_soon(wait)
            # all three accepted (recovery accepts nothing once the producer closes)
            await eventually(lambda: producer.recovery.records == 3, 0.1)
        assert producer.recovery.records == 3
    assert reports == [RecoveryReport(records=3, ok=0, failed=0, damaged=0, done=False)]
    assert len(on_disk(spool)) == 3  # kept again, for the next one


async def test_recovery_streams_a_large_backlog_from_disk(
    tmp_path: Path, stores: Stores, monkeypatch: pytest.MonkeyPatch
) -> None:
    spool = tmp_path / "spool"
    backlog = 20_000
    rows = [Row(i + 1, "s", f"k{i % 97}", None, b"%06d" % i) for i in range(backlog)]
    left_behind(spool, rows)

    peak = 0
    accept = _ledger.Ledger.accept

    def counted(self: _ledger.Ledger, outcome: Outcome, size: int) -> None:
        nonlocal peak
        accept(self, outcome, size)
        peak = max(peak, self.records)

    monkeypatch.setattr(_ledger.Ledger, "accept", counted)
    fake = new_fake(shards=2)
    async with spooled(fake, spool, max_outstanding_records=1000) as producer:
        report = await recovered(producer)
    assert (report.records, report.ok, report.failed) == (backlog, backlog, 0)
    assert 0 < peak <= 1000
    assert stores[0].reads and max(stores[0].reads) == 500
    assert len(stores[0].reads) >= backlog // 500
    assert len(stored(fake)) == backlog
    assert on_disk(spool) == []


# -- room ----------------------------------------------------------------------------------


async def test_a_full_spool_makes_put_wait_until_records_are_done(
    tmp_path: Path, stores: Stores
) -> None:
    gate = Gate(opened=False)
    fake = new_fake(gate)
    spool = tmp_path / "spool"
    async with spooled(fake, spool, spool_max_bytes=1000, spool_interval=0.05) as producer:
        with pytest.raises(ValueError, match="spool_max_bytes"):
            await producer.put(b"x" * 1000, "k")  # 1001 bytes: it could never fit
        outcomes = [await producer.put(b"%0100d" % i, "k") for i in range(9)]  # 909 bytes
        with anyio.move_on_after(0.5) as waited:
            await producer.put(b"%0100d" % 9, "k")
        assert waited.cancelled_caught  # backpressure: it waits, no error
        assert producer.outstanding_records == 9  # and was not accepted
        late: list[Outcome] = []

        async def put_late() -> None:
            late.append(await producer.put(b"%0100d" % 9, "k"))

        async with anyio.create_task_group() as tg:
            tg.start_soon(put_late)
            await anyio.sleep(0.1)
            assert not late  # still waiting
            gate.open()  # the 9 are sent, leave the spool, and make room
        for outcome in [*outcomes, *late]:
            assert (await outcome.wait()).ok
    assert len(stored(fake)) == 10


# -- a full disk ---------------------------------------------------------------------------


async def test_a_full_disk_under_put_raises_with_the_outcome_and_recovers(
    tmp_path: Path, stores: Stores
) -> None:
    fake = new_fake()
    spool = tmp_path / "spool"
    stores.full_disk = FRESH_PAGES
    async with spooled(fake, spool, spool_sync="put", spool_interval=0.05, **HOLD) as producer:
        store = stores[0]
        async with frozen_clock():
            with pytest.raises(SpoolWriteError, match="not durable") as info:
                await producer.put(b"a" * BIG, "k")
            first = info.value.outcome
            assert isinstance(first, Outcome)  # accepted all the same: it is sent
            with pytest.raises(SpoolWriteError, match="not accepted") as refused:
                await producer.put(b"b" * BIG, "k")
            assert refused.value.outcome is None
        store.make_room()
        # the failed commit's record, written again
        await eventually(lambda: data_on_disk(spool) == [b"a" * BIG], 0.05)
        async with frozen_clock():
            await producer.wait_durable()  # that commit is seen through
            third = await producer.put(b"c" * BIG, "k")
            assert data_on_disk(spool) == [b"a" * BIG, b"c" * BIG]
            await producer.flush()
        assert first.result().ok and third.result().ok
    assert sorted(d[:1] for _, d in stored(fake)) == [b"a", b"c"]
    assert on_disk(spool) == []


async def test_a_full_disk_under_interval_refuses_new_records_and_keeps_the_accepted(
    tmp_path: Path, stores: Stores
) -> None:
    fake = new_fake()
    spool = tmp_path / "spool"
    stores.full_disk = FRESH_PAGES
    async with spooled(fake, spool, spool_interval=0.05, **HOLD) as p:
        store = stores[0]
        first = await p.put(b"a" * BIG, "k")  # accepted: the write comes later
        await eventually(lambda: len(store.failed) >= 1, 0.05)  # the interval's commit
        async with frozen_clock():
            with pytest.raises(SpoolWriteError, match="failed"):
                await p.wait_durable()
        for tries in (3, 4):  # refused while the writes fail (each interval tries again)
            with pytest.raises(SpoolWriteError, match="not accepted") as refused:
                await p.put(b"b" * BIG, "k")
            assert refused.value.outcome is None
            await eventually(lambda: len(store.failed) >= tries, 0.05)  # noqa: B023
        store.make_room()
        # kept, and written at the next commit
        await eventually(lambda: data_on_disk(spool) == [b"a" * BIG], 0.05)
        async with frozen_clock():
            await p.wait_durable()  # that commit is seen through
            third = await p.put(b"c" * BIG, "k")  # the producer goes on
            await p.wait_durable()
            assert data_on_disk(spool) == [b"a" * BIG, b"c" * BIG]
            await p.flush()
        assert first.result().ok and third.result().ok
    assert sorted(d[:1] for _, d in stored(fake)) == [b"a", b"c"]
    assert on_disk(spool) == []


# -- one owner -----------------------------------------------------------------------------


async def test_a_second_producer_on_the_same_spool_is_refused_and_the_first_goes_on(
    tmp_path: Path,
) -> None:
    fake = new_fake()
    spool = tmp_path / "spool"
    async with spooled(fake, spool) as first:
        assert (await (await first.put(b"one", "k")).wait()).ok
        with pytest.raises(SpoolLockedError, match="in use by another producer"):
            async with spooled(fake, spool):
                pytest.fail("entered")  # pragma: no cover
        assert (await (await first.put(b"two", "k")).wait()).ok
        await first.wait_durable()
    assert [d for _, d in stored(fake)] == [b"one", b"two"]
    assert on_disk(spool) == []


# -- a fork --------------------------------------------------------------------------------

#: how long a forked child may take to answer, and lives at most (it waits for the parent,
#: whose other process opening the spool took more than 10 s on a busy machine: the child
#: had left, and the parent's "go" met a closed pipe)
CHILD_BOUND = 60.0


@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
async def test_a_forked_child_refuses_records_and_leaves_the_spool_to_its_parent(
    tmp_path: Path,
) -> None:
    fake = new_fake()
    spool = tmp_path / "spool"
    async with spooled(fake, spool) as producer:
        assert (await (await producer.put(b"before", "k")).wait()).ok
        report_r, report_w = os.pipe()
        go_r, go_w = os.pipe()
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # forking with threads
            pid = os.fork()
        if pid == 0:  # the child: report, then live on until the parent says
            try:
                producer.put_nowait(b"child", "k")
                said = "accepted"
            except ProducerForkedError as exc:
                said = f"ProducerForkedError: {exc}"
            except BaseException as exc:  # pragma: no cover - reported to the parent
                said = f"{type(exc).__name__}: {exc}"
            os.write(report_w, said.encode())
            os.close(report_w)
            select.select([go_r], [], [], CHILD_BOUND)
            os._exit(0)
        try:
            os.close(report_w)
            os.close(go_r)
            ready, _, _ = select.select([report_r], [], [], CHILD_BOUND)
            assert ready, "the child did not answer"
            said = os.read(report_r, 4096).decode()
            assert said.startswith("ProducerForkedError: "), said
            assert f"opened in process {os.getpid()}" in said
            # the child let go of its copy without unlocking: the parent still owns it
            with pytest.raises(SpoolLockedError):
                SpoolStore(spool).open()
            assert (await (await producer.put(b"after", "k")).wait()).ok
            await producer.flush()
        except BaseException:
            end_child(pid, go_w, report_r)
            raise
    try:
        # the parent closed, the child lives on: another process may open the spool
        out = open_elsewhere(spool, pid)
        assert out.returncode == 0 and out.stdout.strip() == "opened", out.stderr[-2000:]
    finally:
        end_child(pid, go_w, report_r)
    assert sorted(d for _, d in stored(fake)) == [b"after", b"before"]


ROOT = Path(__file__).resolve().parents[2]


def open_elsewhere(spool: Path, child: int) -> subprocess.CompletedProcess[str]:
    """Open the spool in another process, while ``child`` (a forked one) still lives."""
    assert os.waitpid(child, os.WNOHANG) == (0, 0)
    return subprocess.run(
        [sys.executable, "-c", OPEN_SPOOL, str(spool)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def end_child(pid: int, go: int, report: int) -> None:
    """Tell the forked child to leave (it is killed if it has not after a bound)."""
    os.write(go, b"go")
    os.close(go)
    os.close(report)
    deadline = time.monotonic() + CHILD_BOUND
    while os.waitpid(pid, os.WNOHANG) == (0, 0):
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return
        time.sleep(0.01)


#: another process opening the spool (``sys.argv[1]``)
OPEN_SPOOL = """
import sys
from kinesis_trio._disk._store import SpoolStore
store = SpoolStore(sys.argv[1])
store.open()
store.close()
print("opened")
"""

#: a producer with a spool that forks a child, which calls it, then dies without closing
#: (a crash): the child lives on (until killed) and must not keep the spool from the next
#: process. Prints the child's pid and what its call raised as one line.
CRASHING_PARENT = """
import json, os, sys, time, warnings
import anyio
from kinesis_trio import Producer, ProducerConfig, ProducerForkedError
from kinesis_trio.testing import FakeKinesis
from tests.support.helpers import CREDS

async def main() -> None:
    fake = FakeKinesis()
    fake.create_stream("s", 1)
    config = ProducerConfig(spool_dir=sys.argv[1], spool_sync="put", record_max_buffered_time=60)
    producer = Producer(
        "s", region_name="us-east-1", endpoint_url="http://fake.local",
        credentials=CREDS, config=config, transport=fake.transport(),
    )
    async with producer:
        await producer.put(b"unsent", "k")  # on disk, still unsent at the crash
        read, write = os.pipe()
        warnings.simplefilter("ignore", DeprecationWarning)
        pid = os.fork()
        if pid == 0:
            try:
                producer.put_nowait(b"child", "k")
                said = "accepted"
            except ProducerForkedError:
                said = "ProducerForkedError"
            os.write(write, said.encode())
            time.sleep(60)  # lives on, until the test kills it
            os._exit(0)
        said = os.read(read, 100).decode()
        print(json.dumps({"child": pid, "said": said}), flush=True)
        os._exit(0)  # the parent dies: no close, no unlock

anyio.run(main, backend=sys.argv[2])
"""


@pytest.mark.subprocess
@pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")
@pytest.mark.parametrize("backend", ["trio", "asyncio"])
def test_a_forked_child_does_not_keep_a_dead_parents_spool(tmp_path: Path, backend: str) -> None:
    spool = tmp_path / "spool"
    out_path = tmp_path / "out.txt"
    with out_path.open("w") as out:  # a file, not a pipe: the child lives on with it
        done = subprocess.run(
            [sys.executable, "-c", CRASHING_PARENT, str(spool), backend],
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
            timeout=60,
            check=False,
        )
    text = out_path.read_text()
    assert done.returncode == 0, text[-3000:]
    report = json.loads(text.strip().splitlines()[-1])
    child = int(report["child"])
    try:
        assert report["said"] == "ProducerForkedError"
        os.kill(child, 0)  # alive
        store = SpoolStore(spool)
        store.open()  # not SpoolLockedError: the child let go of the lock at the fork
        try:
            assert [row.data for row, _ in store.read(0, 10)] == [b"unsent"]  # type: ignore[misc]
        finally:
            store.close()
    finally:
        os.kill(child, signal.SIGKILL)
