"""Overloaded endpoint: does the producer stay truthful and finish when the endpoint is slow?

kinesis-local serves one request at a time; on a small machine 24 requests at once queue
inside it past their timeout. The workload: 20,000 records of 1 B to 300 KB (most small,
some large; each starts with its number), 4 shards, every outcome awaited, then the stream
is read back: every record must be there, and every record stored more than once must have
been flagged ``possible_duplicate``. The integration test runs the same workload.

The default (adaptive) request concurrency runs against fixed ``max_connections`` 1, 2, 4
and 24 (the KPL's default); each configuration once per round on each backend, in turn, on
a fresh stream, against one emulator::

    uv run python -m benchmarks overload --rounds 2

The table gives medians over the rounds: seconds to the last outcome, records failed,
flagged ``possible_duplicate``, request timeouts, records stored more than once (all must
be flagged) and the highest request limit seen.
"""

from __future__ import annotations

import argparse
import functools
import random
import statistics
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import anyio

from kinesis_trio import (
    KinesisClient,
    Outcome,
    Producer,
    ProducerConfig,
    StaticCredentials,
    deaggregate,
)
from kinesis_trio.testing._emulators import LocalKinesis

from ._command import log
from ._emulator import create_stream, delete_stream
from ._report import machine_info, publish, report_header

CREDS = StaticCredentials("AKIDLOCAL", "local-secret")
REGION = "us-east-1"


def records(count: int = 20_000, seed: int = 16) -> list[bytes]:
    """``count`` records of 1 B to 300 KB, ``b"<i>:..."``: 90 % up to 400 B, 8 % of 2 to
    20 KB, 1.5 % of 20 to 100 KB, 0.5 % of 100 to 300 KB (about 3 KB on average)."""
    rng = random.Random(seed)
    out = []
    for i in range(count):
        roll = rng.random()
        if roll < 0.90:
            size = rng.randrange(1, 400)
        elif roll < 0.98:
            size = rng.randrange(2_000, 20_000)
        elif roll < 0.995:
            size = rng.randrange(20_000, 100_000)
        else:
            size = rng.randrange(100_000, 300_000)
        head = b"%d:" % i
        out.append(head + rng.randbytes(max(0, size - len(head))))
    return out


@dataclass
class Result:
    elapsed: float
    failed: int
    flagged: int
    timeouts: int
    #: records stored more than once, and those of them not flagged
    duplicated: int
    unflagged_copies: int
    missing: int
    errors: Counter[str] = field(default_factory=Counter)
    limits: list[int] = field(default_factory=list)

    def row(self) -> dict[str, Any]:
        return {
            "elapsed_s": round(self.elapsed, 2),
            "failed": self.failed,
            "flagged": self.flagged,
            "timeouts": self.timeouts,
            "duplicated": self.duplicated,
            "unflagged_copies": self.unflagged_copies,
            "missing": self.missing,
            "limit_max": max(self.limits, default=0),
            "errors": dict(self.errors),
        }


async def read_copies(endpoint: str, stream: str) -> Counter[int]:
    """How many times each record number is in the stream (aggregates opened)."""
    copies: Counter[int] = Counter()
    # After an overload run the emulator may still be working through abandoned requests:
    # give the reader a long timeout.
    async with KinesisClient(
        region_name=REGION, endpoint_url=endpoint, credentials=CREDS, request_timeout=120.0
    ) as client:
        for records in (await client.read_all(stream)).values():
            for rec in records:
                for user in deaggregate(rec["Data"], rec["PartitionKey"]):
                    copies[int(user.data.split(b":", 1)[0])] += 1
    return copies


async def run(endpoint: str, stream: str, data: list[bytes], **config: Any) -> Result:
    """Put ``data`` with ``ProducerConfig(**config)``, await every outcome, read back."""
    outcomes: list[Outcome] = []
    limits: list[int] = []
    start = time.perf_counter()
    async with (
        Producer(
            stream,
            region_name=REGION,
            endpoint_url=endpoint,
            credentials=CREDS,
            config=ProducerConfig(**config),
        ) as producer,
        anyio.create_task_group() as tg,
    ):

        async def watch() -> None:
            while True:
                limits.append(producer.request_limit)
                await anyio.sleep(0.5)

        tg.start_soon(watch)
        for i, payload in enumerate(data):
            outcomes.append(await producer.put(payload, f"key-{i % 1000}"))
        results = [await o.wait() for o in outcomes]
        tg.cancel_scope.cancel()
    elapsed = time.perf_counter() - start
    print(f"  put phase done in {elapsed:.1f} s; reading the stream back", flush=True)
    copies = await read_copies(endpoint, stream)
    errors: Counter[str] = Counter()
    timeouts = 0
    for r in results:
        for a in r.attempts:
            if a.error_code:
                errors[a.error_code] += 1
                timeouts += "Timeout" in a.error_code
    return Result(
        elapsed=elapsed,
        failed=sum(not r.ok for r in results),
        flagged=sum(r.possible_duplicate for r in results),
        timeouts=timeouts,
        duplicated=sum(1 for i in range(len(data)) if copies[i] > 1),
        unflagged_copies=sum(
            1 for i, r in enumerate(results) if copies[i] > 1 and not r.possible_duplicate
        ),
        missing=sum(1 for i, r in enumerate(results) if r.ok and copies[i] == 0),
        errors=errors,
        limits=limits,
    )


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
    data = records(args.count)
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
                            functools.partial(run, endpoint, stream, data, **config),
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
    data_out = {
        "machine": machine_info(),
        "runs": {f"{b}|{c}": r for (c, b), r in runs.items()},
        "count": args.count,
    }
    if args.no_write:
        print("\n".join(md))
    else:
        publish("overload", md, data_out, total)


if __name__ == "__main__":
    main()
