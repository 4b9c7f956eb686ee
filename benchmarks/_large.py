"""The 2026 service: large records on kinesis-local, and an AUTO stream on the fake.

Large records: 1, 4 and 10 MiB records (data + partition key at the size) written to a
fresh kinesis-local stream raised to 10240 KiB (``UpdateMaxRecordSize``), by kinesis_trio
(trio and asyncio, every outcome awaited) and by boto3 ``put_records`` (requests of up to
10 MiB, as many records as fit), interleaved in one process, each variant on its own
stream. Reported: records/s, MB/s and the process's CPU seconds per MB written (boto3's own
cost, or the producer's: everything in the process is the writer's). kinesis-local is slow
on large payloads (it dominates the time), so the CPU per MB is the figure to compare.

AUTO stream: 100,000 records of 200 bytes to the in-memory fake (``FakeKinesis``, no rate
limits): to an on-demand stream with ``RecordDistributionStrategy`` AUTO (no partition keys,
no aggregation, one service-placed buffer) and to the same stream with partition keys
(USER_PARTITION_KEY, aggregated), records/s, trio and asyncio.

    uv run python -m benchmarks sizes large            # --mib 40 --rounds 2 --only large,auto
"""

from __future__ import annotations

import argparse
import json
import time
import uuid
from pathlib import Path
from typing import Any

import anyio

from benchmarks._command import command_line
from benchmarks._report import machine_info, record_index

RESULTS = Path(__file__).parent / "results"
MIB = 1024 * 1024
REGION = "us-east-1"


def _boto3(endpoint: str) -> Any:
    import boto3

    return boto3.client(
        "kinesis",
        endpoint_url=endpoint,
        region_name=REGION,
        aws_access_key_id="AKIDBENCH",
        aws_secret_access_key="bench-secret",
    )


def _stream(client: Any, shards: int) -> tuple[str, str]:
    name = f"b26-{uuid.uuid4().hex[:10]}"
    client.create_stream(StreamName=name, ShardCount=shards)
    client.get_waiter("stream_exists").wait(StreamName=name, WaiterConfig={"Delay": 0.2})
    arn = client.describe_stream_summary(StreamName=name)["StreamDescriptionSummary"]["StreamARN"]
    client.update_max_record_size(StreamARN=arn, MaxRecordSizeInKiB=10240)
    for _ in range(100):
        summary = client.describe_stream_summary(StreamName=name)["StreamDescriptionSummary"]
        if summary.get("MaxRecordSizeInKiB") == 10240 and summary["StreamStatus"] == "ACTIVE":
            break
        time.sleep(0.1)
    return name, arn


def _records(size: int, count: int) -> list[tuple[bytes, str]]:
    out = []
    for i in range(count):
        key = f"key-{i:04d}"
        out.append((bytes([65 + i % 26]) * (size - len(key)), key))
    return out


def run_boto3(endpoint: str, name: str, records: list[tuple[bytes, str]]) -> float:
    client = _boto3(endpoint)
    batches: list[list[dict[str, Any]]] = [[]]
    size = 0
    for data, key in records:
        if batches[-1] and (size + len(data) + len(key) > 10 * MIB or len(batches[-1]) >= 500):
            batches.append([])
            size = 0
        batches[-1].append({"Data": data, "PartitionKey": key})
        size += len(data) + len(key)
    start = time.perf_counter()
    for batch in batches:
        response = client.put_records(StreamName=name, Records=batch)
        if response.get("FailedRecordCount"):
            raise RuntimeError(f"boto3: {response['FailedRecordCount']} records failed")
    return time.perf_counter() - start


def run_trio_producer(
    endpoint: str, arn: str, records: list[tuple[bytes, str]], backend: str
) -> float:
    from kinesis_trio import Producer, ProducerConfig, StaticCredentials

    async def main() -> float:
        config = ProducerConfig(request_timeout=120.0, record_ttl=600.0, close_timeout=600.0)
        async with Producer(
            stream_arn=arn,
            region_name=REGION,
            endpoint_url=endpoint,
            credentials=StaticCredentials("AKIDBENCH", "bench-secret"),
            config=config,
        ) as producer:
            start = time.perf_counter()
            outcomes = [await producer.put(data, key) for data, key in records]
            results = [await o.wait() for o in outcomes]
            elapsed = time.perf_counter() - start
        failed = [r.error_code for r in results if not r.ok]
        if failed:
            raise RuntimeError(f"kinesis_trio: {len(failed)} failed: {failed[:3]}")
        return elapsed

    return anyio.run(main, backend=backend)


def large_rows(mib_per_size: int, rounds: int, shards: int) -> list[dict[str, Any]]:
    from kinesis_trio.testing._emulators import LocalKinesis

    rows: list[dict[str, Any]] = []
    with LocalKinesis("kinesis-local") as emu:
        endpoint = emu.endpoint_url
        admin = _boto3(endpoint)
        for _round in range(rounds):
            for size_mib in (1, 4, 10):
                size = size_mib * MIB
                count = max(2, mib_per_size // size_mib)
                records = _records(size, count)
                for tool in ("kinesis_trio trio", "kinesis_trio asyncio", "boto3 put_records"):
                    name, arn = _stream(admin, shards)
                    cpu0 = time.process_time()
                    if tool == "boto3 put_records":
                        elapsed = run_boto3(endpoint, name, records)
                    else:
                        elapsed = run_trio_producer(endpoint, arn, records, tool.split()[1])
                    cpu = time.process_time() - cpu0
                    mb = count * size / 1e6
                    row = {
                        "size_mib": size_mib,
                        "tool": tool,
                        "records": count,
                        "elapsed_s": round(elapsed, 3),
                        "records_per_s": round(count / elapsed, 2),
                        "mb_per_s": round(mb / elapsed, 2),
                        "cpu_ms_per_mb": round(1000 * cpu / mb, 2),
                    }
                    rows.append(row)
                    print(json.dumps(row), flush=True)
                    admin.delete_stream(StreamName=name, EnforceConsumerDeletion=True)
    return rows


def auto_rows(count: int, rounds: int) -> list[dict[str, Any]]:
    from kinesis_trio import Producer, StaticCredentials
    from kinesis_trio.testing import FakeKinesis

    async def one(strategy: str) -> float:
        fake = FakeKinesis()
        fake.create_stream("s", 8, on_demand=True, record_distribution_strategy=strategy)
        keyed = strategy != "AUTO"
        data = b"x" * 200
        async with Producer(
            "s",
            region_name=REGION,
            endpoint_url="http://fake.local",
            credentials=StaticCredentials("k", "s"),
            transport=fake.transport(),
        ) as producer:
            start = time.perf_counter()
            outcomes = [
                await producer.put(data, f"key-{i % 256}" if keyed else None) for i in range(count)
            ]
            for o in outcomes:
                if not (await o.wait()).ok:
                    raise RuntimeError("a record failed")
            return time.perf_counter() - start

    rows = []
    for _round in range(rounds):
        for backend in ("trio", "asyncio"):
            for strategy in ("AUTO", "USER_PARTITION_KEY"):
                elapsed = anyio.run(one, strategy, backend=backend)
                row = {
                    "backend": backend,
                    "stream": strategy,
                    "records": count,
                    "records_per_s": round(count / elapsed, 1),
                }
                rows.append(row)
                print(json.dumps(row), flush=True)
    return rows


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def write(large: list[dict[str, Any]], auto: list[dict[str, Any]], command: str) -> None:
    info = machine_info()
    lines = [
        "# The 2026 service: large records and AUTO streams",
        "",
        f"Command: `{command}`. Machine: {info.get('cpu_model', '')}, "
        f"{info.get('cores', '')} cores; commit {info.get('git_commit', '')}; "
        f"Python {info.get('python', '')}.",
        "",
    ]
    if large:
        lines += [
            "## Large records on kinesis-local (median of rounds)",
            "",
            "| record | writer | records/s | MB/s | CPU ms per MB |",
            "|---|---|---:|---:|---:|",
        ]
        keys = sorted({(r["size_mib"], r["tool"]) for r in large})
        for size, tool in keys:
            group = [r for r in large if (r["size_mib"], r["tool"]) == (size, tool)]
            lines.append(
                f"| {size} MiB | {tool} | {_median([r['records_per_s'] for r in group]):.2f} | "
                f"{_median([r['mb_per_s'] for r in group]):.2f} | "
                f"{_median([r['cpu_ms_per_mb'] for r in group]):.2f} |"
            )
        lines.append("")
    if auto:
        lines += [
            "## An AUTO stream on the fake (8 shards, 200-byte records; median of rounds)",
            "",
            "| backend | stream | records/s |",
            "|---|---|---:|",
        ]
        for backend in ("trio", "asyncio"):
            for strategy in ("AUTO", "USER_PARTITION_KEY"):
                rates = [
                    float(r["records_per_s"])
                    for r in auto
                    if (r["backend"], r["stream"]) == (backend, strategy)
                ]
                if rates:
                    lines.append(f"| {backend} | {strategy} | {_median(rates):,.0f} |")
        lines.append("")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "large_records.md").write_text("\n".join(lines))
    (RESULTS / "large_records.json").write_text(
        json.dumps({"machine": info, "command": command, "large": large, "auto": auto}, indent=1)
    )
    record_index([RESULTS / "large_records.md", RESULTS / "large_records.json"], info)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mib", type=int, default=40, help="MiB written per record size")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--shards", type=int, default=16)
    parser.add_argument("--count", type=int, default=100_000, help="records in the AUTO run")
    parser.add_argument("--only", default="large,auto")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    only = set(args.only.split(","))
    auto = auto_rows(args.count, args.rounds) if "auto" in only else []
    large = large_rows(args.mib, args.rounds, args.shards) if "large" in only else []
    if not args.no_write:
        write(large, auto, command_line())


if __name__ == "__main__":
    main()
