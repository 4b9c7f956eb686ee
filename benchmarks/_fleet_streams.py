"""Big streams (``fleet streams``): one producer's cost at one rate on 8 to 10,000 shards.

One producer process at a time (``_fleet_child``, mode ``stream``) writes 2,000 records/s of
200 bytes over 10,000 random keys (``--rate``, ``--record-size``, ``--keys``) for 15 s
(``--duration``; ``--quick``: 5 s) to a fresh stream of 8, 2,000 and 10,000 shards
(``--shards``) of ``kinesis-trio local --emulator python --limits aws``, with the putter of
the fleet (``_fleet_member``: record *i* due at ``start + i / rate``, every outcome awaited
in order), its producer at its defaults.

**The harness's own cost taken out.** The same process first runs the same schedule
through a null producer (``put`` returns an outcome resolved already): the putter's and
the waiter's CPU. CPU per record is the producer run's process CPU (from the schedule's
start to its last outcome) minus the null run's, over the records confirmed; "vs 8" is
over the 8-shard row's. Both runs are real time on a shared machine: their difference
moves by a few µs from run to run.

Per row also: user records per Kinesis record (the producer's ``UserRecordsPut`` over
``KinesisRecordsPut``), RSS over the interpreter (VmRSS after ``__aenter__`` returned, and
at the end of the run before the close, minus VmRSS before the producer was made:
``kinesis_trio`` imported and the null run done), CPU in the first second after
``__aenter__`` returned (idle: nothing put yet), p50 / p99 from ``put`` to confirmed,
records expired or failed, the engine's CPU per record, PutRecords requests, and the load
average at the row's start.

    uv run python -m benchmarks fleet streams               # about 2 min
    uv run python -m benchmarks fleet streams --shards 8,4000 --duration 30
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import time
from typing import Any

from benchmarks._fleet_child import Job, run_stream
from benchmarks._fleet_grid import _ints
from benchmarks._fleet_member import figures

SHARDS = "8,2000,10000"
RATE = 2000.0
RECORD = 200
KEYS = 10_000
DURATION = 15.0
QUICK_DURATION = 5.0
HEADER = [
    "shards",
    "CPU µs/record",
    "vs 8",
    "harness µs/record",
    "user records per Kinesis record",
    "RSS MiB after open / at end",
    "CPU ms, first second",
    "p50 / p99 ms",
    "expired / failed",
    "engine µs/record",
    "requests",
    "real s",
    "load",
]
ALIGN = "rrrrrrrrrrrrr"


def run_row(endpoint: str, engine_pid: int | None, shards: int, job: Job) -> dict[str, Any]:
    """One shard count: a fresh stream, one child (``job`` on it), its figures."""
    from benchmarks._child import proc_cpu_seconds
    from benchmarks._emulator import create_stream, delete_stream

    load = os.getloadavg()[0]
    t0 = time.perf_counter()
    stream = create_stream(endpoint, shards, prefix="fleet-stream")
    job = dataclasses.replace(job, endpoint=endpoint, stream=stream, mode="stream")
    cpu0 = proc_cpu_seconds(engine_pid)
    try:
        result = run_stream(job, timeout=job.duration * 3 + 120)
    finally:
        delete_stream(endpoint, stream)
    engine_cpu = proc_cpu_seconds(engine_pid) - cpu0
    return summarize(shards, job, result, engine_cpu, time.perf_counter() - t0, load)


def summarize(
    shards: int, job: Job, result: dict[str, Any], engine_cpu: float, real: float, load: float
) -> dict[str, Any]:
    totals = result["totals"]
    fig = figures([result["report"]], job.rate * job.record_size, job.duration)
    ok, put = fig["ok"], float(totals.get("KinesisRecordsPut", 0.0))
    null_us = result["null_cpu_s"] / result["null_records"] * 1e6 if result["null_records"] else 0
    return {
        "shards": shards,
        "rate": job.rate,
        "record_size": job.record_size,
        "keys": job.keys,
        "duration": job.duration,
        **{k: fig[k] for k in ("offered_records", "accepted", "ok", "expired", "failed")},
        "p50_s": fig["age_from_put_p50_s"],
        "p99_s": fig["age_from_put_p99_s"],
        "cpu_us_per_record": (result["cpu_s"] - result["null_cpu_s"]) / ok * 1e6 if ok else None,
        "harness_us_per_record": null_us,
        "user_per_kinesis_record": float(totals.get("UserRecordsPut", 0.0)) / put if put else 0,
        "rss_open_mib": result["rss_open_mib"] - result["rss_before_mib"],
        "rss_end_mib": result["rss_end_mib"] - result["rss_before_mib"],
        "idle_cpu_first_s": result["idle_cpu_first_s"],
        "engine_cpu_us_per_record": engine_cpu / ok * 1e6 if ok else None,
        "requests": result["requests"],
        "real_s": real,
        "loadavg_at_start": load,
        "child": {k: v for k, v in result.items() if k != "report"},
    }


def table_row(row: dict[str, Any], base: float | None) -> list[object]:
    cpu = row["cpu_us_per_record"]
    return [
        f"{row['shards']:,}",
        "-" if cpu is None else f"{cpu:.1f}",
        f"{cpu / base:.2f}x" if cpu is not None and base else "-",
        f"{row['harness_us_per_record']:.1f}",
        f"{row['user_per_kinesis_record']:.2f}",
        f"+{row['rss_open_mib']:.1f} / +{row['rss_end_mib']:.1f}",
        f"{row['idle_cpu_first_s'] * 1e3:.0f}",
        f"{row['p50_s'] * 1e3:.0f} / {row['p99_s'] * 1e3:.0f}",
        f"{row['expired']:,} / {row['failed']:,}",
        "-"
        if row["engine_cpu_us_per_record"] is None
        else f"{row['engine_cpu_us_per_record']:.0f}",
        f"{row['requests']:,}",
        f"{row['real_s']:.0f}",
        f"{row['loadavg_at_start']:.2f}",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else "")
    parser.add_argument("--shards", default=SHARDS, help="comma-separated")
    parser.add_argument("--rate", type=float, default=RATE, help="records/s")
    parser.add_argument("--record-size", type=int, default=RECORD, help="bytes")
    parser.add_argument("--keys", type=int, default=KEYS, help="random keys in the pool")
    parser.add_argument("--duration", type=float, help=f"seconds per run ({DURATION:g})")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--quick", action="store_true", help=f"{QUICK_DURATION:g} s runs")
    parser.add_argument("--name", default="fleet_streams", help="results/<name>.{md,json}")
    args = parser.parse_args()

    from benchmarks._command import command_line, log
    from benchmarks._report import machine_info, markdown_table, publish, report_header
    from kinesis_trio.testing._emulators import LocalKinesis

    info = machine_info()
    started = time.perf_counter()
    duration = args.duration or (QUICK_DURATION if args.quick else DURATION)
    counts = _ints(args.shards)
    rows: list[dict[str, Any]] = []
    limit = max(1000, 2 * max(counts))
    with LocalKinesis("python", args=["--limits", "aws"], shard_limit=limit) as engine:
        for shards in counts:
            job = Job("", "", 0, args.rate, duration, args.record_size, args.keys, args.seed)
            row = run_row(engine.endpoint_url, engine.pid, shards, job)
            rows.append(row)
            log(
                f"streams {shards:,} shards: {row['cpu_us_per_record']:.1f} µs/record, "
                f"{row['user_per_kinesis_record']:.2f} per Kinesis record, p99 "
                f"{row['p99_s'] * 1e3:.0f} ms, {row['real_s']:.0f} s real"
            )
    total = time.perf_counter() - started
    base = next((r["cpu_us_per_record"] for r in rows if r["shards"] == 8), None)
    md = report_header("# One producer on big streams", info, total)
    md += [
        "Method: see `benchmarks/_fleet_streams.py` (its docstring). One producer process "
        f"per row at {args.rate:,.0f} records/s of {args.record_size:,} bytes over "
        f"{args.keys:,} random keys for {duration:g} s, to a fresh stream of `kinesis-trio "
        "local --emulator python --limits aws`, every outcome awaited. CPU µs/record: the "
        "process's CPU over the run minus a null producer's run of the same schedule "
        "(harness), per record confirmed; vs 8: over the 8-shard row's. RSS: over VmRSS "
        "before the producer was made. First second: CPU right after `__aenter__` "
        "returned, nothing put. Load: the load average at the row's start (two cores, "
        "shared; it lags, and counts what ran just before).",
        "",
        markdown_table(HEADER, [table_row(r, base) for r in rows], ALIGN),
        "",
    ]
    data = {"command": command_line(), "machine": info, "settings": vars(args), "rows": rows}
    publish(args.name, md, data, total)


if __name__ == "__main__":
    main()
