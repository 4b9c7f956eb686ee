"""Stack cost: where a record's CPU time goes, layer by layer.

Layers are measured as cumulative runs (each adds one layer to the one above), CPU time of
this process per record, best of ``--repeat`` (the machine is shared: the best run is the
least disturbed one):

1. KPL encoding alone (``encode_records``, 200-byte records over 256 keys, 51,200-byte
   aggregates).
2. ``put_nowait``: validation, key hash (cached), shard lookup, aggregate sizing, Outcome.
3. The whole pipeline against an in-process null Kinesis (``httpx.MockTransport``: no
   sockets, no signing cost beyond the client's, a canned response), ending at ``flush()``.
4. The same, awaiting every outcome (``confirmed``).
5. The whole pipeline against kinesalite over loopback HTTP (sockets, h11, SigV4).

Then a cProfile of layer 4 attributes the time to modules (encode, batching, HTTP client,
JSON/base64, outcome resolution, event loop).

Run: ``uv run python -m benchmarks.bench_stack [--backend trio|asyncio] [--records N]``.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import time
from collections.abc import Callable
from typing import Any

import anyio
import httpx

from kinesis_trio import KinesisClient, Producer, ProducerConfig, StaticCredentials
from kinesis_trio._aggregation import encode_records
from kinesis_trio._emulator import LocalKinesis

CREDS = StaticCredentials("AKIDBENCH", "bench-secret")
_MAX = str(2**128 - 1)
_SHARDS = {
    "Shards": [
        {
            "ShardId": "shardId-000000000000",
            "HashKeyRange": {"StartingHashKey": "0", "EndingHashKey": _MAX},
            "SequenceNumberRange": {"StartingSequenceNumber": "1"},
        }
    ]
}
_ENTRY = b'{"ShardId":"shardId-000000000000","SequenceNumber":"49680421028011239695060228497696"}'


def null_kinesis(request: httpx.Request) -> httpx.Response:
    """A one-shard Kinesis that accepts everything (a canned answer per entry)."""
    if request.headers["x-amz-target"].endswith("ListShards"):
        return httpx.Response(200, json=_SHARDS)
    n = request.content.count(b'"Data"')
    body = b'{"FailedRecordCount":0,"Records":[' + b",".join([_ENTRY] * n) + b"]}"
    return httpx.Response(200, content=body)


def config() -> ProducerConfig:
    # The emulator and the null backend have no shard limits: lift the rate limiter so the
    # figures are the producer's own cost, not a sleep.
    return ProducerConfig(record_max_buffered_time=0.05, rate_limit=1e6)


def workload(n: int) -> tuple[bytes, list[str]]:
    return os.urandom(200), [f"key-{i}" for i in range(256)]


def layer_encode(n: int) -> float:
    payload, keys = workload(n)
    per = 225  # records per 51,200-byte aggregate at 200 bytes
    datas = [payload] * per
    pks = [keys[i % 256] for i in range(per)]
    t0 = time.process_time()
    for _ in range(n // per):
        encode_records(datas, pks)
    return (time.process_time() - t0) / (n // per * per)


async def layer_put_nowait(n: int) -> float:
    payload, keys = workload(n)
    cfg = config().replace(
        record_max_buffered_time=1000.0,
        max_outstanding_records=n + 1,
        max_outstanding_bytes=n * 300,
        shard_queue_size=n,
    )
    async with Producer(
        "p",
        region_name="us-east-1",
        endpoint_url="http://null",
        credentials=CREDS,
        config=cfg,
        transport=httpx.MockTransport(null_kinesis),
    ) as producer:
        put = producer.put_nowait
        t0 = time.process_time()
        for i in range(n):
            put(payload, keys[i & 255])
        cpu = time.process_time() - t0
        await producer.flush()
    return cpu / n


async def layer_pipeline(n: int, endpoint: str | None, confirmed: bool) -> float:
    payload, keys = workload(n)
    transport = httpx.MockTransport(null_kinesis) if endpoint is None else None
    async with Producer(
        "p",
        region_name="us-east-1",
        endpoint_url=endpoint or "http://null",
        credentials=CREDS,
        config=config(),
        transport=transport,
    ) as producer:
        t0 = time.process_time()
        outcomes = []
        put = producer.put
        for i in range(n):
            outcomes.append(await put(payload, keys[i & 255]))
        if confirmed:
            for outcome in outcomes:
                if not (await outcome.wait()).ok:
                    raise RuntimeError("a record failed")
        else:
            await producer.flush()
        return (time.process_time() - t0) / n


def best(repeat: int, fn: Callable[[], float]) -> float:
    return min(fn() for _ in range(repeat))


async def create_stream(endpoint: str) -> None:
    async with KinesisClient(
        region_name="us-east-1", endpoint_url=endpoint, credentials=CREDS
    ) as client:
        await client.create_stream("p", 1)
        await client.wait_for_stream("p")


LAYERS = [
    ("encode", "KPL aggregation: protobuf wire format + MD5", ("_aggregation",)),
    (
        "batching",
        "put path, engine (accumulator, requests, responses, ledger), shell tasks, limiter",
        (
            "_producer",
            "_engine",
            "_accumulator",
            "_requests",
            "_responses",
            "_ledger",
            "_state",
            "_shell",
            "_measure",
            "_limiter",
            "_shards",
        ),
    ),
    ("outcome", "Outcome / RecordResult objects", ("_outcome",)),
    (
        "http",
        "httpx, httpcore, h11, SigV4 signing (botocore)",
        ("httpx", "httpcore", "h11", "botocore", "_client", "_credentials"),
    ),
    ("json", "JSON and base64", ("json", "base64", "binascii")),
    (
        "event loop",
        "trio / asyncio / anyio scheduling",
        ("trio", "asyncio", "anyio", "sniffio", "outcome"),
    ),
]


def profile_layers(n: int, backend: str) -> list[tuple[str, str, float]]:
    profiler = cProfile.Profile()
    profiler.enable()
    anyio.run(layer_pipeline, n, None, True, backend=backend)
    profiler.disable()
    stats: Any = getattr(pstats.Stats(profiler), "stats")  # noqa: B009 - untyped attribute
    totals: dict[str, float] = {}
    for (filename, _line, name), (_cc, _nc, tottime, _ct, _callers) in stats.items():
        path = filename.replace("\\", "/")
        label = "other"
        for layer, _desc, needles in LAYERS:
            if any(
                f"/{needle}/" in path
                or path.endswith(f"/{needle}.py")
                or (
                    needle in ("json", "base64", "binascii")
                    and name.startswith(
                        ("<built-in method binascii", "<method 'decode' of 'bytes'")
                    )
                )
                or (path == "~" and needle == "binascii" and "b2a_base64" in name)
                for needle in needles
            ):
                label = layer
                break
        if path == "~" and "md5" in name:
            label = "encode"
        totals[label] = totals.get(label, 0.0) + tottime
    whole = sum(totals.values())
    descs = {layer: desc for layer, desc, _ in LAYERS}
    descs["other"] = "the rest (benchmark loop, builtins not attributed)"
    return sorted(((k, descs[k], v / whole) for k, v in totals.items()), key=lambda r: -r[2])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backend", choices=["trio", "asyncio"], default="trio")
    parser.add_argument("--records", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    n, backend, repeat = args.records, args.backend, args.repeat

    rows: list[tuple[str, float]] = []
    rows.append(("1. KPL encoding only", best(repeat, lambda: layer_encode(n))))
    rows.append(
        (
            "2. + put_nowait (validate, hash, route, size, Outcome)",
            best(repeat, lambda: anyio.run(layer_put_nowait, n, backend=backend)),
        )
    )
    rows.append(
        (
            "3. + whole pipeline, null in-process Kinesis, until flush()",
            best(repeat, lambda: anyio.run(layer_pipeline, n, None, False, backend=backend)),
        )
    )
    rows.append(
        (
            "4. + every outcome awaited (confirmed)",
            best(repeat, lambda: anyio.run(layer_pipeline, n, None, True, backend=backend)),
        )
    )
    with LocalKinesis("kinesalite") as emulator:
        anyio.run(create_stream, emulator.endpoint_url)
        rows.append(
            (
                "5. + real HTTP to kinesalite over loopback (confirmed)",
                best(
                    repeat,
                    lambda: anyio.run(
                        layer_pipeline, n, emulator.endpoint_url, True, backend=backend
                    ),
                ),
            )
        )

    print(f"## Stack cost ({backend}, {n:,} records of 200 bytes, 256 keys, aggregation on)\n")
    print("| layer | CPU µs / record | records/s of CPU |")
    print("|---|---:|---:|")
    for name, seconds in rows:
        print(f"| {name} | {seconds * 1e6:.2f} | {1 / seconds:,.0f} |")
    print(f"\n## Where layer 4's time goes (cProfile, {backend})\n")
    print("| part | what | share of CPU |")
    print("|---|---|---:|")
    for name, desc, share in profile_layers(n, backend):
        print(f"| {name} | {desc} | {share:.0%} |")
    print("\n(cProfile inflates per-call costs: read the shares, not absolute times.)")


if __name__ == "__main__":
    main()
