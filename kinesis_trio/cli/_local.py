"""``local``: a local emulator until Ctrl-C."""

from __future__ import annotations

import argparse
import time

import anyio
import anyio.abc
import anyio.to_thread

from .._client import KinesisClient
from .._emulator import LocalKinesis
from ._options import _LOCAL_CREDENTIALS, _Failure, _UsageError
from ._output import _signals_ignored


def _run_local(args: argparse.Namespace) -> int:
    streams: list[tuple[str, int]] = []
    for part in filter(None, (p.strip() for p in args.streams.split(","))):
        name, _, shards = part.partition(":")
        try:
            count = int(shards or "1")
        except ValueError:
            count = 0
        if not name or count < 1:
            raise _UsageError(f"--streams: bad entry {part!r}, expected name:shards")
        streams.append((name, count))

    async def create(endpoint: str) -> None:
        async with KinesisClient(
            region_name="us-east-1", endpoint_url=endpoint, credentials=_LOCAL_CREDENTIALS
        ) as client:
            for name, shards in streams:
                await client.create_stream(name, shards)
                await client.wait_for_stream(name)
                print(f"  created stream {name} with {shards} shards", flush=True)

    emulator = LocalKinesis(args.emulator, port=args.port or None)
    try:
        print(f"starting {args.emulator} ...", flush=True)
        emulator.start()
        if streams:
            anyio.run(create, emulator.endpoint_url)
        print(f"{args.emulator} running at {emulator.endpoint_url} (Ctrl-C to stop)", flush=True)
        print(
            f"  export AWS_ENDPOINT_URL_KINESIS={emulator.endpoint_url} AWS_REGION=us-east-1",
            flush=True,
        )
        while True:
            time.sleep(0.5)
            proc = getattr(emulator, "_proc", None)
            code = proc.poll() if proc is not None else None
            if code is not None:
                tail = emulator.output_tail(5).replace("\n", " | ")
                raise _Failure(f"{args.emulator} exited unexpectedly (code {code}): {tail}")
    except KeyboardInterrupt:
        print(f"stopping {args.emulator} ...", flush=True)
    finally:
        with _signals_ignored():
            emulator.stop()
    print("stopped", flush=True)
    return 0
