"""The producer's side of its dead letters: :class:`FailureFeed`, fed by the pipeline from
the ledger (the one place outcomes resolve), offers each record to its pure
:class:`~kinesis_trio._dead_letters.FailureBuffer`, logs and counts the drops, gives a
spool ticket back once its record left the buffer (:meth:`FailureFeed.settle`: for a
``SyncProducer`` once ``on_failure`` has returned), and wakes the iterators
``Producer.failures()`` returns; they end once the producer has closed
(:meth:`FailureFeed.close`) and the buffer is empty.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import anyio
import anyio.lowlevel

from .._dead_letters import FailedRecord, FailureBuffer
from .._logging import get_logger

if TYPE_CHECKING:
    from ..metrics._recorder import Metrics

__all__ = ["FailureFeed"]

_log = get_logger("kinesis_trio.producer")


class FailureFeed:
    """A producer's dead letters: its :class:`FailureBuffer`, the wake-up of the iterators
    waiting on it, the drop log and metric, and whether the producer has closed."""

    __slots__ = ("_closed", "_event", "_measure", "_metrics", "_release", "buffer")

    def __init__(self, max_records: int, max_bytes: int, metrics: Metrics) -> None:
        self.buffer = FailureBuffer(max_records, max_bytes)
        self._metrics = metrics
        self._measure = metrics.enabled
        self._event: anyio.Event | None = None  # set (and dropped) when a record is kept
        self._closed = False
        #: gives a dead letter's ticket back to the spool (it may leave it): see settle
        self._release: Callable[[int], None] | None = None

    def use_spool(self, release: Callable[[int], None]) -> None:
        """Tickets go back to the spool through ``release`` (``Spooling.release``)."""
        self._release = release

    def settle(self, ticket: int) -> None:
        """The record of ``ticket`` left the buffer for good (taken and handled, or
        dropped): the spool may let its dead letter go."""
        if ticket and self._release is not None:
            self._release(ticket)

    @property
    def dropped(self) -> int:
        """Failed records dropped because the buffer was full."""
        return self.buffer.dropped

    def failed(
        self, records: list[FailedRecord], now: float, tickets: list[int] | None = None
    ) -> None:
        """The pipeline's ``on_failed``: offer each record that failed now to the buffer
        (with its spool ticket, if any: a dropped one's goes back at once)."""
        buffer = self.buffer
        kept = False
        dropped: dict[str, int] = {}
        for i, record in enumerate(records):
            ticket = tickets[i] if tickets else 0
            if buffer.offer(record, ticket):
                kept = True
            else:
                dropped[record.stream_name] = dropped.get(record.stream_name, 0) + 1
                self.settle(ticket)
        if dropped:
            if self._measure:
                for stream, count in dropped.items():
                    self._metrics.failed_records_dropped(stream, count)
            self._log_dropped(now)
        if kept:
            self._wake()

    def close(self, now: float) -> None:
        """The producer has closed: log the drops not logged yet; the iterators end once
        they have taken what is left."""
        self._closed = True
        self._log_dropped(now, final=True)
        self._wake()

    def _log_dropped(self, now: float, *, final: bool = False) -> None:
        for stream, count in self.buffer.notice(now, final=final).items():
            _log.warning(
                "failed_records_dropped",
                stream=stream,
                records=count,
                dropped_total=self.buffer.dropped,
                reason="the failures() buffer was full (failures_buffer_records / "
                "failures_buffer_bytes): they were not taken in time",
            )

    def _wake(self) -> None:
        event = self._event
        if event is not None:
            self._event = None
            event.set()

    def iterator(self) -> _FailureIterator:
        """An iterator over the records kept (any number share the buffer)."""
        return _FailureIterator(self)

    async def next(self) -> FailedRecord:
        """The oldest record kept, waiting for one; ``StopAsyncIteration`` once closed and
        empty. A checkpoint; cancelling it loses no record. Taken, it is settled."""
        record, ticket = await self.next_entry()
        self.settle(ticket)
        return record

    async def next_entry(self) -> tuple[FailedRecord, int]:
        """As :meth:`next`, with the record's ticket, not settled: the caller settles it
        once it has handled the record (``SyncProducer``: ``on_failure`` returned)."""
        while True:
            await anyio.lowlevel.checkpoint()
            entry = self.buffer.take_entry()
            if entry is not None:
                return entry
            if self._closed:
                raise StopAsyncIteration
            event = self._event
            if event is None:
                event = self._event = anyio.Event()
            await event.wait()


class _FailureIterator:
    """What :meth:`FailureFeed.iterator` returns: takes from the shared feed."""

    __slots__ = ("_feed",)

    def __init__(self, feed: FailureFeed) -> None:
        self._feed = feed

    def __aiter__(self) -> _FailureIterator:
        return self

    async def __anext__(self) -> FailedRecord:
        return await self._feed.next()
