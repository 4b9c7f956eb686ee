"""One kinesis_trio benchmark run in this process; prints one JSON result line with ``--json``.

Throughput mode (``--rate 0``): warm up (one record, confirmed), then put ``--count`` records
as fast as ``put`` accepts them, ``flush()``, and

* ``--mode confirmed``: ``await outcome.wait()`` on every outcome and check ``ok``; the clock
  stops when the last outcome has been awaited (``--confirm result``: read
  ``outcome.result()`` instead of awaiting, as ``flush()`` has resolved them all);
* ``--mode fire-and-forget``: the clock stops when ``flush()`` returns (every record
  resolved, ``outstanding_records == 0``) without looking at any outcome; failures are
  counted from the kept outcomes after the clock stopped.

Latency mode (``--rate R``): record *i* is scheduled at ``t0 + i/R``; the putter sleeps until
a record's scheduled time (or does not sleep when behind) and its latency is
``resolved_at - scheduled`` (no coordinated omission: a putter that falls behind adds its
lag to every late record).

``--put-many N``: the burst goes in ``put_many`` calls of ``N`` records each (the list of
``(data, key)`` tuples built inside the measured span) instead of one ``put`` per record.

``--put-tasks K``: ``K`` tasks put the records instead of one loop, each taking the next
record (in a paced run: sleeping until it is due), so that a ``put`` that waits (for the
spool's fsync with ``--spool-sync put``) does not hold up the records after it; a paced run
then also reports each ``put``'s latency from the record's scheduled arrival (``put_*_ms``).
``--spool-dir DIR`` opens the producer with a spool there (``--spool-sync``). Every run
also reports ``cpu_us_per_record_through_close``: the CPU from the start of the work until
the producer has closed (the spool's last writes and deletes included).

Example: ``uv run python -m benchmarks.runners.kinesis_trio --endpoint URL --stream S``.
"""

from __future__ import annotations

import argparse
import functools
import time

import anyio

from benchmarks._emulator import ACCESS_KEY, REGION, SECRET_KEY, verify_for
from benchmarks._runner import (
    Measurement,
    Paced,
    cpu_seconds,
    emit,
    latency_fields,
    latency_timeline,
    put_paced,
    put_paced_pool,
    runner_parser,
    workload,
)
from kinesis_trio import Outcome, Producer, ProducerConfig, StaticCredentials

#: ``rate_limit`` is a percentage of the shard limits (1000 records/s, 1 MiB/s): 10^8 %
#: is 10^9 records/s per shard, i.e. no limit at all.
_LIFTED_RATE_LIMIT = 1e8


def _config(args: argparse.Namespace) -> ProducerConfig:
    changes: dict[str, object] = {
        "record_max_buffered_time": args.linger,
        "aggregation_enabled": args.aggregation == "on",
        "max_connections": args.max_connections,
        "adaptive_concurrency": not args.fixed_connections,
        # an https endpoint is an emulator's with its own self-signed certificate
        "verify": verify_for(args.endpoint),
    }
    if args.ordering != "none":
        changes["ordering"] = args.ordering
    if args.rate_limits == "lifted":
        changes["rate_limit"] = _LIFTED_RATE_LIMIT
    if args.max_outstanding:
        changes["max_outstanding_records"] = args.max_outstanding
    if args.max_outstanding_mib:
        changes["max_outstanding_bytes"] = args.max_outstanding_mib * 1024 * 1024
    if args.spool_dir:
        changes["spool_dir"] = args.spool_dir
        changes["spool_sync"] = args.spool_sync
    return ProducerConfig().replace(**changes)


def _count_failures(outcomes: list[Outcome]) -> tuple[int, dict[str, int]]:
    failed = 0
    codes: dict[str, int] = {}
    for o in outcomes:
        r = o.result()
        if not r.ok:
            failed += 1
            code = r.error_code or "?"
            codes[code] = codes.get(code, 0) + 1
    return failed, codes


async def _run(args: argparse.Namespace) -> Measurement:
    data, keys, n = workload(args)
    async with Producer(
        args.stream,
        region_name=REGION,
        endpoint_url=args.endpoint,
        credentials=StaticCredentials(ACCESS_KEY, SECRET_KEY),
        config=_config(args),
    ) as producer:
        warm = await producer.put(data, keys[0])
        await producer.flush()
        if not (await warm.wait()).ok:
            raise RuntimeError(f"warm-up record failed: {warm.result()}")
        if args.rate > 0:
            m, cpu0 = await _latency_run(args, producer, data, keys, n)
        else:
            m, cpu0 = await _burst_run(args, producer, data, keys, n)
    m.extra["cpu_us_per_record_through_close"] = round(
        (cpu_seconds() - cpu0) / max(m.records, 1) * 1e6, 3
    )
    return m


async def _put_all(
    args: argparse.Namespace, producer: Producer, data: bytes, keys: list[str], n: int
) -> list[Outcome]:
    """Put the burst's ``n`` records: one loop, ``put_many`` calls (``--put-many``), or
    ``--put-tasks`` tasks taking turns."""
    put = producer.put
    nkeys = len(keys)
    if args.put_many > 0:  # batches of --put-many records, each one put_many call
        size = args.put_many
        batched: list[Outcome] = []
        for start in range(0, n, size):
            batch = [(data, keys[i % nkeys]) for i in range(start, min(start + size, n))]
            batched += await producer.put_many(batch)
        return batched
    if args.put_tasks <= 0:
        outcomes: list[Outcome] = []
        append = outcomes.append
        for i in range(n):
            append(await put(data, keys[i % nkeys]))
        return outcomes
    slots: list[Outcome | None] = [None] * n
    taken = 0

    async def putter() -> None:
        nonlocal taken
        while taken < n:
            i = taken
            taken += 1
            slots[i] = await put(data, keys[i % nkeys])

    async with anyio.create_task_group() as tg:
        for _ in range(args.put_tasks):
            tg.start_soon(putter)
    return [o for o in slots if o is not None]


async def _burst_run(
    args: argparse.Namespace, producer: Producer, data: bytes, keys: list[str], n: int
) -> tuple[Measurement, float]:
    cpu0 = cpu_seconds()
    t0 = time.perf_counter()
    outcomes = await _put_all(args, producer, data, keys, n)
    await producer.flush()
    failed = 0
    codes: dict[str, int] = {}
    if args.mode == "confirmed":
        if args.confirm == "wait":
            for o in outcomes:
                r = await o.wait()
                if not r.ok:
                    failed += 1
                    codes[r.error_code or "?"] = codes.get(r.error_code or "?", 0) + 1
        else:  # flush() returned: every outcome is resolved, read them without awaiting
            failed, codes = _count_failures(outcomes)
    elapsed = time.perf_counter() - t0
    cpu = cpu_seconds() - cpu0
    if args.mode != "confirmed":
        failed, codes = _count_failures(outcomes)
    return Measurement(args, n, elapsed, cpu, failed, codes), cpu0


async def _latency_run(
    args: argparse.Namespace, producer: Producer, data: bytes, keys: list[str], n: int
) -> tuple[Measurement, float]:
    put = functools.partial(producer.put, data)
    put_latencies: list[float] | None = None
    paced: Paced[Outcome]
    if args.put_tasks > 0:
        paced, put_latencies = await put_paced_pool(
            put, keys, n, float(args.rate), anyio.current_time, args.put_tasks
        )
    else:
        paced = await put_paced(put, keys, n, float(args.rate), anyio.current_time)
    await producer.flush()
    t_start, max_lag = paced.t_start, paced.max_lag
    latencies: list[float] = []
    pairs: list[tuple[float, float]] = []
    failed = 0
    codes: dict[str, int] = {}
    last = t_start
    for o, due in zip(paced.outcomes, paced.scheduled, strict=True):
        r = await o.wait()
        if r.ok:
            latencies.append(r.resolved_at - due)
            pairs.append((due, r.resolved_at - due))
        else:
            failed += 1
            codes[r.error_code or "?"] = codes.get(r.error_code or "?", 0) + 1
        last = max(last, r.resolved_at)
    cpu = cpu_seconds() - paced.cpu0
    m = Measurement(
        args, n, last - t_start, cpu, failed, codes, latencies_s=latencies, max_put_lag_s=max_lag
    )
    m.extra["timeline"] = latency_timeline(pairs, t_start)
    if put_latencies is not None:
        put_fields = latency_fields(put_latencies)
        for key in ("p50_ms", "p99_ms", "p999_ms", "max_ms"):
            m.extra[f"put_{key}"] = put_fields[key]
    return m, paced.cpu0


def main() -> None:
    parser = runner_parser(__doc__ or "")
    parser.add_argument("--backend", choices=["trio", "asyncio"], default="trio")
    parser.add_argument("--max-connections", type=int, default=24)
    parser.add_argument(
        "--fixed-connections",
        action="store_true",
        help="always up to --max-connections requests in flight (adaptive_concurrency off)",
    )
    parser.add_argument(
        "--confirm",
        choices=["wait", "result"],
        default="wait",
        help="confirmed mode: `await outcome.wait()` each, or `outcome.result()` after flush()",
    )
    parser.add_argument("--max-outstanding", type=int, default=0, help="records (0: default)")
    parser.add_argument("--max-outstanding-mib", type=int, default=0, help="MiB (0: default)")
    parser.add_argument(
        "--ordering", choices=["none", "per_key"], default="none", help="ProducerConfig.ordering"
    )
    parser.add_argument(
        "--put-tasks",
        type=int,
        default=0,
        help="tasks that put the records (0: one loop awaiting each put in turn)",
    )
    parser.add_argument(
        "--put-many",
        type=int,
        default=0,
        help="put the burst in put_many calls of this many records (0: one put per record)",
    )
    parser.add_argument("--spool-dir", default="", help="ProducerConfig.spool_dir (none if empty)")
    parser.add_argument(
        "--spool-sync", choices=["interval", "put"], default="interval", help="with --spool-dir"
    )
    args = parser.parse_args()
    if not args.variant:
        args.variant = f"kinesis_trio {args.backend} {args.mode} agg={args.aggregation}"
    m = anyio.run(_run, args, backend=args.backend)
    m.extra.update(
        library="kinesis_trio",
        backend=args.backend,
        max_connections=args.max_connections,
        confirm=args.confirm if args.mode == "confirmed" else None,
        ordering=args.ordering,
        put_tasks=args.put_tasks,
        put_many=args.put_many,
        spool_sync=args.spool_sync if args.spool_dir else None,
    )
    emit(m)


if __name__ == "__main__":
    main()
