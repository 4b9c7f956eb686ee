"""The garbage collector's part in the producer's latency tail (issue 25).

Two figures, each in a fresh process per backend, alternating over ``--rounds`` rounds:

* **A full collection's pause** with ``kinesis_trio`` imported and a producer started (on
  the Python local engine), before and after ``gc.collect(); gc.freeze()``: what every full
  collection of the process walks, whatever the application does.
* **What waiting for an outcome costs**: ``--waiters`` tasks each wait for an event that is
  set once all of them wait, with ``anyio.Event`` (what ``Outcome.wait`` used before) and
  with the event loop's own event (``trio.Event`` / ``asyncio.Event``, what it uses now):
  CPU per waiter (task start, wait, wake-up) and objects the collector tracks per waiter
  (young-generation collections x their threshold).

    uv run python -m benchmarks.bench_gc      # --rounds 3 --waiters 20000
"""

from __future__ import annotations

import argparse
import gc
import json
import subprocess
import sys
import time
from typing import Any

import anyio

from benchmarks.bench_steady import CREDENTIALS


async def _pause(endpoint: str, stream: str) -> dict[str, Any]:
    from kinesis_trio import Producer, StaticCredentials

    async with Producer(
        stream,
        region_name="us-east-1",
        endpoint_url=endpoint,
        credentials=StaticCredentials(*CREDENTIALS),
    ) as producer:
        for i in range(1000):
            await producer.put(b"x" * 200, f"k{i}")
        await producer.flush()
        gc.collect()
        objects = len(gc.get_objects())

        def best() -> float:
            took = []
            for _ in range(5):
                t = time.perf_counter()
                gc.collect()
                took.append(time.perf_counter() - t)
            return min(took)

        full = best()
        gc.freeze()
        frozen = best()
        gc.unfreeze()
    return {"objects": objects, "full_ms": full * 1e3, "frozen_ms": frozen * 1e3}


async def _waiters(kind: str, count: int) -> dict[str, Any]:
    from kinesis_trio._outcome import _loop_event

    make: Any = anyio.Event if kind == "anyio.Event" else _loop_event
    events: list[Any] = []

    async def waiter() -> None:
        event = make()
        events.append(event)
        await event.wait()

    gc.collect()
    young0 = gc.get_stats()[0]["collections"]
    cpu0 = time.process_time()
    async with anyio.create_task_group() as tg:
        for _ in range(count):
            tg.start_soon(waiter)
        await anyio.wait_all_tasks_blocked()
        assert len(events) == count
        for event in events:
            event.set()
    cpu = time.process_time() - cpu0
    young = gc.get_stats()[0]["collections"] - young0
    return {
        "us_per_waiter": cpu / count * 1e6,
        "tracked_per_waiter": young * gc.get_threshold()[0] / count,
    }


def _child(spec: dict[str, Any]) -> dict[str, Any]:
    if spec["what"] == "pause":
        return anyio.run(_pause, spec["endpoint"], spec["stream"], backend=spec["backend"])
    return anyio.run(_waiters, spec["kind"], spec["count"], backend=spec["backend"])


def _run(spec: dict[str, Any]) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.bench_gc", "--child", json.dumps(spec)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    if proc.returncode:
        raise RuntimeError(f"child failed: {proc.stderr[-2000:]}")
    out: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--waiters", type=int, default=20_000)
    parser.add_argument("--name", default="gc", help="results/<name>.{md,json}")
    args = parser.parse_args()
    if args.child:
        print(json.dumps(_child(json.loads(args.child))), flush=True)
        return

    from benchmarks.common import (
        create_stream,
        machine_info,
        markdown_table,
        median_of,
        publish,
        report_header,
    )
    from kinesis_trio._emulator import LocalKinesis

    info = machine_info()
    started = time.perf_counter()
    backends = ("trio", "asyncio")
    kinds = ("anyio.Event", "loop event")
    pauses: dict[str, list[dict[str, Any]]] = {b: [] for b in backends}
    waits: dict[str, list[dict[str, Any]]] = {f"{b} {k}": [] for b in backends for k in kinds}
    with LocalKinesis("python") as engine:
        for _ in range(args.rounds):
            for backend in backends:
                url = engine.endpoint_url
                stream = create_stream(url, 4, prefix="gc")
                out = _run({"what": "pause", "backend": backend, "endpoint": url, "stream": stream})
                pauses[backend].append(out)
                print(f"pause {backend:8} {out}", flush=True)
                for kind in kinds:
                    spec = {"what": "wait", "backend": backend, "kind": kind, "count": args.waiters}
                    out = _run(spec)
                    waits[f"{backend} {kind}"].append(out)
                    print(f"wait  {backend:8} {kind:12} {out}", flush=True)

    def med(runs: list[dict[str, Any]], key: str) -> float:
        return median_of([r[key] for r in runs])

    prows = [
        [
            b,
            f"{med(pauses[b], 'objects'):,.0f}",
            f"{med(pauses[b], 'full_ms'):.1f}",
            f"{med(pauses[b], 'frozen_ms'):.2f}",
        ]
        for b in backends
    ]
    wrows = []
    for b in backends:
        before, after = waits[f"{b} anyio.Event"], waits[f"{b} loop event"]
        wrows.append(
            [
                b,
                f"{med(before, 'us_per_waiter'):.1f}",
                f"{med(after, 'us_per_waiter'):.1f}",
                f"{med(after, 'us_per_waiter') / med(before, 'us_per_waiter'):.2f}x",
                f"{med(before, 'tracked_per_waiter'):.1f}",
                f"{med(after, 'tracked_per_waiter'):.1f}",
            ]
        )
    total = time.perf_counter() - started
    md = report_header("# The garbage collector and the latency tail", info, total)
    md += [
        f"Medians of {args.rounds} rounds, each figure from a fresh process.",
        "",
        "## A full collection, with a producer started",
        "",
        "Objects the collector tracks once `kinesis_trio` is imported and a producer has "
        "started and sent 1,000 records, and the best of 5 full collections "
        "(`gc.collect()`) before and after `gc.freeze()`.",
        "",
        markdown_table(
            ["backend", "tracked objects", "full collection ms", "after gc.freeze() ms"],
            prows,
            "lrrr",
        ),
        "",
        f"## Waiting for an outcome: {args.waiters:,} waiting tasks",
        "",
        markdown_table(
            [
                "backend",
                "anyio.Event µs/waiter",
                "loop event µs/waiter",
                "ratio",
                "tracked objects/waiter, anyio.Event",
                "loop event",
            ],
            wrows,
            "lrrrrr",
        ),
        "",
    ]
    publish(args.name, md, {"machine": info, "pauses": pauses, "waits": waits}, total)


if __name__ == "__main__":
    main()
