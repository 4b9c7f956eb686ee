"""``perf`` and ``demo``: the load generator and its report."""

from __future__ import annotations

import argparse
import math
import os
import resource
import sys
import time
from dataclasses import dataclass

import anyio
import anyio.abc
import anyio.to_thread

from .._config import RECORD_MAX_SIZE_CEILING, ProducerConfig
from .._producer import Producer
from ._options import (
    _config,
    _configured_endpoint,
    _ensure_stream,
    _Target,
    _UsageError,
    _with_target,
)
from ._output import (
    _exit_code,
    _Interrupts,
    _latency_rows,
    _percentile,
    _print_summary,
    _Progress,
    _tick,
    _Tracker,
)


@dataclass
class _LoadResult:
    tracker: _Tracker
    elapsed: float
    cpu: float
    interrupted: int


async def _generate(
    producer: Producer,
    tracker: _Tracker,
    *,
    t0: float,
    count: int,
    size: int,
    keys: int,
    rate: float | None,
    duration: float | None,
) -> None:
    """Put ``count`` records. With ``rate``, record i is due at t0 + i/rate and its latency
    counts from then; when behind schedule it is put at once (no coordinated omission)."""
    payload = os.urandom(size)
    key_list = [f"key-{i}" for i in range(keys)]
    put = producer.put
    add = tracker.add
    now = anyio.current_time
    i = 0
    if rate is None:
        end = t0 + duration if duration is not None else math.inf
        while i < count:
            start = now()
            if start >= end:
                return
            add(await put(payload, key_list[i % keys]), start, size)
            i += 1
        return
    if duration is not None:
        count = min(count, max(1, math.ceil(duration * rate)))
    interval = 1.0 / rate
    while i < count:
        current = now()
        due = min(count, math.floor((current - t0) * rate) + 1)
        if due <= i:
            await anyio.sleep(t0 + i * interval - current)
            continue
        while i < due:
            add(await put(payload, key_list[i % keys]), t0 + i * interval, size)
            i += 1


async def _run_load(
    args: argparse.Namespace,
    target: _Target,
    stream: str,
    config: ProducerConfig,
    *,
    label: str,
    count: int,
    rate: float | None,
    duration: float | None,
) -> _LoadResult:
    tracker = _Tracker()
    progress = _Progress(
        label,
        count if count < sys.maxsize else None,
        quiet=args.quiet,
        interval=args.progress_interval,
    )
    interrupts = _Interrupts(progress)
    t0 = t1 = cpu0 = 0.0
    try:
        async with interrupts.watching():
            with interrupts.abort_scope:
                async with (
                    target.producer(stream, config) as producer,
                    anyio.create_task_group() as tg,
                ):
                    tg.start_soon(_tick, tracker, progress, producer)
                    cpu0 = time.process_time()
                    t0 = anyio.current_time()
                    with interrupts.stop_scope:
                        await _generate(
                            producer,
                            tracker,
                            t0=t0,
                            count=count,
                            size=args.size,
                            keys=args.keys,
                            rate=rate,
                            duration=duration,
                        )
                    await producer.flush()
                    t1 = anyio.current_time()
                    tg.cancel_scope.cancel()
        if not t1:
            t1 = anyio.current_time()
        cpu = time.process_time() - cpu0
        tracker.reap()
    finally:
        progress.close(tracker)
    return _LoadResult(tracker, max(t1 - t0, 1e-9), cpu, interrupts.count)


def _rss_mib() -> float:
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss / 1024 / (1024 if sys.platform == "darwin" else 1)


def _run_perf(args: argparse.Namespace) -> int:
    config = _config(args)
    endpoint = _configured_endpoint(args)
    if args.stream is None and args.shards is None and endpoint is not None:
        raise _UsageError("perf needs --stream NAME, or --shards N to create a new stream")
    # Without an endpoint and without --stream: an embedded emulator and a new stream.
    _check_record_size(args, config)
    count = args.count if args.count is not None else (sys.maxsize if args.duration else 100_000)
    if args.rate and args.duration:
        count = min(count, max(1, math.ceil(args.duration * args.rate)))

    async def perf(target: _Target) -> int:
        async with target.client() as client:
            shards = args.shards if args.stream is not None or args.shards else 4
            stream, created = await _ensure_stream(
                client, args.stream, shards, prefix="kinesis-trio-perf"
            )
        what = f"{count:,} records" if count < sys.maxsize else "records"
        limits = []
        if args.rate:
            limits.append(f"at {args.rate:,.6g} records/s")
        if args.duration:
            limits.append(f"for {args.duration:g} s")
        print(
            f"perf: writing {what} of {args.size:,} bytes over {args.keys:,} keys to {stream}"
            + "".join(f" {limit}" for limit in limits)
            + f" ({'not aggregated' if config.aggregation_enabled is False else 'aggregated'}, "
            f"backend {args.backend})",
            flush=True,
        )
        result = await _run_load(
            args,
            target,
            stream,
            config,
            label="perf",
            count=count,
            rate=args.rate,
            duration=args.duration,
        )
        t = result.tracker
        n = t.accepted
        rows = [
            ("records", f"{n:,}"),
            ("elapsed", f"{result.elapsed:,.2f} s"),
            ("records/s", f"{n / result.elapsed:,.0f}"),
            ("MB/s", f"{t.accepted_bytes / result.elapsed / 1e6:,.2f}"),
        ]
        if args.rate:
            rows.append(("target rate", f"{args.rate:,.6g} records/s"))
        rows += _latency_rows(t.latencies)
        rows += [
            (
                "latency from",
                "each record's scheduled time (t0 + i/rate)" if args.rate else "each put() call",
            ),
            ("CPU us/record", f"{result.cpu / n * 1e6:,.1f}" if n else "n/a"),
            ("throttles", f"{t.throttled_attempts:,} attempts ({t.throttled_records:,} records)"),
            ("failed", f"{t.failed:,}"),
            ("peak RSS", f"{_rss_mib():,.0f} MiB"),
        ]
        notes = []
        if created and not target.local:
            notes.append(f"(stream {stream} was left in place; delete it when done)")
        if result.interrupted:
            notes.append("(interrupted)")
        _print_summary(f"perf: {stream}", rows, t, notes)
        return _exit_code(t, bool(result.interrupted))

    return _with_target(
        args,
        perf,
        embedded=args.stream is None,
        shard_limit=max(100, args.shards or 4),
    )


def _check_record_size(args: argparse.Namespace, config: ProducerConfig) -> None:
    largest = args.size + len(f"key-{args.keys - 1}")
    # Without a setting the stream's own limit applies (1-10 MiB): put says so if it is less.
    limit = config.max_record_size or RECORD_MAX_SIZE_CEILING
    if largest > limit:
        raise _UsageError(
            f"argument -s/--size: {args.size:,} bytes plus the partition key is over the "
            f"record size limit ({limit:,} bytes)"
        )


def _run_demo(args: argparse.Namespace) -> int:
    config = _config(args)
    _check_record_size(args, config)

    async def demo(target: _Target) -> int:
        if args.stream is None:
            async with target.client() as client:
                stream, created = await _ensure_stream(
                    client, None, args.shards, prefix="kinesis-trio-demo"
                )
        else:
            await target.client().aclose()  # validates region and endpoint
            stream, created = args.stream, False
        count = args.count
        print(
            f"writing {count:,} records of {args.size} bytes over {args.keys} keys "
            f"({'not aggregated' if config.aggregation_enabled is False else 'aggregated'}, "
            f"backend {args.backend}) ...",
            flush=True,
        )
        result = await _run_load(
            args, target, stream, config, label="demo", count=count, rate=None, duration=None
        )
        t = result.tracker
        n = t.accepted
        latencies = sorted(t.latencies)
        elapsed = result.elapsed
        print()
        print(
            "| records | elapsed s | records/s | MB/s | p50 ms | p99 ms | CPU us/record | failed |"
        )
        print("|---:|---:|---:|---:|---:|---:|---:|---:|")
        print(
            f"| {n:,} | {elapsed:.2f} | {n / elapsed:,.0f} | "
            f"{n * args.size / elapsed / 1e6:.2f} | {_percentile(latencies, 0.5) * 1e3:.1f} | "
            f"{_percentile(latencies, 0.99) * 1e3:.1f} | "
            f"{result.cpu / max(n, 1) * 1e6:.1f} | {t.failed} |"
        )
        print(f"\npeak RSS {_rss_mib():.0f} MiB")
        if t.failed:
            print("failures by error code: " + ", ".join(f"{k}={v}" for k, v in t.codes.items()))
        if created and not target.local:
            print(f"(stream {stream} was left in place; delete it when done)")
        return _exit_code(t, bool(result.interrupted))

    return _with_target(
        args,
        demo,
        embedded=args.stream is None,
        shard_limit=max(100, args.shards),
    )


# -- produce: records from a file or stdin --------------------------------------------------
