"""``kinesis-trio local --emulator python --data DIR``: the SQLite store as the engine keeps it.

In-process (``run_local``), on both event loops: while saves fail, writes are answered
503 ServiceUnavailable and reads go on, until a save succeeds; an old JSON snapshot is
converted once (then renamed), also when the rename was interrupted; temporary files
older versions left are removed; corrupt files, a DIR that cannot be made and a DIR
another engine holds are one-line errors naming the file; a clean stop leaves the
database alone (WAL checkpointed). In a child process (integration): a record
acknowledged more than the save interval plus a margin before a SIGKILL is there after a
restart, with 60,000 records of 1 KB held; a file size limit (RLIMIT_FSIZE) is a disk
that fills up and then has room again.
"""

from __future__ import annotations

import base64
import json
import logging
import os
import signal
import sqlite3
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, closing
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from kinesis_trio.testing import FakeKinesis, save_state
from kinesis_trio.testing._emulators import LocalKinesis
from kinesis_trio.testing._http import LocalEndpoint
from kinesis_trio.testing._local_server import (
    LEGACY_STATE_FILE,
    MIGRATED_FILE,
    STATE_FILE,
    LocalSettings,
    StateFileError,
    make_fake,
    run_local,
)
from kinesis_trio.testing._model import FakeRecord
from kinesis_trio.testing._persist import StateStore
from tests.support.persist import populated, reopened, same_state

AUTH = (
    "AWS4-HMAC-SHA256 Credential=k/20260101/us-east-1/kinesis/aws4_request, "
    "SignedHeaders=host, Signature=00"
)


def call(operation: str, body: dict[str, Any]) -> dict[str, Any]:
    """Keyword arguments of an httpx request for a Kinesis JSON 1.1 call."""
    headers = {
        "Content-Type": "application/x-amz-json-1.1",
        "X-Amz-Target": f"Kinesis_20131202.{operation}",
        "Authorization": AUTH,
    }
    return {"content": json.dumps(body).encode(), "headers": headers}


def put_body(stream: str, datas: list[bytes]) -> dict[str, Any]:
    return {
        "StreamName": stream,
        "Records": [
            {"Data": base64.b64encode(d).decode(), "PartitionKey": f"k{i}"}
            for i, d in enumerate(datas)
        ],
    }


@asynccontextmanager
async def running(settings: LocalSettings, fake: FakeKinesis) -> AsyncIterator[LocalEndpoint]:
    """``run_local`` in a task until the block exits (then it stops as at Ctrl-C)."""
    endpoints: list[LocalEndpoint] = []
    up = anyio.Event()

    def ready(endpoint: LocalEndpoint, cert: Path | None) -> None:
        endpoints.append(endpoint)
        up.set()

    async with anyio.create_task_group() as tg:
        tg.start_soon(run_local, settings, ready, fake)
        with anyio.fail_after(10):
            await up.wait()
        yield endpoints[0]
        tg.cancel_scope.cancel()


async def start_and_stop(settings: LocalSettings, fake: FakeKinesis | None = None) -> FakeKinesis:
    """``run_local`` stopped (cancelled) once it serves; what it raises, as raised."""
    fake = fake if fake is not None else make_fake(settings)
    with anyio.CancelScope() as scope:
        await run_local(settings, lambda endpoint, cert: scope.cancel(), fake)
    return fake


async def until(condition: Callable[[], bool]) -> None:
    """Wait (up to 5 s) for ``condition`` to hold."""
    for _ in range(500):
        if condition():
            return
        await anyio.sleep(0.01)
    raise AssertionError("the condition did not hold within 5 s")


# -- in-process ------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_writes_are_refused_while_saves_fail_and_served_again_after(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The disk fills up: the engine goes on, logs it, and answers writes 503 (reads go
    on) until a save succeeds; every record it acknowledged is kept."""
    settings = LocalSettings(port=0, data_dir=tmp_path, save_interval=0.05, streams=[("s", 2)])
    fake = make_fake(settings)
    full = [False]
    write = StateStore.write

    def write_or_fail(self: StateStore, plan: Any) -> None:
        if full[0]:
            raise sqlite3.OperationalError("database or disk is full")
        write(self, plan)

    monkeypatch.setattr(StateStore, "write", write_or_fail)
    caplog.set_level(logging.WARNING, logger="kinesis_trio.local")
    acknowledged: list[str] = []
    async with (
        running(settings, fake) as local,
        httpx.AsyncClient(base_url=local.endpoint_url, timeout=5) as http,
    ):

        async def put(data: bytes) -> httpx.Response:
            answer = await http.post("/", **call("PutRecords", put_body("s", [data])))
            if answer.status_code == 200:
                acknowledged.extend(r["SequenceNumber"] for r in answer.json()["Records"])
            return answer

        assert (await put(b"before")).status_code == 200
        full[0] = True
        # acknowledged before a save fails, kept in memory; on a loaded machine the save
        # tick may come first, and then it is refused like the next one
        kept = (await put(b"kept in memory")).status_code
        assert kept in (200, 503)
        early = kept == 503
        await until(lambda: fake.write_block is not None)

        refused = await put(b"refused")
        assert refused.status_code == 503
        assert refused.json()["__type"] == "ServiceUnavailable"
        message = refused.json()["message"]
        assert "cannot save its state" in message and str(tmp_path / STATE_FILE) in message
        single = {"StreamName": "s", "Data": "eA==", "PartitionKey": "k"}
        one = await http.post("/", **call("PutRecord", single))
        assert one.status_code == 503 and one.json()["__type"] == "ServiceUnavailable"
        shards = await http.post("/", **call("ListShards", {"StreamName": "s"}))
        assert shards.status_code == 200 and len(shards.json()["Shards"]) == 2
        assert len(fake.records("s")) == 2 - early  # nothing stored for the refused ones
        assert "local_kinesis_save_failed" in caplog.text
        assert str(tmp_path / STATE_FILE) in caplog.text and "disk is full" in caplog.text
        assert caplog.text.count("local_kinesis_save_failed") == 1  # once per error

        full[0] = False
        await until(lambda: fake.write_block is None)
        assert (await put(b"after")).status_code == 200
        assert "local_kinesis_save_recovered" in caplog.text
    assert sorted(os.listdir(tmp_path)) == [STATE_FILE]  # a clean stop: WAL checkpointed
    assert fake.stats.requests_by_status[503] == 2 + early
    loaded = reopened(tmp_path / STATE_FILE)
    assert sorted(r.sequence_number for r in loaded.records("s")) == sorted(acknowledged)
    assert [r.data for r in loaded.records("s")] == [r.data for r in fake.records("s")]


@pytest.mark.anyio
async def test_a_json_state_is_converted_once_and_renamed(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="kinesis_trio.local")
    before = await populated()
    save_state(before, tmp_path / LEGACY_STATE_FILE)
    stale = [tmp_path / f".{LEGACY_STATE_FILE}.{n}.tmp" for n in ("a1b2c3", "zz")]
    for path in stale:
        path.write_bytes(b'{"format": 1, "last_')  # a save killed half way
    legacy = (tmp_path / LEGACY_STATE_FILE).read_bytes()

    settings = LocalSettings(port=0, data_dir=tmp_path, streams=[("prov", 1), ("new", 2)])
    first = await start_and_stop(settings)
    assert sorted(os.listdir(tmp_path)) == [MIGRATED_FILE, STATE_FILE]
    assert (tmp_path / MIGRATED_FILE).read_bytes() == legacy
    assert "local_kinesis_state_migrated" in caplog.text
    assert caplog.text.count("local_kinesis_stale_temp_removed") == 2
    assert "new" in first.streams and len(first.streams["prov"].shards) == 6  # kept as it was

    again = await start_and_stop(settings)  # from the store; the JSON file is not read again
    assert sorted(os.listdir(tmp_path)) == [MIGRATED_FILE, STATE_FILE]
    same_state(again, first)
    del first.streams["new"]
    same_state(first, before)


@pytest.mark.anyio
async def test_a_conversion_interrupted_before_the_rename_is_finished_at_the_next_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    before = await populated()
    save_state(before, tmp_path / LEGACY_STATE_FILE)
    settings = LocalSettings(port=0, data_dir=tmp_path)

    def refuse(src: Any, dst: Any) -> None:
        raise OSError(13, "Permission denied")

    monkeypatch.setattr(os, "replace", refuse)
    await start_and_stop(settings)
    monkeypatch.undo()
    assert sorted(os.listdir(tmp_path)) == [LEGACY_STATE_FILE, STATE_FILE]
    again = await start_and_stop(settings)  # the store holds it: renamed, not loaded twice
    assert sorted(os.listdir(tmp_path)) == [MIGRATED_FILE, STATE_FILE]
    same_state(again, before)


@pytest.mark.anyio
async def test_a_json_state_beside_a_store_it_did_not_make_is_left_alone(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="kinesis_trio.local")
    settings = LocalSettings(port=0, data_dir=tmp_path, streams=[("kept", 1)])
    await start_and_stop(settings)
    other = FakeKinesis()
    other.create_stream("other")
    save_state(other, tmp_path / LEGACY_STATE_FILE)
    fake = await start_and_stop(LocalSettings(port=0, data_dir=tmp_path))
    assert list(fake.streams) == ["kept"]
    assert sorted(os.listdir(tmp_path)) == [LEGACY_STATE_FILE, STATE_FILE]
    assert "local_kinesis_legacy_state_ignored" in caplog.text


def _bad_json(tmp_path: Path, text: str) -> Path:
    path = tmp_path / LEGACY_STATE_FILE
    path.write_text(text)
    return path


def _bad_database(tmp_path: Path, raw: bytes) -> Path:
    path = tmp_path / STATE_FILE
    path.write_bytes(raw)
    return path


_SHARD: dict[str, Any] = {
    "shard_id": "shardId-000000000000",
    "start": "0",
    "end": "9" * 5000,  # int() refuses it (Python's int-digit limit)
    "parent_shard_id": None,
    "adjacent_parent_shard_id": None,
    "closed": False,
    "starting_sequence_number": "1",
    "ending_sequence_number": None,
    "records": [],
}
_STREAM = {
    "name": "s",
    "created": 1.0,
    "mode": "PROVISIONED",
    "max_record_size": 1048576,
    "record_distribution_strategy": "USER_PARTITION_KEY",
    "channel_count": 0,
    "next_shard": 1,
    "shards": [_SHARD],
}
BAD_FILES: list[tuple[str, Callable[[Path], Path], str]] = [
    (
        "json-nested-too-deeply",  # RecursionError in json.loads
        lambda d: _bad_json(d, "[" * 100_000 + "]" * 100_000),
        "invalid JSON (nested too deeply)",
    ),
    (
        "json-integer-past-the-digit-limit",  # ValueError in json.loads
        lambda d: _bad_json(d, '{"format": 1, "last_sequence": ' + "9" * 5000 + "}"),
        "for integer string conversion",  # Python 3.10 and 3.11+ word the limit apart
    ),
    (
        "json-digits-past-the-digit-limit",  # ValueError in int()
        lambda d: _bad_json(d, json.dumps({"format": 1, "last_sequence": 0, "streams": [_STREAM]})),
        "$.streams[0].shards[0].end: is over 2^128-1",
    ),
    (
        "not-a-database",
        lambda d: _bad_database(d, b"kinesis-trio!" * 1000),
        "not a kinesis-trio state database (file is not a database)",
    ),
]


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("make", "problem"), [c[1:] for c in BAD_FILES], ids=[c[0] for c in BAD_FILES]
)
async def test_a_corrupt_state_file_is_a_one_line_error_naming_it(
    tmp_path: Path, make: Callable[[Path], Path], problem: str
) -> None:
    path = make(tmp_path)
    raw = path.read_bytes()
    settings = LocalSettings(port=0, data_dir=tmp_path)
    with pytest.raises(StateFileError) as info:
        await start_and_stop(settings)
    message = str(info.value)
    assert message.startswith(f"{path}: ") and problem in message, message
    assert "\n" not in message and len(message) < 300 + len(str(path))
    assert path.read_bytes() == raw  # left as it was


@pytest.mark.anyio
async def test_a_data_dir_that_cannot_be_made_or_is_in_use_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "file").write_text("")
    with pytest.raises(StateFileError, match="cannot create the data directory"):
        await start_and_stop(LocalSettings(port=0, data_dir=tmp_path / "file"))

    settings = LocalSettings(port=0, data_dir=tmp_path / "data")
    async with running(settings, make_fake(settings)):
        with pytest.raises(StateFileError) as info:
            await start_and_stop(settings)
    assert str(info.value) == f"{tmp_path / 'data' / STATE_FILE}: in use by another process " + (
        "(the database is locked)"
    )


# -- in a child process (integration) --------------------------------------------------------

KIB = 1024
INTERVAL = 1.0  # the engine's save interval
MARGIN = 0.6  # one save's time (~0.15 s at RATE) and scheduling on a busy machine
RATE = 16_000  # records a second the kill test writes, at most


def _prefill(path: Path, stream: str, count: int, size: int) -> None:
    """A store holding ``count`` records of ``size`` bytes in ``stream`` (4 shards)."""
    fake = FakeKinesis()
    fake.create_stream(stream, 4)
    shards = fake.streams[stream].shards
    blob = os.urandom(size)
    for i in range(count):
        shard = shards[i % 4]
        seq = fake._next_seq()
        shard.records.append(FakeRecord(blob, f"k{i}", None, shard.start, seq, shard.shard_id))
    store = StateStore(path)
    store.save(fake)
    store.close()


def _read_all(http: httpx.Client, stream: str) -> dict[str, bytes]:
    """Every record of ``stream``: sequence number -> data."""
    found: dict[str, bytes] = {}
    shards = http.post("/", **call("ListShards", {"StreamName": stream})).json()["Shards"]
    for shard in shards:
        body = {
            "StreamName": stream,
            "ShardId": shard["ShardId"],
            "ShardIteratorType": "TRIM_HORIZON",
        }
        iterator = http.post("/", **call("GetShardIterator", body)).json()["ShardIterator"]
        while iterator:
            page = http.post("/", **call("GetRecords", {"ShardIterator": iterator})).json()
            for r in page["Records"]:
                found[r["SequenceNumber"]] = base64.b64decode(r["Data"])
            if not page["Records"] and page.get("MillisBehindLatest", 0) == 0:
                break
            iterator = page.get("NextShardIterator")
    return found


@pytest.mark.subprocess
@pytest.mark.integration
def test_a_record_acknowledged_a_save_interval_before_a_kill_survives(tmp_path: Path) -> None:
    """60,000 records of 1 KB held; 1 KB records written at up to RATE a second for ~3 s,
    each one's acknowledgement time noted; SIGKILL; after a restart every record
    acknowledged more than INTERVAL + MARGIN before the kill is there."""
    _prefill(tmp_path / STATE_FILE, "big", 60_000, KIB)
    acked: dict[str, tuple[float, bytes]] = {}
    slowest = 0.0
    engine = LocalKinesis("python", args=["--data", str(tmp_path), "--streams", "s:2"])
    engine.start()
    try:
        with httpx.Client(base_url=engine.endpoint_url, timeout=10) as http:
            began = time.monotonic()
            n = 0
            # ~3 s, and on until the load is meaningful: a busy machine took 3 s for 2,400
            while (now := time.monotonic()) < began + 3.0 or len(acked) <= 5_000:
                assert now < began + 120.0, f"{len(acked)} acknowledged in 120 s"
                time.sleep(max(0.0, began + n / RATE - now))
                datas = [b"%08d" % (n + i) + os.urandom(KIB - 8) for i in range(100)]
                n += len(datas)
                sent = time.monotonic()
                answer = http.post("/", **call("PutRecords", put_body("s", datas)))
                at = time.monotonic()
                slowest = max(slowest, at - sent)
                assert answer.status_code == 200, answer.text
                for data, slot in zip(datas, answer.json()["Records"], strict=True):
                    acked[slot["SequenceNumber"]] = (at, data)
            killed_at = time.monotonic()
            assert engine.pid is not None
            os.killpg(engine.pid, signal.SIGKILL)
    finally:
        engine.stop()
    assert len(acked) > 5_000  # a meaningful load (RATE * 3 on an idle machine)

    with (
        LocalKinesis("python", args=["--data", str(tmp_path)]) as again,
        httpx.Client(base_url=again.endpoint_url, timeout=10) as http,
    ):
        kept = _read_all(http, "s")
    due = {seq: data for seq, (at, data) in acked.items() if at < killed_at - INTERVAL - MARGIN}
    assert len(due) > 1_000
    missing = sorted(set(due) - set(kept))
    assert not missing, f"{len(missing)} of {len(due)} lost (slowest ack {slowest:.2f} s)"
    assert all(kept[seq] == data for seq, data in due.items())
    assert set(kept) <= set(acked)  # nothing else
    with closing(sqlite3.connect(tmp_path / STATE_FILE)) as db:
        assert db.execute("SELECT count(*) FROM records WHERE stream = 'big'").fetchone() == (
            60_000,
        )


@pytest.mark.subprocess
@pytest.mark.integration
@pytest.mark.skipif(not hasattr(__import__("resource"), "prlimit"), reason="Linux prlimit")
def test_a_file_size_limit_refuses_writes_until_lifted(tmp_path: Path) -> None:
    """RLIMIT_FSIZE on the running engine: its WAL cannot grow, saves fail, writes get 503
    (reads go on); lifted, writes succeed again; every acknowledged record is kept."""
    import resource

    acked: dict[str, bytes] = {}
    engine = LocalKinesis("python", args=["--data", str(tmp_path), "--streams", "s:1"])
    engine.start()
    try:
        assert engine.pid is not None
        _, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
        resource.prlimit(engine.pid, resource.RLIMIT_FSIZE, (512 * KIB, hard))
        with httpx.Client(base_url=engine.endpoint_url, timeout=10) as http:

            def put() -> httpx.Response:
                datas = [os.urandom(KIB) for _ in range(50)]
                answer = http.post("/", **call("PutRecords", put_body("s", datas)))
                if answer.status_code == 200:
                    for data, slot in zip(datas, answer.json()["Records"], strict=True):
                        acked[slot["SequenceNumber"]] = data
                return answer

            deadline = time.monotonic() + 8
            while (answer := put()).status_code == 200:
                assert time.monotonic() < deadline, "writes never refused"
                time.sleep(0.02)
            assert answer.status_code == 503, answer.text
            assert answer.json()["__type"] == "ServiceUnavailable"
            assert "cannot save its state" in answer.json()["message"]
            assert http.post("/", **call("ListShards", {"StreamName": "s"})).status_code == 200

            resource.prlimit(engine.pid, resource.RLIMIT_FSIZE, (hard, hard))
            deadline = time.monotonic() + 5
            while (answer := put()).status_code == 503:
                assert time.monotonic() < deadline, "writes still refused"
                time.sleep(0.05)
            assert answer.status_code == 200, answer.text
        log = engine.output_tail(50)
        assert "local_kinesis_save_failed" in log and "local_kinesis_save_recovered" in log
    finally:
        engine.stop()
    assert sorted(os.listdir(tmp_path)) == [STATE_FILE]
    with (
        LocalKinesis("python", args=["--data", str(tmp_path)]) as again,
        httpx.Client(base_url=again.endpoint_url, timeout=10) as http,
    ):
        assert _read_all(http, "s") == acked
