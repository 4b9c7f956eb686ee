"""The child side: what a runner process (``python -m benchmarks.runners.<lib> --json ...``) uses.

Holds the common command line of the runners (:func:`runner_parser`), their workload, CPU
time and peak RSS from ``getrusage``, the arrival schedule of latency runs (:func:`put_paced`,
:func:`put_paced_pool`, :func:`sleep_until_next`), quantiles and latency fields, the
:class:`Measurement` and its one JSON result line (:func:`emit`), and the ``main`` of the
synchronous (boto3) runners. Used by ``benchmarks/runners``; ``spool`` also takes
:func:`latency_fields` from it. Every variant runs in its own process so that its CPU time
and peak RSS are its own.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import statistics
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

T = TypeVar("T")


def runner_parser(description: str) -> argparse.ArgumentParser:
    """The command line every ``run_*`` runner takes (runners add their own options)."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--json", action="store_true", help="print one JSON result line only")
    p.add_argument("--endpoint", required=True, help="Kinesis endpoint URL (the emulator)")
    p.add_argument("--stream", required=True, help="existing stream to write to")
    p.add_argument("--count", type=int, default=100_000, help="records (throughput mode)")
    p.add_argument("--size", type=int, default=200, help="bytes of data per record")
    p.add_argument("--keys", type=int, default=256, help="distinct partition keys, cycled")
    p.add_argument("--shards", type=int, default=1, help="shards of the stream (reported)")
    p.add_argument("--linger", type=float, default=0.05, help="record_max_buffered_time, s")
    p.add_argument(
        "--mode",
        choices=["confirmed", "fire-and-forget"],
        default="confirmed",
        help="confirmed: await every outcome; fire-and-forget: stop at flush / drained",
    )
    p.add_argument("--aggregation", choices=["on", "off"], default="on")
    p.add_argument(
        "--rate",
        type=float,
        default=0.0,
        help="latency mode: records scheduled at t0 + i/rate (0: throughput mode)",
    )
    p.add_argument("--duration", type=float, default=10.0, help="latency mode: seconds")
    p.add_argument(
        "--rate-limits",
        choices=["lifted", "default"],
        default="lifted",
        help="per-shard limiter of the producer: lifted (10^9/s) or the library default",
    )
    p.add_argument("--variant", default="", help="label echoed in the result")
    return p


def cpu_seconds() -> float:
    """User + system CPU time of this process so far."""
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def peak_rss_mib() -> float:
    """Peak resident set size of this process (``ru_maxrss`` is KiB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def partition_keys(count: int) -> list[str]:
    return [f"key-{i:04d}" for i in range(count)]


def payload(size: int) -> bytes:
    return os.urandom(size)


def record_count(args: argparse.Namespace) -> int:
    """Records to write: ``--count``, or ``rate * duration`` in latency mode."""
    if args.rate > 0:
        return max(1, round(float(args.rate) * float(args.duration)))
    return int(args.count)


def workload(args: argparse.Namespace) -> tuple[bytes, list[str], int]:
    """A run's record data (``--size`` random bytes), partition keys and record count."""
    return payload(args.size), partition_keys(args.keys), record_count(args)


def quantile(sorted_values: Sequence[float], q: float) -> float:
    """Linear-interpolated quantile (``q`` in 0..1) of an ascending sequence."""
    n = len(sorted_values)
    if n == 0:
        return math.nan
    pos = q * (n - 1)
    lo = math.floor(pos)
    hi = min(n - 1, lo + 1)
    frac = pos - lo
    return sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * frac


def latency_fields(latencies_s: list[float]) -> dict[str, Any]:
    """p50/p99/p99.9/max and 101 quantiles (0..100 %), all in milliseconds."""
    values = sorted(latencies_s)
    ms = [v * 1000.0 for v in values]
    return {
        "latency_samples": len(ms),
        "p50_ms": round(quantile(ms, 0.50), 3),
        "p99_ms": round(quantile(ms, 0.99), 3),
        "p999_ms": round(quantile(ms, 0.999), 3),
        "max_ms": round(ms[-1], 3) if ms else math.nan,
        "mean_ms": round(statistics.fmean(ms), 3) if ms else math.nan,
        "quantiles_ms": [round(quantile(ms, i / 100), 3) for i in range(101)],
    }


def latency_timeline(pairs: list[tuple[float, float]], t0: float) -> list[dict[str, float]]:
    """Per second of the schedule: records, p50, p99 and max latency (ms).

    ``pairs`` are ``(scheduled time, latency)`` in seconds; ``t0`` is the schedule's start.
    Shows whether a tail comes from a few stalls or from the whole run.
    """
    buckets: dict[int, list[float]] = {}
    for due, lat in pairs:
        buckets.setdefault(int(due - t0), []).append(lat * 1000.0)
    out: list[dict[str, float]] = []
    for second in sorted(buckets):
        values = sorted(buckets[second])
        out.append(
            {
                "second": second,
                "records": len(values),
                "p50_ms": round(quantile(values, 0.5), 2),
                "p99_ms": round(quantile(values, 0.99), 2),
                "max_ms": round(values[-1], 2),
            }
        )
    return out


@dataclass
class Paced(Generic[T]):
    """What :func:`put_paced` did: one outcome and one scheduled time per record."""

    outcomes: list[T]
    scheduled: list[float]
    #: the schedule's start: record *i* was due at ``t_start + i/rate``
    t_start: float
    #: how far the putter fell behind the schedule, worst case (s)
    max_lag: float
    #: ``cpu_seconds()`` just before the schedule started
    cpu0: float


async def put_paced(
    put: Callable[[str], Awaitable[T]],
    keys: Sequence[str],
    n: int,
    rate: float,
    now: Callable[[], float],
) -> Paced[T]:
    """Latency mode of the async runners: put record *i* at ``t_start + i/rate``.

    ``put(key)`` puts one record and returns its outcome; ``keys`` are cycled. The putter
    sleeps until a record's scheduled time on the clock ``now``, or does not sleep when it is
    behind (no coordinated omission: its lag counts in every late record). Does not flush.
    """
    import anyio  # here, not at the top: the synchronous runners do not load anyio

    sleep = anyio.sleep
    nkeys = len(keys)
    outcomes: list[T] = []
    scheduled: list[float] = []
    max_lag = 0.0
    cpu0 = cpu_seconds()
    t_start = now() + 0.01
    for i in range(n):
        due = t_start + i / rate
        t = now()
        if t < due:
            await sleep(due - t)
        elif t - due > max_lag:
            max_lag = t - due
        scheduled.append(due)
        outcomes.append(await put(keys[i % nkeys]))
    return Paced(outcomes, scheduled, t_start, max_lag, cpu0)


async def put_paced_pool(
    put: Callable[[str], Awaitable[T]],
    keys: Sequence[str],
    n: int,
    rate: float,
    now: Callable[[], float],
    tasks: int,
) -> tuple[Paced[T], list[float]]:
    """:func:`put_paced` with ``tasks`` putters, for a ``put`` that waits (``spool_sync="put"``).

    Each putter takes the next record, sleeps until it is due at ``t_start + i/rate`` (not
    when behind) and puts it, so up to ``tasks`` puts wait at once. When all of them wait,
    the next record is put late and its lag counts, as in :func:`put_paced`. Also returns
    each ``put``'s latency from the record's scheduled arrival (seconds, in record order).
    """
    import anyio

    sleep = anyio.sleep
    nkeys = len(keys)
    slots: list[T | None] = [None] * n
    put_latency = [0.0] * n
    taken = 0
    max_lag = 0.0
    cpu0 = cpu_seconds()
    t_start = now() + 0.01

    async def putter() -> None:
        nonlocal taken, max_lag
        while taken < n:
            i = taken
            taken += 1
            due = t_start + i / rate
            t = now()
            if t < due:
                await sleep(due - t)
            elif t - due > max_lag:
                max_lag = t - due
            slots[i] = await put(keys[i % nkeys])
            put_latency[i] = now() - due

    async with anyio.create_task_group() as tg:
        for _ in range(max(1, tasks)):
            tg.start_soon(putter)
    outcomes = [o for o in slots if o is not None]
    scheduled = [t_start + i / rate for i in range(n)]
    return Paced(outcomes, scheduled, t_start, max_lag, cpu0), put_latency


def sleep_until_next(
    pending: Sequence[float],
    linger: float,
    t_start: float,
    i: int,
    n: int,
    rate: float,
    now: Callable[[], float],
) -> None:
    """Latency mode of the synchronous runners, between two steps of their batching loop.

    Sleeps until the oldest ``pending`` record (scheduled times) has waited ``linger``
    seconds or record ``i`` of ``n`` is due at ``t_start + i/rate``, whichever comes first.
    """
    wake = pending[0] + linger if pending else t_start + i / rate
    if i < n:
        wake = min(wake, t_start + i / rate)
    t = now()
    if wake > t:
        time.sleep(wake - t)


@dataclass
class Measurement:
    """What a runner measured; ``emit`` turns it into the result line."""

    args: argparse.Namespace
    records: int
    elapsed_s: float
    cpu_s: float
    failed: int
    error_codes: dict[str, int] = field(default_factory=dict)
    latencies_s: list[float] | None = None
    #: latency mode: how far the putter fell behind the schedule, worst case (s)
    max_put_lag_s: float | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def emit(m: Measurement, process_cpu_start: float = 0.0) -> dict[str, Any]:
    """Print the result as one JSON line (``--json``) or as text; return it.

    ``cpu_us_per_record`` is the CPU time around the work only (after the producer was open
    and warmed up, until the end of the measured span); ``cpu_us_per_record_process`` is
    the whole process's CPU time (imports, start-up, teardown included) per record.
    """
    a = m.args
    records = max(m.records, 1)
    process_cpu = cpu_seconds() - process_cpu_start
    out: dict[str, Any] = {
        "variant": a.variant,
        "records": m.records,
        "record_bytes": a.size,
        "keys": a.keys,
        "shards": a.shards,
        "linger_s": a.linger,
        "mode": a.mode,
        "aggregation": a.aggregation == "on",
        "rate_limits": a.rate_limits,
        "elapsed_s": round(m.elapsed_s, 4),
        "records_per_s": round(m.records / m.elapsed_s, 1) if m.elapsed_s > 0 else math.nan,
        "mb_per_s": round(m.records * a.size / m.elapsed_s / 1e6, 3) if m.elapsed_s > 0 else 0,
        "cpu_s": round(m.cpu_s, 4),
        "cpu_us_per_record": round(m.cpu_s / records * 1e6, 3),
        "cpu_us_per_record_process": round(process_cpu / records * 1e6, 3),
        "peak_rss_mib": round(peak_rss_mib(), 1),
        "failed": m.failed,
        "error_codes": m.error_codes,
    }
    if a.rate > 0:
        out["target_rate"] = a.rate
        out["duration_s"] = a.duration
    if m.max_put_lag_s is not None:
        out["max_put_lag_ms"] = round(m.max_put_lag_s * 1000.0, 3)
    if m.latencies_s is not None:
        out.update(latency_fields(m.latencies_s))
    out.update(m.extra)
    if a.json:
        print(json.dumps(out), flush=True)
    else:
        shown = {k: v for k, v in out.items() if k != "quantiles_ms"}
        for k, v in shown.items():
            print(f"{k:>28}: {v}")
    return out


def sync_runner_main(
    description: str,
    *,
    aggregation: str,
    variant: str,
    library: str,
    make_client: Callable[[str], Any],
    throughput: Callable[[argparse.Namespace, Any], Measurement],
    latency: Callable[[argparse.Namespace, Any], Measurement],
) -> None:
    """``main`` of the synchronous (boto3) runners: no outcomes, no per-shard limiter.

    ``make_client(endpoint)`` makes the client; ``latency`` runs with ``--rate`` above 0,
    ``throughput`` otherwise; ``--variant`` defaults to ``variant``.
    """
    args = runner_parser(description).parse_args()
    args.mode = "fire-and-forget"
    args.aggregation = aggregation
    args.rate_limits = "none"
    if not args.variant:
        args.variant = variant
    client = make_client(args.endpoint)
    m = latency(args, client) if args.rate > 0 else throughput(args, client)
    m.extra.update(library=library, backend="sync")
    emit(m)
