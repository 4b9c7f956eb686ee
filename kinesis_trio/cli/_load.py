"""``perf`` and ``demo``: the load generator and its report."""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import resource
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import anyio.to_thread

from .._config import RECORD_MAX_SIZE_CEILING, ProducerConfig
from .._core import SHARD_BYTES_PER_SECOND, SHARD_RECORDS_PER_SECOND
from .._errors import ResourceNotFoundError
from .._shell._producer import Producer
from ._options import (
    _config,
    _config_fields,
    _configured_endpoint,
    _ensure_stream,
    _Failure,
    _Target,
    _UsageError,
    _with_target,
)
from ._output import (
    _exit_code,
    _FailedWriter,
    _Interrupts,
    _latency_rows,
    _percentile,
    _perf_rows,
    _print_summary,
    _Progress,
    _tick,
    _Tracker,
)
from ._sums import TIMELINE_STEP, LatencyHistogram, ProcessResult, Timeline, sum_results


@dataclass
class _LoadResult:
    tracker: _Tracker
    elapsed: float
    cpu: float
    interrupted: int
    #: when the load started, on the loop's clock and on the wall clock (``time.time()``)
    t0: float = 0.0
    wall0: float = 0.0


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


@dataclass(frozen=True)
class _Phase:
    """One stretch of load: ``count`` records, paced at ``rate`` (None: as fast as put()
    allows), stopping after ``duration`` seconds if given."""

    label: str
    count: int
    rate: float | None
    duration: float | None


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
    keep_times: bool = False,
    failed: _FailedWriter | None = None,
) -> _LoadResult:
    (result,) = await _run_phases(
        args,
        target,
        stream,
        config,
        [_Phase(label, count, rate, duration)],
        keep_times=keep_times,
        failed=failed,
    )
    return result


async def _run_phases(
    args: argparse.Namespace,
    target: _Target,
    stream: str,
    config: ProducerConfig,
    phases: Sequence[_Phase],
    *,
    progress_for: Callable[[_Phase], _Progress] | None = None,
    before: Callable[[], Awaitable[None]] | None = None,
    keep_times: bool = False,
    failed: _FailedWriter | None = None,
) -> list[_LoadResult]:
    """Run ``phases`` one after the other through one producer; each is flushed before the
    next starts and has its own tracker, elapsed time and CPU time. After a first Ctrl-C
    the current phase stops (its records in flight are waited for) and the later ones are
    skipped; a second one aborts.

    ``progress_for`` makes a phase's progress display (default: :func:`_phase_progress`);
    ``before`` is awaited once the producer is open, before the first phase (a Ctrl-C
    stops it and skips the phases); ``keep_times``: the trackers keep a timeline;
    ``failed``: writes every record that fails (the producer's dead letters), those an
    abort fails included."""
    make_progress = progress_for or (lambda phase: _phase_progress(args, phase))
    done: list[_LoadResult] = []
    progress = make_progress(phases[0])
    tracker = _Tracker(keep_times=keep_times)
    started: tuple[float, float, float] | None = None  # the phase's (t0, wall0, cpu0)
    interrupts = _Interrupts(progress)
    producer = target.producer(stream, config)
    try:
        # the failures are taken outside the abort scope: until the close, every one written
        async with interrupts.watching(), _failures_written(failed, producer):
            with interrupts.abort_scope:
                async with producer:
                    if before is not None:
                        with interrupts.stop_scope:
                            await before()
                        interrupts.next_phase()
                    for index, phase in enumerate(phases):
                        if interrupts.count:
                            break
                        if index:
                            tracker = _Tracker(keep_times=keep_times)
                            progress = make_progress(phase)
                            interrupts.next_phase(progress)
                        async with anyio.create_task_group() as tg:
                            tg.start_soon(_tick, tracker, progress, producer, failed)
                            cpu0 = time.process_time()
                            t0 = anyio.current_time()
                            wall0 = time.time()
                            started = (t0, wall0, cpu0)
                            with interrupts.stop_scope:
                                await _generate(
                                    producer,
                                    tracker,
                                    t0=t0,
                                    count=phase.count,
                                    size=args.size,
                                    keys=args.keys,
                                    rate=phase.rate,
                                    duration=phase.duration,
                                )
                            await producer.flush()
                            t1 = anyio.current_time()
                            cpu = time.process_time() - cpu0
                            tg.cancel_scope.cancel()
                        started = None
                        tracker.reap()
                        progress.close(tracker)
                        done.append(_LoadResult(tracker, max(t1 - t0, 1e-9), cpu, 0, t0, wall0))
        if started is not None:  # aborted: its records failed as the producer closed
            t0, wall0, cpu0 = started
            t1 = anyio.current_time()
            cpu = time.process_time() - cpu0
            tracker.reap()
            done.append(_LoadResult(tracker, max(t1 - t0, 1e-9), cpu, 0, t0, wall0))
    finally:
        progress.close(tracker)  # a no-op if already closed
    for result in done:
        result.interrupted = interrupts.count
    return done


@contextlib.asynccontextmanager
async def _failures_written(
    failed: _FailedWriter | None, producer: Producer
) -> AsyncIterator[None]:
    """With ``failed``: a task writes the producer's failures until it has closed."""
    if failed is None:
        yield
        return
    async with anyio.create_task_group() as tg:
        tg.start_soon(failed.take_from, producer)
        yield


def _phase_progress(args: argparse.Namespace, phase: _Phase) -> _Progress:
    return _Progress(
        phase.label,
        phase.count if phase.count < sys.maxsize else None,
        quiet=args.quiet,
        interval=args.progress_interval,
    )


def _rss_mib() -> float:
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return rss / 1024 / (1024 if sys.platform == "darwin" else 1)


def _process_result(result: _LoadResult, origin: float) -> ProcessResult:
    """``result`` as a :class:`ProcessResult`, its timeline from ``origin`` (wall clock);
    the tracker must have kept its times."""
    t = result.tracker
    assert t.confirmed_at is not None and t.throttled_at is not None, "keep_times=True"
    to_wall = result.wall0 - result.t0  # loop clock -> wall clock
    return ProcessResult(
        accepted=t.accepted,
        accepted_bytes=t.accepted_bytes,
        ok=t.ok,
        ok_bytes=t.ok_bytes,
        failed=t.failed,
        codes=dict(t.codes.most_common()),
        messages=dict(t.messages),
        throttled_attempts=t.throttled_attempts,
        throttled_records=t.throttled_records,
        started=result.wall0,
        ended=result.wall0 + result.elapsed,
        cpu=result.cpu,
        latency=LatencyHistogram.of(t.latencies),
        peak_rss_mib=_rss_mib(),
        interrupted=bool(result.interrupted),
        timeline=Timeline.of(
            origin,
            TIMELINE_STEP,
            (x + to_wall for x in t.confirmed_at),
            (x + to_wall for x in t.throttled_at),
        ),
    )


def _json_report(
    args: argparse.Namespace,
    stream: str,
    config: ProducerConfig,
    processes: Sequence[dict[str, Any]],
    results: Sequence[ProcessResult],
) -> dict[str, Any]:
    """What ``--json-report`` writes: the settings, the sum and each process."""
    return {
        "stream": stream,
        "processes": args.processes,
        "load": {
            "size": args.size,
            "keys": args.keys,
            "count": args.count,
            "rate": args.rate,
            "duration": args.duration,
            "stagger": args.stagger,
            "backend": args.backend,
        },
        "config": _config_fields(args),
        "aggregated": config.aggregation_enabled is not False,
        "sum": sum_results(results).to_json() if results else None,
        "per_process": list(processes),
    }


def _write_json(path: str, data: dict[str, Any]) -> None:
    Path(path).write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")


def _perf_plan(args: argparse.Namespace) -> tuple[ProducerConfig, int]:
    """``perf``'s settings, checked: its producer's config and the records it writes
    (``sys.maxsize``: no count)."""
    config = _config(args)
    endpoint = _configured_endpoint(args)
    if args.stream is None and args.shards is None and endpoint is not None:
        raise _UsageError("perf needs --stream NAME, or --shards N to create a new stream")
    # Without an endpoint and without --stream: an embedded emulator and a new stream.
    _check_record_size(args, config)
    return config, _perf_count(args)


async def _perf_stream(args: argparse.Namespace, target: _Target) -> tuple[str, bool]:
    """The stream ``perf`` writes to (``--stream``, else a new one of ``--shards``, 4 by
    default) and whether it was created."""
    async with target.client() as client:
        shards = args.shards if args.stream is not None or args.shards else 4
        return await _ensure_stream(client, args.stream, shards, prefix="kinesis-trio-perf")


def _with_perf_target(args: argparse.Namespace, perf: Callable[[_Target], Awaitable[int]]) -> int:
    """Run ``perf`` against the endpoint, or without ``--stream`` an embedded emulator."""
    return _with_target(
        args,
        perf,
        embedded=args.stream is None,
        shard_limit=max(100, args.shards or 4),
    )


def _run_perf(args: argparse.Namespace) -> int:
    config, count = _perf_plan(args)
    with contextlib.ExitStack() as stack:
        failed = None
        if args.failed:
            try:
                file = stack.enter_context(open(args.failed, "w", encoding="utf-8"))
            except OSError as exc:
                raise _UsageError(f"cannot write {args.failed}: {exc.strerror}") from None
            failed = _FailedWriter(file)
        return _perf_in(args, config, count, failed)
    raise AssertionError("unreachable")  # pragma: no cover


def _perf_in(
    args: argparse.Namespace,
    config: ProducerConfig,
    count: int,
    failed: _FailedWriter | None,
) -> int:
    """``perf`` in this process (``failed``: where its failed records go)."""

    async def perf(target: _Target) -> int:
        stream, created = await _perf_stream(args, target)
        print(_perf_header(args, stream, config, count), flush=True)
        keep_times = args.json_report is not None
        result = await _run_load(
            args,
            target,
            stream,
            config,
            label="perf",
            count=count,
            rate=args.rate,
            duration=args.duration,
            keep_times=keep_times,
            failed=failed,
        )
        if failed is not None:
            await failed.flush()
        t = result.tracker
        n = t.accepted
        rows = _perf_rows(
            args.rate,
            n,
            result.elapsed,
            n / result.elapsed,
            t.accepted_bytes / result.elapsed / 1e6,
            _latency_rows(t.latencies),
            result.cpu / n * 1e6 if n else None,
        )
        rows += [
            ("throttles", f"{t.throttled_attempts:,} attempts ({t.throttled_records:,} records)"),
            ("failed", f"{t.failed:,}"),
            ("peak RSS", f"{_rss_mib():,.0f} MiB"),
        ]
        notes = []
        if created and not target.local:
            notes.append(f"(stream {stream} was left in place; delete it when done)")
        if result.interrupted:
            notes.append("(interrupted)")
        if failed is not None and failed.count:
            notes.append(f"{failed.count:,} failed records written to {args.failed}")
        _print_summary(f"perf: {stream}", rows, t, notes)
        code = _exit_code(t, bool(result.interrupted))
        if keep_times:
            one = _process_result(result, result.wall0)
            process = {"index": 0, "pid": os.getpid(), "exit": code, "status": "in process"}
            process["result"] = one.to_json()
            _write_json(args.json_report, _json_report(args, stream, config, [process], [one]))
        return code

    return _with_perf_target(args, perf)


def _perf_header(args: argparse.Namespace, stream: str, config: ProducerConfig, count: int) -> str:
    """E.g. ``perf: writing 100,000 records of 512 bytes over 256 keys to S (aggregated,
    backend trio)``."""
    what = f"{count:,} records" if count < sys.maxsize else "records"
    limits = []
    if args.rate:
        limits.append(f"at {args.rate:,.6g} records/s")
    if args.duration:
        limits.append(f"for {args.duration:g} s")
    return (
        f"perf: writing {what} of {args.size:,} bytes over {args.keys:,} keys to {stream}"
        + "".join(f" {limit}" for limit in limits)
        + f" ({'not aggregated' if config.aggregation_enabled is False else 'aggregated'}, "
        f"backend {args.backend})"
    )


def _perf_count(args: argparse.Namespace) -> int:
    """The records perf writes: -n, else 100,000 (unlimited with --duration); at most
    rate x duration."""
    count: int = (
        args.count if args.count is not None else (sys.maxsize if args.duration else 100_000)
    )
    if args.rate and args.duration:
        count = min(count, max(1, math.ceil(args.duration * args.rate)))
    return count


def _check_record_size(args: argparse.Namespace, config: ProducerConfig) -> None:
    largest = args.size + len(f"key-{args.keys - 1}")
    # Without a setting the stream's own limit applies (1-10 MiB): put says so if it is less.
    limit = config.max_record_size or RECORD_MAX_SIZE_CEILING
    if largest > limit:
        raise _UsageError(
            f"argument -s/--size: {args.size:,} bytes plus the partition key is over the "
            f"record size limit ({limit:,} bytes)"
        )


# -- demo: a steady phase the stream can take, then an optional burst -----------------------

#: The demo's default steady rate, as a fraction of the shards' write limits.
DEMO_LOAD = 0.8

#: What a failed record's error code means, for the demo's failure lines.
_FAILURE_MEANINGS = {
    "ProvisionedThroughputExceededException": "a shard refused the write because it was over "
    "its limits (1,000 records/s, 1 MiB/s); the producer retries such records until "
    "record_ttl, so a failure with this code means --fail-if-throttled was given",
    "RecordExpired": "not confirmed within record_ttl: the producer kept retrying "
    "(throttling, server errors, an unreachable endpoint) until the time ran out; the "
    "message names the last error",
    "InternalFailure": "the service failed internally: a transient error the producer "
    "retries until record_ttl",
    "ServiceUnavailable": "the service was unavailable (HTTP 503): transient, retried until "
    "record_ttl",
    "ProducerAborted": "the run was aborted (a second Ctrl-C) while the record was in flight; "
    "it may or may not have been written",
    "ProducerCloseTimeout": "the producer closed (close_timeout) before the record was "
    "confirmed; it may or may not have been written",
    "RecordTooLarge": "the stream's record size limit was lowered below this record after "
    "put() accepted it",
    "AccessDeniedException": "these credentials may not write to the stream (IAM); retrying "
    "cannot help",
    "ResourceNotFoundException": "the stream does not exist (any more)",
    "ValidationException": "the service rejected the request as invalid; retrying cannot help",
    "InvalidArgumentException": "the service rejected the request as invalid; retrying cannot help",
}


def _key_bytes(keys: int) -> float:
    """The mean length of the demo's partition keys, ``key-0`` ... ``key-{keys - 1}``."""
    return sum(len(f"key-{i}") for i in range(keys)) / keys


def _steady_rate(
    shards: int, record_bytes: float, *, aggregated: bool, load: float = DEMO_LOAD
) -> tuple[float, bool]:
    """Records/s at ``load`` of ``shards`` shards' write limits, and whether the bytes limit
    (1 MiB/s) binds rather than the records limit (1,000/s).

    ``record_bytes`` is a record's data plus its partition key. Aggregated, the records
    limit counts aggregates, not user records: the bytes limit binds.
    """
    by_bytes = SHARD_BYTES_PER_SECOND / record_bytes
    if aggregated or by_bytes <= SHARD_RECORDS_PER_SECOND:
        return load * shards * by_bytes, True
    return load * shards * SHARD_RECORDS_PER_SECOND, False


def _limit_note(shards: int, record_bytes: float, *, aggregated: bool) -> str:
    """E.g. ``4 shards' limits: 1 MiB/s each; records are aggregated, so bytes bind``."""
    _, bytes_bind = _steady_rate(shards, record_bytes, aggregated=aggregated)
    whose = "1 shard's limits" if shards == 1 else f"{shards:,} shards' limits"
    if aggregated:
        return f"{whose}: 1 MiB/s each; records are aggregated, so bytes bind"
    if bytes_bind:
        return (
            f"{whose}: 1 MiB/s each; records are not aggregated but {record_bytes:,.0f} "
            "bytes each, so bytes bind"
        )
    return f"{whose}: 1,000 records/s each; records are not aggregated, so records/s binds"


def _rate_text(rate: float) -> str:
    return f"{rate:,.0f}" if rate >= 100 else f"{rate:,.3g}"


async def _open_shards(target: _Target, stream: str) -> int:
    """The open shard count of the existing ``stream``."""
    async with target.client() as client:
        try:
            summary = await client.describe_stream_summary(stream)
        except ResourceNotFoundError:
            raise _Failure(
                f"stream {stream!r} does not exist at {client.endpoint_url} "
                "(leave out --stream to create one)"
            ) from None
        count = summary.get("OpenShardCount")
        if isinstance(count, int) and count > 0:
            return count
        return max(1, len(await client.list_shards(stream)))


def _phase_row(label: str, result: _LoadResult) -> str:
    t = result.tracker
    latencies = sorted(t.latencies)
    p50, p99 = (_percentile(latencies, q) * 1e3 for q in (0.5, 0.99))
    cells = [
        label,
        f"{t.accepted:,}",
        f"{t.ok / result.elapsed:,.0f}",
        f"{t.ok_bytes / result.elapsed / 1e6:,.2f}",
        "n/a" if math.isnan(p50) else f"{p50:,.1f}",
        "n/a" if math.isnan(p99) else f"{p99:,.1f}",
        f"{result.cpu / t.accepted * 1e6:,.1f}" if t.accepted else "n/a",
        f"{t.failed:,}",
    ]
    return "| " + " | ".join(cells) + " |"


def _failure_lines(results: Sequence[_LoadResult]) -> list[str]:
    codes: Counter[str] = Counter()
    messages: dict[str, str] = {}
    for result in results:
        codes.update(result.tracker.codes)
        for code, message in result.tracker.messages.items():
            messages.setdefault(code, message)
    failed = sum(codes.values())
    if not failed:
        return [
            "failed: 0 failed: every record was confirmed by the service (a sequence number "
            "for each)."
        ]
    lines = [f"failed: {failed:,} record{'s' if failed != 1 else ''} not written; by error code:"]
    for code, n in codes.most_common():
        meaning = _FAILURE_MEANINGS.get(code)
        if meaning is None and code.startswith("KMS"):
            meaning = "a problem with the stream's KMS encryption key (disabled, missing, denied)"
        line = f"  {code}: {n:,}: {meaning or 'see the message'}"
        if messages.get(code):
            line += f" (first message: {messages[code][:200]})"
        lines.append(line)
    return lines


def _run_demo(args: argparse.Namespace) -> int:
    config = _config(args)
    _check_record_size(args, config)
    aggregated = config.aggregation_enabled is not False
    record_bytes = args.size + _key_bytes(args.keys)

    async def demo(target: _Target) -> int:
        if args.stream is None:
            async with target.client() as client:
                stream, created = await _ensure_stream(
                    client, None, args.shards, prefix="kinesis-trio-demo"
                )
            shards = args.shards
        else:
            stream, created = args.stream, False
            shards = await _open_shards(target, stream)
        full, _ = _steady_rate(shards, record_bytes, aggregated=aggregated, load=1.0)
        limits = _limit_note(shards, record_bytes, aggregated=aggregated)
        if args.rate is None:
            rate = full * DEMO_LOAD
            why = f"{DEMO_LOAD * 100:.0f} % of {limits}"
        else:
            rate = args.rate
            why = f"--rate: {rate / full * 100:,.0f} % of {limits}"
        count = max(1, math.ceil(args.duration * rate))
        if args.count is not None:
            count = min(count, args.count)
        linger = config.record_max_buffered_time
        print(
            f"demo: {args.size:,}-byte records over {args.keys:,} keys to {stream} "
            f"({'aggregated' if aggregated else 'not aggregated'}, linger {linger:g} s, "
            f"backend {args.backend})",
            flush=True,
        )
        capped = f", at most {count:,} records by --count" if args.count is not None else ""
        print(
            f"steady phase: {_rate_text(rate)} records/s for {args.duration:g} s{capped} ({why})",
            flush=True,
        )
        phases = [_Phase("steady", count, rate, args.duration)]
        if args.burst is not None:
            print(
                f"then a burst: {args.burst:,} records as fast as put() allows",
                flush=True,
            )
            phases.append(_Phase("burst", args.burst, None, None))
        results = await _run_phases(args, target, stream, config, phases)
        print()
        print("| phase | records | records/s | MB/s | p50 ms | p99 ms | CPU µs/record | failed |")
        print("|:---|---:|---:|---:|---:|---:|---:|---:|")
        for phase, result in zip(phases, results, strict=False):  # fewer if interrupted
            print(_phase_row(phase.label, result))
        print()
        print(
            "records/s, MB/s: records confirmed per second of the phase, from its first put() "
            "to its last confirmation, and their data in MB (10^6 bytes)."
        )
        print(
            "latency (steady): from each record's scheduled arrival (start + i/rate) to its "
            f"confirmed write; the producer holds a record up to the linger ({linger:g} s) to "
            f"fill {'an aggregate' if aggregated else 'a request'} (less if it fills sooner), so "
            "a p50 near or below the linger is expected."
        )
        if len(results) > 1:
            print(
                "latency (burst): from each put() call to its confirmed write; after a "
                "first second's worth the producer sends at most rate_limit "
                f"({config.rate_limit:g} % of the shards' limits), so a record waits behind "
                "those put before it: this grows with the burst and is the queue, not the "
                "producer's cost (that is CPU)."
            )
        where = (
            "the local engine runs in another process"
            if target.local
            else "the service's own work is not counted"
        )
        print(
            "CPU: this process's CPU time (producer and load loop) per record put; " + where + "."
        )
        for line in _failure_lines(results):
            print(line)
        print(f"peak RSS: {_rss_mib():,.0f} MiB (this process's peak resident memory).")
        interrupted = not results or bool(results[0].interrupted)
        if interrupted and len(results) < len(phases):
            print("(interrupted: the later phases were skipped)")
        elif interrupted:
            print("(interrupted)")
        if created and not target.local:
            print(f"(stream {stream} was left in place; delete it when done)")
        failed = [r.tracker for r in results if r.tracker.failed]
        return _exit_code(failed[0] if failed else _Tracker(), interrupted)

    return _with_target(
        args,
        demo,
        embedded=args.stream is None,
        shard_limit=max(100, args.shards),
    )


# -- produce: records from a file or stdin --------------------------------------------------
