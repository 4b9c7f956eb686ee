"""kinesis_trio.testing's persistence: the JSON snapshot (``save_state`` / ``load_state``),
the SQLite store (``StateStore``) and ``fake.changes``.

A snapshot taken after writes (key-less ones on an AUTO stream too), splits, merges and
rescaling loads into a new fake that answers every read operation as the first did and
keeps handing out larger sequence numbers; writes are atomic; a corrupt file is a
ValueError naming the file and the problem, in one line (also nested too deeply for
Python's parser, or numbers past its int-digit limit). The store does the same, saving
only what changed: new records inserted, those trimmed from the front of a shard or gone
with their shard or stream deleted; a failed save changes nothing and the next one holds
everything; a file that is not a store, another process's store, or a store with a bad
row is refused, naming the file and the problem.
"""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import tempfile
from contextlib import closing, suppress
from pathlib import Path
from typing import Any

import pytest

from kinesis_trio import KinesisError
from kinesis_trio.testing import FakeKinesis, Faults, load_state, save_state
from kinesis_trio.testing._model import FakeRecord, _seq
from kinesis_trio.testing._persist import StateStore
from tests.support.helpers import connect, entry
from tests.support.persist import populated, reopened, same_state

pytestmark = pytest.mark.anyio

MAX_HASH = 2**128 - 1
STATE = "kinesis-state.json"


async def answers(fake: FakeKinesis) -> dict[str, Any]:
    """What the read operations answer, for every stream."""
    out: dict[str, Any] = {}
    async with connect(fake) as client:
        out["ListStreams"] = await client.call("ListStreams", {})
        for name in sorted(fake.streams):
            ref = {"StreamName": name}
            out[name] = {
                "DescribeStream": await client.call("DescribeStream", ref),
                "DescribeStreamSummary": await client.call("DescribeStreamSummary", ref),
                "ListShards": await client.call("ListShards", ref),
                "GetRecords": await client.read_all(name),
            }
    return out


def largest_sequence(fake: FakeKinesis) -> int:
    return max(int(r.sequence_number) for name in fake.streams for r in fake.records(name))


async def test_a_snapshot_loads_into_a_new_fake_that_answers_alike(tmp_path: Path) -> None:
    fake = await populated()
    assert len(fake.streams["prov"].shards) == 6 and len(fake.streams["od"].shards) == 6
    path = tmp_path / STATE
    save_state(fake, path)
    assert os.listdir(tmp_path) == [STATE]  # no temporary file left behind
    document = json.loads(path.read_text())
    assert document["format"] == 1
    assert [s["name"] for s in document["streams"]] == ["auto", "empty", "od", "prov"]

    loaded = FakeKinesis()
    assert load_state(loaded, path) is True
    assert await answers(loaded) == await answers(fake)
    for name, stream in fake.streams.items():
        again = loaded.streams[name]
        assert loaded.records(name) == fake.records(name)  # data, keys, hash keys, arrival
        assert again.shards == stream.shards
        assert (
            again.mode,
            again.max_record_size,
            again.record_distribution_strategy,
            again.channel_count,
            again.created,
            again.next_shard,
        ) == (
            stream.mode,
            stream.max_record_size,
            stream.record_distribution_strategy,
            stream.channel_count,
            stream.created,
            stream.next_shard,
        )
    key_less = [r for r in loaded.records("auto") if r.partition_key is None]
    assert len(key_less) == 18
    assert [r.explicit_hash_key for r in loaded.records("auto") if r.data == b"kept"] == ["7"]
    assert loaded.streams["prov"].max_record_size == 2048 * 1024
    assert loaded.streams["prov"].channel_count == 2

    # saved again unchanged, the file is the same
    second = tmp_path / "again.json"
    save_state(loaded, second)
    assert second.read_bytes() == path.read_bytes()

    # new sequence numbers follow the stored ones; new shards take the next ids
    stored = largest_sequence(fake)
    async with connect(loaded) as client:
        for name in loaded.streams:
            key = None if name == "auto" else "k"
            result = await client.put_records(name, [entry(b"new", key)])
            assert int(result["Records"][0]["SequenceNumber"]) > stored
        opened = loaded.open_shards("prov")[0]
        await client.split_shard("prov", opened.shard_id, str(opened.start + 1))
    assert [s.shard_id for s in loaded.streams["prov"].shards[-2:]] == [
        "shardId-000000000006",
        "shardId-000000000007",
    ]
    low = loaded.streams["prov"].shards[-2]
    assert int(low.starting_sequence_number) > stored + len(loaded.streams)


async def test_a_loaded_fake_keeps_closed_shards_closed_and_reads_their_children(
    tmp_path: Path,
) -> None:
    """A parent closed before the snapshot stays closed: writes go to its children, and
    GetRecords at its end names them (ChildShards)."""
    fake = await populated()
    save_state(fake, tmp_path / STATE)
    loaded = FakeKinesis()
    load_state(loaded, tmp_path / STATE)
    parent = loaded.streams["prov"].shards[0]
    assert parent.closed and parent.ending_sequence_number is not None
    async with connect(loaded) as client:
        result = await client.put_records("prov", [entry(b"x", "low", ehk=0)])
        assert result["Records"][0]["ShardId"] == "shardId-000000000003"
        iterator = await client.get_shard_iterator("prov", parent.shard_id)
        page = await client.get_records(iterator)
    assert page["NextShardIterator"] is None
    assert [c["ShardId"] for c in page["ChildShards"]] == [
        "shardId-000000000003",
        "shardId-000000000004",
    ]
    assert len(page["Records"]) == len(parent.records) > 0


async def test_a_missing_file_loads_nothing(tmp_path: Path) -> None:
    fake = FakeKinesis()
    assert load_state(fake, tmp_path / STATE) is False
    assert fake.streams == {} and fake.changes == 0
    fake.create_stream("s")
    assert load_state(fake, tmp_path / "missing" / STATE) is False  # no conflict either
    assert list(fake.streams) == ["s"] and not (tmp_path / "missing").exists()
    async with connect(fake) as client:
        result = await client.put_records("s", [entry(b"x")])
    assert result["Records"][0]["SequenceNumber"] == _seq(1)


def valid_state() -> dict[str, Any]:
    """A snapshot of stream ``s`` (shard 0 split into 2 and 3), one key-less record added
    to shard 1."""
    fake = FakeKinesis()
    fake.create_stream("s", 2)
    fake.split_shard("s", "shardId-000000000000", 5)
    with tempfile.TemporaryDirectory() as where:
        save_state(fake, Path(where) / STATE)
        state: dict[str, Any] = json.loads((Path(where) / STATE).read_text())
    shard = state["streams"][0]["shards"][1]
    shard["records"] = [
        {
            "data": "eA==",
            "partition_key": None,
            "explicit_hash_key": None,
            "hash_key": shard["start"],
            "sequence_number": _seq(2),
            "arrival": 1.5,
        }
    ]
    state["last_sequence"] = 3
    return state


def corrupt(change: Any) -> bytes:
    state = valid_state()
    change(state)
    return json.dumps(state).encode()


def _set(path: str, value: Any) -> Any:
    """A change setting ``path`` (keys and indexes, separated by dots) to ``value``."""

    def change(state: Any) -> None:
        *parents, last = (int(p) if p.isdigit() else p for p in path.split("."))
        for step in parents:
            state = state[step]
        state[last] = value

    return change


def _drop(path: str) -> Any:
    def change(state: Any) -> None:
        *parents, last = (int(p) if p.isdigit() else p for p in path.split("."))
        for step in parents:
            state = state[step]
        del state[last]

    return change


CORRUPT: list[tuple[str, bytes, str]] = [
    ("truncated", json.dumps(valid_state()).encode()[:-20], "invalid JSON"),
    ("not-json", b"\xff\xfe\x00garbage", "invalid JSON"),
    ("a-list", b"[]", "not a JSON object"),
    ("future-format", corrupt(_set("format", 2)), "unsupported format 2"),
    ("no-format", corrupt(_drop("format")), "missing 'format'"),
    ("no-streams", corrupt(_drop("streams")), "missing 'streams'"),
    ("bad-counter", corrupt(_set("last_sequence", "3")), "$.last_sequence: '3' is not an integer"),
    ("bad-mode", corrupt(_set("streams.0.mode", "FAST")), "$.streams[0].mode: 'FAST' is not one"),
    (
        "bad-base64",
        corrupt(_set("streams.0.shards.1.records.0.data", "%%%")),
        "$.streams[0].shards[1].records[0].data: not base64",
    ),
    (
        "bad-hash-key",
        corrupt(_set("streams.0.shards.2.start", "12abc")),
        "$.streams[0].shards[2].start: '12abc' is not a decimal number",
    ),
    (
        "hash-key-too-big",
        corrupt(_set("streams.0.shards.2.end", str(2**128))),
        "$.streams[0].shards[2].end: is over 2^128-1",
    ),
    (
        "no-sequence-number",
        corrupt(_drop("streams.0.shards.1.records.0.sequence_number")),
        "$.streams[0].shards[1].records[0]: missing 'sequence_number'",
    ),
    (
        "orphan",
        corrupt(_set("streams.0.shards.2.parent_shard_id", "shardId-000000000099")),
        "names parent 'shardId-000000000099'",
    ),
    (
        "twice",
        corrupt(lambda s: s["streams"].append(s["streams"][0])),
        "$.streams[1]: stream 's' appears twice",
    ),
    (
        "auto-on-provisioned",
        corrupt(_set("streams.0.record_distribution_strategy", "AUTO")),
        "AUTO record distribution on a provisioned stream",
    ),
    # json.loads raises RecursionError
    ("nested-too-deeply", b"[" * 100_000 + b"]" * 100_000, "invalid JSON (nested too deeply)"),
    # json.loads raises ValueError: Exceeds the limit (4300 digits) for integer string ...
    (
        "integer-past-the-digit-limit",
        json.dumps(valid_state())
        .replace('"last_sequence": 3', '"last_sequence": ' + "9" * 5000)
        .encode(),
        "for integer string conversion",  # 3.10: "limit (4300)", 3.11+: "(4300 digits)"
    ),
    # a string of digits int() would refuse
    (
        "hash-key-past-the-digit-limit",
        corrupt(_set("streams.0.shards.2.end", "9" * 5000)),
        "$.streams[0].shards[2].end: is over 2^128-1",
    ),
    (
        "hash-key-of-zeros-past-the-digit-limit",
        corrupt(_set("streams.0.shards.2.start", "0" * 5000)),
        "",  # zeros are 0: the shard starts at 0 and loads
    ),
    (
        "sequence-number-past-the-digit-limit",
        corrupt(_set("streams.0.shards.1.starting_sequence_number", "9" * 5000)),
        "$.streams[0].shards[1].starting_sequence_number: '99999",
    ),
    (
        "short-record-sequence-number",
        corrupt(_set("streams.0.shards.1.records.0.sequence_number", "12")),
        "'12' is not a sequence number of the fake (56 digits)",
    ),
    (
        "counter-too-large",
        corrupt(_set("last_sequence", 10**60)),
        "$.last_sequence: 1000000000000000000000000000000000000000... (61 characters) is out",
    ),
    (
        "sequence-number-beyond-the-counter",
        corrupt(_set("streams.0.shards.1.starting_sequence_number", "9" * 100)),
        "a sequence number is beyond what the fake hands out",
    ),
    ("not-finite", corrupt(_set("streams.0.created", float("nan"))), "nan is not a finite"),
    (
        "retention-out-of-range",
        corrupt(_set("streams.0.retention_hours", 9000)),
        "$.streams[0].retention_hours: 9000 is out of range",
    ),
]


@pytest.mark.parametrize(("raw", "problem"), [c[1:] for c in CORRUPT], ids=[c[0] for c in CORRUPT])
def test_a_corrupt_file_is_a_value_error_naming_file_and_problem(
    tmp_path: Path, raw: bytes, problem: str
) -> None:
    path = tmp_path / STATE
    path.write_bytes(raw)
    fake = FakeKinesis()
    if not problem:
        assert load_state(fake, path) is True
        return
    with pytest.raises(ValueError) as info:
        load_state(fake, path)
    message = str(info.value)
    assert message.startswith(f"{path}: ") and problem in message
    assert "\n" not in message and len(message) < 300 + len(str(path))
    assert fake.streams == {} and fake.changes == 0 and fake._last_seq == 0  # nothing loaded


def test_the_valid_base_of_the_corrupt_cases_loads(tmp_path: Path) -> None:
    path = tmp_path / STATE
    path.write_text(json.dumps(valid_state()))
    fake = FakeKinesis()
    assert load_state(fake, path) is True
    assert [r.data for r in fake.records("s")] == [b"x"]
    assert fake.changes == 1
    assert fake.records("s")[0].partition_key is None
    fake.split_shard("s", "shardId-000000000002", 3)
    assert [s.shard_id for s in fake.streams["s"].shards[-2:]] == [
        "shardId-000000000004",
        "shardId-000000000005",
    ]
    assert fake.streams["s"].shards[-1].starting_sequence_number == _seq(4)


async def test_a_counter_behind_the_stored_numbers_is_caught_up(tmp_path: Path) -> None:
    """A hand-edited snapshot whose counters lag what it holds still never repeats a
    sequence number or a shard id."""
    state = valid_state()
    state["last_sequence"] = 0
    state["streams"][0]["next_shard"] = 1
    path = tmp_path / STATE
    path.write_text(json.dumps(state))
    fake = FakeKinesis()
    load_state(fake, path)
    async with connect(fake) as client:
        result = await client.put_records("s", [entry(b"y", ehk=MAX_HASH)])
        await client.split_shard("s", "shardId-000000000002", 3)
    assert result["Records"][0]["SequenceNumber"] == _seq(3)  # after the stored 2
    assert [s.shard_id for s in fake.streams["s"].shards[-2:]] == [
        "shardId-000000000004",
        "shardId-000000000005",
    ]


def test_loading_into_a_fake_with_streams_is_refused(tmp_path: Path) -> None:
    source = FakeKinesis()
    source.create_stream("a")
    save_state(source, tmp_path / STATE)
    fake = FakeKinesis()
    fake.create_stream("b")
    with pytest.raises(ValueError, match="already has streams"):
        load_state(fake, tmp_path / STATE)
    assert list(fake.streams) == ["b"]


def test_a_save_is_fsynced_before_the_rename_and_a_failed_one_keeps_the_old_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = FakeKinesis()
    fake.create_stream("s")
    path = tmp_path / STATE
    save_state(fake, path)
    old = path.read_bytes()

    events: list[tuple[str, str]] = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd: int) -> None:
        kind = "dir" if stat.S_ISDIR(os.fstat(fd).st_mode) else "file"
        events.append(("fsync", kind))
        real_fsync(fd)

    def replace(src: Any, dst: Any) -> None:
        events.append(("replace", str(Path(src).parent)))
        real_replace(src, dst)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    fake.create_stream("t")
    save_state(fake, path)
    assert events == [("fsync", "file"), ("replace", str(tmp_path)), ("fsync", "dir")]
    assert [s["name"] for s in json.loads(path.read_text())["streams"]] == ["s", "t"]
    assert os.listdir(tmp_path) == [STATE]

    def full(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    fake.create_stream("u")
    with pytest.raises(OSError, match="No space left"):
        save_state(fake, path)
    assert os.listdir(tmp_path) == [STATE]  # the temporary file is gone
    assert [s["name"] for s in json.loads(path.read_text())["streams"]] == ["s", "t"]
    assert path.read_bytes() != old


async def test_changes_counts_state_changes_only() -> None:
    """``fake.changes`` moves on every change a snapshot would hold, and on nothing else."""
    fake = FakeKinesis(faults=Faults(seed=2))
    assert fake.changes == 0
    seen = [0]

    def moved() -> bool:
        changed = fake.changes > seen[0]
        seen[0] = fake.changes
        return changed

    fake.create_stream("s", 2)
    assert moved()
    with pytest.raises(ValueError):
        fake.create_stream("s")
    assert not moved()
    for change in (
        lambda: fake.update_max_record_size("s", 2048),
        lambda: fake.set_channel_count("s", 3),
        lambda: fake.split_shard("s", "shardId-000000000000", 1),
        lambda: fake.merge_shards("s", "shardId-000000000002", "shardId-000000000003"),
        lambda: fake.update_shard_count("s", 2),
        lambda: fake.create_stream("od", 2, on_demand=True),
        lambda: fake.update_record_distribution_strategy("od", "AUTO"),
    ):
        change()
        assert moved()

    async with connect(fake) as client:
        reads: list[tuple[str, dict[str, Any]]] = [
            ("ListStreams", {}),
            ("ListShards", {"StreamName": "s"}),
            ("DescribeStream", {"StreamName": "s"}),
            ("DescribeStreamSummary", {"StreamName": "s"}),
            ("PutRecords", {"StreamName": "s", "Records": [entry(b"x")], "DryRun": True}),
            ("PutRecords", {"StreamName": "s", "Records": [entry(b"x", "")]}),
            ("SplitShard", {"StreamName": "s", "ShardToSplit": "nope", "NewStartingHashKey": "1"}),
        ]
        for operation, body in reads:
            with suppress(KinesisError):
                await client.call(operation, body)
            assert not moved(), operation
        fake.fail_next(1, "throttle_entries")  # the entry fails: nothing stored
        await client.put_records("s", [entry(b"x")])
        assert not moved()
        await client.read_all("s")
        assert not moved()

        await client.put_records("s", [entry(b"x"), entry(b"y")])
        assert moved()
        await client.call("PutRecord", {"StreamName": "od", **entry(b"z", None)})
        assert moved()
        for operation, body in (
            ("CreateStream", {"StreamName": "c", "ShardCount": 1}),
            ("UpdateMaxRecordSize", {"StreamName": "c", "MaxRecordSizeInKiB": 4096}),
            (
                "UpdateStreamRecordDistributionStrategy",
                {
                    "StreamARN": fake.stream_arn("od"),
                    "RecordDistributionStrategy": "USER_PARTITION_KEY",
                },
            ),
            (
                "SplitShard",
                {
                    "StreamName": "c",
                    "ShardToSplit": "shardId-000000000000",
                    "NewStartingHashKey": "7",
                },
            ),
            (
                "MergeShards",
                {
                    "StreamName": "c",
                    "ShardToMerge": "shardId-000000000001",
                    "AdjacentShardToMerge": "shardId-000000000002",
                },
            ),
            (
                "UpdateShardCount",
                {"StreamName": "c", "TargetShardCount": 2, "ScalingType": "UNIFORM_SCALING"},
            ),
            ("DeleteStream", {"StreamName": "c"}),
        ):
            await client.call(operation, body)
            assert moved(), operation


# -- the SQLite store ------------------------------------------------------------------------

STORE = "kinesis-state.sqlite"


def stored_rows(store: StateStore) -> list[tuple[str, str, str]]:
    """The records the (open) store holds."""
    rows = store._conn.execute(
        "SELECT stream, shard_id, sequence_number FROM records ORDER BY 1, 2, 3"
    )
    return [(r[0], r[1], r[2]) for r in rows]


def held_rows(fake: FakeKinesis) -> list[tuple[str, str, str]]:
    return sorted(
        (name, s.shard_id, r.sequence_number)
        for name, stream in fake.streams.items()
        for s in stream.shards
        for r in s.records
    )


def append(fake: FakeKinesis, name: str, count: int, now: float = 5.0) -> None:
    """``count`` records straight into the stream's open shards, in turn."""
    shards = fake.open_shards(name)
    for i in range(count):
        shard = shards[i % len(shards)]
        seq = fake._next_seq()
        shard.records.append(
            FakeRecord(b"n%d" % i, f"k{i}", None, shard.start, seq, shard.shard_id, now)
        )
        fake.changes += 1


async def test_the_store_loads_into_a_new_fake_that_answers_alike(tmp_path: Path) -> None:
    fake = await populated()
    fake.streams["od"].retention_hours = 72
    fake.clock_offset = 1_000.0
    store = StateStore(tmp_path / STORE)
    assert store.initialized is False and store.load(FakeKinesis()) is False
    assert store.save(fake) is True
    assert store.save(fake) is False  # nothing changed
    store.close()
    assert sorted(os.listdir(tmp_path)) == [STORE]  # the WAL checkpointed and removed

    loaded = FakeKinesis()
    loaded.clock_offset = 1_000.0
    store = StateStore(tmp_path / STORE)
    assert store.load(loaded) is True and loaded.changes == 1
    same_state(loaded, fake)
    assert await answers(loaded) == await answers(fake)
    assert store.save(loaded) is False  # loaded as saved: nothing to write
    store.close()
    # arrival times are kept as wall-clock times
    other = FakeKinesis()
    other.clock_offset = 1_250.0
    store = StateStore(tmp_path / STORE)
    store.load(other)
    store.close()
    assert [r.arrival for r in other.records("prov")] == pytest.approx(
        [r.arrival - 250.0 for r in fake.records("prov")], abs=1e-6
    )
    stored = largest_sequence(fake)
    async with connect(loaded) as client:
        result = await client.put_records("prov", [entry(b"new", "k")])
    assert int(result["Records"][0]["SequenceNumber"]) > stored


async def test_a_save_writes_what_changed_and_only_that(tmp_path: Path) -> None:
    """New records inserted; records trimmed from the front of a shard (retention), of a
    shard emptied, of a stream deleted or made anew under its name, deleted; stream and
    shard changes kept."""
    path = tmp_path / STORE
    fake = await populated()
    store = StateStore(path)
    store.save(fake)

    append(fake, "prov", 7)
    plan = store.plan(fake)
    assert plan is not None and plan.count == 7 and not plan.trims and not plan.drops
    store.write(plan)
    assert store.plan(fake) is None

    first, second = [s for s in fake.streams["prov"].shards if len(s.records) >= 3][:2]
    del first.records[:2]  # retention trims from the front
    second.records.clear()
    gone = [("od", s.shard_id) for s in fake.streams["od"].shards if s.records]
    del fake.streams["od"]
    fake.create_stream("auto-2", 2)
    fake.split_shard("auto-2", "shardId-000000000000", 5)
    fake.streams["empty"].retention_hours = 100
    fake.set_channel_count("empty", 9)
    plan = store.plan(fake)
    assert plan is not None and plan.new == []
    assert plan.trims == [("prov", first.shard_id, first.records[0].sequence_number)]
    assert sorted(plan.drops) == sorted([("prov", second.shard_id), *gone])
    store.write(plan)
    assert stored_rows(store) == held_rows(fake)

    # a stream deleted and made anew under the same name between two saves
    del fake.streams["auto"]
    fake.create_stream("auto", 1)
    append(fake, "auto", 3)
    append(fake, "prov", 2)
    store.save(fake)
    assert stored_rows(store) == held_rows(fake)
    store.close()
    same_state(reopened(path), fake)


def test_records_trimmed_by_retention_leave_the_store(tmp_path: Path) -> None:
    path = tmp_path / STORE
    fake = FakeKinesis()
    fake.create_stream("s", 2)
    append(fake, "s", 6, now=0.0)
    append(fake, "s", 4, now=20 * 3600.0)
    store = StateStore(path)
    store.save(fake)
    fake._expire(fake.streams["s"], 24 * 3600.0 + 1)  # the first 6 are over 24 h old
    assert len(fake.records("s")) == 4
    plan = store.plan(fake)
    assert plan is not None and plan.count == 0 and len(plan.trims) == 2
    store.write(plan)
    assert stored_rows(store) == held_rows(fake)
    fake._expire(fake.streams["s"], 48 * 3600.0)  # all of them
    store.save(fake)
    assert stored_rows(store) == []
    store.close()


async def test_a_failed_save_changes_nothing_and_the_next_one_holds_everything(
    tmp_path: Path,
) -> None:
    path = tmp_path / STORE
    fake = await populated()
    store = StateStore(path)
    store.save(fake)
    append(fake, "prov", 5)
    del fake.streams["od"]

    real = store._conn

    class Full:
        """The connection on a full disk: inserting records fails."""

        def __getattr__(self, name: str) -> Any:
            return getattr(real, name)

        def executemany(self, sql: str, rows: Any) -> Any:
            if sql.startswith("INSERT OR REPLACE INTO records"):
                raise sqlite3.OperationalError("database or disk is full")
            return real.executemany(sql, rows)

    store._conn = Full()  # type: ignore[assignment]
    with pytest.raises(sqlite3.OperationalError, match="disk is full"):
        store.save(fake)
    store._conn = real
    assert ("od",) in {(r[0],) for r in stored_rows(store)}  # rolled back: all still there
    append(fake, "prov", 3)
    plan = store.plan(fake)
    assert plan is not None and plan.count == 8  # the failed save's records too
    store.write(plan)
    store.write(plan)  # twice is harmless
    assert stored_rows(store) == held_rows(fake)
    store.close()
    same_state(reopened(path), fake)


def test_a_store_in_use_by_another_is_refused(tmp_path: Path) -> None:
    path = tmp_path / STORE
    fake = FakeKinesis()
    fake.create_stream("s")
    store = StateStore(path)
    store.save(fake)
    with pytest.raises(ValueError, match="in use by another process") as info:
        StateStore(path)
    assert str(info.value).startswith(f"{path}: ")
    store.close()
    StateStore(path).close()


def _bad_store(path: Path, change: str) -> None:
    fake = FakeKinesis()
    fake.create_stream("s", 2)
    append(fake, "s", 4)
    store = StateStore(path)
    store.save(fake)
    store.close()
    with closing(sqlite3.connect(path)) as db, db:
        db.execute(change)


BAD_STORES: list[tuple[str, str, str]] = [
    (
        "future-format",
        "UPDATE meta SET value = '3' WHERE key = 'format'",
        "unsupported format '3' (this version reads format 2)",
    ),
    (
        "bad-hash-key",
        "UPDATE shards SET start_hash_key = '12abc' WHERE position = 1",
        "streams['s'].shards['shardId-000000000001'].start: '12abc' is not a decimal number",
    ),
    (
        "bad-mode",
        "UPDATE streams SET mode = 'FAST'",
        "streams['s'].mode: 'FAST' is not one of PROVISIONED, ON_DEMAND",
    ),
    (
        "record-data-as-text",
        "UPDATE records SET data = 'text' WHERE sequence_number LIKE '%2'",
        "records['s', 'shardId-000000000001', '4900000000000000000000000000000000000000000000"
        "0000000002'].data: 'text' is not a blob",
    ),
    (
        "record-hash-key",
        "UPDATE records SET hash_key = '" + "9" * 5000 + "' WHERE sequence_number LIKE '%1'",
        ".hash_key: is over 2^128-1",
    ),
    (
        "record-sequence-number",
        "UPDATE records SET sequence_number = '7' WHERE sequence_number LIKE '%1'",
        ".sequence_number: '7' is not a sequence number of the fake (56 digits)",
    ),
    (
        "orphan-records",
        "UPDATE records SET shard_id = 'shardId-000000000009' WHERE sequence_number LIKE '%1'",
        "records: 1 records belong to no shard",
    ),
    (
        "orphan-shard",
        "UPDATE shards SET stream = 't' WHERE position = 1",
        "shards: shard 'shardId-000000000001' of unknown stream 't'",
    ),
    (
        "counter",
        "UPDATE meta SET value = 'x' WHERE key = 'last_sequence'",
        "last_sequence: 'x' is not an integer",
    ),
]


@pytest.mark.parametrize(
    ("change", "problem"), [c[1:] for c in BAD_STORES], ids=[c[0] for c in BAD_STORES]
)
def test_a_bad_store_is_a_value_error_naming_file_and_problem(
    tmp_path: Path, change: str, problem: str
) -> None:
    path = tmp_path / STORE
    _bad_store(path, change)
    fake = FakeKinesis()
    with pytest.raises(ValueError) as info:
        store = StateStore(path)
        try:
            store.load(fake)
        finally:
            store.close()
    message = str(info.value)
    assert message.startswith(f"{path}: ") and problem in message, message
    assert "\n" not in message and len(message) < 300 + len(str(path))
    assert fake.streams == {} and fake.changes == 0 and fake._last_seq == 0


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        (
            b"\xff\xfe\x00garbage" * 1000,
            "not a kinesis-trio state database (file is not a database)",
        ),
        (b"SQLite format 3\x00" + b"\x01" * 4000, "not a kinesis-trio state database"),
    ],
    ids=["garbage", "a-broken-header"],
)
def test_a_file_that_is_not_a_database_is_refused(tmp_path: Path, raw: bytes, problem: str) -> None:
    path = tmp_path / STORE
    path.write_bytes(raw)
    with pytest.raises(ValueError) as info:
        StateStore(path)
    message = str(info.value)
    assert message.startswith(f"{path}: ") and problem in message, message
    assert path.read_bytes() == raw  # left as it was


def test_another_applications_database_is_refused(tmp_path: Path) -> None:
    path = tmp_path / STORE
    with closing(sqlite3.connect(path)) as db, db:
        db.execute("CREATE TABLE notes (text TEXT)")
    with pytest.raises(ValueError, match="another application's"):
        StateStore(path)


def test_a_damaged_database_is_refused_when_loaded(tmp_path: Path) -> None:
    """A database whose pages were overwritten: SQLite's own error, naming the file."""
    path = tmp_path / STORE
    fake = FakeKinesis()
    fake.create_stream("s", 2)
    append(fake, "s", 2000)
    store = StateStore(path)
    store.save(fake)
    store.close()
    raw = bytearray(path.read_bytes())
    raw[8192 : len(raw) - 4096] = b"\x5a" * (len(raw) - 4096 - 8192)
    path.write_bytes(bytes(raw))
    with pytest.raises(ValueError) as info:
        store = StateStore(path)
        try:
            store.load(FakeKinesis())
        finally:
            store.close()
    message = str(info.value)
    assert message.startswith(f"{path}: ") and "\n" not in message, message
