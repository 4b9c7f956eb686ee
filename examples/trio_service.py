"""A Trio service: worker tasks produce events through one Producer; Ctrl-C shuts it down cleanly.

Run it against a local emulator (``uv run kinesis-trio local --streams events:2`` in another
terminal prints the endpoint) or against AWS with your usual credentials::

    AWS_ENDPOINT_URL_KINESIS=http://localhost:4567 AWS_REGION=us-east-1 \\
        uv run python examples/trio_service.py --stream events --workers 4 --events 1000

``--events 0`` runs until SIGINT/SIGTERM. Shutdown stops the workers (a ``put`` cancelled
while it waits for room means that record was not accepted), lets the producer flush what
it accepted, waits for every outcome, logs the failed ones and prints a JSON summary line.
Exit status 1 if any record failed.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import sys
import time
from collections.abc import AsyncIterator
from dataclasses import asdict, dataclass

import trio

from kinesis_trio import Outcome, Producer

log = logging.getLogger("trio_service")


@dataclass
class Stats:
    sent: int = 0
    ok: int = 0
    failed: int = 0


async def worker(
    producer: Producer,
    worker_id: int,
    events: int,
    interval: float,
    outcomes: trio.MemorySendChannel[Outcome],
    stats: Stats,
) -> None:
    """Produce events; hand each outcome to the checker (through a bounded channel)."""
    async with outcomes:
        n = 0
        while events == 0 or n < events:
            event = {"worker": worker_id, "n": n, "at": time.time()}
            # Waits while the producer is at its limits (backpressure); cancelled there, the
            # record was not accepted.
            outcome = await producer.put(
                json.dumps(event).encode(), partition_key=f"worker-{worker_id}-{n % 16}"
            )
            stats.sent += 1
            with trio.CancelScope(shield=True):  # an accepted record's outcome gets checked
                await outcomes.send(outcome)
            n += 1
            if interval:
                await trio.sleep(interval)


async def check_outcomes(outcomes: trio.MemoryReceiveChannel[Outcome], stats: Stats) -> None:
    """Wait for every outcome; count successes, log failures (those records are not in
    Kinesis, or, for an ambiguous failure, may be)."""
    async with outcomes:
        async for outcome in outcomes:
            result = await outcome.wait()
            if result.ok:
                stats.ok += 1
            else:
                stats.failed += 1
                log.warning(
                    "record failed: partition_key=%s error=%s: %s",
                    result.partition_key,
                    result.error_code,
                    result.error_message,
                )


async def stop_on_signal(
    signals: AsyncIterator[int], workers: trio.CancelScope, watcher: trio.CancelScope
) -> None:
    """On SIGINT/SIGTERM, stop the workers (and only them)."""
    with watcher:
        async for signum in signals:
            log.info("%s: stopping the workers", signal.Signals(signum).name)
            workers.cancel()
            return


async def run(args: argparse.Namespace) -> Stats:
    stats = Stats()
    async with Producer(
        args.stream,
        region_name=os.environ.get("AWS_REGION"),
        endpoint_url=os.environ.get("AWS_ENDPOINT_URL_KINESIS"),
    ) as producer:
        send, receive = trio.open_memory_channel[Outcome](1024)
        workers, watcher = trio.CancelScope(), trio.CancelScope()
        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(check_outcomes, receive, stats)
                nursery.start_soon(stop_on_signal, signals, workers, watcher)
                print("started", flush=True)  # tests wait for this line before signalling
                with workers:
                    async with send, trio.open_nursery() as worker_nursery:
                        for i in range(args.workers):
                            worker_nursery.start_soon(
                                worker, producer, i, args.events, args.interval, send.clone(), stats
                            )
                watcher.cancel()
                # the checker ends by itself once every outcome sent to it is resolved
        # leaving the Producer's block flushes whatever is still buffered
    return stats


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stream", default=os.environ.get("KINESIS_STREAM"), required=False)
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--events", type=int, default=1000, help="per worker; 0: until a signal")
    parser.add_argument("--interval", type=float, default=0.0, help="seconds between events")
    args = parser.parse_args()
    if not args.stream:
        parser.error("--stream or KINESIS_STREAM is required")
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("httpx").setLevel(logging.WARNING)  # not every request
    stats = trio.run(run, args)
    print(json.dumps(asdict(stats)), flush=True)
    return 1 if stats.failed else 0


if __name__ == "__main__":
    sys.exit(main())
