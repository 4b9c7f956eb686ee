"""The spool's dead letters on disk (format 2): marks written and deleted with the commits,
read back as such, kept by a rebuild; a format-1 spool migrated as it is opened."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from kinesis_trio._core._spool import Commit, Row
from kinesis_trio._disk._store import APPLICATION_ID, DB_NAME, FORMAT_VERSION, Dead, SpoolStore

ROWS = [Row(i, "s", f"k{i}", None, b"record-%d" % i) for i in range(1, 5)]


def test_a_marked_record_reads_back_as_a_dead_letter_with_its_error(tmp_path: Path) -> None:
    store = SpoolStore(tmp_path)
    store.open()
    store.commit(Commit(1, ROWS, [], 5))
    store.commit(Commit(2, [], [], 5, marks=[(2, "InvalidArgumentException", "bad record")]))
    store.close()

    again = SpoolStore(tmp_path)
    stats = again.open()
    assert stats.records == 4  # a dead letter is a record in the spool
    items = again.read(0, 100)
    assert items[1] == Dead(ROWS[1], len(b"record-2") + 2, "InvalidArgumentException", "bad record")
    assert [type(item).__name__ for item in items] == ["tuple", "Dead", "tuple", "tuple"]
    # taken: the record and its mark go in one commit
    again.commit(Commit(3, [], [2], 5, unmarks=[2]))
    assert [item[0] for item in again.read(0, 100)] == [ROWS[0], ROWS[2], ROWS[3]]
    again.close()
    db = sqlite3.connect(tmp_path / DB_NAME)
    assert db.execute("SELECT count(*) FROM dead").fetchone() == (0,)
    db.close()


def test_a_mark_and_its_record_written_in_the_same_commit(tmp_path: Path) -> None:
    store = SpoolStore(tmp_path)
    store.open()
    store.commit(Commit(1, ROWS[:1], [], 2, marks=[(1, None, None)]))
    (item,) = store.read(0, 10)
    assert item == Dead(ROWS[0], len(b"record-1") + 2, None, None)
    store.close()


def format_1_spool(directory: Path, rows: list[Row]) -> None:
    """A spool as kinesis-trio wrote it before format 2 (records and meta, no dead table)."""
    from kinesis_trio._disk._store import checksum

    directory.mkdir(parents=True, exist_ok=True)
    db = sqlite3.connect(directory / DB_NAME, isolation_level=None)
    db.execute("PRAGMA page_size=16384")
    db.execute("PRAGMA journal_mode=WAL")
    db.execute(
        "CREATE TABLE IF NOT EXISTS records ("
        " id INTEGER PRIMARY KEY, stream TEXT NOT NULL, pk TEXT, ehk TEXT,"
        " data BLOB NOT NULL, crc INTEGER NOT NULL)"
    )
    db.execute("CREATE TABLE IF NOT EXISTS meta (k TEXT PRIMARY KEY, v INTEGER NOT NULL)")
    db.execute(f"PRAGMA application_id={APPLICATION_ID}")
    db.execute("PRAGMA user_version=1")
    for row in rows:
        db.execute("INSERT INTO records VALUES (?, ?, ?, ?, ?, ?)", (*row, checksum(row)))
    db.execute("INSERT INTO meta VALUES ('next_id', ?)", (rows[-1].id + 1,))
    db.close()


def test_a_format_1_spool_is_migrated_as_it_is_opened_and_keeps_its_records(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    format_1_spool(tmp_path, ROWS)
    store = SpoolStore(tmp_path)
    stats = store.open()
    assert (stats.records, stats.next_id, stats.damaged, stats.set_aside) == (4, 5, 0, None)
    assert [item[0] for item in store.read(0, 100)] == ROWS  # none is a dead letter
    store.commit(Commit(1, [], [], 5, marks=[(3, "X", "y")]))  # the new table works
    store.close()
    db = sqlite3.connect(tmp_path / DB_NAME)
    assert db.execute("PRAGMA user_version").fetchone() == (FORMAT_VERSION,)
    db.close()
    again = SpoolStore(tmp_path)  # and opens as a spool of this format, intact
    assert again.open().set_aside is None
    assert isinstance(again.read(0, 100)[2], Dead)
    again.close()
    assert not [p for p in tmp_path.iterdir() if "damaged" in p.name]


def test_a_rebuilt_spool_keeps_the_marks_of_the_records_it_copies(tmp_path: Path) -> None:
    store = SpoolStore(tmp_path)
    store.open()
    store.commit(Commit(1, ROWS, [], 5, marks=[(4, "E", "m")]))
    store.close()
    # damage the header's page count field only (a rebuild restores and copies)
    path = tmp_path / DB_NAME
    db = sqlite3.connect(path)
    db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    db.close()
    raw = bytearray(path.read_bytes())
    raw[0:16] = b"SQLite format 4\x00"  # SQLite cannot open it: set aside, salvaged
    path.write_bytes(bytes(raw))
    again = SpoolStore(tmp_path)
    stats = again.open()
    assert stats.set_aside is not None and stats.records == 4
    items = again.read(0, 100)
    assert [isinstance(item, Dead) for item in items] == [False, False, False, True]
    again.close()
