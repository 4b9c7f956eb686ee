"""One aiokpl 0.2.0 benchmark run (asyncio; aiobotocore); prints one JSON line with ``--json``.

The same protocol as ``run_kinesis_trio``: a confirmed warm-up record, then ``--count``
records put as fast as ``put_record`` accepts them, ``flush()``, and

* ``--mode confirmed``: ``await outcome.wait()`` on every outcome, check ``success``;
* ``--mode fire-and-forget``: aiokpl's ``flush()`` only pushes the buffers out (it does not
  wait for outcomes), so the clock stops when ``outstanding_records`` reaches 0, polled
  every millisecond, as in aiokpl's own benchmark.

Latency mode (``--rate R``): records scheduled at ``t0 + i/R`` on ``time.monotonic`` (the
asyncio loop's clock); latency is the ``ended_at`` of the record's last attempt (taken by
aiokpl's Sender with ``time.monotonic`` right after ``PutRecords`` returned, just before
the outcome is resolved) minus the scheduled time.

Per-shard rate limits: ``--rate-limits lifted`` sets aiokpl's records and bytes per second
per shard to 10^9 / 10^12 (the emulator enforces none); ``default`` keeps aiokpl's 1000
records/s and 1 MiB/s per shard.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import anyio
from aiokpl import Config, Producer

from benchmarks._emulator import (
    ACCESS_KEY,
    LIFTED_BYTES_PER_SHARD,
    LIFTED_RECORDS_PER_SHARD,
    REGION,
    SECRET_KEY,
)
from benchmarks._runner import (
    Measurement,
    cpu_seconds,
    emit,
    latency_timeline,
    put_paced,
    runner_parser,
    workload,
)


def _config(args: argparse.Namespace) -> Any:
    kwargs: dict[str, Any] = {
        "region": REGION,
        "endpoint_url": args.endpoint,
        "verify_ssl": False,
        "aws_access_key_id": ACCESS_KEY,
        "aws_secret_access_key": SECRET_KEY,
        "aggregation_enabled": args.aggregation == "on",
        "record_max_buffered_time_ms": args.linger * 1000.0,
    }
    if args.rate_limits == "lifted":
        kwargs["rate_limit_records_per_sec_per_shard"] = LIFTED_RECORDS_PER_SHARD
        kwargs["rate_limit_bytes_per_sec_per_shard"] = LIFTED_BYTES_PER_SHARD
    if args.max_outstanding:
        kwargs["max_outstanding_records"] = args.max_outstanding
    return Config(**kwargs)


def _tally(results: list[Any]) -> tuple[int, dict[str, int]]:
    failed = 0
    codes: dict[str, int] = {}
    for r in results:
        if not r.success:
            failed += 1
            code = (r.attempts[-1].error_code if r.attempts else None) or "?"
            codes[code] = codes.get(code, 0) + 1
    return failed, codes


async def _run(args: argparse.Namespace) -> Measurement:
    data, keys, n = workload(args)
    nkeys = len(keys)
    stream = args.stream
    async with Producer(_config(args)) as producer:
        warm = await producer.put_record(stream=stream, partition_key=keys[0], data=data)
        await producer.flush()
        result = await warm.wait()
        if not result.success:
            raise RuntimeError(f"warm-up record failed: {result}")
        put = producer.put_record
        outcomes: list[Any] = []
        append = outcomes.append

        if args.rate > 0:
            return await _latency_run(args, producer, data, keys, n)

        cpu0 = cpu_seconds()
        t0 = time.perf_counter()
        for i in range(n):
            append(await put(stream=stream, partition_key=keys[i % nkeys], data=data))
        await producer.flush()
        results: list[Any] = []
        if args.mode == "confirmed":
            results = [await o.wait() for o in outcomes]
            failed, codes = _tally(results)
        else:
            # aiokpl offers no event for "drained": poll, as its own benchmark does
            while producer.outstanding_records > 0:  # noqa: ASYNC110
                await anyio.sleep(0.001)
        elapsed = time.perf_counter() - t0
        cpu = cpu_seconds() - cpu0
        if args.mode != "confirmed":
            failed, codes = _tally([await o.wait() for o in outcomes])
        return Measurement(args, n, elapsed, cpu, failed, codes)


async def _latency_run(
    args: argparse.Namespace, producer: Any, data: bytes, keys: list[str], n: int
) -> Measurement:
    put = producer.put_record
    stream = args.stream
    paced = await put_paced(
        lambda key: put(stream=stream, partition_key=key, data=data),
        keys,
        n,
        float(args.rate),
        time.monotonic,
    )
    await producer.flush()
    results = [await o.wait() for o in paced.outcomes]
    cpu = cpu_seconds() - paced.cpu0
    failed, codes = _tally(results)
    scheduled, t_start, max_lag = paced.scheduled, paced.t_start, paced.max_lag
    latencies = [
        r.attempts[-1].ended_at - due
        for r, due in zip(results, scheduled, strict=True)
        if r.success
    ]
    last = max((r.attempts[-1].ended_at for r in results if r.attempts), default=t_start)
    m = Measurement(
        args, n, last - t_start, cpu, failed, codes, latencies_s=latencies, max_put_lag_s=max_lag
    )
    m.extra["timeline"] = latency_timeline(
        [
            (due, r.attempts[-1].ended_at - due)
            for r, due in zip(results, scheduled, strict=True)
            if r.success
        ],
        t_start,
    )
    return m


def main() -> None:
    parser = runner_parser(__doc__ or "")
    parser.add_argument("--max-outstanding", type=int, default=0, help="records (0: default)")
    args = parser.parse_args()
    if not args.variant:
        args.variant = f"aiokpl asyncio {args.mode} agg={args.aggregation}"
    m = anyio.run(_run, args, backend="asyncio")
    m.extra.update(library="aiokpl", backend="asyncio")
    emit(m)


if __name__ == "__main__":
    main()
