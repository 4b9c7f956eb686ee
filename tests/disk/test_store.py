"""The spool's SQLite store: round trips, the next id, the lock, the format, a full disk."""

from __future__ import annotations

import os
import random
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from kinesis_trio import Outcome
from kinesis_trio._core._spool import Commit, Row, SpoolBook
from kinesis_trio._disk._store import APPLICATION_ID, DB_NAME, FORMAT_VERSION, Damage, SpoolStore
from kinesis_trio._errors import SpoolError, SpoolFormatError, SpoolLockedError

MIB = 1024 * 1024


def commit(gen: int, rows: list[Row], deletes: tuple[int, ...] = (), next_id: int = 0) -> Commit:
    top = max([r.id for r in rows] + list(deletes) + [0])
    return Commit(gen, rows, list(deletes), next_id or top + 1)


def size(row: Row) -> int:
    pk = row.partition_key
    return len(row.data) + (0 if pk is None else len(pk.encode()))


def read_all(store: SpoolStore) -> list[Row]:
    items = store.read(0, 10**6)
    assert not [item for item in items if isinstance(item, Damage)]
    return [item[0] for item in items if not isinstance(item, Damage)]


ROWS = [
    Row(1, "s", "k", None, b"plain"),
    Row(2, "s", None, None, b"no key (an AUTO stream)"),
    Row(3, "other-stream", "ключ-🙂", "1" * 38, "données".encode()),
    Row(4, "arn:aws:kinesis:us-east-1:123456789012:stream/s", "k", None, b""),
    Row(5, "s", "big", None, bytes(range(256)) * (MIB // 256)),
]


def test_a_fresh_spool_is_empty_and_rows_read_back_as_written(tmp_path: Path) -> None:
    store = SpoolStore(tmp_path / "spool")
    stats = store.open()
    assert (stats.records, stats.bytes, stats.next_id) == (0, 0, 1)
    assert stats.damaged == 0 and stats.set_aside is None
    store.commit(commit(1, ROWS[:2]))
    store.commit(commit(2, ROWS[2:]))
    items = store.read(0, 100)
    assert items == [(row, size(row)) for row in ROWS]
    assert store.read(2, 2) == [(ROWS[2], size(ROWS[2])), (ROWS[3], size(ROWS[3]))]
    assert store.read(5, 10) == []
    store.close()

    again = SpoolStore(tmp_path / "spool")
    stats = again.open()
    assert (stats.records, stats.bytes, stats.next_id) == (5, sum(map(size, ROWS)), 6)
    assert read_all(again) == ROWS
    again.close()


def test_commit_deletes_and_replaces_in_one_transaction(tmp_path: Path) -> None:
    store = SpoolStore(tmp_path)
    store.open()
    store.commit(commit(1, ROWS[:3]))
    store.commit(commit(2, [ROWS[3]], deletes=(1, 3)))
    assert read_all(store) == [ROWS[1], ROWS[3]]
    store.commit(commit(3, [ROWS[1]._replace(data=b"again")]))  # a failed commit's rows
    assert read_all(store)[0].data == b"again"
    store.close()


@pytest.mark.parametrize("common", [True, False], ids=["common records", "mixed records"])
def test_a_books_commit_round_trips_through_the_store(tmp_path: Path, common: bool) -> None:
    """The rows a book's commit makes as SQLite binds them (column by column when every
    record is a common one) read back as the records put, checksums intact."""
    book = SpoolBook(10**9, "interval", 0.2)
    arn = "arn:aws:kinesis:us-east-1:123456789012:stream/s"
    puts: list[tuple[str, str | None, str | None, bytes]] = [
        ("s", f"k{i}", None, b"%d" % i * i) for i in range(50)
    ]
    if not common:
        puts[10:10] = [(arn, "k", None, b"by ARN"), ("s", None, None, b"no key")]
        puts += [("s", "k", "12345", b"hash key"), ("s", "ключ-🙂", None, b"")]
    for stream, pk, ehk, data in puts:
        size = len(data) + (0 if pk is None else len(pk.encode()))
        o = Outcome(data, pk, ehk, 0, size, 0.0, "s", 0)
        book.add(o, stream, data, pk, ehk, size, 0.0)
    taken = book.take(0.0)
    assert taken is not None
    store = SpoolStore(tmp_path)
    store.open()
    store.commit(taken)
    expected = [Row(i, *put) for i, put in enumerate(puts, 1)]
    assert read_all(store) == list(taken.inserts) == expected
    store.close()


def test_deletes_in_any_order_remove_exactly_their_ids(tmp_path: Path) -> None:
    """Deletes go to SQLite as runs of consecutive ids: out of order, repeated, with gaps."""
    store = SpoolStore(tmp_path)
    store.open()
    rows = [Row(i, "s", "k", None, b"%d" % i) for i in range(1, 31)]
    store.commit(commit(1, rows))
    gone = [9, 3, 4, 2, 4, 20, 30, 10, 11, 5, 21, 1]
    store.commit(Commit(2, [], gone, 31))
    assert [r.id for r in read_all(store)] == [i for i in range(1, 31) if i not in gone]
    store.close()


def test_the_next_id_survives_every_row_deleted(tmp_path: Path) -> None:
    store = SpoolStore(tmp_path)
    store.open()
    store.commit(commit(1, ROWS[:3], next_id=4))
    store.commit(Commit(2, [], [1, 2, 3], 4))
    store.close()
    again = SpoolStore(tmp_path)
    stats = again.open()
    assert (stats.records, stats.bytes, stats.next_id) == (0, 0, 4)  # ids are never reused
    again.close()


def test_a_closed_store_refuses_calls(tmp_path: Path) -> None:
    store = SpoolStore(tmp_path)
    with pytest.raises(SpoolError, match="is not open"):
        store.read(0, 1)
    store.open()
    store.close()
    store.close()  # twice is fine
    with pytest.raises(SpoolError, match="is not open"):
        store.commit(commit(1, ROWS[:1]))


# -- one owner ----------------------------------------------------------------------------------


def test_a_second_store_in_the_same_process_is_locked_out_until_close(tmp_path: Path) -> None:
    first = SpoolStore(tmp_path)
    first.open()
    first.commit(commit(1, ROWS[:1]))
    second = SpoolStore(tmp_path)
    with pytest.raises(
        SpoolLockedError, match=f"in use by another producer \\(pid {os.getpid()}\\)"
    ):
        second.open()
    assert read_all(first) == ROWS[:1]  # the owner is untouched
    first.close()
    stats = second.open()
    assert stats.records == 1
    second.close()


CHILD = """
import sys
from kinesis_trio._disk._store import SpoolStore
SpoolStore(sys.argv[1]).open()
print("open", flush=True)
sys.stdin.readline()
"""


@pytest.mark.subprocess
def test_a_store_in_another_process_is_locked_out_until_that_process_dies(
    tmp_path: Path,
) -> None:
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD, str(tmp_path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert child.stdout is not None
        assert child.stdout.readline() == "open\n"
        store = SpoolStore(tmp_path)
        with pytest.raises(SpoolLockedError, match=f"\\(pid {child.pid}\\)"):
            store.open()
    finally:
        child.kill()  # no close: the kernel lets the flock go with the process
        child.wait(timeout=30)
    assert store.open().records == 0
    store.close()


# -- the format ---------------------------------------------------------------------------------


def raw(path: Path, *statements: str) -> None:
    db = sqlite3.connect(path, isolation_level=None)
    for statement in statements:
        db.execute(statement)
    db.close()


def test_a_spool_of_a_newer_format_is_refused_and_left_as_it_is(tmp_path: Path) -> None:
    store = SpoolStore(tmp_path)
    store.open()
    store.commit(commit(1, ROWS[:2]))
    store.close()
    raw(tmp_path / DB_NAME, f"PRAGMA user_version={FORMAT_VERSION + 1}")
    before = (tmp_path / DB_NAME).read_bytes()
    with pytest.raises(SpoolFormatError, match=f"format version {FORMAT_VERSION + 1}, newer"):
        SpoolStore(tmp_path).open()
    assert (tmp_path / DB_NAME).read_bytes() == before
    assert not [p for p in tmp_path.iterdir() if "damaged" in p.name]  # not set aside
    again = SpoolStore(tmp_path)  # the refusal let the lock go
    with pytest.raises(SpoolFormatError):
        again.open()


@pytest.mark.parametrize(
    "statements",
    [
        ("CREATE TABLE t (x)", "PRAGMA application_id=1234"),
        ("CREATE TABLE t (x)",),  # no application id, but tables: somebody's database
        (
            "CREATE TABLE records (id INTEGER PRIMARY KEY)",
            "PRAGMA user_version=1",
        ),  # a table of the same name, no id
    ],
    ids=["other-application-id", "other-tables", "same-table-name"],
)
def test_a_database_that_is_not_a_spool_is_refused(
    tmp_path: Path, statements: tuple[str, ...]
) -> None:
    raw(tmp_path / DB_NAME, *statements)
    before = (tmp_path / DB_NAME).read_bytes()
    with pytest.raises(SpoolFormatError, match="is not a kinesis_trio spool"):
        SpoolStore(tmp_path).open()
    assert (tmp_path / DB_NAME).read_bytes() == before


def test_an_empty_database_file_becomes_a_spool(tmp_path: Path) -> None:
    (tmp_path / DB_NAME).write_bytes(b"")  # a crash between creating the file and writing it
    store = SpoolStore(tmp_path)
    assert store.open().records == 0
    store.close()
    db = sqlite3.connect(tmp_path / DB_NAME)
    assert db.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
    assert db.execute("PRAGMA user_version").fetchone()[0] == FORMAT_VERSION
    db.close()


# -- a full disk --------------------------------------------------------------------------------


def test_a_full_disk_fails_the_commit_and_keeps_the_earlier_ones(tmp_path: Path) -> None:
    store = SpoolStore(tmp_path, max_page_count=40)  # 40 pages of 16 KiB: a small disk
    store.open()
    rng = random.Random(7)
    written: list[Row] = []
    next_id = 1
    with pytest.raises(sqlite3.OperationalError, match="database or disk is full"):
        for gen in range(1, 100):
            rows = [Row(next_id + i, "s", "k", None, rng.randbytes(3000)) for i in range(4)]
            store.commit(commit(gen, rows))
            written += rows
            next_id += 4
    assert written  # some fit before the disk filled
    assert read_all(store) == written  # the failed transaction left nothing behind
    # a small commit after it still fits, and deletes free room for a big one
    store.commit(commit(200, [Row(next_id, "s", "k", None, b"small")]))
    store.commit(Commit(201, [], [row.id for row in written[:8]], next_id + 1))
    store.commit(commit(202, [Row(next_id + 1, "s", "k", None, rng.randbytes(3000))]))
    store.close()
    again = SpoolStore(tmp_path)
    stats = again.open()
    assert stats.damaged == 0 and stats.set_aside is None
    assert [r.id for r in read_all(again)] == [r.id for r in written[8:]] + [next_id, next_id + 1]
    again.close()


REFUSED_WRITE = """
import os, resource, signal, sqlite3, sys
from kinesis_trio._core._spool import Commit, Row
from kinesis_trio._disk._store import DB_NAME, SpoolStore
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG
store = SpoolStore(sys.argv[1])
store.open()
store.commit(Commit(1, [Row(i, "s", "k", None, b"%d" % i * 3000) for i in range(1, 5)], [], 5))
db = os.path.join(sys.argv[1], DB_NAME)
limit = max(os.path.getsize(db), os.path.getsize(db + "-wal")) + 1000
soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
resource.setrlimit(resource.RLIMIT_FSIZE, (limit, hard))
big = Commit(2, [Row(5, "s", "k", None, b"b" * 200_000)], [1], 6)
try:
    store.commit(big)
except sqlite3.Error as exc:
    print("refused:", type(exc).__name__, exc)
resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))
print("ids:", [item[0].id for item in store.read(0, 100)])
store.commit(big)
print("ids:", [item[0].id for item in store.read(0, 100)])
store.close()
"""


@pytest.mark.subprocess
def test_a_write_the_kernel_refuses_fails_the_commit_and_the_store_goes_on(
    tmp_path: Path,
) -> None:
    """A real refused write, not SQLite's page limit: the file-size limit
    (``RLIMIT_FSIZE``, in a child process) makes the kernel fail the WAL's write, as a
    full disk would. The commit fails whole with a ``sqlite3.Error`` (the spooler's
    ``SpoolWriteError``), the records written before stay, and the same commit succeeds
    once the disk takes writes again."""
    done = subprocess.run(
        [sys.executable, "-c", REFUSED_WRITE, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    lines = done.stdout.splitlines()
    assert lines[0] in (
        "refused: OperationalError disk I/O error",
        "refused: OperationalError database or disk is full",
    ), done.stdout
    assert lines[1:] == ["ids: [1, 2, 3, 4]", "ids: [2, 3, 4, 5]"]
    store = SpoolStore(tmp_path)
    stats = store.open()
    assert stats.damaged == 0 and stats.set_aside is None
    assert [row.id for row in read_all(store)] == [2, 3, 4, 5]
    store.close()


def test_reading_back_stops_at_a_byte_bound_so_large_records_are_not_read_500_at_once(
    tmp_path: Path,
) -> None:
    store = SpoolStore(tmp_path)
    store.open()
    try:
        rows = [Row(i, "s", f"k{i}", None, bytes([i]) * 400_000) for i in range(1, 21)]
        store.commit(Commit(1, rows, [], 21))
        first = store.read(0, 500, max_bytes=1_000_000)
        assert [r[0].id for r in first if not isinstance(r, Damage)] == [1, 2, 3]
        rest = store.read(3, 500, max_bytes=1_000_000)
        assert [r[0].id for r in rest if not isinstance(r, Damage)] == [4, 5, 6]
        everything = store.read(0, 500)  # 16 MiB: all 8 MB of them
        assert len(everything) == 20
    finally:
        store.close()
