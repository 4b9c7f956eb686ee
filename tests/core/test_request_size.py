"""The largest request the path carries (``ConcurrencyLimit.request_bytes``): measured from
answers, from requests too slow for their deadline and from 413s (pure, time passed in)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from kinesis_trio._core._congestion import MIN_REQUEST, ConcurrencyLimit, Signal

MIB = 1024 * 1024
FULL = 5 * MIB
TIMEOUT = 6.0


def gate() -> ConcurrencyLimit:
    return ConcurrencyLimit(24, timeout=TIMEOUT)


def answer(limit: ConcurrencyLimit, start: float, nbytes: int, rtt: float) -> float:
    limit.try_acquire(nbytes)
    limit.release(nbytes)
    limit.observe(start + rtt, start, nbytes, Signal.ANSWER)
    return start + rtt


def test_nothing_learned_sets_no_bound() -> None:
    assert gate().request_bytes(FULL) == FULL


def test_a_fast_endpoint_keeps_full_requests() -> None:
    limit = gate()
    now = answer(limit, 0.0, 10_000, 0.05)
    answer(limit, now, FULL, 0.4)
    assert limit.request_bytes(FULL) == FULL


def test_small_requests_with_a_long_round_trip_set_no_bound() -> None:
    """A far endpoint (200 ms) answering small requests says nothing of large ones."""
    limit = gate()
    now = 0.0
    for size in (1_000, 4_000, 30_000):
        now = answer(limit, now, size, 0.2 + size * 1e-8)
    assert limit.request_bytes(FULL) == FULL


def test_a_slow_link_shrinks_requests_to_what_it_carries_in_half_the_timeout() -> None:
    """400 kB/s up: 5 MiB of records (6.7 MB of JSON) took 17.5 s; the next requests are
    what the link carries in 3 s, and a request of that size answered in 3 s keeps it."""
    limit = gate()
    rate = 400_000 * 3 / 4  # records' bytes per second (base64 on the wire)
    now = answer(limit, 0.0, FULL, FULL / rate)
    cap = limit.request_bytes(FULL)
    assert 0.8 * rate * TIMEOUT / 2 <= cap <= rate * TIMEOUT / 2
    answer(limit, now, cap, 0.05 + cap / rate)
    assert 0.8 * rate * TIMEOUT / 2 <= limit.request_bytes(FULL) <= rate * TIMEOUT / 2


def test_a_path_that_gets_faster_gives_room_back() -> None:
    """The link got fast: each answer, of the size the bound allows, moves it up, until full
    requests go again (within a few round trips; the old slow sample is replaced)."""
    limit = gate()
    now = answer(limit, 0.0, FULL, 20.0)
    cap = limit.request_bytes(FULL)
    sizes = [cap]
    while cap < FULL and len(sizes) < 30:
        now = answer(limit, now, cap, 0.05 + cap / 10e6)  # 10 MB/s now
        cap = limit.request_bytes(FULL)
        assert cap > sizes[-1]
        sizes.append(cap)
    assert cap == FULL, sizes


def test_a_request_too_slow_for_its_deadline_halves_the_bound_and_answers_probe_up() -> None:
    limit = gate()
    limit.too_slow(FULL)
    assert limit.request_bytes(FULL) == FULL // 2
    limit.too_slow(FULL // 2)
    assert limit.request_bytes(FULL) == FULL // 4
    now = answer(limit, 0.0, FULL // 4, 1.0)  # back well within half the timeout
    assert limit.request_bytes(FULL) == FULL // 2
    answer(limit, now, FULL // 2, 2.0)
    assert limit.request_bytes(FULL) == FULL


def test_a_413_bounds_requests_to_half_the_refused_size_for_good() -> None:
    limit = gate()
    limit.refused(4 * MIB)
    assert limit.request_bytes(FULL) == 2 * MIB
    limit.refused(2 * MIB)
    assert limit.request_bytes(FULL) == MIB
    answer(limit, 0.0, MIB, 0.1)
    assert limit.request_bytes(FULL) == MIB


def test_the_bound_is_never_under_the_minimum() -> None:
    limit = gate()
    for _ in range(30):
        limit.too_slow(limit.request_bytes(FULL))
    assert limit.request_bytes(FULL) == MIN_REQUEST
    assert limit.request_bytes(1000) == 1000  # nor over the collector's own


@given(
    st.lists(
        st.tuples(st.integers(1_000, FULL), st.floats(0.001, 60.0), st.sampled_from("ast")),
        max_size=30,
    )
)
def test_the_bound_stays_within_its_limits(events: list[tuple[int, float, str]]) -> None:
    """Whatever comes back, the bound is between the minimum and the collector's size, and
    a size the floor says an idle path carries in half the timeout is never refused by it."""
    limit = gate()
    now = 0.0
    for size, rtt, kind in events:
        if kind == "a":
            now = answer(limit, now, size, rtt)
        elif kind == "s":
            limit.too_slow(size)
        else:
            limit.refused(size)
        cap = limit.request_bytes(FULL)
        assert MIN_REQUEST <= cap <= FULL
