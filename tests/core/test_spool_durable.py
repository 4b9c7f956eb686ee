"""``SpoolBook.durable``: records are durable once their commit is written, not when taken.

Found by the kill tests (``tests/emulators/test_spool_kills.py``): under
``spool_sync="interval"``, ``wait_durable()`` called while the periodic commit holding every
record so far was still being written returned at once, and a kill a moment later lost
records it had promised.
"""

from __future__ import annotations

from kinesis_trio import Outcome
from kinesis_trio._core._spool import SpoolBook


def _add(book: SpoolBook, n: int) -> list[Outcome]:
    outcomes = []
    for i in range(n):
        data = b"r%d" % i
        outcome = Outcome(data, "k", None, 0, len(data) + 1, 0.0, "s", 0)
        book.add(outcome, "s", data, "k", None, len(data) + 1, 0.0)
        outcomes.append(outcome)
    return outcomes


def test_records_of_the_commit_being_written_are_not_durable_yet() -> None:
    book = SpoolBook(1 << 20, "interval", 0.2)
    _add(book, 3)
    commit = book.take(0.2)  # the periodic commit takes them; its write has not ended
    assert commit is not None and len(commit.inserts) == 3
    target = book.target()  # wait_durable() now
    assert not book.durable(target)
    book.committed(commit)
    assert book.durable(target)


def test_records_accepted_during_a_commit_wait_for_the_next() -> None:
    book = SpoolBook(1 << 20, "interval", 0.2)
    _add(book, 2)
    first = book.take(0.2)
    assert first is not None
    _add(book, 1)
    target = book.target()
    book.committed(first)
    assert not book.durable(target)  # the last record is not written yet
    second = book.take(0.4)
    assert second is not None and len(second.inserts) == 1
    assert not book.durable(target)
    book.committed(second)
    assert book.durable(target)


def test_records_resolved_before_any_commit_need_none() -> None:
    book = SpoolBook(1 << 20, "interval", 0.2)
    outcomes = _add(book, 2)
    book.done(outcomes, True)
    assert book.durable(book.target())
