"""``python -m benchmarks fleet``: a tiny fleet on virtual time, run twice; tiny runs of the
``processes`` and ``streams`` parts against the local engine. The figures are not judged,
only that the simulation is deterministic, every accepted record is counted once and the
shares are shares. The simulation is trio-only by design (``MockClock``, trio's seeded
scheduler), and the parts' producers run in child processes, so these tests are plain
synchronous ones, not run on both backends."""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import math
import random
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchmarks import (
    _command,
    _fleet_child,
    _fleet_grid,
    _fleet_member,
    _fleet_processes,
    _fleet_sim,
    _fleet_streams,
    fleet,
)

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
        jitter=0.5,
        seed=1,
        set=[("record_ttl", 20.0)],
        capacity_budget=64.0,
        records_budget=5000.0,
        max_requests=None,
        quick=False,
    )
    rows = _fleet_grid.grid(args)
    assert len(rows) == 8 and {g for g, _ in rows} == {"producers"}
    assert {s.max_requests for _, s in rows} == {_fleet_grid.MAX_REQUESTS}
    assert {s.jitter for _, s in rows} == {0.5}
    assert {s.admission for _, s in rows} == {True, False}
    assert all(s.config().record_ttl == 20.0 for _, s in rows)
    assert [s.config().admission_ttl_share is None for _, s in rows].count(True) == 4
    args.producers, args.shards, args.quick = None, None, True
    quick = _fleet_grid.grid(args)
    assert {g for g, _ in quick} == {"producers", "shards"}
    summary, cost = _fleet_sim.run(_fleet_sim.Scenario(1, 1, 2.25, 2.0, record_size=5000))
    row = _fleet_grid.table_row({"group": "producers", **summary, **cost})
    assert len(row) == len(_fleet_grid.HEADER) == len(_fleet_grid.ALIGN)


def test_the_round_trip_jitter_is_seeded_never_under_its_floor_and_the_base_on_average() -> None:
    def draws(jitter: float, seed: str) -> list[float]:
        model = _fleet_sim.RoundTrip(0.02, 0.0, jitter=jitter, rng=random.Random(seed))
        return [model.admit(0.0, 0) for _ in range(4000)]

    plain = draws(0.0, "a")
    assert set(plain) == {0.02}
    first = draws(0.5, "a")
    assert first == draws(0.5, "a") and first != draws(0.5, "b")
    assert min(first) >= 0.01 and max(first) > 0.04
    assert sum(first) / len(first) == pytest.approx(0.02, rel=0.05)
    with pytest.raises(ValueError):
        _fleet_sim.RoundTrip(0.02, 0.0, jitter=1.5)


def test_a_member_through_a_null_producer_accepts_and_confirms_its_whole_schedule() -> None:
    import trio
    from trio.testing import MockClock

    member = _fleet_member.Member(
        rate=100.0,
        start=0.0,
        end=3.0,
        record_size=10,
        keys=_fleet_member.fleet_keys(1, 50),
        seed="1/putter/0",
        window=(1.0, 3.0),
        drain_until=10.0,
    )

    async def main() -> None:
        await member.run(_fleet_member.NullProducer())

    trio.run(main, clock=MockClock(autojump_threshold=0))
    member.settle()
    report = member.report(digits=4)
    assert report["offered"] == report["accepted"] == report["ok"] == 300
    assert report["put_wait"] == 0.0 and not report["failed"]
    # (the null producer's results carry no time: the window counts what real ones confirm)
    report["window_bytes"] = 2_000
    shares = _fleet_member.figures([report, report], capacity=2 * 100.0 * 10, window=2.0)
    assert shares["fairness"] == 1.0 and shares["put_wait_share"] == 0.0
    # fairness is what each confirmed while the fleet contended, not after: the same
    # records confirmed, one producer's half of them in the drain after the schedule
    late = {**report, "window_bytes": 1_000}
    uneven = _fleet_member.figures([report, late], capacity=2 * 100.0 * 10, window=2.0)
    assert uneven["fairness"] == 0.5
    assert _fleet_member.fleet_keys(1, 50) == _fleet_member.fleet_keys(1, 50)


def test_fleet_has_three_parts_and_quick_goes_to_each(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert list(fleet.PARTS) == ["sim", "processes", "streams"]
    for module in fleet.PARTS.values():
        assert callable(importlib.import_module(module).main)
    seen: list[list[str]] = []
    for name in ("one", "two"):
        (tmp_path / f"fleet_part_{name}.py").write_text(
            "import sys\nSEEN = []\ndef main():\n    SEEN.append(sys.argv[1:])\n"
        )
    monkeypatch.syspath_prepend(str(tmp_path))
    parts = {"one": "fleet_part_one", "two": "fleet_part_two"}
    monkeypatch.setattr(sys, "argv", ["fleet", "--quick"])
    monkeypatch.setattr(_command, "COMMAND", [])
    _command.run_parts("fleet", "", parts, shared=("--quick",))
    for module in parts.values():
        seen += importlib.import_module(module).SEEN
    assert seen == [["--quick"], ["--quick"]]
    monkeypatch.setattr(sys, "argv", ["fleet", "--nope"])
    with pytest.raises(SystemExit):
        _command.run_parts("fleet", "", parts, shared=("--quick",))


@pytest.fixture
def limited_engine() -> Iterator[str]:
    """``kinesis-trio local --emulator python --limits aws``: its endpoint."""
    from kinesis_trio.testing._emulators import LocalKinesis

    with LocalKinesis("python", args=["--limits", "aws"], shard_limit=100) as engine:
        yield engine.endpoint_url


@pytest.mark.integration
@pytest.mark.subprocess
def test_two_producer_processes_share_a_shard_and_sit_beside_their_simulation(
    limited_engine: str,
) -> None:
    sc = _fleet_sim.Scenario(2, 1, 2.25, 2.0, record_size=2000)
    row = _fleet_processes.run_row(limited_engine, None, sc)
    assert row["ok"] + row["expired"] + row["failed"] == row["accepted"] > 0
    assert row["accepted"] <= row["offered_records"]
    assert 0.0 < row["capacity_used"] <= 1.3
    assert 0.0 <= row["throttled_share"] <= 1.0 and 0.0 < row["fairness"] <= 1.0
    assert row["requests"] > 0 and row["cpu_us_per_record"] > 0
    assert len(_fleet_processes.table_row(row)) == len(_fleet_processes.HEADER)
    (pair,) = _fleet_processes.simulate([sc], [row], rtt=0.005, checked=2)
    cells, outside = _fleet_processes.compare(*pair)
    assert len(cells) == 9 and set(outside) <= {
        "capacity_used",
        "expired_share",
        "fairness",
        "p99 age",
    }


@pytest.mark.integration
@pytest.mark.subprocess
def test_a_stream_row_takes_the_null_run_out_and_reads_the_memory(limited_engine: str) -> None:
    job = _fleet_child.Job("", "", 0, rate=200.0, duration=1.5, record_size=200, keys=100)
    row = _fleet_streams.run_row(limited_engine, None, 3, job)
    # every record accepted is confirmed; how many the schedule got in before its end
    # depends on the machine's speed (a busy machine's putter falls behind): not asserted
    assert row["offered_records"] == 300 and 0 < row["ok"] == row["accepted"] <= 300
    assert row["harness_us_per_record"] > 0 and row["cpu_us_per_record"] is not None
    assert row["user_per_kinesis_record"] >= 1.0
    assert row["rss_end_mib"] > 0 and 0 < row["p50_s"] <= row["p99_s"]
    assert len(_fleet_streams.table_row(row, row["cpu_us_per_record"])) == len(
        _fleet_streams.HEADER
    )
