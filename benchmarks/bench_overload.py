"""Overloaded endpoint: the default (adaptive) request concurrency against fixed
``max_connections`` 1, 2, 4 and 24 (the KPL's default), on kinesis-local.

kinesis-local serves one request at a time; on a small machine 24 requests at once queue
inside it past their timeout. The workload is ``benchmarks.overload``: 20,000 records of
1 B to 300 KB, 4 shards, every outcome awaited, the stream read back. Each configuration
runs once per round on each backend, in turn, on a fresh stream, against one emulator::

    uv run python -m benchmarks.bench_overload --rounds 2

The table gives medians over the rounds: seconds to the last outcome, records failed,
flagged ``possible_duplicate``, request timeouts, records stored more than once (all must
be flagged) and the highest request limit seen.
"""

from __future__ import annotations

import argparse
import functools
import statistics
import time
from typing import Any

import anyio

from kinesis_trio._emulator import LocalKinesis

from . import overload
from .common import create_stream, delete_stream, log, machine_info, publish, report_header

CONFIGS: list[tuple[str, dict[str, Any]]] = [
    ("default (adaptive, ceiling 24)", {}),
    ("fixed max_connections=1", {"max_connections": 1, "adaptive_concurrency": False}),
    ("fixed max_connections=2", {"max_connections": 2, "adaptive_concurrency": False}),
    ("fixed max_connections=4", {"max_connections": 4, "adaptive_concurrency": False}),
    ("fixed max_connections=24 (KPL)", {"max_connections": 24, "adaptive_concurrency": False}),
]
FIELDS = ["elapsed_s", "failed", "flagged", "timeouts", "duplicated", "unflagged_copies"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--count", type=int, default=20_000)
    parser.add_argument("--backends", default="trio,asyncio")
    parser.add_argument("--only", default="", help="comma-separated config indexes (0-4)")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    configs = [c for i, c in enumerate(CONFIGS) if not args.only or str(i) in args.only.split(",")]
    backends = args.backends.split(",")
    data = overload.records(args.count)
    runs: dict[tuple[str, str], list[dict[str, Any]]] = {}
    t0 = time.perf_counter()
    with LocalKinesis("kinesis-local") as emulator:
        endpoint = emulator.endpoint_url
        for rnd in range(args.rounds):
            for backend in backends:
                for label, config in configs:
                    stream = create_stream(endpoint, 4, prefix="overload")
                    try:
                        result = anyio.run(
                            functools.partial(overload.run, endpoint, stream, data, **config),
                            backend=backend,
                        )
                    finally:
                        delete_stream(endpoint, stream)
                    row = result.row()
                    runs.setdefault((label, backend), []).append(row)
                    log(f"round {rnd + 1} {backend:8} {label:32} {row}")
    total = time.perf_counter() - t0
    md = report_header("# Overloaded endpoint (kinesis-local)", machine_info(), total)
    md.append(
        f"{args.count:,} records of 1 B to 300 KB (mostly small), 4 shards, every outcome "
        f"awaited; medians of {args.rounds} round(s); the stream read back after each run."
    )
    md.append("")
    md.append("| backend | configuration | " + " | ".join(FIELDS) + " | limit max |")
    md.append("|---|---|" + "---:|" * (len(FIELDS) + 1))
    for backend in backends:
        for label, _ in configs:
            rows = runs[(label, backend)]
            cells = [f"{statistics.median(r[f] for r in rows):g}" for f in FIELDS]
            limit = max(r["limit_max"] for r in rows)
            md.append(f"| {backend} | {label} | " + " | ".join(cells) + f" | {limit} |")
    data_out = {"runs": {f"{b}|{c}": r for (c, b), r in runs.items()}, "count": args.count}
    if args.no_write:
        print("\n".join(md))
    else:
        publish("overload", md, data_out, total)


if __name__ == "__main__":
    main()
