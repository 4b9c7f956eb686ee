"""The spool in tests: a store that counts its commits and reads, holds or fills its disk
(the seam: the spooler's ``SpoolStore`` name), and the spool's file read back."""

from __future__ import annotations

import os
import sqlite3
import threading
from pathlib import Path

import pytest

from kinesis_trio._core._spool import Commit, Row
from kinesis_trio._disk._store import PAGE_SIZE, Damage, Dead, SpoolStore
from kinesis_trio._shell import _spooler

#: real seconds a held commit waits before it goes on by itself
HOLD_BOUND = 10.0


class CountingStore(SpoolStore):
    """A SpoolStore that counts its commits and reads, and whose disk can be made to fill
    (``max_page_count``) and be given room again (``make_room``)."""

    def __init__(self, directory: str | os.PathLike[str], max_page_count: int = 0) -> None:
        super().__init__(directory, max_page_count)
        #: the commits written, the commits that failed, the ``limit`` of each read
        self.commits: list[Commit] = []
        self.failed: list[Commit] = []
        self.reads: list[int] = []
        self.room = False
        #: while set, a commit waits in its thread until this event is set (trio's virtual
        #: clock stands still meanwhile: tests/support/clock.py)
        self.hold: threading.Event | None = None
        self.holding = threading.Event()

    def make_room(self) -> None:
        """From the next commit on, the disk has room again."""
        self.room = True

    def commit(self, commit: Commit) -> None:
        hold = self.hold
        if hold is not None:
            self.holding.set()
            hold.wait(HOLD_BOUND)
        if self.room and self._max_page_count:
            self._require().execute("PRAGMA max_page_count=1073741823")
            self._max_page_count = 0
        try:
            super().commit(commit)
        except BaseException:
            self.failed.append(commit)
            raise
        self.commits.append(commit)

    def read(
        self, after: int, limit: int, max_bytes: int = 16 * 1024 * 1024
    ) -> list[tuple[Row, int] | Dead | Damage]:
        self.reads.append(limit)
        return super().read(after, limit, max_bytes)


#: real seconds before a test that waits for a close gives the disk room (a close that hung
#: until the disk had room ends then) and fails
EXIT_BOUND = 10.0


class RoomLater:
    """A watchdog thread: gives the disk room if the block it guards has not ended within
    ``EXIT_BOUND`` real seconds (a close that hangs until the disk has room ends then), and
    says so."""

    def __init__(self, stores: list[CountingStore]) -> None:
        self.stores = stores
        self.ended = threading.Event()
        self.hung = False
        self.thread = threading.Thread(target=self._watch, daemon=True)

    def _watch(self) -> None:
        if not self.ended.wait(EXIT_BOUND):
            self.hung = True
            for store in self.stores:
                store.make_room()

    def __enter__(self) -> RoomLater:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.ended.set()
        self.thread.join()


class Stores(list[CountingStore]):
    """The spool stores a test's producers opened, in order."""

    #: the ``max_page_count`` of the next one (a disk that is full: ``FRESH_PAGES``)
    full_disk = 0


def count_stores(monkeypatch: pytest.MonkeyPatch) -> Stores:
    """From now on, every spool store a producer opens is a ``CountingStore``, in the
    list returned (the seam: the spooler's ``SpoolStore`` name)."""
    made = Stores()

    def factory(directory: str | os.PathLike[str]) -> CountingStore:
        store = CountingStore(directory, made.full_disk)
        made.full_disk = 0
        made.append(store)
        return store

    monkeypatch.setattr(_spooler, "SpoolStore", factory)
    return made


def left_behind(directory: str | os.PathLike[str], rows: list[Row]) -> None:
    """A spool as a producer killed before any outcome leaves it: ``rows``, on disk."""
    store = SpoolStore(directory)
    store.open()
    store.commit(Commit(1, rows, [], rows[-1].id + 1))
    store.close()


#: pages of a fresh spool: a record that needs a page more finds the disk full
FRESH_PAGES = 4
#: a record that needs pages of its own (larger than a page)
BIG = PAGE_SIZE


def on_disk(spool: Path) -> list[tuple[int, str, str | None, bytes]]:
    """The records in the spool's file now (id, stream, partition key, data), read by a
    read-only connection of the test's own."""
    db = sqlite3.connect(f"file:{spool / 'spool.db'}?mode=ro", uri=True)
    try:
        rows = db.execute("SELECT id, stream, pk, data FROM records ORDER BY id").fetchall()
    finally:
        db.close()
    return [(int(r[0]), str(r[1]), r[2], bytes(r[3])) for r in rows]


def data_on_disk(spool: Path) -> list[bytes]:
    return [row[3] for row in on_disk(spool)]


def dead_on_disk(spool: Path) -> list[tuple[int, str | None]]:
    """The dead letters marked in the spool's file now (id, error code)."""
    db = sqlite3.connect(f"file:{spool / 'spool.db'}?mode=ro", uri=True)
    try:
        tables = {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type='table'")}
        rows = (
            db.execute("SELECT id, code FROM dead ORDER BY id").fetchall()
            if "dead" in tables
            else []
        )
    finally:
        db.close()
    return [(int(r[0]), r[1]) for r in rows]
