"""Dead letters: the failed records waiting for ``Producer.failures()`` (pure, no awaits).

:class:`FailureBuffer` is the one place that decides what happens to a failed record when
nobody takes it: it is kept while the buffer holds fewer than ``max_records`` records and
``max_bytes`` bytes of data, else it is dropped and counted. The record dropped is always
the newest one, the one being offered:

- what the buffer holds is promised: a record once kept is delivered, so a consumer that
  falls behind reads the failures in the order they happened, from the first on (the
  first failures usually name the cause);
- the decision is taken once, when the record fails, so the count and the log say which
  stream the dropped records were for, at the time they failed.

With a spool, a failed record may come with a ticket: the spool keeps it as a dead letter
until it leaves the buffer, taken or dropped (the shell's feed gives the ticket back).

When to log the drops is decided here too (:meth:`FailureBuffer.notice`): at the first drop,
then at most once per ``notice_interval`` seconds, with the count since the last notice.
The async side, waking the iterators of ``Producer.failures()``, is the shell's
(``_shell._failure_feed``).
"""

from __future__ import annotations

import math
from collections import deque
from typing import NamedTuple

from ._results import RecordResult

__all__ = ["FailedRecord", "FailureBuffer"]


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
