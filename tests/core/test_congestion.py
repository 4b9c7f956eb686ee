"""The concurrency limit and the retry budget (pure; virtual time, no event loop)."""

from __future__ import annotations

import dataclasses
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kinesis_trio._core._congestion import ConcurrencyLimit, RetryBudget, Signal, _Floor
from tests.support.congestion_sim import Server, best_fixed, simulate

KIB, MIB = 1024, 1024 * 1024


def mixed_sizes(count: int, seed: int = 7) -> list[int]:
    """Request sizes like the mixed workload's: 5 KiB to 5 MiB."""
    rng = random.Random(seed)
    return [
        int(rng.choice([5 * KIB, 50 * KIB, 300 * KIB, MIB, 5 * MIB]) * rng.uniform(0.5, 1))
        for _ in range(count)
    ]


def answer(gate: ConcurrencyLimit, start: float, rtt: float, nbytes: int = 1000) -> None:
    assert gate.try_acquire(nbytes)
    gate.observe(start + rtt, start, nbytes, Signal.ANSWER)
    gate.release(nbytes)


def fill_and_answer(gate: ConcurrencyLimit, start: float, rtt: float) -> None:
    """Send until the gate refuses (the limit binds), then answer them all."""
    while gate.try_acquire():
        pass
    for _ in range(gate.in_flight):
        gate.observe(start + rtt, start, 1000, Signal.ANSWER)
        gate.release()


# -- the limit, one rule at a time ------------------------------------------------------


def test_slow_start_grows_by_one_per_answer_while_requests_wait() -> None:
    gate = ConcurrencyLimit(24, initial=1)
    assert gate.allowed == 1
    answer(gate, 0.0, 0.01)
    assert gate.allowed == 1  # nothing waited: no reason to grow
    assert gate.try_acquire() and not gate.try_acquire()  # the second one waits
    gate.observe(0.01, 0.0, 1000, Signal.ANSWER)
    gate.release()
    assert gate.allowed == 2
    assert ConcurrencyLimit(24).allowed == 8  # where it starts by default


def test_a_fast_endpoint_takes_the_limit_to_the_ceiling_quickly() -> None:
    gate = ConcurrencyLimit(24, initial=1)
    now = 0.0
    for _ in range(40):  # the collector always has a request waiting
        while gate.try_acquire():
            pass
        for _ in range(gate.in_flight):
            gate.observe(now + 0.002, now, 50 * KIB, Signal.ANSWER)
            gate.release()
        now += 0.002
        if gate.allowed == 24:
            break
    assert gate.allowed == 24 and now <= 0.02  # within ten round trips


def test_large_requests_on_a_fast_endpoint_are_not_congestion() -> None:
    """A 5 MiB request takes longer than a 5 KiB one; what size explains is no queue."""
    gate = ConcurrencyLimit(24, initial=8)
    gate._slow_start = False
    for i in range(50):
        small, large = 5 * KIB, 5 * MIB
        answer(gate, i * 1.0, 0.010 + small * 1e-8, small)
        answer(gate, i * 1.0 + 0.5, 0.010 + large * 1e-8, large)
    assert gate.cuts == 0 and gate.allowed == 8


def test_a_round_trip_twice_the_floor_cuts_before_any_timeout() -> None:
    gate = ConcurrencyLimit(24, initial=16)
    answer(gate, 0.0, 0.500)  # the floor
    answer(gate, 1.0, 1.500)  # queued: three times the floor, far from the 12 s timeout
    assert gate.allowed == 12 and gate.cuts == 1


def test_a_short_queue_is_no_reason_to_cut() -> None:
    """Small requests on a fast endpoint: waiting of a few tens of milliseconds (a busy
    host, a GC) is no queue worth fewer requests; 0.4 s is."""
    gate = ConcurrencyLimit(24, initial=16)
    answer(gate, 0.0, 0.002)
    answer(gate, 1.0, 0.300)
    assert gate.cuts == 0
    answer(gate, 2.0, 0.500)
    assert gate.cuts == 1 and gate.allowed == 12


def test_one_cut_per_round_trip() -> None:
    gate = ConcurrencyLimit(24, initial=16)
    answer(gate, 0.0, 0.05)
    for _ in range(8):
        assert gate.try_acquire()
    for _ in range(8):  # all sent before the first cut: one cut for all of them
        gate.observe(1.5, 1.0, 1000, Signal.ANSWER)
        gate.release()
    assert gate.cuts == 1 and gate.allowed == 12
    answer(gate, 1.6, 0.5)  # sent after it: news about the new limit
    assert gate.cuts == 2 and gate.allowed == 9


def test_one_slow_answer_in_a_round_is_a_hiccup_not_a_queue() -> None:
    """A queue makes every request of a round wait; a pause of the endpoint (a GC, a busy
    host) delays one of them. Only the round's least wait decides, unless it is large
    next to the timeout."""
    gate = ConcurrencyLimit(8, initial=8)  # under the timeout cap (12 s / 2 / 0.5 s)
    answer(gate, 0.0, 0.500)  # the floor; a round is over, the next one starts
    for _ in range(4):
        assert gate.try_acquire()
    for late in (0.01, 0.01, 0.01, 0.6):  # the first ends that round; 0.6 s late
        gate.observe(1.5 + late, 1.0, 1000, Signal.ANSWER)
        gate.release()
    answer(gate, 2.2, 0.510)  # sent in this round: it is over, its least wait was 10 ms
    assert gate.cuts == 0 and gate.allowed == 8
    for _ in range(4):  # now every one of them waits: a queue
        assert gate.try_acquire()
    for _ in range(4):
        gate.observe(4.1, 3.0, 1000, Signal.ANSWER)  # 0.6 s late, every one
        gate.release()
    assert gate.cuts == 1 and gate.allowed == 6


def test_a_wait_large_next_to_the_timeout_cuts_at_once() -> None:
    gate = ConcurrencyLimit(24, initial=16, timeout=6.0)
    answer(gate, 0.0, 0.050)  # the floor; a round is over
    answer(gate, 0.1, 0.050)  # a new round starts at 0.15
    for _ in range(2):
        assert gate.try_acquire()
    gate.observe(1.0, 0.12, 1000, Signal.ANSWER)  # sent before the round, 0.83 s late
    gate.release()
    assert gate.cuts == 1 and gate.allowed == 12  # not left for the round to end
    gate.observe(1.0, 0.12, 1000, Signal.ANSWER)
    gate.release()
    assert gate.cuts == 1  # one cut per round trip still


def test_beyond_the_largest_size_seen_the_floor_grows_at_most_with_size() -> None:
    floor = _Floor()
    floor.learn(1000, 0.010)
    floor.learn(50_000, 0.050)
    floor.learn(100_000, 2.000)  # a sample that queued: a steep last segment
    assert floor(50_000) == pytest.approx(0.050)
    assert floor(100_000) == pytest.approx(2.0)
    assert floor(1_000_000) == pytest.approx(20.0)  # not 2 + 1.95 s / 50 KB * 900 KB


def test_a_size_first_seen_while_round_trips_are_high_is_no_floor() -> None:
    """A new size answered while the gate is cutting for high round trips met the queue
    or the slow endpoint (a slowdown's backlog is sent as new, larger requests): it is not
    learned, and the size keeps its prediction until a round trip after the episode."""
    gate = ConcurrencyLimit(24, timeout=6.0)
    answer(gate, 0.0, 0.010, 1000)
    answer(gate, 1.0, 0.050, 50_000)
    predicted = gate.expected(200_000)
    assert gate.try_acquire(1000)
    gate.observe(3.0, 2.0, 1000, Signal.ANSWER)  # a second late: cut, round trips high
    gate.release(1000)
    assert gate.cuts == 1
    answer(gate, 3.0, 2.0, 200_000)  # first seen now, 2 s
    assert gate.expected(200_000) == pytest.approx(predicted)
    answer(gate, 5.0, 0.010, 1000)  # prompt again: the episode is over
    answer(gate, 6.0, 0.150, 200_000)
    assert gate.expected(200_000) == pytest.approx(0.150)


def test_timeouts_5xx_and_resets_halve_it_and_neutral_errors_do_not() -> None:
    gate = ConcurrencyLimit(24, initial=24)
    assert gate.try_acquire()
    gate.observe(12.0, 0.0, 1000, Signal.OVERLOAD)
    gate.release()
    assert gate.allowed == 12
    assert gate.try_acquire()
    gate.observe(13.0, 12.5, 1000, Signal.NEUTRAL)
    gate.release()
    assert gate.allowed == 12


def test_the_limit_stays_between_one_and_the_ceiling() -> None:
    gate = ConcurrencyLimit(3, initial=10)
    assert gate.allowed == 3
    for i in range(20):
        assert gate.try_acquire()
        gate.observe(i + 12.0, float(i), 1000, Signal.OVERLOAD)
        gate.release()
    assert gate.allowed == 1 and gate.limit >= 1.0


def test_a_fixed_limit_never_moves() -> None:
    gate = ConcurrencyLimit(4, adaptive=False)
    assert gate.allowed == 4
    gate.observe(20.0, 0.0, 1000, Signal.OVERLOAD)
    answer(gate, 30.0, 0.001)
    answer(gate, 31.0, 5.0)
    assert gate.allowed == 4 and gate.cuts == 0


def test_an_endpoint_slower_for_good_is_relearned_at_the_floor() -> None:
    gate = ConcurrencyLimit(8, initial=1, rebase_after=5.0)
    gate._slow_start = False
    answer(gate, 0.0, 0.100)
    now = 1.0
    while now < 16.0:  # ten times slower from now on, at a limit of 1: not our queue
        answer(gate, now, 1.000)
        now += 1.2
    assert gate.expected(1000) == pytest.approx(1.000)
    assert gate.allowed == 1
    for _ in range(6):  # and now it may grow again (a quarter request per answer at 1)
        fill_and_answer(gate, now, 1.0)
        now += 1.2
    assert gate.allowed >= 2


def test_the_floor_and_recovery_are_logged_at_most_once_a_minute() -> None:
    gate = ConcurrencyLimit(4, initial=4)
    for t in (0.0, 12.0, 24.0):
        assert gate.try_acquire()
        gate.observe(t + 12.0, t, 1000, Signal.OVERLOAD)
        gate.release()
    assert gate.notices == [("request_concurrency_at_floor", 1.0)]
    gate.notices.clear()
    gate._slow_start = True
    for i in range(4):  # recovers within the minute: said later, once
        fill_and_answer(gate, 40.0 + i, 0.01)
    assert gate.allowed > 1 and gate.notices == []
    fill_and_answer(gate, 100.0, 0.01)
    assert [event for event, _ in gate.notices] == ["request_concurrency_recovered"]


@given(
    st.lists(
        st.tuples(
            st.sampled_from(list(Signal)),
            st.floats(0.0, 20.0),
            st.integers(0, 5 * MIB),
            st.booleans(),
        ),
        max_size=200,
    ),
    st.integers(1, 64),
)
def test_any_sequence_of_signals_keeps_the_limit_in_bounds(
    events: list[tuple[Signal, float, int, bool]], ceiling: int
) -> None:
    gate = ConcurrencyLimit(ceiling)
    now = 0.0
    for signal, rtt, nbytes, wait in events:
        if not gate.try_acquire():
            continue
        if wait and gate.try_acquire():  # refused when full: the limit binds
            gate.release()
        now += 0.01
        gate.observe(now + rtt, now, nbytes, signal)
        gate.release()
        assert 1 <= gate.allowed <= ceiling
        assert gate.in_flight == 0
        if signal is Signal.ANSWER:  # the floor is never above what was seen
            assert gate.expected(0) <= rtt + 1e-9


# -- against a busy server (virtual time) -----------------------------------------------


@pytest.mark.parametrize("workers", [1, 4, 64])
def test_adaptive_finishes_like_the_best_fixed_limit_without_timeouts(workers: int) -> None:
    # 1,500 requests: the careful start (8 MiB before anything is learned) costs about a
    # tenth of a second once, a fifth of a 300-request run on 64 workers
    sizes = mixed_sizes(1500)
    server = Server(workers, 0.005, 4e-8)  # 5 MiB in 0.2 s: the timeout cap is above 24
    best, fixed = best_fixed(sizes, server)
    run = simulate(sizes, server, ConcurrencyLimit(24))
    assert run.timeouts == 0
    assert run.elapsed <= fixed.elapsed * 1.05, (best, fixed.elapsed, run.elapsed)


def test_the_kpl_default_times_out_where_adaptive_does_not() -> None:
    """A one-worker server at 2.5 MB/s: 24 requests at once pass the timeout while they
    queue, and each timeout sends its records into the same queue again."""
    sizes = mixed_sizes(150)
    server = Server(1, 0.02, 4e-7)
    kpl = simulate(sizes, server, ConcurrencyLimit(24, adaptive=False), give_up=2000.0)
    assert kpl.timeouts >= 10
    run = simulate(sizes, server, ConcurrencyLimit(24))
    assert run.timeouts == 0 and run.elapsed < kpl.elapsed
    _, fixed = best_fixed(sizes, server)
    assert run.elapsed <= fixed.elapsed * 1.05


@pytest.mark.parametrize("workers", [1, 4, 64])
def test_a_server_that_slows_down_and_recovers(workers: int) -> None:
    sizes = mixed_sizes(300)
    server = Server(workers, 0.005, 4e-8)
    _, calm = best_fixed(sizes, server)
    t0, t1 = calm.elapsed * 0.25, calm.elapsed * 0.6

    def slowdown(t: float) -> float:
        return 10.0 if t0 <= t < t1 else 1.0

    slow = dataclasses.replace(server, slowdown=slowdown)
    best, fixed = best_fixed(sizes, slow)
    run = simulate(sizes, slow, ConcurrencyLimit(24))
    assert run.timeouts == 0
    assert run.elapsed <= fixed.elapsed * 1.10, (best, fixed.elapsed, run.elapsed)
    after = [limit for t, limit in run.limits if t > t1 + (run.elapsed - t1) / 2]
    assert max(after) >= min(workers, 24) * 3 // 4  # back up once the server recovered


@settings(max_examples=40, deadline=None)
@given(
    st.integers(1, 64),
    st.floats(0.001, 0.05),
    st.floats(1e-8, 4e-8),
    st.integers(0, 1000),
)
def test_no_timeouts_and_near_best_on_any_server(
    workers: int, per_request: float, per_byte: float, seed: int
) -> None:
    """Wherever 24 of the largest requests fit in half the timeout served one at a time
    (5 MiB in at most 0.25 s), the adaptive limit never lets requests queue into a timeout
    and finishes near the best fixed limit. (Slower large requests: see the next test.)"""
    sizes = mixed_sizes(200, seed)
    server = Server(workers, per_request, per_byte)
    _, fixed = best_fixed(sizes, server)
    run = simulate(sizes, server, ConcurrencyLimit(24))
    assert run.timeouts == 0
    # slow start from 1 to 24 costs about log2(24) round trips of the largest request
    startup = 5 * (per_request + per_byte * 5 * MIB)
    assert run.elapsed <= fixed.elapsed * 1.15 + startup


# -- the retry budget ---------------------------------------------------------------------


def test_timeouts_cost_more_than_errors_and_successes_refill() -> None:
    budget = RetryBudget(capacity=30.0, refill_per_s=1.0)
    assert budget.withdraw(RetryBudget.TIMEOUT_COST, 0.0)
    assert budget.withdraw(RetryBudget.TIMEOUT_COST, 0.0)
    assert budget.withdraw(RetryBudget.ERROR_COST, 0.0)
    assert budget.level == pytest.approx(5.0)
    assert not budget.withdraw(RetryBudget.TIMEOUT_COST, 0.0)
    assert budget.level == pytest.approx(5.0)  # a refusal costs nothing
    budget.deposit(RetryBudget.TIMEOUT_COST, 0.0)  # a retried request succeeded
    assert budget.withdraw(RetryBudget.TIMEOUT_COST, 0.0)


def test_time_alone_refills_so_a_retry_is_never_held_for_good() -> None:
    budget = RetryBudget(capacity=20.0, refill_per_s=2.0, now=0.0)
    assert budget.withdraw(20.0, 0.0)
    assert not budget.withdraw(10.0, 1.0)
    assert budget.ready_at(10.0, 1.0) == pytest.approx(5.0)
    assert not budget.withdraw(10.0, 4.99)
    assert budget.withdraw(10.0, 5.0)


def test_the_budget_says_when_it_runs_dry_and_when_it_recovers() -> None:
    budget = RetryBudget(capacity=50.0, refill_per_s=1.0)
    for _ in range(5):
        budget.withdraw(10.0, 0.0)
    assert not budget.withdraw(10.0, 0.0)
    assert [event for event, _ in budget.notices] == ["retry_budget_empty"]
    budget.notices.clear()
    budget.deposit(20.0, 61.0)  # level 50 again (capped): recovered, a minute later
    assert [event for event, _ in budget.notices] == ["retry_budget_recovered"]


@given(st.lists(st.tuples(st.booleans(), st.floats(0.0, 3.0), st.sampled_from([5.0, 10.0, 1.0]))))
def test_the_level_stays_between_zero_and_the_capacity(
    steps: list[tuple[bool, float, float]],
) -> None:
    budget = RetryBudget(capacity=100.0, refill_per_s=3.0)
    now = 0.0
    for withdraw, dt, amount in steps:
        now += dt
        if withdraw:
            paid = budget.withdraw(amount, now)
            assert paid or budget.level < amount
        else:
            budget.deposit(amount, now)
        assert 0.0 <= budget.level <= 100.0
        assert budget.ready_at(amount, now) >= now


def test_what_is_in_flight_fits_in_half_the_timeout_for_one_worker() -> None:
    """Requests go while one worker would finish all of them within half the timeout:
    before anything is learned, 8 MiB (a sixteenth of it per request); then by the round
    trips learned for their sizes."""
    gate = ConcurrencyLimit(24, timeout=6.0)
    assert gate.try_acquire(5 * MIB)
    assert not gate.try_acquire(5 * MIB)  # 10 MiB blind: more than 8
    # 8 MiB, or 16 requests of any size, per half timeout: 5 MiB + 1 MiB + 1 KiB fit
    assert gate.try_acquire(MIB) and gate.try_acquire(KIB)
    assert not gate.try_acquire(KIB * 1024 + 1)  # a fourth request: over the line
    for size in (5 * MIB, MIB, KIB):
        gate.release(size)
    # learned: 5 MiB takes 0.9 s alone, 1 KiB 10 ms; three fit (2.7 s), a fourth does not
    answer(gate, 0.0, 0.010, KIB)
    answer(gate, 0.0, 0.9, 5 * MIB)
    for _ in range(3):
        assert gate.try_acquire(5 * MIB)
    assert not gate.try_acquire(5 * MIB)
    assert gate.try_acquire(KIB)  # a small one still fits beside them
    assert gate.in_flight == 4 and gate.allowed == 8  # the count did not bind


def test_prompt_answers_within_one_round_trip_prove_parallel_workers() -> None:
    """Three 5 MiB requests of a second each, sent together and all answered in a second:
    one worker could not have done that, so the cap grows (to twice what was proven)."""
    gate = ConcurrencyLimit(24, timeout=6.0)
    answer(gate, 0.0, 1.0, 5 * MIB)
    assert gate.workers == 1.0  # one request alone proves nothing
    for _ in range(3):
        assert gate.try_acquire(5 * MIB)
    assert not gate.try_acquire(5 * MIB)  # 4 s of one worker's work: over half the timeout
    for _ in range(3):
        gate.observe(2.0, 1.0, 5 * MIB, Signal.ANSWER)
        gate.release(5 * MIB)
    assert gate.workers == pytest.approx(2 * 3 / 1.025)
    for _ in range(5):
        assert gate.try_acquire(5 * MIB)


def test_requests_that_only_overlap_prove_parallel_workers() -> None:
    """Two 5 MiB requests of a second each, the second sent half a second after the first,
    both answered promptly: neither is within the other's round trip, but one worker could
    not have done 2 s of work in the 1.5 s from the first's start to the second's answer.
    This is how a steady rate sends them: one request per linger window, never two at once."""
    gate = ConcurrencyLimit(24, timeout=6.0)
    answer(gate, 0.0, 1.0, 5 * MIB)
    assert gate.try_acquire(5 * MIB)  # sent at 1.0
    assert gate.try_acquire(5 * MIB)  # sent at 1.5
    gate.observe(2.0, 1.0, 5 * MIB, Signal.ANSWER)
    gate.release(5 * MIB)
    assert gate.workers == 1.0  # one second of work in one second: nothing yet
    gate.observe(2.5, 1.5, 5 * MIB, Signal.ANSWER)
    gate.release(5 * MIB)
    assert gate.workers == pytest.approx(2 * 2 / 1.525)


def test_requests_one_worker_served_in_turn_prove_nothing() -> None:
    """The same two requests on one worker: the second waits for the first (answered at
    2.5 s after 1 s of work of its own, having waited half a second), which is no prompt
    answer; and back to back without waiting, 2 s of work take 2 s."""
    gate = ConcurrencyLimit(24, timeout=6.0)
    answer(gate, 0.0, 1.0, 5 * MIB)
    for start, end in ((1.0, 2.0), (1.5, 3.0), (3.0, 4.0), (4.0, 5.0)):
        assert gate.try_acquire(5 * MIB)
        gate.observe(end, start, 5 * MIB, Signal.ANSWER)
        gate.release(5 * MIB)
    assert gate.workers == 1.0


def test_a_queue_of_one_worker_proves_nothing() -> None:
    """The same three requests on one worker come back after 1, 2 and 3 s: no proof."""
    gate = ConcurrencyLimit(24, timeout=6.0)
    answer(gate, 0.0, 1.0, 5 * MIB)
    for _ in range(3):
        assert gate.try_acquire(5 * MIB)
    for end in (2.0, 3.0, 4.0):
        gate.observe(end, 1.0, 5 * MIB, Signal.ANSWER)
        gate.release(5 * MIB)
    assert gate.workers == 1.0


def test_a_cut_takes_back_proven_parallelism() -> None:
    gate = ConcurrencyLimit(24, timeout=6.0)
    answer(gate, 0.0, 1.0, 5 * MIB)
    for _ in range(3):
        assert gate.try_acquire(5 * MIB)
    for _ in range(3):
        gate.observe(2.0, 1.0, 5 * MIB, Signal.ANSWER)
        gate.release(5 * MIB)
    proven = gate.workers
    assert gate.try_acquire(5 * MIB)
    gate.observe(8.0, 2.0, 5 * MIB, Signal.OVERLOAD)
    gate.release(5 * MIB)
    assert gate.workers == pytest.approx(proven / 2)


@settings(max_examples=60, deadline=None)
@given(st.floats(0.001, 0.4), st.floats(1e-8, 5e-7), st.integers(0, 1000))
def test_one_worker_never_queues_into_the_timeout(
    per_request: float, per_byte: float, seed: int
) -> None:
    """Whatever the service time (5 MiB in up to 3 s, kinesis-local's range), with the
    producer's 6 s timeout, a server that works one at a time never times a request out:
    no answer of it proves a second worker."""
    sizes = mixed_sizes(150, seed)
    gate = ConcurrencyLimit(24, timeout=6.0)
    run = simulate(sizes, Server(1, per_request, per_byte), gate, timeout=6.0)
    assert run.timeouts == 0


@pytest.mark.parametrize("per_byte", [2e-7, 4e-7])
def test_second_long_requests_on_a_parallel_server_go_side_by_side(per_byte: float) -> None:
    """5 MiB in one or two seconds on 64 workers: prompt answers prove the workers, and the
    defaults finish within 1.36x and 1.21x of fixed 24 (the timeout cap alone: 2.7x and
    5.6x). The rest is the careful start: workers are proven a round trip at a time."""
    sizes = mixed_sizes(300)
    server = Server(64, 0.005, per_byte)
    _, fixed = best_fixed(sizes, server)
    run = simulate(sizes, server, ConcurrencyLimit(24))
    assert run.timeouts == 0
    assert run.elapsed <= fixed.elapsed * 1.5, (fixed.elapsed, run.elapsed)


def test_a_first_sample_below_the_floor_is_learned_even_while_stuck() -> None:
    """The example hypothesis found in CI: after a slow answer (round trips high, cut for)
    a new size answered faster than the floor extrapolated for it is learned at once (the
    floor is never above what was seen); a slower first sample still is not."""
    gate = ConcurrencyLimit(1)
    now = 0.0
    for rtt, nbytes in ((1.0, 1), (2.0, 1), (0.0, 0)):
        assert gate.try_acquire()
        now += 0.01
        gate.observe(now + rtt, now, nbytes, Signal.ANSWER)
        gate.release()
    assert gate.expected(0) == 0.0
