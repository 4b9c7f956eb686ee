"""Reliability figures: rate limiting against AWS shard limits, and failing fast.

1. Rate limiting: the in-memory fake enforces AWS's per-shard limits (1000 records/s and
   1 MiB/s, PTE per entry beyond them). A producer with ``rate_limit=100`` writes as fast as
   backpressure lets it for a stretch of *virtual* time (trio's MockClock): we report the
   achieved write rate as a share of the binding shard limit, measured from the stored
   records' arrival times after a warm-up (so the initial full bucket does not flatter it),
   and the share of PutRecords requests that had any throttled entry.
2. Failing fast: wall-clock time from ``put`` to a failed outcome (or to the error) when the
   stream does not exist (kinesalite, a real emulator) and when access is denied (the fake
   answering AccessDeniedException), against the 30 s the KPL spends retrying.

Run: ``uv run python -m benchmarks reliability`` (prints markdown tables).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import time
from typing import Any

import anyio
import httpx
import trio
import trio.testing

from benchmarks._report import machine_info, publish, report_header
from kinesis_trio import Producer, ProducerConfig, ResourceNotFoundError, StaticCredentials
from kinesis_trio.testing import FakeKinesis, Faults
from kinesis_trio.testing._emulators import LocalKinesis

CREDS = StaticCredentials("AKIDBENCH", "bench-secret")


class CountingTransport(httpx.AsyncBaseTransport):
    """Serves the fake and counts PutRecords requests with any throttled entry."""

    def __init__(self, fake: FakeKinesis) -> None:
        self.inner = fake.transport()
        self.requests = 0
        self.throttled_requests = 0
        self.entries = 0
        self.throttled_entries = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        if request.headers.get("x-amz-target", "").endswith(".PutRecords"):
            await response.aread()
            body = json.loads(response.content)
            self.requests += 1
            throttled = [
                r
                for r in body.get("Records", [])
                if r.get("ErrorCode") == "ProvisionedThroughputExceededException"
            ]
            self.entries += len(body.get("Records", []))
            self.throttled_entries += len(throttled)
            if throttled or response.status_code == 400:
                self.throttled_requests += 1
        return response


async def rate_run(
    shards: int, aggregation: bool, size: int, seconds: float, warmup: float
) -> dict[str, Any]:
    fake = FakeKinesis(enforce_limits=True)
    fake.create_stream("s", shards)
    transport = CountingTransport(fake)
    config = ProducerConfig(
        rate_limit=100,
        aggregation_enabled=aggregation,
        record_max_buffered_time=0.1,
        max_outstanding_records=20_000,
    )
    payload = b"x" * size
    start = trio.current_time()
    async with Producer(
        "s",
        region_name="us-east-1",
        endpoint_url="http://fake",
        credentials=CREDS,
        config=config,
        transport=transport,
    ) as producer:
        i = 0
        while trio.current_time() - start < seconds:
            await producer.put(payload, f"k{i % 4096}")
            i += 1
        await producer.flush()
    user_records = 0
    per_shard_rates = []
    for shard in fake.streams["s"].shards:
        records = [r for r in shard.records if r.arrival >= start + warmup]
        if not records:
            continue
        span = max(r.arrival for r in records) - (start + warmup)
        kin_records = len(records)
        kin_bytes = sum(len(r.data) + len((r.partition_key or "").encode()) for r in records)
        share = max(kin_records / span / 1000, kin_bytes / span / 1_048_576)
        per_shard_rates.append(share)
        user_records += kin_records
    return {
        "shards": shards,
        "aggregation": aggregation,
        "size": size,
        "share": sum(per_shard_rates) / len(per_shard_rates),
        "min_share": min(per_shard_rates),
        "requests": transport.requests,
        "throttled_requests": transport.throttled_requests,
        "throttled_entries": transport.throttled_entries,
        "entries": transport.entries,
        "records": i,
    }


async def fail_fast_missing_stream(endpoint: str) -> tuple[float, float]:
    t0 = time.perf_counter()
    try:
        async with Producer(
            "does-not-exist", region_name="us-east-1", endpoint_url=endpoint, credentials=CREDS
        ):
            pass
    except ResourceNotFoundError:
        pass
    enter = time.perf_counter() - t0
    async with Producer(
        region_name="us-east-1", endpoint_url=endpoint, credentials=CREDS
    ) as producer:
        t0 = time.perf_counter()
        with contextlib.suppress(ResourceNotFoundError):
            await producer.put(b"x", "k", stream_name="does-not-exist-either")
        put = time.perf_counter() - t0
    return enter, put


async def fail_fast_denied() -> tuple[float, str | None]:
    fake = FakeKinesis(faults=Faults(fatal={"audit": "AccessDeniedException"}))
    fake.create_stream("audit", 2)
    async with Producer(
        "audit",
        region_name="us-east-1",
        endpoint_url="http://fake",
        credentials=CREDS,
        transport=fake.transport(),
    ) as producer:
        t0 = time.perf_counter()
        outcome = await producer.put(b"x", "k")
        result = await outcome.wait()
        return time.perf_counter() - t0, result.error_code


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=60.0, help="virtual seconds per run")
    args = parser.parse_args()
    started = time.perf_counter()
    out: list[str] = []
    rows: list[dict[str, Any]] = []

    out.append("## Rate limiting against AWS per-shard limits (fake Kinesis, virtual time)\n")
    out.append(f"rate_limit=100, {args.seconds:.0f} virtual seconds per run, first 3 s excluded\n")
    out.append(
        "| shards | aggregation | record bytes | binding limit | achieved share of limit "
        "(mean / worst shard) | PutRecords requests | requests with a throttled entry |"
    )
    out.append("|---:|---|---:|---|---:|---:|---:|")
    for shards in (1, 8):
        for aggregation, size in ((False, 200), (True, 200), (False, 4000)):
            clock = trio.testing.MockClock(autojump_threshold=0)
            r = trio.run(rate_run, shards, aggregation, size, args.seconds, 3.0, clock=clock)
            rows.append({"shards": shards, "aggregation": aggregation, "bytes": size, **r})
            binding = "1 MiB/s" if aggregation or size * 1000 > 1_048_576 else "1000 records/s"
            out.append(
                f"| {shards} | {'on' if aggregation else 'off'} | {size} | {binding} | "
                f"{r['share']:.1%} / {r['min_share']:.1%} | {r['requests']:,} | "
                f"{r['throttled_requests']:,} ({r['throttled_requests'] / r['requests']:.2%}) |"
            )

    out.append("\n## Failing fast (wall clock)\n")
    with LocalKinesis("kinesalite") as emulator:
        enter, put = anyio.run(fail_fast_missing_stream, emulator.endpoint_url)
    denied, code = anyio.run(fail_fast_denied)
    out.append("| case | time to the error | KPL |")
    out.append("|---|---:|---:|")
    out.append(
        f"| missing default stream: `async with Producer(...)` raises "
        f"ResourceNotFoundError (kinesalite) | {enter * 1000:.1f} ms | 30 s of retries |"
    )
    out.append(
        f"| put to another missing stream raises ResourceNotFoundError (kinesalite) | "
        f"{put * 1000:.1f} ms | 30 s of retries |"
    )
    out.append(
        f"| access denied: outcome fails with {code} (fake) | {denied * 1000:.1f} ms | "
        "30 s of retries |"
    )

    fast = {"missing_stream_enter_s": enter, "missing_stream_put_s": put, "denied_s": denied}
    info = machine_info()
    md = report_header(
        "# Reliability: AWS's shard limits and failing fast", info, time.perf_counter() - started
    )
    publish(
        "reliability",
        md + "\n".join(out).split("\n"),
        {"machine": info, "rate_limiting": rows, "failing_fast": fast},
        time.perf_counter() - started,
    )


if __name__ == "__main__":
    main()
