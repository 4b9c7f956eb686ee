"""The spool's book and dead letters (pure): a record failed for good stays in the spool,
marked, until it is released (taken, or dropped by the failures buffer)."""

from __future__ import annotations

from kinesis_trio._core._spool import SpoolBook
from tests.core.test_spool_book import add, book, take


def test_a_written_record_failed_for_good_is_marked_not_deleted_until_released() -> None:
    b = book(max_bytes=100)
    ok, bad = add(b, b"ok"), add(b, b"bad")
    b.committed(take(b))
    b.done([ok], ok=True)
    tickets = b.dead([bad], "InvalidArgumentException", "no")
    assert tickets == {bad: 2}
    assert b.bytes == 3  # ok's 3 bytes until its delete commits; bad takes no room now
    commit = take(b, now=1.0)
    assert commit.deletes == [1] and list(commit.marks) == [(2, "InvalidArgumentException", "no")]
    assert list(commit.unmarks) == []
    b.committed(commit)
    assert b.bytes == 0 and not b.waiting()  # nothing to write while nobody takes it
    b.release(2)
    b.release(2)  # once only
    last = take(b, now=2.0)
    assert (last.deletes, list(last.unmarks), last.freed) == ([2], [2], 0)
    b.committed(last)
    assert b.bytes == 0 and not b.waiting()


def test_a_record_failed_before_it_was_written_is_never_written() -> None:
    b = book()
    bad = add(b, b"bad")
    assert b.dead([bad], "E", "m") == {}
    assert b.take(0.0) is None and b.bytes == 0


def test_marks_are_due_as_deletes_are_and_written_again_after_a_failed_commit() -> None:
    b = book(sync="put", interval=0.2)
    bad = add(b, b"bad")
    b.committed(take(b, now=0.0))
    b.dead([bad], "E", "m")
    assert b.due_at() == 0.2  # like deletes: the interval after the last commit, even under put
    failed = take(b, now=0.2)
    b.commit_failed(failed, "disk full")
    again = take(b, now=0.4)
    assert list(again.marks) == [(1, "E", "m")]
    b.committed(again)
    b.release(1)
    b.commit_failed(take(b, now=0.6), "disk full")
    last = take(b, now=0.8)
    assert list(last.marks) == [] and list(last.unmarks) == [1] and last.deletes == [1]


def test_a_dead_letter_read_back_takes_no_room_and_is_counted() -> None:
    b = SpoolBook(100, "interval", 0.2, next_id=10, on_disk=30)
    b.recovering(True)
    assert b.add_dead(3, 20) == 3
    b.recovering(False)
    assert b.bytes == 10
    report = b.report()
    assert (report.records, report.dead_letters, report.done) == (0, 1, True)
    b.release(3)
    commit = take(b)
    assert (commit.deletes, list(commit.unmarks)) == ([3], [3])
