"""Dead letters: the failed records waiting for ``Producer.failures()``.

:class:`FailureBuffer` (pure, no awaits) is the one place that decides what happens to a
failed record when nobody takes it: it is kept while the buffer holds fewer than
``max_records`` records and ``max_bytes`` bytes of data, else it is dropped and counted. The
record dropped is always the newest one, the one being offered:

- what the buffer holds is promised: a record once kept is delivered, so a consumer that
  falls behind reads the failures in the order they happened, from the first on (the
  first failures usually name the cause);
- the decision is taken once, when the record fails, so the count and the log say which
  stream the dropped records were for, at the time they failed.

With a spool, a failed record may come with a ticket: the spool keeps it as a dead letter
until it leaves the buffer, taken or dropped; the feed then gives the ticket back
(:meth:`FailureFeed.settle`), for a ``SyncProducer`` once ``on_failure`` has returned.

When to log the drops is decided here too (:meth:`FailureBuffer.notice`): at the first drop,
then at most once per ``notice_interval`` seconds, with the count since the last notice.

:class:`FailureFeed` is the producer's side of it: fed by the pipeline from the ledger (the
one place outcomes resolve), it offers each record to its buffer, logs and counts the drops,
and wakes the iterators ``Producer.failures()`` returns; they end once the producer has
closed (:meth:`FailureFeed.close`) and the buffer is empty.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, NamedTuple

import anyio
import anyio.lowlevel

from ._logging import get_logger
from ._outcome import RecordResult

if TYPE_CHECKING:
    from .metrics._recorder import Metrics

__all__ = ["FailedRecord", "FailureBuffer", "FailureFeed"]

_log = get_logger("kinesis_trio.producer")


class FailedRecord(NamedTuple):
    """A record that failed for good, with what is needed to send it again (immutable).

    ``data``, ``partition_key`` and ``explicit_hash_key`` are the record as it was put (a
    partition key the producer gave a keyless record is shown); ``stream_name`` is the
    stream it was put to (its name, also when it was addressed by ARN); ``result`` is its
    :class:`~kinesis_trio.RecordResult`, with the error and the whole attempt history.
    """

    data: bytes
    partition_key: str | None
    explicit_hash_key: str | None
    stream_name: str
    result: RecordResult


class FailureBuffer:
    """A bounded FIFO of failed records; when full, the newest one is dropped and counted."""

    __slots__ = (
        "_next_notice",
        "_queue",
        "_unreported",
        "bytes",
        "dropped",
        "max_bytes",
        "max_records",
        "notice_interval",
    )

    def __init__(self, max_records: int, max_bytes: int, notice_interval: float = 60.0) -> None:
        if max_records < 1 or max_bytes < 1:
            raise ValueError("a FailureBuffer needs room for at least one record and one byte")
        self.max_records = max_records
        self.max_bytes = max_bytes
        self.notice_interval = notice_interval
        self._queue: deque[tuple[FailedRecord, int]] = deque()  # each with its ticket
        #: data bytes of the records held
        self.bytes = 0
        #: records dropped since the buffer was made (full when they failed)
        self.dropped = 0
        self._unreported: dict[str, int] = {}  # dropped since the last notice, by stream
        self._next_notice = -math.inf

    def __len__(self) -> int:
        return len(self._queue)

    def offer(self, record: FailedRecord, ticket: int = 0) -> bool:
        """Keep ``record`` (and its spool ``ticket``) if there is room (True); else drop it
        and count it (False).

        A record larger than ``max_bytes`` on its own is kept when the buffer is empty: the
        bound is never passed by more than one record.
        """
        size = len(record.data)
        queue = self._queue
        if queue and (len(queue) >= self.max_records or self.bytes + size > self.max_bytes):
            self.dropped += 1
            stream = record.stream_name
            self._unreported[stream] = self._unreported.get(stream, 0) + 1
            return False
        queue.append((record, ticket))
        self.bytes += size
        return True

    def take(self) -> FailedRecord | None:
        """The oldest record kept (it leaves the buffer), or ``None`` if there is none."""
        entry = self.take_entry()
        return None if entry is None else entry[0]

    def take_entry(self) -> tuple[FailedRecord, int] | None:
        """The oldest record kept and its ticket (it leaves the buffer), or ``None``."""
        if not self._queue:
            return None
        entry = self._queue.popleft()
        self.bytes -= len(entry[0].data)
        return entry

    def notice(self, now: float, *, final: bool = False) -> dict[str, int]:
        """The drops to log now, by stream (empty: nothing to log yet). Due at the first
        drop, then at most once per ``notice_interval``; ``final`` (the producer closed):
        whatever is left unreported."""
        if not self._unreported or (now < self._next_notice and not final):
            return {}
        report, self._unreported = self._unreported, {}
        self._next_notice = now + self.notice_interval
        return report


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
        """Tickets go back to the spool through ``release`` (``SpoolBook.release``)."""
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
