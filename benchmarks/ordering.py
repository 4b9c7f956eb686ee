"""Per-key ordering's cost: ``ordering="per_key"`` against ``"none"``, side by side.

One kinesalite; each round runs every case once per setting, in alternating order, each as
a child process (``benchmarks.runners.kinesis_trio``) on a fresh stream of ``--shards`` shards
(200-byte records, linger 50 ms, the producer's limiter lifted). Cases:

- bursts of ``--count`` records, every outcome awaited, over 10,000 keys (a key has few
  records in flight at once: the common case), 256 keys (the default workload: each key
  has hundreds of records queued at once) and 4 keys (hot keys: a key's records go one
  aggregate per round trip);
- records at 5,000/s for 8 s over 256 keys: latency from each record's scheduled arrival.

The table gives medians per setting and the median of the per-round ratios (per_key / none)
with their range.

    uv run python -m benchmarks ordering --rounds 3     # writes results/ordering.md
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

from ._child import run_child
from ._command import command_line
from ._emulator import create_stream, delete_stream, start_emulator
from ._report import machine_info, machine_line, record_index

RESULTS = Path(__file__).parent / "results"
CASES: list[tuple[str, list[str]]] = [
    ("burst, 10,000 keys, trio", ["--backend", "trio", "--keys", "10000"]),
    ("burst, 10,000 keys, asyncio", ["--backend", "asyncio", "--keys", "10000"]),
    ("burst, 256 keys, trio", ["--backend", "trio", "--keys", "256"]),
    ("burst, 256 keys, asyncio", ["--backend", "asyncio", "--keys", "256"]),
    ("burst, 4 keys, trio", ["--backend", "trio", "--keys", "4"]),
    ("burst, 4 keys, asyncio", ["--backend", "asyncio", "--keys", "4"]),
    ("5,000/s, 256 keys, trio", ["--backend", "trio", "--rate", "5000", "--duration", "8"]),
    ("5,000/s, 256 keys, asyncio", ["--backend", "asyncio", "--rate", "5000", "--duration", "8"]),
]
SETTINGS = ("none", "per_key")
METRICS = ["records_per_s", "cpu_us_per_record", "p50_ms", "p99_ms", "peak_rss_mib"]


def run_case(
    endpoint: str, emulator_pid: int | None, args: list[str], ordering: str, count: int, shards: int
) -> dict[str, Any]:
    stream = create_stream(endpoint, shards, prefix="ord")
    try:
        res = run_child(
            "runners.kinesis_trio",
            [
                "--endpoint",
                endpoint,
                "--stream",
                stream,
                "--count",
                str(count),
                "--shards",
                str(shards),
                "--ordering",
                ordering,
                *args,
            ],
            timeout=900,
            emulator_pid=emulator_pid,
        )
        if not res.ok:
            raise SystemExit(f"{ordering} {args}: {res.error}")
        return res.data
    finally:
        delete_stream(endpoint, stream)


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--count", type=int, default=100_000)
    parser.add_argument("--shards", type=int, default=4)
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="CASE",
        help="run this case only (its whole name, which holds commas; repeat for more)",
    )
    parser.add_argument("--name", default="ordering", help="results/<name>.md and .json")
    args = parser.parse_args()
    names = [name for name, _ in CASES]
    unknown = [name for name in args.only if name not in names]
    if unknown:
        parser.error(f"--only: no case {unknown[0]!r}; the cases: {'; '.join(names)}")
    cases = [c for c in CASES if not args.only or c[0] in args.only]
    info = machine_info()
    print(f"machine: {machine_line(info)}", flush=True)
    results: dict[tuple[str, str], list[dict[str, Any]]] = {}
    emulator = start_emulator(shard_limit=1000)
    try:
        for r in range(args.rounds):
            order = list(SETTINGS) if r % 2 == 0 else list(reversed(SETTINGS))
            for name, case_args in cases:
                for ordering in order:
                    out = run_case(
                        emulator.endpoint_url,
                        emulator.pid,
                        case_args,
                        ordering,
                        args.count,
                        args.shards,
                    )
                    if out.get("failed"):
                        raise SystemExit(f"{ordering} {name}: {out['failed']} records failed")
                    results.setdefault((name, ordering), []).append(out)
                    print(
                        f"round {r + 1} {name:<28} {ordering:<8} "
                        + " ".join(f"{m}={out.get(m)}" for m in METRICS),
                        flush=True,
                    )
    finally:
        emulator.stop()
    lines = [
        "# Per-key ordering: its cost",
        "",
        f"Command: `{command_line()}`.",
        f"Machine: {machine_line(info)}.",
        "",
        f"{args.rounds} rounds; bursts of {args.count:,} records of 200 B, every outcome "
        f"awaited; paced runs 8 s; {args.shards} shards, linger 50 ms, limiter lifted; "
        "kinesalite. Each round runs both settings of a case back to back, in alternating "
        "order.",
        "",
        "| case | metric | none (median) | per_key (median) | per_key/none (median, range) |",
        "|---|---|---:|---:|---|",
    ]
    for name, _ in cases:
        for metric in METRICS:
            got = [o.get(metric) for s in SETTINGS for o in results[(name, s)]]
            if any(v is None for v in got):
                continue
            none = [float(o[metric]) for o in results[(name, "none")]]
            keyed = [float(o[metric]) for o in results[(name, "per_key")]]
            ratios = [a / b for a, b in zip(keyed, none, strict=True) if b]
            lines.append(
                f"| {name} | {metric} | {statistics.median(none):,.2f} | "
                f"{statistics.median(keyed):,.2f} | {statistics.median(ratios):.3f} "
                f"({min(ratios):.3f}-{max(ratios):.3f}) |"
            )
    text = "\n".join(lines) + "\n"
    print(text)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"{args.name}.md").write_text(text)
    raw = {f"{n} | {s}": v for (n, s), v in results.items()}
    (RESULTS / f"{args.name}.json").write_text(json.dumps({"machine": info, "runs": raw}, indent=1))
    record_index([RESULTS / f"{args.name}.md", RESULTS / f"{args.name}.json"], info)


if __name__ == "__main__":
    main()
