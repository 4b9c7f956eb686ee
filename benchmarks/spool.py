"""The durable spool's cost: no spool, ``spool_sync="interval"`` and ``spool_sync="put"``,
side by side in one run.

One kinesalite, a fresh ``--shards``-shard stream per run, 200-byte records over 256 keys,
linger 50 ms, the producer's limiter lifted; each run is a child process
(``benchmarks.runners.kinesis_trio``) whose records are put by ``--put-tasks`` tasks (a
``put`` with ``spool_sync="put"`` waits for the fsync, so one loop awaiting each put would
measure the disk's latency, not the producer; every variant gets the same putters). A
spool variant gets a fresh, empty spool directory on the disk of ``--spool-dir`` (the
checkout's by default), removed after the run. Each round runs, in a rotating order:

- **a burst** of ``--count`` records, every outcome awaited: records/s until the last
  outcome, and CPU per record until the producer has closed (the spool's last commit and
  its deletes included);
- **a steady rate** (``--rate``, 5,000 records/s, for ``--duration`` s): record *i* is due
  at ``t0 + i/rate``, a putter sleeps until then (not when behind) and the latency is the
  record's resolution minus its *scheduled* arrival (no coordinated omission); with
  ``spool_sync="put"`` also each ``put``'s return minus the record's scheduled arrival.

CPU is the child process's user + system time from ``getrusage(RUSAGE_SELF)``: every thread
of the process, the spool's worker thread included. Each round also times ``--fsync-writes``
appends of 4 KiB, each followed by ``os.fsync``, in the spool's directory: the disk's fsync
latency. Tables give medians over the rounds and the median of the per-round ratios against
no spool (with their range).

Targets: ``spool_sync="interval"`` within 2x the CPU per record of no spool, and its p99
within linger + 30 ms at 5,000 records/s; ``spool_sync="put"``: its p99 ``put`` latency.

    uv run python -m benchmarks spool            # writes results/spool.{md,json}
    uv run python -m benchmarks spool --quick    # a smoke run (use --name to keep spool.md)
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import shutil
import statistics
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks._command import ROOT, command_line, log
from benchmarks._report import markdown_table, publish, report_header
from benchmarks._runner import latency_fields
from benchmarks._runs import add_stream_flags, emulator_session, run_on_fresh_stream
from benchmarks._summary import fmt, fmt_int, median_field

#: ``spool_sync="interval"``'s targets: CPU per record against no spool, and p99 above linger
CPU_RATIO_TARGET = 2.0
P99_OVER_LINGER_MS = 30.0
FSYNC_BLOCK = 4096


@dataclass(frozen=True)
class Setting:
    """One spool setting: ``sync`` is ``spool_sync``, or ``""`` for no spool."""

    key: str
    label: str
    sync: str


SETTINGS = [
    Setting("none", "no spool", ""),
    Setting("interval", 'spool_sync="interval"', "interval"),
    Setting("put", 'spool_sync="put"', "put"),
]
LOADS = ("burst", "steady")


def fsync_latency(directory: Path, writes: int) -> dict[str, Any]:
    """``writes`` appends of 4 KiB to a new file in ``directory``, each followed by
    ``os.fsync``: the latency of each pair (p50, p99, max in ms). The file is removed."""
    path = directory / f"fsync-probe-{uuid.uuid4().hex[:8]}"
    block = os.urandom(FSYNC_BLOCK)
    times: list[float] = []
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        os.write(fd, block)
        os.fsync(fd)  # the file's creation is on disk before the timed writes
        for _ in range(writes):
            t0 = time.perf_counter()
            os.write(fd, block)
            os.fsync(fd)
            times.append(time.perf_counter() - t0)
    finally:
        os.close(fd)
        path.unlink()
    q = latency_fields(times)
    return {"writes": writes, **{k: q[k] for k in ("p50_ms", "p99_ms", "max_ms", "mean_ms")}}


def filesystem_of(directory: Path) -> str:
    """The device and file system type that hold ``directory`` (from ``/proc/mounts``)."""
    where = str(directory.resolve())
    best = ("", "?", "?")
    with contextlib.suppress(OSError):
        for line in Path("/proc/mounts").read_text().splitlines():
            fields = line.split()
            if len(fields) < 3:
                continue
            device, mount, kind = fields[0], fields[1], fields[2]
            inside = where == mount or where.startswith(mount.rstrip("/") + "/")
            if inside and len(mount) >= len(best[0]):
                best = (mount, device, kind)
    mount, device, kind = best
    return f"{device} ({kind}, mounted on {mount or '?'})"


def _ratios(
    runs: dict[tuple[str, str, str], list[dict[str, Any]]],
    setting: str,
    backend: str,
    load: str,
    metric: str,
) -> list[float]:
    """Per round: ``metric`` of ``setting`` over no spool's in the same round."""
    base = {r["round"]: r for r in runs.get(("none", backend, load), []) if metric in r}
    out: list[float] = []
    for r in runs.get((setting, backend, load), []):
        b = base.get(r["round"])
        if b is not None and metric in r and float(b[metric]):
            out.append(float(r[metric]) / float(b[metric]))
    return out


def _ratio_text(values: list[float]) -> str:
    if not values:
        return "n/a"
    med = statistics.median(values)
    if len(values) == 1:
        return f"{med:.2f}x"
    return f"{med:.2f}x ({min(values):.2f}-{max(values):.2f})"


def summarize(
    runs: dict[tuple[str, str, str], list[dict[str, Any]]],
    backend: str,
    s: Setting,
) -> dict[str, Any]:
    """One row per setting and backend: the burst's and the steady run's medians, and the
    per-round ratios against no spool."""
    burst = runs.get((s.key, backend, "burst"), [])
    steady = runs.get((s.key, backend, "steady"), [])

    def med(rows: list[dict[str, Any]], key: str, digits: int = 2) -> float:
        return round(median_field(rows, key), digits)

    return {
        "setting": s.key,
        "variant": s.label,
        "backend": backend,
        "spool_sync": s.sync or None,
        "burst_records": int(burst[0]["records"]) if burst else 0,
        "burst_records_per_s": med(burst, "records_per_s", 1),
        "burst_cpu_us_per_record": med(burst, "cpu_us_per_record_through_close"),
        "burst_cpu_us_per_record_to_last_outcome": med(burst, "cpu_us_per_record"),
        "burst_failed": sum(int(r["failed"]) for r in burst),
        "burst_records_per_s_vs_none": _ratios(runs, s.key, backend, "burst", "records_per_s"),
        "burst_cpu_vs_none": _ratios(
            runs, s.key, backend, "burst", "cpu_us_per_record_through_close"
        ),
        "steady_rate": float(steady[0]["target_rate"]) if steady else 0.0,
        "p50_ms": med(steady, "p50_ms"),
        "p99_ms": med(steady, "p99_ms"),
        "p999_ms": med(steady, "p999_ms"),
        "max_ms": med(steady, "max_ms"),
        "put_p50_ms": med(steady, "put_p50_ms", 3),
        "put_p99_ms": med(steady, "put_p99_ms", 3),
        "put_p999_ms": med(steady, "put_p999_ms", 3),
        "put_max_ms": med(steady, "put_max_ms", 3),
        "max_put_lag_ms": med(steady, "max_put_lag_ms"),
        "steady_records_per_s": med(steady, "records_per_s", 1),
        "steady_cpu_us_per_record": med(steady, "cpu_us_per_record_through_close"),
        "steady_failed": sum(int(r["failed"]) for r in steady),
        "p99_vs_none": _ratios(runs, s.key, backend, "steady", "p99_ms"),
        "steady_cpu_vs_none": _ratios(
            runs, s.key, backend, "steady", "cpu_us_per_record_through_close"
        ),
        "runs": {"burst": burst, "steady": steady},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--count", type=int, default=50_000, help="records per burst")
    parser.add_argument("--rate", type=float, default=5000.0, help="steady records/s")
    parser.add_argument("--duration", type=float, default=8.0, help="steady run, seconds")
    parser.add_argument("--repeat", type=int, default=5, help="rounds")
    parser.add_argument("--put-tasks", type=int, default=256, help="putter tasks per run")
    parser.add_argument("--backends", default="trio,asyncio", help="trio and/or asyncio")
    parser.add_argument(
        "--spool-dir",
        type=Path,
        default=ROOT,
        help="where the spools go (a fresh subdirectory, removed at the end; default: the "
        "checkout, so its disk)",
    )
    parser.add_argument("--fsync-writes", type=int, default=200, help="per round")
    add_stream_flags(parser, shards=2)
    parser.add_argument("--timeout", type=float, default=300.0, help="per child run, s")
    parser.add_argument(
        "--quick",
        action="store_true",
        help="a smoke run: --count 3000 --duration 1 --repeat 1 --fsync-writes 20",
    )
    parser.add_argument("--name", default="spool", help="results/<name>.{md,json}")
    args = parser.parse_args()
    if args.quick:
        args.count, args.duration, args.repeat, args.fsync_writes = 3000, 1.0, 1, 20
    backends = [b for b in args.backends.split(",") if b]
    if any(b not in ("trio", "asyncio") for b in backends):
        raise SystemExit(f"--backends: trio and/or asyncio, not {args.backends!r}")
    loads = {
        "burst": ["--count", str(args.count)],
        "steady": ["--rate", str(args.rate), "--duration", str(args.duration)],
    }
    base = args.spool_dir.resolve() / f"spool-bench-{uuid.uuid4().hex[:10]}"
    base.mkdir(parents=True)
    disk = filesystem_of(base)
    runs: dict[tuple[str, str, str], list[dict[str, Any]]] = {}
    errors: list[str] = []
    fsyncs: list[dict[str, Any]] = []
    try:
        with emulator_session() as session:
            log(f"spools in {base}: {disk}")
            serial = 0
            for rnd in range(args.repeat):
                probe = fsync_latency(base, args.fsync_writes)
                fsyncs.append(probe)
                log(
                    f"[{rnd + 1}/{args.repeat}] 4 KiB + fsync x{probe['writes']}: p50 "
                    f"{probe['p50_ms']:.2f} p99 {probe['p99_ms']:.2f} max {probe['max_ms']:.2f} ms"
                )
                shift = rnd % len(SETTINGS)
                order = SETTINGS[shift:] + SETTINGS[:shift]
                for backend in backends:
                    for load in LOADS:
                        for s in order:
                            serial += 1
                            spool = base / f"run-{serial}"
                            extra = ["--variant", s.label, "--backend", backend]
                            extra += ["--put-tasks", str(args.put_tasks)]
                            if s.sync:
                                extra += ["--spool-dir", str(spool), "--spool-sync", s.sync]
                            try:
                                res = run_on_fresh_stream(
                                    session.emulator,
                                    "runners.kinesis_trio",
                                    load=loads[load],
                                    size=args.size,
                                    keys=args.keys,
                                    shards=args.shards,
                                    linger=args.linger,
                                    extra=extra,
                                    timeout=args.timeout,
                                )
                            finally:
                                shutil.rmtree(spool, ignore_errors=True)
                            tag = f"[{rnd + 1}/{args.repeat}] {backend} {load} {s.label}"
                            if not res.ok:
                                errors.append(f"{tag}: {res.error}")
                                log(f"{tag}: FAILED\n{res.error}")
                                continue
                            d = res.data
                            d["round"] = rnd
                            runs.setdefault((s.key, backend, load), []).append(d)
                            if load == "burst":
                                log(
                                    f"{tag}: {d['records_per_s']:,.0f} records/s, "
                                    f"{d['cpu_us_per_record_through_close']:.1f} µs/record, "
                                    f"failed {d['failed']}"
                                )
                            else:
                                log(
                                    f"{tag}: p50 {d['p50_ms']:.1f} p99 {d['p99_ms']:.1f} ms, "
                                    f"put p99 {d.get('put_p99_ms', float('nan')):.2f} ms, "
                                    f"lag {d.get('max_put_lag_ms', 0):.1f} ms, "
                                    f"failed {d['failed']}"
                                )
    finally:
        shutil.rmtree(base, ignore_errors=True)
    info, total = session.info, session.total

    rows = [summarize(runs, b, s) for b in backends for s in SETTINGS]
    target_ms = args.linger * 1000 + P99_OVER_LINGER_MS
    fsync_summary = {
        "directory": str(args.spool_dir.resolve()),
        "filesystem": disk,
        "block_bytes": FSYNC_BLOCK,
        "writes_per_round": args.fsync_writes,
        "p50_ms": round(median_field(fsyncs, "p50_ms"), 3),
        "p99_ms": round(median_field(fsyncs, "p99_ms"), 3),
        "max_ms": round(max((p["max_ms"] for p in fsyncs), default=math.nan), 3),
        "rounds": fsyncs,
    }
    md = [
        *report_header('# The durable spool: no spool, "interval" and "put"', info, total),
        f"{args.size}-byte records, {args.keys} partition keys, a fresh {args.shards}-shard "
        f"stream per run on one kinesalite, linger {args.linger * 1000:.0f} ms, limiter "
        f"lifted, spool_interval 0.2 s (the default), {args.put_tasks} putter tasks in every "
        f"run, {args.repeat} round(s), the settings in a rotating order in each; medians, and "
        "the median of the per-round ratios against no spool (their range). Bursts: "
        f"{args.count:,} records, every outcome awaited; records/s until the last outcome, "
        "CPU until the producer has closed (the spool's last commit and deletes included). "
        f"Steady: {args.rate:,.0f} records/s for {args.duration:g} s, latency from each "
        "record's *scheduled* arrival (no coordinated omission); `put()` latency: its "
        "return minus the record's scheduled arrival. CPU: the child process's user + "
        "system time (`getrusage(RUSAGE_SELF)`: all its threads, the spool's worker "
        f"included). Spools on {disk}, a fresh directory per run.",
        "",
        "**fsync latency of this disk** (4 KiB appended, then `os.fsync`, "
        f"{args.fsync_writes} times per round): p50 {fmt(fsync_summary['p50_ms'], 2)} ms, "
        f"p99 {fmt(fsync_summary['p99_ms'], 2)} ms (medians over the rounds), max "
        f"{fmt(fsync_summary['max_ms'], 2)} ms; per round p99: "
        + ", ".join(f"{p['p99_ms']:.2f}" for p in fsyncs)
        + " ms.",
        "",
    ]
    for backend in backends:
        mine = [r for r in rows if r["backend"] == backend]
        burst_body = [
            [
                r["variant"],
                fmt_int(r["burst_records_per_s"]),
                "" if r["setting"] == "none" else _ratio_text(r["burst_records_per_s_vs_none"]),
                fmt(r["burst_cpu_us_per_record"], 2),
                "" if r["setting"] == "none" else _ratio_text(r["burst_cpu_vs_none"]),
                str(r["burst_failed"]),
            ]
            for r in mine
        ]
        steady_body = [
            [
                r["variant"],
                fmt(r["p50_ms"], 1),
                fmt(r["p99_ms"], 1),
                fmt(r["p999_ms"], 1),
                "" if r["setting"] == "none" else _ratio_text(r["p99_vs_none"]),
                fmt(r["put_p50_ms"], 2),
                fmt(r["put_p99_ms"], 2),
                fmt(r["max_put_lag_ms"], 1),
                fmt(r["steady_cpu_us_per_record"], 2),
                "" if r["setting"] == "none" else _ratio_text(r["steady_cpu_vs_none"]),
                str(r["steady_failed"]),
            ]
            for r in mine
        ]
        md += [
            f"## {backend}: a burst of {args.count:,} records",
            "",
            markdown_table(
                [
                    "variant",
                    "records/s",
                    "vs no spool",
                    "CPU µs/record",
                    "vs no spool",
                    "failed",
                ],
                burst_body,
                "lrlrll",
            ),
            "",
            f"## {backend}: {args.rate:,.0f} records/s for {args.duration:g} s",
            "",
            markdown_table(
                [
                    "variant",
                    "p50 ms",
                    "p99 ms",
                    "p99.9 ms",
                    "p99 vs no spool",
                    "put() p50 ms",
                    "put() p99 ms",
                    "putter lag ms",
                    "CPU µs/record",
                    "vs no spool",
                    "failed",
                ],
                steady_body,
                "lrrrlrrrrll",
            ),
            "",
        ]
        by = {r["setting"]: r for r in mine}
        interval, put = by["interval"], by["put"]
        cpu = interval["burst_cpu_vs_none"]
        cpu_ok = bool(cpu) and statistics.median(cpu) <= CPU_RATIO_TARGET
        p99_ok = interval["p99_ms"] <= target_ms
        md += [
            f"Targets ({backend}):",
            "",
            f'- `spool_sync="interval"`, burst CPU per record <= {CPU_RATIO_TARGET:g}x no '
            f"spool: {_ratio_text(cpu)}: {'**met**' if cpu_ok else '**missed**'}",
            f'- `spool_sync="interval"`, p99 at {args.rate:,.0f}/s <= linger + '
            f"{P99_OVER_LINGER_MS:.0f} ms = {target_ms:.0f} ms: {fmt(interval['p99_ms'], 1)} ms: "
            f"{'**met**' if p99_ok else '**missed**'}",
            f'- `spool_sync="put"`, p99 `put()` latency at {args.rate:,.0f}/s: '
            f"{fmt(put['put_p99_ms'], 2)} ms (p50 {fmt(put['put_p50_ms'], 2)}, p99.9 "
            f"{fmt(put['put_p999_ms'], 2)}, max {fmt(put['put_max_ms'], 2)}); its records' p99 "
            f"{fmt(put['p99_ms'], 1)} ms; burst {fmt_int(put['burst_records_per_s'])} records/s "
            f"at {fmt(put['burst_cpu_us_per_record'], 2)} µs/record",
            "",
        ]
        interval["targets"] = {"cpu_ratio_met": cpu_ok, "p99_met": p99_ok}
    if errors:
        md += ["## Runs that failed", ""]
        md += [f"- `{e[:1500]}`" for e in errors]
        md.append("")
    data = {
        "benchmark": "spool",
        "command": command_line(),
        "machine": info,
        "settings": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "targets": {
            "interval_cpu_ratio_max": CPU_RATIO_TARGET,
            "interval_p99_ms_max": target_ms,
        },
        "fsync": fsync_summary,
        "total_seconds": round(total, 1),
        "errors": errors,
        "rows": rows,
    }
    publish(args.name, md, data, total)


if __name__ == "__main__":
    main()
