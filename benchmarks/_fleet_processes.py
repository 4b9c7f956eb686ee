"""Real processes (``fleet processes``): N producer processes on one stream of the local engine.

The engine is ``kinesis-trio local --emulator python --limits aws`` (AWS's per-shard limits:
1,000 records/s and 1 MiB/s, buckets holding one second's worth), one for the command, a
fresh stream per row. Each producer is a process of its own (``_fleet_child``) with a
``Producer`` at its defaults (``--set NAME=VALUE`` changes any field; admission off is
``admission_ttl_share=None``) and the simulation's putter (``_fleet_member``): records over
a pool of random keys, due on an open-loop schedule, every accepted record's outcome
awaited. The children open their producers first; then all start at one wall-clock time.

**Scaled to fit two cores.** The issue's fleet is 6 or 24 processes on 4 shards of
200-byte records: at 2.25x that is 47,000 records/s, and 84,000 at 4x, which two cores
cannot carry beside the engine. Offered load is relative to the stream's capacity, so the
rows keep the multiple and scale the stream: 1 shard (1 MiB/s) and 1,000-byte records, a
quarter of the bytes and a fortieth of the records (2,360 records/s at 2.25x, 4,190 at
4x, split evenly over the processes). The defaults, 20 s each (``--quick``: 8 s, fewer
rows): N = 6 and 24 at 2.25x and 4x, admission on and off.

Per row, as the simulation's (``_fleet_grid``): capacity used (user bytes confirmed from
1 s to the schedule's end, per second, over the capacity), throttled (Kinesis records
throttled over those answered, from the producers' ``KinesisRecordsThrottled``), accepted,
expired, failed, fairness (slowest over fastest bytes confirmed from 1 s to the schedule's
end), ages at confirmation from ``put`` (p50, p99, max), put waited (share of the putters'
time inside ``put``), the producers' CPU per record confirmed (each process's from its start time to
its last outcome, the putter included), the engine's, the PutRecords round trips (p50 and
p99 of the children's), how long the children took to open their producers, the real
seconds and the load average at the row's start.

**Against the simulation.** The N = 6 rows are simulated too (the same shards, record
size, offered load, duration and settings; a round trip of ``--sim-rtt``, 5 ms, near what
the children see on this machine) and put side by side. The same shape means, for each
row: capacity used within 0.05, expired within 1 point of the records accepted, fairness
within 0.15, p99 age from ``put`` within 30 % of the larger or 1 s (``TOLERANCE``).

    uv run python -m benchmarks fleet processes            # about 7 min
    uv run python -m benchmarks fleet processes --quick    # about 1.5 min
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import time
from typing import Any

from benchmarks import _fleet_sim
from benchmarks._fleet_child import DRAIN_GUARD, Job, run_fleet
from benchmarks._fleet_grid import FLEET_COLUMNS, _admissions, _floats, _ints, _setting
from benchmarks._fleet_member import WARMUP, figures
from benchmarks._fleet_sim import Scenario

SHARDS = 1
RECORD = 1000
DURATION = 20.0
QUICK_DURATION = 8.0
#: (producers, offered, admission settings)
GRID: list[tuple[int, float, tuple[bool, ...]]] = [
    (6, 2.25, (True, False)),
    (6, 4.0, (True, False)),
    (24, 2.25, (True, False)),
    (24, 4.0, (True, False)),
]
QUICK: list[tuple[int, float, tuple[bool, ...]]] = [(6, 2.25, (True, False)), (24, 4.0, (True,))]
#: the fleet size checked against the simulation
CHECKED = 6
#: the same shape: absolute differences (capacity used, expired share of accepted,
#: fairness), and the p99 age's: a share of the larger, or seconds, whichever is more
TOLERANCE = {"capacity_used": 0.05, "expired_share": 0.01, "fairness": 0.15}
AGE_TOLERANCE = (0.30, 1.0)
HEADER = [
    *FLEET_COLUMNS,
    "age p50 / p99 / max from put (s)",
    "put waited",
    "CPU µs/record (producers / engine)",
    "PutRecords p50 / p99 ms",
    "opened in s",
    "real s",
    "load",
]
ALIGN = "rrrrrlrrrrrrrrrrrrr"


def settings(sc: Scenario) -> dict[str, Any]:
    """The children's ProducerConfig fields."""
    out: dict[str, Any] = dict(sc.settings)
    if not sc.admission:
        out["admission_ttl_share"] = None
    return out


def run_row(endpoint: str, engine_pid: int | None, sc: Scenario) -> dict[str, Any]:
    """One row: a fresh stream, ``sc.producers`` children, their figures."""
    from benchmarks._child import proc_cpu_seconds
    from benchmarks._emulator import create_stream, delete_stream

    stream = create_stream(endpoint, sc.shards, prefix="fleet")
    jobs = [
        Job(endpoint, stream, i, sc.rate, sc.duration, sc.record_size, sc.key_pool(), sc.seed)
        for i in range(sc.producers)
    ]
    for job in jobs:
        job.settings = settings(sc)
    load = os.getloadavg()[0]
    t0, cpu0 = time.perf_counter(), proc_cpu_seconds(engine_pid)
    timeout = sc.duration + sc.config().record_ttl + DRAIN_GUARD + 120
    try:
        results, opened = run_fleet(jobs, timeout)
    finally:
        delete_stream(endpoint, stream)
    engine_cpu = proc_cpu_seconds(engine_pid) - cpu0
    return summarize(sc, results, opened, engine_cpu, time.perf_counter() - t0, load)


def summarize(
    sc: Scenario,
    results: list[dict[str, Any]],
    opened: float,
    engine_cpu: float,
    real: float,
    load: float,
) -> dict[str, Any]:
    """A row's figures from its children's results."""

    def total(name: str) -> float:
        return sum(float(r["totals"].get(name, 0.0)) for r in results)

    row = {
        "scenario": dataclasses.asdict(sc),
        **figures([r["report"] for r in results], sc.capacity, sc.duration - WARMUP),
    }
    throttled, put = total("KinesisRecordsThrottled"), total("KinesisRecordsPut")
    ok = row["ok"]
    p50s = sorted(r["request_p50_s"] for r in results)
    row.update(
        throttled_share=throttled / (put + throttled) if put + throttled else 0.0,
        user_per_kinesis_record=total("UserRecordsPut") / put if put else 0.0,
        requests=sum(r["requests"] for r in results),
        request_p50_s=p50s[len(p50s) // 2] if p50s else 0.0,
        request_p99_s=max((r["request_p99_s"] for r in results), default=0.0),
        cpu_us_per_record=sum(r["cpu_s"] for r in results) / ok * 1e6 if ok else None,
        engine_cpu_us_per_record=engine_cpu / ok * 1e6 if ok else None,
        peak_rss_mib=max(r["rss_end_mib"] for r in results),
        opened_s=opened,
        real_s=real,
        loadavg_at_start=load,
    )
    return row


def _us(value: float | None) -> str:
    return "-" if value is None else f"{value:.0f}"


def table_row(row: dict[str, Any]) -> list[object]:
    sc, accepted = row["scenario"], row["accepted"]
    return [
        sc["producers"],
        sc["shards"],
        f"{sc['offered']:g}x",
        f"{sc['record_size']:,}",
        f"{sc['duration']:g}",
        "on" if sc["admission"] else "off",
        f"{row['capacity_used']:.3f}",
        f"{row['throttled_share']:.1%}",
        f"{accepted / row['offered_records']:.1%}" if row["offered_records"] else "-",
        f"{row['expired']:,} ({row['expired'] / accepted:.1%})" if accepted else "0",
        f"{row['failed']:,}",
        f"{row['fairness']:.2f}",
        f"{row['age_from_put_p50_s']:.1f} / {row['age_from_put_p99_s']:.1f} / "
        f"{row['age_from_put_max_s']:.1f}",
        f"{row['put_wait_share']:.1%}",
        f"{_us(row['cpu_us_per_record'])} / {_us(row['engine_cpu_us_per_record'])}",
        f"{row['request_p50_s'] * 1e3:.0f} / {row['request_p99_s'] * 1e3:.0f}",
        f"{row['opened_s']:.1f}",
        f"{row['real_s']:.0f}",
        f"{row['loadavg_at_start']:.2f}",
    ]


def _expired_share(row: dict[str, Any]) -> float:
    return row["expired"] / row["accepted"] if row["accepted"] else 0.0


def compare(proc: dict[str, Any], sim: dict[str, Any]) -> tuple[list[object], list[str]]:
    """The side-by-side cells of a processes row and its simulation, and the figures
    outside the tolerance (none: the same shape)."""
    outside = [
        name
        for name, value in (
            ("capacity_used", abs(proc["capacity_used"] - sim["capacity_used"])),
            ("expired_share", abs(_expired_share(proc) - _expired_share(sim))),
            ("fairness", abs(proc["fairness"] - sim["fairness"])),
        )
        if value > TOLERANCE[name]
    ]
    ages = proc["age_from_put_p99_s"], sim["age_from_put_p99_s"]
    share, seconds = AGE_TOLERANCE
    if abs(ages[0] - ages[1]) > max(share * max(ages), seconds):
        outside.append("p99 age")
    sc = proc["scenario"]
    cells: list[object] = [
        f"{sc['producers']} x {sc['offered']:g}x",
        "on" if sc["admission"] else "off",
        f"{proc['capacity_used']:.3f} / {sim['capacity_used']:.3f}",
        f"{_expired_share(proc):.2%} / {_expired_share(sim):.2%}",
        f"{proc['fairness']:.2f} / {sim['fairness']:.2f}",
        f"{ages[0]:.1f} / {ages[1]:.1f}",
        f"{proc['throttled_share']:.1%} / {sim['throttled_share']:.1%}",
        f"{proc['put_wait_share']:.1%} / {sim['put_wait_share']:.1%}",
        "same shape" if not outside else "outside: " + ", ".join(outside),
    ]
    return cells, outside


def scenarios(args: argparse.Namespace) -> list[Scenario]:
    duration = args.duration or (QUICK_DURATION if args.quick else DURATION)
    if args.producers or args.offered or args.admission:
        chosen = _admissions(args.admission) if args.admission else (True, False)
        plan = [
            (n, o, chosen)
            for n in _ints(args.producers or "6")
            for o in _floats(args.offered or "2.25")
        ]
    else:
        plan = QUICK if args.quick else GRID
    return [
        Scenario(
            n,
            args.shards,
            o,
            duration,
            args.record_size,
            admission=on,
            seed=args.seed,
            settings=tuple(args.set),
        )
        for n, o, admissions in plan
        for on in admissions
    ]


def simulate(
    plan: list[Scenario], rows: list[dict[str, Any]], rtt: float, checked: int = CHECKED
) -> list[tuple[dict[str, Any], dict[str, Any]]]:
    """The simulation of each row of ``checked`` producers, paired with it."""
    from benchmarks._command import log
    from benchmarks._fleet_grid import MAX_REQUESTS

    pairs = []
    for sc, row in zip(plan, rows, strict=True):
        if sc.producers == checked:
            simulated = dataclasses.replace(sc, rtt=rtt, max_requests=MAX_REQUESTS)
            summary, cost = _fleet_sim.run(simulated)
            pairs.append((row, {**summary, **cost}))
            log(f"simulated {sc.label()}: {cost['real_s']:.1f} s real")
    return pairs


def _markdown(args: argparse.Namespace, rows: list[dict[str, Any]], sims: list[Any]) -> list[str]:
    from benchmarks._fleet_grid import HEADER as SIM_HEADER
    from benchmarks._fleet_grid import markdown_table as sim_table
    from benchmarks._fleet_grid import table_row as sim_row
    from benchmarks._report import markdown_table

    md = [
        "Method: see `benchmarks/_fleet_processes.py` (its docstring). Each row: N producer "
        "processes on one fresh stream of `kinesis-trio local --emulator python --limits "
        "aws`, offered the multiple of the stream's capacity for the seconds given, records "
        "of the size given over random keys, every outcome awaited. Scaled to fit two "
        f"cores: {args.shards} shard(s) of {args.record_size:,}-byte records where the "
        "issue has 4 shards of 200 bytes (the same multiple of the capacity, a quarter of "
        "the bytes, a fortieth of the records). CPU: each producer process's over its run "
        "(its putter included) and the engine's, per record confirmed. Load: the load "
        "average when the row started (two cores, shared; it lags: after a row of 24 "
        "processes it still counts their start).",
        "",
        markdown_table(HEADER, [table_row(r) for r in rows], ALIGN),
        "",
    ]
    if sims:
        tolerance = (
            f"capacity used within {TOLERANCE['capacity_used']:g}, expired within "
            f"{TOLERANCE['expired_share']:.0%} of the records accepted, fairness within "
            f"{TOLERANCE['fairness']:g}, p99 age within {AGE_TOLERANCE[0]:.0%} of the larger "
            f"or {AGE_TOLERANCE[1]:g} s"
        )
        md += [
            f"## Processes against the simulation at N = {CHECKED}",
            "",
            "Each cell: processes / simulation (`fleet sim` of the same scenario, one "
            f"process on virtual time, round trip {args.sim_rtt * 1e3:g} ms). The same "
            f"shape: {tolerance}.",
            "",
            markdown_table(
                [
                    "fleet",
                    "admission",
                    "capacity used",
                    "expired",
                    "fairness",
                    "age p99 from put (s)",
                    "throttled",
                    "put waited",
                    "verdict",
                ],
                [cells for cells, _ in (compare(p, s) for p, s in sims)],
                "llrrrrrrl",
            ),
            "",
            "The simulated rows in full:",
            "",
            sim_table(SIM_HEADER, [sim_row({"group": "producers", **s}) for _, s in sims]),
            "",
        ]
    return md


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else "")
    parser.add_argument("--producers", help="N, comma-separated")
    parser.add_argument("--offered", help="multiples of the capacity, comma-separated")
    parser.add_argument("--admission", help="on, off or on,off")
    parser.add_argument("--shards", type=int, default=SHARDS)
    parser.add_argument("--record-size", type=int, default=RECORD, help="bytes")
    parser.add_argument("--duration", type=float, help=f"seconds per row ({DURATION:g})")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--set", type=_setting, action="append", default=[], help="ProducerConfig NAME=VALUE"
    )
    parser.add_argument("--sim-rtt", type=float, default=0.005, help="the simulation's (s)")
    parser.add_argument("--no-sim", action="store_true", help="no simulation beside")
    parser.add_argument("--quick", action="store_true", help="8 s rows, three of them")
    parser.add_argument("--name", default="fleet_processes", help="results/<name>.{md,json}")
    args = parser.parse_args()

    from benchmarks._command import command_line, log
    from benchmarks._report import machine_info, publish, report_header
    from kinesis_trio.testing._emulators import LocalKinesis

    info = machine_info()
    started = time.perf_counter()
    rows: list[dict[str, Any]] = []
    plan = scenarios(args)
    with LocalKinesis("python", args=["--limits", "aws"], shard_limit=100) as engine:
        for sc in plan:
            row = run_row(engine.endpoint_url, engine.pid, sc)
            rows.append(row)
            log(
                f"processes {sc.label()}: capacity {row['capacity_used']:.3f}, expired "
                f"{row['expired']:,}, fairness {row['fairness']:.2f}, p99 age "
                f"{row['age_from_put_p99_s']:.1f} s, {row['real_s']:.0f} s real "
                f"(at {time.perf_counter() - started:.0f} s)"
            )
    sims = [] if args.no_sim else simulate(plan, rows, args.sim_rtt)
    total = time.perf_counter() - started
    md = report_header("# A fleet of producer processes on one stream", info, total)
    md += _markdown(args, rows, sims)
    data = {
        "command": command_line(),
        "machine": info,
        "settings": vars(args),
        "rows": rows,
        "simulated": [s for _, s in sims],
        "tolerance": {**TOLERANCE, "age_share": AGE_TOLERANCE[0], "age_s": AGE_TOLERANCE[1]},
    }
    publish(args.name, md, data, total)


if __name__ == "__main__":
    main()
