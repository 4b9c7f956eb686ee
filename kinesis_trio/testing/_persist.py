"""The fake's durable state on disk: a SQLite store saved incrementally, or a JSON snapshot.

:class:`StateStore` (format 2, what ``kinesis-trio local --data DIR`` keeps) is a SQLite
database in WAL mode. Tables::

    meta(key, value)       format "2", last_sequence (the fake's sequence counter, the last
                           one handed out), migrated_from (the JSON file it was made from)
    streams(name, created, mode, max_record_size, record_distribution_strategy,
            channel_count, next_shard, retention_hours)
    shards(stream, position, shard_id, start_hash_key, end_hash_key, parent_shard_id,
           adjacent_parent_shard_id, closed, starting_sequence_number,
           ending_sequence_number)
    records(stream, shard_id, sequence_number, data, partition_key, explicit_hash_key,
            hash_key, arrival)            primary key (stream, shard_id, sequence_number)

A save is one transaction: the (small) stream and shard tables are rewritten, the records
the store does not hold yet are inserted and those the fake no longer holds (trimmed from
the front of a shard by retention, or of a shard or stream that is gone) are deleted. Only
new records are read from the fake: the store remembers the lowest and highest sequence
number it holds per shard. :meth:`StateStore.plan` gathers a save without awaiting (a
consistent view, in the event loop); :meth:`StateStore.write` writes it and may run in a
worker thread.

:func:`save_state` / :func:`load_state` write and read one JSON snapshot (format 1)::

    {"format": 1,
     "last_sequence": 42,            # the fake's sequence counter (the last one handed out)
     "streams": [
       {"name": "orders", "created": 1767225600.123, "mode": "PROVISIONED",
        "max_record_size": 1048576, "record_distribution_strategy": "USER_PARTITION_KEY",
        "channel_count": 0, "next_shard": 3, "retention_hours": 24,
        "shards": [
          {"shard_id": "shardId-000000000000", "start": "0", "end": "1701...",
           "parent_shard_id": null, "adjacent_parent_shard_id": null, "closed": true,
           "starting_sequence_number": "4900...1", "ending_sequence_number": "4900...7",
           "records": [
             {"data": "<base64>", "partition_key": "k", "explicit_hash_key": null,
              "hash_key": "1234...", "sequence_number": "4900...3", "arrival": 812.5}]}]}]}

(``retention_hours`` may be absent: 24.) In both, hash keys are decimal strings (128-bit)
and ``arrival`` is the wall-clock time the record was stored at: its
``anyio.current_time()`` plus the fake's ``clock_offset`` (the loading fake subtracts its
own). Shard iterators, NextTokens, token buckets, statistics and fault settings are not
kept. A record's sequence number is a 56-digit decimal, as the fake hands them out, so
their string order is their numeric order.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import contextlib
import itertools
import json
import math
import operator
import os
import re
import sqlite3
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._checks import _MAX_CHANNELS, _STRATEGIES
from ._model import _MAX_HASH, FakeRecord, FakeShard, _seq_counter
from ._streams import _Stream

if TYPE_CHECKING:
    from ._server import FakeKinesis

__all__ = ["FORMAT", "STORE_FORMAT", "StateStore", "load_state", "save_state"]

#: The JSON snapshot format :func:`save_state` writes and :func:`load_state` reads.
FORMAT = 1
#: The SQLite store's format (``meta.format``).
STORE_FORMAT = 2
_MODES = ("PROVISIONED", "ON_DEMAND")
#: RetentionPeriodHours: 24 to 8760
_RETENTION = (24, 8760)
#: SequenceNumber's pattern allows 129 digits; a hash key has at most 39 (2^128 - 1).
_SEQ_DIGITS, _HASH_DIGITS = 129, 39
#: The fake's sequence numbers: 56 digits (``_seq``), so the counter stays below 10^54.
_RECORD_SEQ = re.compile(r"[1-9][0-9]{55}")
_MAX_COUNTER = 10**54 - 1
#: Shard ids are ``shardId-`` and 12 digits; a larger counter is not a real one.
_MAX_NEXT_SHARD = 10**12
#: ``PRAGMA application_id`` of a kinesis-trio store ("KTr2").
_APPLICATION_ID = 0x4B547232

# -- the JSON snapshot (format 1) ----------------------------------------------------------


def save_state(fake: FakeKinesis, path: str | os.PathLike[str]) -> None:
    """Write the fake's streams, shards, records and sequence counter to ``path`` (JSON).

    Atomic: written to a temporary file in the same directory, flushed to disk, then
    renamed over ``path``; a crash leaves the previous snapshot or the new one, never a
    mix. Synchronous, and it reads the fake without awaiting, so a snapshot taken in the
    event loop is consistent. The directory must exist.
    """
    target = Path(path)
    state = _snapshot(fake)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(state, out, separators=(",", ":"))
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_dir(target.parent)


def load_state(fake: FakeKinesis, path: str | os.PathLike[str]) -> bool:
    """Load a snapshot written by :func:`save_state` into ``fake``, which has no streams.

    Returns False, changing nothing, if ``path`` does not exist. A file that is not a valid
    snapshot raises ``ValueError`` naming the file and the problem (one line), and changes
    nothing; so does a fake that already has streams. Once loaded, new sequence numbers
    follow the largest stored one and new shard ids the stream's highest; ``fake.changes``
    counts the load as one change.
    """
    source = Path(path)
    try:
        raw = source.read_bytes()
    except FileNotFoundError:
        return False
    if fake.streams:
        raise ValueError(f"{source}: cannot load into a fake that already has streams")
    try:
        state = json.loads(raw)
    except RecursionError:
        raise ValueError(
            f"{source}: not a kinesis-trio state file: invalid JSON (nested too deeply)"
        ) from None
    except (ValueError, UnicodeDecodeError) as exc:  # JSONDecodeError is a ValueError
        raise ValueError(f"{source}: not a kinesis-trio state file: invalid JSON ({exc})") from None
    try:
        streams, last_seq = _restore(state)
    except _Corrupt as exc:
        raise ValueError(f"{source}: {exc}") from None
    except (ValueError, TypeError, ArithmeticError, RecursionError) as exc:  # a safety net
        problem = f"{type(exc).__name__}: {exc}"
        raise ValueError(f"{source}: not a valid state file ({problem})") from None
    fake._restore(streams, last_seq)
    return True


def _snapshot(fake: FakeKinesis) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "last_sequence": fake._last_seq,
        "streams": [
            _dump_stream(fake.streams[name], fake.clock_offset) for name in sorted(fake.streams)
        ],
    }


def _dump_stream(stream: _Stream, offset: float) -> dict[str, Any]:
    return {
        "name": stream.name,
        "created": stream.created,
        "mode": stream.mode,
        "max_record_size": stream.max_record_size,
        "record_distribution_strategy": stream.record_distribution_strategy,
        "channel_count": stream.channel_count,
        "next_shard": stream.next_shard,
        "retention_hours": stream.retention_hours,
        "shards": [_dump_shard(s, offset) for s in stream.shards],
    }


def _dump_shard(shard: FakeShard, offset: float) -> dict[str, Any]:
    return {
        "shard_id": shard.shard_id,
        "start": str(shard.start),
        "end": str(shard.end),
        "parent_shard_id": shard.parent_shard_id,
        "adjacent_parent_shard_id": shard.adjacent_parent_shard_id,
        "closed": shard.closed,
        "starting_sequence_number": shard.starting_sequence_number,
        "ending_sequence_number": shard.ending_sequence_number,
        "records": [
            {
                "data": base64.b64encode(r.data).decode("ascii"),
                "partition_key": r.partition_key,
                "explicit_hash_key": r.explicit_hash_key,
                "hash_key": str(r.hash_key),
                "sequence_number": r.sequence_number,
                "arrival": r.arrival + offset,
            }
            for r in shard.records
        ],
    }


def _fsync_dir(directory: Path) -> None:
    """Make the rename durable (POSIX); best effort where directories cannot be opened."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        with contextlib.suppress(OSError):
            os.fsync(fd)
    finally:
        os.close(fd)


# -- the SQLite store (format 2) -----------------------------------------------------------

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS streams (name TEXT PRIMARY KEY, created REAL, mode TEXT,"
    " max_record_size INTEGER, record_distribution_strategy TEXT, channel_count INTEGER,"
    " next_shard INTEGER, retention_hours INTEGER)",
    "CREATE TABLE IF NOT EXISTS shards (stream TEXT, position INTEGER, shard_id TEXT,"
    " start_hash_key TEXT, end_hash_key TEXT, parent_shard_id TEXT,"
    " adjacent_parent_shard_id TEXT, closed INTEGER, starting_sequence_number TEXT,"
    " ending_sequence_number TEXT, PRIMARY KEY (stream, position))",
    "CREATE TABLE IF NOT EXISTS records (stream TEXT, shard_id TEXT, sequence_number TEXT,"
    " data BLOB, partition_key TEXT, explicit_hash_key TEXT, hash_key TEXT, arrival REAL,"
    " PRIMARY KEY (stream, shard_id, sequence_number))",
)
_SEQUENCE_OF = operator.attrgetter("sequence_number")
_Key = tuple[str, str]  # (stream, shard_id)


@dataclass
class SavePlan:
    """One save gathered from the fake: what :meth:`StateStore.write` puts in the store."""

    streams: list[tuple[Any, ...]]
    shards: list[tuple[Any, ...]]
    last_sequence: int
    #: the new records of each shard: (stream, shard_id, records); a record does not change
    #: once stored, so the rows can be made later, in another thread
    new: list[tuple[str, str, list[FakeRecord]]]
    #: the fake's ``clock_offset`` (arrival times are stored as wall-clock times)
    offset: float
    #: (stream, shard_id, first sequence number the fake holds): delete the ones below
    trims: list[tuple[str, str, str]]
    #: shards whose records are all gone (emptied, deleted, or in a deleted stream)
    drops: list[_Key]
    meta: dict[str, str] = field(default_factory=dict)
    #: the (lowest, highest) sequence number stored per shard once written
    held: dict[_Key, tuple[str, str]] = field(default_factory=dict)

    @property
    def count(self) -> int:
        """How many records it inserts."""
        return sum(len(records) for _, _, records in self.new)

    def rows(self) -> Iterator[tuple[Any, ...]]:
        """The rows of ``records`` it inserts."""
        offset = self.offset
        for name, shard_id, records in self.new:
            for r in records:
                yield (
                    name,
                    shard_id,
                    r.sequence_number,
                    r.data,
                    r.partition_key,
                    r.explicit_hash_key,
                    str(r.hash_key),
                    r.arrival + offset,
                )


class StateStore:
    """The fake's state in a SQLite database, saved incrementally (format 2).

    Opening takes the database for this process alone (another process opening it gets
    ``ValueError``: in use). :meth:`load` loads it into a fake; :meth:`plan` (in the event
    loop) and :meth:`write` (in a worker thread, or not) save what changed since the last
    save, :meth:`save` both at once. WAL mode with ``synchronous=FULL``: a save that
    returned is on disk, across a crash of the process or of the machine. :meth:`close`
    checkpoints the WAL into the database and removes it. Not for two saves at once; a
    lock makes a second one wait for the first.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        #: (lowest, highest) sequence number of the records stored per (stream, shard_id)
        self._held: dict[_Key, tuple[str, str]] = {}
        #: the metadata rows of the last save (a save without changes is skipped)
        self._last: tuple[Any, ...] | None = None
        self._meta: dict[str, str] = {}
        self._pending_meta: dict[str, str] = {}
        self._conn = self._connect()

    @property
    def meta(self) -> dict[str, str]:
        """The ``meta`` table as stored (empty for a new store)."""
        return dict(self._meta)

    @property
    def initialized(self) -> bool:
        """Whether the store holds a saved state (its first save committed)."""
        return "format" in self._meta

    def note(self, key: str, value: str) -> None:
        """Set ``meta[key]`` with the next save."""
        self._pending_meta[key] = value

    def _fail(self, problem: str) -> ValueError:
        return ValueError(f"{self.path}: {problem}")

    def _connect(self) -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(
                self.path, timeout=0.5, isolation_level=None, check_same_thread=False
            )
        except sqlite3.Error as exc:
            raise self._fail(f"cannot open the state database ({exc})") from None
        try:
            # EXCLUSIVE: the file stays locked while the engine runs (a second engine on the
            # same DIR is refused) and the WAL index lives in memory (no -shm file).
            conn.execute("PRAGMA locking_mode=EXCLUSIVE")
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=FULL")
            conn.execute("BEGIN IMMEDIATE")  # takes the lock now
            conn.execute("COMMIT")
            application = conn.execute("PRAGMA application_id").fetchone()[0]
            tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
            if tables and application != _APPLICATION_ID:
                raise self._fail("not a kinesis-trio state database (another application's)")
            if "meta" in tables:
                self._meta = self._read_meta(conn)
        except sqlite3.Error as exc:
            conn.close()
            if "locked" in str(exc):
                raise self._fail("in use by another process (the database is locked)") from None
            raise self._fail(f"not a kinesis-trio state database ({exc})") from None
        except BaseException:
            conn.close()
            raise
        return conn

    def _read_meta(self, conn: sqlite3.Connection) -> dict[str, str]:
        meta: dict[str, str] = {}
        for key, value in conn.execute("SELECT key, value FROM meta"):
            if not isinstance(key, str) or not isinstance(value, str):
                raise self._fail(f"meta: {_short(key)} = {_short(value)} is not text")
            meta[key] = value
        version = meta.get("format")
        if version is not None and version != str(STORE_FORMAT):
            raise self._fail(
                f"unsupported format {_short(version)} (this version reads format {STORE_FORMAT})"
            )
        return meta

    # -- loading ------------------------------------------------------------------------

    def load(self, fake: FakeKinesis) -> bool:
        """Load the stored state into ``fake``, which has no streams; False if there is none.

        A store that does not hold a valid state raises ``ValueError`` naming the file and
        the problem (one line), and changes nothing. ``fake.changes`` counts the load as
        one change. Later saves write only what changed since.
        """
        if not self.initialized:
            return False
        if fake.streams:
            raise self._fail("cannot load into a fake that already has streams")
        with self._lock:
            try:
                streams, last_seq, held = self._read()
            except _Corrupt as exc:
                raise self._fail(str(exc)) from None
            except sqlite3.Error as exc:
                raise self._fail(f"not a kinesis-trio state database ({exc})") from None
            except (ValueError, TypeError, ArithmeticError) as exc:  # a safety net
                raise self._fail(f"not a valid state ({type(exc).__name__}: {exc})") from None
            self._held = held
        fake._restore(streams, last_seq)
        self._last = self._metadata(fake)
        return True

    def _read(self) -> tuple[list[_Stream], int, dict[_Key, tuple[str, str]]]:
        conn = self._conn
        state: dict[str, Any] = {  # checked as a JSON snapshot is, records aside
            "format": FORMAT,
            "last_sequence": _parse_int(self._meta.get("last_sequence")),
            "streams": [],
        }
        by_name: dict[str, dict[str, Any]] = {}
        for row in conn.execute(
            "SELECT name, created, mode, max_record_size, record_distribution_strategy,"
            " channel_count, next_shard, retention_hours FROM streams ORDER BY name"
        ):
            columns = dict(zip(_STREAM_COLUMNS, row, strict=True))
            columns["shards"] = []
            state["streams"].append(columns)
            if isinstance(row[0], str):
                by_name[row[0]] = columns
        for row in conn.execute(
            "SELECT stream, shard_id, start_hash_key, end_hash_key, parent_shard_id,"
            " adjacent_parent_shard_id, closed, starting_sequence_number,"
            " ending_sequence_number FROM shards ORDER BY stream, position"
        ):
            owner = by_name.get(row[0])
            if owner is None:
                raise _Corrupt(f"shards: shard {_short(row[1])} of unknown stream {_short(row[0])}")
            described = dict(zip(_SHARD_COLUMNS, row[1:], strict=True))
            described["closed"] = row[6] == 1 if row[6] in (0, 1) else row[6]
            described["records"] = []
            owner["shards"].append(described)
        streams, counter = _restore(state, named=True)
        held: dict[_Key, tuple[str, str]] = {}
        count = 0
        for stream in streams:
            for shard in stream.shards:
                records = shard.records
                for row in conn.execute(
                    "SELECT sequence_number, data, partition_key, explicit_hash_key, hash_key,"
                    " arrival FROM records WHERE stream = ? AND shard_id = ?"
                    " ORDER BY sequence_number",
                    (stream.name, shard.shard_id),
                ):
                    records.append(_stored_record(row, stream.name, shard.shard_id))
                if records:
                    count += len(records)
                    last = records[-1].sequence_number
                    held[stream.name, shard.shard_id] = (records[0].sequence_number, last)
                    counter = max(counter, _seq_counter(last))
        total = conn.execute("SELECT count(*) FROM records").fetchone()[0]
        if total != count:
            raise _Corrupt(f"records: {total - count} records belong to no shard")
        return streams, counter, held

    # -- saving -------------------------------------------------------------------------

    def _metadata(self, fake: FakeKinesis) -> tuple[Any, ...]:
        streams: list[tuple[Any, ...]] = []
        shards: list[tuple[Any, ...]] = []
        for name, stream in fake.streams.items():
            streams.append(
                (
                    name,
                    stream.created,
                    stream.mode,
                    stream.max_record_size,
                    stream.record_distribution_strategy,
                    stream.channel_count,
                    stream.next_shard,
                    stream.retention_hours,
                )
            )
            for position, s in enumerate(stream.shards):
                shards.append(
                    (
                        name,
                        position,
                        s.shard_id,
                        str(s.start),
                        str(s.end),
                        s.parent_shard_id,
                        s.adjacent_parent_shard_id,
                        int(s.closed),
                        s.starting_sequence_number,
                        s.ending_sequence_number,
                    )
                )
        return streams, shards, fake._last_seq

    def plan(self, fake: FakeKinesis) -> SavePlan | None:
        """What to save (``None``: nothing changed since the last save written).

        Reads the fake without awaiting, so a plan made in the event loop is consistent;
        it takes only the records newer than those stored (found by bisection; a list
        slice, their rows are made by :meth:`write`) and the (small) metadata.
        """
        streams, shards, last_seq = metadata = self._metadata(fake)
        held = self._held
        new: list[tuple[str, str, list[FakeRecord]]] = []
        trims: list[tuple[str, str, str]] = []
        now_held: dict[_Key, tuple[str, str]] = {}
        for name, stream in fake.streams.items():
            for shard in stream.shards:
                records = shard.records
                if not records:
                    continue
                shard_id = shard.shard_id
                first = records[0].sequence_number
                last = records[-1].sequence_number
                was = held.get((name, shard_id))
                start = 0
                if was is not None:
                    low, high = was
                    if first > low:  # trimmed from the front (or a stream made anew)
                        trims.append((name, shard_id, first))
                    if last <= high:
                        start = len(records)
                    elif first <= high:
                        start = bisect.bisect_right(records, high, key=_SEQUENCE_OF)
                if start < len(records):
                    new.append((name, shard_id, records[start:]))
                now_held[name, shard_id] = (first, last)
        drops = [key for key in held if key not in now_held]
        pending = dict(self._pending_meta)
        if self.initialized and not (new or trims or drops or pending) and metadata == self._last:
            return None
        plan = SavePlan(
            streams, shards, last_seq, new, fake.clock_offset, trims, drops, pending, now_held
        )
        plan_meta = plan.meta
        plan_meta["format"] = str(STORE_FORMAT)
        plan_meta["last_sequence"] = str(last_seq)
        return plan

    def write(self, plan: SavePlan) -> None:
        """Write ``plan`` in one transaction (it may run in a worker thread).

        Raises what SQLite raises (``sqlite3.Error``; ``OSError``), the store unchanged; a
        later plan holds everything this one did. Writing a plan twice is harmless.
        """
        with self._lock:
            conn = self._conn
            conn.execute("BEGIN IMMEDIATE")
            try:
                if not self.initialized:
                    for statement in _SCHEMA:
                        conn.execute(statement)
                    conn.execute(f"PRAGMA application_id={_APPLICATION_ID}")
                conn.execute("DELETE FROM streams")
                conn.executemany("INSERT INTO streams VALUES (?,?,?,?,?,?,?,?)", plan.streams)
                conn.execute("DELETE FROM shards")
                conn.executemany("INSERT INTO shards VALUES (?,?,?,?,?,?,?,?,?,?)", plan.shards)
                conn.executemany(
                    "DELETE FROM records WHERE stream = ? AND shard_id = ?", plan.drops
                )
                conn.executemany(
                    "DELETE FROM records WHERE stream = ? AND shard_id = ? AND sequence_number < ?",
                    plan.trims,
                )
                conn.executemany(
                    "INSERT OR REPLACE INTO records VALUES (?,?,?,?,?,?,?,?)", plan.rows()
                )
                conn.executemany("INSERT OR REPLACE INTO meta VALUES (?,?)", plan.meta.items())
                conn.execute("COMMIT")
            except BaseException:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
                raise
            self._held = plan.held
            self._last = (plan.streams, plan.shards, plan.last_sequence)
            self._meta.update(plan.meta)
            for key, value in plan.meta.items():
                if self._pending_meta.get(key) == value:
                    del self._pending_meta[key]

    def save(self, fake: FakeKinesis) -> bool:
        """Plan and write a save at once; False if nothing changed."""
        plan = self.plan(fake)
        if plan is None:
            return False
        self.write(plan)
        return True

    def close(self) -> None:
        """Checkpoint the WAL into the database and close it (the -wal file is removed)."""
        with self._lock:
            try:
                with contextlib.suppress(sqlite3.Error):
                    self._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            finally:
                self._conn.close()


_STREAM_COLUMNS = (
    "name",
    "created",
    "mode",
    "max_record_size",
    "record_distribution_strategy",
    "channel_count",
    "next_shard",
    "retention_hours",
)
_SHARD_COLUMNS = (
    "shard_id",
    "start",
    "end",
    "parent_shard_id",
    "adjacent_parent_shard_id",
    "closed",
    "starting_sequence_number",
    "ending_sequence_number",
)
_HASH_TEXT = re.compile(r"0|[1-9][0-9]{0,38}")


def _parse_int(text: str | None) -> Any:
    """``meta`` holds text: an integer's digits become the integer (else left as is)."""
    if text is not None and text.isascii() and text.isdigit() and len(text) <= 60:
        return int(text)
    return text


def _stored_record(row: tuple[Any, ...], stream: str, shard_id: str) -> FakeRecord:
    """A row of ``records``; checked as a JSON record is, on a fast path."""
    seq, data, key, ehk, hash_text, arrival = row
    if (
        type(seq) is str
        and _RECORD_SEQ.fullmatch(seq)
        and type(data) is bytes
        and (key is None or type(key) is str)
        and (ehk is None or (type(ehk) is str and _HASH_TEXT.fullmatch(ehk)))
        and type(hash_text) is str
        and _HASH_TEXT.fullmatch(hash_text)
        and type(arrival) is float
        and math.isfinite(arrival)
    ):
        hash_key = int(hash_text)
        if hash_key <= _MAX_HASH:
            return FakeRecord(data, key, ehk, hash_key, seq, shard_id, arrival)
    node = _Node(
        {
            "data": data,
            "partition_key": key,
            "explicit_hash_key": ehk,
            "hash_key": hash_text,
            "sequence_number": seq,
            "arrival": arrival,
        },
        f"records[{stream!r}, {shard_id!r}, {_short(seq)}]",
    )
    return _load_record(node, shard_id, binary=True)  # raises what is wrong


# -- reading and checking a state ----------------------------------------------------------


class _Corrupt(Exception):
    """What is wrong with a snapshot, and where (a JSON path)."""


def _short(value: Any) -> str:
    """``repr(value)``, cut to a length a one-line message can hold."""
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:40]}... ({len(text)} characters)"


class _Node:
    """A JSON value and where it sits in the snapshot, for precise error messages.

    ``named``: list items are named by their ``name`` or ``shard_id`` rather than their
    index (a store's rows have no order of their own).
    """

    def __init__(self, value: Any, where: str, named: bool = False) -> None:
        self.value, self.where, self.named = value, where, named

    def _fail(self, problem: str) -> _Corrupt:
        return _Corrupt(f"{self.where}: {problem}")

    def member(self, name: str) -> _Node:
        if not isinstance(self.value, dict):
            raise self._fail("is not an object")
        if name not in self.value:
            raise _Corrupt(f"{self.where}: missing {name!r}")
        return _Node(self.value[name], self._path(name), self.named)

    def _path(self, name: str) -> str:
        return f"{self.where}.{name}" if self.where else name

    def optional(self, name: str, default: Any) -> _Node:
        if isinstance(self.value, dict) and name not in self.value:
            return _Node(default, self._path(name), self.named)
        return self.member(name)

    def items(self) -> list[_Node]:
        if not isinstance(self.value, list):
            raise self._fail("is not a list")
        out = []
        for i, v in enumerate(self.value):
            label = v.get("name", v.get("shard_id")) if self.named and isinstance(v, dict) else i
            out.append(_Node(v, f"{self.where}[{_short(label)}]", self.named))
        return out

    def text(self, choices: tuple[str, ...] = ()) -> str:
        value = self.value
        if not isinstance(value, str):
            raise self._fail(f"{_short(value)} is not a string")
        if choices and value not in choices:
            raise self._fail(f"{_short(value)} is not one of {', '.join(choices)}")
        return value

    def text_or_null(self) -> str | None:
        return None if self.value is None else self.text()

    def integer(self, low: int = 0, high: int | None = None) -> int:
        value = self.value
        if isinstance(value, bool) or not isinstance(value, int):
            raise self._fail(f"{_short(value)} is not an integer")
        if value < low or (high is not None and value > high):
            raise self._fail(f"{_short(value)} is out of range")
        return value

    def number(self) -> float:
        value = self.value
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self._fail(f"{_short(value)} is not a number")
        number = float(value)
        if not math.isfinite(number):
            raise self._fail(f"{value!r} is not a finite number")
        return number

    def flag(self) -> bool:
        if not isinstance(self.value, bool):
            raise self._fail(f"{_short(self.value)} is not true or false")
        return self.value

    def decimal(self, digits: int = _SEQ_DIGITS) -> str:
        """A string of at most ``digits`` ASCII digits (a sequence number or hash key)."""
        value = self.text()
        if not (value.isascii() and value.isdigit()):
            raise self._fail(f"{_short(value)} is not a decimal number")
        if len(value) > digits:
            raise self._fail(f"{_short(value)} has over {digits} digits")
        return value

    def decimal_or_null(self, digits: int = _SEQ_DIGITS) -> str | None:
        return None if self.value is None else self.decimal(digits)

    def sequence_number(self) -> str:
        """A record's: 56 digits, as the fake hands them out."""
        value = self.decimal()
        if not _RECORD_SEQ.fullmatch(value):
            raise self._fail(f"{_short(value)} is not a sequence number of the fake (56 digits)")
        return value

    def hash_key(self) -> int:
        text = self.text()
        if not (text.isascii() and text.isdigit()):
            raise self._fail(f"{_short(text)} is not a decimal number")
        digits = text.lstrip("0") or "0"
        if len(digits) > _HASH_DIGITS or int(digits) > _MAX_HASH:
            raise self._fail("is over 2^128-1")
        return int(digits)

    def blob(self) -> bytes:
        if not isinstance(self.value, bytes):
            raise self._fail(f"{_short(self.value)} is not a blob")
        return self.value


def _restore(state: Any, named: bool = False) -> tuple[list[_Stream], int]:
    top = _Node(state, "" if named else "$", named)  # a store's tables have no top
    if not isinstance(state, dict):
        raise _Corrupt("not a kinesis-trio state file (not a JSON object)")
    version = top.member("format").value
    if version != FORMAT:
        raise _Corrupt(f"unsupported format {_short(version)} (this version reads format {FORMAT})")
    last_seq = top.member("last_sequence").integer(high=_MAX_COUNTER)
    streams: list[_Stream] = []
    names: set[str] = set()
    for node in top.member("streams").items():
        stream = _load_stream(node)
        if stream.name in names:
            raise _Corrupt(f"{node.where}: stream {stream.name!r} appears twice")
        names.add(stream.name)
        streams.append(stream)
        # the counter must stay ahead of every number handed out (records are in order)
        for shard in stream.shards:
            numbers = [shard.starting_sequence_number, shard.ending_sequence_number or "0"]
            if shard.records:
                numbers.append(shard.records[-1].sequence_number)
            last_seq = max(last_seq, *(_seq_counter(n) for n in numbers))
    if last_seq > _MAX_COUNTER:
        raise _Corrupt("a sequence number is beyond what the fake hands out")
    return streams, last_seq


def _load_stream(node: _Node) -> _Stream:
    mode = node.member("mode").text(choices=_MODES)
    strategy = node.member("record_distribution_strategy").text(choices=_STRATEGIES)
    if strategy == "AUTO" and mode != "ON_DEMAND":
        raise _Corrupt(f"{node.where}: AUTO record distribution on a provisioned stream")
    name = node.member("name").text()
    next_shard = node.member("next_shard").integer(high=_MAX_NEXT_SHARD)
    max_record_size = node.member("max_record_size").integer(low=1, high=2**53)
    channel_count = node.member("channel_count").integer(high=_MAX_CHANNELS)
    created = node.member("created").number()
    retention_hours = node.optional("retention_hours", 24).integer(*_RETENTION)
    if not name:
        raise _Corrupt(f"{node.where}.name: is empty")
    shards: list[FakeShard] = []
    ids: set[str] = set()
    for shard_node in node.member("shards").items():
        shard = _load_shard(shard_node)
        if shard.shard_id in ids:
            raise _Corrupt(f"{shard_node.where}: shard {shard.shard_id!r} appears twice")
        ids.add(shard.shard_id)
        shards.append(shard)
        number = shard.shard_id.rpartition("-")[2]
        if number.isascii() and number.isdigit() and len(number) <= 12:
            next_shard = max(next_shard, int(number) + 1)
    for shard in shards:
        for parent in (shard.parent_shard_id, shard.adjacent_parent_shard_id):
            if parent is not None and parent not in ids:
                raise _Corrupt(
                    f"{node.where}: shard {shard.shard_id!r} names parent {parent!r}, "
                    "which is not in the stream"
                )
    return _Stream(
        name,
        shards,
        next_shard,
        mode,
        max_record_size=max_record_size,
        record_distribution_strategy=strategy,
        channel_count=channel_count,
        created=created,
        retention_hours=retention_hours,
    )


def _load_shard(node: _Node) -> FakeShard:
    shard_id = node.member("shard_id").text()
    start = node.member("start").hash_key()
    end = node.member("end").hash_key()
    if start > end:
        raise _Corrupt(f"{node.where}: start {start} is above end {end}")
    closed = node.member("closed").flag()
    ending = node.member("ending_sequence_number").decimal_or_null()
    if closed != (ending is not None):
        raise _Corrupt(f"{node.where}: a closed shard, and only one, has an ending number")
    shard = FakeShard(
        shard_id,
        start,
        end,
        node.member("parent_shard_id").text_or_null(),
        closed=closed,
        adjacent_parent_shard_id=node.member("adjacent_parent_shard_id").text_or_null(),
        starting_sequence_number=node.member("starting_sequence_number").decimal(),
        ending_sequence_number=ending,
    )
    for record_node in node.member("records").items():
        shard.records.append(_load_record(record_node, shard_id))
    numbers = [r.sequence_number for r in shard.records]  # 56 digits: string order
    if any(a >= b for a, b in itertools.pairwise(numbers)):
        raise _Corrupt(f"{node.where}.records: sequence numbers are not increasing")
    return shard


def _load_record(node: _Node, shard_id: str, *, binary: bool = False) -> FakeRecord:
    if binary:
        data = node.member("data").blob()
    else:
        encoded = node.member("data").text()
        try:
            data = base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError):
            raise _Corrupt(f"{node.where}.data: not base64") from None
    return FakeRecord(
        data,
        node.member("partition_key").text_or_null(),
        node.member("explicit_hash_key").decimal_or_null(_HASH_DIGITS),
        node.member("hash_key").hash_key(),
        node.member("sequence_number").sequence_number(),
        shard_id,
        node.member("arrival").number(),
    )
