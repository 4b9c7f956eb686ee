"""``kinesis-trio perf --processes N``: throughput against producer processes, and how
independent producers converge on a shard's capacity (issue 25).

* **Scaling**: ``perf --processes N`` for N in ``--processes`` (1, 2, 3, 4) as fast as
  possible for ``--duration`` seconds, each run on a fresh ``--shards``-shard stream (64:
  the producers' own per-shard limits do not bind) of one local engine without limits
  (kinesalite when Node.js is installed, else the Python engine; ``--engine``). perf's
  defaults: 512-byte records over 256 keys, aggregated, trio. ``--rounds`` rounds, the N
  interleaved; medians. Per N: records/s and MB/s (the sum over the common wall interval),
  the slowest and fastest process, p50/p99 over every record, CPU per record (the
  processes' own, summed), the producers' cores and the engine's (CPU seconds per second
  of the load; the engine's over the whole command). N = 1 runs in process (perf's
  default). The engine shares the machine: on 2 cores, from 2 processes on the producers
  and the engine share cores.
* **Convergence**: the Python engine with ``--limits aws``, a 1-shard stream (1,000
  records/s), 100-byte records not aggregated (so the records limit binds), each process
  as fast as possible with ``max_outstanding_records`` 2,000 (a queue of seconds, well
  within ``record_ttl``), each with its own adaptive rate limiter (``rate_limit`` 150 %,
  halved on throttling, +10 % a second back) and no coordination. N in ``--converge``
  (2, 4) started together for ``--limit-duration`` seconds, and 2 with the second joining
  ``--join-after`` seconds after the first. From each process's timeline (records
  confirmed per 0.5 s): when the sum first reaches 90 % of the limit, how many 0.5 s
  buckets after that stay at 90 % or more, the mean sum as a share of the limit, each
  process's share over the second half (and Jain's fairness index: 1 is even), throttled
  attempts per second; for the join, when the newcomer's share (1 s windows) first reaches
  40 % of the sum (80 % of an even share).

Writes ``results/<name>.{md,json}`` and ``results/<name>.png`` (the convergence runs over
time, drawn by ``benchmarks._plots``).

    uv run python -m benchmarks processes    # --duration 10 --rounds 3 --limit-duration 30
"""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

LIMIT_RECORDS_PER_SHARD = 1000.0
CONVERGED = 0.9  # of the limit
JOINED = 0.4  # the newcomer's share of the sum: 80 % of an even share of two


def run_perf(endpoint: str, args: Sequence[str], timeout: float) -> dict[str, Any]:
    """Run ``kinesis-trio perf --endpoint-url ENDPOINT ARGS`` and return its JSON report,
    with ``wall_s`` (the command's life) and ``exit``."""
    with tempfile.TemporaryDirectory() as tmp:
        report = Path(tmp) / "report.json"
        command = [
            sys.executable,
            "-m",
            "kinesis_trio",
            "perf",
            "--endpoint-url",
            endpoint,
            "--region",
            "us-east-1",
            "-q",
            "--json-report",
            str(report),
            *args,
        ]
        env = dict(os.environ, AWS_ACCESS_KEY_ID="AKIDBENCH", AWS_SECRET_ACCESS_KEY="bench")
        started = time.perf_counter()
        out = subprocess.run(
            command,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            env=env,
            check=False,
        )
        wall = time.perf_counter() - started
        if not report.exists():
            raise RuntimeError(
                f"{' '.join(command)} exited with {out.returncode} and no report:\n"
                + out.stdout[-2000:]
                + out.stderr[-2000:]
            )
        data: dict[str, Any] = json.loads(report.read_text())
    data["wall_s"] = wall
    data["exit"] = out.returncode
    for process in data["per_process"]:  # the histograms: the sum has the percentiles
        if process.get("result"):
            process["result"].pop("latency", None)
    return data


def process_rates(report: dict[str, Any]) -> list[float]:
    return [
        p["result"]["accepted"] / max(p["result"]["ended"] - p["result"]["started"], 1e-9)
        for p in report["per_process"]
        if p.get("result")
    ]


def scaling_row(n: int, runs: list[dict[str, Any]], base: float) -> list[str]:
    def med(values: Sequence[float]) -> float:
        return statistics.median(values) if values else math.nan

    rate = med([r["sum"]["records_per_s"] for r in runs])
    per = [process_rates(r) for r in runs]
    return [
        str(n),
        f"{rate:,.0f}",
        f"{rate / base:.2f}" if base else "n/a",
        f"{med([r['sum']['mb_per_s'] for r in runs]):,.1f}",
        f"{med([min(p) for p in per]):,.0f} - {med([max(p) for p in per]):,.0f}",
        f"{med([r['sum']['latency_s']['p50'] for r in runs]) * 1e3:,.1f}",
        f"{med([r['sum']['latency_s']['p99'] for r in runs]) * 1e3:,.1f}",
        f"{med([r['sum']['cpu_us_per_record'] for r in runs]):,.1f}",
        f"{med([r['sum']['cpu'] / r['sum']['elapsed'] for r in runs]):.2f}",
        f"{med([r['engine_cpu_s'] / r['sum']['elapsed'] for r in runs]):.2f}",
        f"{sum(r['sum']['failed'] for r in runs):,}",
    ]


def convergence(report: dict[str, Any], limit: float) -> dict[str, Any]:
    """The convergence figures of one limited run (see the module's docstring)."""
    total = report["sum"]["timeline"]
    step = float(total["step"])
    origin = float(total["origin"])
    results = [p["result"] for p in report["per_process"] if p.get("result")]
    timelines = []
    for r in results:  # each on the sum's origin
        shift = round((r["timeline"]["origin"] - origin) / step)
        timelines.append([0] * shift + r["timeline"]["ok"])
    # whole buckets while every process that started by then still put records (after
    # --duration each only waits for its records in flight)
    duration = report["load"]["duration"] or math.inf
    end = min(min(r["ended"], r["started"] + duration) for r in results)
    full = max(0, math.floor((end - origin) / step))
    sums = [(total["ok"][i] if i < len(total["ok"]) else 0) / step for i in range(full)]
    throttles = [(n / step) for n in total["throttled"][:full]]
    first = next((i for i, s in enumerate(sums) if s >= CONVERGED * limit), None)
    after = sums[first:] if first is not None else []
    half = full // 2
    shares = [sum(t[half:full]) for t in timelines]
    whole = sum(shares) or 1
    jain = sum(shares) ** 2 / (len(shares) * sum(s * s for s in shares)) if any(shares) else 0.0
    out: dict[str, Any] = {
        "limit_records_per_s": limit,
        "step_s": step,
        "full_buckets": full,
        "sum_records_per_s": sums,
        "per_process_records_per_s": [[n / step for n in t[:full]] for t in timelines],
        "throttled_attempts_per_s": throttles,
        "at_90_percent_after_s": None if first is None else (first + 1) * step,
        "buckets_at_90_percent_after": (
            None if not after else sum(s >= CONVERGED * limit for s in after) / len(after)
        ),
        "mean_of_limit": statistics.fmean(sums) / limit if sums else math.nan,
        "shares_second_half": [s / whole for s in shares],
        "jain_second_half": jain,
        "throttled_per_s_first_2s": statistics.fmean(throttles[: int(2 / step)] or [0]),
        "throttled_per_s_second_half": statistics.fmean(throttles[half:] or [0]),
        "failed": report["sum"]["failed"],
    }
    return out


def joining(report: dict[str, Any], limit: float, join_after: float) -> dict[str, Any]:
    """The newcomer's share of the sum in 1 s windows from its start."""
    figures = convergence(report, limit)
    step = figures["step_s"]
    first, second = report["per_process"][0]["result"], report["per_process"][1]["result"]
    origin = report["sum"]["timeline"]["origin"]
    join = round((second["started"] - origin) / step)
    a = [0] * round((first["timeline"]["origin"] - origin) / step) + first["timeline"]["ok"]
    b = [0] * round((second["timeline"]["origin"] - origin) / step) + second["timeline"]["ok"]
    end = min(len(a), figures["full_buckets"])
    window = max(1, round(1.0 / step))
    reached = None
    shares = []
    for i in range(join, end - window + 1):
        mine = sum(b[i : i + window])
        both = mine + sum(a[i : i + window])
        share = mine / both if both else 0.0
        shares.append(share)
        if reached is None and share >= JOINED:
            reached = (i - join + window) * step
    figures.update(
        join_after_s=join_after,
        joined_at_s=join * step,
        newcomer_share_1s=shares,
        newcomer_at_40_percent_after_s=reached,
    )
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--processes", default="1,2,3,4", help="N of the scaling runs")
    parser.add_argument("--duration", type=float, default=10.0, help="seconds per scaling run")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--shards", type=int, default=64)
    parser.add_argument("--engine", choices=["kinesalite", "kinesis-local", "python"])
    parser.add_argument("--converge", default="2,4", help="N of the limited runs")
    parser.add_argument("--limit-shards", type=int, default=1)
    parser.add_argument("--limit-duration", type=float, default=30.0)
    parser.add_argument("--join-after", type=float, default=10.0)
    parser.add_argument("--skip-scaling", action="store_true")
    parser.add_argument("--skip-convergence", action="store_true")
    parser.add_argument("--name", default="processes", help="results/<name>.{md,json,png}")
    args = parser.parse_args()

    from benchmarks._child import proc_cpu_seconds
    from benchmarks._command import command_line, log
    from benchmarks._emulator import delete_stream
    from benchmarks._plots import processes_chart
    from benchmarks._report import RESULTS_DIR, machine_info, markdown_table, publish, report_header
    from kinesis_trio.testing._emulators import LocalKinesis, default_engine

    info = machine_info()
    cores = os.cpu_count() or 1
    started = time.perf_counter()
    kind = args.engine or default_engine()
    counts = [int(n) for n in args.processes.split(",") if n]
    scaling: dict[int, list[dict[str, Any]]] = {n: [] for n in counts}
    timeout = args.duration * 3 + 120

    if not args.skip_scaling:
        with LocalKinesis(kind, shard_limit=max(1000, args.shards * 2)) as engine:
            url = engine.endpoint_url
            for round_ in range(args.rounds):
                order = counts[round_ % len(counts) :] + counts[: round_ % len(counts)]
                for n in order:
                    cpu0 = proc_cpu_seconds(engine.pid)
                    report = run_perf(
                        url,
                        [
                            "--shards",
                            str(args.shards),
                            "--duration",
                            f"{args.duration:g}",
                            "--processes",
                            str(n),
                        ],
                        timeout,
                    )
                    report["engine_cpu_s"] = proc_cpu_seconds(engine.pid) - cpu0
                    delete_stream(url, report["stream"])
                    scaling[n].append(report)
                    s = report["sum"]
                    log(
                        f"round {round_ + 1} processes {n}: {s['records_per_s']:,.0f} records/s"
                        f"  p99 {s['latency_s']['p99'] * 1e3:,.1f} ms"
                        f"  producers {s['cpu'] / s['elapsed']:.2f} cores"
                        f"  engine {report['engine_cpu_s'] / s['elapsed']:.2f} cores"
                        f"  exit {report['exit']}"
                    )

    limited: dict[str, dict[str, Any]] = {}
    if not args.skip_convergence:
        limit = args.limit_shards * LIMIT_RECORDS_PER_SHARD
        common = [
            "--shards",
            str(args.limit_shards),
            "--no-aggregation",
            "-s",
            "100",
            "--max-outstanding-records",
            "2000",
        ]
        runs: list[tuple[str, int, float]] = [
            (f"{n} together", n, 0.0) for n in (int(x) for x in args.converge.split(",") if x)
        ]
        runs.append(("2, the second joining", 2, args.join_after))
        with LocalKinesis("python", args=["--limits", "aws"], shard_limit=100) as engine:
            for label, n, stagger in runs:
                extra = ["--stagger", f"{stagger:g}"] if stagger else []
                report = run_perf(
                    engine.endpoint_url,
                    [
                        *common,
                        "--duration",
                        f"{args.limit_duration:g}",
                        "--processes",
                        str(n),
                        *extra,
                    ],
                    args.limit_duration * 3 + stagger * n + 120,
                )
                delete_stream(engine.endpoint_url, report["stream"])
                figures = joining(report, limit, stagger) if stagger else convergence(report, limit)
                figures.update(label=label, processes=n, report=report)
                limited[label] = figures
                log(
                    f"limited {label}: 90 % after {figures['at_90_percent_after_s']} s, "
                    f"mean {figures['mean_of_limit'] * 100:.0f} % of the limit, "
                    f"Jain {figures['jain_second_half']:.3f}, exit {report['exit']}"
                )

    total = time.perf_counter() - started
    md = report_header(
        "# Producer processes: throughput, and sharing a shard without coordination",
        info,
        total,
    )
    if scaling and not args.skip_scaling:
        base_runs = scaling.get(1, [])
        base = statistics.median([r["sum"]["records_per_s"] for r in base_runs]) if base_runs else 0
        md += [
            f"## Throughput against processes ({kind}, no limits)",
            "",
            f"`kinesis-trio perf --processes N --shards {args.shards} --duration "
            f"{args.duration:g}` against {kind}: 512-byte records over 256 keys, aggregated, "
            f"trio, as fast as possible; medians of {args.rounds} rounds. records/s, MB/s: the "
            "sum over the common wall interval (earliest start to latest end); per process: "
            "the slowest and fastest, over its own interval; latency from each put() call, "
            "over every record; CPU: the processes' own (summed) per record and per second of "
            "the load; engine: the engine process's CPU over the whole command per second of "
            f"the load. This machine has {cores} cores: from {cores} processes on, the "
            "producers share them with each other and with the engine.",
            "",
            markdown_table(
                [
                    "processes",
                    "records/s",
                    "vs 1 process",
                    "MB/s",
                    "records/s per process",
                    "p50 ms",
                    "p99 ms",
                    "CPU µs/record",
                    "producer cores",
                    "engine cores",
                    "failed",
                ],
                [scaling_row(n, scaling[n], base) for n in counts if scaling[n]],
                "rrrrrrrrrrr",
            ),
            "",
        ]
    if limited:
        rows = []
        for label, f in limited.items():
            at90 = f["at_90_percent_after_s"]
            held = f["buckets_at_90_percent_after"]
            joined = f.get("newcomer_at_40_percent_after_s")
            rows.append(
                [
                    label,
                    "not reached" if at90 is None else f"{at90:g} s",
                    "n/a" if held is None else f"{held * 100:.0f} %",
                    f"{f['mean_of_limit'] * 100:.0f} %",
                    " / ".join(f"{s * 100:.0f} %" for s in f["shares_second_half"]),
                    f"{f['jain_second_half']:.3f}",
                    f"{f['throttled_per_s_first_2s']:,.0f} → "
                    f"{f['throttled_per_s_second_half']:,.0f}",
                    ("n/a" if "join_after_s" not in f else "not reached")
                    if joined is None
                    else f"{joined:g} s",
                    f"{f['failed']:,}",
                ]
            )
        md += [
            f"## Sharing {args.limit_shards} shard(s) at AWS's limits (the Python engine, "
            "`--limits aws`)",
            "",
            f"`kinesis-trio perf --processes N --shards {args.limit_shards} --no-aggregation "
            f"-s 100 --max-outstanding-records 2000 --duration {args.limit_duration:g}` "
            f"(and `--stagger {args.join_after:g}` for the join): the limit is "
            f"{args.limit_shards * LIMIT_RECORDS_PER_SHARD:,.0f} records/s; each process "
            "writes as fast as its own adaptive limiter lets it. Figures from the records "
            "confirmed per 0.5 s while every process that had started still put records (not "
            "while they wait for their last ones): when the sum "
            "first reached 90 % of the limit (the end of that bucket), the share of buckets "
            "at 90 % or more from then on, the mean sum against the limit, each process's "
            "share over the second half, Jain's fairness index over those shares (1: even), "
            "throttled attempts per second (first 2 s → second half), and for the join, when "
            "the newcomer's share of 1 s windows first reached 40 % (80 % of an even share), "
            "from its start. The engine's buckets start full (one second's worth), so the "
            "first second can pass the limit.",
            "",
            markdown_table(
                [
                    "processes",
                    "sum at 90 % after",
                    "buckets ≥ 90 % since",
                    "mean of the limit",
                    "shares (second half)",
                    "Jain",
                    "throttled/s",
                    "newcomer at 40 % after",
                    "failed",
                ],
                rows,
                "lrrrrrrrr",
            ),
            "",
            f"Plot: `{args.name}.png` (records/s of each process and their sum, per 0.5 s).",
            "",
        ]
    data = {
        "command": command_line(),
        "machine": info,
        "engine": kind,
        "settings": vars(args),
        "scaling": {str(n): runs for n, runs in scaling.items()},
        "limited": limited,
    }
    if limited:
        processes_chart(data, RESULTS_DIR / f"{args.name}.png")
    publish(args.name, md, data, total)


if __name__ == "__main__":
    main()
