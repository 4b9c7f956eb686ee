"""Against the real KPL 1.1.1 (Java and its native daemon), side by side on one TLS endpoint.

The KPL speaks only HTTPS, so every row here writes to one kinesalite started with its
``--ssl`` option (its self-signed certificate not checked by any client), 200-byte records,
256 partition keys, each library's defaults (linger 100 ms for both, their own per-shard
limiters), a fresh stream per run, every variant in its own process, rounds interleaved.

* **Burst** (``--count`` records, 50,000, on ``--burst-shards`` 32 shards, every outcome
  awaited): kinesis_trio ``put`` (trio, asyncio) and ``put_many`` of 500 (trio, asyncio)
  through ``benchmarks/runners/kinesis_trio.py``; aws-kinesis-agg + boto3 (no outcomes,
  ``runners/agg_boto3.py``); the KPL (``runners/kpl``: ``addUserRecord`` each, then every
  future awaited). Records/s and CPU per record; the KPL's CPU is its JVM's and its daemon's
  together (``/proc`` of both over the measured span).
* **Latency** (``--rate`` 5,000 records/s for ``--duration`` s on ``--latency-shards`` 8):
  from each record's *scheduled* arrival to its confirmation. kinesis_trio through
  ``benchmarks/_harness.py``: one task awaiting the outcomes in order (``shape="loop"``) and
  a task per record awaiting its own outcome (``shape="handler"``, a web handler's shape), on
  trio and asyncio; the KPL: ``addUserRecord`` at the scheduled time, the latency taken in
  the future's callback. p50/p99/p99.9 and CPU per record, with the ratios to the KPL's.

The KPL runner is built with ``mvn -q -o package`` (offline, then once online) when ``java``
and ``mvn`` are on the PATH; without them, or when the build fails, the KPL rows are skipped
and the page says why.

Run: ``uv run python -m benchmarks kpl [--quick] [--repeat 3] [--latency-repeat 2]``.
Writes ``benchmarks/results/kpl.{md,json}`` (``--name`` changes the file name).
"""

from __future__ import annotations

import argparse
import subprocess
import time
from dataclasses import dataclass, field
from typing import Any

from benchmarks import _harness, _kpl
from benchmarks._child import ChildResult, proc_cpu_seconds
from benchmarks._command import command_line, log
from benchmarks._emulator import create_stream, delete_stream
from benchmarks._report import markdown_table, publish, report_header
from benchmarks._runner import latency_fields
from benchmarks._runs import emulator_session, run_on_fresh_stream
from benchmarks._summary import fmt, fmt_int, median_field, spread_pct

#: the linger of every row: kinesis_trio's default record_max_buffered_time and the KPL's
#: default RecordMaxBufferedTime
LINGER = 0.1


@dataclass
class Row:
    """One contender of one part: how it runs, and its runs."""

    key: str
    label: str
    part: str  # "burst" or "latency"
    kind: str  # "runner" (a Python runner), "harness" (_harness.Job) or "kpl"
    module: str = ""  # kind "runner"
    args: list[str] = field(default_factory=list)  # kind "runner"
    backend: str = ""  # kind "harness"
    shape: str = ""  # kind "harness"
    runs: list[dict[str, Any]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def rows() -> list[Row]:
    out: list[Row] = []
    for backend in ("trio", "asyncio"):
        default = ["--backend", backend, "--mode", "confirmed", "--rate-limits", "default"]
        out.append(
            Row(
                f"kt-put-{backend}",
                f"kinesis_trio {backend} put",
                "burst",
                "runner",
                module="runners.kinesis_trio",
                args=default,
            )
        )
        out.append(
            Row(
                f"kt-putmany-{backend}",
                f"kinesis_trio {backend} put_many of 500",
                "burst",
                "runner",
                module="runners.kinesis_trio",
                args=[*default, "--put-many", "500"],
            )
        )
    out.append(
        Row(
            "agg-boto3",
            "aws-kinesis-agg + boto3 (no outcomes)",
            "burst",
            "runner",
            module="runners.agg_boto3",
        )
    )
    out.append(Row("kpl-burst", f"KPL {_kpl.KPL_VERSION}", "burst", "kpl"))
    for shape, what in (("loop", "in-order awaiting"), ("handler", "a task per record")):
        for backend in ("trio", "asyncio"):
            out.append(
                Row(
                    f"kt-{shape}-{backend}",
                    f"kinesis_trio {backend}, {what}",
                    "latency",
                    "harness",
                    backend=backend,
                    shape=shape,
                )
            )
    out.append(Row("kpl-latency", f"KPL {_kpl.KPL_VERSION}", "latency", "kpl"))
    return out


def run_row(row: Row, emulator: Any, args: argparse.Namespace, classpath: str) -> ChildResult:
    """One run of ``row`` on a fresh stream."""
    if row.part == "burst":
        shards, load = args.burst_shards, ["--count", str(args.count)]
    else:
        shards = args.latency_shards
        load = ["--rate", str(args.rate), "--duration", str(args.duration)]
    if row.kind == "kpl":
        return _kpl.run(
            classpath,
            emulator,
            shards=shards,
            load=load,
            size=_harness.SIZE,
            keys=_harness.KEYS,
            linger=LINGER,
            variant=row.label,
            timeout=args.timeout,
        )
    if row.kind == "runner":
        return run_on_fresh_stream(
            emulator,
            row.module,
            load=load,
            size=_harness.SIZE,
            keys=_harness.KEYS,
            shards=shards,
            linger=LINGER,
            extra=["--variant", row.label, *row.args],
            timeout=args.timeout,
        )
    return _harness_run(row, emulator, args)


def _harness_run(row: Row, emulator: Any, args: argparse.Namespace) -> ChildResult:
    """A latency run of the steady harness (the producer's defaults: linger 100 ms)."""
    stream = create_stream(emulator.endpoint_url, args.latency_shards)
    job = _harness.Job(
        mode="producer",
        backend=row.backend,
        rate=args.rate,
        duration=args.duration,
        count=0,
        endpoint=emulator.endpoint_url,
        stream=stream,
        shape=row.shape,
        keep_latencies=True,
    )
    emu0 = proc_cpu_seconds(emulator.pid)
    t0 = time.perf_counter()
    try:
        out = _harness._run_child(job)
    except (RuntimeError, subprocess.TimeoutExpired) as exc:
        return ChildResult(False, {}, str(exc)[-1500:], time.perf_counter() - t0)
    finally:
        emu = proc_cpu_seconds(emulator.pid) - emu0
        delete_stream(emulator.endpoint_url, stream)
    records = int(out["records"])
    data: dict[str, Any] = {
        "variant": row.label,
        "records": records,
        "elapsed_s": round(out["wall_s"], 4),
        "records_per_s": round(records / out["wall_s"], 1),
        "cpu_s": round(out["cpu_s"], 4),
        "cpu_us_per_record": round(out["cpu_s"] / records * 1e6, 3),
        "failed": out["failed"],
        "error_codes": out["error_codes"],
        "gc_s": round(out["gc_s"], 4),
        "emulator_cpu_us_per_record": round(emu / records * 1e6, 3),
        **latency_fields(out["latencies_s"]),
    }
    return ChildResult(True, data, "", time.perf_counter() - t0, emu)


def summarize(row: Row) -> dict[str, Any]:
    runs = row.runs

    def med(key: str, digits: int = 2) -> float:
        return round(median_field(runs, key), digits)

    out: dict[str, Any] = {
        "key": row.key,
        "variant": row.label,
        "part": row.part,
        "repeats": len(runs),
        "records": int(runs[0]["records"]) if runs else 0,
        "records_per_s": med("records_per_s", 1),
        "cpu_us_per_record": med("cpu_us_per_record"),
        "emulator_cpu_us_per_record": med("emulator_cpu_us_per_record"),
        "failed": sum(int(r["failed"]) for r in runs),
        "error_codes": _merge_codes(runs),
        "records_per_s_runs": [r["records_per_s"] for r in runs],
        "records_per_s_spread_pct": round(spread_pct([r["records_per_s"] for r in runs]), 1),
        "errors": row.errors,
    }
    if row.kind == "kpl":
        out["cpu_jvm_us_per_record"] = round(
            median_field([{"x": r["cpu_jvm_s"] / r["records"] * 1e6} for r in runs], "x"), 2
        )
        out["cpu_daemon_us_per_record"] = round(
            median_field([{"x": r["cpu_daemon_s"] / r["records"] * 1e6} for r in runs], "x"), 2
        )
    if row.part == "latency":
        for key in ("p50_ms", "p99_ms", "p999_ms", "max_ms", "gc_s"):
            out[key] = med(key)
        out["p99_runs_ms"] = [r["p99_ms"] for r in runs]
        out["records_min"] = min((int(r["records"]) for r in runs), default=0)
    out["runs"] = [{k: v for k, v in r.items() if k != "quantiles_ms"} for r in runs]
    return out


def _merge_codes(runs: list[dict[str, Any]]) -> dict[str, int]:
    out: dict[str, int] = {}
    for r in runs:
        for code, n in (r.get("error_codes") or {}).items():
            out[code] = out.get(code, 0) + int(n)
    return out


def _failed_cell(s: dict[str, Any]) -> str:
    codes = ", ".join(f"{code} {n}" for code, n in sorted(s["error_codes"].items()))
    return f"{s['failed']} ({codes})" if codes else str(s["failed"])


def _ratio(a: float, b: float) -> str:
    return "n/a" if not (a == a and b == b) or b == 0 else f"{a / b:.2f}x"


def burst_table(summaries: list[dict[str, Any]], kpl: dict[str, Any] | None) -> str:
    body = []
    for s in summaries:
        k_rps = kpl["records_per_s"] if kpl else float("nan")
        k_cpu = kpl["cpu_us_per_record"] if kpl else float("nan")
        runs = s["records_per_s_runs"]
        body.append(
            [
                s["variant"],
                fmt_int(s["records"]),
                fmt_int(s["records_per_s"]),
                _ratio(s["records_per_s"], k_rps),
                fmt(s["cpu_us_per_record"], 1),
                _ratio(s["cpu_us_per_record"], k_cpu),
                fmt(s["emulator_cpu_us_per_record"], 1),
                _failed_cell(s),
                f"{fmt_int(min(runs))}-{fmt_int(max(runs))}" if runs else "crashed",
            ]
        )
    return markdown_table(
        [
            "variant",
            "records",
            "records/s",
            "÷ KPL's",
            "CPU µs/record",
            "÷ KPL's",
            "emulator CPU µs/record",
            "failed",
            "records/s min-max",
        ],
        body,
        "lrrrrrrrl",
    )


def latency_table(summaries: list[dict[str, Any]], kpl: dict[str, Any] | None) -> str:
    body = []
    for s in summaries:
        if not s["repeats"]:
            body.append([s["variant"], "crashed", *[""] * 10])
            continue
        k99 = kpl["p99_ms"] if kpl else float("nan")
        kcpu = kpl["cpu_us_per_record"] if kpl else float("nan")
        body.append(
            [
                s["variant"],
                fmt(s["p50_ms"], 1),
                fmt(s["p99_ms"], 1),
                fmt(s["p999_ms"], 1),
                _ratio(s["p99_ms"], k99),
                " / ".join(fmt(x, 1) for x in s["p99_runs_ms"]),
                fmt(s["cpu_us_per_record"], 1),
                _ratio(s["cpu_us_per_record"], kcpu),
                fmt_int(s["records_min"]),
                fmt_int(s["records_per_s"]),
                fmt(s["gc_s"], 2),
                _failed_cell(s),
            ]
        )
    return markdown_table(
        [
            "variant",
            "p50 ms",
            "p99 ms",
            "p99.9 ms",
            "p99 ÷ KPL's",
            "p99 per run ms",
            "CPU µs/record",
            "÷ KPL's",
            "records put (fewest)",
            "achieved records/s",
            "collector s",
            "failed",
        ],
        body,
        "lrrrrlrrrrrl",
    )


def _by_key(summaries: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {s["key"]: s for s in summaries if s["repeats"]}


def comparison_lines(summaries: list[dict[str, Any]]) -> list[str]:
    """The issue's other ratios: put_many against put, put against aggregation + boto3, the
    task per record against in-order awaiting."""
    by = _by_key(summaries)
    lines = []
    pairs = [
        ("kt-putmany-trio", "kt-put-trio", "cpu_us_per_record", "CPU per record"),
        ("kt-putmany-asyncio", "kt-put-asyncio", "cpu_us_per_record", "CPU per record"),
        ("kt-put-trio", "agg-boto3", "cpu_us_per_record", "CPU per record"),
        ("kt-put-asyncio", "agg-boto3", "cpu_us_per_record", "CPU per record"),
        ("kt-handler-trio", "kt-loop-trio", "p99_ms", "p99"),
        ("kt-handler-asyncio", "kt-loop-asyncio", "p99_ms", "p99"),
    ]
    for a, b, key, what in pairs:
        if a in by and b in by:
            lines.append(
                f"- {by[a]['variant']} ÷ {by[b]['variant']}: {what} "
                f"{_ratio(by[a][key], by[b][key])} ({fmt(by[a][key], 1)} vs {fmt(by[b][key], 1)})"
            )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--count", type=int, default=50_000, help="records of a burst")
    parser.add_argument("--burst-shards", type=int, default=32)
    parser.add_argument("--rate", type=float, default=5000.0, help="latency rows: records/s")
    parser.add_argument("--duration", type=float, default=10.0, help="latency rows: s per run")
    parser.add_argument("--latency-shards", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=3, help="rounds of the burst rows")
    parser.add_argument("--latency-repeat", type=int, default=2, help="rounds of the latency rows")
    parser.add_argument("--quick", action="store_true", help="--count 10000 --duration 3, 1 round")
    parser.add_argument("--only", default="", help="comma-separated row keys")
    parser.add_argument("--timeout", type=float, default=300.0, help="per child run, s")
    parser.add_argument("--name", default="kpl", help="results file name")
    args = parser.parse_args()
    if args.quick:
        args.count, args.duration, args.repeat, args.latency_repeat = 10_000, 3.0, 1, 1
    chosen = [r for r in rows() if not args.only or r.key in args.only.split(",")]
    classpath, skipped = _kpl.build()
    java = _kpl.java_version() if classpath else ""
    if skipped:
        log(f"KPL rows skipped: {skipped}")
        chosen = [r for r in chosen if r.kind != "kpl"]
    with emulator_session(tls=True) as session:
        for rnd in range(max(args.repeat, args.latency_repeat)):
            for part, rounds in (("burst", args.repeat), ("latency", args.latency_repeat)):
                todo = [r for r in chosen if r.part == part] if rnd < rounds else []
                shift = rnd % len(todo) if todo else 0
                for row in todo[shift:] + todo[:shift]:
                    res = run_row(row, session.emulator, args, classpath)
                    if not res.ok:
                        row.errors.append(res.error)
                        log(f"[{rnd + 1}] {row.label} ({part}): FAILED: {res.error}")
                        continue
                    res.data["round"] = rnd
                    row.runs.append(res.data)
                    d = res.data
                    extra = f", p99 {d['p99_ms']:.1f} ms" if part == "latency" else ""
                    log(
                        f"[{rnd + 1}] {row.label} ({part}): {d['records_per_s']:,.0f} rec/s, "
                        f"{d['cpu_us_per_record']:.1f} µs/rec{extra}, failed {d['failed']} "
                        f"({res.wall_s:.1f}s)"
                    )
    info, total = session.info, session.total
    summaries = [summarize(r) for r in chosen]
    burst = [s for s in summaries if s["part"] == "burst"]
    latency = [s for s in summaries if s["part"] == "latency"]
    by = _by_key(summaries)
    kpl_burst, kpl_latency = by.get("kpl-burst"), by.get("kpl-latency")
    kpl_line = (
        f"KPL {_kpl.KPL_VERSION} (its bundled linux-x86_64 daemon) on {java}."
        if classpath
        else f"**KPL rows skipped**: {skipped}."
    )
    md = [
        *report_header("# Against the real KPL: burst and latency on a TLS endpoint", info, total),
        kpl_line,
        "",
        "One kinesalite with `--ssl` for every row (the KPL speaks only HTTPS; no client "
        f"checks its self-signed certificate), {_harness.SIZE}-byte records, "
        f"{_harness.KEYS} partition keys, a fresh stream per run, linger "
        f"{LINGER * 1000:.0f} ms (both libraries' default), each library's default per-shard "
        "limiter, every variant in its own process, rounds interleaved; medians shown.",
        "",
        f"## Burst: {args.count:,} records on {args.burst_shards} shards ({args.repeat} round(s))",
        "",
        "Every outcome awaited: kinesis_trio puts them all, `flush()`, then awaits each "
        "outcome in order; the KPL adds them all with `addUserRecord`, then awaits each "
        "future. aws-kinesis-agg + boto3 tracks nothing: its clock stops when the last "
        "`put_records` returned. CPU: user + system time over the measured span; the KPL's "
        "is its JVM's and its native daemon's together"
        + (
            f" (JVM {fmt(kpl_burst['cpu_jvm_us_per_record'], 1)} + daemon "
            f"{fmt(kpl_burst['cpu_daemon_us_per_record'], 1)} µs/record)."
            if kpl_burst
            else "."
        ),
        "",
        burst_table(burst, kpl_burst),
        "",
        f"## Latency at {args.rate:,.0f} records/s on {args.latency_shards} shards "
        f"({args.duration:g} s a run, {args.latency_repeat} round(s))",
        "",
        "From each record's *scheduled* arrival to its confirmation (no coordinated "
        "omission). kinesis_trio (`benchmarks/_harness.py`): the arrival loop puts what is due "
        "each millisecond; *in-order awaiting*: one task awaits the outcomes in order; *a "
        "task per record*: each record's own task puts it and awaits its outcome (a web "
        "handler's shape). The KPL: `addUserRecord` at the record's scheduled time, the "
        "latency taken in the future's callback. *Records put*: the harness's arrival loop "
        "stops at the end of the schedule, so a starved one puts fewer than scheduled. "
        "*Collector s*: time in Python's garbage collector over the run (`gc.callbacks`). "
        "CPU: the producer process's (the KPL: JVM and daemon) over the run, per record"
        + (
            f" (KPL: JVM {fmt(kpl_latency['cpu_jvm_us_per_record'], 1)} + daemon "
            f"{fmt(kpl_latency['cpu_daemon_us_per_record'], 1)} µs/record)."
            if kpl_latency
            else "."
        ),
        "",
        latency_table(latency, kpl_latency),
        "",
        "Other ratios (medians):",
        "",
        *comparison_lines(summaries),
    ]
    crashed = [(s["variant"], e) for s in summaries for e in s["errors"]]
    if crashed:
        md += ["", "## Runs that failed", ""]
        md += [f"- {label}: `{err[:1500]}`" for label, err in crashed]
    data = {
        "benchmark": "kpl",
        "command": command_line(),
        "machine": {**info, "java": java, "kpl": _kpl.KPL_VERSION if classpath else None},
        "kpl_skipped": skipped or None,
        "settings": vars(args),
        "total_seconds": round(total, 1),
        "rows": summaries,
    }
    publish(args.name, md, data, total)


if __name__ == "__main__":
    main()
