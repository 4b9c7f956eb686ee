"""Throughput: kinesis_trio vs aiokpl vs aws-kinesis-agg + boto3 vs boto3, side by side.

aiokpl's benchmark table, reproduced and extended: 200-byte records, 256 partition keys,
against ONE kinesalite started here, a fresh stream per run (1 shard by default, like aiokpl's
table; ``--shards N``). Every variant runs in its own process (``benchmarks.runners.*``), so
its CPU time and peak RSS are its own; variants are interleaved (the order rotates each
round) and each runs ``--repeat`` times; the tables show medians.

Per-shard rate limiters are lifted in both producers (the emulator enforces no limit, and
the point is the producers' own cost); a second table runs the confirmed rows with each
library's default limits, which is what aiokpl's published table measured.

Run: ``uv run python -m benchmarks throughput [--count N] [--repeat R] [--quick]``.
Writes ``benchmarks/results/throughput.{md,json}`` (``--name`` changes the file name).
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass, field
from typing import Any

from benchmarks import _runs
from benchmarks._command import command_line, log
from benchmarks._report import markdown_table, publish, report_header
from benchmarks._runs import (
    add_stream_flags,
    agg_tag,
    emulator_session,
    on_off,
    run_variant,
    select,
)
from benchmarks._summary import fmt, fmt_int, median_of, run_summary, spread_pct


@dataclass(kw_only=True)
class Variant(_runs.Variant):
    count_share: float  # of --count
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
                    Variant.kinesis_trio(
                        key=f"kt-{backend}-{mode}-{agg_tag(agg)}",
                        label=f"kinesis_trio {backend} agg={on_off(agg)} ({mode})",
                        backend=backend,
                        mode=mode,
                        aggregation=agg,
                        count_share=1.0 if agg else 0.4,
                        args=["--backend", backend, "--mode", mode, "--aggregation", on_off(agg)],
                    )
                )
    for agg in (True, False):
        for mode in ("confirmed", "fire-and-forget"):
            out.append(
                Variant.aiokpl(
                    key=f"aiokpl-{mode}-{agg_tag(agg)}",
                    label=f"aiokpl asyncio agg={on_off(agg)} ({mode})",
                    mode=mode,
                    aggregation=agg,
                    count_share=0.2 if agg else 0.1,
                    args=["--mode", mode, "--aggregation", on_off(agg)],
                )
            )
    out.append(
        Variant.agg_boto3("aws-kinesis-agg + boto3 (no outcomes, no retries)", count_share=1.0)
    )
    out.append(Variant.boto3("boto3.put_records (batched 500, no aggregation)", count_share=0.4))
    # the same burst through put_many, 500 records a call (issue 66)
    for backend in ("trio", "asyncio"):
        out.append(
            Variant.kinesis_trio(
                key=f"kt-{backend}-confirmed-agg-putmany500",
                label=f"kinesis_trio {backend} agg=on (confirmed), put_many of 500",
                backend=backend,
                count_share=1.0,
                args=["--backend", backend, "--mode", "confirmed", "--put-many", "500"],
            )
        )
    # confirmed by reading results after flush() instead of awaiting each outcome
    out.append(
        Variant.kinesis_trio(
            key="kt-trio-confirmed-agg-result",
            label="kinesis_trio trio agg=on (confirmed: flush(), then outcome.result())",
            backend="trio",
            count_share=1.0,
            args=["--backend", "trio", "--mode", "confirmed", "--confirm", "result"],
        )
    )
    # the libraries' default per-shard limiters (what aiokpl's published table measured)
    out.append(
        Variant.kinesis_trio(
            key="kt-trio-confirmed-agg-defaultlimits",
            label="kinesis_trio trio agg=on (confirmed), default rate_limit=150 %",
            backend="trio",
            count_share=0.2,
            fixed_count=20_000,
            args=["--backend", "trio", "--rate-limits", "default"],
            table="limits",
        )
    )
    out.append(
        Variant.aiokpl(
            key="aiokpl-confirmed-agg-defaultlimits",
            label="aiokpl asyncio agg=on (confirmed), default 1000 rec/s + 1 MiB/s per shard",
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
    rps = [float(r["records_per_s"]) for r in runs]
    return {
        **v.describe(),
        **run_summary(runs),
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
        ("kt-trio-confirmed-agg-putmany500", "kt-trio-confirmed-agg"),
        ("kt-asyncio-confirmed-agg-putmany500", "kt-asyncio-confirmed-agg"),
        ("kt-trio-confirmed-agg-putmany500", "agg-boto3"),
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
    add_stream_flags(parser, shards=1)
    parser.add_argument("--quick", action="store_true", help="--count 20000 --repeat 1")
    parser.add_argument("--only", default="", help="comma-separated variant keys")
    parser.add_argument("--timeout", type=float, default=300.0, help="per child run, s")
    parser.add_argument("--name", default="throughput", help="results file name")
    args = parser.parse_args()
    if args.quick:
        args.count, args.repeat = 20_000, 1
    all_variants = select(variants(), args.only)
    with emulator_session() as session:
        for rnd in range(args.repeat):
            shift = rnd * max(1, len(all_variants) // args.repeat)
            order = all_variants[shift:] + all_variants[:shift]
            for v in order:
                count = records_for(v, args.count)
                res = run_variant(session.emulator, v, ["--count", str(count)], args)
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
    info, total = session.info, session.total

    rows = [summarize(v) for v in all_variants if v.runs]
    by_key = {v.key: v for v in all_variants}
    main_rows = [summarize(v) for v in all_variants if v.runs and v.table == "main"]
    limit_rows = [summarize(v) for v in all_variants if v.runs and v.table == "limits"]
    ratios, ratio_data = ratio_lines(by_key)
    crashed = [(v.label, e) for v in all_variants for e in v.errors]

    md = [
        *report_header(
            "# Throughput: kinesis_trio vs aiokpl vs aws-kinesis-agg + boto3 vs boto3", info, total
        ),
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
    data = {
        "benchmark": "throughput",
        "command": command_line(),
        "machine": info,
        "settings": vars(args),
        "total_seconds": round(total, 1),
        "rows": rows,
        "ratios": ratio_data,
    }
    publish(args.name, md, data, total)


if __name__ == "__main__":
    main()
