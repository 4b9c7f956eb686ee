"""The put path alone: ``put`` one record a call against ``put_many`` of N, in instructions.

One process accepts ``--records`` 200-byte records (256 keys, 32 shards) into a producer
whose PutRecords are held (nothing is answered; one request at most is built), with a
linger and a window that make nothing due meanwhile and admission by time off (no answer
ever comes to measure a pace); then it leaves the producer by cancelling it (every record
fails ``ProducerAborted``, the same per record in either mode), or with ``--exit`` leaves the
process at once (no close: only the puts, and what the loop let run meanwhile, are counted).
So what differs between the modes is the path from the call to the record in its shard's
aggregate.

Run it under callgrind twice per mode, with ``--records 0`` (start-up, close) and with N,
and take ``(Ir(N) - Ir(0)) / N``: the steady figure on a noisy machine. ``--time`` prints
the CPU seconds of the put loop instead (noisy: for a look, not a claim)::

    valgrind --tool=callgrind --callgrind-out-file=/dev/null \\
        .venv/bin/python -m benchmarks.put_path --mode put_many --records 30000 --exit

Not part of ``python -m benchmarks all``: it writes no result file.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

import anyio
import httpx

from kinesis_trio import Producer, ProducerConfig, StaticCredentials
from kinesis_trio.testing import FakeKinesis


class _Hold:
    """A fake hook holding every PutRecords for ever."""

    def __init__(self) -> None:
        self.never = anyio.Event()

    async def __call__(self, operation: str, body: dict[str, Any]) -> httpx.Response | None:
        if operation == "PutRecords":
            await self.never.wait()
        return None


async def _run(mode: str, records: int, batch: int, timed: bool, leave: bool) -> None:
    fake = FakeKinesis(_Hold())
    fake.create_stream("s", shard_count=32)
    config = ProducerConfig(
        record_max_buffered_time=1e4,
        record_ttl=1e5,
        linger_window_bytes=1 << 40,
        admission_ttl_share=None,
        max_connections=1,
        adaptive_concurrency=False,
        rate_limit=1e8,
    )
    data = b"x" * 200
    keys = [f"key-{i}" for i in range(256)]
    with anyio.CancelScope() as scope:
        async with Producer(
            "s",
            region_name="us-east-1",
            endpoint_url="http://fake.local",
            credentials=StaticCredentials("a", "b"),
            config=config,
            transport=fake.transport(),
        ) as producer:
            cpu0 = time.process_time()
            if mode == "put":
                put = producer.put
                for i in range(records):
                    await put(data, keys[i & 255])
            else:
                for start in range(0, records, batch):
                    end = min(start + batch, records)
                    await producer.put_many([(data, keys[i & 255]) for i in range(start, end)])
            cpu = time.process_time() - cpu0
            if timed and records:
                print(f"{mode}: {cpu / records * 1e6:.2f} µs of CPU per record")
            if leave:  # no close: its failing of every record costs as much again
                sys.stdout.flush()
                os._exit(0)
            scope.cancel()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--mode", choices=["put", "put_many"], default="put")
    parser.add_argument("--records", type=int, default=50_000)
    parser.add_argument("--batch", type=int, default=500, help="records per put_many call")
    parser.add_argument("--backend", choices=["trio", "asyncio"], default="trio")
    parser.add_argument("--time", action="store_true", help="print the put loop's CPU time")
    parser.add_argument(
        "--exit", action="store_true", help="leave the process right after the puts (no close)"
    )
    args = parser.parse_args()
    anyio.run(_run, args.mode, args.records, args.batch, args.time, args.exit, backend=args.backend)


if __name__ == "__main__":
    main()
