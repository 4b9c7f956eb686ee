"""The engine's part for the spool (``spool_dir``): the book it owns, what the spooler tells
it and what it asks (pure, no awaits).

The :class:`~kinesis_trio._core._spool.SpoolBook` changes from the core only: the engine
adds the records it accepts, the ledger's resolutions take them out, and the spooler
(``_shell._spooler``, which runs the commits and the recovery off the event loop) says what
came of them through these methods: this part is the spooler's door to the engine
(``Engine.spooling``). A commit that ends is progress (the outbox's: room freed, or
``put`` refused from now); the spooler's writer reads when the next commit is due
(:meth:`Spooling.due_at`) and looks again at least every ``spool_interval``.
"""

from __future__ import annotations

from collections.abc import Sequence

from .._config import ProducerConfig
from ._effects import Outbox
from ._ledger import Ledger
from ._spool import Commit, RecoveryReport, Row, SpoolBook

__all__ = ["Spooling"]


class Spooling:
    """The spool's book, as the spooler drives it through the engine."""

    __slots__ = ("book", "config", "ledger", "outbox")

    def __init__(self, config: ProducerConfig, ledger: Ledger, outbox: Outbox) -> None:
        self.config = config
        self.ledger = ledger
        self.outbox = outbox
        #: the book: an empty one (nothing to write, nothing recovered) until the spool opens
        self.book = SpoolBook(config.spool_max_bytes, config.spool_sync, config.spool_interval)

    def open(self, next_id: int, on_disk: int, lost: int, reading: bool) -> SpoolBook:
        """The spool opened: ``next_id`` the next row's id, ``on_disk`` the bytes of its
        records, ``lost`` the records the store could not find, ``reading``: it holds
        records to recover (new ones wait until they are read back)."""
        config = self.config
        book = self.book = SpoolBook(
            config.spool_max_bytes,
            config.spool_sync,
            config.spool_interval,
            next_id=next_id,
            on_disk=on_disk,
        )
        book.lost(lost)
        book.recovering(reading)
        self.ledger.use_spool(book)
        return book

    # -- the writer ------------------------------------------------------------------------

    def due_at(self) -> float:
        """When the next commit should run (``-inf``: now; ``inf``: nothing to write)."""
        return self.book.due_at()

    def waiting(self) -> bool:
        """Is anything waiting to be written (a record, a delete, a failed commit's)?"""
        return self.book.waiting()

    def commit(self, now: float) -> Commit | None:
        """The next commit to run (its rows count as on disk from now), or ``None``."""
        return self.book.take(now)

    def written(self, commit: Commit, error: str | None) -> None:
        """``commit`` ran: written (``error`` None), or not (why): progress either way."""
        book = self.book
        if error is None:
            book.committed(commit)
        else:
            book.commit_failed(commit, error)
        self.outbox.progressed()

    def failed_commits(self) -> int:
        """How many commits have failed so far (the last one's number)."""
        return self.book.failed_gen

    def error(self) -> str | None:
        """Why the last commit failed (``None``: it did not)."""
        return self.book.error

    # -- durability ------------------------------------------------------------------------

    def sync_on_put(self) -> bool:
        """Does ``put`` return only once its record is on disk (``spool_sync="put"``)?"""
        return self.config.spool_sync == "put"

    def target(self) -> int:
        """The commit that writes the records accepted so far (:meth:`durable`)."""
        return self.book.target()

    def durable(self, target: int) -> bool:
        """Are the records accepted before ``target`` was taken on disk (or resolved)?"""
        return self.book.durable(target)

    def failed(self, target: int) -> bool:
        """Did the commit meant to write them fail (:meth:`error` says why)?"""
        return self.book.failed(target)

    # -- recovery --------------------------------------------------------------------------

    def to_recover(self) -> bool:
        """Does the spool hold records to read back, or damage to report?"""
        book = self.book
        return book.reading or bool(book.damaged)

    def damaged(self, row_id: int, size: int) -> None:
        """A record that could not be read back intact: counted, and deleted."""
        self.book.skip_damaged(row_id, size)

    def dead_letter(self, row_id: int, size: int) -> int:
        """A dead letter read back (to ``failures()`` again); returns its ticket."""
        return self.book.add_dead(row_id, size)

    def read_back(self) -> None:
        """Recovery has read the whole spool back: new records may come (progress)."""
        self.book.recovering(False)
        self.outbox.progressed()

    def release(self, ticket: int) -> None:
        """The dead letter ``ticket`` was taken: it leaves the spool in a coming commit."""
        self.book.release(ticket)

    def keep_queued(self, rows: Sequence[Row], sizes: Sequence[int], now: float) -> int:
        """As the producer closes: records it never accepted (a ``SyncProducer``'s queue)
        stay in the spool for the next producer, in order while there is room; how many."""
        return self.book.keep_queued(rows, sizes, now)

    def report(self) -> RecoveryReport:
        """What became of the recovered records so far."""
        return self.book.report()
