"""The ``kinesis-trio`` command.

``kinesis-trio demo`` writes records through a Producer and prints throughput, latency and
failures. With no endpoint configured (``--endpoint-url``, ``AWS_ENDPOINT_URL_KINESIS``,
``AWS_ENDPOINT_URL``) it starts an embedded local emulator (kinesalite, from npm) first.
``kinesis-trio local`` starts the emulator and keeps it running.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import time
import uuid
from collections.abc import Sequence
from typing import Any

import anyio

from ._client import KinesisClient
from ._config import ProducerConfig
from ._credentials import StaticCredentials
from ._emulator import LocalKinesis
from ._errors import KinesisTrioError
from ._producer import Producer

__all__ = ["main"]

_LOCAL_CREDENTIALS = StaticCredentials("AKIDLOCALDEMO", "local-demo-secret")


class _UsageError(Exception):
    pass


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kinesis-trio", description="Kinesis producer tools (Trio/anyio)."
    )
    sub = parser.add_subparsers(dest="command", required=True)

    demo = sub.add_parser(
        "demo",
        help="write records and print records/s, latency and failures",
        description="Write --count records of --size bytes and report throughput and latency. "
        "Without an endpoint, an embedded local emulator is started.",
    )
    demo.add_argument("--count", "-n", type=_positive_int, default=100_000)
    demo.add_argument("--size", "-s", type=_positive_int, default=200, help="bytes per record")
    demo.add_argument("--keys", type=_positive_int, default=256, help="distinct partition keys")
    demo.add_argument("--shards", type=_positive_int, default=4, help="shards of the new stream")
    demo.add_argument("--stream", help="use this existing stream instead of creating one")
    demo.add_argument("--backend", choices=["trio", "asyncio"], default="trio")
    demo.add_argument("--emulator", choices=["kinesalite", "kinesis-local"], default="kinesalite")
    _common(demo)

    local = sub.add_parser("local", help="start the embedded emulator and keep it running")
    local.add_argument("--port", type=_positive_int, default=4567)
    local.add_argument("--emulator", choices=["kinesalite", "kinesis-local"], default="kinesalite")
    local.add_argument("--streams", default="", help="name:shards,... to create")
    return parser


def _common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--endpoint-url", help="Kinesis endpoint (default: AWS settings)")
    parser.add_argument("--region", help="AWS region (default: AWS settings, or us-east-1 locally)")
    parser.add_argument("--profile", help="AWS profile for credentials")
    parser.add_argument("--linger", type=float, default=0.1, help="record_max_buffered_time, s")
    parser.add_argument("--no-aggregation", action="store_true")
    parser.add_argument("--max-connections", type=_positive_int, default=24)


def _configured_endpoint(args: argparse.Namespace) -> str | None:
    return (
        args.endpoint_url
        or os.environ.get("AWS_ENDPOINT_URL_KINESIS")
        or os.environ.get("AWS_ENDPOINT_URL")
    )


def _percentile(sorted_values: Sequence[float], q: float) -> float:
    if not sorted_values:
        return float("nan")
    index = min(len(sorted_values) - 1, max(0, round(q * (len(sorted_values) - 1))))
    return sorted_values[index]


def _config(args: argparse.Namespace) -> ProducerConfig:
    try:
        return ProducerConfig(
            record_max_buffered_time=args.linger,
            aggregation_enabled=not args.no_aggregation,
            max_connections=args.max_connections,
        )
    except ValueError as exc:
        raise _UsageError(str(exc)) from None


async def _demo(
    args: argparse.Namespace, config: ProducerConfig, endpoint: str | None, local: bool
) -> int:
    region = args.region or (
        "us-east-1"
        if local and not (os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION"))
        else None
    )
    credentials = _LOCAL_CREDENTIALS if local else None
    stream = args.stream
    created = False
    if stream is None:
        stream = f"kinesis-trio-demo-{uuid.uuid4().hex[:8]}"
        async with KinesisClient(
            region_name=region,
            endpoint_url=endpoint,
            credentials=credentials,
            profile_name=args.profile,
        ) as client:
            await client.create_stream(stream, args.shards)
            await client.wait_for_stream(stream)
        created = True
        print(f"created stream {stream} with {args.shards} shards")
    payload = os.urandom(args.size)
    keys = [f"key-{i}" for i in range(args.keys)]
    count = args.count
    print(
        f"writing {count:,} records of {args.size} bytes over {args.keys} keys "
        f"({'aggregated' if config.aggregation_enabled else 'not aggregated'}, "
        f"backend {args.backend}) ..."
    )
    starts = [0.0] * count
    cpu0 = time.process_time()
    async with Producer(
        stream,
        region_name=region,
        endpoint_url=endpoint,
        credentials=credentials,
        config=config,
        profile_name=args.profile,
    ) as producer:
        t0 = anyio.current_time()
        outcomes = []
        put = producer.put
        now = anyio.current_time
        for i in range(count):
            starts[i] = now()
            outcomes.append(await put(payload, keys[i % len(keys)]))
        await producer.flush()
        elapsed = anyio.current_time() - t0
    cpu = time.process_time() - cpu0
    results = [o.result() for o in outcomes]
    failed = [r for r in results if not r.ok]
    latencies = sorted(r.resolved_at - s for r, s in zip(results, starts, strict=True) if r.ok)
    codes: dict[str, int] = {}
    for r in failed:
        codes[r.error_code or "?"] = codes.get(r.error_code or "?", 0) + 1
    rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print()
    print("| records | elapsed s | records/s | MB/s | p50 ms | p99 ms | CPU us/record | failed |")
    print("|---:|---:|---:|---:|---:|---:|---:|---:|")
    print(
        f"| {count:,} | {elapsed:.2f} | {count / elapsed:,.0f} | "
        f"{count * args.size / elapsed / 1e6:.2f} | {_percentile(latencies, 0.5) * 1e3:.1f} | "
        f"{_percentile(latencies, 0.99) * 1e3:.1f} | {cpu / count * 1e6:.1f} | {len(failed)} |"
    )
    print(f"\npeak RSS {rss_mib:.0f} MiB; CPU includes process start-up work in this run")
    if failed:
        print("failures by error code: " + ", ".join(f"{k}={v}" for k, v in codes.items()))
    if created and not local:
        print(f"(stream {stream} was left in place; delete it when done)")
    return 1 if failed else 0


def _run_demo(args: argparse.Namespace) -> int:
    config = _config(args)
    endpoint = _configured_endpoint(args)
    if endpoint is not None:
        return anyio.run(_demo, args, config, endpoint, False, backend=args.backend)
    print(f"no endpoint configured: starting an embedded {args.emulator} emulator ...")
    with LocalKinesis(args.emulator, shard_limit=max(100, args.shards)) as emulator:
        print(f"emulator at {emulator.endpoint_url}")
        return anyio.run(_demo, args, config, emulator.endpoint_url, True, backend=args.backend)


def _run_local(args: argparse.Namespace) -> int:
    streams: list[tuple[str, int]] = []
    for part in filter(None, (p.strip() for p in args.streams.split(","))):
        name, _, shards = part.partition(":")
        try:
            streams.append((name, int(shards or "1")))
        except ValueError:
            raise _UsageError(f"--streams: bad entry {part!r}, expected name:shards") from None

    async def create(endpoint: str) -> None:
        async with KinesisClient(
            region_name="us-east-1", endpoint_url=endpoint, credentials=_LOCAL_CREDENTIALS
        ) as client:
            for name, shards in streams:
                await client.create_stream(name, shards)
                await client.wait_for_stream(name)

    with LocalKinesis(args.emulator, port=args.port) as emulator:
        if streams:
            anyio.run(create, emulator.endpoint_url)
        print(f"{args.emulator} running at {emulator.endpoint_url} (Ctrl-C to stop)")
        print(f"  export AWS_ENDPOINT_URL_KINESIS={emulator.endpoint_url} AWS_REGION=us-east-1")
        try:
            while True:
                time.sleep(3600)
        except KeyboardInterrupt:
            print("stopping")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``kinesis-trio`` console script."""
    args: Any = _parser().parse_args(argv)
    try:
        if args.command == "demo":
            return _run_demo(args)
        return _run_local(args)
    except _UsageError as exc:
        print(f"kinesis-trio: error: {exc}", file=sys.stderr)
        return 2
    except (KinesisTrioError, RuntimeError, TimeoutError) as exc:
        print(f"kinesis-trio: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
