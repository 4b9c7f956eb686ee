"""The spool's book (pure): what is written when, what leaves, room, failed writes, recovery."""

from __future__ import annotations

import math
from collections.abc import Iterable

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from kinesis_trio import Outcome
from kinesis_trio._core._spool import Commit, RecoveryReport, Row, SpoolBook
from tests.support.engine import outcome

INF = math.inf
ARN = "arn:aws:kinesis:us-east-1:123456789012:stream/s"


def book(sync: str = "interval", max_bytes: int = 1000, interval: float = 0.2) -> SpoolBook:
    return SpoolBook(max_bytes, sync, interval)


def add(b: SpoolBook, data: bytes, key: str = "k", now: float = 0.0) -> Outcome:
    o = outcome(data, key, now)
    b.add(o, "s", data, key, None, o.size, now)
    return o


def ids(rows: Iterable[Row]) -> list[int]:
    return [row.id for row in rows]


def take(b: SpoolBook, now: float = 0.0) -> Commit:
    commit = b.take(now)
    assert commit is not None
    return commit


# -- what is written, what leaves ---------------------------------------------------------------


def test_a_record_resolved_before_the_commit_is_never_written() -> None:
    b = book()
    first, second = add(b, b"12345"), add(b, b"abc")
    assert b.bytes == 6 + 4
    b.done([first], ok=True)
    assert b.bytes == 4  # its room is free at once: nothing to delete
    commit = take(b)  # ids are given as records are written: the first has none
    assert ids(commit.inserts) == [1] and commit.deletes == []
    assert list(commit.inserts) == [Row(1, "s", "k", None, b"abc")]
    assert commit.next_id == 2
    b.committed(commit)
    b.done([second], ok=False)  # written: now it must be deleted
    commit = take(b)
    assert list(commit.inserts) == [] and (commit.deletes, commit.freed) == ([1], 4)
    assert b.bytes == 4  # until the delete is on disk
    b.committed(commit)
    assert b.bytes == 0 and not b.waiting() and b.take(1.0) is None


def test_a_record_resolved_while_its_commit_runs_is_deleted_by_the_next() -> None:
    b = book()
    o = add(b, b"xy")
    commit = take(b)
    b.done([o], ok=True)
    b.committed(commit)
    assert b.bytes == 3
    last = take(b)
    assert (last.deletes, last.freed) == ([1], 3)


def test_resolving_twice_or_an_unknown_record_changes_nothing() -> None:
    b = book()
    o = add(b, b"xy")
    b.committed(take(b))
    b.done([o], ok=True)
    b.done([o], ok=True)
    b.done([outcome(b"other", "k")], ok=True)
    last = take(b)
    assert (last.deletes, last.freed) == ([1], 3)


def test_kept_records_stay_in_the_spool_and_unwritten_ones_are_written() -> None:
    b = book()
    written, waiting = add(b, b"a"), add(b, b"b")
    b.committed(take(b))
    later = add(b, b"c")
    b.kept({written, waiting, later})
    commit = take(b)
    assert ids(commit.inserts) == [3] and commit.deletes == []  # nothing leaves
    b.committed(commit)
    assert b.bytes == 6 and not b.waiting()


def test_a_record_the_last_commit_could_not_write_is_not_kept() -> None:
    """The close's last commit failed (a full disk): the records it meant to write are in
    neither the spool nor the stream; ``kept`` names them (their outcome must not say they
    stay in the spool), and keeps the others."""
    b = book()
    written = add(b, b"a")
    b.committed(take(b))
    unwritten = add(b, b"b")
    b.commit_failed(take(b), "database or disk is full")
    assert b.kept({written, unwritten}) == {unwritten}
    b.committed(take(b))
    assert b.kept({written}) == set()


def test_records_queued_at_the_close_are_kept_after_the_others_while_they_fit() -> None:
    """A SyncProducer's queue at its close: kept in order, from the first, while they fit
    once the resolved records' deletes have freed their room; none after one that does not."""
    b = book(max_bytes=14)
    written, resolved = add(b, b"aaa"), add(b, b"bbb")  # 4 bytes each with their key
    b.committed(take(b))
    b.done([resolved], ok=True)  # its delete is due: its room counts as free
    queued = [
        Row(0, "s", "k", None, b"q1"),
        Row(0, ARN, None, "7", b"q2"),
        Row(0, "s", "k", None, b"q3333"),  # 6 bytes: no room left for it
        Row(0, "s", "k", None, b"q"),  # after it: not kept either
    ]
    assert b.keep_queued(queued, [3, 2, 6, 2], now=1.0) == 2
    b.kept({written})
    commit = take(b)
    assert list(commit.inserts) == [Row(3, "s", "k", None, b"q1"), Row(4, ARN, None, "7", b"q2")]
    assert commit.deletes == [2]
    b.committed(commit)
    assert b.bytes == 4 + 3 + 2 and not b.waiting()


# -- when to write ------------------------------------------------------------------------------


def test_interval_commits_at_most_interval_after_the_first_record_that_waits() -> None:
    b = book("interval", interval=0.5)
    assert b.due_at() == INF and b.take(0.0) is None
    add(b, b"a", now=10.0)
    add(b, b"b", now=10.3)
    assert b.due_at() == 10.5  # from the first, not the last
    commit = take(b, now=10.5)
    add(b, b"c", now=10.6)  # arrives while the commit runs
    b.committed(commit)
    assert b.due_at() == 10.5 + 0.5  # waits since the commit was taken at the latest


def test_deletes_alone_wait_for_the_interval_after_the_last_commit() -> None:
    b = book("interval", interval=0.5)
    o = add(b, b"a", now=10.0)
    b.committed(take(b, now=10.5))
    assert b.due_at() == INF
    b.done([o], ok=True)  # written, then resolved: a delete waits
    assert b.due_at() == 10.5 + 0.5
    b.committed(take(b, now=11.0))
    assert b.due_at() == INF and not b.waiting()


def test_put_commits_as_soon_as_a_record_waits() -> None:
    b = book("put", interval=0.5)
    assert b.due_at() == INF
    add(b, b"a", now=10.0)
    assert b.due_at() == -INF
    b.committed(take(b, now=10.0))
    assert b.due_at() == INF


def test_after_a_failed_commit_the_retry_waits_for_the_interval_under_either_policy() -> None:
    """Before, under ``"put"`` a failed commit's records were due again at once: the writer
    tried a full disk in a loop."""
    for sync in ("put", "interval"):
        b = book(sync, interval=0.5)
        add(b, b"a", now=10.0)
        b.commit_failed(take(b, now=10.0), "database or disk is full")
        assert b.due_at() == 10.5, sync
        b.commit_failed(take(b, now=10.5), "database or disk is full")
        assert b.due_at() == 11.0, sync
        b.committed(take(b, now=11.0))
        add(b, b"b", now=11.2)
        assert b.due_at() == (-INF if sync == "put" else 11.7), sync


def test_durable_when_the_commit_taken_after_the_target_is_written() -> None:
    b = book("put")
    add(b, b"a")
    target = b.target()
    assert not b.durable(target) and not b.failed(target)
    first = take(b)
    assert not b.durable(target)  # in flight
    later = add(b, b"b")
    later_target = b.target()
    assert later_target > target
    b.committed(first)
    assert b.durable(target)
    assert not b.durable(later_target)  # its record waits for the next commit
    b.done([later], ok=True)  # resolved before being written: never will be
    assert b.durable(later_target)
    assert b.take(0.0) is None


def test_durable_waits_for_a_commit_in_flight_even_with_nothing_unwritten() -> None:
    b = book("put")
    add(b, b"a")
    target = b.target()
    commit = take(b)
    assert commit.gen == target
    assert not b.waiting() and not b.durable(target)
    b.committed(commit)
    assert b.durable(target)


def test_a_failed_commit_fails_its_waiters_and_a_later_one_clears_it() -> None:
    b = book("put")
    add(b, b"a")
    target = b.target()
    commit = take(b)
    b.commit_failed(commit, "OperationalError: database or disk is full")
    assert b.failed(target) and not b.durable(target)
    retry = take(b)
    assert ids(retry.inserts) == [1] and retry.gen > target
    b.committed(retry)
    assert b.durable(target) and not b.failed(target)


def test_a_commit_that_fails_before_a_put_does_not_fail_that_put() -> None:
    b = book("put")
    add(b, b"a")
    running = take(b)
    add(b, b"b")
    target = b.target()  # its record is not in the running commit
    b.commit_failed(running, "disk I/O error")
    assert not b.failed(target) and not b.durable(target)
    b.committed(take(b))
    assert b.durable(target)


# -- room ---------------------------------------------------------------------------------------


def test_refusal_full_too_large_recovering_and_the_last_error() -> None:
    b = book(max_bytes=10)
    assert b.refusal(10) is None
    add(b, b"123456")  # 7 bytes with its key
    assert b.refusal(3) is None
    assert b.refusal(4) == "full"
    too_large = b.refusal(11)
    assert too_large is not None and "record too large: 11 bytes" in too_large
    assert "spool_max_bytes (10)" in too_large
    b.recovering(True)
    assert b.refusal(1) == "recovering"
    b.recovering(False)
    commit = take(b)
    b.commit_failed(commit, "disk I/O error")
    assert b.refusal(1) == "disk I/O error"  # refused, even with room
    b.committed(take(b))
    assert b.refusal(1) is None


def test_room_comes_back_when_the_delete_is_on_disk() -> None:
    b = book(max_bytes=10)
    o = add(b, b"123456789")
    b.committed(take(b))
    assert b.refusal(5) == "full"
    b.done([o], ok=True)
    assert b.refusal(5) == "full"  # still on disk
    commit = take(b)
    assert b.refusal(5) == "full"  # the delete runs
    b.committed(commit)
    assert b.refusal(5) is None and b.bytes == 0


# -- failed writes ------------------------------------------------------------------------------


def test_a_failed_commit_puts_its_rows_back_in_put_order() -> None:
    b = book(max_bytes=10_000)
    old = add(b, b"old")
    b.committed(take(b))
    b.done([old], ok=True)
    members = [add(b, b"r%d" % i) for i in range(4)]  # ids 2..5
    commit = take(b)
    assert ids(commit.inserts) == [2, 3, 4, 5] and (commit.deletes, commit.freed) == ([1], 4)
    newer = add(b, b"new")  # id 6, accepted while the commit runs
    b.done([members[1]], ok=True)  # resolved while it runs: not written again
    b.commit_failed(commit, "disk I/O error")
    assert b.error == "disk I/O error"
    retry = take(b)
    assert ids(retry.inserts) == [2, 4, 5, 6]
    assert [row.data for row in retry.inserts] == [b"r0", b"r2", b"r3", b"new"]
    # the failed commit's delete goes again; the resolved member's is harmless
    assert (retry.deletes, retry.freed) == ([1, 3], 7)
    b.committed(retry)
    assert b.error is None
    assert b.bytes == sum(o.size for o in (members[0], members[2], members[3], newer))


def test_after_a_failed_commit_whose_rows_all_resolved_an_empty_commit_lets_records_in() -> None:
    b = book()
    o = add(b, b"abc")
    b.commit_failed(take(b), "disk I/O error")
    b.done([o], ok=True)
    assert b.bytes == 0
    assert b.refusal(1) == "disk I/O error"
    assert b.waiting()  # a commit must succeed before new records come in
    retry = take(b)
    assert list(retry.inserts) == [] and retry.deletes == []
    b.committed(retry)
    assert b.refusal(1) is None and not b.waiting() and b.take(0.0) is None


# -- recovery -----------------------------------------------------------------------------------


def test_recovery_counts_what_became_of_the_records_read_back() -> None:
    b = SpoolBook(1000, "interval", 0.2, next_id=10, on_disk=300)
    b.lost(2)  # the store could not find them (a damaged part of the file)
    b.recovering(True)
    assert b.refusal(1) == "recovering"
    ok, failed_one, kept = (outcome(b"x" * 99, "k") for _ in range(3))
    b.add_recovered(ok, 1)
    b.skip_damaged(2, 100)
    b.add_recovered(failed_one, 4)
    b.add_recovered(kept, 5)
    assert b.report() == RecoveryReport(3, 0, 0, 3, False)
    b.recovering(False)
    assert b.refusal(1) is None and not b.report().done
    b.done([ok], ok=True)
    b.done([failed_one], ok=False)
    assert b.report() == RecoveryReport(3, 1, 1, 3, False)
    b.kept({kept})  # the producer closes: neither ok nor failed, recovered next time
    assert b.report() == RecoveryReport(3, 1, 1, 3, False)  # not done: one has no outcome
    commit = take(b)
    assert list(commit.inserts) == [] and (commit.deletes, commit.freed) == ([2, 1, 4], 300)
    assert commit.next_id == 10  # new records go on after the old ones
    b.committed(commit)
    assert b.bytes == 0
    assert add(b, b"new") is not None and take(b).inserts[0].id == 10


def test_an_empty_recovery_is_done() -> None:
    b = book()
    assert b.report() == RecoveryReport(0, 0, 0, 0, True)
    b.recovering(True)
    assert not b.report().done
    b.recovering(False)
    assert b.report().done


# -- invariants over any sequence ---------------------------------------------------------------


class BookMachine(RuleBasedStateMachine):
    """Any interleaving of puts, resolutions, commits (written or failed) and close.

    A model follows each record (waiting to be written, or taken by a commit) and each
    delete (waiting, or in a commit): ``bytes`` is always the size of the unresolved
    records plus that of the resolved ones whose delete is not on disk yet. A model disk
    applies each written commit as the store does; once everything is committed it holds
    exactly the unresolved records (kept ones included)."""

    def __init__(self) -> None:
        super().__init__()
        self.book = SpoolBook(10**9, "interval", 0.2)
        self.live: dict[Outcome, int] = {}  # unresolved and given an id (taken)
        self.waiting: list[Outcome] = []  # unresolved, to be written: in put order
        self.fields: dict[Outcome, tuple[str, str | None, str | None, bytes]] = {}
        self.next_id = 1  # ids are given as records are taken, in put order
        self.rows: dict[int, Row] = {}  # every row ever taken, by id
        self.sizes: dict[int, int] = {}
        self.taken: set[int] = set()  # in a commit, or on disk
        self.deletes: list[int] = []  # waiting for the next commit
        self.disk: dict[int, Row] = {}
        self.running: Commit | None = None
        self.now = 0.0

    @rule(
        data=st.binary(max_size=20),
        key=st.sampled_from(["k", "ключ", "🙂"]),
        shape=st.sampled_from(["plain", "plain", "by ARN", "no key", "hash key"]),
    )
    def put(self, data: bytes, key: str, shape: str) -> None:
        stream = ARN if shape == "by ARN" else "s"
        pk = None if shape == "no key" else key
        ehk = "12345" if shape == "hash key" else None
        size = len(data) + (0 if pk is None else len(pk.encode()))
        if self.book.refusal(size) is not None:
            return
        o = Outcome(data, pk, ehk, 0, size, self.now, "s", 0)
        self.book.add(o, stream, data, pk, ehk, size, self.now)
        if pk is None:
            o.keyed("given-later", 0)  # the book keeps the key it was put with
        self.waiting.append(o)
        self.fields[o] = (stream, pk, ehk, data)

    @precondition(lambda self: self.live or self.waiting)
    @rule(pick=st.integers(0, 10**6), count=st.integers(1, 3), ok=st.booleans())
    def resolve(self, pick: int, count: int, ok: bool) -> None:
        members = list(dict.fromkeys([*self.live, *self.waiting]))
        chosen = [members[(pick + i) % len(members)] for i in range(count)]
        self.book.done(chosen, ok)
        for o in chosen:
            if o in self.waiting:  # never written: nothing to delete
                self.waiting.remove(o)
                self.live.pop(o, None)  # (its commit failed)
            elif o in self.live:
                row_id = self.live.pop(o)
                if row_id in self.taken:
                    self.deletes.append(row_id)

    @precondition(lambda self: self.running is None)
    @rule()
    def take(self) -> None:
        self.now += 0.1
        commit = self.book.take(self.now)
        if commit is None:
            assert not self.deletes and not self.waiting
            return
        expected = []
        for o in self.waiting:  # a row written again keeps its id; a new one gets the next
            row_id = self.live.get(o)
            if row_id is None:
                row_id = self.live[o] = self.next_id
                self.next_id += 1
                self.rows[row_id] = Row(row_id, *self.fields[o])
                self.sizes[row_id] = o.size
            expected.append(self.rows[row_id])
        assert list(commit.inserts) == expected  # put order, resolved ones never written
        assert commit.next_id == self.next_id
        assert commit.deletes == self.deletes
        assert commit.freed == sum(self.sizes[d] for d in commit.deletes)
        self.taken.update(ids(commit.inserts))
        self.waiting = []
        self.deletes = []
        self.running = commit

    @precondition(lambda self: self.running is not None)
    @rule(ok=st.booleans())
    def finish(self, ok: bool) -> None:
        commit = self.running
        assert commit is not None
        self.running = None
        if ok:
            for row in commit.inserts:
                self.disk[row.id] = row
            for row_id in commit.deletes:
                self.disk.pop(row_id, None)
            self.book.committed(commit)
            return
        self.book.commit_failed(commit, "disk I/O error")
        self.taken.difference_update(ids(commit.inserts))
        failed = set(ids(commit.inserts))
        again = [o for o, row_id in self.live.items() if row_id in failed]
        self.waiting = again + self.waiting  # written again first: they were put first
        self.deletes = commit.deletes + self.deletes

    @invariant()
    def bytes_are_the_unresolved_and_the_undeleted(self) -> None:
        held = list(self.deletes)
        if self.running is not None:
            held += self.running.deletes
        unresolved = {*self.live, *self.waiting}
        expected = sum(o.size for o in unresolved) + sum(self.sizes[d] for d in held)
        assert self.book.bytes == expected

    def teardown(self) -> None:
        b = self.book
        if self.running is not None:
            self.finish(True)
        b.kept({*self.live, *self.waiting})
        for _ in range(3):
            self.take()
            if self.running is None:
                break
            self.finish(True)
        assert not b.waiting()
        assert self.disk == {i: self.rows[i] for i in self.live.values()}
        assert b.bytes == sum(o.size for o in self.live)
        assert b.error is None


TestBookMachine = BookMachine.TestCase
