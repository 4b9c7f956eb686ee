"""``python -m benchmarks fleet``: a tiny fleet on virtual time, run twice. The figures are
not judged, only that the run is deterministic, every accepted record is counted once and
the shares are shares. The simulation is trio-only by design (``MockClock``, trio's seeded
scheduler), so these tests are plain synchronous ones, not run on both backends."""

from __future__ import annotations

import argparse
import dataclasses
import math

import pytest

from benchmarks import _fleet_sim, fleet

TINY = _fleet_sim.Scenario(producers=2, shards=1, offered=2.25, duration=5.0, record_size=1000)


def test_a_tiny_fleet_gives_the_same_summary_twice_and_counts_every_record_once() -> None:
    first, cost = _fleet_sim.run(TINY)
    second, _ = _fleet_sim.run(TINY)
    assert first == second
    assert 0.0 < first["capacity_used"] <= 1.05
    assert 0.0 <= first["stored_share"] <= 1.05
    assert 0 < first["accepted"] <= first["offered_records"]
    assert first["ok"] + first["expired"] + first["failed"] == first["accepted"]
    assert first["expired_in_queue"] <= first["expired"]
    assert sum(first["ok_bytes_per_producer"]) == first["ok"] * TINY.record_size
    assert 0.0 <= first["throttled_share"] <= 1.0
    assert 0.0 < first["fairness"] <= 1.0
    assert 0.0 <= first["put_wait_share"] <= 1.0
    assert 0.0 < first["age_from_put_p99_s"] <= first["age_from_put_max_s"]
    assert first["age_from_put_p99_s"] <= first["age_from_schedule_p99_s"]
    assert first["virtual_s"] >= TINY.duration
    assert cost["real_s"] is not None and cost["real_s"] < 10
    assert cost["cpu_us_per_record"] is not None and cost["cpu_us_per_record"] > 0


def test_a_run_cut_at_its_request_budget_counts_the_aborted_records_as_failed() -> None:
    summary, _ = _fleet_sim.run(dataclasses.replace(TINY, max_requests=20))
    assert summary["cut_at_s"] is not None and summary["cut_at_s"] < TINY.duration
    assert summary["ok"] + summary["expired"] + summary["failed"] == summary["accepted"]
    assert set(summary["failed_codes"]) <= {"ProducerAborted"}
    uncut, _ = _fleet_sim.run(dataclasses.replace(TINY, duration=2.0))
    assert uncut["cut_at_s"] is None


def test_another_seed_is_another_run_of_the_same_scenario() -> None:
    scenario = _fleet_sim.Scenario(2, 1, 2.25, 3.0, record_size=2000, admission=False, seed=2)
    summary, _ = _fleet_sim.run(scenario)
    assert summary["scenario"]["seed"] == 2 and not summary["scenario"]["admission"]
    assert summary["ok"] + summary["expired"] + summary["failed"] == summary["accepted"]


def test_a_large_stream_is_scaled_to_the_budgets() -> None:
    small = _fleet_sim.scaled(2, 4, 2.25, 10.0, 200)
    assert small.limit_scale == 1.0
    assert small.record_size == math.ceil(2.25 * 4 * _fleet_sim.MIB / _fleet_sim.RECORDS_BUDGET)
    assert small.rate * small.producers * small.record_size == pytest.approx(2.25 * small.capacity)
    large = _fleet_sim.scaled(1, 10_000, 2.25, 10.0, 200)
    assert large.capacity == pytest.approx(_fleet_sim.CAPACITY_BUDGET)
    assert large.record_size <= _fleet_sim.SHARD_BYTES * large.limit_scale
    assert large.config().rate_limit == pytest.approx(150.0 * large.limit_scale)
    assert _fleet_sim.scaled(1, 1, 1.0, 10.0, 25_000).record_size == 25_000
    with pytest.raises(ValueError):
        _fleet_sim.Scenario(1, 1, 2.25, duration=_fleet_sim.WARMUP)


def test_the_grid_and_the_table_fit_each_other() -> None:
    args = argparse.Namespace(
        producers="1,6",
        shards="4",
        offered="2.25,4",
        duration=None,
        record_size=200,
        admission="on,off",
        stagger=0.0,
        rtt=0.02,
        per_byte=8e-9,
        seed=1,
        set=[("record_ttl", 20.0)],
        capacity_budget=64.0,
        records_budget=5000.0,
        max_requests=None,
        quick=False,
    )
    rows = fleet.grid(args)
    assert len(rows) == 8 and {g for g, _ in rows} == {"producers"}
    assert {s.max_requests for _, s in rows} == {fleet.MAX_REQUESTS}
    assert {s.admission for _, s in rows} == {True, False}
    assert all(s.config().record_ttl == 20.0 for _, s in rows)
    assert [s.config().admission_ttl_share is None for _, s in rows].count(True) == 4
    args.producers, args.shards, args.quick = None, None, True
    quick = fleet.grid(args)
    assert {g for g, _ in quick} == {"producers", "shards"}
    summary, cost = _fleet_sim.run(_fleet_sim.Scenario(1, 1, 2.25, 2.0, record_size=5000))
    row = fleet.table_row({"group": "producers", **summary, **cost})
    assert len(row) == len(fleet.HEADER) == len(fleet.ALIGN)
