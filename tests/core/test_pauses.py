"""``record_ttl`` counts running time: the pauses (a frozen Lambda) are left out (``_pauses``)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from kinesis_trio._core._pauses import Pauses


def expired(p: Pauses, since: float, now: float) -> bool:
    return since + p.ttl <= p.ttl_now(now)


def test_without_a_pause_the_clock_is_the_clock() -> None:
    p = Pauses(30.0)
    assert p.ttl_now(123.5) == 123.5
    assert not expired(p, 100.0, 129.9)
    assert expired(p, 100.0, 130.0)


def test_a_freeze_longer_than_the_ttl_expires_nothing() -> None:
    p = Pauses(30.0)
    p.begin(10.0)  # the handler returned 10 s after the record was put
    assert p.paused
    assert not expired(p, 0.0, 600.0)  # a timer firing late, before the next invocation
    assert p.end(610.0) == 600.0
    assert not expired(p, 0.0, 629.9)  # 29.9 s of running time
    assert expired(p, 0.0, 630.0)  # 30 s of running time


def test_a_record_put_after_a_pause_is_not_helped_by_it() -> None:
    p = Pauses(30.0)
    p.begin(10.0)
    p.end(610.0)
    assert not expired(p, 620.0, 649.9)
    assert expired(p, 620.0, 650.0)


def test_ending_without_a_pause_and_beginning_twice() -> None:
    p = Pauses(5.0)
    assert p.end(3.0) == 0.0
    p.begin(1.0)
    p.begin(2.0)  # already paused: the first start holds
    assert p.end(4.0) == 3.0
    assert not p.paused


def paused_by(
    gaps: list[tuple[float, float]], ttl: float
) -> tuple[Pauses, float, list[tuple[float, float]]]:
    """Pauses of ``ttl`` that ran and paused by turns (``gaps``: each run, then its pause):
    them, the time at the end, and the pauses' spans for the direct count."""
    p = Pauses(ttl)
    t = 0.0
    spans = []
    for run, pause in gaps:
        t += run
        p.begin(t)
        p.end(t + pause)
        if pause > 0:
            spans.append((t, t + pause))
        t += pause
    return p, t, spans


@given(
    gaps=st.lists(
        st.tuples(st.floats(0, 50, allow_nan=False), st.floats(0, 500, allow_nan=False)),
        max_size=8,
    ),
    since=st.floats(0, 400, allow_nan=False),
    ttl=st.floats(0.5, 100, allow_nan=False),
)
def test_expired_exactly_when_the_running_time_reaches_the_ttl(
    gaps: list[tuple[float, float]], since: float, ttl: float
) -> None:
    """Against a direct count: running seconds in [since, now] with the pauses removed."""
    p, t, spans = paused_by(gaps, ttl)
    for now in (t, t + 1.0, t + ttl, since + ttl, since + 2 * ttl + 1):
        if now < since:
            continue
        paused = sum(max(0.0, min(e, now) - max(s, since)) for s, e in spans)
        running = now - since - paused
        if abs(running - ttl) > 1e-6:
            assert expired(p, since, now) == (running >= ttl), (now, running)


@given(
    gaps=st.lists(
        st.tuples(st.floats(0, 0.05, allow_nan=False), st.floats(0, 20, allow_nan=False)),
        min_size=1,
        max_size=64,
    ),
    since=st.floats(0, 400, allow_nan=False),
    ttl=st.floats(0.5, 100, allow_nan=False),
    later=st.floats(0, 200, allow_nan=False),
    open_pause=st.booleans(),
)
def test_many_short_runs_between_pauses(
    gaps: list[tuple[float, float]], since: float, ttl: float, later: float, open_pause: bool
) -> None:
    """A warm Lambda function: many pauses kept, little running time between them (the
    answer without walking the pauses one by one), against the same direct count."""
    p, t, spans = paused_by(gaps, ttl)
    now = t + later
    if open_pause:  # paused at t + later / 2 and not ended yet: time stands still there
        p.begin(t + later / 2)
        spans.append((t + later / 2, now))
    if now < since:
        return
    paused = sum(max(0.0, min(e, now) - max(s, since)) for s, e in spans)
    running = now - since - paused
    if abs(running - ttl) > 1e-6:
        assert expired(p, since, now) == (running >= ttl), (now, running)


def test_pauses_out_of_order_are_walked_one_by_one() -> None:
    """A pause that begins before the last one ended (a clock that went back) is not in
    order: the answer is the walk over the pauses kept, as it was for every pause."""
    p = Pauses(10.0)
    p.begin(100.0)
    p.end(200.0)
    assert p.ttl_now(205.0) == 105.0  # 5 s of running time since 200: all of it counts
    p.begin(50.0)
    p.end(60.0)
    assert p.ttl_now(205.0) == 205.0  # the walk: 145 s of running time since 60
    for i in range(64):  # the pause out of order leaves the kept ones: sums again
        p.begin(300.0 + i)
        p.end(300.5 + i)
    assert p._sums == (363.5, 300.0, 32.0)
    assert not expired(p, 354.0, 364.0)  # 5 s of running time, 5 s of pauses
    assert expired(p, 340.0, 364.0)  # 12 s of running time
