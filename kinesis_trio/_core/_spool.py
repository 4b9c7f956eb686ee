"""The spool's book: what must be on disk, what may leave it, when to write (pure, no I/O).

With ``ProducerConfig(spool_dir=...)`` every accepted record is written to the spool (a
SQLite file, ``_disk._store``) until its outcome is final. This module decides everything
about that and does none of the writing: the shell's spooler asks it for the next
:class:`Commit` (the rows to insert and the ids to delete, one transaction), runs it off
the event loop, and tells it how it went.

The rules, each in one place here:

- **What is written.** A record accepted and not resolved by the time of the next commit
  is inserted. A record resolved before that is never written (it needs no spool).
- **What leaves.** A record written to the stream is deleted in the next commit. A record
  failed for good stays as a **dead letter** (marked so, with its error) until the
  application has taken it from ``failures()`` (or ``on_failure`` has returned), or the
  failures buffer dropped it (:meth:`SpoolBook.release`): a crash in between keeps it, and
  the next producer hands it to ``failures()`` again, never sends it. Dead letters do not
  count in ``spool_max_bytes`` (the failures buffer bounds them). A record failed by the
  producer's close (close timeout, abort) is *kept*: it is not failed for good, the next
  producer to open the spool sends it again; so are the records still queued for the
  producer at its close (``SyncProducer``'s, which ``put`` returned for), while the spool
  has room for them.
- **When to write.** ``spool_sync="put"``: as soon as a record waits (group commit: the
  records that arrive while one commit runs go in the next). ``"interval"``: at most
  ``spool_interval`` after the first record that waits. Deletes alone wait for the
  interval too, and so does the retry after a failed commit, under either policy.
- **Room.** ``spool_max_bytes`` bounds the bytes (data + partition key) of the records in
  the spool (written, waiting to be, or waiting to be deleted): beyond it ``put`` waits.
- **Failed writes.** A commit that fails (a full disk, an I/O error) puts its rows back to
  be written again; until a commit succeeds, new records are refused
  (``SpoolWriteError``), the ones accepted before are kept.
- **Recovery.** Records read back from the spool at start are accepted before any new
  record (in id order, which is put order), flagged as possible duplicates; the book counts
  how they end. Dead letters read back are not sent: they go to ``failures()`` again.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Iterator, Sequence
from itertools import repeat
from operator import attrgetter, itemgetter
from typing import NamedTuple, overload

from .._dead_letters import FailedRecord
from .._results import Attempt, RecordResult
from ._record import Record

__all__ = [
    "RECOVERED",
    "RECOVERED_DEAD",
    "Columns",
    "Commit",
    "Inserts",
    "Mark",
    "RecoveryReport",
    "Row",
    "SpoolBook",
    "columns",
    "dead_letter",
    "kept_note",
    "spool_note",
    "unkept_note",
]

#: A :class:`Row` from a tuple of its fields (``Row(...)`` costs a Python call per record).
_row = tuple.__new__
#: The error code of the attempt that marks a recovered record (a possible duplicate).
RECOVERED = "SpoolRecovered"
#: The error code of a dead letter read back whose error the spool did not keep.
RECOVERED_DEAD = "SpoolDeadLetter"
_INF = math.inf


#: How a close's failure message begins its note about the spool (:func:`spool_note`).
_KEPT_MARK = "; it stays in the spool ("
_UNKEPT_MARK = "; the close's last commit did not write it to the spool ("


def kept_note(path: str) -> str:
    """What ends the message of a record the close kept in the spool (it is on disk)."""
    return f"{_KEPT_MARK}{path}): the next producer to open it sends it again"


def unkept_note(error: str | None) -> str:
    """What ends the message of a record the close meant to keep, that its last commit
    could not write (``error``): it is in neither the spool nor the stream."""
    return f"{_UNKEPT_MARK}{error}): it is not kept"


def spool_note(message: str | None) -> str:
    """The note about the spool that ends a close's failure ``message`` ("" if none)."""
    if not message:
        return ""
    for mark in (_KEPT_MARK, _UNKEPT_MARK):
        at = message.find(mark)
        if at >= 0:
            return message[at:]
    return ""


class Row(NamedTuple):
    """One record as the spool stores it (``id`` orders the spool: put order)."""

    id: int
    stream: str
    partition_key: str | None
    explicit_hash_key: str | None
    data: bytes


class Inserts(Sequence[Row]):
    """The rows a commit inserts, each made when the store reads it.

    The book keeps no row per record: a row made for each accepted record and kept until
    its commit is written would outlive the garbage collector's young passes, making
    full passes over every object of the producer more frequent (measured: the most of
    the spool's CPU in a burst). The store reads them one at a time and drops them.
    """

    __slots__ = ("_common", "_ids", "_outcomes", "_values")

    def __init__(
        self,
        ids: Sequence[int],
        outcomes: list[Record],
        values: list[bytes | Row],
        common: bool = False,
    ) -> None:
        self._ids = ids
        self._outcomes = outcomes
        #: the record's data (its stream and key are the outcome's), or its whole row
        self._values = values
        #: every value is data alone (see :meth:`columns`)
        self._common = common

    def __len__(self) -> int:
        return len(self._ids)

    @overload
    def __getitem__(self, index: int) -> Row: ...
    @overload
    def __getitem__(self, index: slice) -> list[Row]: ...
    def __getitem__(self, index: int | slice) -> Row | list[Row]:
        if isinstance(index, slice):
            return list(self)[index]
        return _made(self._ids[index], self._outcomes[index], self._values[index])

    def __iter__(self) -> Iterator[Row]:
        for row_id, outcome, value in zip(self._ids, self._outcomes, self._values, strict=True):
            yield _made(row_id, outcome, value)

    @property
    def common(self) -> bool:
        """Every record is a common one (by stream name, with a key, no explicit hash
        key): :meth:`columns` runs no Python code per row."""
        return self._common

    def columns(self) -> Columns:
        """The rows' fields column by column (id, stream, partition key, explicit hash key,
        data), as iterators that C code runs when every record is a common one."""
        if not self._common:
            return _columns(list(self))
        outcomes = self._outcomes
        return (
            iter(self._ids),
            map(_STREAM, outcomes),
            map(_KEY, outcomes),
            repeat(None, len(outcomes)),
            iter(self._values),  # type: ignore[arg-type]
        )


#: A row's fields column by column: id, stream, partition key, explicit hash key, data.
Columns = tuple[
    Iterator[int], Iterator[str], Iterator[str | None], Iterator[str | None], Iterator[bytes]
]
_STREAM = attrgetter("stream")
_KEY = attrgetter("partition_key")


def columns(rows: Sequence[Row]) -> Columns:
    """``rows``' fields column by column (see :meth:`Inserts.columns`)."""
    if isinstance(rows, Inserts):
        return rows.columns()
    return _columns(rows)


def _columns(rows: Sequence[Row]) -> Columns:
    return tuple(map(itemgetter(i), rows) for i in range(5))  # type: ignore[return-value]


def _made(row_id: int, outcome: Record, value: bytes | Row) -> Row:
    if value.__class__ is bytes:
        return _row(Row, (row_id, outcome.stream, outcome.partition_key, None, value))
    row: Row = value  # type: ignore[assignment]
    return row if row[0] == row_id else _row(Row, (row_id, *row[1:]))


#: A dead letter's mark in the spool: its id, error code and message.
Mark = tuple[int, str | None, str | None]


class Commit(NamedTuple):
    """One transaction for the store: rows to insert, ids to delete (``freed``: their
    bytes), the id the spool goes on from, rows to mark as dead letters, and the ids of
    dead letters among the deletes (their marks go too)."""

    gen: int
    inserts: Sequence[Row]
    deletes: list[int]
    next_id: int
    freed: int = 0
    marks: Sequence[Mark] = ()
    unmarks: Sequence[int] = ()


class RecoveryReport(NamedTuple):
    """What became of the records a producer found in its spool at start.

    ``records`` were read back and sent again (each ``possible_duplicate``: the process
    that died may have written them); ``ok`` and ``failed`` count their outcomes so far
    (``failed`` ones went to ``failures()``); ``damaged`` records could not be read back
    intact and were skipped (each logged with its position). ``done`` is True once every
    recovered record has its outcome. ``dead_letters`` were read back as dead letters (failed
    for good before, never taken): handed to ``failures()`` again, not sent.
    """

    records: int = 0
    ok: int = 0
    failed: int = 0
    damaged: int = 0
    done: bool = True
    dead_letters: int = 0


def recovered_attempt(now: float) -> Attempt:
    """The attempt a recovered record starts with: ambiguous (a possible duplicate)."""
    return Attempt(
        now,
        0.0,
        0.0,
        False,
        RECOVERED,
        "read back from the spool: the process that accepted it ended before its outcome "
        "was known, and may have written it",
        True,
    )


def dead_letter(row: Row, code: str | None, message: str | None, now: float) -> FailedRecord:
    """A dead letter read back from the spool, as ``failures()`` hands it over again: its
    error as it failed (``RECOVERED_DEAD`` if the spool did not keep it), no attempts."""
    stream = row.stream.rpartition("/")[2] if row.stream.startswith("arn:") else row.stream
    result = RecordResult(
        False,
        stream,
        row.partition_key,
        None,
        None,
        None,
        (),
        code or RECOVERED_DEAD,
        message or "a dead letter read back from the spool (its error was not kept)",
        now,
        now,
    )
    return FailedRecord(row.data, row.partition_key, row.explicit_hash_key, stream, result)


class SpoolBook:
    """The spool's records and the schedule of its commits."""

    __slots__ = (
        "_dead",
        "_deletes",
        "_first_wait",
        "_freed",
        "_last_take",
        "_marks",
        "_mixed",
        "_recovering",
        "_rows",
        "_unmarks",
        "_unwritten",
        "bytes",
        "damaged",
        "dead_letters",
        "durable_gen",
        "error",
        "failed_gen",
        "in_flight",
        "interval",
        "max_bytes",
        "next_gen",
        "next_id",
        "reading",
        "recovered",
        "recovered_failed",
        "recovered_ok",
        "sync_on_put",
    )

    def __init__(
        self,
        max_bytes: int,
        sync: str,
        interval: float,
        next_id: int = 1,
        on_disk: int = 0,
    ) -> None:
        self.max_bytes = max_bytes
        self.sync_on_put = sync == "put"
        self.interval = interval
        #: the id the next record written gets (ids order the spool: put order)
        self.next_id = next_id
        #: bytes of the records in the spool (on disk, to be written, to be deleted)
        self.bytes = on_disk
        #: every unresolved record that is on disk (or in the commit running): its id (its
        #: size is the outcome's)
        self._rows: dict[Record, int] = {}
        #: accepted, not written yet (in put order)
        self._unwritten: dict[Record, bytes | Row] = {}
        #: some of them are not common records, or keep their id (see ``take``)
        self._mixed = False
        #: ids of records to delete in the next commit, and their bytes
        self._deletes: list[int] = []
        self._freed = 0
        #: the dead letters in the spool (marked, or to be): id -> bytes (not in ``bytes``)
        self._dead: dict[int, int] = {}
        #: marks the next commit writes, and the ids whose marks it deletes
        self._marks: list[Mark] = []
        self._unmarks: list[int] = []
        #: when the first record of the next commit began to wait (``inf``: none waits)
        self._first_wait = _INF
        #: when the last commit was taken (deletes alone wait ``interval`` from it)
        self._last_take = -_INF
        #: commits: the next one's number, the last written, the last failed
        self.next_gen = 1
        self.durable_gen = 0
        self.failed_gen = 0
        #: the commit being written (0: none)
        self.in_flight = 0
        #: why the last commit failed (``None``: it did not); new records are refused
        self.error: str | None = None
        #: recovery: reading the spool back (new records wait), what became of what it read
        self.reading = False
        self._recovering: set[Record] = set()
        self.recovered = self.recovered_ok = self.recovered_failed = self.damaged = 0
        self.dead_letters = 0

    # -- accepting -------------------------------------------------------------------------

    def refusal(self, size: int) -> str | None:
        """Why a new record of ``size`` bytes cannot be accepted now: ``"full"`` (wait for
        room), ``"recovering"`` (wait: recovered records go first), the last write's error
        (refused), or a record that can never fit; ``None`` when it can."""
        if self.error is not None:
            return self.error
        if self.reading:
            return "recovering"
        if self.bytes + size > self.max_bytes:
            if size > self.max_bytes:
                return (
                    f"record too large: {size} bytes with its partition key, over "
                    f"spool_max_bytes ({self.max_bytes}): it could never be spooled"
                )
            return "full"
        return None

    def add(
        self,
        outcome: Record,
        stream: str,
        data: bytes,
        partition_key: str | None,
        explicit_hash_key: str | None,
        size: int,
        now: float,
    ) -> None:
        """An accepted record: written in the next commit unless resolved before (its id,
        the next in put order, is given then)."""
        if stream == outcome.stream and partition_key is not None and explicit_hash_key is None:
            # the common record: its data alone (no object per record until it is written)
            self._unwritten[outcome] = data
        else:  # by ARN, without a key (one may be given later), or an explicit hash key
            self._mixed = True
            self._unwritten[outcome] = _row(
                Row, (0, stream, partition_key, explicit_hash_key, data)
            )
        self.bytes += size
        if self._first_wait == _INF:
            self._first_wait = now

    def recovering(self, reading: bool) -> None:
        """Recovery reads the spool back (``True``: new records wait), or has read it all."""
        self.reading = reading

    def add_recovered(self, outcome: Record, row_id: int) -> None:
        """A record read back from the spool and accepted again (it is on disk already,
        and its bytes, the outcome's size, were counted when the spool was opened)."""
        self._rows[outcome] = row_id
        self._recovering.add(outcome)
        self.recovered += 1

    def add_dead(self, row_id: int, size: int) -> int:
        """A dead letter read back: not sent, handed to ``failures()`` again; its bytes
        leave the room count (counted when the spool was opened). Returns its ticket
        (:meth:`release`)."""
        self._dead[row_id] = size
        self.bytes -= size
        self.dead_letters += 1
        return row_id

    def skip_damaged(self, row_id: int, size: int) -> None:
        """A record that could not be read back intact: counted, and deleted."""
        self.damaged += 1
        self._delete(row_id, size)

    def lost(self, count: int) -> None:
        """Records the store could not even find (a damaged part of the file): counted."""
        self.damaged += count

    # -- resolution -----------------------------------------------------------------------

    def done(self, members: Sequence[Record], ok: bool) -> None:
        """``members`` have their final outcome: they leave the spool (a record not written
        yet is never written)."""
        unwritten, written, deletes = self._unwritten, self._rows.pop, self._deletes
        freed = 0
        for outcome in members:
            row_id = written(outcome, None)
            if row_id is None:  # not written yet (never to be), or not in the spool
                if unwritten.pop(outcome, None) is not None:
                    self.bytes -= outcome.size
                continue
            deletes.append(row_id)
            freed += outcome.size
            if self._recovering:
                self._recovered_done(outcome, ok)
        self._freed += freed

    def dead(
        self, members: Sequence[Record], code: str | None, message: str | None
    ) -> dict[Record, int]:
        """``members`` failed for good: those in the spool stay there as dead letters,
        marked with their error by the next commit, until :meth:`release`; returns each
        one's ticket. Those not written yet never are (a dead letter that was never
        durable)."""
        unwritten, written = self._unwritten, self._rows.pop
        tickets: dict[Record, int] = {}
        for outcome in members:
            row_id = written(outcome, None)
            if row_id is None:
                if unwritten.pop(outcome, None) is not None:
                    self.bytes -= outcome.size
                continue
            self._dead[row_id] = outcome.size
            self.bytes -= outcome.size  # a dead letter takes no room (failures' bounds)
            self._marks.append((row_id, code, message))
            tickets[outcome] = row_id
            if self._recovering:
                self._recovered_done(outcome, False)
        return tickets

    def release(self, ticket: int) -> None:
        """The dead letter ``ticket`` was taken (``failures()``, ``on_failure`` returned),
        or the failures buffer dropped it: it leaves the spool in the next commit."""
        if self._dead.pop(ticket, None) is None:
            return
        self._deletes.append(ticket)
        self._unmarks.append(ticket)

    def _recovered_done(self, outcome: Record, ok: bool) -> None:
        if outcome in self._recovering:
            self._recovering.discard(outcome)
            if ok:
                self.recovered_ok += 1
            else:
                self.recovered_failed += 1

    def _delete(self, row_id: int, size: int) -> None:
        self._deletes.append(row_id)
        self._freed += size

    def kept(self, outcomes: Collection[Record]) -> set[Record]:
        """The producer has closed, after its last commit, with ``outcomes`` unresolved:
        those on disk stay in the spool; returns the others, those the last commit could
        not write (it failed: a full disk), which are in neither the spool nor the stream.
        Recovered ones among the kept are neither ok nor failed: the next producer
        recovers them again."""
        unwritten = self._unwritten
        lost = {outcome for outcome in outcomes if outcome in unwritten}
        self._recovering.difference_update(outcomes)
        return lost

    def keep_queued(self, rows: Sequence[Row], sizes: Sequence[int], now: float) -> int:
        """The producer closes while records it never accepted wait for it (put returned
        for them: a ``SyncProducer``'s queue): they stay in the spool as the kept ones do,
        after them (put order), written by the last commit, from the first while they fit
        in ``spool_max_bytes`` once the resolved records have left; how many."""
        room = self.max_bytes - (self.bytes - self._freed)
        count = 0
        for row, size in zip(rows, sizes, strict=True):
            if size > room:
                break  # the ones after it are not kept either: no record after a gap
            room -= size
            key = Record(
                row.data, row.partition_key, row.explicit_hash_key, 0, size, now, row.stream, 0
            )
            self._unwritten[key] = _row(Row, (0, *row[1:]))  # id 0: the next one
            self.bytes += size
            count += 1
        if count:
            self._mixed = True
            if self._first_wait == _INF:
                self._first_wait = now
        return count

    # -- commits ----------------------------------------------------------------------------

    def due_at(self) -> float:
        """When the next commit should run (``-inf``: now; ``inf``: nothing to write):
        records waiting under ``"put"``, at once; under ``"interval"``, ``spool_interval``
        after the first of them; deletes alone, and every retry after a failed commit
        (whatever waits, under either policy: a full disk is not tried in a loop),
        ``spool_interval`` after the last commit was taken."""
        if self.error is not None or not self._unwritten:
            if self._deletes or self._marks or self.error is not None:
                return self._last_take + self.interval
            return _INF
        return -_INF if self.sync_on_put else self._first_wait + self.interval

    def take(self, now: float) -> Commit | None:
        """The next commit (its rows count as on disk from now), or ``None``. After a
        failed commit there is one even with nothing to write (its rows may all have been
        resolved since): only a commit that succeeds lets new records in again."""
        if not self._unwritten and not self._deletes and not self._marks and self.error is None:
            return None
        rows, unwritten = self._rows, self._unwritten
        next_id = self.next_id
        ids: Sequence[int]
        if not self._mixed:  # common records only: the next ids in put order
            ids = range(next_id, next_id + len(unwritten))
            rows.update(zip(unwritten, ids, strict=True))
            next_id += len(ids)
        else:
            ids = []
            for outcome, value in unwritten.items():
                if value.__class__ is bytes or value[0] == 0:  # new: the next id
                    row_id = next_id
                    next_id += 1
                else:  # written again after a failed commit: its id
                    row_id = value[0]
                rows[outcome] = row_id
                ids.append(row_id)
        self.next_id = next_id
        inserts = Inserts(ids, list(unwritten), list(unwritten.values()), not self._mixed)
        self._mixed = False
        self._unwritten = {}
        deletes, freed = self._deletes, self._freed
        self._deletes, self._freed = [], 0
        marks, unmarks = self._marks, self._unmarks
        if marks or unmarks:
            self._marks, self._unmarks = [], []
        self._first_wait = _INF if not inserts and not deletes and not marks else now
        self._last_take = now
        gen = self.in_flight = self.next_gen
        self.next_gen += 1
        return Commit(gen, inserts, deletes, self.next_id, freed, marks, unmarks)

    def committed(self, commit: Commit) -> None:
        """``commit`` is on disk: its deletes free their room."""
        self.bytes -= commit.freed
        self.durable_gen = commit.gen
        self.in_flight = 0
        self.error = None
        if not self._unwritten and not self._deletes and not self._marks:
            self._first_wait = _INF

    def commit_failed(self, commit: Commit, error: str) -> None:
        """``commit`` could not be written (``error`` says why): its rows are written again
        by the next commit (those not resolved since), its deletes too; new records are
        refused until a commit succeeds."""
        self.failed_gen = commit.gen
        self.in_flight = 0
        self.error = error
        rows = self._rows
        again: dict[Record, bytes | Row] = {}
        by_id = {row.id: row for row in commit.inserts}
        for outcome, row_id in list(rows.items()):
            row = by_id.get(row_id)
            if row is not None:
                del rows[outcome]
                again[outcome] = row
        again.update(self._unwritten)
        self._unwritten = again
        self._mixed = True  # rows with their ids
        # a record of the failed commit resolved since: its delete is pointless but harmless
        self._deletes = commit.deletes + self._deletes
        self._freed += commit.freed
        if commit.marks or commit.unmarks:
            self._marks = [*commit.marks, *self._marks]
            self._unmarks = [*commit.unmarks, *self._unmarks]

    def target(self) -> int:
        """The commit that writes the records accepted so far (:meth:`durable`)."""
        return self.next_gen

    def durable(self, target: int) -> bool:
        """Are the records accepted before ``target`` was taken written (or resolved, so
        never to be written)? Raises nothing: see :meth:`failed`."""
        if self.durable_gen >= target:
            return True
        # nothing left to write and no commit being written: each record is on disk or
        # resolved (a commit still being written may hold some: not yet)
        return not self._unwritten and not self.in_flight

    def failed(self, target: int) -> bool:
        """Did the commit meant to write them fail (``error`` says why)?"""
        return self.failed_gen >= target and self.durable_gen < target

    # -- what the producer reports ------------------------------------------------------------

    def waiting(self) -> bool:
        """Is anything waiting to be written (a record, a delete, or a commit to succeed
        after one failed)?"""
        return bool(self._unwritten or self._deletes or self._marks) or self.error is not None

    def report(self) -> RecoveryReport:
        """What became of the recovered records so far."""
        return RecoveryReport(
            self.recovered,
            self.recovered_ok,
            self.recovered_failed,
            self.damaged,
            # not done while reading, nor when the close kept some (they end next time)
            not self.reading and self.recovered_ok + self.recovered_failed == self.recovered,
            self.dead_letters,
        )
