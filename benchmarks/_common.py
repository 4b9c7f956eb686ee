"""Shared helpers for the benchmarks (``python -m benchmarks NAME``).

Two halves:

* **parent side** (the benchmark commands): the variants they compare, start kinesalite,
  create a fresh stream per run, run each variant as a child process
  (``python -m benchmarks.runners.<lib> --json ...``) with a timeout and parse its one JSON
  result line, read the emulator's CPU time from ``/proc/<pid>/stat``, summarize the runs,
  describe the machine, print markdown tables and write ``benchmarks/results/<name>.{md,json}``.
* **child side** (the ``runners`` package): the common command line, CPU time and peak RSS from
  ``getrusage``, the arrival schedule of latency runs, quantiles, the result line, and the
  ``main`` of the synchronous (boto3) runners.

Every variant runs in its own process so that its CPU time and peak RSS are its own.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import importlib.metadata
import json
import math
import os
import platform
import resource
import shlex
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Generic, TypeVar

ROOT = Path(__file__).resolve().parent.parent
RESULTS_DIR = Path(__file__).resolve().parent / "results"

#: Credentials for the emulator (any SigV4-shaped credentials pass).
ACCESS_KEY = "AKIDBENCH"
SECRET_KEY = "bench-secret"
REGION = "us-east-1"

#: "lifted" per-shard rate limits: the emulators enforce none, and the benchmarks measure the
#: producers, not their limiters. 10^9 records/s and bytes/s per shard are never reached.
LIFTED_RECORDS_PER_SHARD = 1e9
LIFTED_BYTES_PER_SHARD = 1e12

T = TypeVar("T")

# ---------------------------------------------------------------------------------------------
# child side
# ---------------------------------------------------------------------------------------------


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


# ---------------------------------------------------------------------------------------------
# parent side
# ---------------------------------------------------------------------------------------------


def on_off(flag: bool) -> str:
    return "on" if flag else "off"


def agg_tag(aggregation: bool) -> str:
    """``agg`` or ``noagg``, as in the variant keys."""
    return "agg" if aggregation else "noagg"


V = TypeVar("V", bound="Variant")


@dataclass
class Variant:
    """One producer set-up that a benchmark runs as ``python -m benchmarks.<module>``.

    Make them with the constructors per runner (``Variant.kinesis_trio(...)`` etc.); a
    benchmark that keeps more per variant subclasses it (keyword-only fields), and the
    constructors take those fields as keywords.
    """

    key: str
    label: str
    module: str
    library: str
    backend: str
    mode: str
    aggregation: bool
    #: extra arguments of the child
    args: list[str] = field(default_factory=list)

    # One constructor per runner: the variants need not repeat what the runner fixes.

    @classmethod
    def kinesis_trio(
        cls: type[V],
        *,
        key: str,
        label: str,
        backend: str,
        mode: str = "confirmed",
        aggregation: bool = True,
        **more: Any,
    ) -> V:
        """A ``run_kinesis_trio`` variant; ``more``: ``args`` and a subclass's fields."""
        return cls(
            key, label, "runners.kinesis_trio", "kinesis_trio", backend, mode, aggregation, **more
        )

    @classmethod
    def aiokpl(
        cls: type[V],
        *,
        key: str,
        label: str,
        mode: str = "confirmed",
        aggregation: bool = True,
        **more: Any,
    ) -> V:
        """A ``run_aiokpl`` variant (asyncio); ``more``: ``args`` and a subclass's fields."""
        return cls(key, label, "runners.aiokpl", "aiokpl", "asyncio", mode, aggregation, **more)

    @classmethod
    def agg_boto3(cls: type[V], label: str, **more: Any) -> V:
        """aws-kinesis-agg + boto3 (``run_agg_boto3``): aggregated, fire-and-forget."""
        library, mode = "aws-kinesis-agg+boto3", "fire-and-forget"
        return cls("agg-boto3", label, "runners.agg_boto3", library, "sync", mode, True, **more)

    @classmethod
    def boto3(cls: type[V], label: str, **more: Any) -> V:
        """Plain boto3 ``put_records`` (``run_boto3``): not aggregated, fire-and-forget."""
        return cls(
            "boto3", label, "runners.boto3", "boto3", "sync", "fire-and-forget", False, **more
        )

    def describe(self) -> dict[str, Any]:
        """The variant's part of a result row."""
        return {
            "variant": self.label,
            "key": self.key,
            "library": self.library,
            "backend": self.backend,
            "mode": self.mode,
            "aggregation": self.aggregation,
        }


def select(variants: list[V], only: str) -> list[V]:
    """The variants whose key is in ``only`` (comma-separated; empty: all)."""
    if not only:
        return variants
    keep = set(only.split(","))
    return [v for v in variants if v.key in keep]


def start_emulator(shard_limit: int = 1000) -> Any:
    """Start kinesalite (``LocalKinesis``) on a free port; the caller stops it."""
    from kinesis_trio.testing._emulators import LocalKinesis

    emulator = LocalKinesis("kinesalite", shard_limit=shard_limit)
    emulator.start()
    return emulator


def create_stream(endpoint: str, shards: int, prefix: str = "bench") -> str:
    """Create a fresh stream with ``shards`` shards and wait until it is ACTIVE."""
    import anyio

    from kinesis_trio import KinesisClient, StaticCredentials

    name = f"{prefix}-{uuid.uuid4().hex[:10]}"

    async def go() -> None:
        async with KinesisClient(
            region_name=REGION,
            endpoint_url=endpoint,
            credentials=StaticCredentials(ACCESS_KEY, SECRET_KEY),
        ) as client:
            await client.create_stream(name, shards)
            await client.wait_for_stream(name)

    anyio.run(go)
    return name


def delete_stream(endpoint: str, name: str) -> None:
    """Delete a stream (frees the emulator's memory between runs); errors are ignored."""
    import anyio

    from kinesis_trio import KinesisClient, StaticCredentials

    async def go() -> None:
        async with KinesisClient(
            region_name=REGION,
            endpoint_url=endpoint,
            credentials=StaticCredentials(ACCESS_KEY, SECRET_KEY),
        ) as client:
            await client.delete_stream(name)

    with contextlib.suppress(Exception):
        anyio.run(go)


def proc_cpu_seconds(pid: int | None) -> float:
    """utime + stime of a process from ``/proc/<pid>/stat`` (nan if unreadable)."""
    if pid is None:
        return math.nan
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return math.nan
    # the command name (field 2) may hold spaces: split after its closing parenthesis
    fields = text[text.rindex(")") + 2 :].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks  # fields 14 and 15 of stat(5)


def proc_rss_mib(pid: int | None) -> float:
    """Current RSS of a process (VmRSS) in MiB (nan if unreadable)."""
    if pid is None:
        return math.nan
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return math.nan


@dataclass
class ChildResult:
    ok: bool
    data: dict[str, Any]
    error: str = ""
    wall_s: float = 0.0
    emulator_cpu_s: float = math.nan


def run_child(
    module: str,
    args: Sequence[str],
    *,
    timeout: float,
    emulator_pid: int | None = None,
) -> ChildResult:
    """Run ``python -m benchmarks.<module> --json ARGS`` and parse its JSON result line.

    Returns ``ok=False`` with the reason (exit code, stderr tail, timeout) instead of
    raising, so that one failing variant does not stop a benchmark.
    """
    cmd = [sys.executable, "-m", f"benchmarks.{module}", "--json", *args]
    emu0 = proc_cpu_seconds(emulator_pid)
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(
            cmd,
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        tail = (exc.stderr or b"")[-2000:]
        text = tail.decode(errors="replace") if isinstance(tail, bytes) else str(tail)
        return ChildResult(
            False,
            {},
            f"timed out after {timeout:.0f}s: {text.strip()}",
            time.perf_counter() - t0,
            proc_cpu_seconds(emulator_pid) - emu0,
        )
    wall = time.perf_counter() - t0
    emu = proc_cpu_seconds(emulator_pid) - emu0
    line = next(
        (ln for ln in reversed(proc.stdout.splitlines()) if ln.startswith("{")),
        None,
    )
    if proc.returncode != 0 or line is None:
        err = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-15:])
        return ChildResult(False, {}, f"exit code {proc.returncode}: {err}", wall, emu)
    data: dict[str, Any] = json.loads(line)
    data["child_wall_s"] = round(wall, 3)
    data["loadavg_1m_after"] = round(os.getloadavg()[0], 2)
    data["emulator_cpu_s"] = round(emu, 3)
    if data.get("records"):
        data["emulator_cpu_us_per_record"] = round(emu / data["records"] * 1e6, 3)
    return ChildResult(True, data, "", wall, emu)


def run_on_fresh_stream(
    emulator: Any,
    module: str,
    *,
    load: Sequence[str],
    size: int,
    keys: int,
    shards: int,
    linger: float,
    extra: Sequence[str],
    timeout: float,
) -> ChildResult:
    """:func:`run_child` on a fresh ``shards``-shard stream, deleted after the run.

    ``load`` is ``--count N`` or ``--rate R --duration S``; ``extra`` follows the common
    arguments (``--size``, ``--keys``, ``--shards``, ``--linger``).
    """
    stream = create_stream(emulator.endpoint_url, shards)
    res = run_child(
        module,
        [
            "--endpoint",
            emulator.endpoint_url,
            "--stream",
            stream,
            *load,
            "--size",
            str(size),
            "--keys",
            str(keys),
            "--shards",
            str(shards),
            "--linger",
            str(linger),
            *extra,
        ],
        timeout=timeout,
        emulator_pid=emulator.pid,
    )
    delete_stream(emulator.endpoint_url, stream)
    return res


def add_stream_flags(parser: argparse.ArgumentParser, shards: int) -> None:
    """``--shards``, ``--size``, ``--keys`` and ``--linger``, as :func:`run_variant` reads them."""
    parser.add_argument("--shards", type=int, default=shards)
    parser.add_argument("--size", type=int, default=200)
    parser.add_argument("--keys", type=int, default=256)
    parser.add_argument("--linger", type=float, default=0.05)


def run_variant(
    emulator: Any, v: Variant, load: Sequence[str], args: argparse.Namespace
) -> ChildResult:
    """Run ``v`` on a fresh stream with the benchmark's stream flags and ``--timeout``."""
    return run_on_fresh_stream(
        emulator,
        v.module,
        load=load,
        size=args.size,
        keys=args.keys,
        shards=args.shards,
        linger=args.linger,
        extra=["--variant", v.label, *v.args],
        timeout=args.timeout,
    )


@dataclass
class Session:
    """A benchmark's machine description and emulator (see :func:`emulator_session`)."""

    info: dict[str, Any]
    emulator: Any
    #: seconds from the emulator's start to its stop (set when the session ends)
    total: float = 0.0


@contextlib.contextmanager
def emulator_session() -> Iterator[Session]:
    """Describe the machine (logged), then run one kinesalite for the block; time it."""
    info = machine_info()
    log(f"machine: {machine_line(info)}")
    started = time.perf_counter()
    session = Session(info, start_emulator(shard_limit=1000))
    try:
        yield session
    finally:
        session.emulator.stop()
        session.total = time.perf_counter() - started


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def _git(*args: str) -> str:
    try:
        return subprocess.run(
            ["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=10, check=False
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def machine_info() -> dict[str, Any]:
    """Cores, memory, CPU model, kernel, Python, package versions and the git commit."""
    mem_kib = 0
    with contextlib.suppress(OSError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem_kib = int(line.split()[1])
    model = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    node = ""
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        node = subprocess.run(
            ["node", "--version"], capture_output=True, text=True, timeout=10, check=False
        ).stdout.strip()
    from kinesis_trio.testing._emulators import EMULATORS

    commit = _git("rev-parse", "--short", "HEAD")
    diff = _git("diff", "HEAD", "--", "kinesis_trio")
    dirty = bool(diff)
    diff_id = hashlib.sha1(diff.encode()).hexdigest()[:10] if dirty else ""
    changed = _git("diff", "HEAD", "--stat", "--", "kinesis_trio").splitlines()[:-1]
    return {
        "cores": os.cpu_count(),
        "cpu_model": model,
        "memory_gib": round(mem_kib / 1024 / 1024, 1),
        "kernel": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "node": node,
        "kinesalite": EMULATORS["kinesalite"],
        "packages": {
            name: _version(name)
            for name in (
                "kinesis-trio",
                "aiokpl",
                "aiobotocore",
                "boto3",
                "botocore",
                "aws-kinesis-agg",
                "anyio",
                "trio",
                "httpx",
            )
        },
        "git_commit": commit
        + (f" + uncommitted changes in kinesis_trio/ (diff sha1 {diff_id})" if dirty else ""),
        "uncommitted_kinesis_trio_files": [line.split("|")[0].strip() for line in changed],
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "loadavg_at_start": [round(x, 2) for x in os.getloadavg()],
    }


def machine_line(info: dict[str, Any]) -> str:
    pk = info["packages"]
    return (
        f"{info['cores']} cores ({info['cpu_model']}), {info['memory_gib']} GiB, "
        f"{info['kernel']}, Python {info['python']}, node {info['node']}, "
        f"kinesalite {info['kinesalite']}; kinesis-trio {pk['kinesis-trio']} at "
        f"{info['git_commit']}, aiokpl {pk['aiokpl']} (aiobotocore {pk['aiobotocore']}), "
        f"boto3 {pk['boto3']}, aws-kinesis-agg {pk['aws-kinesis-agg']}, anyio {pk['anyio']}, "
        f"trio {pk['trio']}, httpx {pk['httpx']}; {info['date']}; load average at start "
        f"{' / '.join(str(x) for x in info.get('loadavg_at_start', []))} (shared machine)"
    )


#: The command a result is written by, set by ``python -m benchmarks NAME ...``.
COMMAND: list[str] = []


def command_line() -> str:
    """The command that regenerates the results being written."""
    words = COMMAND or [sys.modules["__main__"].__spec__.name, *sys.argv[1:]]  # type: ignore[union-attr]
    return "uv run python -m " + " ".join(shlex.quote(a) for a in words)


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[object]], align: str) -> str:
    """A markdown table; ``align`` has one char per column: ``l`` or ``r``."""
    lines = ["| " + " | ".join(headers) + " |"]
    lines.append("|" + "|".join("---" if a == "l" else "---:" for a in align) + "|")
    for row in rows:
        lines.append("| " + " | ".join(str(c) for c in row) + " |")
    return "\n".join(lines)


def write_results(name: str, markdown: str, data: dict[str, Any]) -> tuple[Path, Path]:
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    md = RESULTS_DIR / f"{name}.md"
    js = RESULTS_DIR / f"{name}.json"
    md.write_text(markdown.rstrip() + "\n")
    js.write_text(json.dumps(data, indent=1, sort_keys=False) + "\n")
    record_index([md, js], data.get("machine"))
    return md, js


INDEX_JSON = RESULTS_DIR / "index.json"
INDEX_MD = RESULTS_DIR / "index.md"


def index_machine(info: dict[str, Any]) -> str:
    """The machine as the index gives it (``info`` from :func:`machine_info`)."""
    return (
        f"{info['cores']} cores ({info['cpu_model']}), {info['memory_gib']} GiB, "
        f"Python {info['python']}, node {info['node'] or 'none'}; load average at start "
        f"{' / '.join(str(x) for x in info.get('loadavg_at_start', []))}"
    )


def record_index(files: Sequence[Path], info: dict[str, Any] | None = None) -> None:
    """Note each written results file in ``results/index.{json,md}``: commit, date, machine
    and the command that wrote it. ``info``: the run's :func:`machine_info`, taken at its
    start (without it, or in another shape, it is taken now)."""
    if not (isinstance(info, dict) and {"git_commit", "cores", "date"} <= info.keys()):
        info = machine_info()
    entries: dict[str, dict[str, str]] = {}
    with contextlib.suppress(OSError, ValueError):
        entries = json.loads(INDEX_JSON.read_text())
    for path in files:
        entries[path.name] = {
            "commit": str(info["git_commit"]),
            "date": str(info["date"]),
            "machine": index_machine(info),
            "command": command_line(),
        }
    render_index(entries)


def render_index(entries: dict[str, dict[str, str]]) -> None:
    """Write ``results/index.{json,md}`` from ``entries`` (the files that exist)."""
    entries = {name: entries[name] for name in sorted(entries) if (RESULTS_DIR / name).exists()}
    INDEX_JSON.write_text(json.dumps(entries, indent=1) + "\n")
    lines = [
        "# Benchmark results",
        "",
        "The headline results, each written by the command beside it (`python -m benchmarks "
        "all` writes them all). Commit: the kinesis_trio tree measured.",
        "",
        "| file | commit | date | machine | command |",
        "|---|---|---|---|---|",
    ]
    for name, e in entries.items():
        lines.append(
            f"| [{name}]({name}) | {e['commit']} | {e['date']} | {e['machine']} | "
            f"`{e['command']}` |"
        )
    INDEX_MD.write_text("\n".join(lines) + "\n")


def report_header(title: str, info: dict[str, Any], total: float) -> list[str]:
    """The first lines of a results page: title, command line and machine."""
    return [
        title,
        "",
        f"Command: `{command_line()}` ({total / 60:.1f} min)",
        "",
        f"Machine: {machine_line(info)}",
        "",
    ]


def publish(name: str, md: list[str], data: dict[str, Any], total: float) -> None:
    """Print the markdown and write ``results/<name>.{md,json}``."""
    text = "\n".join(md)
    print(text)
    md_path, json_path = write_results(name, text, data)
    log(f"wrote {md_path} and {json_path} in {total:.0f}s")


def median_of(values: Sequence[float]) -> float:
    clean = [v for v in values if isinstance(v, (int, float)) and not math.isnan(v)]
    return statistics.median(clean) if clean else math.nan


def median_field(runs: Sequence[dict[str, Any]], key: str) -> float:
    """Median of ``key`` over the runs that have it (nan if none)."""
    return median_of([float(r[key]) for r in runs if key in r])


def failed_total(runs: Sequence[dict[str, Any]]) -> int:
    return int(sum(int(r["failed"]) for r in runs))


def cost_medians(runs: Sequence[dict[str, Any]]) -> dict[str, float]:
    """Medians of elapsed time, rates, CPU per record and peak RSS over the runs."""
    return {
        "elapsed_s": round(median_field(runs, "elapsed_s"), 4),
        "records_per_s": round(median_field(runs, "records_per_s"), 1),
        "mb_per_s": round(median_field(runs, "mb_per_s"), 3),
        "cpu_us_per_record": round(median_field(runs, "cpu_us_per_record"), 2),
        "cpu_us_per_record_process": round(median_field(runs, "cpu_us_per_record_process"), 2),
        "peak_rss_mib": round(median_field(runs, "peak_rss_mib"), 1),
    }


def run_summary(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Records, record size and shards of the first run, :func:`cost_medians`, emulator CPU
    per record and the failed records of all runs."""
    return {
        "records": int(runs[0]["records"]) if runs else 0,
        "record_bytes": int(runs[0]["record_bytes"]) if runs else 0,
        "shards": int(runs[0]["shards"]) if runs else 0,
        **cost_medians(runs),
        "emulator_cpu_us_per_record": round(median_field(runs, "emulator_cpu_us_per_record"), 2),
        "failed": failed_total(runs),
    }


def spread_pct(values: Sequence[float]) -> float:
    """(max - min) / median, in percent."""
    clean = [v for v in values if isinstance(v, (int, float)) and not math.isnan(v)]
    if len(clean) < 2:
        return 0.0
    med = statistics.median(clean)
    return (max(clean) - min(clean)) / med * 100.0 if med else math.nan


def fmt_int(v: float) -> str:
    return "n/a" if isinstance(v, float) and math.isnan(v) else f"{v:,.0f}"


def fmt(v: float, digits: int = 2) -> str:
    return "n/a" if isinstance(v, float) and math.isnan(v) else f"{v:,.{digits}f}"


@contextlib.contextmanager
def timed(label: str, log: Callable[[str], None] = print) -> Iterator[None]:
    t0 = time.perf_counter()
    yield
    log(f"{label}: {time.perf_counter() - t0:.1f}s")


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def run_parts(command: str, doc: str, parts: dict[str, str]) -> None:
    """``python -m benchmarks COMMAND [PART [ARGS...]]``: run one part of a command with its
    arguments, or every part with its defaults. ``parts``: part name -> module."""
    import importlib

    argv = sys.argv[1:]
    if argv and argv[0] in ("-h", "--help"):
        print(doc.strip())
        print(f"\nparts (python -m benchmarks {command} PART --help for its options):")
        for part, module in parts.items():
            first = (importlib.import_module(module).__doc__ or "").strip().splitlines()
            print(f"  {part:8} {first[0] if first else ''}")
        return
    if argv and argv[0] not in parts:
        raise SystemExit(
            f"benchmarks {command}: {argv[0]!r} is not a part; the parts: {', '.join(parts)}"
        )
    chosen, rest = ([argv[0]], argv[1:]) if argv else (list(parts), [])
    for part in chosen:
        COMMAND[:] = ["benchmarks", command, part, *rest]
        sys.argv = [f"python -m benchmarks {command} {part}", *rest]
        importlib.import_module(parts[part]).main()
