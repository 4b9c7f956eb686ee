"""The steady-rate harness shared by ``benchmarks steady``: one measurement per process.

A child process (``python -m benchmarks._harness --child JOB``) opens a producer (or a null
producer whose ``put`` returns an outcome already resolved) and runs an arrival loop in
``Job.tick`` ticks that puts every record that is due (record *i* is due at ``t0 + i/rate``);
one task awaits the outcomes in order and takes each record's latency from its scheduled
arrival to its resolution (no coordinated omission). It prints one JSON line: records,
process CPU, latencies' quantiles, requests and the collector's pauses.
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
    #: the arrival loop's tick in seconds (steady cpu: one record's interval at low rates)
    tick: float = TICK
    #: also return every record's latency (``latencies_s``, in seconds), for quantiles
    #: taken the same way as another runner's (``benchmarks kpl``)
    keep_latencies: bool = False


class _Ok:
    ok = True
    error_code = None


class _Resolved:
    """The null producer's outcome: already resolved, put."""

    _result = _Ok()

    async def wait(self) -> _Ok:
        return self._result

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
    # outcomes that resolved not put, by error code (their latency counts all the same)
    codes: dict[str, int] = {}
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
                result = await outcome.wait()
                if not result.ok:
                    _failed(codes, result)
                latencies.append(now() - scheduled)

    async def handler(tg: Any, index: int, scheduled: float) -> None:
        outcome = await producer.put(payload, keys[index % KEYS])
        result = await outcome.wait()
        if not result.ok:
            _failed(codes, result)
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
    result = _summary(i, time.process_time() - cpu0, now() - t0, latencies, pauses, job)
    result["failed"] = sum(codes.values())
    result["error_codes"] = codes
    return result


def _failed(codes: dict[str, int], result: Any) -> None:
    """Count a record that resolved not put, by its error code."""
    code = str(result.error_code or "?")
    codes[code] = codes.get(code, 0) + 1


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
    return _summary(i, time.process_time() - cpu0, now() - t0, latencies, pauses, job)


def _summary(
    records: int,
    cpu: float,
    wall: float,
    latencies: list[float],
    pauses: _GcPauses,
    job: Job,
) -> dict[str, Any]:
    """A run's figures: its CPU and wall time, latency quantiles, the collector's time."""
    gc.callbacks.remove(pauses)
    latencies.sort()

    def q(p: float) -> float:
        return latencies[min(len(latencies) - 1, int(p * len(latencies)))] if latencies else 0.0

    out: dict[str, Any] = {
        "records": records,
        "cpu_s": cpu,
        "wall_s": wall,
        "p50_s": q(0.5),
        "p99_s": q(0.99),
        "gc_s": pauses.total,
        "gc_full": pauses.full,
        "gc_full_max_s": pauses.full_max,
    }
    if job.keep_latencies:
        out["latencies_s"] = [round(x, 6) for x in latencies]
    return out


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
    from benchmarks._emulator import verify_for
    from kinesis_trio import Producer, ProducerConfig, StaticCredentials

    async with Producer(
        job.stream,
        region_name="us-east-1",
        endpoint_url=job.endpoint,
        credentials=StaticCredentials(*CREDENTIALS),
        # the emulators' own self-signed certificate (an https endpoint) is not checked
        config=ProducerConfig(verify=verify_for(job.endpoint)),
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
        "benchmarks._harness", json.dumps(asdict(job)), timeout=job.duration * 4 + 120
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
    parser.add_argument("--child", required=True, help="a Job as JSON")
    args = parser.parse_args()
    job = Job(**json.loads(args.child))
    print(json.dumps(anyio.run(_child, job, backend=job.backend)), flush=True)


if __name__ == "__main__":
    main()
