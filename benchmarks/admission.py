"""Admission by time, on and off, side by side: does a slow endpoint still expire records?

``ProducerConfig.admission_ttl_share`` (on: a share of ``record_ttl``, 0.5 by default) makes
``put`` wait when a record accepted now would not be sent in time; ``None`` (off) admits by
count and bytes only, as the KPL does. Each case runs off and on, on trio and on asyncio, in
one run, everything else at the defaults:

* ``overload``: the ``overload`` command's workload (20,000 records of 1 B to 300 KB, 4
  shards, put as fast as ``put`` allows) on kinesis-local (the Python engine,
  ``LocalKinesis("python")``, without Node.js); a fresh stream per run.
* ``paced-10x`` / ``paced-100x``: the Python engine (``FakeKinesis`` served over HTTP, in a
  process of its own, fresh for each run) with one worker serving every request at a fixed
  pace in request bytes/s (``ServerModel(workers=1, per_request=0, per_byte=1/pace)``): 10x
  and 100x slower than the offered rate. The offered rate: ``--rate`` (4,000) records/s of
  ~1 KB over 256 keys on 4 shards for ``--window`` (20) seconds, one putter that keeps to
  the schedule (record *i* due at ``t0 + i/rate``) and falls behind when ``put`` waits.
* ``hot-shard``: the Python engine with AWS's per-shard limits (1,000 records/s, 1 MiB/s);
  a putter offers 3x the limit to one key (one shard), another 1,000 records/s over 255 keys
  spread on 4 shards (each shard's share well within its limit).
* ``slow-link``: the Python engine behind a bandwidth-shaping TCP proxy (``_shaper``: the
  upload paced to ``--link-rate``, 400 kB/s; answers not delayed); 30,000 records of ~1 KB
  put as fast as ``put`` allows. Besides the counts: the bytes the link carried up, the
  time they need at its rate, and the run's time against it.

A paced case's window ends by cancelling the putters: a ``put`` waiting then is not
accepted (``offered`` - ``accepted``). Then every accepted record's outcome is awaited.
For each run: records ok, expired (of which waiting in the producer's queue: the expiry's
message says where the record waited), other failures, confirmed records/s (records ok over
the time from the first ``put`` to the last record confirmed), ``put``'s p50/p99/max wait
(burst: each call's; on schedule: from the time the record was due to ``put`` returning, so
the records held back behind a waiting ``put`` count its wait too; the ``put`` the window's
end cancelled counts as well), and per pair the ratio on/off of confirmed records/s.
Printed only (no result file)::

    uv run python -m benchmarks admission                    # every case, about 20 min
    uv run python -m benchmarks admission --quick            # CI-sized: about 4 min
    uv run python -m benchmarks admission --cases slow-link --backends trio
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import functools
import json
import math
import os
import socket
import subprocess
import sys
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Literal

import anyio

from kinesis_trio import Outcome, Producer, ProducerConfig, RecordResult, StaticCredentials
from kinesis_trio._outcome import EXPIRED

from ._command import ROOT
from ._emulator import create_stream, delete_stream

CREDS = StaticCredentials("AKIDBENCH", "bench-secret")
REGION = "us-east-1"
STREAM = "admission"
SHARDS = 4
RECORD = 1000  # bytes of data per record of the paced, hot-shard and slow-link cases
KEYS = [f"key-{i:04d}" for i in range(256)]
#: what the message of a record that expired in the producer's own queues says
IN_QUEUE = "producer's queue"
#: request bytes per record byte: base64 (4/3) and the JSON around each entry
BODY_PER_BYTE = 4 / 3


class AdmissionUnavailable(RuntimeError):
    """This build's ProducerConfig has no ``admission_ttl_share``: only "off" can run."""


def _config_fields() -> dict[str, Any]:
    return {f.name: f.default for f in dataclasses.fields(ProducerConfig)}


def default_share() -> float | None:
    """``admission_ttl_share``'s default in this build (None if it has no such setting)."""
    share = _config_fields().get("admission_ttl_share")
    return share if isinstance(share, float) else None


def producer_config(
    admission: bool, ttl: float, share: float | None = None, **settings: Any
) -> ProducerConfig:
    """The defaults (but ``settings``) with ``record_ttl=ttl``, admission by time on
    (``share``, else the default share) or off (``None``). Without the setting, off is the
    producer as it is."""
    kwargs: dict[str, Any] = {**settings, "record_ttl": ttl}
    if "admission_ttl_share" in _config_fields():
        kwargs["admission_ttl_share"] = (share or default_share() or 0.5) if admission else None
    elif admission:
        raise AdmissionUnavailable("ProducerConfig has no admission_ttl_share in this build")
    return ProducerConfig(**kwargs)


# ---------------------------------------------------------------------------------------
# the endpoint: the Python engine, paced, throttled or behind a slow link
# ---------------------------------------------------------------------------------------


@dataclass
class EngineSpec:
    """A Python engine for one run: a fresh ``FakeKinesis`` served over HTTP."""

    shards: int = SHARDS
    #: serve every request at this many request bytes/s, one at a time (None: at once)
    pace: float | None = None
    #: AWS's per-shard write limits (1,000 records/s, 1 MiB/s)
    limits: bool = False
    #: a shaping proxy in front, its upload paced to this many bytes/s (None: no proxy)
    link: float | None = None


@dataclass
class Served:
    """A running engine: where to send, and its figures at the end."""

    endpoint_url: str
    stats: Callable[[], dict[str, Any]]


@contextlib.asynccontextmanager
async def serve_engine(spec: EngineSpec) -> AsyncIterator[Served]:
    """Serve ``spec``'s engine (and its proxy) in the caller's event loop."""
    from kinesis_trio.testing import FakeKinesis, ServerModel, serve

    from ._shaper import shaping_proxy

    server = None
    if spec.pace is not None:
        server = ServerModel(workers=1, per_request=0.0, per_byte=1.0 / spec.pace)
    fake = FakeKinesis(enforce_limits=spec.limits, server=server, request_log=0)
    fake.create_stream(STREAM, shard_count=spec.shards)

    def stats() -> dict[str, Any]:
        s = fake.stats
        out: dict[str, Any] = {
            "requests": s.requests,
            "entries_stored": s.entries_ok,
            "entries_throttled": s.entries_throttled,
        }
        if server is not None:
            out["served"] = server.served
            out["abandoned"] = server.abandoned
        return out

    async with serve(fake) as local:
        if spec.link is None:
            yield Served(local.endpoint_url, stats)
            return
        host, port = local.endpoint_url.rsplit("/", 1)[-1].rsplit(":", 1)
        async with shaping_proxy(host, int(port), spec.link) as proxy:

            def with_link() -> dict[str, Any]:
                return {**stats(), **proxy.stats()}

            yield Served(proxy.endpoint_url, with_link)


async def _engine_child(spec: EngineSpec) -> None:
    """``--engine SPEC``: serve, print ``{"endpoint": ...}``, and at EOF on stdin the
    figures (``{"stats": ...}``), then exit."""
    async with serve_engine(spec) as served:
        print(json.dumps({"endpoint": served.endpoint_url}), flush=True)
        await anyio.to_thread.run_sync(sys.stdin.read)
        print(json.dumps({"stats": served.stats()}), flush=True)


class EngineProcess:
    """A Python engine in a process of its own (``python -m benchmarks.admission --engine``)."""

    def __init__(self, spec: EngineSpec) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "benchmarks.admission", "--engine", json.dumps(asdict(spec))],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            self.proc.kill()
            raise RuntimeError("the engine process exited before serving")
        self.endpoint_url: str = json.loads(line)["endpoint"]

    def stop(self) -> dict[str, Any]:
        """Stop it; its figures."""
        try:
            out, _ = self.proc.communicate("", timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return {}
        for line in reversed(out.splitlines()):
            if line.startswith("{"):
                stats: dict[str, Any] = json.loads(line).get("stats", {})
                return stats
        return {}


def asdict(spec: EngineSpec) -> dict[str, Any]:
    return dataclasses.asdict(spec)


# ---------------------------------------------------------------------------------------
# the workload and one run
# ---------------------------------------------------------------------------------------


@dataclass
class Putter:
    """Offer ``rate`` records/s of ``size`` bytes over ``keys``, on schedule."""

    rate: float
    keys: list[str]
    size: int = RECORD
    label: str = "p"


@dataclass
class Workload:
    """Either ``burst`` (records put one after another as fast as ``put`` allows) or
    ``putters`` on schedule for ``window`` seconds."""

    burst: Callable[[], Iterator[tuple[bytes, str]]] | None = None
    putters: list[Putter] = field(default_factory=list)
    window: float = 0.0

    def offered_bytes(self) -> float:
        """Record bytes offered per second by the putters."""
        return sum(p.rate * p.size for p in self.putters)


@dataclass
class Run:
    """One run's figures."""

    offered: int = 0
    accepted: int = 0
    ok: int = 0
    expired: int = 0
    expired_in_queue: int = 0
    failed_other: Counter[str] = field(default_factory=Counter)
    #: where expired records waited (the end of their message) and their last attempt's error
    expiry_reasons: Counter[str] = field(default_factory=Counter)
    flagged: int = 0
    unresolved: int = 0
    confirmed_per_s: float = 0.0
    put_p50_ms: float = 0.0
    put_p99_ms: float = 0.0
    put_max_ms: float = 0.0
    elapsed_s: float = 0.0
    engine: dict[str, Any] = field(default_factory=dict)
    error: str = ""

    def row(self) -> dict[str, Any]:
        out = dataclasses.asdict(self)
        out["failed_other"] = dict(self.failed_other)
        out["expiry_reasons"] = dict(self.expiry_reasons)
        return out


def _quantile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def tally(
    results: list[RecordResult], t0: float, waits: list[float], offered: int, unresolved: int
) -> Run:
    """A run's figures from its outcomes (``t0``: the first ``put``, on the loop's clock)."""
    run = Run(offered=offered, accepted=len(results) + unresolved, unresolved=unresolved)
    last_ok = t0
    last = t0
    for r in results:
        last = max(last, r.resolved_at)
        if r.possible_duplicate:
            run.flagged += 1
        if r.ok:
            run.ok += 1
            last_ok = max(last_ok, r.resolved_at)
        elif r.error_code == EXPIRED:
            run.expired += 1
            message = r.error_message or ""
            run.expired_in_queue += IN_QUEUE in message
            last_error = r.attempts[-1].error_code if r.attempts else None
            run.expiry_reasons[f"{message.rsplit('; ', 1)[-1]} [last error: {last_error}]"] += 1
        else:
            run.failed_other[r.error_code or "?"] += 1
    run.confirmed_per_s = run.ok / (last_ok - t0) if last_ok > t0 else 0.0
    run.elapsed_s = last - t0
    run.put_p50_ms = _quantile(waits, 0.5) * 1000
    run.put_p99_ms = _quantile(waits, 0.99) * 1000
    run.put_max_ms = max(waits, default=0.0) * 1000
    return run


def _data(label: str, i: int, size: int) -> bytes:
    head = b"%s%d:" % (label.encode(), i)
    return head + b"x" * max(0, size - len(head))


async def produce(
    endpoint: str, stream: str, workload: Workload, config: ProducerConfig, limit: float
) -> Run:
    """Put ``workload``, await every accepted record's outcome (for at most ``limit`` s)."""
    outcomes: list[Outcome] = []
    waits: list[float] = []
    now = anyio.current_time
    offered = 0
    async with Producer(
        stream, region_name=REGION, endpoint_url=endpoint, credentials=CREDS, config=config
    ) as producer:
        t0 = now()

        async def timed_put(data: bytes, key: str, due: float | None = None) -> None:
            # the wait from the call, or (on schedule) from when the record was due: a put
            # that waited holds back the records due behind it, and they count it too
            started = now() if due is None else due
            try:
                outcome = await producer.put(data, key)
            finally:  # a put the window's end cancelled waited too (its record not accepted)
                waits.append(now() - started)
            outcomes.append(outcome)

        async def on_schedule(p: Putter) -> None:
            nkeys = len(p.keys)
            i = 0
            while (due := t0 + i / p.rate) < t0 + workload.window:
                if now() < due:
                    await anyio.sleep_until(due)
                await timed_put(_data(p.label, i, p.size), p.keys[i % nkeys], due)
                i += 1

        if workload.burst is not None:
            for data, key in workload.burst():
                offered += 1
                await timed_put(data, key)
        else:
            offered = sum(math.ceil(workload.window * p.rate) for p in workload.putters)
            # the window's end cancels the putters: a put waiting then is not accepted
            with anyio.CancelScope(deadline=t0 + workload.window):
                async with anyio.create_task_group() as tg:
                    for p in workload.putters:
                        tg.start_soon(on_schedule, p)
        results: list[RecordResult] = []
        with anyio.move_on_after(limit):
            for outcome in outcomes:
                results.append(await outcome.wait())
        unresolved = len(outcomes) - len(results)
    return tally(results, t0, waits, offered, unresolved)


# ---------------------------------------------------------------------------------------
# the cases
# ---------------------------------------------------------------------------------------


@dataclass
class Sizes:
    """How big each case is (``--quick``: CI-sized)."""

    overload_count: int = 20_000
    rate: float = 4_000.0
    window: float = 20.0
    hot_over: float = 3.0
    cold_rate: float = 1_000.0
    link_records: int = 30_000
    link_rate: float = 400_000.0
    ttl: float = 30.0
    #: record_ttl of the overload and slow-link cases (their requests take seconds)
    burst_ttl: float = 30.0

    @classmethod
    def quick(cls) -> Sizes:
        return cls(
            overload_count=2_000,
            rate=1_000.0,
            window=4.0,
            cold_rate=300.0,
            link_records=2_000,
            ttl=10.0,
        )


@dataclass
class Case:
    name: str
    what: str
    workload: Workload
    engine: EngineSpec | None  # None: the shared emulator (kinesis-local)
    shards: int = SHARDS

    def ttl(self, sizes: Sizes) -> float:
        return sizes.burst_ttl if self.workload.burst is not None else sizes.ttl


def _overload_burst(count: int) -> Callable[[], Iterator[tuple[bytes, str]]]:
    def burst() -> Iterator[tuple[bytes, str]]:
        from .overload import records

        for i, payload in enumerate(records(count)):
            yield payload, f"key-{i % 1000}"

    return burst


def _link_burst(count: int) -> Callable[[], Iterator[tuple[bytes, str]]]:
    def burst() -> Iterator[tuple[bytes, str]]:
        for i in range(count):
            yield _data("l", i, RECORD), KEYS[i % len(KEYS)]

    return burst


def cases(sizes: Sizes, *, emulator: str = "kinesis-local") -> list[Case]:
    """Every case at ``sizes``."""
    offered = sizes.rate * RECORD  # record bytes/s
    paced = Workload(putters=[Putter(sizes.rate, KEYS)], window=sizes.window)
    hot_rate = sizes.hot_over * 1_048_576 / (RECORD + 3)  # 3x one shard's bytes limit
    hot = Workload(
        putters=[Putter(hot_rate, ["hot"], label="h"), Putter(sizes.cold_rate, KEYS, label="c")],
        window=sizes.window,
    )
    link = sizes.link_rate
    return [
        Case(
            "overload",
            f"the overload workload ({sizes.overload_count:,} records of 1 B-300 KB, burst) "
            f"on {emulator}",
            Workload(burst=_overload_burst(sizes.overload_count)),
            None,
        ),
        *(
            Case(
                f"paced-{factor}x",
                f"{sizes.rate:,.0f} records/s of {RECORD} B offered for {sizes.window:g} s; "
                f"the engine serves {offered / factor / 1000:,.1f} kB/s of records "
                f"({offered * BODY_PER_BYTE / factor / 1000:,.1f} kB/s of requests), one "
                "request at a time",
                paced,
                EngineSpec(pace=offered * BODY_PER_BYTE / factor),
            )
            for factor in (10, 100)
        ),
        Case(
            "hot-shard",
            f"{hot_rate:,.0f} records/s of {RECORD} B to one key ({sizes.hot_over:g}x its "
            f"shard's 1 MiB/s) and {sizes.cold_rate:,.0f}/s over 256 keys, {sizes.window:g} s; "
            "AWS's per-shard limits",
            hot,
            EngineSpec(limits=True),
        ),
        Case(
            "slow-link",
            f"{sizes.link_records:,} records of {RECORD} B, burst, through a "
            f"{link / 1000:,.0f} kB/s uplink",
            Workload(burst=_link_burst(sizes.link_records)),
            EngineSpec(link=link),
        ),
    ]


CASE_NAMES = ["overload", "paced-10x", "paced-100x", "hot-shard", "slow-link"]


# ---------------------------------------------------------------------------------------
# running the cases, the table
# ---------------------------------------------------------------------------------------


def run_limit(case: Case, sizes: Sizes) -> float:
    """How long a run may wait for its outcomes before the rest count as unresolved."""
    return case.workload.window + 3 * case.ttl(sizes) + 120


async def run_in_process(
    case: Case, config: ProducerConfig, limit: float, endpoint: str | None = None
) -> Run:
    """One run in this event loop: against ``endpoint`` (a fresh stream is the caller's),
    or against ``case.engine`` served here (the test's way: no processes)."""
    if case.engine is None:
        if endpoint is None:
            raise ValueError(f"case {case.name} needs an endpoint")
        return await produce(endpoint, STREAM, case.workload, config, limit)
    async with serve_engine(case.engine) as served:
        run = await produce(served.endpoint_url, STREAM, case.workload, config, limit)
        run.engine = served.stats()
    return run


def run_case(
    case: Case,
    backend: str,
    admission: bool,
    sizes: Sizes,
    share: float | None,
    emulator_url: str | None,
    settings: dict[str, Any] | None = None,
) -> Run:
    """One run in its own event loop; a Python engine in its own process, fresh."""
    try:
        config = producer_config(admission, case.ttl(sizes), share, **(settings or {}))
    except AdmissionUnavailable as exc:
        return Run(error=str(exc))
    limit = run_limit(case, sizes)
    if case.engine is None:
        assert emulator_url is not None
        stream = create_stream(emulator_url, case.shards, prefix="admission")
        try:
            return anyio.run(
                functools.partial(produce, emulator_url, stream, case.workload, config, limit),
                backend=backend,
            )
        finally:
            delete_stream(emulator_url, stream)
    engine = EngineProcess(case.engine)
    try:
        run = anyio.run(
            functools.partial(produce, engine.endpoint_url, STREAM, case.workload, config, limit),
            backend=backend,
        )
    finally:
        stats = engine.stop()
    run.engine = stats
    return run


@contextlib.contextmanager
def client_send_buffer(size: int) -> Iterator[None]:
    """Every TCP connection this process opens (``anyio.connect_tcp``, the producer's
    included) gets ``SO_SNDBUF`` = ``size``. On loopback Linux lets a socket's send buffer
    grow to ``tcp_wmem``'s maximum (4 MiB here): a client's write then returns at once
    while the shaping proxy still has megabytes to carry, where a real slow path's sender
    (its window bounded by the path) holds far less. Off by default."""
    from anyio.abc import SocketAttribute

    original = anyio.connect_tcp

    async def connect(*args: Any, **kwargs: Any) -> Any:
        stream = await original(*args, **kwargs)
        raw = stream.extra(SocketAttribute.raw_socket, None)
        if raw is not None:
            with contextlib.suppress(OSError):
                raw.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, size)
        return stream

    anyio.connect_tcp = connect
    try:
        yield
    finally:
        anyio.connect_tcp = original


HEADER = [
    "case",
    "backend",
    "admission",
    "offered",
    "accepted",
    "ok",
    "expired (in queue)",
    "other failures",
    "flagged dup",
    "confirmed rec/s",
    "put p50 ms",
    "put p99 ms",
    "put max s",
    "elapsed s",
    "on/off rec/s",
    "slow link: run / link busy",
]


def _link_cell(run: Run) -> str:
    """The run's time against the link's: the time the bytes it carried up need at its
    rate (every attempt's, retries included), and the least the records offered need
    (their data base64-encoded, once)."""
    e = run.engine
    if "link_seconds" not in e:
        return ""
    least = run.offered * RECORD * BODY_PER_BYTE / e["up_rate"]
    return (
        f"{run.elapsed_s:.0f} s / {e['link_seconds']:.0f} s "
        f"({e['up_bytes'] / 1e6:.1f} MB up; the records need >= {least:.0f} s)"
    )


def table_row(case: str, backend: str, label: str, run: Run, ratio: str = "") -> list[str]:
    if run.error:
        return [case, backend, label, run.error, *[""] * (len(HEADER) - 4)]
    other = ", ".join(f"{code} {n:,}" for code, n in run.failed_other.most_common()) or "0"
    if run.unresolved:
        other += f"; {run.unresolved:,} unresolved"
    return [
        case,
        backend,
        label,
        f"{run.offered:,}",
        f"{run.accepted:,}",
        f"{run.ok:,}",
        f"{run.expired:,} ({run.expired_in_queue:,})",
        other,
        f"{run.flagged:,}",
        f"{run.confirmed_per_s:,.0f}",
        f"{run.put_p50_ms:,.1f}",
        f"{run.put_p99_ms:,.0f}",
        f"{run.put_max_ms / 1000:,.1f}",
        f"{run.elapsed_s:,.1f}",
        ratio,
        _link_cell(run),
    ]


def ratio(on: Run, off: Run) -> str:
    if on.error or off.error or off.confirmed_per_s <= 0:
        return "n/a"
    return f"{on.confirmed_per_s / off.confirmed_per_s:.2f}"


def markdown(rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(HEADER) + " |", "|" + "---|" * 3 + "---:|" * (len(HEADER) - 3)]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks admission", description=__doc__.splitlines()[0]
    )
    parser.add_argument("--quick", action="store_true", help="CI-sized runs (a few minutes)")
    parser.add_argument("--cases", default=",".join(CASE_NAMES), help="comma-separated")
    parser.add_argument("--backends", default="trio,asyncio")
    parser.add_argument(
        "--share", type=float, default=None, help="admission_ttl_share when on (the default's)"
    )
    parser.add_argument(
        "--ttl",
        type=float,
        default=None,
        help="record_ttl (30; quick: 10 for the paced and hot-shard cases)",
    )
    parser.add_argument("--window", type=float, default=None, help="paced cases' window, s")
    parser.add_argument("--rate", type=float, default=None, help="paced cases' records/s")
    parser.add_argument("--link-rate", type=float, default=None, help="slow link, bytes/s")
    parser.add_argument("--link-records", type=int, default=None)
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a ProducerConfig setting for every run (VALUE as JSON), e.g. shard_queue_size=4096",
    )
    parser.add_argument(
        "--client-sndbuf",
        type=int,
        default=0,
        help="SO_SNDBUF of the producer's connections (0: the OS's autotuning)",
    )
    parser.add_argument("--json", default="", help="also write every run's figures here")
    parser.add_argument("--engine", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.engine:
        spec = EngineSpec(**json.loads(args.engine))
        anyio.run(_engine_child, spec, backend="trio")
        return
    sizes = Sizes.quick() if args.quick else Sizes()
    if args.ttl is not None:
        sizes.burst_ttl = args.ttl
    for name, value in (
        ("ttl", args.ttl),
        ("window", args.window),
        ("rate", args.rate),
        ("link_rate", args.link_rate),
        ("link_records", args.link_records),
    ):
        if value is not None:
            setattr(sizes, name, value)
    settings: dict[str, Any] = {}
    for item in args.set:
        name, sep, value = item.partition("=")
        if not sep or name not in _config_fields():
            parser.error(f"--set {item!r}: expected NAME=VALUE, NAME a ProducerConfig setting")
        try:
            settings[name] = json.loads(value)
        except ValueError:
            settings[name] = value
    names = [n for n in args.cases.split(",") if n]
    unknown = [n for n in names if n not in CASE_NAMES]
    if unknown:
        parser.error(f"unknown cases {unknown}; the cases: {', '.join(CASE_NAMES)}")
    backends = [b for b in args.backends.split(",") if b]
    from kinesis_trio.testing._emulators import LocalKinesis, node_available

    emulator_kind: Literal["kinesis-local", "python"] = (
        "kinesis-local" if node_available() else "python"
    )
    chosen = [c for c in cases(sizes, emulator=emulator_kind) if c.name in names]
    share = args.share if args.share is not None else default_share()
    load = os.getloadavg()
    print(
        f"admission by time: on = admission_ttl_share {share}, off = None; record_ttl "
        f"{sizes.ttl:g} s (overload, slow-link: {sizes.burst_ttl:g} s); backends "
        f"{', '.join(backends)}; settings {settings or 'the defaults'}"
        + (f"; client SO_SNDBUF {args.client_sndbuf:,}" if args.client_sndbuf else "")
        + "; load average "
        f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f} on {os.cpu_count()} cores",
        flush=True,
    )
    for case in chosen:
        print(f"  {case.name}: {case.what}", flush=True)
    rows: list[list[str]] = []
    dump: list[dict[str, Any]] = []
    started = time.perf_counter()
    with contextlib.ExitStack() as stack:
        if args.client_sndbuf:
            stack.enter_context(client_send_buffer(args.client_sndbuf))
        emulator_url = None
        if any(c.engine is None for c in chosen):
            emulator = stack.enter_context(LocalKinesis(emulator_kind))
            emulator_url = emulator.endpoint_url
        for case in chosen:
            for b, backend in enumerate(backends):
                runs: dict[bool, Run] = {}
                # off first on one backend, on first on the next: neither always goes first
                for admission in (False, True) if b % 2 == 0 else (True, False):
                    t = time.perf_counter()
                    run = run_case(case, backend, admission, sizes, share, emulator_url, settings)
                    runs[admission] = run
                    label = "on" if admission else "off"
                    print(
                        f"[{time.perf_counter() - started:6.0f} s] {case.name} {backend} "
                        f"{label}: {run.error or _brief(run)} ({time.perf_counter() - t:.0f} s)",
                        flush=True,
                    )
                    dump.append(
                        {"case": case.name, "backend": backend, "admission": label, **run.row()}
                    )
                rows.append(table_row(case.name, backend, "off", runs[False]))
                on, off = runs[True], runs[False]
                rows.append(table_row(case.name, backend, "on", on, ratio(on, off)))
    print()
    print(markdown(rows))
    print(
        f"\n{(time.perf_counter() - started) / 60:.1f} min; expired (in queue): of the records "
        "expired, those that waited in the producer's queue; on/off: confirmed records/s with "
        "admission on over off's."
    )
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(
                {
                    "sizes": dataclasses.asdict(sizes),
                    "share": share,
                    "settings": settings,
                    "runs": dump,
                },
                f,
                indent=1,
            )


def _brief(run: Run) -> str:
    return (
        f"offered {run.offered:,} accepted {run.accepted:,} ok {run.ok:,} expired "
        f"{run.expired:,} ({run.expired_in_queue:,} in queue) other "
        f"{sum(run.failed_other.values()):,} unresolved {run.unresolved:,}; "
        f"{run.confirmed_per_s:,.0f} rec/s, put p99 {run.put_p99_ms:,.0f} ms"
        + (f"; expired: {dict(run.expiry_reasons.most_common(3))}" if run.expired else "")
        + (f"; engine {run.engine}" if run.engine else "")
    )


if __name__ == "__main__":
    main()
