"""Damaged spools: torn writes and flipped bits in every region of the database and its WAL.

Each case copies a spool built from known records (closed: all in the database file;
``live``: copied while its writer had it open, as a crash leaves it, everything in the WAL;
``mixed``: half checkpointed into the database, half in the WAL), damages the copy and
opens it. Whatever the damage, opening raises nothing but :class:`SpoolFormatError` (and
only where the header's version or application id were hit), never hangs, never returns a
record whose bytes differ from what was written, sets a damaged file aside exactly as it
was found, and leaves a spool that opens clean the next time. Beyond that each region has
its own promise (a WAL keeps a prefix of its transactions; a leaf page loses at most its
own rows; an overflow page at most its record; ...), and ``MATRIX`` gathers what each
region cost (the numbers in the docs: see ``_print_matrix``).
"""

from __future__ import annotations

import collections
import logging
import os
import random
import shutil
import sqlite3
import struct
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import pytest

from kinesis_trio import RecoveryReport
from kinesis_trio._core._spool import Commit, Row
from kinesis_trio._disk._store import (
    DB_NAME,
    PAGE_SIZE,
    Damage,
    Dead,
    SpoolStats,
    SpoolStore,
    checksum,
    salvage,
)
from kinesis_trio._errors import SpoolFormatError
from kinesis_trio.testing import FakeKinesis
from tests.support.helpers import fake_producer
from tests.support.spool import left_behind

PAGE = PAGE_SIZE
FRAME = 24 + PAGE  # a WAL frame: its header, then the page
#: record sizes: none, small, most of a page, overflow chains (in proportion to the page)
SIZES = [n * PAGE // 4096 for n in (0, 10, 300, 3000, 9000, 20000)]
WAL_HEADER = 32
#: How long opening one damaged copy may take before the test calls it a hang.
HANG = 20.0

Damager = Callable[[Path], None]


# -- spools of known records ------------------------------------------------------------------


@dataclass
class Spool:
    """A spool directory and what it held after each commit (``states[0]``: before any)."""

    path: Path
    states: list[dict[int, Row]]
    #: per state: the WAL's size once that commit was in it (0: in the database file)
    wal_end: list[int]
    rows: dict[int, Row] = field(default_factory=dict)  # every record written, by id

    @property
    def final(self) -> dict[int, Row]:
        return self.states[-1]

    def kept_by_wal(self, end: int) -> dict[int, Row]:
        """The records after the last commit whose frames all lie before ``end``."""
        last = max(t for t, at in enumerate(self.wal_end) if at <= end)
        return self.states[last]


def build(directory: Path, mode: str, seed: int = 2024) -> Spool:
    """Twelve commits of records of every size (none, small, a page, overflow chains) and
    keys (none, unicode, explicit hash keys), with deletes (free pages)."""
    rng = random.Random(seed)
    writer = directory / "writer"
    store = SpoolStore(writer)
    store.open()
    db = store._require()
    rows: dict[int, Row] = {}
    spool = Spool(directory / "spool", [{}], [0])
    next_id = 1
    for gen in range(1, 13):
        if mode == "mixed" and gen == 7:
            db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            spool.wal_end = [0] * len(spool.wal_end)
        inserts = []
        for _ in range(rng.randint(1, 6)):
            size = rng.choice(SIZES)
            key = None if next_id % 4 == 0 else f"ключ-{next_id}-🙂"
            ehk = str(rng.randrange(2**128)) if next_id % 5 == 0 else None
            inserts.append(Row(next_id, "s", key, ehk, rng.randbytes(size)))
            next_id += 1
        deletes = sorted(rng.sample(sorted(rows), min(len(rows), rng.randint(0, 3))))
        store.commit(Commit(gen, inserts, deletes, next_id))
        for i in deletes:
            del rows[i]
        for row in inserts:
            rows[row.id] = spool.rows[row.id] = row
        spool.states.append(dict(rows))
        wal = writer / f"{DB_NAME}-wal"
        spool.wal_end.append(wal.stat().st_size if wal.exists() else 0)
    if mode == "closed":
        store.close()  # the last close checkpoints: everything in the database file
        spool.wal_end = [0] * len(spool.wal_end)
    spool.path.mkdir()
    for path in writer.iterdir():
        if path.name.startswith(DB_NAME):
            shutil.copy(path, spool.path / path.name)
    store.close()
    return spool


@pytest.fixture(scope="module", autouse=True)
def _no_fsync() -> Iterator[None]:
    """The copies opened here are thrown away: no fsync (``synchronous=FULL`` costs
    milliseconds a commit, and the cases open hundreds of rebuilt spools)."""
    connect = sqlite3.connect
    set_up = SpoolStore._connect

    def fast(*args: Any, **kwargs: Any) -> sqlite3.Connection:
        db: sqlite3.Connection = connect(*args, **kwargs)
        if not kwargs.get("uri"):  # (read-only ones write nothing)
            db.execute("PRAGMA synchronous=OFF")  # (for the switch to WAL mode)
        return db

    def fast_store(self: SpoolStore, path: str) -> sqlite3.Connection:
        db = set_up(self, path)
        db.execute("PRAGMA synchronous=OFF")  # (for its commits)
        return db

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sqlite3, "connect", fast)
        patch.setattr(SpoolStore, "_connect", fast_store)
        yield


@pytest.fixture(scope="module")
def spools(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Spool]:
    made = {}
    for mode in ("closed", "live", "mixed"):
        made[mode] = build(tmp_path_factory.mktemp(mode), mode)
    return made


# -- opening a damaged copy -------------------------------------------------------------------


@dataclass
class Opened:
    rows: dict[int, Row]
    damaged: int  # found at open (rebuild) and while reading (checksums)
    set_aside: str | None
    refused: SpoolFormatError | None = None
    dead: set[int] = field(default_factory=set)  # the rows read back as dead letters


#: region -> Counter of (records lost, damaged counted, what happened): for the docs.
MATRIX: dict[str, collections.Counter[tuple[int, int, str]]] = collections.defaultdict(
    collections.Counter
)
_cases = iter(range(10**9))


def open_damaged(spool: Spool, tmp: Path, damage: Damager, region: str = "") -> Opened:
    """Copy ``spool``, damage the copy, open it and read it all; check what holds for any
    damage, and note the case in ``MATRIX`` under ``region``."""
    where = tmp / f"case{next(_cases)}"
    shutil.copytree(spool.path, where)
    damage(where)
    found = {
        p.name: p.read_bytes()
        for p in where.iterdir()
        if p.name in (DB_NAME, f"{DB_NAME}-wal")  # the -shm is an index SQLite rebuilds
    }
    done: list[Opened | BaseException] = []

    def run() -> None:
        try:
            done.append(_open_and_read(where))
        except BaseException as exc:  # handed to the test's thread
            done.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(HANG)
    assert not thread.is_alive(), f"opening a damaged spool hung ({region})"
    result = done[0]
    if isinstance(result, BaseException):
        raise result
    for row_id, row in result.rows.items():  # never a record that differs from the written
        assert row == spool.rows[row_id], f"record {row_id} read back changed ({region})"
    left = sorted(p.name for p in where.iterdir())
    if result.refused is not None or result.set_aside is None:
        assert not [name for name in left if "damaged" in name]
    if result.refused is not None:
        assert (where / DB_NAME).read_bytes() == found[DB_NAME]  # left as it was
    if result.set_aside is not None:
        for name, data in found.items():  # set aside as it was found, never deleted
            moved = Path(result.set_aside + name.removeprefix(DB_NAME))
            assert moved.read_bytes() == data, f"{moved.name} changed ({region})"
        again = _open_and_read(where)  # the rebuilt spool is sound
        assert again.set_aside is None and again.damaged == 0 and again.refused is None
        assert again.rows == result.rows
    lost = len(set(spool.final) - set(result.rows))
    what = (
        "refused"
        if result.refused is not None
        else "set aside"
        if result.set_aside is not None
        else "opened"
    )
    MATRIX[region][(lost, result.damaged, what)] += 1
    return result


def _open_and_read(where: Path) -> Opened:
    store = SpoolStore(where)
    try:
        stats: SpoolStats = store.open()
    except SpoolFormatError as exc:
        return Opened({}, 0, None, exc)
    try:
        items = store.read(0, 10**9)
    finally:
        store.close()
    rows = {}
    dead = set()
    damaged = stats.damaged
    for item in items:
        if isinstance(item, Damage):
            damaged += 1
        else:
            row, size = item[0], item[1]
            rows[row.id] = row
            if isinstance(item, Dead):
                dead.add(row.id)
            key = row.partition_key
            assert size == len(row.data) + (0 if key is None else len(key.encode()))
    assert stats.records == len(items)
    return Opened(rows, damaged, stats.set_aside, dead=dead)


def truncate(name: str, size: int) -> Damager:
    def damage(where: Path) -> None:
        with open(where / name, "r+b") as f:
            f.truncate(size)

    return damage


def flip(name: str, offset: int, bit: int) -> Damager:
    def damage(where: Path) -> None:
        with open(where / name, "r+b") as f:
            f.seek(offset)
            byte = f.read(1)[0]
            f.seek(offset)
            f.write(bytes([byte ^ (1 << bit)]))

    return damage


def wal_size(spool: Spool) -> int:
    return (spool.path / f"{DB_NAME}-wal").stat().st_size


# -- the WAL: a torn tail, a flipped bit ------------------------------------------------------


@pytest.mark.parametrize("mode", ["live", "mixed"])
def test_a_torn_wal_keeps_exactly_the_transactions_written_before_the_tear(
    spools: dict[str, Spool], tmp_path: Path, mode: str
) -> None:
    spool = spools[mode]
    size = wal_size(spool)
    assert (size - WAL_HEADER) % FRAME == 0
    rng = random.Random(5)
    ends = [at for at in spool.wal_end if at]  # where each commit's frames end
    frames = range(WAL_HEADER, size, FRAME)
    inside = [rng.choice(frames) + rng.choice([1, 8, 24, 25, FRAME // 2]) for _ in range(20)]
    offsets = sorted(
        {0, 1, 16, WAL_HEADER - 1, *ends, *(e - FRAME for e in ends), *(e - 1 for e in ends)}
        | {e + 1 for e in ends if e < size}
        | set(rng.sample(frames, 10))
        | set(inside)
    )
    for offset in offsets:
        opened = open_damaged(spool, tmp_path, truncate(f"{DB_NAME}-wal", offset), "wal torn")
        assert opened.rows == spool.kept_by_wal(offset), offset  # never half a transaction
        assert opened.damaged == 0 and opened.set_aside is None


@pytest.mark.parametrize("mode", ["live", "mixed"])
def test_a_flip_in_the_wal_ends_the_log_before_its_frame(
    spools: dict[str, Spool], tmp_path: Path, mode: str
) -> None:
    """SQLite cannot tell a flipped frame from a torn one: the log ends there, silently
    (every transaction from that frame on is lost, nothing is counted)."""
    spool = spools[mode]
    size = wal_size(spool)
    rng = random.Random(6)
    offsets = sorted({*range(0, WAL_HEADER, 2), *rng.sample(range(WAL_HEADER, size), 40)})
    for offset in offsets:
        region = "wal header" if offset < WAL_HEADER else "wal frame"
        damage = flip(f"{DB_NAME}-wal", offset, rng.randrange(8))
        opened = open_damaged(spool, tmp_path, damage, region)
        if offset < WAL_HEADER:  # the header's checksum fails: the whole WAL is ignored
            expected = spool.kept_by_wal(0)
        else:
            expected = spool.kept_by_wal(WAL_HEADER + (offset - WAL_HEADER) // FRAME * FRAME)
        assert opened.rows == expected, offset
        assert opened.damaged == 0 and opened.set_aside is None


def test_an_empty_database_file_with_a_wal_is_set_aside_with_its_wal(
    spools: dict[str, Spool], tmp_path: Path
) -> None:
    """SQLite deletes the WAL of an empty database file; the spool keeps it aside."""
    opened = open_damaged(spools["live"], tmp_path, truncate(DB_NAME, 0), "database emptied")
    assert opened.set_aside is not None and opened.rows == {}
    assert Path(opened.set_aside + "-wal").stat().st_size == wal_size(spools["live"])


# -- the database file: where each page is, what it holds -------------------------------------


@dataclass
class Layout:
    """The pages of a spool's database file: what each holds."""

    kind: dict[int, str]  # page -> schema, records internal/leaf/overflow, meta, free
    leaf_rows: dict[int, set[int]]  # leaf page -> the ids in it
    pages_of: dict[int, set[int]]  # id -> the pages its record is on
    used: dict[int, list[range]]  # page -> the byte ranges (in the file) in use


def _varint(buf: bytes, at: int) -> tuple[int, int]:
    value = 0
    for i in range(8):
        byte = buf[at + i]
        value = (value << 7) | (byte & 0x7F)
        if byte < 0x80:
            return value, at + i + 1
    return (value << 8) | buf[at + 8], at + 9


def layout(path: Path) -> Layout:
    data = path.read_bytes()
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        assert db.execute("PRAGMA page_size").fetchone()[0] == PAGE
        pages = db.execute("PRAGMA page_count").fetchone()[0]
        stat = db.execute("SELECT name, pageno, pagetype FROM dbstat").fetchall()
    finally:
        db.close()
    kind = {p: "free" for p in range(1, pages + 1)}
    for name, page, pagetype in stat:
        kind[page] = (
            "schema"
            if name == "sqlite_schema"
            else f"records {pagetype}"
            if name == "records"
            else "meta"
        )
    used: dict[int, list[range]] = {}
    leaf_rows: dict[int, set[int]] = {}
    pages_of: dict[int, set[int]] = {}
    for page in range(1, pages + 1):
        base = (page - 1) * PAGE
        head = base + (100 if page == 1 else 0)
        if kind[page] in ("records overflow", "free"):
            used[page] = [range(base, base + PAGE)]
            continue
        flag, cells, content = data[head], *struct.unpack(">HH", data[head + 3 : head + 7])
        top = head + (12 if flag in (2, 5) else 8) + 2 * cells
        used[page] = [range(head, top), range(base + (content or 65536), base + PAGE)]
        if kind[page] != "records leaf":
            continue
        leaf_rows[page] = set()
        for i in range(cells):
            (cell,) = struct.unpack(
                ">H", data[top - 2 * cells + 2 * i : top - 2 * cells + 2 * i + 2]
            )
            size, at = _varint(data, base + cell)
            row_id, at = _varint(data, at)
            leaf_rows[page].add(row_id)
            pages_of[row_id] = {page} | set(_overflow(data, at, size))
    for page in pages_of.values():
        for p in page:
            assert kind[p] in ("records leaf", "records overflow")
    return Layout(kind, leaf_rows, pages_of, used)


def _overflow(data: bytes, at: int, size: int) -> Iterator[int]:
    """The overflow pages of a table leaf cell whose payload of ``size`` starts at ``at``."""
    usable = PAGE
    most = usable - 35
    if size <= most:
        return
    least = (usable - 12) * 32 // 255 - 23
    local = least + (size - least) % (usable - 4)
    if local > most:
        local = least
    (page,) = struct.unpack(">I", data[at + local : at + local + 4])
    while page:
        yield page
        (page,) = struct.unpack(">I", data[(page - 1) * PAGE : (page - 1) * PAGE + 4])


def test_the_closed_spool_has_every_kind_of_page(spools: dict[str, Spool]) -> None:
    pages = layout(spools["closed"].path / DB_NAME)
    assert set(pages.kind.values()) == {
        "schema",
        "meta",
        "records internal",
        "records leaf",
        "records overflow",
        "free",
    }
    assert set(pages.pages_of) == set(spools["closed"].final)
    assert any(len(p) > 2 for p in pages.pages_of.values())  # a chain of overflow pages


# -- the database file: torn ------------------------------------------------------------------


def test_a_truncated_database_keeps_every_record_whose_pages_remain(
    spools: dict[str, Spool], tmp_path: Path
) -> None:
    spool = spools["closed"]
    pages = layout(spool.path / DB_NAME)
    size = (spool.path / DB_NAME).stat().st_size
    roots = max(p for p, k in pages.kind.items() if k in ("schema", "records internal", "meta"))
    rng = random.Random(10)
    offsets = {*range(0, size, PAGE), *(rng.randrange(size) for _ in range(20))}
    for offset in sorted(offsets):
        opened = open_damaged(spool, tmp_path, truncate(DB_NAME, offset), "database torn")
        if offset >= roots * PAGE:
            whole = {i for i, on in pages.pages_of.items() if max(on) * PAGE <= offset}
            assert whole <= set(opened.rows), offset
        if offset and opened.rows != spool.final:  # (an empty file: a spool never written)
            assert opened.set_aside is not None, offset


def dead_letters_up_front(directory: Path) -> tuple[Spool, dict[int, int]]:
    """A closed spool whose ``dead`` table was made by its first commit, before the records'
    pages, and grew to several leaves among them (a mark on every third record, with a
    long message); and the page of the leaf that holds each mark."""
    rows: dict[int, Row] = {}
    marks: list[int] = []
    store = SpoolStore(directory)
    store.open()
    for gen in range(1, 31):
        inserts = [
            Row(i, "s", f"k{i}", None, b"%d" % i * 200) for i in range(gen * 10 - 9, gen * 10 + 1)
        ]
        dead = [
            (row.id, "InvalidArgumentException", "m" * 400) for row in inserts if row.id % 3 == 1
        ]
        store.commit(Commit(gen, inserts, [], gen * 10 + 1, marks=dead))
        rows.update((row.id, row) for row in inserts)
        marks += [m[0] for m in dead]
    store.close()
    db = sqlite3.connect(f"file:{directory / DB_NAME}?mode=ro", uri=True)
    try:
        (root,) = db.execute("SELECT rootpage FROM sqlite_master WHERE name = 'dead'").fetchone()
        leaves = db.execute(
            "SELECT pageno, ncell FROM dbstat WHERE name = 'dead' AND pagetype = 'leaf'"
            " ORDER BY path"
        ).fetchall()
    finally:
        db.close()
    assert root < min(record_leaves(directory)), "made before the records' pages"
    assert len(leaves) >= 3 and root not in {p for p, _ in leaves}  # an interior root
    ids = iter(sorted(marks))
    leaf_of = {next(ids): page for page, cells in leaves for _ in range(cells)}
    assert len(leaf_of) == len(marks)
    return Spool(directory, [{}, dict(rows)], [0, 0], dict(rows)), leaf_of


def record_leaves(directory: Path) -> list[int]:
    db = sqlite3.connect(f"file:{directory / DB_NAME}?mode=ro", uri=True)
    try:
        found = "SELECT pageno FROM dbstat WHERE name = 'records' AND pagetype = 'leaf'"
        return [page for (page,) in db.execute(found)]
    finally:
        db.close()


def test_a_torn_spool_keeps_every_dead_letter_mark_it_can_still_read(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A tear past the ``dead`` table's root but before one of its leaves: the marks on the
    leaves that remain still make their records dead letters (never sent again). Salvage
    read the table whole or not at all, so a single leaf torn away made every dead letter a
    record to send again, silently."""
    spool, leaf_of = dead_letters_up_front(tmp_path / "spool")
    leaves = sorted(set(leaf_of.values()))
    partial = 0
    for page in range(leaves[0], leaves[-1]):  # the file ends after page ``page``
        caplog.clear()
        with caplog.at_level(logging.ERROR, logger="kinesis_trio.spool"):
            opened = open_damaged(spool, tmp_path, truncate(DB_NAME, page * PAGE), "dead torn")
        readable = {i for i, leaf in leaf_of.items() if leaf <= page and i in opened.rows}
        assert opened.dead == readable, page
        resent = set(leaf_of) & set(opened.rows) - readable  # their marks torn away
        if resent:  # sent again, but not silently
            assert "spool_dead_unreadable" in " ".join(r.getMessage() for r in caplog.records)
        partial += 0 < len(readable) < len(leaf_of)
    assert partial  # the case: some marks read, some torn away


# -- the database file: flipped ---------------------------------------------------------------


def offsets_in(pages: Layout, kinds: set[str], count: int, rng: random.Random) -> list[int]:
    """``count`` offsets in the bytes in use of the pages of ``kinds``."""
    spans = [r for page, k in pages.kind.items() if k in kinds for r in pages.used[page]]
    pool = sorted({o for r in spans for o in r} - set(range(100)))
    return sorted(rng.sample(pool, min(count, len(pool))))


def flip_case(spool: Spool, tmp_path: Path, offset: int, rng: random.Random, region: str) -> Opened:
    return open_damaged(spool, tmp_path, flip(DB_NAME, offset, rng.randrange(8)), region)


#: The header's fields a flip refuses, rather than damages: version and application id.
IDENTITY = {*range(60, 64), *range(68, 72)}


def test_flips_in_the_header_are_refused_or_recovered(
    spools: dict[str, Spool], tmp_path: Path
) -> None:
    spool = spools["closed"]
    rng = random.Random(11)
    for offset in range(100):
        opened = flip_case(spool, tmp_path, offset, rng, "database header")
        if opened.refused is None:  # salvage restores the fields every spool has the same
            assert opened.rows == spool.final, offset
        else:
            assert offset in IDENTITY, offset
            why = str(opened.refused)
            assert "newer than this" in why or "not a kinesis_trio spool" in why


@pytest.mark.parametrize(
    ("kinds", "count"),
    [
        ({"schema"}, 40),
        ({"records internal"}, 40),
        ({"meta"}, 20),
        ({"free"}, 20),
    ],
    ids=["schema", "interior", "meta", "freelist"],
)
def test_flips_in_structure_pages_never_lie(
    spools: dict[str, Spool], tmp_path: Path, kinds: set[str], count: int
) -> None:
    spool = spools["closed"]
    pages = layout(spool.path / DB_NAME)
    rng = random.Random(12)
    region = "/".join(sorted(kinds))
    for offset in offsets_in(pages, kinds, count, rng):
        opened = flip_case(spool, tmp_path, offset, rng, region)
        assert opened.refused is None
        if kinds <= {"free", "meta"}:  # no record is there
            assert opened.rows == spool.final, offset


def test_a_flip_in_a_leaf_page_loses_at_most_that_pages_rows(
    spools: dict[str, Spool], tmp_path: Path
) -> None:
    spool = spools["closed"]
    pages = layout(spool.path / DB_NAME)
    rng = random.Random(13)
    for offset in offsets_in(pages, {"records leaf"}, 60, rng):
        page = offset // PAGE + 1
        opened = flip_case(spool, tmp_path, offset, rng, "records leaf")
        lost = set(spool.final) - set(opened.rows)
        assert lost <= pages.leaf_rows[page], (offset, lost)
        assert opened.refused is None


def test_a_flip_in_an_overflow_page_loses_at_most_its_record_and_counts_it(
    spools: dict[str, Spool], tmp_path: Path
) -> None:
    spool = spools["closed"]
    pages = layout(spool.path / DB_NAME)
    owner = {p: i for i, on in pages.pages_of.items() for p in on}
    rng = random.Random(14)
    for offset in offsets_in(pages, {"records overflow"}, 30, rng):
        opened = flip_case(spool, tmp_path, offset, rng, "records overflow")
        lost = set(spool.final) - set(opened.rows)
        assert lost <= {owner[offset // PAGE + 1]}, (offset, lost)
        assert opened.damaged >= len(lost)


def test_a_record_whose_bytes_changed_is_skipped_and_counted_the_file_kept(
    spools: dict[str, Spool], tmp_path: Path
) -> None:
    spool = spools["closed"]
    data = (spool.path / DB_NAME).read_bytes()
    victim = next(row for row in spool.final.values() if len(row.data) >= 300)
    at = data.index(victim.data[:64]) + 10
    opened = open_damaged(spool, tmp_path, flip(DB_NAME, at, 3), "record data")
    assert set(spool.final) - set(opened.rows) == {victim.id}
    assert opened.damaged == 1 and opened.set_aside is None  # SQLite's structure is sound


@pytest.mark.parametrize("mode", ["live", "mixed"])
def test_flips_in_the_database_file_under_a_live_wal_never_lie(
    spools: dict[str, Spool], tmp_path: Path, mode: str
) -> None:
    spool = spools[mode]
    size = (spool.path / DB_NAME).stat().st_size
    rng = random.Random(15)
    offsets = {*rng.sample(range(100), 20), *rng.sample(range(100, size), min(size - 100, 30))}
    for offset in sorted(offsets):
        opened = flip_case(spool, tmp_path, offset, rng, f"database under a {mode} WAL")
        if opened.refused is not None:
            assert offset in IDENTITY


class _Cursor:
    def __init__(self, rows: list[tuple[object, ...]]) -> None:
        self.rows = rows

    def fetchall(self) -> list[tuple[object, ...]]:
        return self.rows

    def fetchone(self) -> tuple[object, ...] | None:
        return self.rows[0] if self.rows else None


class _OutOfOrder:
    """A damaged file as salvage sees it: every range read ends with a row of garbage
    whose id is below the range (a page's zeros read as a cell: rowid 0, no fields)."""

    def __init__(self, rows: list[Row]) -> None:
        self.rows = [
            (r.id, r.id, r.stream, r.partition_key, r.explicit_hash_key, r.data, checksum(r))
            for r in rows
        ]

    def execute(self, sql: str, params: tuple[int, ...] = ()) -> _Cursor:
        if "max(rowid)" in sql:
            return _Cursor([(60,)])
        if "FROM meta" in sql:
            return _Cursor([(61,)])
        if "rowid = ?" in sql:
            return _Cursor([r for r in self.rows if r[0] == params[0]])
        garbage = (0, None, None, None, None, None, None)
        return _Cursor([r for r in self.rows if r[0] > params[0]] + [garbage])


def test_salvage_moves_on_past_rows_out_of_order() -> None:
    """It read the range after the last good row again and again, for ever."""
    rows = [Row(i, "s", "k", None, b"%d" % i) for i in range(1, 56)]
    items: list[Row | Damage] = []
    thread = threading.Thread(
        target=lambda: items.extend(salvage(cast(sqlite3.Connection, _OutOfOrder(rows)))),
        daemon=True,
    )
    thread.start()
    thread.join(HANG)
    assert not thread.is_alive(), "salvage looped"
    assert items == rows


def test_a_next_id_damaged_into_text_is_no_next_id(tmp_path: Path) -> None:
    store = SpoolStore(tmp_path)
    store.open()
    store.commit(Commit(1, [Row(1, "s", "k", None, b"x")], [], 9))
    store.close()
    db = sqlite3.connect(tmp_path / DB_NAME)
    db.execute("UPDATE meta SET v = 'garbage'")  # as a flip of its type's bits leaves it
    db.commit()
    db.close()
    store = SpoolStore(tmp_path)
    stats = store.open()
    store.close()
    assert (stats.records, stats.next_id) == (1, 2)


# -- a producer opening a damaged spool -------------------------------------------------------


@pytest.mark.anyio
async def test_a_producer_recovers_around_a_damaged_record_and_reports_it(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    rows = [Row(i, "s", f"k{i}", None, b"record-%04d-" % i + bytes(200)) for i in range(1, 21)]
    left_behind(tmp_path, rows)
    data = (tmp_path / DB_NAME).read_bytes()
    flip(DB_NAME, data.index(b"record-0007-") + 3, 0)(tmp_path)
    fake = FakeKinesis()
    fake.create_stream("s", 1)
    with caplog.at_level(logging.ERROR, logger="kinesis_trio.spool"):
        async with fake_producer(
            fake, spool_dir=str(tmp_path), record_max_buffered_time=0.01, aggregation_enabled=False
        ) as producer:
            report = await producer.recovered()
        totals: dict[str, Any] = producer.metrics.totals()
    assert report == RecoveryReport(records=19, ok=19, failed=0, damaged=1, done=True)
    landed = sorted(r.data for r in fake.records("s"))
    assert landed == sorted(row.data for row in rows if row.id != 7)
    logged = [r.getMessage() for r in caplog.records if "spool_record_damaged" in r.getMessage()]
    assert len(logged) == 1 and "id=7" in logged[0] and "checksum mismatch" in logged[0]
    assert totals["SpoolRecordsDamaged"] == 1
    assert totals["SpoolRecordsRecovered"] == 19


@pytest.mark.anyio
async def test_a_producer_recovers_what_a_torn_spool_still_holds_and_counts_the_rest(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    rows = [Row(i, "s", f"k{i}", None, b"record-%04d-" % i + bytes(3000)) for i in range(1, 41)]
    left_behind(tmp_path, rows)
    truncate(DB_NAME, (tmp_path / DB_NAME).stat().st_size * 2 // 3)(tmp_path)
    fake = FakeKinesis()
    fake.create_stream("s", 1)
    with caplog.at_level(logging.ERROR, logger="kinesis_trio.spool"):
        async with fake_producer(
            fake, spool_dir=str(tmp_path), record_max_buffered_time=0.01, aggregation_enabled=False
        ) as producer:
            report = await producer.recovered()
        totals: dict[str, Any] = producer.metrics.totals()
    landed = {r.data for r in fake.records("s")}
    assert 0 < report.records == report.ok == len(landed) < 40
    assert landed <= {row.data for row in rows}
    assert report.damaged == 40 - report.records  # (ids 1..40, none deleted: each counted)
    assert totals["SpoolRecordsDamaged"] == report.damaged
    assert [name for name in os.listdir(tmp_path) if ".damaged-" in name]  # set aside
    logged = " ".join(r.getMessage() for r in caplog.records)
    assert "event='spool_damaged'" in logged and "event='spool_rebuilt'" in logged


@pytest.fixture(scope="module", autouse=True)
def _print_matrix() -> Iterator[None]:
    """``SPOOL_DAMAGE_MATRIX=1 pytest -n 0 -s tests/disk/test_damage.py`` prints what each
    region cost over the cases run (the table in the docs)."""
    yield
    if not os.environ.get("SPOOL_DAMAGE_MATRIX"):
        return
    for region, cases in sorted(MATRIX.items()):
        print(f"\n{region}: {sum(cases.values())} cases")
        for (lost, damaged, what), n in sorted(cases.items()):
            print(f"    {n:4d} x {what}: {lost} lost, {damaged} counted damaged")
