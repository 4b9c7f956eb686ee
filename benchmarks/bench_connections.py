"""The default (adaptive) request concurrency against fixed ``max_connections``, on kinesalite.

How many requests in flight a burst needs on this emulator, and whether the adaptive
limit gets there::

    uv run python -m benchmarks.bench_connections --rounds 3 --shards 32

Each round runs every configuration once, in turn, as a child process of
``benchmarks.run_kinesis_trio`` through ``bench_ab.run_case`` (100,000 records of 200 B,
limiter lifted, a fresh stream each), confirmed and fire-and-forget on the chosen backend.
Prints the median records/s per configuration and its ratio to fixed 24 (the KPL's default).
"""

from __future__ import annotations

import argparse
import statistics

from .bench_ab import run_case
from .common import ROOT, start_emulator

CONFIGS: dict[str, list[str]] = {
    "default (adaptive)": [],
    "fixed 2": ["--fixed-connections", "--max-connections", "2"],
    "fixed 4": ["--fixed-connections", "--max-connections", "4"],
    "fixed 8": ["--fixed-connections", "--max-connections", "8"],
    "fixed 24 (KPL)": ["--fixed-connections", "--max-connections", "24"],
}


def run_one(endpoint: str, shards: int, count: int, args: list[str]) -> float:
    out = run_case(ROOT, endpoint, args, count, shards)
    if out.get("failed"):
        raise SystemExit(f"{args}: {out['failed']} records failed")
    return float(out["records_per_s"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--count", type=int, default=100_000)
    parser.add_argument("--shards", type=int, default=32)
    parser.add_argument("--backend", choices=["trio", "asyncio"], default="asyncio")
    args = parser.parse_args()
    modes = ["confirmed", "fire-and-forget"]
    rates: dict[tuple[str, str], list[float]] = {}
    emulator = start_emulator()
    try:
        for r in range(args.rounds):
            for mode in modes:
                for name, extra in CONFIGS.items():
                    child = ["--backend", args.backend, "--mode", mode, *extra]
                    rate = run_one(emulator.endpoint_url, args.shards, args.count, child)
                    rates.setdefault((mode, name), []).append(rate)
                    print(f"round {r + 1} {mode:<16} {name:<20} {rate:,.0f}", flush=True)
    finally:
        emulator.stop()
    print()
    print(
        f"{args.rounds} rounds, {args.count} records of 200 B, {args.shards} shards, "
        f"{args.backend}, kinesalite"
    )
    print("| mode | configuration | records/s (median) | range | / fixed 24 |")
    print("|---|---|---:|---|---:|")
    for mode in modes:
        kpl = statistics.median(rates[(mode, "fixed 24 (KPL)")])
        for name in CONFIGS:
            got = rates[(mode, name)]
            med = statistics.median(got)
            print(
                f"| {mode} | {name} | {med:,.0f} | {min(got):,.0f}-{max(got):,.0f} "
                f"| {med / kpl:.3f} |"
            )


if __name__ == "__main__":
    main()
