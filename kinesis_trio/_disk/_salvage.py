"""Salvage: what can still be read of a damaged spool, for the store's rebuild (blocking
I/O, the store's worker thread): a copy of the file with its header's fixed fields
restored, the records read back in id ranges past the parts SQLite cannot read, and the
dead-letter marks of those copied, read the same way."""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
from collections.abc import Generator, Iterator

from .._core import Row
from .._logging import get_logger
from ._rows import _UNREADABLE, Damage, _check

__all__ = ["copy_dead", "repaired", "salvage"]

_log = get_logger("kinesis_trio.spool")

#: Ids probed one by one past a part of the file SQLite cannot read, before jumping.
_PROBE = 256

#: Format 2: the records that are dead letters (failed for good, not taken yet: never sent
#: again), made by the first commit that marks one.
DEAD_TABLE = "CREATE TABLE IF NOT EXISTS dead (id INTEGER PRIMARY KEY, code TEXT, message TEXT)"


def copy_dead(source: sqlite3.Connection, db: sqlite3.Connection) -> bool:
    """Salvage: the dead-letter marks of a damaged spool, for the records copied into ``db``;
    whether it made the table.

    Read in ranges of the copied ids and, where a range cannot be read (a page of the table
    torn away or damaged), one id at a time: a mark is lost only if its own page is. A
    record whose mark cannot be read is sent again if it was a dead letter (logged)."""
    try:
        if source.execute("SELECT 1 FROM sqlite_master WHERE name = 'dead'").fetchone() is None:
            return False  # it never held a dead letter
    except _UNREADABLE:  # no schema: no record was copied either
        return False
    ids = [row_id for (row_id,) in db.execute("SELECT id FROM records ORDER BY id")]
    marks: list[tuple[object, ...]] = []
    unreadable: list[int] = []
    for at in range(0, len(ids), _MARKS):
        chunk = ids[at : at + _MARKS]
        try:
            marks += source.execute(_MARKS_IN, (chunk[0], chunk[-1])).fetchall()
        except _UNREADABLE:
            for row_id in chunk:
                try:
                    marks += source.execute(_MARK_OF, (row_id,)).fetchall()
                except _UNREADABLE:
                    unreadable.append(row_id)
    if unreadable:
        _log.error(
            "spool_dead_unreadable",
            records=len(unreadable),
            first=unreadable[0],
            last=unreadable[-1],
            reason="their dead-letter marks cannot be read: those that were dead letters "
            "are sent again",
        )
    good = [
        (m[0], m[1] if isinstance(m[1], str) else None, m[2] if isinstance(m[2], str) else None)
        for m in marks
        if isinstance(m[0], int)
    ]
    if not good:
        return False
    db.execute("BEGIN IMMEDIATE")
    db.execute(DEAD_TABLE)
    db.executemany(
        "INSERT OR REPLACE INTO dead (id, code, message) SELECT ?, ?, ? WHERE EXISTS"
        " (SELECT 1 FROM records WHERE id = ?)",
        ((i, c, m, i) for i, c, m in good),
    )
    db.execute("COMMIT")
    return True


#: Copied records whose marks salvage reads in one range.
_MARKS = 500
_MARKS_IN = "SELECT id, code, message FROM dead WHERE id BETWEEN ? AND ?"
_MARK_OF = "SELECT id, code, message FROM dead WHERE id = ?"


#: What the 100-byte header of every spool holds but its page size and counters: SQLite's
#: magic string, WAL mode (file format 2), no reserved bytes, the payload fractions, schema
#: format 4, UTF-8. A flip in one of them makes the whole file unreadable.
_HEADER = {
    0: b"SQLite format 3\x00",
    18: bytes([2, 2, 0, 64, 32, 32]),
    44: (4).to_bytes(4, "big"),
    56: (1).to_bytes(4, "big"),
}


def repaired(path: str, page_size: int) -> str | None:
    """A copy of the damaged database at ``path`` with its header's fixed fields as in every
    spool (its page size, if not one; its page count, if less than the file holds), for
    salvage; ``None`` if they are intact (or no copy could be made)."""
    try:
        with open(path, "rb") as f:
            head = f.read(100)
    except OSError:
        return None
    if len(head) < 100:
        return None
    fixed = bytearray(head)
    for at, value in _HEADER.items():
        fixed[at : at + len(value)] = value
    size = int.from_bytes(head[16:18], "big")
    size = 65536 if size == 1 else size
    if size < 512 or size > 65536 or size & (size - 1):
        size = page_size
        fixed[16:18] = (1 if size == 65536 else size).to_bytes(2, "big")
    pages = os.path.getsize(path) // size
    if int.from_bytes(head[28:32], "big") < pages:  # pages past it would not be read
        fixed[28:32] = pages.to_bytes(4, "big")
    if fixed == head:
        return None
    copy = f"{path}.repaired"
    try:
        shutil.copyfile(path, copy)
        if os.path.exists(f"{path}-wal"):
            shutil.copyfile(f"{path}-wal", f"{copy}-wal")
        with open(copy, "r+b") as f:
            f.write(fixed)
    except OSError:
        return None
    return copy


def salvage(db: sqlite3.Connection) -> Iterator[Row | Damage]:
    """Every record that can be read from a damaged database, in id order, and a
    :class:`Damage` for each one that cannot be read intact.

    Reads in id ranges; past a part of the file SQLite cannot read, probes the next ids one
    by one (each that fails is counted as one damaged record, as it may have held one),
    then jumps ahead by doubling steps until a range reads again.
    """
    try:
        top_row = db.execute("SELECT max(rowid) FROM records").fetchone()
        top = int(top_row[0] or 0)
    except _UNREADABLE:
        top = 0
    with contextlib.suppress(*_UNREADABLE):
        saved = db.execute("SELECT v FROM meta WHERE k = 'next_id'").fetchone()
        if saved and isinstance(saved[0], int):
            top = max(top, saved[0] - 1)
    after = 0
    while after < top or top == 0:
        try:
            rows = db.execute(
                f"{_SALVAGE} WHERE rowid > ? ORDER BY rowid LIMIT 500",
                (after,),
            ).fetchall()
        except _UNREADABLE:
            if top == 0:
                return
            after = yield from _probe(db, after, top)
            continue
        if not rows:
            return
        start = highest = after
        for values in rows:
            checked = _salvaged(tuple(values))
            row_id = checked.id if isinstance(checked, Damage) else checked[0].id
            if row_id <= start:  # out of order (a damaged page): garbage, or read already
                continue
            highest = max(highest, row_id)
            if isinstance(checked, Damage):
                yield checked
                after = max(after, row_id)
            else:
                yield checked[0]
                after = row_id
        if after <= start:  # nothing past ``start``: never read the same range again
            after = highest
            if after <= start:
                if top == 0:
                    return
                after = yield from _probe(db, after, top)


#: Salvage reads rows by position and rowid: a damaged schema may have renamed a column, or
#: made ``id`` a column of its own (NULL) instead of the rowid.
_SALVAGE = "SELECT rowid, * FROM records"


def _salvaged(values: tuple[object, ...]) -> tuple[Row, int] | Damage:
    """A row salvage read (its rowid, then every column): the record and its size, or
    why it is damaged."""
    if len(values) != 7 or not isinstance(values[0], int):
        return Damage(values[0] if isinstance(values[0], int) else -1, "a row of the wrong shape")
    return _check((values[0], *values[2:]))


def _probe(db: sqlite3.Connection, after: int, top: int) -> Generator[Row | Damage, None, int]:
    """Past ``after``, where a range read failed: probe ids one by one, then by doubling
    steps; returns the id reading can go on after."""
    row_id = after
    for _ in range(_PROBE):
        row_id += 1
        if row_id > top:
            return top
        try:
            values = db.execute(f"{_SALVAGE} WHERE rowid = ?", (row_id,)).fetchone()
        except _UNREADABLE as exc:
            yield Damage(row_id, f"unreadable ({exc})")
            continue
        if values is not None:
            checked = _salvaged(tuple(values))
            yield checked if isinstance(checked, Damage) else checked[0]
            return row_id
    step = _PROBE
    while row_id < top:
        start = min(row_id + step, top)
        try:
            db.execute("SELECT rowid FROM records WHERE rowid > ? ORDER BY rowid LIMIT 1", (start,))
        except _UNREADABLE:
            step *= 2
            row_id = start
            continue
        _log.error("spool_ids_unreadable", first=row_id + 1, last=start)
        return start
    return top
