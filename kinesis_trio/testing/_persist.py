"""The fake's durable state on disk: a SQLite store saved incrementally, or a JSON snapshot.

:class:`StateStore` (format 2, what ``kinesis-trio local --data DIR`` keeps) is a SQLite
database in WAL mode. Tables::

    meta(key, value)       format "2", last_sequence (the fake's sequence counter, the last
                           one handed out), migrated_from (the JSON file it was made from),
                           glue (the Glue schema registry as JSON, ``FakeGlue.snapshot``)
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

:func:`save_state` / :func:`load_state` write and read one JSON snapshot (format 1, laid
out and checked by :mod:`._codec`).
"""

from __future__ import annotations

import bisect
import contextlib
import json
import operator
import os
import sqlite3
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._codec import FORMAT, _Corrupt, _decode, _encode, _short, _stored_record
from ._fake_streams import _Stream
from ._model import FakeRecord, _seq_counter

if TYPE_CHECKING:
    from ._server import FakeKinesis

__all__ = ["FORMAT", "STORE_FORMAT", "StateStore", "load_state", "save_state"]

#: The SQLite store's format (``meta.format``).
STORE_FORMAT = 2
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
    state = _encode(fake.streams, fake._last_seq, fake.clock_offset)
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
        streams, last_seq = _decode(state)
    except _Corrupt as exc:
        raise ValueError(f"{source}: {exc}") from None
    except (ValueError, TypeError, ArithmeticError, RecursionError) as exc:  # a safety net
        problem = f"{type(exc).__name__}: {exc}"
        raise ValueError(f"{source}: not a valid state file ({problem})") from None
    fake._restore(streams, last_seq)
    return True


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
        try:
            fake.glue.restore(self._meta.get("glue", ""))
        except ValueError as exc:
            raise self._fail(f"meta: glue: {exc}") from None
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
        streams, counter = _decode(state, named=True)
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
        glue = fake.glue.snapshot()
        if glue != self._meta.get("glue", ""):
            pending["glue"] = glue
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


def _parse_int(text: str | None) -> Any:
    """``meta`` holds text: an integer's digits become the integer (else left as is)."""
    if text is not None and text.isascii() and text.isdigit() and len(text) <= 60:
        return int(text)
    return text
