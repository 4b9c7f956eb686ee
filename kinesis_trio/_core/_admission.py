"""Admission by time: a record is accepted only if its shard would confirm it in time (pure,
no awaits, ``now`` passed in).

The count and byte caps (``max_outstanding_records``/``_bytes``) bound memory; they say
nothing about time. Beside them, each shard has a :class:`Lane`: the bytes accepted for it
and not resolved yet (``owed``), and the pace at which it has been confirming them
(``rate``). A record is admitted while what is queued ahead of it, at that pace, plus a
round trip, fits in ``horizon`` seconds (``admission_ttl_share`` of ``record_ttl``): the
check is ``owed < allow``, where ``allow = rate * (horizon - round trip)`` is computed when
the rate changes, not per record. The round trip is an idle endpoint's (no time queued
there: the pace counts that already, :meth:`Admission.answered`). Otherwise ``put`` waits
(the engine raises ``NoRoom``; ``put_nowait``, ``anyio.WouldBlock``): a record the endpoint
could not confirm within its TTL is not taken, instead of expiring in the producer's own queue.

The estimator's rules, each against a trap a drain-rate estimator falls into:

- **Busy time only.** The pace is the bytes confirmed per second of *busy* time, while the
  lane owes something: idle time is not slow draining, and a lane that waits for admission
  is busy (it owes its whole allowance), so waiting never lowers the pace that caused it.
- **A window, not a sample.** The pace is the bytes confirmed over the last
  :data:`WINDOW` seconds of busy time (or four round trips, if longer: answers confirm a
  request's records at once), over no less than :data:`MIN_SPAN`: a confirmation two
  microseconds after the first record cannot make it "TB/s".
- **Before any measurement, a first allowance.** A lane that has confirmed nothing yet
  admits :data:`FIRST` bytes (a record more when it owes nothing): a burst put before the
  first answer would otherwise fill the caps (128 MiB: minutes of a slow endpoint's work)
  with records doomed before a pace is known. The first confirmation, a round trip later,
  sets the pace; from a first allowance confirmed within ``MIN_SPAN`` the allowance grows
  to ``horizon / MIN_SPAN`` (30) times it, so it cannot trap itself small. (It assumes a
  shard confirms at least ``FIRST`` per horizon, 17 kB/s at the defaults.) A shard new
  after a reshard starts at the stream's pace instead, and records placed anew on it
  owe their bytes there (:meth:`Lane.move`). With admission off, only the caps hold, as
  in the KPL.
- **Room back at once.** The window is recomputed at every resolution, so a shard that
  speeds up gets room as soon as its confirmations show it (while it waits for admission
  it owes its allowance, so it drains as fast as it can: its true pace, a probe upward).
  A lane that owes nothing always admits one record, and the allowance is never below
  :data:`FIRST`: a shard fed slowly (a putter held by another shard) measures its demand,
  not its capacity, and an endpoint whose cost is per request confirms less when requests
  are small; a floor keeps either from spiralling down.
- **One slow answer is one gap in the window.** A stall lowers the pace only by the share
  of the window it takes; confirmations afterwards raise it again.
- **Retries and throttles slow it.** Throttled or failed requests of a shard are marked in
  its window (:meth:`Lane.note`) as busy time that confirmed nothing, so a shard that is
  throttled throughout gets a pace of what it confirms, not of what it once did.
- **A pace that falls after records were accepted** (other producers came to share the
  shard) leaves them owing more than the horizon's worth: ``put`` holds until they drain,
  and they drain oldest first (``_retry_schedule``: retries go first), so a record waits at
  most ``horizon`` times the fall (the old pace over the new) plus its retries' backoff.
  The default share, a third, absorbs a fall to a third of the pace without an expiry.
  A lane whose records would take more than the horizon at its new pace says so in a log
  line (``admission_pace_fell``, at most once a minute per stream).

The engine decides; the accumulator checks ``allow`` where it routes a record and charges
the lane (``Record.lane``) as it accepts one, and the ledger credits it as records are
resolved. A burst's records in a shard's aggregate in formation are charged when it is sealed,
once per aggregate (:meth:`Lane.sealed`), as owing from the first one's acceptance; until
then the check counts the aggregate's size beside what the lane owes.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Mapping, Sequence

from .._logging import get_logger
from ._record import Record

__all__ = ["FIRST", "MIN_SPAN", "OFF", "WINDOW", "Admission", "Lane", "delays"]

_log = get_logger("kinesis_trio.producer")

_INF = math.inf
#: bytes a lane admits before its first confirmation (a full request's worth of records
#: for one shard of the shell's linger window: ``linger_window_bytes``' default)
FIRST = 262_144
#: seconds of busy time the pace is measured over
WINDOW = 5.0
#: the least span a pace is measured over (the first confirmations come within a round trip)
MIN_SPAN = 0.5
#: marks closer than this in busy time are merged (bounds the window's length)
_MARK_STEP = 0.05
#: at most one log line per lane and state change per this many seconds
_NOTICE_INTERVAL = 60.0


class Admission:
    """The producer-wide policy of admission by time: the horizon and the round trip."""

    __slots__ = ("_fell", "horizon", "notices", "on", "owing", "rtt")

    def __init__(self, ttl: float, share: float | None) -> None:
        #: admission by time is on (``admission_ttl_share`` is not None)
        self.on = share is not None
        #: a record must be confirmed within this many seconds of being accepted
        self.horizon = ttl * share if share is not None else _INF
        #: the smoothed round trip of answered requests, without time queued (seconds)
        self.rtt = 0.0
        #: ``(event, lane, now)`` log lines for the engine to write
        self.notices: list[tuple[str, Lane, float]] = []
        #: the lanes that owe bytes now (each lane adds and removes itself): what is sampled
        #: per stream visits these, not every shard
        self.owing: dict[Lane, None] = {}
        self._fell: dict[str, float] = {}  # when each stream's pace_fell was last logged

    def answered(self, seconds: float, idle: float = _INF) -> None:
        """A request was answered after ``seconds``; ``idle``: the round trip a request of
        its size takes when nothing queues (the concurrency gate's learned floor). The
        smaller is smoothed in: time queued at the endpoint is time its backlog takes to
        drain, which the pace already counts in what a lane owes (a lane that owes ``B``
        at pace ``P`` confirms its last byte ``B / P`` from now, pipelined or not); taken
        away again, it would hold ``put`` back from an endpoint that queues, with fewer
        and smaller requests for it to take."""
        seconds = min(seconds, idle)
        if self.rtt == 0.0:
            self.rtt = seconds
        else:
            self.rtt += (seconds - self.rtt) * 0.125

    def unconfirmed(self, lanes: Sequence[Lane], now: float) -> None:
        """A request left records of ``lanes`` unconfirmed (throttled, failed, to retry):
        its time counts in their windows as busy time that confirmed nothing. Then the
        lines of lanes that started or stopped holding ``put`` are logged."""
        seen = None
        for lane in lanes:
            if lane is not seen:
                lane.note(now)
                seen = lane
        if self.notices:
            for event, lane, at in self.notices:
                _log.info(
                    event,
                    stream=lane.stream,
                    shard_id=lane.shard_id,
                    owed_bytes=lane.owed,
                    bytes_per_second=round(lane.rate),
                    projected_delay=round(lane.delay(at), 3),
                    horizon=self.horizon,
                )
            self.notices.clear()

    def fell(self, lane: Lane, now: float) -> None:
        """``lane``'s pace fell under what it owes (its records would take more than the
        horizon now): a log line, at most once per :data:`_NOTICE_INTERVAL` per stream."""
        if now - self._fell.get(lane.stream, -_INF) >= _NOTICE_INTERVAL:
            self._fell[lane.stream] = now
            self.notices.append(("admission_pace_fell", lane, now))

    def budget(self) -> float:
        """The seconds of draining a lane may owe: the horizon less a round trip (at
        least a quarter of it)."""
        horizon = self.horizon
        # (comparisons, not ``max``: once per record confirmed on a stream of many shards)
        less, least = horizon - self.rtt, horizon * 0.25
        return least if least > less else less

    def lane(self, stream: str, shard_id: str, pace: float = 0.0) -> Lane:
        """A new shard's lane; ``pace``: the bytes per second it is taken to confirm until
        it measures its own (0: none, only the caps hold until its first confirmation)."""
        lane = Lane(self, stream, shard_id)
        if self.on:
            lane.allow = max(pace * self.budget(), FIRST)
        lane.rate = pace
        return lane


class Lane:
    """One shard's account: bytes owed, the pace it confirms at, what it admits."""

    __slots__ = (
        "_at",
        "_busy",
        "_confirmed",
        "_idle_at",
        "_logged",
        "_marks",
        "_since",
        "allow",
        "holding",
        "owed",
        "policy",
        "rate",
        "shard_id",
        "stream",
    )

    def __init__(self, policy: Admission, stream: str, shard_id: str) -> None:
        self.policy = policy
        self.stream = stream
        self.shard_id = shard_id
        #: bytes accepted for this shard and not resolved yet
        self.owed = 0
        #: a record is admitted while ``owed < allow`` (infinite: off; ``Admission.lane``
        #: sets the first allowance)
        self.allow = _INF
        #: bytes per second of busy time confirmed over the window (0: none yet)
        self.rate = 0.0
        #: admission refused a record and has not let one in since
        self.holding = False
        self._busy = 0.0  # busy seconds before the current busy period
        self._since = 0.0  # when the current busy period began (owed > 0)
        self._idle_at = -_INF  # when it last came to owe nothing
        self._confirmed = 0  # bytes confirmed, in all
        # (busy seconds, bytes confirmed) marks: the window's start is the first; made at
        # the first confirmation (a deque is some 600 bytes: a shard that never gets a
        # record, on a stream of thousands, does without)
        self._marks: deque[tuple[float, int]] | None = None
        self._at = -_INF  # when its holding was last logged
        self._logged = False  # its current holding was logged

    # -- charging and crediting (the accumulator and the ledger) ------------------------------

    def admits(self) -> bool:
        """Would a record be admitted now?"""
        return self.owed < self.allow

    def lift(self) -> float:
        """Admit every record until :meth:`restore` (the records of a batch admitted as a
        whole are placed: ``_batch``); returns the allowance to restore."""
        allow = self.allow
        self.allow = _INF
        return allow

    def restore(self, allow: float) -> None:
        """The allowance :meth:`lift` returned is back."""
        self.allow = allow

    def charge(self, outcome: Record, now: float) -> None:
        """``outcome`` was accepted for this shard at ``now``: it owes its bytes until it is
        resolved (the ledger credits them back: :meth:`drained`)."""
        size = outcome.size
        if size:  # :meth:`sealed`, inline: once per record
            if not self.owed:
                self._since = now if now > self._idle_at else self._idle_at
                self.policy.owing[self] = None
            self.owed += size
        outcome.charged(self)

    def sealed(self, size: int, since: float) -> None:
        """An aggregate was sealed for this shard with ``size`` bytes of records not charged
        yet (``sealed_into`` charged them here), the first accepted at ``since``: the records
        a burst puts into an aggregate in formation are charged once per aggregate, not one
        by one, and owe from their acceptance (or from when the lane last came to owe
        nothing, if later) as if they had been."""
        if not size:
            return
        if not self.owed:
            self._since = since if since > self._idle_at else self._idle_at
            self.policy.owing[self] = None
        self.owed += size

    def move(self, outcome: Record, to: Lane, now: float) -> None:
        """``outcome``, charged here, is placed anew on ``to``'s shard (a reshard retired
        this one): it owes its bytes there, where it will drain."""
        if to is self:
            return
        busy = self.busy(now)
        self.owed -= outcome.size
        if self.owed <= 0:
            self.owed = 0
            self._busy = busy
            self._idle_at = now
            self.policy.owing.pop(self, None)
        to.charge(outcome, now)

    def busy(self, now: float) -> float:
        """Busy seconds so far (time while the lane owed something)."""
        if self.owed:
            return self._busy + (now - self._since)
        return self._busy

    def drained(self, size: int, ok: bool, now: float) -> None:
        """Records of ``size`` bytes it owed were resolved (``ok``: confirmed written)."""
        # :meth:`busy`, inline: once per Kinesis record resolved
        busy = self._busy + (now - self._since) if self.owed else self._busy
        owed = self.owed - size
        if owed <= 0:
            owed = 0
            self._busy = busy
            self._idle_at = now
            self.policy.owing.pop(self, None)
        self.owed = owed
        if ok:
            self._confirmed += size
        self._mark(busy, now)

    def note(self, now: float) -> None:
        """Its records were throttled, or their request failed: busy time that confirmed
        nothing counts in the window now, not only at the next confirmation."""
        if self.rate:
            self._mark(self.busy(now), now)

    def forget(self) -> None:
        """Everything it owed was resolved at once (the producer closed)."""
        self.owed = 0
        self.policy.owing.pop(self, None)

    # -- the estimator -------------------------------------------------------------------------

    def _mark(self, busy: float, now: float) -> None:
        marks = self._marks
        if marks is None:
            marks = self._marks = deque([(0.0, 0)])
        confirmed = self._confirmed
        last_busy, _ = marks[-1]
        if busy - last_busy >= _MARK_STEP or len(marks) == 1:
            marks.append((busy, confirmed))
        else:
            marks[-1] = (last_busy, confirmed)
        # at least four round trips: answers come in lumps (a request's records at once)
        # (comparisons, not ``max``: this runs once per Kinesis record confirmed)
        policy = self.policy
        trips = 4.0 * policy.rtt
        start = busy - (trips if trips > WINDOW else WINDOW)
        while len(marks) > 2 and marks[1][0] <= start:
            marks.popleft()
        base_busy, base_confirmed = marks[0]
        if not confirmed:
            return  # nothing measured yet: only the caps hold
        span = busy - base_busy
        rate = (confirmed - base_confirmed) / (MIN_SPAN if span < MIN_SPAN else span)
        self.rate = rate
        if not policy.on:
            return
        # never below the first allowance; a lane that owes nothing admits one record
        # (:meth:`Admission.budget`, inline: once per Kinesis record confirmed)
        horizon = policy.horizon
        less, least = horizon - policy.rtt, horizon * 0.25
        allow = rate * (least if least > less else less)
        self.allow = FIRST if allow < FIRST else allow
        if self.owed > self.allow and self.delay(now) > policy.horizon:
            policy.fell(self, now)
        if self.holding and self.owed < self.allow:
            self.holding = False
            self._notice("admission_released", now)

    def refused(self, now: float) -> None:
        """Admission refused a record (``put`` waits)."""
        if not self.holding:
            self.holding = True
            self._notice("admission_holding", now)

    def _notice(self, event: str, now: float) -> None:
        # A holding is logged at most once per interval; its end only if it was logged.
        if event == "admission_holding":
            if now - self._at < _NOTICE_INTERVAL:
                return
            self._at = now
            self._logged = True
        elif not self._logged:
            return
        else:
            self._logged = False
        self.policy.notices.append((event, self, now))

    def delay(self, now: float) -> float:
        """The projected wait of a record accepted now: what it owes at its pace, plus a
        round trip (0 when it owes nothing; infinite when it owes without a pace)."""
        if not self.owed:
            return 0.0
        if not self.rate:
            return _INF
        return self.owed / self.rate + self.policy.rtt


def delays(
    oldest: Mapping[str, float], streams: Iterable[str], owing: Iterable[Lane], now: float
) -> dict[str, tuple[float, float]]:
    """Per stream (by name): ``(oldest, projected)``, the age of its oldest unresolved
    record (``oldest``: when it arrived, by stream) and the projected wait of a record
    accepted now on its slowest shard (seconds; ``inf`` when a shard owes records and has
    confirmed none yet). ``owing``: the lanes that owe bytes (``Admission.owing``; a lane
    that owes nothing projects no wait), so idle shards cost nothing here."""
    projected: dict[str, float] = {}
    for lane in owing:
        delay = lane.delay(now)
        if delay > projected.get(lane.stream, 0.0):
            projected[lane.stream] = delay
    return {name: (now - oldest.get(name, now), projected.get(name, 0.0)) for name in streams}


#: admission by time turned off (the lanes of shard buffers made without a policy)
OFF = Admission(1.0, None)
