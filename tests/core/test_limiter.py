"""Token buckets and the AIMD shard limiter (pure: time is passed in)."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from kinesis_trio._core._limiter import PACED_FLOOR, ShardLimiter, TokenBucket, paced_size
from tests.support.engine import engine, sealed, shell_of, throttled_answer


def test_bucket_refills_up_to_capacity() -> None:
    bucket = TokenBucket(rate=10, capacity=10, now=0.0)
    assert bucket.wait_time(10, 0.0) == 0.0
    bucket.take(10, 0.0)
    assert bucket.wait_time(5, 0.0) == 0.5
    assert bucket.wait_time(5, 0.5) == 0.0
    assert bucket.wait_time(10, 100.0) == 0.0
    assert bucket.tokens == 10  # capped


@given(
    st.lists(st.tuples(st.integers(1, 500), st.integers(1, 300_000)), min_size=1, max_size=200),
    st.sampled_from([50.0, 100.0, 150.0]),
)
def test_following_the_waits_never_exceeds_the_rate(
    batches: list[tuple[int, int]], percent: float
) -> None:
    limiter = ShardLimiter(percent, now=0.0)
    now = 0.0
    sent_records = sent_bytes = 0
    for records, size in batches:
        now += limiter.reserve(records, size, now)
        sent_records += records
        sent_bytes += size
        # one second of burst (the bucket) plus the refill since the start
        share = percent / 100
        assert sent_records <= 1000 * share * (1 + now) + records
        assert sent_bytes <= 1048576 * share * (1 + now) + size


def test_sustained_rate_matches_the_limit() -> None:
    limiter = ShardLimiter(100, now=0.0)
    now = 0.0
    for _ in range(10_000):  # 10 records a batch: 100,000 records
        now += limiter.reserve(10, 10 * 200, now)
    # 100,000 records at 1000/s, the first 1000 from the full bucket
    assert 98.9 <= now <= 99.1


def test_throttling_halves_the_rate_and_success_restores_it() -> None:
    limiter = ShardLimiter(100, now=0.0)
    assert limiter.records_rate == 1000
    limiter.on_throttled(1.0)
    assert limiter.records_rate == 500
    limiter.on_throttled(1.05)  # within decrease_interval: counted, not halved again
    assert limiter.records_rate == 500 and limiter.throttles == 2
    limiter.on_throttled(1.5)
    assert limiter.records_rate == 250
    limiter.on_success(3.5)  # 2 s later: +0.2
    assert abs(limiter.multiplier - 0.45) < 1e-9
    limiter.on_success(100.0)
    assert limiter.multiplier == 1.0 and limiter.records_rate == 1000


def test_multiplier_has_a_floor() -> None:
    limiter = ShardLimiter(150, now=0.0)
    for i in range(100):
        limiter.on_throttled(i * 1.0)
    assert limiter.multiplier == limiter.min_multiplier
    assert limiter.records_rate > 0


def test_admit_lets_through_what_fits_and_waits_for_the_rest() -> None:
    limiter = ShardLimiter(100, now=0.0)
    sizes = [4000] * 500  # 2 MB: twice the bytes bucket
    n = limiter.admit(sizes, 0.0)
    assert n == 1048576 // 4000
    assert limiter.admit(sizes[n:], 0.0) == 0
    # it waits for a tenth of a second's worth (26 records of 4000 bytes), not for one
    wait = limiter.wait_time(sizes[n:], 0.0)
    worth = int(0.1 * 1048576) // 4000
    assert abs(wait - (worth * 4000 - 1048576 % 4000) / 1048576) < 2e-6
    assert limiter.admit(sizes[n:], wait) == worth


def test_admit_records_limit_and_oversized_record() -> None:
    limiter = ShardLimiter(100, now=0.0)
    assert limiter.admit([10] * 1500, 0.0) == 1000
    assert limiter.admit([10], 0.0) == 0
    assert limiter.admit([10], 0.001) == 1
    small = ShardLimiter(50, now=0.0)  # 512 KiB bucket
    assert small.admit([1_000_000], 0.0) == 1  # larger than the bucket: goes when full
    assert small.admit([1_000_000], 0.5) == 0
    assert small.wait_time([1_000_000], 0.5) > 0


@given(
    st.lists(st.integers(1, 1_048_576), min_size=1, max_size=300),
    st.sampled_from([50.0, 100.0, 150.0]),
)
def test_admitting_never_sends_more_than_the_budget(sizes: list[int], percent: float) -> None:
    limiter = ShardLimiter(percent, now=0.0)
    share = percent / 100
    capacity = 1048576 * share  # one second's worth
    now = 0.0
    sent_records = sent_bytes = oversized = 0
    pending = list(sizes)
    while pending:
        n = limiter.admit(pending, now)
        sent_records += n
        # a record bigger than the bucket goes alone when it is full, one per second
        oversized += sum(1 for size in pending[:n] if size > capacity)
        sent_bytes += sum(size for size in pending[:n] if size <= capacity)
        pending = pending[n:]
        assert sent_records <= 1000 * share * (1 + now)
        assert sent_bytes <= capacity * (1 + now)
        assert oversized <= 1 + now
        if pending:
            now += limiter.wait_time(pending, now)


@given(
    st.lists(
        st.tuples(st.integers(1, 2_000_000), st.floats(min_value=0.0, max_value=0.5)),
        min_size=1,
        max_size=60,
    ),
    st.sampled_from([0.05, 2.0, 100.0]),
    st.integers(min_value=0, max_value=4),
)
def test_admitting_one_record_is_admitting_a_list_of_one(
    steps: list[tuple[int, float]], percent: float, throttles: int
) -> None:
    """``admit_one`` (the timer's path for a batch of one) decides and takes exactly what
    ``admit`` of a one-item list does, the buckets left the same."""
    one, listed = ShardLimiter(percent, now=0.0), ShardLimiter(percent, now=0.0)
    for i in range(throttles):
        one.on_throttled(i * 0.3)
        listed.on_throttled(i * 0.3)
    now = 1.5
    for size, gap in steps:
        now += gap
        assert one.admit_one(size, now) == listed.admit([size], now)
        for bucket in ("_records", "_bytes"):
            a, b = getattr(one, bucket), getattr(listed, bucket)
            assert (a.tokens, a.updated) == (b.tokens, b.updated)


@given(
    st.floats(min_value=0.001, max_value=300.0),
    st.integers(min_value=0, max_value=12),
    st.lists(st.integers(1, 1_048_576), min_size=1, max_size=20),
)
def test_a_shard_always_sends_at_least_one_record_per_second(
    percent: float, throttles: int, sizes: list[int]
) -> None:
    """Whatever the rate and however often it was throttled: one record (of any size up
    to 1 MiB) per refill period, and sending lets the rate recover."""
    limiter = ShardLimiter(percent, now=0.0)
    now = 0.0
    for _ in range(throttles):
        now += 0.25
        limiter.on_throttled(now)
    start = now
    pending = list(sizes)
    while pending:
        wait = limiter.wait_time(pending, now)
        assert 0.0 <= wait <= 1.0 + 1e-5, wait
        now += wait
        n = limiter.admit(pending, now)
        assert n >= 1, (now, limiter.multiplier)
        limiter.on_success(now)
        pending = pending[n:]
    assert now - start <= len(sizes) * (1.0 + 1e-5)


def test_a_small_rate_limit_recovers_after_throttling_stops() -> None:
    limiter = ShardLimiter(1.0, now=0.0)  # 10 records/s
    now = 0.0
    for _ in range(6):  # 10 -> 0.5 records/s: the records bucket holds less than one token
        now += 0.25
        limiter.on_throttled(now)
    assert limiter.records_rate < 1.0
    sent = 0
    while now < 120.0:
        now += limiter.wait_time([100], now)
        sent += limiter.admit([100] * 50, now)
        limiter.on_success(now)
    assert limiter.multiplier == 1.0
    assert sent > 900  # back at ~10 records/s for most of the two minutes


@given(st.integers(64, 1_048_576), st.floats(0.0, 2.0))
def test_a_paced_aggregate_is_never_larger_than_asked_nor_under_the_floor(
    most: int, multiplier: float
) -> None:
    size = paced_size(most, multiplier)
    assert size <= most
    assert size >= min(PACED_FLOOR, most)
    if multiplier >= 1.0:
        assert size == most  # unthrottled, aggregation_max_size as configured
    else:
        assert size == max(min(PACED_FLOOR, most), int(most * multiplier))


def test_a_throttled_shard_aggregates_smaller_and_grows_back_as_it_recovers() -> None:
    # Kinesis throttles an entry whole: while producers share a shard, smaller entries make
    # its bucket's draws many and the producers' shares even (``_limiter``'s docstring).
    eng, _shell, stream = engine(retry_backoff_base=0.1)
    shard = stream.shards[0]
    assert shard.agg_max == 51_200
    throttled_answer(eng, stream, 0.0)
    assert shard.limiter.multiplier == 0.5 and shard.agg_max == 25_600
    throttled_answer(eng, stream, 1.0)
    assert shard.agg_max == 12_800
    counts = []
    for i in range(80):  # 200 records of 1,000 bytes a second, sealed and confirmed
        now = 2.0 + 0.1 * i
        for j in range(20):
            eng.accept(stream, b"x" * 1000, f"k{i}-{j}", None, now)
        krecs = sealed(eng, stream)
        shell_of(eng).sealed_batches.clear()
        sizes = [len(k.data) for k in krecs if k.aggregated]
        assert sizes and max(sizes) <= shard.agg_max
        counts.append(len(sizes))
        entries = [{"SequenceNumber": "1", "ShardId": shard.shard_id} for _ in krecs]
        eng.apply_answer(stream, krecs, {"Records": entries}, now, now + 0.01)
    # eight seconds without a throttle: +0.8, from 0.25 to its full rate and size again
    assert shard.limiter.multiplier == 1.0 and shard.agg_max == 51_200
    assert counts[0] == 2 and counts[-1] == 1  # 20 kB: two aggregates, then one


def test_the_stream_setting_applies_to_every_shard_and_to_new_ones() -> None:
    _eng, _shell, stream = engine(shards=4, aggregation_max_size=20_000)
    assert [s.agg_max for s in stream.shards] == [20_000] * 4
    stream.shards[1].limiter.on_throttled(5.0)
    stream.shards[1].paced(stream.agg_max_size)
    assert [s.agg_max for s in stream.shards] == [20_000, 10_000, 20_000, 20_000]


def test_a_throttled_limiter_spreads_its_waits_and_keeps_its_rate() -> None:
    # Limiters at one pace send at one period; the spread keeps a producer from holding the
    # same place in the shard's second (just after another's entry) for good.
    limiter = ShardLimiter(100, now=0.0)
    limiter.admit([1000] * 1000, 0.0)  # the bucket emptied
    plain = limiter.wait_time([1000], 0.0)
    assert limiter.wait_time([1000], 0.0, spread=0.9) == plain  # full rate: no spread
    limiter.on_throttled(0.0)
    plain = limiter.wait_time([1000], 0.0)
    assert abs(limiter.wait_time([1000], 0.0, spread=0.5) - (plain + 0.05)) < 1e-12
    # following spread waits, the long-run rate is still the limiter's (500 records/s)
    now, sent, draws = 0.0, 0, iter([0.0, 0.99, 0.5, 0.25] * 2_500)
    while sent < 10_000:
        now += limiter.wait_time([10] * 50, now, spread=next(draws))
        sent += limiter.admit([10] * 50, now)
    assert 19.9 <= now <= 20.1


def test_the_engine_draws_a_spread_only_for_a_throttled_shard() -> None:
    eng, _shell, stream = engine(shards=2)
    quiet, busy = stream.shards
    state = eng.out.rand.getstate()
    eng.out.wait_time(quiet, [], 0.0)
    assert eng.out.rand.getstate() == state  # unthrottled: nothing random, nothing drawn
    busy.limiter.on_throttled(0.0)
    waits = {eng.out.wait_time(busy, [], 0.0) for _ in range(20)}
    assert eng.out.rand.getstate() != state and len(waits) > 1
