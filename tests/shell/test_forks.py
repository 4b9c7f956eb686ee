"""A producer opened in a process that forks: the child's first call fails with a clear error
(issue 44: a ``SyncProducer`` opened at import time under gunicorn ``--preload`` or Celery's
prefork pool, then used in the forked worker, hung for ever), and the parent keeps working.

Each test forks for real (``os.fork``); the child reports what its calls did through a pipe
and leaves with ``os._exit``. A child that hangs is killed after a bound and fails the test.
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any, NoReturn

import anyio
import pytest
import sniffio

from kinesis_trio import ProducerClosedError, ProducerForkedError, RecordResult, SyncProducer
from kinesis_trio.testing import FakeKinesis
from tests.support.helpers import fake_producer
from tests.support.spool import on_disk
from tests.support.sync_kit import CHILD_BOUND, HOLD, in_child, outcome_of, sync_producer

pytestmark = pytest.mark.skipif(not hasattr(os, "fork"), reason="no fork on this platform")


@pytest.mark.parametrize("backend", ["trio", "asyncio"])
def test_a_sync_producer_used_in_a_forked_child_fails_at_once_and_the_parent_goes_on(
    backend: str,
) -> None:
    fake = FakeKinesis()
    fake.create_stream("s", 2)
    with sync_producer(fake, backend, record_max_buffered_time=0.01) as producer:
        assert producer.put(b"before", "k").result(timeout=10).ok

        def calls() -> dict[str, Any]:
            return {
                "put": outcome_of(lambda: producer.put(b"child", "k")),
                "put_many": outcome_of(lambda: producer.put_many([(b"child", "k")])),
                "flush": outcome_of(lambda: producer.flush(timeout=30)),
                "close": outcome_of(producer.close),
            }

        report = in_child(calls)
        assert "unexpected" not in report, report
        for name in ("put", "put_many", "flush"):
            got = report[name]
            assert got["error"] == "ProducerForkedError" and got["closed"], (name, got)
            assert f"opened in process {os.getpid()}" in got["message"]
            assert "post_fork" in got["message"] and "worker_process_init" in got["message"]
            # at once, not after the flush's 30 s timeout (with room for a busy machine)
            assert got["seconds"] < 10.0, (name, got)
        assert report["close"]["error"] is None and report["close"]["seconds"] < 10.0
        # the parent's producer is untouched
        assert producer.put(b"after", "k").result(timeout=10).ok
    data = sorted(r.data for r in fake.records("s"))
    assert data == [b"after", b"before"]  # nothing of the child's


@pytest.mark.anyio
async def test_an_async_producer_used_in_a_forked_child_refuses_records() -> None:
    """Before: ``put_nowait`` in the child accepted the record into buffers that no task
    there would ever send (the loop is the parent's)."""
    fake = FakeKinesis()
    fake.create_stream("s", 1)
    async with fake_producer(fake, record_max_buffered_time=0.01) as producer:
        assert (await (await producer.put(b"before", "k")).wait()).ok

        def calls() -> dict[str, Any]:
            return {"put_nowait": outcome_of(lambda: producer.put_nowait(b"child", "k"))}

        report = in_child(calls)
        assert "unexpected" not in report, report
        got = report["put_nowait"]
        assert got["error"] == "ProducerForkedError" and got["closed"], got
        assert "one producer per process" in got["message"]
        assert (await (await producer.put(b"after", "k")).wait()).ok


class _Leave(Exception):
    """The forked child leaves ``async with`` by an exception of its own."""


def _report(write: int, report: dict[str, Any]) -> NoReturn:
    """In the forked child: hand ``report`` to the parent and end at once."""
    try:
        os.write(write, json.dumps(report).encode())
        os.close(write)
    finally:
        os._exit(0)


def _said(result: RecordResult) -> str:
    return "ok" if result.ok else f"{result.error_code}: {result.error_message}"


def _report_of(pid: int, read: int) -> dict[str, Any]:
    """In the parent: what the child reported (it is killed if it has not within a bound)."""
    ready, _, _ = select.select([read], [], [], CHILD_BOUND)
    if not ready:
        os.kill(pid, signal.SIGKILL)
    os.waitpid(pid, 0)
    assert ready, f"the forked child did not answer within {CHILD_BOUND} s"
    with os.fdopen(read, "rb") as pipe:
        got: dict[str, Any] = json.loads(pipe.read())
    return got


@pytest.mark.anyio
@pytest.mark.virtual_time
@pytest.mark.parametrize("how", ["at once", "by an exception", "after a commit was due"])
async def test_a_forked_child_leaving_async_with_leaves_the_parents_records_alone(
    tmp_path: Path, how: str
) -> None:
    """The child's copy of an async producer with a spool (records accepted, their commit
    pending) leaves ``async with``: it sends, commits, fails and closes nothing; the
    records stay the parent's, which writes them. Before: its exit flushed the parent's
    records itself, or failed them as not kept in the spool; its writer tried the
    pending commit on the spool it had let go of (``SpoolError``)."""
    if how == "after a commit was due" and sniffio.current_async_library() == "asyncio":
        pytest.skip("asyncio runs no event loop in a forked child: it cannot wait there")
    fake = FakeKinesis()
    fake.create_stream("s", 1)
    spool = tmp_path / "spool"
    read, write = os.pipe()
    pid = -1
    escaped: BaseException | None = None
    got: dict[str, Any] = {}
    producer = fake_producer(
        fake, spool_dir=str(spool), spool_interval=0.05, aggregation_enabled=False, **HOLD
    )
    try:
        async with producer:
            outcomes = [await producer.put(b"r%d" % i, "k") for i in range(3)]
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", DeprecationWarning)  # forking with threads
                pid = os.fork()
            if pid == 0:  # the child, alone while the parent waits for its report
                if how == "by an exception":
                    raise _Leave
                if how == "after a commit was due":
                    await anyio.sleep(1)  # the writer's turn comes: a commit is due
            else:
                os.close(write)
                got = _report_of(pid, read)
                await producer.flush()
    except _Leave:
        pass
    except BaseException as exc:
        if pid != 0:
            raise
        escaped = exc
    if pid == 0:
        _report(
            write,
            {
                "escaped": None if escaped is None else f"{type(escaped).__name__}: {escaped}",
                # None: unresolved here (the parent's)
                "resolved": [_said(o.result()) if o.done() else None for o in outcomes],
                "sent": len(fake.records("s")),  # the child's copy of the fake
            },
        )
    assert got == {"escaped": None, "resolved": [None] * 3, "sent": 0}
    assert [(await o.wait()).ok for o in outcomes] == [True] * 3  # the parent's, written
    assert sorted(r.data for r in fake.records("s")) == [b"r0", b"r1", b"r2"]
    assert on_disk(spool) == []


#: gunicorn --preload's shape: a SyncProducer opened at import time, then a forked worker that
#: uses it and leaves through the interpreter's normal exit (atexit, collection), not
#: ``os._exit``: the worker must neither hang in ``put`` nor at its exit.
PRELOAD = """
import os, sys, warnings
from kinesis_trio import ProducerConfig, ProducerForkedError, SyncProducer
from kinesis_trio.testing import FakeKinesis
from tests.support.helpers import CREDS

fake = FakeKinesis()
fake.create_stream("s", 1)
producer = SyncProducer(
    "s", region_name="us-east-1", endpoint_url="http://fake.local", credentials=CREDS,
    config=ProducerConfig(record_max_buffered_time=0.01), transport=fake.transport(),
    backend=sys.argv[1],
)
producer.open()  # at import time, in the master
assert producer.put(b"master", "k").result(timeout=10).ok
warnings.simplefilter("ignore", DeprecationWarning)
pid = os.fork()
if pid == 0:  # the worker
    try:
        producer.put(b"worker", "k")
    except ProducerForkedError:
        print("worker: ProducerForkedError", flush=True)
    sys.exit(0)  # the interpreter's normal exit: atexit closes the producer, then collects
_, status = os.waitpid(pid, 0)
print("worker exit", os.waitstatus_to_exitcode(status), flush=True)
assert producer.put(b"master again", "k").result(timeout=10).ok
producer.close()
print("master closed", sorted(r.data for r in fake.records("s")), flush=True)
"""


@pytest.mark.subprocess
@pytest.mark.parametrize("backend", ["trio", "asyncio"])
def test_a_preloaded_sync_producer_in_a_worker_that_exits_normally(backend: str) -> None:
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run(
        [sys.executable, "-c", PRELOAD, backend],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=180,  # a hang guard: a busy machine took 45-60 s for this interpreter
        check=False,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    lines = out.stdout.splitlines()
    assert lines == [
        "worker: ProducerForkedError",
        "worker exit 0",
        "master closed [b'master', b'master again']",
    ], out.stdout + out.stderr[-2000:]


def test_the_error_is_a_closed_error_and_names_the_fix() -> None:
    """Code that handles ``ProducerClosedError`` handles it too."""
    assert issubclass(ProducerForkedError, ProducerClosedError)
    assert sys.modules["kinesis_trio"].ProducerForkedError is ProducerForkedError


@pytest.mark.parametrize("backend", ["trio", "asyncio"])
def test_a_sync_producer_asked_to_reopen_opens_its_own_in_the_child(backend: str) -> None:
    fake = FakeKinesis()
    fake.create_stream("s", 1)
    producer = sync_producer(fake, backend, after_fork="reopen", record_max_buffered_time=0.01)
    with producer:
        assert producer.put(b"before", "k").result(timeout=10).ok

        def calls() -> dict[str, Any]:
            result = producer.put(b"child", "k").result(timeout=10)
            producer.flush(timeout=10)
            producer.close()
            # the child's copy of the fake: what the child's own producer wrote (the
            # parent's record may be trimmed there: the fake's retention runs on the event
            # loop's clock, and a new trio run starts its clock at a random offset)
            return {"ok": result.ok, "data": sorted(r.data.decode() for r in fake.records("s"))}

        report = in_child(calls)
        assert report["ok"] and "child" in report["data"], report
        assert producer.put(b"after", "k").result(timeout=10).ok
    assert sorted(r.data for r in fake.records("s")) == [b"after", b"before"]


def test_after_fork_takes_raise_or_reopen() -> None:
    with pytest.raises(ValueError, match="after_fork must be 'raise' or 'reopen'"):
        SyncProducer("s", region_name="us-east-1", after_fork="restart")
