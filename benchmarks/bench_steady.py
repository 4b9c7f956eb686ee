"""The producer's own CPU per record at a steady rate, against its burst figure.

Each measurement runs in a fresh process (``--child``). An arrival loop in 1 ms ticks puts
every record that is due (record *i* is due at ``t0 + i/rate``); one task awaits the outcomes
in order and takes each record's latency from its scheduled arrival to its resolution (no
coordinated omission). That task takes what is already in its channel without a pass through
the scheduler per record (``--awaiter drain``; ``each``: one ``await receive()`` per record,
the harness of the figures before, which alone used about 40 % of a core at 20,000/s).
The same loop runs for the same time with a null producer (``put``
returns an outcome that is already resolved); the difference in process CPU divided by the
records is the producer's own cost per record. The burst figure is the same harness as fast
as ``put`` allows (``--burst`` records), minus the null producer's burst. The idle figure:
an open producer and no records, for the same time, minus the null loop.

200-byte records over 256 keys to a fresh stream of each shard count on one local engine
(kinesalite with Node.js, else the Python engine; ``--engine``), default settings.

    uv run python -m benchmarks.bench_steady      # --rates 100,1000,5000,20000 --shards 8,32
"""

from __future__ import annotations

import argparse
import gc
import json
import math
import sys
import time
from collections import deque
from dataclasses import asdict, dataclass
from typing import Any

import anyio

SIZE = 200
KEYS = 256
TICK = 0.001
CREDENTIALS = ("AKIDBENCH", "bench-secret")


@dataclass
class Job:
    mode: str  # "producer" or "null"
    backend: str
    rate: float  # 0: burst of `count` records; -1: idle
    duration: float
    count: int
    endpoint: str
    stream: str
    #: "loop": one task awaits the outcomes in order; "handler": a task per record puts it
    #: and awaits its own outcome (a web handler's shape)
    shape: str = "loop"
    #: "default": the interpreter's collector as it is; "freeze": the application calls
    #: ``gc.collect(); gc.freeze()`` once its producer has started (objects made at startup
    #: are then never walked again by a full collection)
    gc: str = "default"
    #: the awaiter: "each" receives every (scheduled, outcome) pair with ``await receive()``,
    #: a pass through the scheduler per record; "drain" takes what is already there with
    #: ``receive_nowait`` and awaits only when the channel is empty (the figures before
    #: issue 25's last stop were measured with "each"); "poll": no awaiter task, the arrival
    #: loop takes resolved outcomes each tick (``_drive_polled``)
    awaiter: str = "drain"
    #: the arrival loop's tick in seconds (bench_virtual: one record's interval at low rates)
    tick: float = TICK


class _Resolved:
    """The null producer's outcome: already resolved."""

    async def wait(self) -> None:
        return None

    def done(self) -> bool:
        return True


class _NullProducer:
    _done = _Resolved()

    async def put(self, data: bytes, partition_key: str) -> _Resolved:
        return self._done


async def _next(recv: Any) -> tuple[float, Any]:
    try:
        item: tuple[float, Any] = await recv.receive()
    except anyio.EndOfStream:
        return (0.0, None)
    return item


async def _drive(job: Job, producer: Any) -> dict[str, Any]:
    if job.awaiter == "poll":
        return await _drive_polled(job, producer)
    payload = b"x" * SIZE
    keys = [f"key-{i}" for i in range(KEYS)]
    send, recv = anyio.create_memory_object_stream[tuple[float, Any]](math.inf)
    latencies: list[float] = []
    now = anyio.current_time

    async def awaiter() -> None:
        async with recv:
            while True:
                if job.awaiter == "drain":
                    # what is already in the channel is taken without a pass through the
                    # scheduler per record (``receive`` checkpoints even when it need not
                    # wait); awaiting a resolved outcome does not checkpoint either
                    try:
                        scheduled, outcome = recv.receive_nowait()
                    except anyio.WouldBlock:
                        scheduled, outcome = await _next(recv)
                    except anyio.EndOfStream:
                        return
                else:
                    scheduled, outcome = await _next(recv)
                if outcome is None:
                    return
                await outcome.wait()
                latencies.append(now() - scheduled)

    async def handler(tg: Any, index: int, scheduled: float) -> None:
        outcome = await producer.put(payload, keys[index % KEYS])
        await outcome.wait()
        latencies.append(now() - scheduled)

    pauses = _GcPauses.start(job)
    cpu0 = time.process_time()
    t0 = now()
    i = 0
    async with anyio.create_task_group() as tg:
        tg.start_soon(awaiter)
        async with send:
            if job.rate > 0:
                end = job.duration
                while True:
                    elapsed = now() - t0
                    if elapsed >= end:
                        break
                    due = min(math.floor(elapsed * job.rate) + 1, math.ceil(end * job.rate))
                    while i < due:
                        scheduled = t0 + i / job.rate
                        if job.shape == "handler":
                            tg.start_soon(handler, tg, i, scheduled)
                        else:
                            outcome = await producer.put(payload, keys[i % KEYS])
                            send.send_nowait((scheduled, outcome))
                        i += 1
                    await anyio.sleep(job.tick)
            elif job.rate == 0:
                for i in range(job.count):
                    send.send_nowait((now(), await producer.put(payload, keys[i % KEYS])))
                i = job.count
            else:
                await anyio.sleep(job.duration)
    return _summary(i, time.process_time() - cpu0, now() - t0, latencies, pauses)


async def _drive_polled(job: Job, producer: Any) -> dict[str, Any]:
    """``--awaiter poll``: one task, no awaiter task. Each tick puts the records due, then
    takes the resolved outcomes at the head of the line (``Outcome.done()``); once the
    schedule ends, it awaits the rest in order. The null producer's run then wakes exactly
    as often as the producer's (an awaiter task woken per record by the null producer, but
    once per resolved batch by the real one, made the null run the costlier at low rates).
    Latency is taken when the tick sees the outcome resolved: up to one tick late."""
    payload = b"x" * SIZE
    keys = [f"key-{i}" for i in range(KEYS)]
    pending: deque[tuple[float, Any]] = deque()
    latencies: list[float] = []
    now = anyio.current_time
    pauses = _GcPauses.start(job)
    cpu0 = time.process_time()
    t0 = now()
    i = 0
    if job.rate > 0:
        end = job.duration
        last = math.ceil(end * job.rate)
        while True:
            elapsed = now() - t0
            if elapsed >= end:
                break
            due = min(math.floor(elapsed * job.rate) + 1, last)
            while i < due:
                pending.append((t0 + i / job.rate, await producer.put(payload, keys[i % KEYS])))
                i += 1
            while pending and pending[0][1].done():
                latencies.append(now() - pending.popleft()[0])
            await anyio.sleep(job.tick)
    elif job.rate == 0:
        for i in range(job.count):
            pending.append((now(), await producer.put(payload, keys[i % KEYS])))
        i = job.count
    else:
        await anyio.sleep(job.duration)
    while pending:
        scheduled, outcome = pending.popleft()
        await outcome.wait()
        latencies.append(now() - scheduled)
    return _summary(i, time.process_time() - cpu0, now() - t0, latencies, pauses)


def _summary(
    records: int, cpu: float, wall: float, latencies: list[float], pauses: _GcPauses
) -> dict[str, Any]:
    """A run's figures: its CPU and wall time, latency quantiles, the collector's time."""
    gc.callbacks.remove(pauses)
    latencies.sort()

    def q(p: float) -> float:
        return latencies[min(len(latencies) - 1, int(p * len(latencies)))] if latencies else 0.0

    return {
        "records": records,
        "cpu_s": cpu,
        "wall_s": wall,
        "p50_s": q(0.5),
        "p99_s": q(0.99),
        "gc_s": pauses.total,
        "gc_full": pauses.full,
        "gc_full_max_s": pauses.full_max,
    }


class _GcPauses:
    """Time spent in the garbage collector (a ``gc.callbacks`` entry), and its full passes."""

    @classmethod
    def start(cls, job: Job) -> _GcPauses:
        """Freeze the heap if the job asks (``gc="freeze"``), then start counting."""
        if job.gc == "freeze":
            gc.collect()
            gc.freeze()
        pauses = cls()
        gc.callbacks.append(pauses)
        return pauses

    def __init__(self) -> None:
        self.total = 0.0
        self.full = 0
        self.full_max = 0.0
        self._start = 0.0

    def __call__(self, phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            self._start = time.perf_counter()
            return
        took = time.perf_counter() - self._start
        self.total += took
        if info["generation"] == 2:
            self.full += 1
            self.full_max = max(self.full_max, took)


async def _child(job: Job) -> dict[str, Any]:
    if job.mode == "null":
        return await _drive(job, _NullProducer())
    from kinesis_trio import Producer, StaticCredentials

    async with Producer(
        job.stream,
        region_name="us-east-1",
        endpoint_url=job.endpoint,
        credentials=StaticCredentials(*CREDENTIALS),
    ) as producer:
        client = producer.client
        calls = {"PutRecords": 0}
        original = client.call_raw

        async def counting(operation: str, body: bytes, **options: Any) -> Any:
            calls[operation] = calls.get(operation, 0) + 1
            return await original(operation, body, **options)

        client.call_raw = counting  # type: ignore[method-assign]
        result = await _drive(job, producer)
        result["requests"] = calls["PutRecords"]
    return result


def _run_child(job: Job) -> dict[str, Any]:
    out: dict[str, Any] = run_module(
        "benchmarks.bench_steady", json.dumps(asdict(job)), timeout=job.duration * 4 + 120
    )
    return out


def run_module(module: str, child: str, timeout: float) -> Any:
    """Run ``python -m <module> --child <child>`` in a fresh process; its last JSON line."""
    import subprocess

    proc = subprocess.run(
        [sys.executable, "-m", module, "--child", child],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    line = next((ln for ln in reversed(proc.stdout.splitlines()) if ln.startswith("{")), None)
    if proc.returncode or line is None:
        raise RuntimeError(f"child failed ({proc.returncode}): {proc.stderr[-2000:]}")
    return json.loads(line)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--rates", default="100,1000,5000,20000")
    parser.add_argument("--shards", default="8,32")
    parser.add_argument("--backends", default="trio,asyncio")
    parser.add_argument("--duration", type=float, default=5.0)
    parser.add_argument("--burst", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--engine", choices=["kinesalite", "kinesis-local", "python"])
    parser.add_argument("--name", default="steady", help="results/<name>.{md,json}")
    parser.add_argument("--awaiter", choices=["drain", "each", "poll"], default="drain")
    parser.add_argument(
        "--tick", type=float, default=TICK, help="the arrival loop's shortest tick (s)"
    )
    args = parser.parse_args()
    if args.child:
        job = Job(**json.loads(args.child))
        print(json.dumps(anyio.run(_child, job, backend=job.backend)), flush=True)
        return

    from benchmarks.common import (
        create_stream,
        delete_stream,
        machine_info,
        markdown_table,
        median_of,
        publish,
        report_header,
    )
    from kinesis_trio._emulator import LocalKinesis, default_engine

    info = machine_info()
    started = time.perf_counter()
    rates = [float(r) for r in args.rates.split(",") if r]
    shard_counts = [int(s) for s in args.shards.split(",") if s]
    backends = [b for b in args.backends.split(",") if b]
    kind = args.engine or default_engine()
    results: dict[str, list[dict[str, Any]]] = {}

    def measure(label: str, job: Job) -> None:
        out = _run_child(job)
        results.setdefault(label, []).append(out)
        print(
            f"{label:40} {out['records']:8,} records  cpu {out['cpu_s']:.3f} s"
            f"  p50 {out['p50_s'] * 1e3:7.1f} ms  p99 {out['p99_s'] * 1e3:7.1f} ms"
            f"  requests {out.get('requests', '-')}",
            flush=True,
        )

    with LocalKinesis(kind, shard_limit=200) as engine:
        url = engine.endpoint_url
        for _ in range(args.rounds):
            for shards in shard_counts:
                for backend in backends:
                    for mode in ("null", "producer"):
                        plans = [(f"{r:g}/s", r, args.duration, 0) for r in rates]
                        plans += [("burst", 0.0, 0.0, args.burst), ("idle", -1.0, args.duration, 0)]
                        for name, rate, duration, count in plans:
                            stream = create_stream(url, shards, prefix="steady")
                            job = Job(
                                mode,
                                backend,
                                rate,
                                duration,
                                count,
                                url,
                                stream,
                                awaiter=args.awaiter,
                                tick=args.tick,
                            )
                            measure(f"{shards} {backend} {mode} {name}", job)
                            delete_stream(url, stream)

    def med(label: str, key: str) -> float:
        return median_of([r[key] for r in results.get(label, [])])

    rows = []
    table: dict[str, Any] = {}
    for shards in shard_counts:
        for backend in backends:
            base = f"{shards} {backend}"
            burst_cpu = med(f"{base} producer burst", "cpu_s") - med(f"{base} null burst", "cpu_s")
            burst_us = burst_cpu / args.burst * 1e6
            for r in rates:
                name = f"{r:g}/s"
                n = med(f"{base} producer {name}", "records")
                own = med(f"{base} producer {name}", "cpu_s") - med(f"{base} null {name}", "cpu_s")
                us = own / n * 1e6 if n else math.nan
                reqs = med(f"{base} producer {name}", "requests")
                wall = med(f"{base} producer {name}", "wall_s")
                row = {
                    "shards": shards,
                    "backend": backend,
                    "rate": r,
                    "producer_us_per_record": us,
                    "burst_us_per_record": burst_us,
                    "ratio": us / burst_us if burst_us > 0 else math.nan,
                    "requests_per_s": reqs / wall if wall else math.nan,
                    "core_share": own / wall if wall else math.nan,
                    "p50_ms": med(f"{base} producer {name}", "p50_s") * 1e3,
                    "p99_ms": med(f"{base} producer {name}", "p99_s") * 1e3,
                }
                table[f"{base} {name}"] = row
                rows.append(
                    [
                        shards,
                        backend,
                        f"{r:,.0f}",
                        f"{us:.1f}",
                        f"{row['ratio']:.2f}x",
                        f"{row['core_share'] * 100:.1f} %",
                        f"{row['requests_per_s']:.1f}",
                        f"{row['p50_ms']:.1f}",
                        f"{row['p99_ms']:.1f}",
                    ]
                )
            idle = med(f"{base} producer idle", "cpu_s") - med(f"{base} null idle", "cpu_s")
            rows.append(
                [shards, backend, "idle", "", "", f"{idle / args.duration * 100:.2f} %", "", "", ""]
            )
            rows.append([shards, backend, "burst", f"{burst_us:.1f}", "1.00x", "", "", "", ""])
            table[f"{base} idle"] = {"core_share": idle / args.duration}
            table[f"{base} burst"] = {"producer_us_per_record": burst_us}
    total = time.perf_counter() - started
    md = report_header("# The cost at a steady rate", info, total)
    md += [
        f"Engine: {kind}. {SIZE}-byte records over {KEYS} keys, default settings; "
        f"{args.duration:g} s per rate, burst of {args.burst:,} records; medians of "
        f"{args.rounds} round(s); the arrival loop ticks every {args.tick * 1e3:g} ms, "
        f"awaiter `{args.awaiter}`; each figure from a fresh process, minus the same loop "
        "with a null producer. Ratio: steady µs/record over burst µs/record (same shards, "
        "same backend). Core: the producer's own CPU as a share of one core. Latency from "
        "each record's scheduled arrival.",
        "",
        markdown_table(
            [
                "shards",
                "backend",
                "records/s",
                "µs/record",
                "vs burst",
                "core",
                "requests/s",
                "p50 ms",
                "p99 ms",
            ],
            rows,
            "rlrrrrrrr",
        ),
        "",
    ]
    publish(args.name, md, {"machine": info, "table": table, "runs": results}, total)


if __name__ == "__main__":
    main()
