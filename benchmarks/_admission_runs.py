"""The scenario of ``admission``: the producer's settings, the workload, the cases, one run.

Holds :func:`producer_config` (admission by time on or off), the :class:`Workload` (a burst or
putters on schedule) and :func:`produce` that puts it and tallies the outcomes into a
:class:`Run`, the :class:`Sizes` and :func:`cases` (``overload``, ``paced-10x`` / ``paced-100x``,
``hot-shard``, ``slow-link``), and :func:`run_case` / :func:`run_in_process` (one run of a case,
on an emulator stream or a fresh engine). Used by ``admission`` (the command: its table and
``main``) and by ``tests/benchmarks/test_admission.py``, which runs the cases at small sizes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
import socket
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import anyio

from kinesis_trio import Outcome, Producer, ProducerConfig, RecordResult, StaticCredentials
from kinesis_trio._results import EXPIRED

from ._admission_engine import SHARDS, STREAM, EngineProcess, EngineSpec, serve_engine
from ._emulator import create_stream, delete_stream

CREDS = StaticCredentials("AKIDBENCH", "bench-secret")
REGION = "us-east-1"
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
# running a case
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
