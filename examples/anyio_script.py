"""A script (``anyio.run``, on asyncio or trio) writing a file's lines, or generated records.

Every line (or generated record) becomes one Kinesis record; the partition key is the line
number modulo ``--keys``. ``put`` waits while the producer is full, so a file of any size
streams through in bounded memory; outcomes are checked as they resolve (in order), and the
failed lines are written as JSON lines to ``--failed`` (default: stderr). A JSON summary
line goes to stdout; exit status 1 if any record failed.

Run it (endpoint, region and credentials as for any AWS SDK)::

    AWS_ENDPOINT_URL_KINESIS=http://localhost:4567 AWS_REGION=us-east-1 \\
        uv run python examples/anyio_script.py --stream events --file access.log
    seq 1 1000 | uv run python examples/anyio_script.py --stream events --file -
    uv run python examples/anyio_script.py --stream events --generate 10000 --backend trio

The stream may also come from ``KINESIS_STREAM``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import time
import uuid
from collections.abc import AsyncIterator
from typing import IO

import anyio
import anyio.to_thread
from anyio.streams.memory import MemoryObjectReceiveStream

from kinesis_trio import Outcome, Producer


async def records(args: argparse.Namespace, source: IO[bytes] | None) -> AsyncIterator[bytes]:
    """The records: generated, or the source's lines (read ~1 MiB at a time in a worker
    thread, so a slow disk or pipe does not block the event loop)."""
    if source is None:
        run = uuid.uuid4().hex[:8]
        for n in range(args.generate):
            yield json.dumps({"run": run, "n": n, "at": time.time()}).encode()
        return
    while lines := await anyio.to_thread.run_sync(source.readlines, 1 << 20):
        for line in lines:
            yield line.rstrip(b"\r\n")


async def check(
    outcomes: MemoryObjectReceiveStream[tuple[bytes, Outcome]],
    totals: dict[str, int],
    failed_out: IO[str],
) -> None:
    async with outcomes:
        async for data, outcome in outcomes:
            result = await outcome.wait()
            if result.ok:
                totals["ok"] += 1
            else:
                totals["failed"] += 1
                line = {
                    "line": data.decode("utf-8", "replace"),
                    "error_code": result.error_code,
                    "error_message": result.error_message,
                }
                print(json.dumps(line), file=failed_out, flush=True)


async def main(
    args: argparse.Namespace, source: IO[bytes] | None, failed_out: IO[str]
) -> dict[str, int]:
    totals = {"sent": 0, "ok": 0, "failed": 0}
    async with Producer(
        args.stream,
        region_name=os.environ.get("AWS_REGION"),
        endpoint_url=os.environ.get("AWS_ENDPOINT_URL_KINESIS"),
    ) as producer:
        send, receive = anyio.create_memory_object_stream[tuple[bytes, Outcome]](10_000)
        async with anyio.create_task_group() as tg:
            tg.start_soon(check, receive, totals, failed_out)
            async with send:
                n = 0
                async for data in records(args, source):
                    outcome = await producer.put(data, partition_key=str(n % args.keys))
                    totals["sent"] += 1
                    n += 1
                    await send.send((data, outcome))
    return totals


def cli() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stream", default=os.environ.get("KINESIS_STREAM"))
    sources = parser.add_mutually_exclusive_group(required=True)
    sources.add_argument("--file", help="a file of records, one per line; - for stdin")
    sources.add_argument("--generate", type=int, metavar="N", help="N generated JSON records")
    parser.add_argument("--keys", type=int, default=64, help="distinct partition keys")
    parser.add_argument("--failed", help="write failed lines here (JSON lines)")
    parser.add_argument("--backend", choices=["asyncio", "trio"], default="asyncio")
    args = parser.parse_args()
    if not args.stream:
        parser.error("--stream or KINESIS_STREAM is required")
    with contextlib.ExitStack() as files:
        source: IO[bytes] | None = None
        if args.file == "-":
            source = sys.stdin.buffer
        elif args.file is not None:
            source = files.enter_context(open(args.file, "rb"))
        failed_out: IO[str] = sys.stderr
        if args.failed:
            failed_out = files.enter_context(open(args.failed, "w"))
        summary = anyio.run(main, args, source, failed_out, backend=args.backend)
    print(json.dumps(summary), flush=True)
    return 1 if summary["failed"] else 0


if __name__ == "__main__":
    sys.exit(cli())
