"""The spool on disk: one SQLite database in WAL mode, and a lock file (blocking I/O).

Every method blocks: the shell's spooler runs them in a worker thread, one at a time, never
on the event loop. SQLite does the storage: a commit is one transaction (the inserts of the
records accepted meanwhile and the deletes of the records done), written to the WAL and
fsynced (``synchronous=FULL``) before it returns; a write torn by a crash is not part of
the database when it is opened again (the WAL's frames carry checksums, and a frame that
does not match ends the log). On top of that:

- **one owner**: ``spool.lock`` is held with ``flock`` while a producer has the spool open;
  a second producer (any process) gets :class:`SpoolLockedError`;
- **a format version** (``PRAGMA user_version``) and an application id: a spool of a newer
  format, or a database that is not a spool, is refused (:class:`SpoolFormatError`); one of
  an older format is brought up to this one as it is opened (format 2 added the ``dead``
  table: the records failed for good and not yet taken from ``failures()``, each with its
  error code and message; made by the first commit that marks one, so a spool that never
  held a dead letter is laid out as before);
- **a checksum per record** (CRC-32 of its stream, keys and data): a record damaged on
  disk is skipped, counted and logged with its id, never sent as it reads;
- **damaged files**: at open, read-only, its schema and ``PRAGMA quick_check``; a database
  that fails them, or that SQLite cannot open at all, is moved aside as it was found
  (``spool.db.damaged-<time>-<pid>``, never deleted), and the records that can still be
  read from it (its header's fixed fields restored, on a copy), intact, go into a fresh
  spool. A flipped bit in the WAL looks like a torn write to SQLite: the log ends there.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import os
import sqlite3
import threading
import time
import zlib
from collections.abc import Iterator, Sequence
from itertools import chain, islice
from typing import NamedTuple

from .._core import Commit, Inserts, Row, columns
from .._errors import SpoolError, SpoolFormatError, SpoolLockedError
from .._logging import get_logger
from ._rows import _UNREADABLE, Damage, Dead, _check, _empty, _head_crc, _read_only, _text, checksum
from ._salvage import DEAD_TABLE, copy_dead, salvage
from ._salvage import repaired as _repaired

__all__ = ["Damage", "Dead", "SpoolStats", "SpoolStore", "checksum", "salvage"]

_log = get_logger("kinesis_trio.spool")

#: The spool's format; a spool of a higher one is refused, one of a lower one migrated.
FORMAT_VERSION = 2
#: ``PRAGMA application_id``: "KTRS" (a database without it is not a spool).
APPLICATION_ID = 0x4B545253
DB_NAME = "spool.db"
LOCK_NAME = "spool.lock"
#: The page size of a new spool's database.
PAGE_SIZE = 16384
#: Rows per insert statement (6 parameters each: under SQLite's oldest limit of 999).
_BATCH = 50
#: Bytes a WAL keeps after a checkpoint (SQLite's ``journal_size_limit``).
_WAL_LIMIT = 16 * 1024 * 1024
_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS records ("
    " id INTEGER PRIMARY KEY, stream TEXT NOT NULL, pk TEXT, ehk TEXT,"
    " data BLOB NOT NULL, crc INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v INTEGER NOT NULL)",
)
_DEAD_TABLE = DEAD_TABLE


class SpoolStats(NamedTuple):
    """What an opened spool holds."""

    records: int
    bytes: int
    next_id: int
    #: records found damaged while the file was rebuilt (each logged), and the file set
    #: aside, if any
    damaged: int = 0
    set_aside: str | None = None


class SpoolStore:
    """One spool directory, opened by one producer (blocking calls: run them in a thread)."""

    def __init__(self, directory: str | os.PathLike[str], max_page_count: int = 0) -> None:
        self.directory = os.fspath(directory)
        self.path = os.path.join(self.directory, DB_NAME)
        self._db: sqlite3.Connection | None = None
        self._lock_fd: int | None = None
        #: tests: ``PRAGMA max_page_count`` (a disk that fills: SQLITE_FULL)
        self._max_page_count = max_page_count
        #: one call on the connection at a time: the writer's commits and recovery's reads
        #: run in worker threads of their own, and may overlap
        self._busy = threading.Lock()
        #: the database has its ``dead`` table (format 2, once a dead letter was marked)
        self._dead = False

    # -- opening -----------------------------------------------------------------------------

    def open(self) -> SpoolStats:
        """Lock the spool, open (or create) its database, check it; what it holds."""
        os.makedirs(self.directory, exist_ok=True)
        self._lock()
        try:
            return self._open_db()
        except BaseException:
            self.close()
            raise

    def _lock(self) -> None:
        path = os.path.join(self.directory, LOCK_NAME)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            try:
                owner = os.pread(fd, 64, 0).decode(errors="replace").strip() or "unknown"
            finally:
                os.close(fd)
            raise SpoolLockedError(
                f"the spool {self.directory!r} is in use by another producer (pid {owner}): "
                "a spool has one owner; give each process its own spool_dir"
            ) from None
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        self._lock_fd = fd

    def _connect(self, path: str) -> sqlite3.Connection:
        db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        db.text_factory = _text
        # a new spool's pages (before WAL mode writes its header; an existing file keeps its
        # own): 16 KiB pages cut the CPU of an insert and a delete by about a quarter
        db.execute(f"PRAGMA page_size={PAGE_SIZE}")
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=FULL")
        db.execute("PRAGMA cell_size_check=ON")
        # a WAL grown by one large commit is cut back to this after each checkpoint
        db.execute(f"PRAGMA journal_size_limit={_WAL_LIMIT}")
        if self._max_page_count:
            db.execute(f"PRAGMA max_page_count={int(self._max_page_count)}")
        return db

    def _open_db(self) -> SpoolStats:
        fresh = not os.path.exists(self.path)
        if not fresh and _empty(self.path) and not _empty(self.path + "-wal"):
            # SQLite would delete the WAL of an empty database file (its records with it)
            return self._rebuild(None, "the database file is empty, its WAL is not")
        if not fresh:
            new, damage = self._inspect()
            if damage is not None:
                return self._rebuild(None, damage)
        db = self._connect(self.path)
        if fresh or new:
            self._create(db)
        else:
            self._migrate(db)
        self._db = db
        self._dead = _has_dead(db)
        try:
            return self._stats(db)
        except _UNREADABLE as exc:
            return self._rebuild(db, str(exc))

    def _inspect(self) -> tuple[bool, str | None]:
        """An existing database, read-only (a damaged one is set aside as it was found: a
        connection that may write checkpoints the WAL into the file when it closes): is it
        empty (to become a spool), and what is damaged (``None``: nothing). Not a spool,
        or of a newer format: :class:`SpoolFormatError`."""
        db = sqlite3.connect(_read_only(self.path), uri=True)
        db.text_factory = _text
        try:
            try:
                version, app_id = self._identity(db)
                if app_id == 0 and version == 0 and not self._tables(db):
                    return True, None
            except _UNREADABLE as exc:  # not a database (its header is damaged)
                return False, f"SQLite cannot open it ({exc})"
            if app_id != APPLICATION_ID:
                raise SpoolFormatError(
                    f"{self.path} is not a kinesis_trio spool (application id {app_id:#x}): "
                    "point spool_dir at a directory of its own"
                )
            if version > FORMAT_VERSION:
                raise SpoolFormatError(
                    f"the spool {self.path} has format version {version}, newer than this "
                    f"kinesis_trio's ({FORMAT_VERSION}): open it with the version that wrote it"
                )
            try:
                if self._schema(db) not in _spool_schemas(version):  # a flip in its text parses
                    return False, "its schema is not a spool's"
                db.execute("PRAGMA cell_size_check=ON")
                check = db.execute("PRAGMA quick_check").fetchall()
            except _UNREADABLE as exc:
                return False, str(exc)
            return False, None if check == [("ok",)] else "; ".join(str(c[0]) for c in check[:3])
        finally:
            db.close()

    @staticmethod
    def _identity(db: sqlite3.Connection) -> tuple[int, int]:
        version = db.execute("PRAGMA user_version").fetchone()[0]
        app_id = db.execute("PRAGMA application_id").fetchone()[0]
        return int(version), int(app_id)

    @staticmethod
    def _tables(db: sqlite3.Connection) -> list[object]:
        return db.execute("SELECT name FROM sqlite_master").fetchall()

    @staticmethod
    def _schema(db: sqlite3.Connection) -> list[tuple[object, ...]]:
        return db.execute(
            "SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY name"
        ).fetchall()

    @staticmethod
    def _create(db: sqlite3.Connection) -> None:
        db.execute("BEGIN IMMEDIATE")
        for statement in _SCHEMA:
            db.execute(statement)
        db.execute(f"PRAGMA application_id={APPLICATION_ID}")
        db.execute(f"PRAGMA user_version={FORMAT_VERSION}")
        db.execute("COMMIT")

    @staticmethod
    def _migrate(db: sqlite3.Connection) -> None:
        """A spool of an older format (checked intact) becomes one of this format: from 1,
        only its version changes (the ``dead`` table comes with the first dead letter);
        kinesis-trio versions that know only format 1 refuse it from then on."""
        version = int(db.execute("PRAGMA user_version").fetchone()[0])
        if version >= FORMAT_VERSION:
            return
        db.execute(f"PRAGMA user_version={FORMAT_VERSION}")
        _log.info("spool_migrated", format_from=version, format_to=FORMAT_VERSION)

    @staticmethod
    def _stats(db: sqlite3.Connection) -> SpoolStats:
        count, size, top = db.execute(
            "SELECT count(*),"
            " coalesce(sum(length(data) + coalesce(length(CAST(pk AS BLOB)), 0)), 0),"
            " coalesce(max(id), 0) FROM records"
        ).fetchone()
        saved = db.execute("SELECT v FROM meta WHERE k = 'next_id'").fetchone()
        # (a damaged value that is not an integer is no next id)
        next_id = max(int(top) + 1, saved[0] if saved and isinstance(saved[0], int) else 1)
        return SpoolStats(int(count), int(size), next_id)

    # -- damaged files -------------------------------------------------------------------------

    def _rebuild(self, old: sqlite3.Connection | None, why: str) -> SpoolStats:
        """Set the damaged database aside and copy what can be read of it, intact, into a
        fresh one."""
        stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
        aside = f"{self.path}.damaged-{stamp}-{os.getpid()}"
        if old is not None:
            with contextlib.suppress(sqlite3.Error):
                old.close()
        self._db = None
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(self.path + suffix):
                os.replace(self.path + suffix, aside + suffix)
        _log.error("spool_damaged", path=self.path, set_aside=aside, reason=why)
        db = self._connect(self.path)
        self._create(db)
        self._db = db
        damaged = copied = 0
        top = 0
        repaired = _repaired(aside, db.execute("PRAGMA page_size").fetchone()[0])
        try:
            if _empty(aside):  # nothing to read (and SQLite would delete its WAL)
                raise sqlite3.DatabaseError("empty database file")
            source = sqlite3.connect(
                _read_only(repaired or aside), uri=True, check_same_thread=False
            )
            source.text_factory = _text
            # read what it can of a file shorter than its header says (truncated)
            source.execute("PRAGMA writable_schema=ON")
        except _UNREADABLE:
            source = None
        if source is not None:
            try:
                batch: list[Row] = []
                for item in salvage(source):
                    if isinstance(item, Damage):
                        damaged += 1
                        _log.error("spool_record_damaged", path=aside, id=item.id, reason=item.why)
                        continue
                    batch.append(item)
                    top = max(top, item.id)
                    if len(batch) >= 500:
                        self._insert(db, batch, top + 1)
                        copied += len(batch)
                        batch = []
                if batch:
                    self._insert(db, batch, top + 1)
                    copied += len(batch)
                self._dead = copy_dead(source, db)
            finally:
                with contextlib.suppress(sqlite3.Error):
                    source.close()
        if repaired is not None:  # our copy (the damaged file stays as it was found)
            for suffix in ("", "-wal", "-shm"):
                with contextlib.suppress(OSError):
                    os.remove(repaired + suffix)
        _log.error(
            "spool_rebuilt", path=self.path, set_aside=aside, recovered=copied, damaged=damaged
        )
        stats = self._stats(db)
        return stats._replace(damaged=damaged, set_aside=aside)

    # -- writing -------------------------------------------------------------------------------

    def commit(self, commit: Commit) -> None:
        """One transaction: insert ``commit``'s rows, mark its dead letters, delete its ids
        (and the marks of those that were dead letters), note the next id."""
        with self._busy:
            db = self._require()
            marks, unmarks = commit.marks, commit.unmarks
            if not self._dead and (marks or unmarks):
                self._insert(
                    db, commit.inserts, commit.next_id, commit.deletes, marks, unmarks, True
                )
                self._dead = True
            else:
                self._insert(db, commit.inserts, commit.next_id, commit.deletes, marks, unmarks)

    @staticmethod
    def _insert(
        db: sqlite3.Connection,
        rows: Sequence[Row],
        next_id: int,
        deletes: Sequence[int] = (),
        marks: Sequence[tuple[int, str | None, str | None]] = (),
        unmarks: Sequence[int] = (),
        create_dead: bool = False,
    ) -> None:
        try:
            db.execute("BEGIN IMMEDIATE")
            if create_dead:
                db.execute(_DEAD_TABLE)
            if rows:
                _insert_rows(db, rows)
                db.execute("INSERT OR REPLACE INTO meta (k, v) VALUES ('next_id', ?)", (next_id,))
            if marks:
                db.executemany(
                    "INSERT OR REPLACE INTO dead (id, code, message) VALUES (?, ?, ?)", marks
                )
            if deletes:
                db.executemany(
                    "DELETE FROM records WHERE id BETWEEN ? AND ?", _runs(sorted(deletes))
                )
            if unmarks:
                db.executemany("DELETE FROM dead WHERE id BETWEEN ? AND ?", _runs(sorted(unmarks)))
            db.execute("COMMIT")
        except BaseException:
            if db.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    db.execute("ROLLBACK")
            raise

    # -- reading back --------------------------------------------------------------------------

    def read(
        self, after: int, limit: int, max_bytes: int = 16 * 1024 * 1024
    ) -> list[tuple[Row, int] | Dead | Damage]:
        """Up to ``limit`` records with ids above ``after``, in id order, and no more than
        ``max_bytes`` of data past the first (large records are not read 500 at a time):
        each intact one with its size (a :class:`Dead` one if it is a dead letter), or its
        :class:`Damage`."""
        with self._busy:
            return self._read(after, limit, max_bytes)

    def _read(
        self, after: int, limit: int, max_bytes: int
    ) -> list[tuple[Row, int] | Dead | Damage]:
        db = self._require()
        cursor = db.execute(_READ_DEAD if self._dead else _READ, (after, limit))
        out: list[tuple[Row, int] | Dead | Damage] = []
        total = 0
        try:
            for values in cursor:
                checked: tuple[Row, int] | Dead | Damage = _check(tuple(values[:6]))
                if len(values) > 6 and values[6] is not None and not isinstance(checked, Damage):
                    code, message = values[7], values[8]
                    checked = Dead(
                        checked[0],
                        checked[1],
                        code if isinstance(code, str) else None,
                        message if isinstance(message, str) else None,
                    )
                out.append(checked)
                data = values[4]
                total += len(data) if isinstance(data, bytes) else 0
                if total >= max_bytes:
                    break
        finally:
            cursor.close()
        return out

    # -- closing -------------------------------------------------------------------------------

    def close(self) -> None:
        """Close the database and let the lock go."""
        with self._busy:
            self._close()

    def _close(self) -> None:
        db, self._db = self._db, None
        if db is not None:
            with contextlib.suppress(sqlite3.Error):
                db.close()
        fd, self._lock_fd = self._lock_fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)

    def abandon(self) -> None:
        """In a child forked from the owner: let go of the spool without touching it.

        The lock file's descriptor is closed (the lock is the owner's: a child that kept
        it would keep a restarted owner out). The database connection is left as it is,
        never used nor closed: SQLite says a connection must not cross a fork, and closing
        it could checkpoint the owner's WAL."""
        _ABANDONED.append(self._db)
        self._db = None
        fd, self._lock_fd = self._lock_fd, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)

    def _require(self) -> sqlite3.Connection:
        if self._db is None:
            raise SpoolError(f"the spool {self.directory!r} is not open")
        return self._db


#: Connections a forked child let go of (kept referenced: never closed in the child).
_ABANDONED: list[sqlite3.Connection | None] = []


#: Reading records back, without and with a ``dead`` table.
_READ = "SELECT id, stream, pk, ehk, data, crc FROM records WHERE id > ? ORDER BY id LIMIT ?"
_READ_DEAD = (
    "SELECT r.id, r.stream, r.pk, r.ehk, r.data, r.crc, d.id, d.code, d.message"
    " FROM records r LEFT JOIN dead d ON d.id = r.id WHERE r.id > ? ORDER BY r.id LIMIT ?"
)


def _has_dead(db: sqlite3.Connection) -> bool:
    return db.execute("SELECT 1 FROM sqlite_master WHERE name = 'dead'").fetchone() is not None


@functools.cache
def _spool_schema(dead: bool = False) -> list[tuple[object, ...]]:
    """What ``sqlite_master`` holds in a spool (but the root pages), with its ``dead``
    table or without."""
    db = sqlite3.connect(":memory:")
    try:
        for statement in (*_SCHEMA, _DEAD_TABLE) if dead else _SCHEMA:
            db.execute(statement)
        return SpoolStore._schema(db)
    finally:
        db.close()


def _spool_schemas(version: int) -> list[list[tuple[object, ...]]]:
    """The schemas a spool of format ``version`` may have."""
    if version >= 2:
        return [_spool_schema(), _spool_schema(True)]
    return [_spool_schema()]


def _insert_rows(db: sqlite3.Connection, rows: Sequence[Row]) -> None:
    """Insert ``rows``, :data:`_BATCH` to a statement: SQLite steps once per statement and
    the sqlite3 module lets go of the GIL around each step, so a row per statement costs a
    GIL hand-over per row while the event loop runs (measured in a burst: 2.0-2.3 µs an
    insert, against 1.6 alone)."""
    values = chain.from_iterable(_params(rows))
    full, rest = divmod(len(rows), _BATCH)
    width = 6 * _BATCH
    if full:
        db.executemany(_insert_sql(_BATCH), (tuple(islice(values, width)) for _ in range(full)))
    if rest:
        db.execute(_insert_sql(rest), tuple(values))


@functools.lru_cache(maxsize=_BATCH)
def _insert_sql(count: int) -> str:
    """The insert of ``count`` rows."""
    return "INSERT OR REPLACE INTO records (id, stream, pk, ehk, data, crc) VALUES " + ", ".join(
        ["(?, ?, ?, ?, ?, ?)"] * count
    )


def _params(rows: Sequence[Row]) -> Iterator[tuple[object, ...]]:
    """The rows' parameters for the insert, made one at a time as SQLite binds them, by C
    code (zip, map and a cached key checksum): a list of them all would live through the
    garbage collector's passes, and Python code per row costs about as much as SQLite's
    own insert."""
    if not isinstance(rows, Inserts) or not rows.common:
        rows = list(rows)  # made once, read twice below (by C code)
    fields, again = columns(rows), columns(rows)
    crcs = map(zlib.crc32, again[4], map(_head_crc, again[1], again[2], again[3]))
    return zip(*fields, crcs, strict=True)


def _runs(ids: list[int]) -> list[tuple[int, int]]:
    """Sorted ids as runs of consecutive ones, ``(first, last)``: records end about in put
    order, so a commit's deletes are a few ranges (a range costs SQLite less than its ids
    one by one)."""
    runs: list[tuple[int, int]] = []
    if not ids:
        return runs
    first = last = ids[0]
    for i in ids[1:]:
        if i != last + 1 and i != last:
            runs.append((first, last))
            first = i
        last = i
    runs.append((first, last))
    return runs
