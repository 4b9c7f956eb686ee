"""Sweeps of kinesis_trio (trio, confirmed) throughput and CPU per record on kinesalite.

* record size 32 B ... 1 MiB, aggregation on and off (1 shard; each point moves about
  ``--mb`` MB, capped in records so that it takes a few seconds);
* shard count 1 ... 64 (aggregation on, 200-byte records);
* ``max_connections`` 1 ... 64 (aggregation on, 200-byte records, ``--conn-shards`` shards).

Every point is its own child process on a fresh stream. Next to the producer's CPU we read
the emulator's (kinesalite, one node process) from ``/proc/<pid>/stat``: both divided by
the elapsed time give the cores each kept busy, which says who saturates: the producer
(one Python thread: about 1 core), the emulator (one node thread: about 1 core), or the
machine (2 cores shared by both).

Run: ``uv run python -m benchmarks sizes sweeps [--only size,shards,connections]``.
Writes ``benchmarks/results/sizes.{md,json}``.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass
from typing import Any

from benchmarks._command import command_line, log
from benchmarks._report import markdown_table, publish, report_header
from benchmarks._runs import emulator_session, on_off, run_on_fresh_stream
from benchmarks._summary import cost_medians, failed_total, fmt, fmt_int, median_field

MIB = 1024 * 1024
#: data + partition key must fit in 1 MiB: the "1 MiB" point leaves room for the key
SIZES = [32, 128, 512, 2048, 8192, 32768, 131072, 524288, MIB - 64]
SHARDS = [1, 2, 4, 8, 16, 32, 64]
CONNECTIONS = [1, 2, 4, 8, 16, 24, 64]


def size_label(size: int) -> str:
    if size >= MIB - 1024:
        return "1 MiB - 64 B"
    if size >= 1024:
        return f"{size // 1024} KiB"
    return f"{size} B"


def bottleneck(p: dict[str, Any], cores: int) -> str:
    prod = p["producer_cores"]
    emu = p["emulator_cores"]
    if prod + emu >= 0.85 * cores:
        return "machine (both busy)"
    if prod >= 0.8 and prod >= emu:
        return "producer CPU"
    if emu >= 0.8:
        return "emulator CPU"
    return "neither at 0.8 core (waiting, or other load on the host)"


@dataclass
class Point:
    """One point of a sweep: the swept parameter's value and the settings of the run (the
    others as by default: 1 shard, 200-byte records, aggregation on, 24 connections)."""

    sweep: str
    param: str
    value: int
    label: str
    count: int
    shards: int = 1
    size: int = 200
    aggregation: bool = True
    connections: int = 24


def run_point(
    emulator: Any,
    pt: Point,
    *,
    linger: float,
    keys: int,
    repeat: int,
    timeout: float,
    cores: int,
) -> dict[str, Any]:
    runs: list[dict[str, Any]] = []
    errors: list[str] = []
    for _ in range(repeat):
        res = run_on_fresh_stream(
            emulator,
            "runners.kinesis_trio",
            load=["--count", str(pt.count)],
            size=pt.size,
            keys=keys,
            shards=pt.shards,
            linger=linger,
            extra=[
                "--backend",
                "trio",
                "--mode",
                "confirmed",
                "--aggregation",
                on_off(pt.aggregation),
                "--max-connections",
                str(pt.connections),
            ],
            timeout=timeout,
        )
        if res.ok:
            runs.append(res.data)
        else:
            errors.append(res.error)

    def med(key: str) -> float:
        return median_field(runs, key)

    elapsed = med("elapsed_s")
    point: dict[str, Any] = {
        "sweep": pt.sweep,
        "param": pt.param,
        "value": pt.value,
        "variant": f"kinesis_trio trio confirmed {pt.param}={pt.value}",
        "library": "kinesis_trio",
        "backend": "trio",
        "mode": "confirmed",
        "aggregation": pt.aggregation,
        "records": pt.count,
        "record_bytes": pt.size,
        "shards": pt.shards,
        "max_connections": pt.connections,
        **cost_medians(runs),
        "emulator_cpu_s": round(med("emulator_cpu_s"), 3),
        "emulator_cpu_us_per_record": round(med("emulator_cpu_us_per_record"), 2),
        "producer_cores": round(med("cpu_s") / elapsed, 2) if elapsed > 0 else math.nan,
        "emulator_cores": round(med("emulator_cpu_s") / elapsed, 2) if elapsed > 0 else math.nan,
        "failed": failed_total(runs),
        "errors": errors,
        "runs": runs,
    }
    point["bottleneck"] = bottleneck(point, cores) if runs else "run failed"
    log(
        f"{pt.sweep} {pt.param}={pt.value} agg={on_off(pt.aggregation)}: {pt.count:,} records, "
        f"{point['records_per_s']:,.0f} rec/s, {point['mb_per_s']:.1f} MB/s, "
        f"{point['cpu_us_per_record']:.1f} µs/rec, producer {point['producer_cores']} cores, "
        f"emulator {point['emulator_cores']} cores, failed {point['failed']}"
        + (f", ERRORS {errors}" if errors else "")
    )
    point["label"] = pt.label
    return point


def sweep_table(points: list[dict[str, Any]], first: str) -> str:
    body = []
    for p in points:
        if not p["runs"]:
            body.append([p["label"], "failed", *[""] * 9])
            continue
        body.append(
            [
                p["label"],
                fmt_int(p["records"]),
                fmt(p["elapsed_s"]),
                fmt_int(p["records_per_s"]),
                fmt(p["mb_per_s"], 1),
                fmt(p["cpu_us_per_record"], 1),
                fmt(p["emulator_cpu_us_per_record"], 1),
                fmt(p["producer_cores"]),
                fmt(p["emulator_cores"]),
                fmt(p["peak_rss_mib"], 0),
                str(p["failed"]),
                p["bottleneck"],
            ]
        )
    return markdown_table(
        [
            first,
            "records",
            "elapsed s",
            "records/s",
            "MB/s",
            "producer CPU µs/record",
            "emulator CPU µs/record",
            "producer cores",
            "emulator cores",
            "peak RSS MiB",
            "failed",
            "busiest",
        ],
        body,
        "lrrrrrrrrrrl",
    )


def saturation_note(points: list[dict[str, Any]], what: str, unit: str = "records/s") -> str:
    ok = [p for p in points if p["runs"]]
    if not ok:
        return f"{what}: no successful point."
    key = "records_per_s" if unit == "records/s" else "mb_per_s"
    best = max(ok, key=lambda p: p[key])
    first = ok[0]
    knee = next((p for p in ok if p[key] >= 0.9 * best[key]), best)
    return (
        f"{what}: from {first['label']} ({first[key]:,.1f} {unit}) to a best of "
        f"{best[key]:,.1f} {unit} at {best['label']}; 90 % of the best is reached at "
        f"{knee['label']}. At the best point the producer kept {best['producer_cores']} "
        f"core(s) busy and kinesalite {best['emulator_cores']} (busiest: {best['bottleneck']})."
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--only", default="size,shards,connections")
    parser.add_argument("--mb", type=float, default=30.0, help="MB moved per size point")
    parser.add_argument("--count", type=int, default=100_000, help="records, shard/conn sweeps")
    parser.add_argument("--max-agg-count", type=int, default=100_000)
    parser.add_argument("--max-plain-count", type=int, default=40_000)
    parser.add_argument("--conn-shards", type=int, default=8)
    parser.add_argument("--keys", type=int, default=256)
    parser.add_argument("--linger", type=float, default=0.05)
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--name", default="sizes")
    args = parser.parse_args()
    which = set(args.only.split(","))
    todo: list[Point] = []
    if "size" in which:
        for agg in (True, False):
            cap = args.max_agg_count if agg else args.max_plain_count
            for size in SIZES:
                count = max(20, min(cap, round(args.mb * 1e6 / size)))
                label = f"{size_label(size)}, agg {on_off(agg)}"
                todo.append(
                    Point("size", "record_bytes", size, label, count, size=size, aggregation=agg)
                )
    if "shards" in which:
        todo += [
            Point("shards", "shards", n, f"{n} shard(s)", args.count, shards=n) for n in SHARDS
        ]
    if "connections" in which:
        todo += [
            Point(
                "connections",
                "max_connections",
                n,
                f"max_connections={n}",
                args.count,
                shards=args.conn_shards,
                connections=n,
            )
            for n in CONNECTIONS
        ]
    with emulator_session() as session:
        cores = int(session.info["cores"] or 2)
        points = [
            run_point(
                session.emulator,
                pt,
                linger=args.linger,
                keys=args.keys,
                repeat=args.repeat,
                timeout=args.timeout,
                cores=cores,
            )
            for pt in todo
        ]
    info, total = session.info, session.total

    md = [
        *report_header("# kinesis_trio sweeps (trio, confirmed) on kinesalite", info, total),
        f"Linger {args.linger * 1000:.0f} ms, {args.keys} partition keys, per-shard rate "
        f"limiter lifted, {args.repeat} run(s) per point (median), each in its own process "
        "on a fresh stream. *producer cores* = the producer's CPU time (work only) / elapsed; "
        "*emulator cores* = kinesalite's CPU time over the child's life / elapsed (it idles "
        f"outside the measured span). The machine has {cores} cores for both. *busiest*: "
        "which side was CPU-bound (>= 0.8 core; 'machine' when both together use >= 85 % of "
        "the cores). 'neither' means neither process got 0.8 core: it waited (linger, round "
        "trips, its own pipeline) or, on this shared host, other processes had the CPU "
        "(see the load average above).",
        "",
    ]
    if "size" in which:
        size_pts = [p for p in points if p["sweep"] == "size"]
        md += [
            "## Record size (1 shard)",
            "",
            f"Each point moves about {args.mb:g} MB, at most {args.max_agg_count:,} records "
            f"with aggregation and {args.max_plain_count:,} without. Records above "
            "aggregation_max_size (51,200 B) are never aggregated: agg on and off converge.",
            "",
            sweep_table(size_pts, "record size"),
            "",
            "- "
            + saturation_note(
                [p for p in size_pts if p["aggregation"]], "Aggregation on, MB/s", "MB/s"
            ),
            "- "
            + saturation_note(
                [p for p in size_pts if not p["aggregation"]], "Aggregation off, MB/s", "MB/s"
            ),
            "",
        ]
        agg_pairs = []
        for size in SIZES:
            on = next((p for p in size_pts if p["value"] == size and p["aggregation"]), None)
            off = next((p for p in size_pts if p["value"] == size and not p["aggregation"]), None)
            if on and off and on["runs"] and off["runs"]:
                agg_pairs.append(
                    [
                        size_label(size),
                        fmt_int(on["records_per_s"]),
                        fmt_int(off["records_per_s"]),
                        f"x{on['records_per_s'] / off['records_per_s']:.2f}",
                        fmt(on["cpu_us_per_record"], 1),
                        fmt(off["cpu_us_per_record"], 1),
                    ]
                )
        if agg_pairs:
            md += [
                "### Aggregation on vs off",
                "",
                markdown_table(
                    [
                        "record size",
                        "records/s agg on",
                        "records/s agg off",
                        "on / off",
                        "CPU µs/record on",
                        "CPU µs/record off",
                    ],
                    agg_pairs,
                    "lrrrrr",
                ),
                "",
            ]
    if "shards" in which:
        pts = [p for p in points if p["sweep"] == "shards"]
        md += [
            f"## Shard count (aggregation on, 200 B, {args.count:,} records)",
            "",
            sweep_table(pts, "shards"),
            "",
            "- " + saturation_note(pts, "Shards"),
            "",
        ]
    if "connections" in which:
        pts = [p for p in points if p["sweep"] == "connections"]
        md += [
            f"## max_connections (aggregation on, 200 B, {args.conn_shards} shards, "
            f"{args.count:,} records)",
            "",
            sweep_table(pts, "max_connections"),
            "",
            "- " + saturation_note(pts, "max_connections"),
            "",
        ]
    failed = [(p["label"], e) for p in points for e in p["errors"]]
    if failed:
        md += ["## Runs that failed", ""]
        md += [f"- {label}: `{err[:1500]}`" for label, err in failed]
    data = {
        "benchmark": "sweeps",
        "command": command_line(),
        "machine": info,
        "settings": vars(args),
        "total_seconds": round(total, 1),
        "rows": points,
    }
    publish(args.name, md, data, total)


if __name__ == "__main__":
    main()
