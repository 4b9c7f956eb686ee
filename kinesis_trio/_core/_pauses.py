"""Time the process did not run, which ``record_ttl`` does not count (pure, the time passed in).

``record_ttl`` bounds how long the producer tries to write a record: a record still
unwritten ``record_ttl`` seconds after ``put`` fails with ``Expired``. That is a bound on
*trying*, and a process that is not running is not trying. AWS Lambda freezes an execution
environment once its handler has returned: its threads and timers stop, the monotonic
clock does not, and on a thaw minutes later every timer fires at once, late. Counted in
the clock's seconds, each record that waited through the freeze would expire at that
first late timer, frozen, not slow.

The one rule: **the seconds between** :meth:`Pauses.begin` **and** :meth:`Pauses.end`
**do not count toward any record's** ``record_ttl``. The Lambda helper
(``kinesis_trio.aws_lambda``) begins a pause as its handler returns and ends it when the
next invocation starts, so ``record_ttl`` counts the time the function runs. While a pause
is open nothing expires (the time stands still at its start).

:meth:`Pauses.ttl_now` is the whole of it: every check of the form
``since + ttl <= now`` in the engine compares with ``ttl_now(now)`` instead, the time
``now`` would be if the pauses since had not happened for a record that is exactly
``ttl`` old in running time. With no pause it is ``now`` itself (one comparison); after
pauses, two comparisons in the usual cases (see :meth:`Pauses.ttl_now`): a warm Lambda
function calls it a few times per invocation with up to ``_KEPT`` pauses kept.
"""

from __future__ import annotations

import itertools

__all__ = ["Pauses"]

#: the pauses remembered: a record outstanding through more of them than this has the
#: oldest ones counted as running time (a Lambda function whose record waited through 64
#: invocations' gaps)
_KEPT = 64


class Pauses:
    """The pauses of one producer (``record_ttl`` seconds of running time: see the module)."""

    __slots__ = ("_open", "_spans", "_sums", "ttl")

    def __init__(self, ttl: float) -> None:
        self.ttl = ttl
        #: the start of the pause going on, or None
        self._open: float | None = None
        #: the pauses that ended, oldest first: (start, end), end > start
        self._spans: list[tuple[float, float]] = []
        #: the kept pauses in order (each after the one before): the last one's end, the
        #: first one's start and their seconds in all; None when not in order
        self._sums: tuple[float, float, float] | None = None

    @property
    def paused(self) -> bool:
        """Is a pause going on?"""
        return self._open is not None

    def begin(self, now: float) -> None:
        """The process may stop running from ``now`` (a pause already open stays as is)."""
        if self._open is None:
            self._open = now

    def end(self, now: float) -> float:
        """The process runs again at ``now``; returns the seconds the pause lasted."""
        start, self._open = self._open, None
        if start is None or now <= start:
            return 0.0
        spans = self._spans
        was = self._sums is not None or not spans
        spans.append((start, now))
        if len(spans) > _KEPT:
            del spans[0]
        # in order: each pause after the one before (a clock that went back breaks it,
        # until the pause out of order is no longer kept)
        if was and (len(spans) < 2 or spans[-2][1] <= start):
            ordered = True
        else:
            ordered = all(a[1] <= b[0] for a, b in itertools.pairwise(spans))
        self._sums = (now, spans[0][0], sum([e - s for s, e in spans])) if ordered else None
        return now - start

    def ttl_now(self, now: float) -> float:
        """The time to compare ``since + ttl`` with at ``now``: a record is past its TTL when
        it has been ``ttl`` seconds of running time since ``since`` (pauses left out)."""
        spans, start = self._spans, self._open
        if start is None and not spans:
            return now
        t = now if start is None or start > now else start
        sums = self._sums
        if sums is not None and t >= sums[0]:  # every pause kept ended by t
            last_end, first_start, paused = sums
            if t - last_end >= self.ttl:  # a ttl of running time since the last one
                return t
            if t - first_start - paused < self.ttl:  # less since the first one: all count
                return t - paused
        left = self.ttl
        i = len(spans)
        while i:
            s, e = spans[i - 1]
            if e <= t:
                if t - e >= left:
                    break
                left -= t - e
            t = min(t, s)
            i -= 1
        return t - left + self.ttl  # (t - left: the latest ``since`` past its TTL)
