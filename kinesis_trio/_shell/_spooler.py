"""The spooler: the producer's tasks around its spool (``ProducerConfig.spool_dir``).

It moves bytes and time around the spool's book, which the engine owns (its door for the
spooler, ``Engine.spooling``: ``_core._spooling``), and does the disk I/O in a worker thread
(``_disk._store``), one call at a time, never on the event loop:

- **the writer** commits what the engine says is waiting: at once when a caller waits for
  durability (``put`` with ``spool_sync="put"``, ``wait_durable()``), else every
  ``spool_interval``; each commit is shielded (a cancelled producer still learns whether
  it was written);
- **recovery** reads the records a dead process left, in id order and in chunks (never the
  whole spool in memory), and accepts them before any new record; the dead letters among
  them go to ``failures()`` again (:meth:`Spooler.release` lets one go once taken);
- **closing** writes what is left (the records kept for the next producer included, and
  those a ``SyncProducer`` still had queued: ``keep``),
  closes the database and lets the lock go; a forked child only lets go of the lock, and
  its copy of the writer commits nothing.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Awaitable, Callable, Sequence
from typing import TypeVar

import anyio
import anyio.abc
import anyio.lowlevel
import anyio.to_thread

from .._config import ProducerConfig
from .._core import Commit, Engine, NoRoom, RecoveryReport, Row, StreamState, dead_letter
from .._dead_letters import FailedRecord
from .._disk._store import Damage, Dead, SpoolStore
from .._errors import (
    CredentialsError,
    KinesisError,
    ProducerClosedError,
    SpoolWriteError,
    TransportError,
)
from .._logging import get_logger
from .._results import PRECEDING_FAILED
from ._outcome import Outcome

__all__ = ["Spooler"]

_log = get_logger("kinesis_trio.spool")

#: Records read back per chunk during recovery.
_CHUNK = 500
#: Bound on the last commit when the producer closes.
_CLOSE_COMMIT_TIMEOUT = 30.0
#: Recovery: how long to wait before loading a stream again after a transient error.
_LOAD_RETRY = 1.0


_T = TypeVar("_T")


async def _in_thread(call: Callable[..., _T], *args: object) -> _T:
    """``call(*args)``, a store call (blocking I/O), in a worker thread: the one way the
    spooler reaches the disk (the seam where a test's virtual clock waits for the disk:
    ``tests/support/clock.py``)."""
    return await anyio.to_thread.run_sync(call, *args)


def _why(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"[:300]


class Spooler:
    """The spool's writer, recovery and closing, for one producer."""

    def __init__(
        self,
        config: ProducerConfig,
        engine: Engine[Outcome],
        now: Callable[[], float],
        progress: Callable[[], None],
        wait_progress: Callable[[], Awaitable[None]],
        apply: Callable[[], None],
        store: SpoolStore | None = None,
        dead_letters: Callable[[list[FailedRecord], float, list[int] | None], None] | None = None,
    ) -> None:
        assert config.spool_dir is not None
        self.config = config
        self.engine = engine
        #: the engine's door for the spool: its book, told what came of commits and recovery
        self.spooling = engine.spooling
        self.now = now
        self.progress = progress
        self.wait_progress = wait_progress
        #: carries out what the engine asked for (a batch to send, a linger timer, dead letters)
        self.apply = apply
        #: hands dead letters read back to ``failures()`` again (``FailureFeed.failed``)
        self.dead_letters = dead_letters
        self.store = store or SpoolStore(config.spool_dir)
        self._wake = anyio.Event()
        self._written = anyio.Event()
        self._open = False
        #: the close's last commit has run and the store is closed: nothing is written now
        self._closed = False
        #: per-key ordering: (stream, key) of the recovered records that failed at
        #: recovery, and why the key's later recovered ones fail
        self._broken: dict[tuple[str, str | None], str] = {}
        #: recovery has said how it ended (its log line, its metrics), or there is none
        self._reported = True
        #: in a forked child: the spool and its commits are the parent's
        self._abandoned = False

    # -- opening -------------------------------------------------------------------------------

    async def open(self) -> None:
        """Lock and open the spool (``SpoolLockedError``, ``SpoolFormatError``), and tell
        the engine what it holds."""
        stats = await _in_thread(self.store.open)
        self._open = True
        config = self.config
        self.engine.open_spool(stats.next_id, stats.bytes, stats.damaged, stats.records > 0)
        _log.info(
            "spool_opened",
            path=self.store.path,
            records=stats.records,
            bytes=stats.bytes,
            sync=config.spool_sync,
        )

    def start(self, tg: anyio.abc.TaskGroup, load: Callable[[str], Awaitable[StreamState]]) -> None:
        """Start the writer, and recovery if the spool holds records."""
        tg.start_soon(self._writer)
        if self.spooling.to_recover():  # (damage alone is reported too)
            self._reported = False
            tg.start_soon(self._recover, load)

    # -- writing -------------------------------------------------------------------------------

    async def _writer(self) -> None:
        """Commit when the engine says a commit is due (``Spooling.due_at``), or at
        once when a caller waits for durability; look again at least every
        ``spool_interval``."""
        spooling, interval = self.spooling, self.config.spool_interval
        while True:
            # a cancel (the producer's exit) reaches it at every turn, even when a commit
            # is due at once after another (each one's wait for the disk is shielded)
            await anyio.lowlevel.checkpoint_if_cancelled()
            delay = min(max(spooling.due_at() - self.now(), 0.0), interval)
            if delay > 0:
                with anyio.move_on_after(delay):
                    await self._wake.wait()
            # asked: by the event, not by how the wait ended (a wait for durability that
            # set it in the turn the delay ran out would be lost with the event replaced)
            asked = self._wake.is_set()
            self._wake = anyio.Event()
            if self._abandoned:  # a forked child's copy: the commit due is the parent's
                return
            if asked or spooling.due_at() <= self.now():
                if spooling.waiting():
                    await self._commit()
                else:
                    self._signal()
            else:
                await anyio.lowlevel.checkpoint()

    async def _commit(self) -> None:
        """Write what waits, in one transaction, off the event loop (shielded: a commit
        that started is seen through)."""
        spooling = self.spooling
        commit = spooling.commit(self.now())
        if commit is None:
            return
        with anyio.CancelScope(shield=True):
            error = await _in_thread(self._run, commit)
        spooling.written(commit, error)  # progress: room freed, or puts refused from now
        if error is not None:
            _log.error(
                "spool_write_failed",
                path=self.store.path,
                records=len(commit.inserts),
                error=error,
            )
        self._signal()
        self.apply()

    def _signal(self) -> None:
        """Wake whoever waits for durability (to look again)."""
        written, self._written = self._written, anyio.Event()
        written.set()

    def _run(self, commit: Commit) -> str | None:
        """In the worker thread: the commit, or why it failed (a full disk, an I/O error)."""
        try:
            self.store.commit(commit)
        except (sqlite3.Error, OSError) as exc:
            return _why(exc)
        return None

    async def durable(self, outcome: Outcome) -> Outcome:
        """Wait until ``outcome``'s record (just accepted) is in the spool, or resolved, and
        return it; ``SpoolWriteError`` (carrying the outcome) if the write failed."""
        await self._wait(self.spooling.target(), outcome)
        return outcome

    async def durable_many(self, outcomes: list[Outcome]) -> list[Outcome]:
        """:meth:`durable` for a batch (``put_many``): wait until its records are in the
        spool (or all resolved) and return them; ``SpoolWriteError`` (its ``outcome``: the
        list of the batch's outcomes) if the write failed."""
        target = self.spooling.target()
        while not all(o.done() for o in outcomes):
            try:
                if self._answer(target, None):
                    break
            except SpoolWriteError as exc:
                raise SpoolWriteError(
                    "the records were accepted and will be sent, but writing them to the "
                    f"spool failed: they are not durable ({exc})",
                    outcomes,
                ) from None
            written = self._written
            self._wake.set()
            await written.wait()
        return outcomes

    async def wait_durable(self) -> None:
        """Wait until every record accepted before the call is in the spool (or resolved)."""
        await self._wait(self.spooling.target(), None)

    async def _wait(self, target: int, outcome: Outcome | None) -> None:
        while not self._answer(target, outcome):
            written = self._written
            self._wake.set()
            await written.wait()

    def _answer(self, target: int, outcome: Outcome | None) -> bool:
        """Are the records accepted before ``target`` was taken in the spool (or
        ``outcome`` resolved)? ``SpoolWriteError`` if the commit meant to write them failed,
        or the producer closed with them unwritten; ``False``: not yet."""
        spooling = self.spooling
        if spooling.durable(target) or (outcome is not None and outcome.done()):
            return True
        error = spooling.error()
        if spooling.failed(target):
            if outcome is None:
                raise SpoolWriteError(f"writing to the spool failed ({error})")
            raise SpoolWriteError(
                "the record was accepted and will be sent, but writing it to the spool "
                f"failed ({error}): it is not durable",
                outcome,
            )
        if self._closed:  # no writer any more: what is unwritten stays so
            why = f" ({error})" if error else ""
            raise SpoolWriteError(
                "the producer is closed and its last commit did not write every record "
                f"to the spool{why}: they are not durable",
                outcome,
            )
        return False

    def closed_error(self) -> SpoolWriteError | None:
        """After the close: what a wait for durability gets (``None``: every record
        accepted is in the spool, or resolved)."""
        try:
            self._answer(self.spooling.target(), None)
        except SpoolWriteError as exc:
            return exc
        return None

    # -- recovery ------------------------------------------------------------------------------

    async def _recover(self, load: Callable[[str], Awaitable[StreamState]]) -> None:
        """Accept the records the spool holds, in id order, before any new one; then wait
        for their outcomes, and say how they ended (a log line, the metrics)."""
        engine, store = self.engine, self.store
        _log.info("spool_recovery_started", path=store.path)
        try:
            await self._read_back(load)
            while not self.spooling.report().done:
                await self.wait_progress()
        except ProducerClosedError:
            # the producer closes (a clean exit too): recovery ends here; the records it
            # did not accept stay in the spool, the next producer sends them
            return
        report = self.spooling.report()
        engine.recovery_ended(report)
        _log.info(
            "spool_recovered",
            path=store.path,
            records=report.records,
            ok=report.ok,
            failed=report.failed,
            damaged=report.damaged,
        )
        self._reported = True
        self.progress()  # recovered() returns now

    async def _read_back(self, load: Callable[[str], Awaitable[StreamState]]) -> None:
        """Accept the spool's records in id order, a chunk at a time, until it is all read
        (``ProducerClosedError``: the producer closes first)."""
        spooling, store = self.spooling, self.store
        after = 0
        while True:
            items = await _in_thread(store.read, after, _CHUNK)
            if not items:
                break
            for item in items:
                if isinstance(item, Damage):
                    _log.error("spool_record_damaged", path=store.path, id=item.id, reason=item.why)
                    spooling.damaged(item.id, item.size)
                    after = max(after, item.id)
                    continue
                if isinstance(item, Dead):  # not sent: to failures() again
                    after = item.row.id
                    ticket = spooling.dead_letter(item.row.id, item.size)
                    if self.dead_letters is not None:
                        now = self.now()
                        failed = dead_letter(item.row, item.code, item.message, now)
                        self.dead_letters([failed], now, [ticket])
                    continue
                row, size = item
                after = row.id
                await self._accept(row, size, load)
        spooling.read_back()  # new records may come now (progress)
        self.apply()

    async def _accept(
        self, row: Row, size: int, load: Callable[[str], Awaitable[StreamState]]
    ) -> None:
        engine = self.engine
        while True:
            try:
                stream = await load(row.stream)
            except (KinesisError, TransportError, CredentialsError) as exc:
                # an answer that will not change (the stream is gone, access is denied, the
                # request is invalid) fails them for good; the network's, the credentials'
                # and the service's passing errors are retried
                if isinstance(exc, KinesisError) and not exc.retryable:
                    self._fail(row, size, exc.code, _why(exc))
                    return
                _log.warning("spool_recovery_waits", stream=row.stream, error=_why(exc))
                await anyio.sleep(_LOAD_RETRY)
                continue
            except ValueError as exc:  # a stream per-key ordering refuses, a bad ARN
                self._fail(row, size, "RecoveryRefused", _why(exc))
                return
            broken = self._broken.get((row.stream, row.partition_key))
            if broken is not None:
                self._fail(row, size, PRECEDING_FAILED, broken)
                return
            try:
                engine.accept(
                    stream, row.data, row.partition_key, row.explicit_hash_key, self.now(), row
                )
            except NoRoom:
                await self.wait_progress()
                continue
            except (ValueError, TypeError) as exc:  # a limit it breaks now
                self._fail(row, size, "RecoveryRefused", _why(exc))
                return
            self.apply()  # as put does: else a recovered record waits for the next put
            return

    def _fail(self, row: Row, size: int, code: str, why: str) -> None:
        """A recovered record fails for good at recovery (``failures()``). Under per-key
        ordering, so do its key's later recovered records, which were put after it: a
        consumer must never see them after the gap it leaves (``_ordering``'s rule)."""
        self.engine.fail_recovered(row, size, code, why, self.now())
        self.apply()
        key = (row.stream, row.partition_key)
        if self.config.ordering == "per_key" and row.partition_key is not None:
            self._broken.setdefault(
                key,
                f"an earlier record with partition key {row.partition_key!r} read back from "
                f"the spool failed at recovery ({code}); with ordering='per_key' the records "
                "put after it fail too",
            )

    def report(self) -> RecoveryReport:
        """What became of the recovered records so far."""
        return self.spooling.report()

    def release(self, ticket: int) -> None:
        """A dead letter was taken (or dropped by the failures buffer): it leaves the
        spool in a coming commit (while the spool is open: after the close, the next
        producer hands it to ``failures()`` again)."""
        self.spooling.release(ticket)

    async def recovered(self) -> RecoveryReport:
        """Wait until every recovered record has its outcome (and the log line and the
        metrics say so), or the producer closes; what became of them."""
        while not self._reported:
            await self.wait_progress()
        return self.spooling.report()

    # -- closing -------------------------------------------------------------------------------

    def error(self) -> str | None:
        """Why the spool's last commit failed (``None``: it did not)."""
        return self.spooling.error()

    def sync_on_put(self) -> bool:
        """Does ``put`` return only once its record is on disk?"""
        return self.spooling.sync_on_put()

    def keep(self, rows: Sequence[Row], sizes: Sequence[int]) -> int:
        """As the producer closes, before its last commit: records it never accepted but
        that were accepted from their caller's side (``SyncProducer``'s queue) stay in the
        spool for the next producer, in order while there is room (``Spooling.keep_queued``);
        how many. ``closed_error()`` says afterwards whether the last commit wrote them."""
        if not self._open:
            return 0
        return self.spooling.keep_queued(rows, sizes, self.now())

    async def close(self) -> None:
        """The last commit (what is left, the kept records included), then close the
        store and let the lock go. Shielded and bounded."""
        if not self._open:
            return
        self._open = False
        if not self._reported:  # a recovery cut short: recovered() says how far it got
            self._reported = True
            self.progress()
        with anyio.CancelScope(shield=True):
            with anyio.move_on_after(_CLOSE_COMMIT_TIMEOUT):
                spooling = self.spooling
                while spooling.waiting():
                    before = spooling.failed_commits()
                    await self._commit()
                    if spooling.failed_commits() != before:
                        break
            await _in_thread(self.store.close)
        self._closed = True
        self._signal()  # whoever still waits for durability: answered now
        if self.spooling.waiting():
            error = self.spooling.error()
            _log.error("spool_close_unwritten", path=self.store.path, error=error)

    def abandon(self) -> None:
        """In a forked child: let go of the spool (the parent owns it, and writes what
        waits for a commit: the writer's copy here ends at its next turn)."""
        self._open = False
        self._abandoned = True
        self.store.abandon()
