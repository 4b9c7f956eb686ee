"""Throughput: kinesis_trio vs aiokpl vs aws-kinesis-agg + boto3 vs boto3, side by side.

aiokpl's benchmark table, reproduced and extended: 200-byte records, 256 partition keys,
against ONE kinesalite started here, a fresh stream per run (1 shard by default, like aiokpl's
table; ``--shards N``). Every variant runs in its own process (``benchmarks.run_*``), so
its CPU time and peak RSS are its own; variants are interleaved (the order rotates each
round) and each runs ``--repeat`` times; the tables show medians.

Per-shard rate limiters are lifted in both producers (the emulator enforces no limit, and
the point is the producers' own cost); a second table runs the confirmed rows with each
library's default limits, which is what aiokpl's published table measured.

Run: ``uv run python -m benchmarks.bench_throughput [--count N] [--repeat R] [--quick]``.
Writes ``benchmarks/results/throughput.{md,json}`` (``--name`` changes the file name).
"""

from __future__ import annotations

import argparse
import math
import time
from dataclasses import dataclass, field
from typing import Any

from benchmarks.common import (
    command_line,
    create_stream,
    delete_stream,
    fmt,
    fmt_int,
    log,
    machine_info,
    machine_line,
    markdown_table,
    median_of,
    run_child,
    spread_pct,
    start_emulator,
    write_results,
)


@dataclass
class Variant:
    key: str
    label: str
    module: str
    library: str
    backend: str
    mode: str
    aggregation: bool
    count_share: float  # of --count
    args: list[str] = field(default_factory=list)
    table: str = "main"
    fixed_count: int = 0  # records regardless of --count (0: count_share of --count)
    runs: list[dict[str, Any]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def variants() -> list[Variant]:
    out: list[Variant] = []
    for agg in (True, False):
        for backend in ("trio", "asyncio"):
            for mode in ("confirmed", "fire-and-forget"):
                out.append(
                    Variant(
                        key=f"kt-{backend}-{mode}-{'agg' if agg else 'noagg'}",
                        label=f"kinesis_trio {backend} agg={'on' if agg else 'off'} ({mode})",
                        module="run_kinesis_trio",
                        library="kinesis_trio",
                        backend=backend,
                        mode=mode,
                        aggregation=agg,
                        count_share=1.0 if agg else 0.4,
                        args=[
                            "--backend",
                            backend,
                            "--mode",
                            mode,
                            "--aggregation",
                            "on" if agg else "off",
                        ],
                    )
                )
    for agg in (True, False):
        for mode in ("confirmed", "fire-and-forget"):
            out.append(
                Variant(
                    key=f"aiokpl-{mode}-{'agg' if agg else 'noagg'}",
                    label=f"aiokpl asyncio agg={'on' if agg else 'off'} ({mode})",
                    module="run_aiokpl",
                    library="aiokpl",
                    backend="asyncio",
                    mode=mode,
                    aggregation=agg,
                    count_share=0.2 if agg else 0.1,
                    args=["--mode", mode, "--aggregation", "on" if agg else "off"],
                )
            )
    out.append(
        Variant(
            key="agg-boto3",
            label="aws-kinesis-agg + boto3 (no outcomes, no retries)",
            module="run_agg_boto3",
            library="aws-kinesis-agg+boto3",
            backend="sync",
            mode="fire-and-forget",
            aggregation=True,
            count_share=1.0,
        )
    )
    out.append(
        Variant(
            key="boto3",
            label="boto3.put_records (batched 500, no aggregation)",
            module="run_boto3",
            library="boto3",
            backend="sync",
            mode="fire-and-forget",
            aggregation=False,
            count_share=0.4,
        )
    )
    # confirmed by reading results after flush() instead of awaiting each outcome
    out.append(
        Variant(
            key="kt-trio-confirmed-agg-result",
            label="kinesis_trio trio agg=on (confirmed: flush(), then outcome.result())",
            module="run_kinesis_trio",
            library="kinesis_trio",
            backend="trio",
            mode="confirmed",
            aggregation=True,
            count_share=1.0,
            args=["--backend", "trio", "--mode", "confirmed", "--confirm", "result"],
        )
    )
    # the libraries' default per-shard limiters (what aiokpl's published table measured)
    out.append(
        Variant(
            key="kt-trio-confirmed-agg-defaultlimits",
            label="kinesis_trio trio agg=on (confirmed), default rate_limit=150 %",
            module="run_kinesis_trio",
            library="kinesis_trio",
            backend="trio",
            mode="confirmed",
            aggregation=True,
            count_share=0.2,
            fixed_count=20_000,
            args=["--backend", "trio", "--rate-limits", "default"],
            table="limits",
        )
    )
    out.append(
        Variant(
            key="aiokpl-confirmed-agg-defaultlimits",
            label="aiokpl asyncio agg=on (confirmed), default 1000 rec/s + 1 MiB/s per shard",
            module="run_aiokpl",
            library="aiokpl",
            backend="asyncio",
            mode="confirmed",
            aggregation=True,
            count_share=0.2,
            fixed_count=20_000,
            args=["--rate-limits", "default"],
            table="limits",
        )
    )
    return out


def records_for(v: Variant, count: int) -> int:
    return v.fixed_count or max(1000, round(count * v.count_share))


def summarize(v: Variant) -> dict[str, Any]:
    runs = v.runs

    def med(key: str) -> float:
        return median_of([float(r[key]) for r in runs if key in r])

    rps = [float(r["records_per_s"]) for r in runs]
    return {
        "variant": v.label,
        "key": v.key,
        "library": v.library,
        "backend": v.backend,
        "mode": v.mode,
        "aggregation": v.aggregation,
        "records": int(runs[0]["records"]) if runs else 0,
        "record_bytes": int(runs[0]["record_bytes"]) if runs else 0,
        "shards": int(runs[0]["shards"]) if runs else 0,
        "elapsed_s": round(med("elapsed_s"), 4),
        "records_per_s": round(med("records_per_s"), 1),
        "mb_per_s": round(med("mb_per_s"), 3),
        "cpu_us_per_record": round(med("cpu_us_per_record"), 2),
        "cpu_us_per_record_process": round(med("cpu_us_per_record_process"), 2),
        "peak_rss_mib": round(med("peak_rss_mib"), 1),
        "emulator_cpu_us_per_record": round(med("emulator_cpu_us_per_record"), 2),
        "failed": int(sum(int(r["failed"]) for r in runs)),
        "error_codes": _merge_codes(runs),
        "repeats": len(runs),
        "records_per_s_min": round(min(rps), 1) if rps else math.nan,
        "records_per_s_max": round(max(rps), 1) if rps else math.nan,
        "spread_pct": round(spread_pct(rps), 1),
        "rate_limits": runs[0].get("rate_limits") if runs else None,
        "errors": v.errors,
        "runs": runs,
    }


def _merge_codes(runs: list[dict[str, Any]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for r in runs:
        for k, n in (r.get("error_codes") or {}).items():
            out[k] = out.get(k, 0) + int(n)
    return out


def table(rows: list[dict[str, Any]]) -> str:
    body = []
    for r in rows:
        failed = str(r["failed"])
        if r["errors"]:
            failed += f" ({len(r['errors'])} run(s) crashed)"
        body.append(
            [
                r["variant"],
                fmt_int(r["records"]),
                fmt(r["elapsed_s"]),
                fmt_int(r["records_per_s"]),
                fmt(r["mb_per_s"]),
                fmt(r["cpu_us_per_record"], 1),
                fmt(r["cpu_us_per_record_process"], 1),
                fmt(r["peak_rss_mib"], 0),
                fmt(r["emulator_cpu_us_per_record"], 1),
                failed,
                f"{fmt_int(r['records_per_s_min'])}-{fmt_int(r['records_per_s_max'])} "
                f"(±{r['spread_pct'] / 2:.0f} %)",
            ]
        )
    return markdown_table(
        [
            "variant",
            "records",
            "elapsed s",
            "records/s",
            "MB/s",
            "CPU µs/record (work)",
            "CPU µs/record (process)",
            "peak RSS MiB",
            "emulator CPU µs/record",
            "failed",
            "records/s min-max (spread)",
        ],
        body,
        "lrrrrrrrrrl",
    )


def ratio_lines(by_key: dict[str, Variant]) -> tuple[list[str], dict[str, Any]]:
    """Ratios of medians, plus the range of the per-round ratios (same round = side by side)."""
    pairs = [
        ("kt-trio-confirmed-agg", "aiokpl-confirmed-agg"),
        ("kt-asyncio-confirmed-agg", "aiokpl-confirmed-agg"),
        ("kt-trio-confirmed-agg", "agg-boto3"),
        ("kt-asyncio-confirmed-agg", "agg-boto3"),
        ("kt-trio-fire-and-forget-agg", "aiokpl-fire-and-forget-agg"),
        ("kt-trio-confirmed-noagg", "aiokpl-confirmed-noagg"),
        ("kt-trio-confirmed-agg-defaultlimits", "aiokpl-confirmed-agg-defaultlimits"),
    ]
    lines: list[str] = []
    data: dict[str, Any] = {}
    for a, b in pairs:
        va, vb = by_key.get(a), by_key.get(b)
        if va is None or vb is None or not va.runs or not vb.runs:
            continue
        ra = median_of([float(r["records_per_s"]) for r in va.runs])
        rb = median_of([float(r["records_per_s"]) for r in vb.runs])
        ca = median_of([float(r["cpu_us_per_record"]) for r in va.runs])
        cb = median_of([float(r["cpu_us_per_record"]) for r in vb.runs])
        per_round = [
            float(x["records_per_s"]) / float(y["records_per_s"])
            for x in va.runs
            for y in vb.runs
            if x.get("round") == y.get("round")
        ]
        rng = f"{min(per_round):.2f}-{max(per_round):.2f}" if per_round else "n/a"
        lines.append(
            f"- **{va.label} ÷ {vb.label}**: records/s x{ra / rb:.2f} "
            f"(per round: {rng}); CPU per record x{ca / cb:.2f} "
            f"({ca:.1f} vs {cb:.1f} µs)"
        )
        data[f"{a} / {b}"] = {
            "records_per_s_ratio": round(ra / rb, 3),
            "per_round_ratios": [round(x, 3) for x in per_round],
            "cpu_per_record_ratio": round(ca / cb, 3),
        }
    return lines, data


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--count", type=int, default=100_000, help="records of the fast rows")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--shards", type=int, default=1)
    parser.add_argument("--size", type=int, default=200)
    parser.add_argument("--keys", type=int, default=256)
    parser.add_argument("--linger", type=float, default=0.05)
    parser.add_argument("--quick", action="store_true", help="--count 20000 --repeat 1")
    parser.add_argument("--only", default="", help="comma-separated variant keys")
    parser.add_argument("--timeout", type=float, default=300.0, help="per child run, s")
    parser.add_argument("--name", default="throughput", help="results file name")
    args = parser.parse_args()
    if args.quick:
        args.count, args.repeat = 20_000, 1
    all_variants = variants()
    if args.only:
        keep = set(args.only.split(","))
        all_variants = [v for v in all_variants if v.key in keep]
    info = machine_info()
    log(f"machine: {machine_line(info)}")
    started = time.perf_counter()
    emulator = start_emulator(shard_limit=1000)
    try:
        for rnd in range(args.repeat):
            shift = rnd * max(1, len(all_variants) // args.repeat)
            order = all_variants[shift:] + all_variants[:shift]
            for v in order:
                count = records_for(v, args.count)
                stream = create_stream(emulator.endpoint_url, args.shards)
                child_args = [
                    "--endpoint",
                    emulator.endpoint_url,
                    "--stream",
                    stream,
                    "--count",
                    str(count),
                    "--size",
                    str(args.size),
                    "--keys",
                    str(args.keys),
                    "--shards",
                    str(args.shards),
                    "--linger",
                    str(args.linger),
                    "--variant",
                    v.label,
                    *v.args,
                ]
                res = run_child(
                    v.module, child_args, timeout=args.timeout, emulator_pid=emulator.pid
                )
                delete_stream(emulator.endpoint_url, stream)
                if res.ok:
                    res.data["round"] = rnd
                    v.runs.append(res.data)
                    log(
                        f"[{rnd + 1}/{args.repeat}] {v.label}: {count:,} records, "
                        f"{res.data['records_per_s']:,.0f} rec/s, "
                        f"{res.data['cpu_us_per_record']:.1f} µs/rec, "
                        f"failed {res.data['failed']} ({res.wall_s:.1f}s)"
                    )
                else:
                    v.errors.append(res.error)
                    log(f"[{rnd + 1}/{args.repeat}] {v.label}: FAILED: {res.error}")
    finally:
        emulator.stop()
    total = time.perf_counter() - started

    rows = [summarize(v) for v in all_variants if v.runs]
    by_key = {v.key: v for v in all_variants}
    main_rows = [summarize(v) for v in all_variants if v.runs and v.table == "main"]
    limit_rows = [summarize(v) for v in all_variants if v.runs and v.table == "limits"]
    ratios, ratio_data = ratio_lines(by_key)
    crashed = [(v.label, e) for v in all_variants for e in v.errors]

    md = [
        "# Throughput: kinesis_trio vs aiokpl vs aws-kinesis-agg + boto3 vs boto3",
        "",
        f"Command: `{command_line()}` ({total / 60:.1f} min)",
        "",
        f"Machine: {machine_line(info)}",
        "",
        f"{args.size}-byte records, {args.keys} partition keys, one kinesalite for all runs, "
        f"a fresh {args.shards}-shard stream per run (deleted after it), linger "
        f"(record_max_buffered_time) {args.linger * 1000:.0f} ms, every variant in its own "
        f"process, {args.repeat} interleaved round(s); medians shown, with the min-max of "
        "records/s over the rounds. Per-shard rate limiters lifted in both producers "
        "(the emulator enforces no limits). CPU (work): user+sys of the child from the "
        "first put to the end of the measured span; CPU (process): the whole child, "
        "imports and start-up included. Emulator CPU: kinesalite's user+sys over the "
        "child's lifetime (/proc/PID/stat).",
        "",
        "Modes: *confirmed* = put all, `flush()`, then `await outcome.wait()` on every "
        "outcome in order and check it; the clock stops after the last one. "
        "*fire-and-forget* = put all, then the clock stops when the pipeline is drained "
        "(kinesis_trio: `flush()` returned; aiokpl: `outstanding_records == 0`), outcomes "
        "are not looked at. aws-kinesis-agg + boto3 and boto3: the clock stops when the last "
        "`put_records` call returned; nothing tracks records.",
        "",
        table(main_rows),
        "",
        "Ratios (medians; per-round ratios pair runs of the same round):",
        "",
        *ratios,
    ]
    if limit_rows:
        md += [
            "",
            "## With each library's default per-shard rate limits",
            "",
            "What aiokpl's published table measured (its defaults; 20,000 records as there). "
            "On one shard the limiter, not the producer, can set the pace: kinesis_trio's "
            "default rate_limit=150 admits 1.5 MiB/s per shard after a 1.5 MiB burst (about "
            "7,500 records of 200 bytes), also during flush(); aiokpl's admits 1 MiB/s after a "
            "1 MiB burst, and its flush() bypasses the limiter. Here aiokpl is slower than "
            "its limit anyway.",
            "",
            table(limit_rows),
        ]
    if crashed:
        md += ["", "## Runs that failed", ""]
        md += [f"- {label}: `{err[:1500]}`" for label, err in crashed]
    counts = sorted(
        {(v.label, records_for(v, args.count)) for v in all_variants},
        key=lambda x: -x[1],
    )
    md += [
        "",
        "Records per run: "
        + "; ".join(f"{label}: {n:,}" for label, n in counts)
        + " (the slower variants get fewer records so that each run takes a few seconds).",
    ]
    text = "\n".join(md)
    print(text)
    data = {
        "benchmark": "throughput",
        "command": command_line(),
        "machine": info,
        "settings": vars(args),
        "total_seconds": round(total, 1),
        "rows": rows,
        "ratios": ratio_data,
    }
    md_path, json_path = write_results(args.name, text, data)
    log(f"wrote {md_path} and {json_path} in {total:.0f}s")


if __name__ == "__main__":
    main()
