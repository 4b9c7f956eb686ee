"""Latency at fixed arrival rates, from each record's *scheduled* arrival (no coordinated
omission).

Records of 200 bytes arrive at a fixed rate (default 1,000 and 5,000 records/s) for
``--duration`` seconds into a fresh 2-shard stream (as in aiokpl's latency table) on one
kinesalite. Record *i* is scheduled at ``t0 + i/rate``; the putter sleeps until that time
(or does not sleep when it is behind) and a record's latency is the time its outcome was
resolved (or, without outcomes, its ``put_records`` call returned) minus its scheduled
time. A putter that cannot keep up therefore shows it as latency.

Variants: kinesis_trio (trio, asyncio; aggregation on and off), aiokpl (aggregation on),
aws-kinesis-agg + boto3 (records aggregated per linger window, latency until the call that
carried them returned) and plain boto3 ``put_records`` batched the same way. Linger
(record_max_buffered_time / batching window) 50 ms for all. Per-shard rate limiters are
lifted in both producers (the emulator enforces no limits; at 5,000 records/s without
aggregation, two real shards would throttle: their limit is 2,000 records/s).

Target: p99 <= record_max_buffered_time + 50 ms.

Run: ``uv run python -m benchmarks latency [--duration 10] [--rates 1000,5000]``.
Writes ``benchmarks/results/latency.{md,json}`` (101 quantiles per variant for a CDF) and,
and ``latency_cdf.png`` (unless ``--no-plot``).
"""

from __future__ import annotations

import argparse
from typing import Any

from benchmarks._command import command_line, log
from benchmarks._report import RESULTS_DIR, markdown_table, publish, report_header
from benchmarks._runs import (
    Variant,
    add_stream_flags,
    agg_tag,
    emulator_session,
    on_off,
    run_variant,
    select,
)
from benchmarks._summary import fmt, fmt_int, median_field, median_of, run_summary


def variants() -> list[Variant]:
    out: list[Variant] = []
    for agg in (True, False):
        for backend in ("trio", "asyncio"):
            out.append(
                Variant.kinesis_trio(
                    key=f"kt-{backend}-{agg_tag(agg)}",
                    label=f"kinesis_trio {backend} agg={on_off(agg)}",
                    backend=backend,
                    aggregation=agg,
                    args=["--backend", backend, "--aggregation", on_off(agg)],
                )
            )
    out.append(Variant.aiokpl(key="aiokpl-agg", label="aiokpl asyncio agg=on"))
    out.append(Variant.agg_boto3("aws-kinesis-agg + boto3"))
    out.append(Variant.boto3("boto3.put_records (batched, no aggregation)"))
    return out


def summarize(v: Variant, rate: float, runs: list[dict[str, Any]], errors: list[str]) -> Any:
    def med(key: str) -> float:
        return median_field(runs, key)

    quantiles: list[float] = []
    if runs:
        quantiles = [
            round(median_of([float(r["quantiles_ms"][i]) for r in runs]), 3) for i in range(101)
        ]
    return {
        **v.describe(),
        "target_rate": rate,
        **run_summary(runs),
        "p50_ms": round(med("p50_ms"), 2),
        "p99_ms": round(med("p99_ms"), 2),
        "p999_ms": round(med("p999_ms"), 2),
        "max_ms": round(med("max_ms"), 2),
        "max_put_lag_ms": round(med("max_put_lag_ms"), 2),
        "p99_runs_ms": [r["p99_ms"] for r in runs],
        "quantiles_ms": quantiles,
        "repeats": len(runs),
        "errors": errors,
        "runs": runs,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rates", default="1000,5000", help="records/s, comma-separated")
    parser.add_argument("--duration", type=float, default=10.0, help="seconds per run")
    parser.add_argument("--repeat", type=int, default=1)
    add_stream_flags(parser, shards=2)
    parser.add_argument("--only", default="", help="comma-separated variant keys")
    parser.add_argument("--timeout", type=float, default=300.0)
    parser.add_argument("--no-plot", action="store_true", help="no results/<name>_cdf.png")
    parser.add_argument("--name", default="latency")
    args = parser.parse_args()
    rates = [float(x) for x in args.rates.split(",") if x]
    vs = select(variants(), args.only)
    runs: dict[tuple[str, float], list[dict[str, Any]]] = {}
    errors: dict[tuple[str, float], list[str]] = {}
    with emulator_session() as session:
        for rnd in range(args.repeat):
            for rate in rates:
                order = vs[rnd % len(vs) :] + vs[: rnd % len(vs)]
                load = ["--rate", str(rate), "--duration", str(args.duration)]
                for v in order:
                    res = run_variant(session.emulator, v, load, args)
                    if res.ok:
                        res.data["round"] = rnd
                        runs.setdefault((v.key, rate), []).append(res.data)
                        log(
                            f"[{rnd + 1}/{args.repeat}] {rate:,.0f}/s {v.label}: "
                            f"p50 {res.data['p50_ms']:.1f} p99 {res.data['p99_ms']:.1f} "
                            f"p99.9 {res.data['p999_ms']:.1f} ms, failed {res.data['failed']}, "
                            f"lag {res.data.get('max_put_lag_ms', 0):.1f} ms"
                        )
                    else:
                        errors.setdefault((v.key, rate), []).append(res.error)
                        log(f"[{rnd + 1}/{args.repeat}] {rate:,.0f}/s {v.label}: FAILED")
                        log(res.error)
    info, total = session.info, session.total

    rows: list[dict[str, Any]] = []
    for rate in rates:
        for v in vs:
            got = runs.get((v.key, rate), [])
            errs = errors.get((v.key, rate), [])
            if got or errs:
                rows.append(summarize(v, rate, got, errs))
    target = args.linger * 1000 + 50
    md = [
        *report_header("# Latency at fixed arrival rates (from scheduled arrival)", info, total),
        f"{args.size}-byte records, {args.keys} partition keys, a fresh {args.shards}-shard "
        f"stream per run on one kinesalite, {args.duration:g} s per run, linger "
        f"{args.linger * 1000:.0f} ms for every variant, {args.repeat} run(s) per cell "
        "(medians if more than one). Latency = resolved (or `put_records` returned) minus "
        "*scheduled* arrival; the putter sleeps until each record's scheduled time and "
        "does not sleep when behind, so a putter that falls behind shows it here "
        '("putter lag": the worst delay between a record\'s scheduled time and its `put`). '
        f"Target: p99 <= linger + 50 ms = {target:.0f} ms. Per-shard rate limiters lifted.",
        "",
    ]
    for rate in rates:
        body = []
        for r in rows:
            if r["target_rate"] != rate:
                continue
            if not r["runs"]:
                body.append([r["variant"], "crashed", "", "", "", "", "", "", "", ""])
                continue
            body.append(
                [
                    r["variant"],
                    fmt(r["p50_ms"], 1),
                    fmt(r["p99_ms"], 1),
                    fmt(r["p999_ms"], 1),
                    fmt(r["max_ms"], 1),
                    "yes" if r["p99_ms"] <= target else "**no**",
                    fmt_int(r["records_per_s"]),
                    fmt(r["max_put_lag_ms"], 1),
                    fmt(r["cpu_us_per_record"], 1),
                    str(r["failed"]),
                ]
            )
        md += [
            f"## {rate:,.0f} records/s",
            "",
            markdown_table(
                [
                    "variant",
                    "p50 ms",
                    "p99 ms",
                    "p99.9 ms",
                    "max ms",
                    f"p99 <= {target:.0f} ms",
                    "achieved records/s",
                    "putter lag ms",
                    "CPU µs/record",
                    "failed",
                ],
                body,
                "lrrrrlrrrr",
            ),
            "",
        ]
    crashed = [(r["variant"], r["target_rate"], e) for r in rows for e in r["errors"]]
    if crashed:
        md += ["## Runs that failed", ""]
        md += [f"- {label} at {rate:,.0f}/s: `{err[:1500]}`" for label, rate, err in crashed]
        md.append("")
    md += [
        "CPU µs/record here is the producer process's CPU over the whole paced run divided by "
        "the records: at a fixed rate it includes the cost of waking up for each record.",
    ]
    png = RESULTS_DIR / f"{args.name}_cdf.png"
    if not args.no_plot:
        md += ["", f"![latency CDF]({png.name})"]
    data = {
        "benchmark": "latency",
        "command": command_line(),
        "machine": info,
        "settings": vars(args),
        "target_p99_ms": target,
        "total_seconds": round(total, 1),
        "rows": rows,
    }
    publish(args.name, md, data, total)
    if not args.no_plot:
        from benchmarks._plots import latency_chart

        latency_chart(data, png)


if __name__ == "__main__":
    main()
