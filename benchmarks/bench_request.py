"""Client-side CPU per PutRecords request: signing, hashing, HTTP, parsing.

``KinesisClient.call_raw`` sends a one-record PutRecords (200 bytes) to the Python local
engine (its own process) ``--count`` times in sequence, after 200 warm-up calls, on trio
and on asyncio; the figure is this process's CPU time per call (``time.process_time``), the
best of ``--rounds`` rounds. It is the fixed cost every PutRecords pays whatever it holds.

    uv run python -m benchmarks.bench_request            # --count 3000 --rounds 3
"""

from __future__ import annotations

import argparse
import base64
import json
import time

import anyio

from kinesis_trio import KinesisClient, StaticCredentials
from kinesis_trio._emulator import LocalKinesis


async def _measure(url: str, count: int, rounds: int) -> list[float]:
    async with KinesisClient(
        region_name="us-east-1", endpoint_url=url, credentials=StaticCredentials("a", "b")
    ) as client:
        stream = f"request-{anyio.current_time():.0f}-{time.monotonic_ns() % 100000}"
        await client.create_stream(stream, 1)
        await client.wait_for_stream(stream)
        record = {"Data": base64.b64encode(b"x" * 200).decode(), "PartitionKey": "k"}
        body = json.dumps({"StreamName": stream, "Records": [record]}).encode()
        for _ in range(200):
            await client.call_raw("PutRecords", body)
        per_call = []
        for _ in range(rounds):
            cpu0 = time.process_time()
            for _ in range(count):
                await client.call_raw("PutRecords", body)
            per_call.append((time.process_time() - cpu0) / count * 1e6)
        return per_call


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with LocalKinesis("python") as engine:
        for backend in ("trio", "asyncio"):
            rounds = anyio.run(
                _measure, engine.endpoint_url, args.count, args.rounds, backend=backend
            )
            shown = ", ".join(f"{r:.0f}" for r in rounds)
            print(f"{backend:8} µs of CPU per PutRecords: best {min(rounds):.0f} (rounds: {shown})")


if __name__ == "__main__":
    main()
