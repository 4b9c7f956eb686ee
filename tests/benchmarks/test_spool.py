"""``python -m benchmarks spool``: its pieces, without an emulator (the fsync probe, the
putters that keep to the schedule while ``put`` waits, the per-round ratios, the spool
reaching the runner's producer)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any, cast

import anyio
import pytest

from benchmarks import _runner, spool
from benchmarks.runners import kinesis_trio as runner
from kinesis_trio import Producer


def test_the_fsync_probe_times_each_write_and_leaves_no_file(tmp_path: Path) -> None:
    probe = spool.fsync_latency(tmp_path, 5)
    assert probe["writes"] == 5
    assert 0 < probe["p50_ms"] <= probe["p99_ms"] <= probe["max_ms"]
    assert list(tmp_path.iterdir()) == []
    assert "mounted on" in spool.filesystem_of(tmp_path)


async def _waiting_put(key: str) -> str:
    await anyio.sleep(0.01)  # as a put waits for the spool's fsync
    return key


@pytest.mark.anyio
@pytest.mark.virtual_time
async def test_putters_keep_to_the_schedule_while_each_put_waits() -> None:
    keys = ["a", "b", "c"]
    paced, put_latency = await _runner.put_paced_pool(
        _waiting_put, keys, 10, 1000.0, anyio.current_time, tasks=10
    )
    assert paced.outcomes == [keys[i % 3] for i in range(10)]
    assert paced.scheduled == [paced.t_start + i / 1000.0 for i in range(10)]
    assert all(lat >= 0.01 - 1e-9 for lat in put_latency)
    # virtual time on both backends: exact
    assert paced.max_lag == 0.0
    assert max(put_latency) == pytest.approx(0.01, abs=1e-6)


@pytest.mark.anyio
@pytest.mark.virtual_time
async def test_one_putter_falls_behind_and_its_lag_counts_from_the_schedule() -> None:
    paced, put_latency = await _runner.put_paced_pool(
        _waiting_put, ["k"], 10, 1000.0, anyio.current_time, tasks=1
    )
    # one put at a time: record 9 starts after nine puts of 10 ms, 9 ms after it was due
    assert put_latency[9] >= 10 * 0.01 - 9 / 1000.0 - 1e-9
    assert paced.max_lag >= 9 * 0.01 - 9 / 1000.0 - 1e-9
    assert put_latency[9] == pytest.approx(0.091, abs=1e-6)


@pytest.mark.anyio
async def test_the_burst_putters_keep_each_outcome_in_record_order() -> None:
    class Stub:
        async def put(self, data: bytes, key: str) -> str:
            await anyio.lowlevel.checkpoint()
            return key

    keys = [f"k{i}" for i in range(7)]
    for tasks in (0, 4):
        args = argparse.Namespace(put_tasks=tasks, put_many=0)
        got = await runner._put_all(args, cast(Producer, Stub()), b"x", keys, 20)
        assert cast(list[str], got) == [keys[i % 7] for i in range(20)]


def _run(rnd: int, **values: float) -> dict[str, Any]:
    return {"round": rnd, "records": 10, "failed": 0, **values}


def test_ratios_are_taken_against_no_spool_in_the_same_round() -> None:
    cpu = "cpu_us_per_record_through_close"
    runs = {
        ("none", "trio", "burst"): [_run(0, **{cpu: 4.0}), _run(1, **{cpu: 5.0})],
        ("interval", "trio", "burst"): [_run(1, **{cpu: 6.0}), _run(0, **{cpu: 8.0})],
        ("put", "trio", "burst"): [_run(2, **{cpu: 9.0})],  # no baseline in round 2
    }
    interval = spool.summarize(runs, "trio", spool.SETTINGS[1])
    assert interval["burst_cpu_vs_none"] == [1.2, 2.0]
    assert interval["burst_cpu_us_per_record"] == 7.0
    assert spool.summarize(runs, "trio", spool.SETTINGS[2])["burst_cpu_vs_none"] == []
    assert spool._ratio_text([1.2, 2.0]) == "1.60x (1.20-2.00)"


def _runner_args(**more: object) -> argparse.Namespace:
    base: dict[str, object] = {
        "endpoint": "http://127.0.0.1:4567",
        "linger": 0.05,
        "aggregation": "on",
        "max_connections": 24,
        "fixed_connections": False,
        "ordering": "none",
        "rate_limits": "lifted",
        "max_outstanding": 0,
        "max_outstanding_mib": 0,
        "spool_dir": "",
        "spool_sync": "interval",
    }
    return argparse.Namespace(**{**base, **more})


def test_the_runner_opens_its_producer_with_the_spool_it_is_given(tmp_path: Path) -> None:
    assert runner._config(_runner_args()).spool_dir is None
    config = runner._config(_runner_args(spool_dir=str(tmp_path), spool_sync="put"))
    assert Path(config.spool_dir or "") == tmp_path
    assert config.spool_sync == "put"
