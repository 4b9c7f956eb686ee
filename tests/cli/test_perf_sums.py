"""``perf --processes``: a process's result and the sum over processes (pure functions)."""

from __future__ import annotations

import array
import json
import math
import random
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kinesis_trio.cli._load import _LoadResult, _process_result
from kinesis_trio.cli._multi import _share_text, _Spec
from kinesis_trio.cli._output import _percentile, _Tracker
from kinesis_trio.cli._sums import (
    LatencyHistogram,
    ProcessResult,
    Timeline,
    split_evenly,
    sum_results,
)

#: A bucket's middle is within 0.05 % of every value in it.
_PRECISION = 5e-4

latencies = st.lists(
    st.floats(min_value=1e-5, max_value=100.0, allow_nan=False), min_size=1, max_size=300
)


def exact(values: list[float], q: float) -> float:
    return _percentile(sorted(values), q)


@given(latencies)
def test_histogram_percentiles_are_the_exact_ones_within_the_bucket_width(
    values: list[float],
) -> None:
    histogram = LatencyHistogram.of(values)
    assert histogram.count == len(values)
    for q in (0.0, 0.5, 0.9, 0.99, 0.999):
        assert histogram.percentile(q) == pytest.approx(exact(values, q), rel=_PRECISION)
    assert histogram.percentile(1.0) == max(values)  # the max is exact


@given(latencies, latencies)
def test_merged_histograms_are_the_histogram_of_all_values(a: list[float], b: list[float]) -> None:
    merged = LatencyHistogram.of(a)
    merged.merge(LatencyHistogram.of(b))
    whole = LatencyHistogram.of(a + b)
    assert (merged.buckets, merged.count, merged.low, merged.high) == (
        whole.buckets,
        whole.count,
        whole.low,
        whole.high,
    )


def test_histogram_json_round_trip_and_empty() -> None:
    histogram = LatencyHistogram.of([0.001, 0.002, 0.5, 0.0])  # 0 goes to the first bucket
    again = LatencyHistogram.from_json(json.loads(json.dumps(histogram.to_json())))
    assert (again.buckets, again.count, again.low, again.high) == (
        histogram.buckets,
        4,
        0.0,
        0.5,
    )
    assert again.percentile(0.0) == 0.0  # clamped to the exact minimum
    empty = LatencyHistogram.from_json(LatencyHistogram().to_json())
    assert empty.count == 0 and math.isnan(empty.percentile(0.5))
    with pytest.raises(ValueError, match="growth"):
        LatencyHistogram.from_json({**histogram.to_json(), "growth": 1.01})


def result(
    latencies: list[float],
    *,
    started: float,
    ended: float,
    cpu: float = 1.0,
    failed: int = 0,
    codes: dict[str, int] | None = None,
    throttled: int = 0,
    timeline: Timeline | None = None,
    interrupted: bool = False,
) -> ProcessResult:
    ok = len(latencies)
    return ProcessResult(
        accepted=ok + failed,
        accepted_bytes=(ok + failed) * 100,
        ok=ok,
        ok_bytes=ok * 100,
        failed=failed,
        codes=codes or {},
        messages={code: f"{code} message" for code in codes or {}},
        throttled_attempts=throttled,
        throttled_records=throttled,
        started=started,
        ended=ended,
        cpu=cpu,
        latency=LatencyHistogram.of(latencies),
        peak_rss_mib=50.0 + ok / 1000,
        interrupted=interrupted,
        timeline=timeline or Timeline(started, 0.5, [ok], [throttled]),
    )


def test_sum_adds_counts_and_takes_the_wall_interval_from_the_first_start_to_the_last_end() -> None:
    a = result([0.01] * 1000, started=100.0, ended=104.0, cpu=2.0, throttled=3)
    b = result(
        [0.02] * 500,
        started=100.5,
        ended=106.0,
        cpu=1.5,
        failed=7,
        codes={"RecordExpired": 7},
        interrupted=True,
    )
    total = sum_results([a, b])
    assert (total.processes, total.accepted, total.ok, total.failed) == (2, 1507, 1500, 7)
    assert (total.accepted_bytes, total.ok_bytes) == (150_700, 150_000)
    assert total.codes == {"RecordExpired": 7}
    assert total.messages == {"RecordExpired": "RecordExpired message"}
    assert (total.throttled_attempts, total.throttled_records) == (3, 3)
    assert (total.started, total.ended, total.elapsed) == (100.0, 106.0, 6.0)
    assert total.records_per_s == pytest.approx(1507 / 6.0)
    assert total.mb_per_s == pytest.approx(150_700 / 6.0 / 1e6)
    assert total.cpu == 3.5
    assert total.cpu_us_per_record == pytest.approx(3.5 / 1507 * 1e6)
    assert (total.peak_rss_mib_max, total.peak_rss_mib_sum) == (51.0, 101.5)
    assert total.interrupted
    data = total.to_json()
    assert data["records_per_s"] == pytest.approx(1507 / 6.0)
    assert data["latency_s"]["max"] == 0.02


def test_sum_percentiles_are_over_every_record_not_an_average_of_percentiles() -> None:
    rng = random.Random(7)
    fast = [rng.uniform(0.005, 0.015) for _ in range(9_000)]
    slow = [rng.uniform(0.2, 0.4) for _ in range(1_000)]
    total = sum_results(
        [result(fast, started=0.0, ended=1.0), result(slow, started=0.0, ended=1.0)]
    )
    everything = fast + slow
    for q in (0.5, 0.99, 0.999):
        assert total.latency.percentile(q) == pytest.approx(exact(everything, q), rel=_PRECISION)
    assert total.latency.percentile(1.0) == max(slow)
    # an average of the two p50s would be about 0.16 s; over every record it is about 0.01 s
    assert total.latency.percentile(0.5) < 0.016


def test_sum_lines_up_timelines_of_different_origins_and_lengths() -> None:
    a = result([0.01] * 3, started=10.0, ended=11.0, timeline=Timeline(10.0, 0.5, [1, 2], [0]))
    b = result(
        [0.01] * 9, started=11.0, ended=12.0, timeline=Timeline(11.0, 0.5, [4, 5], [1, 0, 2])
    )
    timeline = sum_results([b, a]).timeline
    assert (timeline.origin, timeline.step) == (10.0, 0.5)
    assert timeline.ok == [1, 2, 4, 5]
    assert timeline.throttled == [0, 0, 1, 0, 2]


def test_sum_of_nothing_is_an_error() -> None:
    with pytest.raises(ValueError):
        sum_results([])


def test_timeline_counts_per_step_from_its_origin() -> None:
    timeline = Timeline.of(100.0, 0.5, [99.9, 100.0, 100.49, 100.5, 101.7], [101.1])
    assert timeline.ok == [3, 1, 0, 1]  # before the origin: the first bucket
    assert timeline.throttled == [0, 0, 1]


def test_process_result_json_round_trip() -> None:
    one = result([0.01, 0.2], started=5.0, ended=6.5, failed=1, codes={"X": 1}, interrupted=True)
    again = ProcessResult.from_json(json.loads(json.dumps(one.to_json())))
    assert again.to_json() == one.to_json()
    assert again.elapsed == 1.5


def test_process_result_puts_loop_times_on_the_wall_clock() -> None:
    tracker = _Tracker(keep_times=True)
    tracker.accepted = tracker.ok = 3
    tracker.accepted_bytes = tracker.ok_bytes = 300
    tracker.latencies = array.array("d", [0.1, 0.2, 0.3])
    # loop clock: the load started at 50.0; wall clock: at 1000.0
    assert tracker.confirmed_at is not None and tracker.throttled_at is not None
    tracker.confirmed_at.extend([50.1, 50.6, 51.2])
    tracker.throttled_at.extend([50.7])
    load = _LoadResult(tracker, elapsed=1.5, cpu=0.25, interrupted=0, t0=50.0, wall0=1000.0)
    out = _process_result(load, origin=999.0)  # the common start, a second earlier
    assert (out.started, out.ended, out.cpu) == (1000.0, 1001.5, 0.25)
    assert out.timeline.ok == [0, 0, 1, 1, 1]
    assert out.timeline.throttled == [0, 0, 0, 1]
    assert out.latency.count == 3 and out.latency.percentile(1.0) == 0.3
    assert not out.interrupted


@pytest.mark.parametrize(
    ("total", "parts", "shares"),
    [(2000, 2, [1000, 1000]), (10, 3, [4, 3, 3]), (3, 3, [1, 1, 1]), (7, 1, [7])],
)
def test_split_evenly(total: int, parts: int, shares: list[int]) -> None:
    assert split_evenly(total, parts) == shares
    assert sum(shares) == total


def test_share_text_says_what_each_process_gets() -> None:
    assert _share_text([4, 3, 3], None, 0.0) == " in 3 processes: 3 or 4 records each"
    assert _share_text([None, None], 2500.0, 0.0) == " in 2 processes: at 2,500 records/s each"
    assert _share_text([None, None], None, 5.0) == (
        " in 2 processes, each started 5 s after the previous"
    )


def test_spec_json_round_trip() -> None:
    spec = _Spec(
        index=1,
        endpoint_url="http://127.0.0.1:4567",
        region="us-east-1",
        profile=None,
        local=True,
        stream="s",
        size=512,
        keys=256,
        count=None,
        rate=1234.5,
        duration=0.1,
        offset=0.000405,
        backend="asyncio",
        config={"record_max_buffered_time": 0.05, "aggregation_enabled": False},
    )
    data: dict[str, Any] = json.loads(spec.to_json())
    assert data["config"] == {"record_max_buffered_time": 0.05, "aggregation_enabled": False}
    assert _Spec.from_json(spec.to_json()) == spec
