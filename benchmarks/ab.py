"""Two trees of kinesis_trio side by side, in one run, against kinesalite.

For a change that must not cost speed: check out the code before it somewhere (``git
worktree add /tmp/before <commit>``) and run::

    uv run python -m benchmarks ab --before /tmp/before --rounds 5

Each round runs every case once per tree, in alternating order, against a fresh kinesalite
for each case, as a child process whose working directory is that tree (so ``import
kinesis_trio`` loads that tree's package; the child prints which file it loaded and the
script checks it). Cases: throughput fire-and-forget and confirmed on trio and asyncio
(100,000 records of 200 B, limiter lifted, 4 shards), and CPU and latency from scheduled
arrival at 5,000 and 1,000 records/s. The table shows medians per tree and the median of
the per-round ratios (after / before) with their range:
the figures to quote on a noisy machine.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from ._command import ROOT
from ._emulator import create_stream, delete_stream, start_emulator
from ._report import machine_info, publish, report_header

CASES: list[tuple[str, list[str]]] = [
    ("ff trio", ["--backend", "trio", "--mode", "fire-and-forget"]),
    ("ff asyncio", ["--backend", "asyncio", "--mode", "fire-and-forget"]),
    ("confirmed trio", ["--backend", "trio", "--mode", "confirmed"]),
    ("confirmed asyncio", ["--backend", "asyncio", "--mode", "confirmed"]),
    ("paced 5k/s trio", ["--backend", "trio", "--rate", "5000", "--duration", "8"]),
    ("paced 5k/s asyncio", ["--backend", "asyncio", "--rate", "5000", "--duration", "8"]),
    ("paced 1k/s trio", ["--backend", "trio", "--rate", "1000", "--duration", "8"]),
    ("paced 1k/s asyncio", ["--backend", "asyncio", "--rate", "1000", "--duration", "8"]),
]
METRICS = ["records_per_s", "cpu_us_per_record", "p50_ms", "p99_ms", "peak_rss_mib"]


def run_case(tree: Path, endpoint: str, args: list[str], count: int, shards: int) -> dict[str, Any]:
    stream = create_stream(endpoint, shards, prefix="ab")
    try:
        probe = "import kinesis_trio,sys; sys.stderr.write('LOADED '+kinesis_trio.__file__+'\\n')"
        cmd = [
            sys.executable,
            "-c",
            f"{probe}; import runpy; runpy.run_module('benchmarks.runners.kinesis_trio', "
            "run_name='__main__', alter_sys=True)",
            "--json",
            "--endpoint",
            endpoint,
            "--stream",
            stream,
            "--count",
            str(count),
            "--shards",
            str(shards),
            *args,
        ]
        proc = subprocess.run(
            cmd, cwd=tree, capture_output=True, text=True, timeout=600, check=False
        )
        loaded = next((ln[7:] for ln in proc.stderr.splitlines() if ln.startswith("LOADED ")), "?")
        if not loaded.startswith(str(tree.resolve())):
            raise SystemExit(f"{tree}: the child loaded {loaded}, not this tree's package")
        line = next((ln for ln in reversed(proc.stdout.splitlines()) if ln.startswith("{")), None)
        if proc.returncode != 0 or line is None:
            raise SystemExit(f"{tree} {args}: failed\n{proc.stderr[-3000:]}")
        result: dict[str, Any] = json.loads(line)
        return result
    finally:
        delete_stream(endpoint, stream)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--before", required=True, help="the tree to compare with")
    parser.add_argument("--after", default=str(ROOT), help="this tree by default")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--count", type=int, default=100_000)
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument("--only", default="", help="comma-separated case names")
    parser.add_argument("--name", default="", help="also write results/<name>.{md,json}")
    args = parser.parse_args()
    started = time.perf_counter()
    trees = {"before": Path(args.before).resolve(), "after": Path(args.after).resolve()}
    cases = [c for c in CASES if not args.only or c[0] in args.only.split(",")]
    results: dict[tuple[str, str], list[dict[str, Any]]] = {}
    for r in range(args.rounds):
        order = ["before", "after"] if r % 2 == 0 else ["after", "before"]
        for name, case_args in cases:
            # a fresh emulator for each pair: kinesalite slows down as runs pile up in it,
            # and a burst's CPU per record follows the endpoint's speed (its batching)
            emulator = start_emulator()
            try:
                for label in order:
                    out = run_case(
                        trees[label], emulator.endpoint_url, case_args, args.count, args.shards
                    )
                    if out.get("failed"):
                        raise SystemExit(f"{label} {name}: {out['failed']} records failed")
                    results.setdefault((name, label), []).append(out)
                    print(
                        f"round {r + 1} {name:<20} {label:<6} "
                        + " ".join(f"{m}={out.get(m)}" for m in METRICS),
                        flush=True,
                    )
            finally:
                emulator.stop()
    table = [
        f"{args.rounds} rounds, {args.count} records of 200 B (paced: 8 s), {args.shards} shards",
        "",
        "| case | metric | before (median) | after (median) | after/before (median, range) |",
        "|---|---|---|---|---|",
    ]
    for name, _ in cases:
        for metric in METRICS:
            got = [o.get(metric) for o in results[(name, "before")] + results[(name, "after")]]
            if any(v is None for v in got):
                continue
            before = [float(o[metric]) for o in results[(name, "before")]]
            after = [float(o[metric]) for o in results[(name, "after")]]
            ratios = [a / b for a, b in zip(after, before, strict=True) if b]
            table.append(
                f"| {name} | {metric} | {statistics.median(before):.2f} | "
                f"{statistics.median(after):.2f} | {statistics.median(ratios):.3f} "
                f"({min(ratios):.3f}-{max(ratios):.3f}) |"
            )
    if not args.name:
        print("\n" + "\n".join(table))
        return
    info = machine_info()
    total = time.perf_counter() - started
    md = report_header(
        f"# Side by side: {args.before} (before) and {args.after} (after)", info, total
    )
    md += [f"Before: {_commit(trees['before'])}; after: {_commit(trees['after'])}.", "", *table, ""]
    data = {f"{name} {label}": runs for (name, label), runs in results.items()}
    publish(args.name, md, {"machine": info, "runs": data}, total)


def _commit(tree: Path) -> str:
    """The commit a tree is at (and whether its files differ from it)."""
    head = subprocess.run(
        ["git", "-C", str(tree), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    dirty = subprocess.run(
        ["git", "-C", str(tree), "status", "--porcelain", "--untracked-files=no"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    return f"{head or 'unknown'}{' + uncommitted changes' if dirty else ''}"


if __name__ == "__main__":
    main()
