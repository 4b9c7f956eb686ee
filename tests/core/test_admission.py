"""Admission by time (``_core/_admission``): the estimator's rules, one by one, and a
property over arbitrary drain-rate traces: no record of a draining shard expires in the
queue, and the allowance is never pinned at a cap or at zero while records flow.

Pure code with ``now`` passed in: virtual time by construction.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import dataclass, field

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kinesis_trio import Outcome
from kinesis_trio._core._admission import FIRST, MIN_SPAN, WINDOW, Admission, Lane
from kinesis_trio._core._effects import NoRoom
from kinesis_trio._core._pipeline_data import ShardBuffer, StreamState
from kinesis_trio._core._shards import hash_key_for
from kinesis_trio._results import failed
from tests.support.engine import engine

TTL = 30.0


def rec(size: int) -> Outcome:
    """A record of ``size`` bytes (data and key), as the engine makes one."""
    return Outcome(b"", "k", None, 0, size, 0.0, "s", 0)


def lane(share: float | None = 0.5) -> Lane:
    return Admission(TTL, share).lane("s", "shardId-0")


def test_a_lane_that_has_confirmed_nothing_admits_its_first_allowance() -> None:
    ln = lane()
    assert ln.allow == FIRST
    ln.charge(rec(FIRST - 1), 0.0)
    assert ln.admits()
    ln.charge(rec(1), 0.0)
    assert not ln.admits()
    ln.drained(FIRST - 1, False, 1.0)  # failures measure no pace
    assert ln.allow == FIRST and ln.rate == 0.0
    ln.drained(1, False, 1.0)
    ln.charge(rec(10 * FIRST), 2.0)  # a lane that owes nothing takes one record of any size
    assert ln.owed == 10 * FIRST


def test_the_first_allowance_confirmed_promptly_grows_thirtyfold() -> None:
    ln = lane()
    ln.charge(rec(FIRST), 0.0)
    ln.drained(FIRST, True, 0.1)
    assert ln.allow == pytest.approx(FIRST / MIN_SPAN * 15.0)


def test_a_confirmation_right_after_the_first_record_is_not_taken_for_a_fast_pace() -> None:
    """The trap of 2 µs samples: the least span is MIN_SPAN, whatever the clock says."""
    ln = lane()
    ln.charge(rec(1_000_000), 100.0)
    ln.drained(1_000_000, True, 100.000002)
    assert ln.rate == pytest.approx(1_000_000 / MIN_SPAN)
    assert ln.allow == pytest.approx(ln.rate * 15.0)


def test_idle_time_is_not_slow_draining() -> None:
    ln = lane()
    ln.charge(rec(500_000), 0.0)
    ln.drained(500_000, True, 1.0)  # 500 kB in 1 s of busy time
    assert ln.rate == pytest.approx(500_000)
    ln.charge(rec(500_000), 1000.0)  # after 999 s idle
    ln.drained(500_000, True, 1001.0)
    assert ln.rate == pytest.approx(500_000)  # the idle hour is not in the pace


def test_the_allowance_is_the_pace_times_the_horizon_less_a_round_trip() -> None:
    adm = Admission(TTL, 0.5)
    ln = adm.lane("s", "shardId-0")
    adm.answered(2.0)
    ln.charge(rec(1_000_000), 0.0)
    ln.drained(1_000_000, True, 1.0)
    assert adm.budget() == pytest.approx(15.0 - 2.0)
    assert ln.allow == pytest.approx(1_000_000 * 13.0)
    ln.charge(rec(int(ln.allow) + 1), 1.0)  # what it owes now drains past the budget
    assert not ln.admits()
    assert ln.delay(1.0) == pytest.approx((int(ln.allow) + 1) / ln.rate + 2.0)


def test_a_lane_that_owes_nothing_always_admits_one_record() -> None:
    ln = lane()
    ln.charge(rec(1000), 0.0)
    ln.note(0.0)
    for t in range(1, 40):
        ln.note(float(t))  # busy, nothing confirmed: the pace falls...
    ln.drained(1000, True, 40.0)
    ln.charge(rec(10), 41.0)
    ln.drained(10, False, 100.0)
    assert ln.owed == 0 and ln.admits()  # ...but an empty lane admits


def test_one_slow_answer_lowers_the_pace_by_its_share_of_the_window_only() -> None:
    ln = lane()
    t = 0.0
    ln.charge(rec(10**9), t)  # a backlog: busy throughout
    for _ in range(50):  # 100 kB every 0.1 s: 1 MB/s
        t += 0.1
        ln.drained(100_000, True, t)
    assert ln.rate == pytest.approx(1_000_000, rel=0.05)
    t += 2.0  # one answer took 2 s
    ln.drained(100_000, True, t)
    assert ln.rate >= 0.5 * 1_000_000  # a 2 s gap in a 5 s window
    for _ in range(60):
        t += 0.1
        ln.drained(100_000, True, t)
    assert ln.rate == pytest.approx(1_000_000, rel=0.05)  # and it is forgotten


def test_waiting_for_admission_never_lowers_the_pace() -> None:
    ln = lane()
    ln.charge(rec(1_000_000), 0.0)
    ln.drained(500_000, True, 1.0)
    rate, allow = ln.rate, ln.allow
    ln.charge(rec(int(allow)), 1.0)
    for t in range(2, 20):  # puts refused again and again, nothing resolved
        assert not ln.admits()
        ln.refused(float(t))
    assert (ln.rate, ln.allow) == (rate, allow)


def test_a_shard_that_speeds_up_gets_room_back_at_once() -> None:
    ln = lane()
    t = 0.0
    ln.charge(rec(10**9), t)
    for _ in range(100):
        t += 0.1
        ln.drained(10_000, True, t)  # 100 kB/s
    slow = ln.allow
    for _ in range(10):  # one second at 1 MB/s
        t += 0.1
        ln.drained(100_000, True, t)
    assert ln.allow > 2 * slow


def test_throttles_and_failed_requests_slow_admission() -> None:
    ln = lane()
    t = 0.0
    ln.charge(rec(10**9), t)
    for _ in range(60):
        t += 0.1
        ln.drained(100_000, True, t)
    before = ln.allow
    for _ in range(30):  # throttled throughout: busy, nothing confirmed
        t += 0.1
        ln.note(t)
    assert ln.allow < 0.5 * before


def test_off_measures_the_pace_but_never_holds() -> None:
    ln = lane(None)
    assert ln.allow == math.inf
    ln.charge(rec(1_000_000), 0.0)
    ln.drained(1_000_000, True, 1.0)
    assert ln.rate == pytest.approx(1_000_000)
    ln.charge(rec(10**12), 1.0)
    assert ln.admits() and ln.allow == math.inf


def test_a_record_placed_anew_owes_its_bytes_on_its_new_shard() -> None:
    adm = Admission(TTL, 0.5)
    old, new = adm.lane("s", "shardId-0"), adm.lane("s", "shardId-1")
    record = rec(700)
    old.charge(record, 0.0)
    old.move(record, new, 1.0)
    assert (old.owed, new.owed, record.lane) == (0, 700, new)
    assert old.busy(5.0) == pytest.approx(1.0)  # it stopped being busy when it let go


def test_a_new_shard_starts_at_the_pace_it_is_given() -> None:
    adm = Admission(TTL, 0.5)
    ln = adm.lane("s", "shardId-9", 200_000.0)
    assert ln.allow == pytest.approx(200_000 * 15.0)


def test_holding_and_releasing_are_logged_at_most_once_a_minute() -> None:
    adm = Admission(TTL, 0.5)
    ln = adm.lane("s", "shardId-0")
    ln.charge(rec(1000), 0.0)
    ln.drained(500, True, 1.0)
    ln.charge(rec(10**9), 1.0)
    ln.refused(1.0)
    ln.refused(2.0)
    ln.drained(10**9, True, 3.0)
    ln.charge(rec(10**10), 4.0)
    ln.refused(4.0)  # within the minute: not logged, nor its end
    ln.drained(10**10, True, 5.0)
    assert [event for event, _, _ in adm.notices] == ["admission_holding", "admission_released"]


# -- the engine: per shard, changing nothing -----------------------------------------------


def test_a_held_shard_refuses_its_records_and_another_shard_still_takes_them() -> None:
    eng, _, stream = engine(shards=2, record_ttl=TTL)
    hot, cold = stream.shards
    hot.lane.allow = 1.0  # as if measured: it owes more than it drains in time
    hot.lane.charge(rec(10), 0.0)
    records, size = eng._ledger.records, eng._ledger.bytes
    hot_key = next(f"k{i}" for i in range(1000) if _route(stream, f"k{i}") is hot)
    cold_key = next(f"k{i}" for i in range(1000) if _route(stream, f"k{i}") is cold)
    with pytest.raises(NoRoom):
        eng.accept(stream, b"x" * 100, hot_key, None, 1.0)
    assert (eng._ledger.records, eng._ledger.bytes) == (records, size)  # nothing changed
    assert hot.is_empty() and hot.lane.owed == 10 and hot.lane.holding
    outcome = eng.accept(stream, b"x" * 100, cold_key, None, 1.0)
    assert eng._ledger.records == records + 1
    assert outcome in cold.members  # in the aggregate in formation: charged at its seal
    eng.out.seal(cold)
    assert outcome.lane is cold.lane and cold.lane.owed == 100 + len(cold_key)


def test_a_burst_is_charged_once_per_aggregate_as_owing_from_its_first_record() -> None:
    eng, _, stream = engine(record_ttl=TTL)
    (shard,) = stream.shards
    ln = shard.lane
    outcomes = [eng.accept(stream, b"x" * 100, f"k{i}", None, 2.0 + i) for i in range(5)]
    assert ln.owed == 0 and all(o.lane is None for o in outcomes)
    # the check counts the aggregate in formation beside what the lane owes
    ln.allow = shard.sizer.size
    with pytest.raises(NoRoom):
        eng.accept(stream, b"x" * 100, "k9", None, 7.0)
    ln.allow = math.inf
    eng._ledger.resolve([outcomes[0]], failed("X", "gone", 7.0))  # resolved before the seal
    eng.out.seal(shard)
    owed = sum(o.size for o in outcomes[1:])
    assert ln.owed == owed and all(o.lane is ln for o in outcomes)
    assert ln.busy(10.0) == pytest.approx(8.0)  # owing since the first record's acceptance
    eng._ledger.resolve(outcomes[1:], failed("X", "gone", 10.0))
    assert ln.owed == 0 and ln.busy(20.0) == pytest.approx(8.0)  # idle since
    # a lone record sealed later owes from its acceptance, not from before the lane's idling
    only = eng.accept(stream, b"x" * 100, "k1", None, 9.0)
    eng.out.seal(shard)
    assert only.lane is ln and ln.owed == only.size
    assert ln.busy(20.0) == pytest.approx(8.0 + 10.0)  # busy again since 10.0, not 9.0


def _route(stream: StreamState, key: str) -> ShardBuffer:
    h = hash_key_for(key)
    return next(s for s in stream.shards if s.start <= h <= s.end)


# -- the property: arbitrary drain-rate traces ---------------------------------------------


@dataclass
class Sim:
    """One shard behind an endpoint whose pace follows a trace. Records of ``size`` bytes
    are offered as fast as admission takes them (up to ``caps`` bytes owed); the endpoint
    serves requests of up to ``request`` bytes from the queue's head, one at a time, at
    the trace's pace, answering ``rtt`` after the last byte; a throttled part of a
    request goes back to the head of the queue. A reshard gives new records a new lane,
    started at the old one's pace (as ``ShardMaps.apply_map`` does); the old one's records
    still drain ahead of them."""

    #: (duration, bytes/s, share throttled, a reshard first)
    trace: list[tuple[float, float, float, bool]]
    size: int = 1000
    request: int = 100_000
    rtt: float = 0.05
    caps: int = 64 * 1024 * 1024  # a stand-in for the caps: minutes of this endpoint's work
    dt: float = 0.05
    expired: int = 0
    confirmed: int = 0
    oldest: float = 0.0
    allows: list[float] = field(default_factory=list)

    def run(self, share: float | None) -> Sim:
        adm = Admission(TTL, share)
        ln = adm.lane("s", "shardId-0")
        queue: deque[tuple[float, Outcome]] = deque()  # each record waiting
        flying: list[tuple[float, Outcome]] = []  # the request being served
        served = 0.0
        answer_at = math.inf
        t = 0.0
        per_record = self.size
        for duration, pace, throttled, reshard in self.trace:
            if reshard:  # what waits is placed anew on the new shard, as a reroute does
                old, ln = ln, adm.lane("s", f"shardId-{t}", ln.rate)
                for _, waiting in queue:
                    old.move(waiting, ln, t)
            end = t + duration
            while t < end:
                # admission: as fast as it takes them
                while ln.owed + per_record <= self.caps and ln.admits():
                    record = rec(per_record)
                    queue.append((t, record))
                    ln.charge(record, t)
                # the endpoint
                if not flying and math.isinf(answer_at) and queue:
                    n = max(1, min(len(queue), self.request // per_record))
                    flying = [queue.popleft() for _ in range(n)]
                    served = 0.0
                if flying and math.isinf(answer_at):
                    served += pace * self.dt
                    if served >= len(flying) * per_record:
                        answer_at = t + self.rtt
                if t >= answer_at:
                    adm.answered(self.rtt + len(flying) * per_record / max(pace, 1.0))
                    back = int(len(flying) * throttled)  # its newest records
                    done = flying[: len(flying) - back]
                    for arrival, record in done:
                        if t - arrival > TTL:
                            self.expired += 1
                        self.oldest = max(self.oldest, t - arrival)
                        record.lane.drained(per_record, True, t)
                    self.confirmed += len(done)
                    if back:
                        queue.extendleft(reversed(flying[len(flying) - back :]))
                        for _, record in flying[len(flying) - back :]:
                            record.lane.note(t)
                    flying = []
                    answer_at = math.inf
                if ln.rate:
                    self.allows.append(ln.allow)
                t += self.dt
        return self


# A draining shard: its pace changes by at most 1.6x between levels (within the ratio the
# horizon tolerates: 1 / 0.5 less a round trip), stalls last at most 2 s, and at most half
# of a request is throttled; a reshard now and then.
# The first allowance (FIRST, before any answer) assumes a shard confirms at least FIRST per
# horizon: the slowest level, 1.6x slower and half throttled, still does (60 kB/s / 1.6 / 2
# is 19 kB/s).
levels = st.floats(min_value=60_000, max_value=1_000_000)


@st.composite
def traces(draw: st.DrawFn) -> list[tuple[float, float, float, bool]]:
    base = draw(levels)
    steps = draw(
        st.lists(
            st.tuples(
                st.floats(min_value=0.5, max_value=40.0),  # how long
                st.floats(min_value=1 / 1.6, max_value=1.0),  # pace, of the base
                st.sampled_from([0.0, 0.0, 0.1, 0.5]),  # throttled share
                st.booleans(),  # a stall first
                st.floats(min_value=0.1, max_value=2.0),  # its length
                st.sampled_from([False, False, False, True]),  # a reshard
            ),
            min_size=1,
            max_size=4,
        )
    )
    out: list[tuple[float, float, float, bool]] = []
    for duration, factor, throttled, stall, length, reshard in steps:
        if stall:
            out.append((length, 0.0, 0.0, False))
        out.append((duration, base * factor, throttled, reshard))
    out.append((45.0, base, 0.0, False))  # then it drains what is left
    return out


@settings(max_examples=25, deadline=None)
@given(traces())
def test_no_record_of_a_draining_shard_expires_in_the_queue(
    trace: list[tuple[float, float, float, bool]],
) -> None:
    sim = Sim(trace).run(0.5)
    assert sim.expired == 0, sim.oldest
    assert sim.confirmed > 0
    # never pinned at a cap (infinite) nor at zero while records flow
    assert all(0 < allow < math.inf for allow in sim.allows)
    assert max(sim.allows) >= 1000  # room for a record more than the one in hand


def test_without_admission_the_same_shard_expires_records_in_its_queue() -> None:
    """The contrast: a 100 kB/s shard offered records as fast as the caps allow."""
    trace = [(60.0, 100_000.0, 0.0, False)]
    off = Sim(trace).run(None)
    on = Sim(trace).run(0.5)
    assert off.expired > 0 and on.expired == 0
    assert on.confirmed >= 0.95 * off.confirmed  # and it confirms as much


def test_the_window_is_not_longer_than_the_horizon() -> None:
    assert WINDOW < 0.5 * TTL


def test_time_queued_at_the_endpoint_is_not_taken_from_the_budget_twice() -> None:
    """A request that waited 10 s in the endpoint's queue, on a path whose idle round trip
    is 0.5 s: the budget loses the 0.5 s. The 9.5 s queued are the backlog's draining time,
    which a lane's ``owed / rate`` counts already."""
    adm = Admission(TTL, 0.5)
    adm.answered(10.0, idle=0.5)
    assert adm.budget() == pytest.approx(15.0 - 0.5)
    adm.answered(0.2, idle=0.5)  # faster than the floor learned: the time seen
    assert adm.rtt == pytest.approx(0.5 + (0.2 - 0.5) * 0.125)
