"""The overloaded-endpoint workload (issue: adaptive request concurrency), shared by the
benchmark (``bench_overload``) and the integration test.

20,000 records of 1 B to 300 KB (most small, some large; each starts with its number),
4 shards, every outcome awaited, against kinesis-local, whose engine serves one
request at a time on this kind of machine. Then the stream is read back: every record must
be there, and every record stored more than once must have been flagged
``possible_duplicate``.
"""

from __future__ import annotations

import random
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
