"""Every way out of a producer with a spool against every state of the spool (issue 51), as
one exhaustive table, on both backends against the fake.

The ways out: leaving ``async with`` cleanly with the endpoint answering (``normal``) or
not (``close_timeout``), through an exception, through a cancellation, a cancellation that
reaches the close while it waits (``cancel_in_close``), and ``SyncProducer.close()`` from
another thread while a third waits for durability (``sync_close``). The states: a
``healthy`` spool, a ``slow`` one (every commit takes a while, and the exit comes while one
runs), a ``failed`` one (the disk fills after the first records), a ``full`` one
(``spool_max_bytes`` reached, a put waiting for room), one ``recovering`` what a dead
producer left (stuck loading a stream, a put waiting behind it) and a ``damaged`` one (a
record left behind does not read back intact). Each case runs under both ``spool_sync``
policies. A fork is covered apart: ``test_spool.py`` (a forked child refuses records and
leaves the spool to its parent; a dead parent's child does not keep the spool) and
``test_sync_spool.py`` (``after_fork="reopen"`` refuses a shared spool).

After each step, what must hold:

- **no hang**: the case ends within ``BOUND`` real seconds (a watchdog thread then lets
  everything go, so a hang in a shielded part fails instead of blocking the run);
- **no durability said too early**: when ``put`` under ``"put"`` or ``wait_durable()``
  says records are durable, each is in the spool's file at that moment (read back through
  the store's own check, ``_check``: intact), or its outcome is final;
- **nothing deleted too early**: every id a commit deletes is a record whose outcome is
  final (it is in the stream, or failed for good), or a damaged one;
- **nothing promised lost**: after the exit every record is in the stream or still in the
  spool, but those failed for good and, when the close says its last commit failed, those
  never said durable; every outcome is resolved; ``wait_durable()`` answers at once.

Apart: a record the close could not write (its last commit failed) is not said to stay in
the spool (``test_an_outcome_says_it_stays_in_the_spool_only_when_it_does``).

Real time on both backends: the spool's commits run in worker threads, and trio's MockClock
jumps ahead while a task waits on one, so a virtual hang guard would fire on every commit.
The times that matter (``close_timeout``, a slow commit) end the same way on any machine:
nothing the verdict reads depends on how fast it runs.
"""

from __future__ import annotations

import concurrent.futures
import sqlite3
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from kinesis_trio import (
    Outcome,
    ProducerClosedError,
    ProducerConfig,
    RecordResult,
    SpoolWriteError,
    SyncProducer,
    deaggregate,
)
from kinesis_trio._core import _spooling
from kinesis_trio._core._spool import Commit, Row, SpoolBook
from kinesis_trio._disk._rows import _check
from kinesis_trio._disk._store import DB_NAME, Damage
from kinesis_trio._results import ABORTED, CLOSE_TIMEOUT
from kinesis_trio._shell import _spooler
from kinesis_trio.testing import FakeKinesis
from tests.support.helpers import CREDS, fake_producer
from tests.support.spool import BIG, FRESH_PAGES, CountingStore, left_behind

pytestmark = pytest.mark.anyio

#: real seconds a case may take before it counts as hung
BOUND = 10.0
#: real seconds each commit takes in the ``slow`` state
SLOW = 0.05
#: real seconds between two looks of the endpoint at whether it may answer
POLL = 0.005
#: the error codes of records a close keeps for the next producer (not final: their message
#: says they stay in the spool)
KEPT = {CLOSE_TIMEOUT, ABORTED}

#: one TLS context for every producer (the endpoint is the fake's: never used; a context
#: of its own per producer would load the CA bundle each time, a tenth of a second)
TLS = ssl.create_default_context()

STATES = ["healthy", "slow", "failed", "full", "recovering", "damaged"]
ASYNC_EXITS = ["normal", "close_timeout", "exception", "cancel", "cancel_in_close"]
SYNCS = ["put", "interval"]


class Boom(Exception):
    """The user's own error, leaving ``async with``."""


# -- the endpoint, the disk, the watchdog -------------------------------------------------------


class Endpoint:
    """A fake hook: PutRecords wait until ``answer`` is set, the load of the stream
    ``other`` until ``load`` is (threading events: set from any thread)."""

    def __init__(self) -> None:
        self.answer = threading.Event()
        self.load = threading.Event()

    async def __call__(self, operation: str, body: dict[str, Any]) -> httpx.Response | None:
        if operation == "DescribeStreamSummary" and body.get("StreamName") == "other":
            await until(self.load)
        if operation == "PutRecords":
            await until(self.answer)
        return None


async def until(flag: threading.Event) -> None:
    """Wait until ``flag`` is set, from any thread (an ``anyio.Event`` is the loop's)."""
    while True:
        if flag.is_set():
            return
        await anyio.sleep(POLL)


class SlowStore(CountingStore):
    """A store whose commits take ``slow`` real seconds each (``committing``: one runs)."""

    slow = 0.0

    def __init__(self, directory: Any, max_page_count: int = 0) -> None:
        super().__init__(directory, max_page_count)
        self.committing = threading.Event()

    def _connect(self, path: str) -> sqlite3.Connection:
        db = super()._connect(path)
        # no fsync: what another connection sees after a commit is the same (the SIGKILL
        # tests keep it), and each case is a few milliseconds a commit faster
        db.execute("PRAGMA synchronous=OFF")
        return db

    def commit(self, commit: Commit) -> None:
        self.committing.set()
        if self.slow:
            time.sleep(self.slow)
        super().commit(commit)


class Case:
    """One case: its fake, its spool, the records put, and what went wrong."""

    def __init__(self, tmp_path: Path, state: str, sync: str) -> None:
        self.state, self.sync = state, sync
        self.spool = tmp_path / "spool"
        self.endpoint = Endpoint()
        self.fake = FakeKinesis(self.endpoint)
        for name in ("s", "other"):
            self.fake.create_stream(name, shard_count=2)
            self.fake.set_retention(name, 8760, increase=True)
        #: each record put and accepted: its data, and its outcome (or SyncProducer future)
        self.outcomes: dict[bytes, Outcome | Future[RecordResult]] = {}
        #: records said durable (by put under "put", or wait_durable)
        self.promised: set[bytes] = set()
        #: what a dead producer left: its rows by id, and the id of the damaged one
        self.left: dict[int, bytes] = {}
        self.damaged: set[int] = set()
        #: every id a commit inserted: its data
        self.ids: dict[int, bytes] = {}
        self.stores: list[SlowStore] = []
        self.violations: list[str] = []
        #: records whose outcome says they stay in the spool, neither there nor in the stream
        self.lies: list[str] = []
        self.hung = False

    # -- what the disk and the stream hold -----------------------------------------------------

    def on_disk(self) -> set[bytes]:
        """The records intact in the spool's file now (the store's own check)."""
        path = self.spool / DB_NAME
        if not path.exists():
            return set()
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        try:
            rows = db.execute("SELECT id, stream, pk, ehk, data, crc FROM records").fetchall()
        finally:
            db.close()
        out = set()
        for values in rows:
            checked = _check(tuple(values))
            if not isinstance(checked, Damage):
                out.add(checked[0].data)
        return out

    def in_stream(self) -> set[bytes]:
        return {
            user.data
            for name in ("s", "other")
            for record in self.fake.records(name)
            for user in deaggregate(record.data, record.partition_key)
        }

    def status(self, data: bytes) -> str:
        """``pending``, ``ok``, ``kept`` (failed by the close, kept for the next producer),
        ``failed`` (for good: a SyncProducer's record the close took before the producer had
        it, too), or ``unknown`` (a record left behind: its outcome is the
        recovery's)."""
        outcome = self.outcomes.get(data)
        if outcome is None:
            return "unknown"
        if not outcome.done():
            return "pending"
        if isinstance(outcome, Future) and outcome.exception() is not None:
            return "failed"
        result = outcome.result()
        if result.ok:
            return "ok"
        kept = result.error_code in KEPT and "stays in the spool" in (result.error_message or "")
        return "kept" if kept else "failed"

    def message(self, data: bytes) -> str:
        outcome = self.outcomes[data]
        return outcome.result().error_message or ""

    # -- the checks ----------------------------------------------------------------------------

    def fail(self, what: str) -> None:
        self.violations.append(what)

    def said_durable(self, datas: list[bytes], how: str) -> None:
        """``datas`` were just said durable: each must be on disk, or final (the disk is
        read first: a record deleted meanwhile was final before)."""
        disk = self.on_disk()
        for data in datas:
            self.promised.add(data)
            if data not in disk and self.status(data) not in ("ok", "failed"):
                self.fail(f"{how} said {data[:12]!r} durable, not on disk ({self.status(data)})")

    def taken(self, commit: Commit) -> None:
        """On the loop, as a commit is taken: what it deletes must be final."""
        for row in commit.inserts:
            self.ids[row.id] = row.data
        stream: set[bytes] | None = None
        for row_id in commit.deletes:
            if row_id in self.damaged:
                continue
            data = self.ids.get(row_id, self.left.get(row_id))
            if data is None:
                self.fail(f"deleted id {row_id}, never written")
                continue
            if stream is None:
                stream = self.in_stream()
            if data not in stream and self.status(data) != "failed":
                self.fail(f"deleted {data[:12]!r} before its outcome was final")

    def after_exit(self, close_failed: bool) -> None:
        """Nothing promised is lost; every outcome is resolved."""
        disk, stream = self.on_disk(), self.in_stream()
        for data in self.outcomes:
            status = self.status(data)
            if status == "pending":
                self.fail(f"{data[:12]!r}: unresolved after the exit")
            elif status == "ok" and data not in stream:
                self.fail(f"{data[:12]!r}: ok, not in the stream")
            elif status == "kept" and data not in disk and data not in stream:
                if data in self.promised or not close_failed:
                    self.fail(f"{data[:12]!r}: kept by the close, not in the spool")
                self.lies.append(f"{data[:12]!r}: {self.message(data)}")
            if status == "ok" and data in disk and self.state != "failed":
                self.fail(f"{data[:12]!r}: ok, left in the spool (sent again next time)")
        for row_id, data in self.left.items():
            if row_id not in self.damaged and data not in disk and data not in stream:
                self.fail(f"left-behind record {row_id}: neither in the spool nor the stream")

    def let_go(self) -> None:
        """The watchdog: everything that holds a case lets go (it fails as hung)."""
        self.hung = True
        self.endpoint.answer.set()
        self.endpoint.load.set()
        for store in self.stores:
            store.slow = 0.0
            store.make_room()


@pytest.fixture
def watched(monkeypatch: pytest.MonkeyPatch) -> Iterator[Callable[[Case], None]]:
    """Wire a case in: its stores and books (the spooler's ``SpoolStore`` and
    ``SpoolBook`` names), and a watchdog that lets go after ``BOUND`` real seconds."""
    ended = threading.Event()
    cases: list[Case] = []

    def wire(case: Case) -> None:
        cases.append(case)

        def store(directory: Any) -> SlowStore:
            made = SlowStore(directory, FRESH_PAGES if case.state == "failed" else 0)
            made.slow = SLOW if case.state == "slow" else 0.0
            case.stores.append(made)
            return made

        class Book(SpoolBook):
            def take(self, now: float) -> Commit | None:
                commit = super().take(now)
                if commit is not None:
                    case.taken(commit)
                return commit

        monkeypatch.setattr(_spooler, "SpoolStore", store)
        monkeypatch.setattr(_spooling, "SpoolBook", Book)

        def watch() -> None:
            if not ended.wait(BOUND):
                case.let_go()

        threading.Thread(target=watch, daemon=True).start()

    yield wire
    ended.set()


# -- the states --------------------------------------------------------------------------------

SMALL = 100


def record(name: str, size: int = SMALL) -> bytes:
    return name.encode().ljust(size, b".")


def prepare(case: Case) -> dict[str, Any]:
    """The spool as the state wants it before the producer opens; the producer's config."""
    config: dict[str, Any] = {
        "spool_sync": case.sync,
        "spool_interval": 0.05,
        "record_max_buffered_time": 0.01,
        "record_ttl": 3600,
        "verify": TLS,
    }
    if case.state == "full":  # three records fill it
        config["spool_max_bytes"] = 3 * (SMALL + 1)
    if case.state == "recovering":  # two records to send, then one whose stream never loads
        rows = [Row(1, "s", "k", None, record("left-1")), Row(2, "s", "j", None, record("left-2"))]
        rows.append(Row(3, "other", "k", None, record("left-3")))
        left_behind(case.spool, rows)
        case.left = {row.id: row.data for row in rows}
    if case.state == "damaged":  # record 2 of 4 does not read back intact
        rows = [Row(i, "s", f"k{i}", None, record(f"left-{i}", 300)) for i in range(1, 5)]
        left_behind(case.spool, rows)
        case.left = {row.id: row.data for row in rows}
        case.damaged = {2}
        path = case.spool / DB_NAME
        raw = bytearray(path.read_bytes())
        at = raw.index(b"left-2.") + 3
        raw[at] ^= 1
        path.write_bytes(bytes(raw))
    return config


# -- the async producer ------------------------------------------------------------------------


async def work(case: Case, producer: Any, background: Any) -> None:
    """The records of the state, each durability answer checked as it comes; records left
    unresolved (the endpoint does not answer yet) and a put waiting, where the state has
    one."""

    async def put(data: bytes) -> None:
        """A put; under ``"put"``, its answer checked."""
        try:
            outcome = await producer.put(data, "k")
        except SpoolWriteError as exc:  # accepted all the same, not durable
            if isinstance(exc.outcome, Outcome):
                case.outcomes[data] = exc.outcome
            return
        except ProducerClosedError:  # not accepted
            return
        case.outcomes[data] = outcome
        if case.sync == "put":
            case.said_durable([data], "put")

    async def wait_durable() -> None:
        before = list(case.outcomes)
        try:
            await producer.wait_durable()
        except SpoolWriteError:
            return
        case.said_durable(before, "wait_durable")

    if case.state in ("full", "recovering"):
        if case.state == "full":
            for i in range(3):
                await put(record(f"r{i}"))
            await wait_durable()
        background.start_soon(put, record("waits"))  # for room, or for recovery
        await anyio.sleep(0.02)
        return
    await put(record("r0"))
    await put(record("r1"))
    await wait_durable()
    if case.state == "failed":  # a record that needs pages the disk does not have
        await put(record("big", BIG))
        await wait_durable()
        return
    late = record("r2")
    case.outcomes[late] = producer.put_nowait(late, "k")
    if case.state == "slow":  # the exit comes while a commit runs
        store = case.stores[0]
        store.committing.clear()
        await until(store.committing)


async def run_async(case: Case, exit: str) -> None:
    config = prepare(case)
    config["close_timeout"] = {"normal": BOUND, "close_timeout": 0.1}.get(exit, 30.0)
    producer = fake_producer(case.fake, spool_dir=case.spool, **config)
    raised: BaseException | None = None
    async with anyio.create_task_group() as background:
        with anyio.CancelScope() as scope:
            try:
                async with producer:
                    await work(case, producer, background)
                    if exit == "normal":  # the endpoint answers, a stream loads
                        case.endpoint.answer.set()
                        case.endpoint.load.set()
                    elif exit == "exception":
                        raise Boom("the user's error")
                    elif exit == "cancel":
                        scope.cancel()
                        await anyio.sleep_forever()
                    elif exit == "cancel_in_close":

                        async def cancel_soon() -> None:
                            # This task first runs when the close waits (the body ends with
                            # no checkpoint after starting it), so the cancel reaches the
                            # close at its first wait whatever the machine's speed: a timer
                            # lost the race to a close with nothing left to wait for.
                            scope.cancel()

                        background.start_soon(cancel_soon)
            except BaseException as exc:
                raised = exc
                if not isinstance(exc, Boom):
                    raise  # a cancellation: its scope catches it
    if exit == "exception":
        assert isinstance(raised, Boom), raised
    elif exit in ("cancel", "cancel_in_close"):
        assert scope.cancelled_caught
    else:
        assert raised is None, raised
    try:
        await producer.wait_durable()  # answers at once after the close
    except SpoolWriteError:
        close_failed = True
    else:
        close_failed = False
        case.said_durable(
            [d for d in case.outcomes if case.status(d) == "kept"], "wait_durable after the close"
        )
    case.after_exit(close_failed)


@pytest.mark.parametrize("sync", SYNCS)
@pytest.mark.parametrize("state", STATES)
@pytest.mark.parametrize("exit", ASYNC_EXITS)
async def test_an_exit_from_a_producer_in_each_spool_state_keeps_every_promise(
    tmp_path: Path, watched: Callable[[Case], None], exit: str, state: str, sync: str
) -> None:
    case = Case(tmp_path, state, sync)
    watched(case)
    with anyio.fail_after(BOUND + 5):  # a hang guard (the watchdog lets go at BOUND)
        await run_async(case, exit)
    assert not case.hung, "the case hung until the watchdog let everything go"
    assert not case.violations, "\n".join(case.violations)


@pytest.mark.parametrize("exit", ["close_timeout", "exception"])
async def test_an_outcome_says_it_stays_in_the_spool_only_when_it_does(
    tmp_path: Path, watched: Callable[[Case], None], exit: str
) -> None:
    case = Case(tmp_path, "failed", "put")
    watched(case)
    with anyio.fail_after(BOUND + 5):
        await run_async(case, exit)
    assert not case.lies, "\n".join(case.lies)


# -- SyncProducer.close() from another thread ---------------------------------------------------


def run_sync(case: Case, backend: str) -> None:
    config = prepare(case)
    producer = SyncProducer(
        "s",
        region_name="us-east-1",
        endpoint_url="http://fake.local",
        credentials=CREDS,
        config=ProducerConfig(spool_dir=case.spool, close_timeout=0.1, **config),
        transport=case.fake.transport(),
        backend=backend,
    )

    def put(data: bytes) -> None:
        try:
            future = producer.put(data, "k")
        except SpoolWriteError as exc:
            if isinstance(exc.outcome, Future):
                case.outcomes[data] = exc.outcome
            return
        except ProducerClosedError:
            return
        case.outcomes[data] = future
        if case.sync == "put":
            case.said_durable([data], "put")

    def wait_durable() -> None:
        before = list(case.outcomes)
        try:
            producer.wait_durable(BOUND)
        except (SpoolWriteError, ProducerClosedError):
            return
        case.said_durable(before, "wait_durable")

    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        producer.open()
        try:
            if case.state == "full":
                for i in range(3):
                    put(record(f"r{i}"))
            elif case.state != "recovering":
                put(record("r0"))
                put(record("r1"))
            wait_durable()
            if case.state == "failed":
                put(record("big", BIG))
            store = case.stores[0]
            store.committing.clear()
            # a put and a wait for durability pending in threads of their own
            waiting = [pool.submit(put, record("waits")), pool.submit(wait_durable)]
            if case.state == "slow":
                deadline = time.monotonic() + BOUND
                while not store.committing.is_set() and time.monotonic() < deadline:
                    time.sleep(POLL)
            else:
                time.sleep(0.02)
        finally:
            closing = pool.submit(producer.close)  # from another thread
        waiting.append(pool.submit(wait_durable))  # during the close
        done, pending = concurrent.futures.wait([closing, *waiting], timeout=BOUND)
        if pending:
            case.let_go()
            concurrent.futures.wait(pending, timeout=BOUND)
        for ended in done:
            assert ended.exception() is None, ended.exception()
    # after the close: answered at once (in a thread: a hang fails the case, not the run)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        after = pool.submit(producer.wait_durable, BOUND)
        concurrent.futures.wait([after], timeout=BOUND)
        if not after.done():
            case.let_go()
        error = after.exception(BOUND)
    assert error is None or isinstance(error, SpoolWriteError), error
    close_failed = error is not None
    if not close_failed:
        case.said_durable(
            [d for d in case.outcomes if case.status(d) == "kept"], "wait_durable after the close"
        )
    case.after_exit(close_failed)


@pytest.mark.parametrize("sync", SYNCS)
@pytest.mark.parametrize("state", STATES)
@pytest.mark.parametrize("backend", ["trio", "asyncio"])
def test_sync_close_from_another_thread_in_each_spool_state_keeps_every_promise(
    tmp_path: Path, watched: Callable[[Case], None], backend: str, state: str, sync: str
) -> None:
    case = Case(tmp_path, state, sync)
    watched(case)
    run_sync(case, backend)
    assert not case.hung, "the case hung until the watchdog let everything go"
    assert not case.violations, "\n".join(case.violations)
