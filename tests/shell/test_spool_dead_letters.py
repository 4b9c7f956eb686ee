"""Dead letters in the spool (issue 51's rule), on both backends against the fake: a record
failed for good stays in the spool until the application has taken it from ``failures()``
(or ``on_failure`` has returned) or the failures buffer dropped it; a crash in between keeps
it, and the next producer hands it to ``failures()`` again instead of sending it.

A crash is the spool's file as the process leaves it, taken while the producer runs: a
consistent copy through SQLite's backup API (what a SIGKILL at that moment leaves on disk,
without the lock: the next producer opens it as a dead process's spool).
"""

from __future__ import annotations

import base64
import sqlite3
import threading
import time
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from kinesis_trio import FailedRecord, Producer, ProducerConfig, SyncProducer
from kinesis_trio._disk._store import DB_NAME
from kinesis_trio.testing import FakeKinesis
from tests.shell.test_spool import new_fake, recovered, spooled, stored
from tests.support.helpers import CREDS, error_response, wait_until
from tests.support.spool import data_on_disk

pytestmark = [pytest.mark.anyio, pytest.mark.virtual_time]

#: the fake refuses these records for good (a request-level error naming no entry: the
#: request is split until the record is alone)
BAD = (b"bad-1", b"bad-2", b"bad-3")
REFUSED = "InvalidArgumentException"


class Refuser:
    """The fake's hook: refuses the ``BAD`` records for good (a request-level error naming
    no entry: the request is split until the record is alone), and holds every PutRecords
    until ``opened`` is set (the records are all in the spool first: a record that fails
    before its commit is never written, so it is no dead letter to keep)."""

    def __init__(self) -> None:
        self.opened = threading.Event()

    async def __call__(self, operation: str, body: dict[str, Any]) -> httpx.Response | None:
        if operation != "PutRecords":
            return None
        while not self.opened.is_set():  # noqa: ASYNC110 (a thread event: the sync test too)
            await anyio.sleep(0.01)
        if any(base64.b64decode(e["Data"]) in BAD for e in body["Records"]):
            return error_response(400, REFUSED)
        return None


async def eventually(spool: Path, on_disk: list[bytes], dead: list[bytes]) -> None:
    """Wait until the spool holds ``on_disk`` (data, in id order), of which ``dead`` are
    dead letters, sleeping between looks (virtual time goes on: a commit due later comes),
    failing after ``BOUND`` real seconds."""
    deadline = time.monotonic() + BOUND
    while (data_on_disk(spool), marked(spool)) != (on_disk, dead):
        if time.monotonic() > deadline:
            pytest.fail(f"not so within {BOUND} s: {data_on_disk(spool)}, {marked(spool)}")
        await anyio.sleep(0.05)


#: real seconds a test waits for what a commit writes
BOUND = 20.0


def refusing() -> FakeKinesis:
    fake = FakeKinesis(Refuser())
    fake.create_stream("s", shard_count=1)
    fake.set_retention("s", 8760, increase=True)
    return fake


def crash_copy(spool: Path, to: Path) -> Path:
    """What a kill leaves on disk now: a consistent copy of the spool's database."""
    to.mkdir(parents=True)
    source = sqlite3.connect(f"file:{spool / DB_NAME}?mode=ro", uri=True)
    target = sqlite3.connect(to / DB_NAME)
    try:
        source.backup(target)
    finally:
        source.close()
        target.close()
    return to


def marked(spool: Path) -> list[bytes]:
    """The data of the records the spool holds as dead letters."""
    db = sqlite3.connect(f"file:{spool / DB_NAME}?mode=ro", uri=True)
    try:
        rows = db.execute(
            "SELECT data FROM records WHERE id IN (SELECT id FROM dead) ORDER BY id"
        ).fetchall()
    except sqlite3.OperationalError:  # a spool without dead letters (before format 2)
        rows = []
    finally:
        db.close()
    return [bytes(r[0]) for r in rows]


SETTINGS: dict[str, Any] = {"aggregation_enabled": False, "spool_interval": 0.05}


async def fail_two(producer: Producer, fake: FakeKinesis) -> None:
    """Puts two good records and two the fake refuses for good; returns once they have
    their outcomes (under "put", each was on disk when put returned)."""
    outcomes = [await producer.put(d, "k") for d in (b"good-1", BAD[0], b"good-2", BAD[1])]
    hook = fake.hook
    assert isinstance(hook, Refuser)
    hook.opened.set()
    results = [await o.wait() for o in outcomes]
    assert [r.ok for r in results] == [True, False, True, False]
    assert results[1].error_code == REFUSED


async def test_a_dead_letter_not_taken_survives_a_crash_and_goes_to_failures_again(
    tmp_path: Path,
) -> None:
    spool = tmp_path / "spool"
    refuser = refusing()
    async with spooled(refuser, spool, spool_sync="put", **SETTINGS) as producer:
        await fail_two(producer, refuser)
        # the written records leave; the dead letters stay, marked, until taken
        await eventually(spool, [BAD[0], BAD[1]], [BAD[0], BAD[1]])
        crashed = crash_copy(spool, tmp_path / "crashed")  # killed before anybody took them

    fake = new_fake()  # it would take them: they must not be sent
    async with spooled(fake, crashed, **SETTINGS) as second:
        report = await recovered(second)
        got = [await anext_failure(second), await anext_failure(second)]
        assert (report.records, report.dead_letters) == (0, 2)
        # taken while the producer runs: they leave the spool
        await eventually(crashed, [], [])
    assert [f.data for f in got] == [BAD[0], BAD[1]]
    assert {f.result.error_code for f in got} == {REFUSED}
    assert all(not f.result.ok and f.stream_name == "s" and f.partition_key == "k" for f in got)
    assert stored(fake) == []  # not sent again
    assert [f async for f in second.failures()] == []


async def anext_failure(producer: Producer) -> FailedRecord:
    with anyio.fail_after(30):
        return await producer.failures().__anext__()


async def test_a_dead_letter_taken_leaves_the_spool_and_a_crash_then_brings_nothing_back(
    tmp_path: Path,
) -> None:
    spool = tmp_path / "spool"
    refuser = refusing()
    async with spooled(refuser, spool, spool_sync="put", **SETTINGS) as producer:
        await fail_two(producer, refuser)
        taken = [await anext_failure(producer), await anext_failure(producer)]
        await eventually(spool, [], [])
        crashed = crash_copy(spool, tmp_path / "crashed")
    assert sorted(f.data for f in taken) == [BAD[0], BAD[1]]
    fake = new_fake()
    async with spooled(fake, crashed, **SETTINGS) as second:
        report = await recovered(second)
    assert (report.records, report.dead_letters) == (0, 0)
    assert [f async for f in second.failures()] == [] and stored(fake) == []


async def test_the_failures_buffer_bounds_the_dead_letters_the_spool_keeps(
    tmp_path: Path,
) -> None:
    """Buffer full (one record): the second failure is dropped, counted, and leaves the
    spool; the one kept stays until taken (after the close here: the next producer hands it
    over again, and a bound of one keeps one of what it reads back too)."""
    spool = tmp_path / "spool"
    bounded = {**SETTINGS, "failures_buffer_records": 1}
    refuser = refusing()
    async with spooled(refuser, spool, spool_sync="put", **bounded) as producer:
        await fail_two(producer, refuser)
        assert producer.failures_dropped == 1
        # the one that failed first is kept (whichever it is), the other one left
        kept = producer._failures.buffer._queue[0][0].data
        await eventually(spool, [kept], [kept])
    assert [f.data async for f in producer.failures()] == [kept]  # after the close
    assert marked(spool) == [kept]  # taken too late to be deleted: delivered again

    # two dead letters in the spool, a bound of one: one handed over, one dropped
    db = sqlite3.connect(spool / DB_NAME)
    db.execute("INSERT INTO records SELECT id + 1, stream, pk, ehk, data, crc FROM records")
    db.execute("INSERT INTO dead SELECT id + 1, code, message FROM dead")
    db.commit()
    db.close()
    fake = new_fake()
    async with spooled(fake, spool, **bounded) as second:
        report = await recovered(second)
        assert report.dead_letters == 2 and second.failures_dropped == 1
        handed = await anext_failure(second)
        await eventually(spool, [], [])
    assert handed.data == kept and stored(fake) == []


async def test_a_recovered_record_that_fails_for_good_is_a_dead_letter_until_taken(
    tmp_path: Path,
) -> None:
    """The stream of a record left behind is gone: it fails at recovery, stays in the spool
    as a dead letter, and a crash before it is taken hands it over again, not resent."""
    from kinesis_trio._core._spool import Row
    from tests.support.spool import left_behind

    spool = tmp_path / "spool"
    left_behind(spool, [Row(1, "gone", "k", None, b"orphan"), Row(2, "s", "k", None, b"fine")])
    fake = new_fake()
    async with spooled(fake, spool, **SETTINGS) as producer:
        report = await recovered(producer)
        assert (report.records, report.ok, report.failed) == (2, 1, 1)
        await eventually(spool, [b"orphan"], [b"orphan"])
        crashed = crash_copy(spool, tmp_path / "crashed")
        assert (await anext_failure(producer)).data == b"orphan"
    create_gone = new_fake()
    create_gone.create_stream("gone", shard_count=1)
    async with spooled(create_gone, crashed, **SETTINGS) as second:
        again = await recovered(second)
        failure = await anext_failure(second)
    assert (again.records, again.dead_letters) == (0, 1)
    assert failure.data == b"orphan"
    assert failure.result.error_code == "ResourceNotFoundException"
    assert stored(create_gone, "gone") == []  # its stream exists now: still not resent


# -- SyncProducer: on_failure returned -------------------------------------------------------


@pytest.mark.parametrize("backend", ["trio", "asyncio"])
def test_sync_a_dead_letter_leaves_the_spool_once_on_failure_has_returned(
    tmp_path: Path, backend: str
) -> None:
    """Several threads put, some records fail for good; while ``on_failure`` has not
    returned for one, the spool keeps it (a crash copy holds it); once it has, it leaves."""
    spool = tmp_path / "spool"
    refuser = Refuser()  # held until every record is in the spool
    fake = FakeKinesis(refuser)
    fake.create_stream("s", shard_count=2)
    fake.set_retention("s", 8760, increase=True)
    entered = threading.Event()
    go_on = threading.Event()
    handled: list[bytes] = []

    def on_failure(failed: FailedRecord) -> None:
        entered.set()
        go_on.wait(30)
        handled.append(failed.data)

    producer = SyncProducer(
        "s",
        region_name="us-east-1",
        endpoint_url="http://fake.local",
        credentials=CREDS,
        config=ProducerConfig(
            spool_dir=spool,
            spool_sync="put",
            spool_interval=0.05,
            aggregation_enabled=False,
            record_max_buffered_time=0.01,
        ),
        transport=fake.transport(),
        backend=backend,
        on_failure=on_failure,
    )
    with producer:
        futures: list[Any] = []

        def put(i: int) -> None:  # under "put", each returns once its record is on disk
            futures.append(producer.put(b"good-%d" % i, "k"))
            if i < len(BAD):
                futures.append(producer.put(BAD[i], "k"))

        threads = [threading.Thread(target=put, args=(i,)) for i in range(4)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(30)
        refuser.opened.set()
        assert sorted(f.result(30).ok for f in futures) == [False] * 3 + [True] * 4
        assert entered.wait(30)
        wait_until(  # each on disk as a dead letter
            lambda: len(marked(spool)) == 3, timeout=30, what="three dead letters on disk"
        )
        crashed = crash_copy(spool, tmp_path / "crashed")
        go_on.set()  # on_failure returns for each
        wait_until(
            lambda: len(handled) == 3 and data_on_disk(spool) == [],
            timeout=30,
            what="three records handled and none on disk",
        )
    assert sorted(handled) == sorted(BAD)
    assert sorted(marked(crashed)) == sorted(BAD)  # a crash while on_failure ran kept them
