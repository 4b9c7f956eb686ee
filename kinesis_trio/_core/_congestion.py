"""How many PutRecords requests may be out at once, and how many retries an endpoint in
trouble is sent (no awaits, ``now`` passed in).

**Concurrency.** :class:`ConcurrencyLimit` moves the number of requests in flight between 1
and ``max_connections`` (the ceiling). A delay-based AIMD, after TCP Vegas and the AIMD
limiters of Netflix's concurrency-limits and Palantir's Dialogue:

- it learns the round trip of an idle endpoint as a function of the request's size (the
  lower convex hull of the least round trip per size class: ``base + per_byte * bytes``
  where service is linear), so that a 5 MiB request on a fast endpoint is not taken for
  congestion;
- waiting (round trip minus ``expected``) over ``beta`` (0.5) of a unit, the larger of
  ``expected`` and the smoothed idle round trip of recent requests, plus ``slack``, and
  over ``queue_max`` (0.4 s; or over a quarter of the timeout, whatever the rest) means
  the request queued somewhere, and long enough to matter: a few tens of milliseconds
  of waiting on a fast endpoint cost nothing, and cutting for them costs throughput. A
  queue makes every request of a round (one round trip) wait, a pause of the endpoint one
  of them: the round's least wait decides, and if it is over the line the limit is cut by
  a quarter. A wait of a sixteenth of the timeout is cut at once, not at the round's end.
  A timeout, a 5xx answer or a lost connection cuts it by half. One cut per round trip:
  signals from requests sent before the last cut are old news;
- while a request waited for a slot, an answer grows it: by one per answer while its wait
  is under the line (slow start, from 8, until the first cut), then, while its wait is
  within ``alpha`` (0.1) of a unit or ``queue_ok`` (0.1 s; at most an eighth of the
  timeout), by ``1 / limit`` per answer (one more request per round trip), a quarter of
  that below 4;
- a request goes only if an endpoint serving one at a time would finish it and those in
  flight within half the timeout, each taking its learned idle round trip (before
  anything is learned, ``initial_bytes``, 8 MiB, plus a sixteenth per request, per half
  timeout): large requests of seconds each are not queued into a timeout before a round
  trip could show it, while small ones still go beside them;
- an endpoint with more workers proves it: prompt answers of the largest requests (at
  least half the largest answered, a sixty-fourth of the timeout or more, of a size
  answered before: a size's first sample may have queued) all sent and answered within
  a span of time, with more work than the span, are work one worker could not have done
  in it (in any order of service); the cap becomes half the timeout times
  ``workers``, twice what was proven (a round trip at a time, as slow start does). Only
  the largest count, so that the proof is in the units of what the cap holds back (small
  requests' floors learned while sharing a server overstate them). Cuts take ``workers``
  down with the limit; a size's floor learned lower, in proportion;
- a size first answered while the round trips are high (after a cut, before a round
  without queueing) met the queue or the slow endpoint: it is no floor. The backlog of a
  slowdown is sent as new, larger requests; taken for floors, they would hold back the
  requests after the recovery;
- round trips that stay high through three cuts (or for ``rebase_after`` seconds at a
  limit of 1) are no queue of ours: the endpoint itself got slower, the floor is learned
  again from them and the cuts are undone.

**Request size.** :meth:`ConcurrencyLimit.request_bytes` is the largest request to make
now (bytes of records), so that each completes well within its deadline on the path as it
is: a 5 MiB request behind a 400 kB/s uplink needs 13 s to go up, and one of 1.2 MB 3 s.
Three measures bound it, each from what came back, never from a guess:

- the learned floor: the size an idle path carries within half the timeout (the same half
  the gate fills with requests), read off the hull where it crosses that time. Only when a
  size learned takes longer: a floor that says nothing about large requests sets no bound.
  Twice the largest request answered within a quarter of the timeout is carried too (a
  probe upward: the floor keeps the least round trip of each size class, and a slow
  sample of a large size would otherwise hold requests back after the path got faster);
- a request whose time ran out while it moved (its deadline grows with its size:
  ``_deadline``): the path carries less than that; at most half of it from then on, and
  twice the size of each answer back within half the timeout (a probe upward);
- a 413 from something in front of the endpoint: at most half the refused size, for good.

A record larger than the bound goes in a request of its own, as one larger than
``collection_max_size`` does; the bound is never under :data:`MIN_REQUEST`.

**Retries.** :class:`RetryBudget` is the AWS SDKs' retry quota (standard mode): retries after
a timeout cost 10, after a 5xx or a lost connection 5; a successful request gives back
what its retried records cost, or 1. Time refills it too (``refill_per_s``), so a retry is
never held for good. An empty budget holds retries (records keep their ``record_ttl``);
throttling is not budgeted (the shards' limiters slow it down).
"""

from __future__ import annotations

import bisect
import enum
import math
from collections import deque

__all__ = ["MIN_REQUEST", "ConcurrencyLimit", "RetryBudget", "Signal"]

_INF = math.inf
#: the smallest bound :meth:`ConcurrencyLimit.request_bytes` sets on a request (bytes)
MIN_REQUEST = 64 * 1024
#: at most one log line per state change kind per this many seconds
_NOTICE_INTERVAL = 60.0


class Signal(enum.Enum):
    """What one request's end says about the endpoint."""

    #: an answer (whatever it says about each record): its round trip is a sample
    ANSWER = "answer"
    #: a timeout, a 5xx, a lost connection: the endpoint is overloaded or failing
    OVERLOAD = "overload"
    #: an error that says nothing about load (a 4xx, credentials)
    NEUTRAL = "neutral"


class _Notices:
    """A two-state condition logged when it changes, at most once per interval."""

    def __init__(self, events: tuple[str, str]) -> None:
        self.events = events
        self.state = False  # as last announced
        self.at = -_INF

    def update(self, state: bool, now: float, out: list[tuple[str, float]], value: float) -> None:
        if state != self.state and now - self.at >= _NOTICE_INTERVAL:
            self.state = state
            self.at = now
            out.append((self.events[state], value))


class _Floor:
    """The round trip of an idle endpoint as a function of request size.

    Keeps the least round trip seen per size class (powers of two of bytes) and reads the
    floor off the lower convex hull of those points: a line ``base + per_byte * bytes``
    where the service is linear, found without knowing which sample was uncongested.
    """

    def __init__(self) -> None:
        self._least: dict[int, tuple[int, float]] = {}  # size class -> (bytes, round trip)
        self._hull: list[tuple[int, float]] = []

    def learn(self, nbytes: int, rtt: float) -> None:
        size_class = nbytes.bit_length()
        least = self._least.get(size_class)
        if least is not None and least[1] <= rtt:
            return
        self._least[size_class] = (nbytes, rtt)
        # A larger request is never cheaper: a smaller one that took longer had queued.
        points = sorted(self._least.values())
        for i in range(len(points) - 2, -1, -1):
            if points[i][1] > points[i + 1][1]:
                points[i] = (points[i][0], points[i + 1][1])
        hull: list[tuple[int, float]] = []
        for x, y in points:
            while len(hull) >= 2:
                (x0, y0), (x1, y1) = hull[-2], hull[-1]
                if (x1 - x0) * (y - y0) - (y1 - y0) * (x - x0) > 0:
                    break
                hull.pop()  # above the line from hull[-2] to this point
            hull.append((x, y))
        self._hull = hull

    def carries(self, seconds: float) -> float:
        """The largest request an idle endpoint answers within ``seconds``, where the floor
        crosses it (``inf``: the largest size learned takes less: nothing says where).
        Below the first point learned, in proportion to size (a fixed part makes smaller
        requests faster than that: on the safe side)."""
        hull = self._hull
        if not hull or hull[-1][1] <= seconds:
            return _INF
        x0, y0 = 0, 0.0
        for x, y in hull:
            if y > seconds:
                if x0 == 0:
                    return x * seconds / y
                return x0 + (x - x0) * (seconds - y0) / (y - y0)
            x0, y0 = x, y
        return _INF  # pragma: no cover - the last point is over ``seconds``

    def knows(self, nbytes: int) -> bool:
        """Has a request of this size class been learned?"""
        return nbytes.bit_length() in self._least

    @property
    def largest(self) -> int:
        """The largest size class's request learned (0: nothing learned yet)."""
        return self._hull[-1][0] if self._hull else 0

    def __call__(self, nbytes: int) -> float:
        hull = self._hull
        if not hull:
            return 0.0
        if len(hull) == 1:
            return hull[0][1]
        if nbytes <= hull[0][0]:
            return hull[0][1]
        i = min(bisect.bisect_left(hull, (nbytes, -_INF)), len(hull) - 1)
        (x0, y0), (x1, y1) = hull[i - 1], hull[i]
        line = y0 + (y1 - y0) / (x1 - x0) * (nbytes - x0)
        if nbytes <= x1:
            return line
        # Beyond the largest size seen: a service time with a fixed part grows more slowly
        # than size, so size alone bounds it (a steep last segment, one sample that
        # queued, would otherwise make a larger request look seconds slower).
        return min(line, y1 * nbytes / x1)


class ConcurrencyLimit:
    """The number of PutRecords requests allowed in flight; see the module's docstring."""

    def __init__(
        self,
        ceiling: int,
        *,
        initial: int = 8,
        slack: float = 0.025,
        rebase_after: float = 5.0,
        adaptive: bool = True,
        timeout: float = 12.0,
        initial_bytes: int = 8 * 1024 * 1024,
    ) -> None:
        if ceiling < 1:
            raise ValueError("the ceiling must be at least 1")
        self.ceiling = ceiling
        #: ``False``: the limit stays at the ceiling
        self.adaptive = adaptive
        self.limit = float(max(1, min(initial, ceiling)) if adaptive else ceiling)
        self.slack = slack
        #: queueing of a quarter of the request timeout is congestion whatever the ratio
        self.timeout = timeout
        self.rebase_after = rebase_after
        self.in_flight = 0
        self._sizes: list[int] = []  # the sizes of the requests in flight
        #: bytes in flight, before anything is learned, that an endpoint serving one at a
        #: time is taken to finish in half the timeout
        self.initial_bytes = initial_bytes
        #: requests held until a slot frees (``hold`` and ``unhold`` count them)
        self.waiting = 0
        self.cuts = 0
        self._slow_start = True
        self._cut_at = -_INF
        self._good = 0.0  # halfway back to the limit before the current episode of cuts
        self._before = 0.0  # the limit before it
        self._binding = False  # a request waited for a slot since the limit last grew
        self._floor = _Floor()
        self._service = 0.0  # the idle round trip of recent requests, smoothed
        self._largest = 0  # the largest request answered so far (bytes)
        #: the endpoint's proven parallelism: the timeout cap is ``timeout / 2 * workers``
        self.workers = 1.0
        # recent prompt answers of requests that weigh on the cap: (start, end, work)
        self._recent: deque[tuple[float, float, float]] = deque()
        #: waiting (in units of a request's idle round trip) that counts as a queue
        self.beta = 0.5
        self.alpha = 0.1
        #: waiting (seconds) that is no queue worth a cut, and that still counts as none
        self.queue_max = 0.4
        self.queue_ok = 0.1
        # while at the floor with high round trips: the endpoint's own floor, relearned
        self._stuck_since: float | None = None
        self._stuck_cuts = 0
        self._stuck_floor = _Floor()
        # a round: from one decision until the first answer to a request sent after it
        self._round_start = -_INF
        self._round_least = _INF
        self._notices = _Notices(("request_concurrency_recovered", "request_concurrency_at_floor"))
        #: (log event, limit) lines for the engine to log
        self.notices: list[tuple[str, float]] = []
        # the request size: what the floor carries in half the timeout (cached), what a
        # request too slow for its deadline left (probed upward), what a 413 refused
        self._carried: float | None = None
        self._fit = 0  # the largest request answered within a quarter of the timeout
        self._slow_cap = _INF
        self._refused_cap = _INF

    def request_bytes(self, max_size: int) -> int:
        """The largest request (bytes of records) to make now, at most ``max_size``: what
        the path carries within half the timeout, as measured; see the module."""
        carried = self._carried
        if carried is None:
            carried = self._carried = self._floor.carries(self.timeout / 2)
        # a size answered within a quarter of the timeout: twice it fits in half (a probe
        # upward past a slow sample the floor keeps)
        cap = min(max(carried, 2.0 * self._fit), self._slow_cap, self._refused_cap)
        if cap >= max_size:
            return max_size
        return max(int(cap), min(MIN_REQUEST, max_size))

    def too_slow(self, nbytes: int) -> None:
        """A request of ``nbytes`` ran out of the time its size has while it moved: the
        path carries less; requests of at most half of it from now."""
        if nbytes > 0:
            self._slow_cap = min(self._slow_cap, nbytes / 2)

    def refused(self, nbytes: int) -> None:
        """Something in front of the endpoint refused a request of ``nbytes`` as too large
        (a 413 without the service's error shape): at most half of it from now."""
        if nbytes > 0:
            self._refused_cap = min(self._refused_cap, nbytes / 2)

    @property
    def allowed(self) -> int:
        """Requests allowed in flight now (fewer go while they are large: :meth:`fits`)."""
        return max(1, int(self.limit))

    def work(self, nbytes: int) -> float:
        """What a request of ``nbytes`` is taken to cost an endpoint that serves one at a
        time: its idle round trip as learned, and, for a size more than twice the largest
        learned, no less than that one's nor than ``initial_bytes`` per half timeout."""
        floor = self._floor
        known = floor.largest
        # before anything is learned: ``initial_bytes`` of records, or 16 requests, per
        # half timeout (an endpoint may take a part of a second per request of any size)
        blind = (nbytes / self.initial_bytes + 1 / 16) * self.timeout / 2
        if not known:
            return blind
        if nbytes <= 2 * known:
            return floor(nbytes)
        return max(floor(known), blind)

    def fits(self, nbytes: int) -> bool:
        """May a request of ``nbytes`` go next to those in flight? Not if an endpoint with
        the workers proven so far (one at first) would take more than half the timeout for
        all of them: large requests of seconds each are not queued into a timeout before a
        round trip could show the queue. One request always may."""
        if not self.in_flight or not self.adaptive:
            return True
        total = self.work(nbytes)
        for size in self._sizes:
            total += self.work(size)
        return total <= self.timeout / 2 * self.workers

    def has_room(self) -> bool:
        """Is a slot free for a request as large as the largest so far? Asked by the
        collector with a request due: no means it keeps filling it."""
        if self.in_flight < self.allowed:
            return self.fits(self._largest)
        self._binding = True
        return False

    def try_acquire(self, nbytes: int = 0) -> bool:
        """Take a slot for a request of ``nbytes`` if one is free and it fits; a refusal
        for want of a slot means the limit binds."""
        if self.in_flight < self.allowed:
            if not self.fits(nbytes):
                return False
            self.in_flight += 1
            self._sizes.append(nbytes)
            if self.in_flight < self.allowed:
                self._binding = False  # room to spare: the limit does not bind
            return True
        self._binding = True
        return False

    def hold(self) -> None:
        """A request waits for a slot (counted in ``waiting`` until ``unhold``)."""
        self.waiting += 1

    def unhold(self) -> None:
        """A request that waited for a slot took one, or stopped waiting."""
        self.waiting -= 1

    def release(self, nbytes: int = 0) -> None:
        """A request of ``nbytes`` ended (answered, failed or cancelled): its slot is free."""
        self.in_flight -= 1
        self._sizes.remove(nbytes)

    def expected(self, nbytes: int) -> float:
        """The round trip of a request of ``nbytes`` on an idle endpoint, as learned."""
        return self._floor(nbytes)

    def observe(self, now: float, start: float, nbytes: int, signal: Signal) -> None:
        """Learn from a request sent at ``start`` that ended at ``now``."""
        if signal is Signal.ANSWER and now - start <= self.timeout / 2:
            # carried in time: the request size probes upward
            if self._slow_cap < _INF:
                self._slow_cap = max(self._slow_cap, 2.0 * nbytes)
            if nbytes > self._fit and now - start <= self.timeout / 4:
                self._fit = nbytes
        if signal is Signal.NEUTRAL or not self.adaptive:
            return
        if signal is Signal.OVERLOAD:
            self._cut(now, start, 0.5)
            return
        rtt = now - start
        floor = self._floor
        # this size's floor as known before this answer (none: its first sample, which
        # may have queued, so it proves nothing)
        known = floor(nbytes) if floor.knows(nbytes) else 0.0
        # A size first answered while round trips are high (cut for, not yet over) met the
        # queue or the slow endpoint: no floor (the backlog of a slowdown is sent as new,
        # larger requests; taken for floors, they would hold the ones after the recovery
        # back). It is learned from a round trip after it, unless it is below what the
        # floor says already (it queued less than that: the floor is never above a sample).
        if known or self._stuck_since is None or rtt < floor(nbytes):
            floor.learn(nbytes, rtt)
            self._carried = None

        if known and rtt < known * 0.8:
            # a proof in units of the old floor: a floor learned lower makes it smaller
            self.workers = max(1.0, self.workers * rtt / known)
        if nbytes > self._largest:
            self._largest = nbytes
        expected = self.expected(nbytes)
        if self._service <= 0.0:
            self._service = expected
        else:
            self._service += (expected - self._service) * 0.1
        excess = rtt - expected  # time spent waiting somewhere
        unit = max(expected, self._service) + self.slack  # what one request ahead costs
        # How far over the line of a queue this request waited: the round's least of it
        # decides (a queue makes every request of a round wait; a hiccup, one of them).
        over = excess / self._line(unit)
        if over > 1.0 and self._stuck_since is not None:
            self._stuck_floor.learn(nbytes, rtt)
        if over < self._round_least:
            self._round_least = over
        # The round is over at the first answer to a request sent in it; a wait of a
        # sixteenth of the timeout is no hiccup: it is acted on at once.
        urgent = over > 1.0 and excess > self.timeout / 16
        if urgent or start >= self._round_start:
            least, self._round_least, self._round_start = self._round_least, _INF, now
            if urgent or least > 1.0:
                self._cut(now, start, 0.75)
                self._still_high(now, rtt, nbytes)
                return
            self._stuck_since = None
        near_line = self._near(unit)
        if known >= self.timeout / 64 and 2 * nbytes >= self._largest and rtt - known <= near_line:
            self._prove(start, now, min(known, rtt))  # never more work than its round trip
        near = over <= 1.0 if self._slow_start else excess <= near_line
        if near and self._binding:
            # Slow start, or back to where the limit was before the last cuts: one more per
            # answer; beyond it, one more per round trip, and below 4 a quarter of that (one
            # more request is a large step there: a one-worker server gains nothing by it).
            if self._slow_start or 4.0 <= self.limit < self._good:
                step = 1.0
            else:
                step = (1.0 if self.limit >= 4.0 else 0.25) / self.limit
            self.limit = min(float(self.ceiling), self.limit + step)
        self._notices.update(self.allowed == 1 and self.cuts > 0, now, self.notices, self.limit)

    def _prove(self, start: float, end: float, work: float) -> None:
        """A prompt answer of a request that weighs on the timeout cap. An endpoint that
        serves one request at a time (in any order) does at most ``E - S`` of work between
        ``S`` and ``E``: prompt answers of requests all sent and answered within such a span
        with more work than that prove its parallelism, and the cap grows to twice what was
        proven. Every span from a recent request's start to this answer is looked at, so
        two requests that merely overlap prove it too, not only one sent and answered
        within another's round trip."""
        tol = self.slack
        recent = self._recent
        while recent and (recent[0][1] < end - self.timeout or len(recent) >= 64):
            recent.popleft()
        recent.append((start, end, work))
        # Every recent answer ended by now: the span from a start S to this answer holds
        # each one sent at S or later. Latest start first, adding one at a time.
        proven = 0.0
        total = 0.0
        for s, _, w in sorted(recent, reverse=True):
            total += w
            proven = max(proven, total / (end - s + tol))
        if proven > 1.0:
            self.workers = max(self.workers, min(float(self.ceiling), 2.0 * proven))

    def _line(self, unit: float) -> float:
        """Waiting beyond this is a queue (``unit``: what one request ahead costs)."""
        return min(max(self.beta * unit, self.queue_max), self.timeout / 4)

    def _near(self, unit: float) -> float:
        return min(max(self.alpha * unit, self.queue_ok), self.timeout / 8)

    def _cut(self, now: float, start: float, factor: float) -> None:
        if start >= self._cut_at:  # sent after the last cut: news about the new limit
            if self._stuck_since is None:  # a new episode: regrow fast to halfway back
                self._good = self.limit * (1.0 + factor) / 2
                self._before = self.limit
            if self._stuck_since is not None and self.in_flight <= self.allowed:
                self._stuck_cuts += 1
            self.limit = max(1.0, self.limit * factor)
            self.workers = max(1.0, self.workers * factor)
            self._cut_at = now
            self._slow_start = False
            self.cuts += 1
        self._notices.update(self.allowed == 1, now, self.notices, self.limit)

    def _still_high(self, now: float, rtt: float, nbytes: int) -> None:
        """Round trips high through three cuts (each made once the requests sent before it
        had ended), or for ``rebase_after`` seconds at a limit of 1: a queue of ours would
        have drained by then, so the endpoint itself got slower. Its floor is learned
        again from the round trips seen meanwhile, and the cuts are undone."""
        if self._stuck_since is None:
            self._stuck_since = now
            self._stuck_cuts = 0
            self._stuck_floor = _Floor()
            self._stuck_floor.learn(nbytes, rtt)
        at_floor = self.allowed == 1 and self.in_flight <= 1
        if self._stuck_cuts >= 3 or (at_floor and now - self._stuck_since >= self.rebase_after):
            self._floor = self._stuck_floor  # learned again from here
            self._carried = None
            self.workers = 1.0  # proven in units of the old floor
            self._stuck_since = None
            self.limit = max(self.limit, self._before)


class RetryBudget:
    """Tokens that retries after timeouts and server errors spend; see the module."""

    TIMEOUT_COST = 10.0
    ERROR_COST = 5.0

    def __init__(
        self, capacity: float = 500.0, *, refill_per_s: float = 10.0, now: float = 0.0
    ) -> None:
        if capacity < self.TIMEOUT_COST or refill_per_s <= 0:
            raise ValueError("the retry budget needs room for one retry and a refill rate")
        self.capacity = capacity
        self.refill_per_s = refill_per_s
        self.level = capacity
        self._at = now
        self._refused = False
        self._notices = _Notices(("retry_budget_recovered", "retry_budget_empty"))
        #: (log event, level) lines for the engine to log
        self.notices: list[tuple[str, float]] = []

    def _refill(self, now: float) -> None:
        if now > self._at:
            self.level = min(self.capacity, self.level + (now - self._at) * self.refill_per_s)
            self._at = now

    def withdraw(self, cost: float, now: float) -> bool:
        """Pay for a retry now, or refuse (the retry waits for :meth:`ready_at`)."""
        self._refill(now)
        if self.level >= cost:
            self.level -= cost
            self._update(now)
            return True
        self._refused = True
        self._update(now)
        return False

    def ready_at(self, cost: float, now: float) -> float:
        """When time alone will have refilled enough for ``cost`` (successes come sooner)."""
        self._refill(now)
        return now + max(0.0, cost - self.level) / self.refill_per_s

    def deposit(self, amount: float, now: float) -> None:
        """A successful request gives back ``amount``."""
        self._refill(now)
        self.level = min(self.capacity, self.level + amount)
        self._update(now)

    def _update(self, now: float) -> None:
        if self._refused and self.level >= 0.2 * self.capacity:
            self._refused = False
        self._notices.update(self._refused, now, self.notices, self.level)
