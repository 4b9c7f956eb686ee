"""The local engines side by side: what each serves to this producer on this machine.

Each engine runs in its own process (``LocalKinesis``: the Python engine, kinesalite,
kinesis-local), started once; each round writes to a fresh 64-shard stream from this
process, on trio, every outcome awaited. 64 shards: enough that the producer's own per-shard
rate limits (150 % of AWS's) do not bind, so the engine and the producer's CPU do.
``--count`` records of 200 bytes over 256 keys aggregated (the default: few large requests)
and ``--count // 5`` not aggregated (500 entries a request: the per-entry cost). Reported per
engine and mode (medians over the rounds, engines interleaved within a round): the records/s
the producer got confirmed and the engine process's CPU per 1,000 Kinesis records stored
(from ``/proc/<pid>/stat``). The npm emulators are skipped without Node.js.

    uv run python -m benchmarks engines speed           # --count 100000 --rounds 3
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import anyio

from benchmarks._child import proc_cpu_seconds
from benchmarks._emulator import create_stream, delete_stream
from benchmarks._report import machine_info, markdown_table, publish, report_header
from benchmarks._summary import median_of
from kinesis_trio import Producer, ProducerConfig, StaticCredentials
from kinesis_trio.testing._emulators import ENGINES, LocalKinesis, node_available

SHARDS = 64  # enough that the producer's per-shard rate limits (150 % of AWS's) do not bind
SIZE = 200
KEYS = 256


async def _write(endpoint: str, stream: str, count: int, aggregate: bool) -> dict[str, Any]:
    payload = b"x" * SIZE
    keys = [f"key-{i}" for i in range(KEYS)]
    config = ProducerConfig(aggregation_enabled=aggregate)
    async with Producer(
        stream,
        region_name="us-east-1",
        endpoint_url=endpoint,
        credentials=StaticCredentials("AKIDBENCH", "bench-secret"),
        config=config,
    ) as producer:
        t0 = time.perf_counter()
        outcomes = [await producer.put(payload, keys[i % KEYS]) for i in range(count)]
        results = [await o.wait() for o in outcomes]
        elapsed = time.perf_counter() - t0
    failed = sum(not r.ok for r in results)
    entries = len({(r.shard_id, r.sequence_number) for r in results if r.ok})
    return {"elapsed": elapsed, "failed": failed, "kinesis_records": entries}


def _round(engine: LocalKinesis, count: int, aggregate: bool) -> dict[str, Any]:
    stream = create_stream(engine.endpoint_url, SHARDS, prefix="engines")
    cpu0 = proc_cpu_seconds(engine.pid)
    out = anyio.run(_write, engine.endpoint_url, stream, count, aggregate, backend="trio")
    cpu = proc_cpu_seconds(engine.pid) - cpu0
    delete_stream(engine.endpoint_url, stream)
    elapsed = out["elapsed"]
    return {
        "records_per_s": count / elapsed,
        "kinesis_records": out["kinesis_records"],
        "engine_cpu_s": cpu,
        "engine_cpu_ms_per_1000_entries": cpu / out["kinesis_records"] * 1e6,
        "failed": out["failed"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--only", default=",".join(ENGINES), help="engines, comma-separated")
    args = parser.parse_args()
    kinds = [k for k in args.only.split(",") if k]
    if not node_available():
        skipped = [k for k in kinds if k != "python"]
        kinds = [k for k in kinds if k == "python"]
        if skipped:
            print(f"Node.js not found: skipping {', '.join(skipped)}")
    info = machine_info()
    started = time.perf_counter()
    engines = {kind: LocalKinesis(kind, shard_limit=100) for kind in kinds}
    runs: dict[tuple[str, str], list[dict[str, Any]]] = {}
    try:
        for engine in engines.values():
            engine.start()
        for r in range(args.rounds):
            for kind, engine in engines.items():
                for mode, count in (
                    ("aggregated", args.count),
                    ("not aggregated", args.count // 5),
                ):
                    result = _round(engine, count, mode == "aggregated")
                    runs.setdefault((kind, mode), []).append(result)
                    print(
                        f"round {r + 1} {kind:13} {mode:14} {result['records_per_s']:9,.0f} rec/s"
                        f"  {result['kinesis_records']:7,} Kinesis records"
                        f"  engine CPU {result['engine_cpu_s']:.2f} s  failed {result['failed']}",
                        flush=True,
                    )
    finally:
        for engine in engines.values():
            engine.stop()
    rows = []
    for (kind, mode), rs in runs.items():
        rows.append(
            [
                kind,
                mode,
                f"{median_of([x['records_per_s'] for x in rs]):,.0f}",
                f"{median_of([x['kinesis_records'] for x in rs]):,.0f}",
                f"{median_of([x['engine_cpu_ms_per_1000_entries'] for x in rs]):,.1f}",
                sum(x["failed"] for x in rs),
            ]
        )
    total = time.perf_counter() - started
    md = report_header("# The local engines: records/s served to the producer", info, total)
    md += [
        f"{SHARDS} shards, {SIZE}-byte records over {KEYS} keys, trio, every outcome awaited; "
        f"aggregated: {args.count:,} records, not aggregated: {args.count // 5:,}; medians "
        f"of {args.rounds} rounds, engines interleaved. Engine CPU: the engine process's "
        "CPU milliseconds per 1,000 Kinesis records it stored (an aggregate is one).",
        "",
        markdown_table(
            [
                "engine",
                "mode",
                "records/s",
                "Kinesis records",
                "engine CPU ms / 1,000 Kinesis records",
                "failed",
            ],
            rows,
            "llrrrr",
        ),
        "",
    ]
    data = {"machine": info, "runs": {f"{k}/{m}": v for (k, m), v in runs.items()}}
    publish("local_engines", md, data, total)


if __name__ == "__main__":
    main()
