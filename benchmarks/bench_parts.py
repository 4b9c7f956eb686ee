"""Where a confirmed record's CPU goes in a burst: the producer's parts, timed one by one.

The burst figure of ``bench_steady`` (every outcome awaited, 32 shards) is one number; this
splits it. The sans-IO engine is driven directly, as the shell drives it but with no I/O:
accept every record (full aggregates are sealed and encoded as they fill), seal the rest,
build each request's JSON body, parse a made-up answer and apply it (every record resolved),
then build each record's result. Each part runs with the collector as it is and again with
it disabled: the difference is the collector's share. Then, on each backend, the async
layers around the engine: ``await put()`` and ``put_nowait()`` over ``Engine.accept`` (on a
producer on the in-memory fake, its accept a stub), ``await outcome.wait()`` over
``outcome.result()``. Floors for scale: a bare coroutine awaited, a bare 13-slot object made.

    uv run python -m benchmarks.bench_parts --rounds 5
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import time
from typing import Any

import anyio

SIZE = 200
KEYS = 256


class _Shell:
    """A shell that does nothing: the engine's requests are driven by the benchmark."""

    def opened(self, shard: Any) -> None:
        pass

    def sealed(self, shard: Any, batch: Any) -> None:
        self.batches.append(batch)
        shard.queued += 1

    def new_shard(self, stream: Any, shard: Any, limiter: Any = None) -> Any:
        from kinesis_trio._limiter import ShardLimiter
        from kinesis_trio._state import ShardBuffer

        return ShardBuffer(shard.shard_id, shard.start, shard.end, limiter or ShardLimiter(1e9, 0))

    def retired(self, shard: Any) -> None:
        pass

    def retry_at(self, stream: Any, due: float) -> None:
        pass

    def refresh(self, stream: Any) -> None:
        pass

    def refresh_credentials(self) -> None:
        pass

    def send_apart(self, stream: Any, krecs: Any) -> None:
        pass

    def progress(self) -> None:
        pass

    def __init__(self) -> None:
        self.batches: list[Any] = []


def engine_parts(count: int, shards: int, collector: bool) -> dict[str, float]:
    """CPU seconds of each part of the engine's pipeline for ``count`` records."""
    from kinesis_trio._config import ProducerConfig
    from kinesis_trio._engine import Engine, metrics_for
    from kinesis_trio._requests import body, chunks
    from kinesis_trio._shards import Shard, ShardMap
    from kinesis_trio._state import StreamState
    from kinesis_trio._streams import StreamFacts

    cfg = ProducerConfig(max_outstanding_records=count + 1, max_outstanding_bytes=2**40)
    shell = _Shell()
    eng = Engine(cfg, shell, metrics_for(cfg), refreshable=True)
    step = 2**128 // shards
    shard_list = [
        Shard(f"shardId-{i:012d}", i * step, 2**128 - 1 if i == shards - 1 else (i + 1) * step - 1)
        for i in range(shards)
    ]
    shard_map = ShardMap(shard_list)
    stream = StreamState("bench", shard_map)
    eng.maps.apply_facts(stream, StreamFacts("bench"), shard_map, 0.0)
    eng.streams["bench"] = stream
    payload = b"x" * SIZE
    keys = [f"key-{i}" for i in range(KEYS)]
    accept = eng.accept
    out: dict[str, float] = {}
    gc.collect()
    if not collector:
        gc.disable()
    try:
        t = time.process_time()
        outcomes = [accept(stream, payload, keys[i % KEYS], None, 0.0) for i in range(count)]
        out["accept (seal and encode full aggregates)"] = time.process_time() - t

        t = time.process_time()
        krecs = [k for batch in shell.batches for k in batch]
        for shard in stream.shards:
            krecs += eng.acc.seal(shard)
        out["seal and encode the rest"] = time.process_time() - t

        t = time.process_time()
        requests = [
            (chunk, body(stream.json_head, chunk))
            for chunk in chunks(eng.request(stream, krecs, 0.0), 500, 5 * 2**20)
        ]
        out["request bodies (base64, JSON)"] = time.process_time() - t

        answers = [
            json.dumps(
                {
                    "FailedRecordCount": 0,
                    "Records": [
                        {"ShardId": k.shard.shard_id, "SequenceNumber": f"{49_000_000 + i}"}
                        for i, k in enumerate(chunk)
                    ],
                }
            ).encode()
            for chunk, _ in requests
        ]
        t = time.process_time()
        for (chunk, _), raw in zip(requests, answers, strict=True):
            eng.on_answer(stream, chunk, json.loads(raw), 0.0, 0.01)
        out["answers (parse, resolve, metrics)"] = time.process_time() - t

        t = time.process_time()
        # each result dropped once looked at, as an application's awaiting loop does
        resolved_ok = all(o.result().ok for o in outcomes)
        out["results (RecordResult of each)"] = time.process_time() - t
        if not resolved_ok:
            raise RuntimeError("a record was not resolved ok")
    finally:
        gc.enable()
    return out


async def async_layers(count: int) -> dict[str, float]:
    """CPU seconds (collector disabled) of the async layers around the engine."""
    from kinesis_trio import Producer, StaticCredentials
    from kinesis_trio._outcome import Outcome
    from kinesis_trio.testing import FakeKinesis

    fake = FakeKinesis()
    fake.create_stream("bench", shard_count=32)
    payload = b"x" * SIZE
    keys = [f"key-{i}" for i in range(KEYS)]
    out: dict[str, float] = {}
    done = Outcome(payload, "k", None, 0, SIZE, 0.0, "bench", 0)
    done._resolve((True, "shardId-0", "1", True, 0.0, None, None, None, 0.0, 0.0, 0.0))
    async with Producer(
        "bench",
        region_name="us-east-1",
        endpoint_url="http://fake",
        credentials=StaticCredentials("k", "s"),
        transport=fake.transport(),
    ) as producer:
        engine = producer._engine
        assert engine is not None
        real_accept = engine.accept

        def accept(*args: Any) -> Outcome:  # the engine's part is measured above
            return done

        engine.accept = accept  # type: ignore[method-assign,assignment]
        stream = engine.streams["bench"]
        now = producer._now
        gc.collect()
        gc.disable()
        try:
            t = time.process_time()
            for i in range(count):
                accept(stream, payload, keys[i % KEYS], None, now())
            stub_s = time.process_time() - t
            t = time.process_time()
            for i in range(count):
                producer.put_nowait(payload, keys[i % KEYS])
            out["put_nowait() over Engine.accept"] = time.process_time() - t - stub_s
            t = time.process_time()
            for i in range(count):
                await producer.put(payload, keys[i % KEYS])
            out["await put() over Engine.accept"] = time.process_time() - t - stub_s
            t = time.process_time()
            for _ in range(count):
                done.result()
            result_s = time.process_time() - t
            t = time.process_time()
            for _ in range(count):
                await done.wait()
            out["await wait() over result()"] = time.process_time() - t - result_s

            async def bare() -> None:
                return None

            t = time.process_time()
            for _ in range(count):
                await bare()
            out["floor: a bare coroutine awaited"] = time.process_time() - t
            t = time.process_time()
            for _ in range(count):
                Outcome(payload, "k", None, 0, SIZE, 0.0, "bench", 0)
            out["floor: an Outcome made"] = time.process_time() - t
        finally:
            gc.enable()
            engine.accept = real_accept  # type: ignore[method-assign]
    return out


def _median_parts(runs: list[dict[str, float]], count: int) -> dict[str, float]:
    return {k: statistics.median(r[k] for r in runs) / count * 1e6 for k in runs[0]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=100_000)
    parser.add_argument("--shards", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--name", default="parts", help="results/<name>.{md,json}")
    args = parser.parse_args()

    from benchmarks.common import machine_info, markdown_table, publish, report_header

    info = machine_info()
    started = time.perf_counter()
    on: list[dict[str, float]] = []
    off: list[dict[str, float]] = []
    layers: dict[str, list[dict[str, float]]] = {"trio": [], "asyncio": []}
    for _ in range(args.rounds):
        on.append(engine_parts(args.count, args.shards, collector=True))
        off.append(engine_parts(args.count, args.shards, collector=False))
        for backend in layers:
            layers[backend].append(anyio.run(async_layers, args.count, backend=backend))
        print(f"round {len(on)}: done", file=sys.stderr, flush=True)
    with_gc, without = _median_parts(on, args.count), _median_parts(off, args.count)
    rows: list[list[object]] = [
        [part, f"{with_gc[part]:.2f}", f"{without[part]:.2f}"] for part in with_gc
    ]
    total_on, total_off = sum(with_gc.values()), sum(without.values())
    rows.append(["**engine, all parts**", f"**{total_on:.2f}**", f"{total_off:.2f}"])
    per_backend = {b: _median_parts(runs, args.count) for b, runs in layers.items()}
    layer_rows: list[list[object]] = [
        [part, *(f"{per_backend[b][part]:.2f}" for b in layers)] for part in per_backend["trio"]
    ]
    total = time.perf_counter() - started
    md = report_header("# Where a confirmed record's CPU goes (a burst, no I/O)", info, total)
    md += [
        f"{args.count:,} records of {SIZE} B, {KEYS} keys, {args.shards} shards, default "
        f"settings; µs of CPU per record, medians of {args.rounds} rounds.",
        "",
        "The engine's parts, as the shell drives them (no event loop):",
        "",
        markdown_table(["part", "µs/record", "collector disabled"], rows, "lrr"),
        "",
        "The async layers around the engine (collector disabled), and floors for scale:",
        "",
        markdown_table(["layer", *layers], layer_rows, "lrr"),
        "",
    ]
    publish(
        args.name,
        md,
        {"machine": info, "engine": with_gc, "engine_no_gc": without, "layers": per_backend},
        total,
    )


if __name__ == "__main__":
    main()
