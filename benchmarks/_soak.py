"""The local engine under a steady mixed load for minutes: is its memory flat once the
records it holds reach the retention period?

The engine (``run_local``, served over HTTP, in memory) runs in a child process on trio's
``MockClock(rate=R)``: its clock, and so retention (24 h) and its timeouts, run ``R`` times
faster than real time, so a day passes in ``86,400 / R`` seconds. This process drives it in
real time over real sockets:

- a writer: PutRecords of 50 records of 100 bytes, ``--rps`` records per engine second;
- a reader per shard: GetRecords from TRIM_HORIZON, following its iterator;
- control calls: ListShards, DescribeStreamSummary, ListStreams;
- careless clients: connections opened and dropped, half a request then a hang-up, half a
  request left open, a body nested 10,000 deep, a 1 MiB PutRecord now and then.

Every ``--every`` seconds it prints the engine's RSS (``/proc/<pid>/status``), its clock in
hours and the calls that succeeded and failed. At the end: the RSS range once the first
records passed the retention period (``rss_after_retention``: min, max, and max/min).

    uv run python -m benchmarks engines soak              # --minutes 5 --rate 400 --rps 2
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import socket
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import anyio
import trio

from benchmarks._child import proc_cpu_seconds, proc_rss_mib
from benchmarks._report import machine_info, markdown_table, publish, report_header
from kinesis_trio import KinesisClient, KinesisError, StaticCredentials

STREAM = "soak"
SHARDS = 4
DAY = 86_400.0


def _engine(port_file: str, rate: float) -> None:
    """The child: the served engine on a fast virtual clock (writes its port to a file)."""
    from trio.testing import MockClock

    from kinesis_trio.testing._http import LocalEndpoint
    from kinesis_trio.testing._local_server import LocalSettings, make_fake, run_local

    settings = LocalSettings(port=0, streams=[(STREAM, SHARDS)])
    fake = make_fake(settings)

    def ready(endpoint: LocalEndpoint, cert: Path | None) -> None:
        Path(port_file).write_text(str(endpoint.port))

    trio.run(run_local, settings, ready, fake, clock=MockClock(rate=rate))


async def _drive(args: argparse.Namespace, port: int, pid: int) -> dict[str, Any]:
    url = f"http://127.0.0.1:{port}"
    calls: Counter[str] = Counter()
    samples: list[dict[str, float]] = []
    start = time.monotonic()
    end = start + args.minutes * 60

    rate = float(args.rate)

    def engine_hours() -> float:
        return (time.monotonic() - start) * rate / 3600

    async with KinesisClient(
        region_name="us-east-1",
        endpoint_url=url,
        credentials=StaticCredentials("soak", "soak"),
        request_timeout=30.0,
    ) as client:

        async def call(kind: str, operation: Any) -> Any:
            try:
                out = await operation
            except (KinesisError, OSError) as exc:
                calls[f"{kind} failed ({getattr(exc, 'code', type(exc).__name__)})"] += 1
                return None
            calls[f"{kind} ok"] += 1
            return out

        async def writer() -> None:
            batch_every = 50 / (args.rps * args.rate)  # real seconds between batches
            n = 0
            next_at = time.monotonic()
            while time.monotonic() < end:
                entries = [
                    {
                        "Data": base64.b64encode(b"%099d" % (n + i)).decode(),
                        "PartitionKey": f"k{(n + i) % 1000}",
                    }
                    for i in range(50)
                ]
                n += 50
                await call("PutRecords", client.put_records(STREAM, entries))
                next_at += batch_every
                await anyio.sleep(max(0.0, next_at - time.monotonic()))

        async def reader(shard: int) -> None:
            shard_id = f"shardId-{shard:012d}"
            iterator = await client.get_shard_iterator(STREAM, shard_id, "TRIM_HORIZON")
            while time.monotonic() < end:
                page = await call("GetRecords", client.get_records(iterator, limit=2000))
                if page is not None:
                    iterator = page["NextShardIterator"] or iterator
                await anyio.sleep(0.2)

        async def control() -> None:
            while time.monotonic() < end:
                await call("ListShards", client.list_shards(STREAM))
                await call("DescribeStreamSummary", client.describe_stream_summary(STREAM))
                await call("ListStreams", client.call("ListStreams", {}))
                await anyio.sleep(1.0)

        async def big_put_record() -> None:
            data = base64.b64encode(os.urandom(1024 * 1024 - 10)).decode()
            while time.monotonic() < end:
                body = {"StreamName": STREAM, "Data": data, "PartitionKey": "big"}
                await call("PutRecord 1 MiB", client.call("PutRecord", body))
                await anyio.sleep(5.0)

        async def careless() -> None:
            deep = b"[" * 10_000 + b"]" * 10_000
            head = (
                "POST / HTTP/1.1\r\nHost: x\r\nX-Amz-Target: Kinesis_20131202.ListStreams\r\n"
                "Authorization: AWS4-HMAC-SHA256 Credential=soak\r\n"
                "Content-Type: application/x-amz-json-1.1\r\nContent-Length: {}\r\n\r\n"
            )
            kinds = ("drop", "half head", "half body open", "deep body")
            i = 0
            while time.monotonic() < end:
                kind = kinds[i % len(kinds)]
                i += 1
                try:
                    stream = await anyio.connect_tcp("127.0.0.1", port)
                except OSError:
                    calls[f"careless {kind}: connect failed"] += 1
                    await anyio.sleep(0.5)
                    continue
                try:
                    if kind == "half head":
                        await stream.send(b"POST / HTTP/1.1\r\nHost: x\r\n")
                    elif kind == "half body open":
                        await stream.send(head.format(1_000_000).encode() + b'{"Limit": 1')
                        with anyio.move_on_after(2.0):
                            await stream.receive()  # the engine's timeout, or 2 s
                    elif kind == "deep body":
                        await stream.send(head.format(len(deep)).encode() + deep)
                        with anyio.move_on_after(5.0):
                            answer = await stream.receive()
                            status = answer.split(b" ", 2)[1].decode()
                            calls[f"careless deep body answered {status}"] += 1
                except (OSError, anyio.BrokenResourceError, anyio.EndOfStream):
                    calls[f"careless {kind}: connection ended"] += 1
                finally:
                    await stream.aclose()
                await anyio.sleep(0.5)

        async def sampler() -> None:
            while time.monotonic() < end:
                await anyio.sleep(args.every)
                sample = {
                    "real_s": round(time.monotonic() - start, 1),
                    "engine_h": round(engine_hours(), 2),
                    "rss_mib": round(proc_rss_mib(pid), 1),
                    "cpu_s": round(proc_cpu_seconds(pid), 1),
                }
                samples.append(sample)
                ok = sum(v for k, v in calls.items() if k.endswith(" ok"))
                failed = sum(v for k, v in calls.items() if "failed" in k)
                print(
                    f"{sample['real_s']:7.1f} s  engine {sample['engine_h']:6.2f} h  "
                    f"RSS {sample['rss_mib']:7.1f} MiB  CPU {sample['cpu_s']:6.1f} s  "
                    f"calls ok {ok}, failed {failed}",
                    flush=True,
                )

        async with anyio.create_task_group() as tg:
            tg.start_soon(writer)
            for shard in range(SHARDS):
                tg.start_soon(reader, shard)
            tg.start_soon(control)
            tg.start_soon(big_put_record)
            tg.start_soon(careless)
            tg.start_soon(sampler)
    # the first records pass 24 h at DAY of engine time; trimming is done within a second
    after = [s["rss_mib"] for s in samples if s["engine_h"] >= DAY / 3600 + 0.5]
    summary: dict[str, Any] = {"samples": samples, "calls": dict(sorted(calls.items()))}
    if after:
        summary["rss_after_retention"] = {
            "min": min(after),
            "max": max(after),
            "max_over_min": round(max(after) / min(after), 3),
        }
    return summary


def _publish(args: argparse.Namespace, summary: dict[str, Any], total: float) -> None:
    info = machine_info()
    md = report_header("# The local engine over days of engine time", info, total)
    md += [
        f"The served engine in memory, its clock x{args.rate:g} (a day in "
        f"{DAY / args.rate:.0f} s); {args.rps:g} records per engine second, readers on every "
        "shard, control calls and careless clients (see `benchmarks/_soak.py`).",
        "",
    ]
    after = summary.get("rss_after_retention")
    if after:
        md += [
            f"RSS once the first records passed the retention period: {after['min']} to "
            f"{after['max']} MiB (max/min {after['max_over_min']}).",
            "",
        ]
    md.append(
        markdown_table(
            ["real s", "engine h", "RSS MiB", "engine CPU s"],
            [[s["real_s"], s["engine_h"], s["rss_mib"], s["cpu_s"]] for s in summary["samples"]],
            "rrrr",
        )
    )
    md += ["", "Calls:", ""]
    md += [f"- {name}: {count:,}" for name, count in summary["calls"].items()]
    publish("soak", md, {"machine": info, **summary}, total)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=5.0, help="real minutes to run")
    parser.add_argument("--rate", type=float, default=400.0, help="engine seconds per second")
    parser.add_argument("--rps", type=float, default=2.0, help="records per engine second")
    parser.add_argument("--every", type=float, default=10.0, help="seconds between samples")
    parser.add_argument("--engine", metavar="PORT_FILE", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.engine:
        _engine(args.engine, args.rate)
        return
    port_file = Path(f"/tmp/bench-soak-{os.getpid()}.port")
    port_file.unlink(missing_ok=True)
    child = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "benchmarks._soak",
            "--engine",
            str(port_file),
            "--rate",
            str(args.rate),
        ]
    )
    try:
        deadline = time.monotonic() + 30
        while not port_file.exists() or not port_file.read_text():
            if time.monotonic() > deadline or child.poll() is not None:
                raise SystemExit("the engine did not start")
            time.sleep(0.1)
        port = int(port_file.read_text())
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            pass
        print(
            f"engine pid {child.pid} at port {port}; clock x{args.rate:g} "
            f"(a day in {DAY / args.rate:.0f} s); {args.rps:g} records per engine second",
            flush=True,
        )
        started = time.perf_counter()
        summary = anyio.run(_drive, args, port, child.pid, backend="trio")
        print(json.dumps({k: v for k, v in summary.items() if k != "samples"}, indent=2))
        if child.poll() is not None:
            raise SystemExit(f"the engine exited with {child.returncode}")
        _publish(args, summary, time.perf_counter() - started)
    finally:
        child.terminate()
        child.wait(10)
        port_file.unlink(missing_ok=True)


if __name__ == "__main__":
    main()
