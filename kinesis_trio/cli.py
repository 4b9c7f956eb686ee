"""The ``kinesis-trio`` command.

``kinesis-trio produce --stream S [FILE|-]``
    Write newline-delimited records from a file or stdin (like ``kcat -P``): raw lines, or
    JSON lines (``--json``) keyed by a field (``--key-field user.id``) or a template
    (``--key-template "{tenant}-{line_no}"``); a random uuid4 per record by default. Live
    progress on stderr, a summary on stdout, failed records (line + error) as JSON lines in
    ``--failed FILE``; exit code 1 when any record failed.
``kinesis-trio perf [--stream S] [-s SIZE] [-n COUNT] [-r RATE] [--duration S]``
    A load generator like ``rdkafka_performance -P``: throughput, latency percentiles (from
    each record's scheduled time when ``-r`` is given: no coordinated omission), CPU per
    record, throttles and failures.
``kinesis-trio local [--port P] [--streams a:2,b:1]``
    Run a local emulator (kinesalite or kinesis-local) until Ctrl-C.
``kinesis-trio demo``
    Write 100,000 records and print a one-row table (the README's first command).

``perf`` and ``demo`` start an embedded emulator when neither an endpoint
(``--endpoint-url``, ``AWS_ENDPOINT_URL_KINESIS``, ``AWS_ENDPOINT_URL``) nor ``--stream`` is
given; with ``--stream NAME`` alone they use the AWS defaults (the real service). Bad arguments and
invalid producer settings exit with status 2 and a one-line message; AWS errors exit 1.
Live progress and tables use ``rich`` when it is installed and the output is a terminal.
"""

from __future__ import annotations

import argparse
import array
import contextlib
import json
import math
import os
import re
import resource
import select
import signal
import string
import sys
import threading
import time
import uuid
from collections import Counter, deque
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from types import FrameType
from typing import Any, NoReturn, TextIO

import anyio
import anyio.abc
import anyio.to_thread

from ._client import KinesisClient
from ._config import ProducerConfig
from ._credentials import StaticCredentials
from ._emulator import EMULATORS, LocalKinesis
from ._errors import KinesisTrioError, ResourceNotFoundError
from ._outcome import Outcome, RecordResult
from ._producer import Producer
from ._version import __version__

if sys.version_info < (3, 11):  # pragma: no cover
    from exceptiongroup import BaseExceptionGroup

__all__ = ["main"]

_PROG = "kinesis-trio"
_LOCAL_CREDENTIALS = StaticCredentials("AKIDLOCALDEMO", "local-demo-secret")
_THROTTLE_CODE = "ProvisionedThroughputExceededException"
_READ_CHUNK = 256 * 1024
_TICK = 0.25  # seconds between progress updates / outcome sweeps


class _UsageError(Exception):
    """A bad argument or setting: one line on stderr, exit status 2."""


class _Failure(Exception):
    """A run that cannot go on (missing stream, dead emulator): one line, exit status 1."""


# -- argument parsing ----------------------------------------------------------------------


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors: ``kinesis-trio: error: ...`` and exit status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{_PROG}: error: {message}\n")


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _int(text: str) -> int:
    """An integer; its range is checked by ProducerConfig (which names the field)."""
    try:
        return int(text.replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be 0 (any free port) to 65535, got {value}")
    return value


_SIZE_RE = re.compile(r"(\d+(?:\.\d+)?)\s*([kmg]?)(?:i?b)?", re.IGNORECASE)
_SIZE_UNITS = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3}


def _size(text: str) -> int:
    """Bytes: ``512``, ``64k``, ``1MiB``, ``2m`` (k/M/G are binary: KiB, MiB, GiB)."""
    match = _SIZE_RE.fullmatch(text.strip())
    if match is None:
        raise argparse.ArgumentTypeError(f"not a size (e.g. 512, 64k, 1MiB): {text!r}")
    return int(float(match[1]) * _SIZE_UNITS[match[2].lower()])


def _positive_size(text: str) -> int:
    value = _size(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1 byte, got {text!r}")
    return value


_SECONDS_RE = re.compile(r"(-?\d+(?:\.\d*)?|-?\.\d+)\s*(ms|s|m|h)?")
_SECONDS_UNITS = {None: 1.0, "s": 1.0, "ms": 0.001, "m": 60.0, "h": 3600.0}


def _seconds(text: str) -> float:
    """Seconds: ``0.1``, ``100ms``, ``30s``, ``5m``. The range is checked by ProducerConfig."""
    match = _SECONDS_RE.fullmatch(text.strip())
    if match is None:
        raise argparse.ArgumentTypeError(f"not a duration (e.g. 0.1, 100ms, 30s): {text!r}")
    return float(match[1]) * _SECONDS_UNITS[match[2]]


def _positive_seconds(text: str) -> float:
    value = _seconds(text)
    if not 0 < value < math.inf:
        raise argparse.ArgumentTypeError(f"must be a positive duration, got {text!r}")
    return value


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None


def _rate(text: str) -> float:
    value = _number(text)
    if not 0 < value < math.inf:
        raise argparse.ArgumentTypeError(f"must be a positive number of records/s, got {text}")
    return value


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=_PROG, description="Kinesis producer tools (Trio/anyio).")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    produce = sub.add_parser(
        "produce",
        help="write newline-delimited records from a file or stdin (like kcat -P)",
        description="Write each line of FILE (or stdin) as a record. Raw lines by default; "
        "--json parses JSON lines so that --key-field / --key-template can pick the "
        "partition key. The default partition key is a random uuid4 per record. Exit "
        "status 1 when any record failed.",
    )
    produce.add_argument("input", nargs="?", metavar="FILE", help="input file (default: stdin)")
    produce.add_argument("--stream", required=True, help="stream to write to")
    produce.add_argument("--json", action="store_true", help="input lines are JSON documents")
    keys = produce.add_mutually_exclusive_group()
    keys.add_argument(
        "--key-field", metavar="F", help="partition key from this JSON field (dotted path: a.b)"
    )
    keys.add_argument(
        "--key-template",
        metavar="T",
        help="partition key from a str.format template over the JSON fields (dotted paths "
        "allowed), {line_no} and {uuid}, e.g. '{tenant}-{line_no}'",
    )
    produce.add_argument(
        "--explicit-hash-key-field", metavar="F", help="explicit hash key from this JSON field"
    )
    produce.add_argument(
        "--failed", metavar="FILE", help="write failed records here as JSON lines (with errors)"
    )
    _add_common(produce, progress_interval=5.0)

    perf = sub.add_parser(
        "perf",
        help="load generator: throughput, latency percentiles, CPU, throttles",
        description="Write COUNT records of SIZE bytes (at RATE records/s with -r) and report "
        "records/s, MB/s, p50/p99/p99.9 latency, CPU per record, throttles and failures. "
        "With -r, latency is measured from each record's scheduled time (no coordinated "
        "omission). Without an endpoint and without --stream, an embedded local emulator is "
        "started and a new stream created in it.",
    )
    perf.add_argument(
        "--stream", help="stream to write to (created with --shards if it does not exist)"
    )
    perf.add_argument(
        "-s", "--size", type=_positive_size, default=512, help="bytes per record (default 512)"
    )
    perf.add_argument(
        "-n",
        "--count",
        type=_positive_int,
        help="records to write (default 100,000; unlimited with --duration)",
    )
    perf.add_argument("-r", "--rate", type=_rate, help="records/s (default: as fast as possible)")
    perf.add_argument(
        "--keys", type=_positive_int, default=256, help="distinct partition keys (default 256)"
    )
    perf.add_argument(
        "--shards", type=_positive_int, help="shards of a stream to create (default 4 locally)"
    )
    perf.add_argument("--duration", type=_positive_seconds, help="stop after this long")
    perf.add_argument("--emulator", choices=sorted(EMULATORS), default="kinesalite")
    _add_common(perf, progress_interval=1.0)

    demo = sub.add_parser(
        "demo",
        help="write records and print records/s, latency and failures",
        description="Write --count records of --size bytes and report throughput and latency. "
        "Without an endpoint and without --stream, an embedded local emulator is started.",
    )
    demo.add_argument("--count", "-n", type=_positive_int, default=100_000)
    demo.add_argument("--size", "-s", type=_positive_int, default=200, help="bytes per record")
    demo.add_argument("--keys", type=_positive_int, default=256, help="distinct partition keys")
    demo.add_argument("--shards", type=_positive_int, default=4, help="shards of the new stream")
    demo.add_argument("--stream", help="use this existing stream instead of creating one")
    demo.add_argument("--emulator", choices=sorted(EMULATORS), default="kinesalite")
    _add_common(demo, progress_interval=1.0)

    local = sub.add_parser(
        "local",
        help="start the embedded emulator and keep it running",
        description="Run a local Kinesis emulator until Ctrl-C (or SIGTERM), then stop it.",
    )
    local.add_argument("--port", type=_port, default=4567, help="port (0: any free port)")
    local.add_argument("--emulator", choices=sorted(EMULATORS), default="kinesalite")
    local.add_argument("--streams", default="", help="name:shards,... to create")
    return parser


def _add_common(parser: argparse.ArgumentParser, *, progress_interval: float) -> None:
    conn = parser.add_argument_group("connection")
    conn.add_argument("--endpoint-url", help="Kinesis endpoint (default: AWS settings)")
    conn.add_argument("--region", help="AWS region (default: AWS settings, or us-east-1 locally)")
    conn.add_argument("--profile", help="AWS profile for credentials")
    conn.add_argument("--backend", choices=["trio", "asyncio"], default="trio")

    cfg = parser.add_argument_group("producer settings (ProducerConfig; times in seconds)")
    cfg.add_argument(
        "--linger", type=_seconds, metavar="SECONDS", help="record_max_buffered_time (0.1)"
    )
    cfg.add_argument("--no-aggregation", action="store_true", help="aggregation_enabled=False")
    cfg.add_argument("--max-connections", type=_int, metavar="N", help="max_connections (24)")
    cfg.add_argument(
        "--rate-limit", type=_number, metavar="PERCENT", help="rate_limit, %% of shard limits (150)"
    )
    cfg.add_argument("--record-ttl", type=_seconds, metavar="SECONDS", help="record_ttl (30)")
    cfg.add_argument(
        "--max-outstanding-records", type=_int, metavar="N", help="max_outstanding_records (100000)"
    )
    cfg.add_argument(
        "--max-outstanding-bytes",
        type=_size,
        metavar="SIZE",
        help="max_outstanding_bytes (128MiB; k/M/G suffixes)",
    )
    cfg.add_argument(
        "--fail-if-throttled",
        action="store_true",
        help="fail_if_throttled=True: fail throttled records instead of retrying them",
    )

    out = parser.add_argument_group("output")
    out.add_argument("-q", "--quiet", action="store_true", help="no live progress")
    out.add_argument(
        "--progress-interval",
        type=_positive_seconds,
        default=progress_interval,
        metavar="SECONDS",
        help=f"seconds between progress lines when stderr is not a terminal "
        f"(default {progress_interval:g})",
    )


def _config(args: argparse.Namespace) -> ProducerConfig:
    fields: dict[str, Any] = {}
    if args.linger is not None:
        fields["record_max_buffered_time"] = args.linger
    if args.no_aggregation:
        fields["aggregation_enabled"] = False
    if args.max_connections is not None:
        fields["max_connections"] = args.max_connections
    if args.rate_limit is not None:
        fields["rate_limit"] = args.rate_limit
    if args.record_ttl is not None:
        fields["record_ttl"] = args.record_ttl
    if args.max_outstanding_records is not None:
        fields["max_outstanding_records"] = args.max_outstanding_records
    if args.max_outstanding_bytes is not None:
        fields["max_outstanding_bytes"] = args.max_outstanding_bytes
    if args.fail_if_throttled:
        fields["fail_if_throttled"] = True
    try:
        return ProducerConfig(**fields)
    except ValueError as exc:
        raise _UsageError(str(exc)) from None


# -- where to connect ----------------------------------------------------------------------


def _configured_endpoint(args: argparse.Namespace) -> str | None:
    endpoint: str | None = (
        args.endpoint_url
        or os.environ.get("AWS_ENDPOINT_URL_KINESIS")
        or os.environ.get("AWS_ENDPOINT_URL")
    )
    return endpoint


@dataclass(frozen=True)
class _Target:
    """Where to connect and as whom; ``local`` for an embedded emulator."""

    endpoint_url: str | None
    region: str | None
    profile: str | None
    credentials: StaticCredentials | None
    local: bool

    def client(self) -> KinesisClient:
        try:
            return KinesisClient(
                region_name=self.region,
                endpoint_url=self.endpoint_url,
                credentials=self.credentials,
                profile_name=self.profile,
            )
        except ValueError as exc:  # no region, malformed endpoint URL
            raise _UsageError(str(exc).replace("region_name=...", "--region")) from None

    def producer(self, stream: str, config: ProducerConfig) -> Producer:
        return Producer(
            stream,
            region_name=self.region,
            endpoint_url=self.endpoint_url,
            credentials=self.credentials,
            config=config,
            profile_name=self.profile,
        )


def _with_target(
    args: argparse.Namespace, run: Callable[[_Target], int], *, embedded: bool, shard_limit: int
) -> int:
    """Run ``run`` against the configured endpoint, or (``embedded``) a local emulator."""
    endpoint = _configured_endpoint(args)
    if endpoint is not None or not embedded:
        return run(_Target(endpoint, args.region, args.profile, None, False))
    print(f"no endpoint configured: starting an embedded {args.emulator} emulator ...", flush=True)
    with LocalKinesis(args.emulator, shard_limit=shard_limit) as emulator:
        print(f"emulator at {emulator.endpoint_url}", flush=True)
        region = args.region or (
            None
            if os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
            else "us-east-1"
        )
        return run(_Target(emulator.endpoint_url, region, args.profile, _LOCAL_CREDENTIALS, True))


async def _ensure_stream(
    client: KinesisClient, name: str | None, shards: int | None, *, prefix: str
) -> tuple[str, bool]:
    """Return (stream name, created): use ``name`` if it exists, else create it."""
    if name is not None:
        try:
            summary = await client.describe_stream_summary(name)
        except ResourceNotFoundError:
            if shards is None:
                raise _Failure(
                    f"stream {name!r} does not exist at {client.endpoint_url} "
                    "(pass --shards N to create it)"
                ) from None
        else:
            if summary.get("StreamStatus") != "ACTIVE":
                await client.wait_for_stream(name)
            if shards is not None:
                print(f"stream {name} exists: --shards {shards} ignored", flush=True)
            return name, False
    else:
        name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    assert shards is not None
    await client.create_stream(name, shards)
    await client.wait_for_stream(name)
    print(f"created stream {name} with {shards} shards", flush=True)
    return name, True


# -- bookkeeping ---------------------------------------------------------------------------


def _percentile(sorted_values: Sequence[float], q: float) -> float:
    if not sorted_values:
        return float("nan")
    index = min(len(sorted_values) - 1, max(0, round(q * (len(sorted_values) - 1))))
    return sorted_values[index]


_FailureHook = Callable[[str, str, RecordResult | None, Any], None]


class _Tracker:
    """Outcomes in flight and what became of the resolved ones.

    Each accepted record is kept as (outcome, latency base time, size, context) until a
    sweep (:meth:`reap`, every tick) finds it resolved: no task per record, and the latency
    comes from the outcome's own ``resolved_at``, so sweeping late changes nothing.
    """

    def __init__(self, on_failure: _FailureHook | None = None) -> None:
        self.pending: list[tuple[Outcome, float, int, Any]] = []
        self.accepted = 0
        self.accepted_bytes = 0
        self.ok = 0
        self.ok_bytes = 0
        self.failed = 0
        self.throttled_attempts = 0
        self.throttled_records = 0
        self.codes: Counter[str] = Counter()
        self.messages: dict[str, str] = {}
        self.latencies = array.array("d")
        self._on_failure = on_failure

    def add(self, outcome: Outcome, base: float, size: int, context: Any = None) -> None:
        self.pending.append((outcome, base, size, context))
        self.accepted += 1
        self.accepted_bytes += size

    def fail_local(self, code: str, message: str, context: Any = None) -> None:
        """A record that failed before reaching the producer (bad JSON, bad key, ...)."""
        self._failure(code, message, None, context)

    def _failure(self, code: str, message: str, result: RecordResult | None, ctx: Any) -> None:
        self.failed += 1
        self.codes[code] += 1
        self.messages.setdefault(code, message)
        if self._on_failure is not None:
            self._on_failure(code, message, result, ctx)

    def reap(self) -> None:
        keep: list[tuple[Outcome, float, int, Any]] = []
        latencies = self.latencies
        for entry in self.pending:
            outcome = entry[0]
            if not outcome.done():
                keep.append(entry)
                continue
            result = outcome.result()
            attempts = result.attempts
            if len(attempts) > 1 or not result.ok:
                throttles = sum(1 for a in attempts if a.error_code == _THROTTLE_CODE)
                if throttles:
                    self.throttled_attempts += throttles
                    self.throttled_records += 1
            if result.ok:
                self.ok += 1
                self.ok_bytes += entry[2]
                latencies.append(result.resolved_at - entry[1])
            else:
                self._failure(
                    result.error_code or "UnknownError",
                    result.error_message or "",
                    result,
                    entry[3],
                )
        self.pending = keep

    @property
    def resolved(self) -> int:
        return self.ok + self.failed


# -- live progress and summaries ------------------------------------------------------------


def _rich_console(stderr: bool) -> Any:
    """A rich Console for stdout/stderr if rich is installed and it is a terminal."""
    stream = sys.stderr if stderr else sys.stdout
    try:
        if not stream.isatty():
            return None
        from rich.console import Console
    except (ImportError, AttributeError, ValueError):
        return None
    return Console(stderr=stderr)


class _Progress:
    """Live records/s, MB/s, in flight and failed: a rich progress line on a terminal,
    else a plain line on stderr every ``interval`` seconds."""

    def __init__(self, label: str, total: int | None, *, quiet: bool, interval: float) -> None:
        self.label = label
        self.total = total
        self.interval = interval
        self.started = time.monotonic()
        self.last_line = self.started
        self.samples: deque[tuple[float, int, int]] = deque()
        self.quiet = quiet
        self._rich: Any = None
        self._task: Any = None
        self._last_state: tuple[int, int, int] | None = None
        if not quiet:
            console = _rich_console(stderr=True)
            if console is not None:
                from rich.progress import (
                    BarColumn,
                    Progress,
                    SpinnerColumn,
                    TaskProgressColumn,
                    TextColumn,
                    TimeElapsedColumn,
                )

                columns: list[Any] = [SpinnerColumn(), TextColumn("[bold]{task.description}")]
                if total is not None:
                    columns += [BarColumn(), TaskProgressColumn()]
                columns += [TextColumn("{task.fields[stats]}"), TimeElapsedColumn()]
                self._rich = Progress(*columns, console=console, auto_refresh=False)
                self._task = self._rich.add_task(label, total=total, stats="")
                self._rich.start()

    def log(self, message: str) -> None:
        if self._rich is not None:
            self._rich.console.print(message, markup=False, highlight=False)
        else:
            print(message, file=sys.stderr, flush=True)

    def update(self, tracker: _Tracker, in_flight: int) -> None:
        if self.quiet:
            return
        now = time.monotonic()
        samples = self.samples
        samples.append((now, tracker.resolved, tracker.ok_bytes))
        while len(samples) > 2 and now - samples[1][0] >= 2.0:
            samples.popleft()
        t_old, n_old, b_old = samples[0]
        span = now - t_old
        rate = (tracker.resolved - n_old) / span if span > 0 else 0.0
        mbps = (tracker.ok_bytes - b_old) / span / 1e6 if span > 0 else 0.0
        stats = (
            f"{tracker.resolved:,} done  {rate:,.0f} records/s  {mbps:,.2f} MB/s  "
            f"in flight {in_flight:,}  failed {tracker.failed:,}"
        )
        if self._rich is not None:
            self._rich.update(self._task, completed=tracker.accepted, stats=stats)
            self._rich.refresh()
        elif now - self.last_line >= self.interval:
            self.last_line = now
            state = (tracker.resolved, tracker.accepted, in_flight)
            if state == self._last_state:  # idle (e.g. stdin with nothing new): say nothing
                return
            self._last_state = state
            print(
                f"[{now - self.started:7.1f}s] {self.label}: {stats}", file=sys.stderr, flush=True
            )

    def close(self, tracker: _Tracker) -> None:
        if self._rich is not None:
            self._rich.update(
                self._task,
                completed=tracker.accepted,
                stats=f"{tracker.resolved:,} done  failed {tracker.failed:,}",
            )
            self._rich.refresh()
            self._rich.stop()
            self._rich = None


def _print_summary(
    title: str, rows: Sequence[tuple[str, str]], tracker: _Tracker, notes: Sequence[str] = ()
) -> None:
    """The final table on stdout (rich on a terminal, plain aligned text otherwise)."""
    failures = [
        (code, n, tracker.messages.get(code, "")) for code, n in tracker.codes.most_common()
    ]
    console = _rich_console(stderr=False)
    if console is not None:
        from rich.table import Table

        table = Table(title=title, show_header=False, title_justify="left")
        table.add_column(style="bold")
        table.add_column(justify="right")
        for label, value in rows:
            table.add_row(label, value)
        console.print(table)
        if failures:
            errors = Table(title="failures by error code", title_justify="left")
            errors.add_column("error code", style="red")
            errors.add_column("records", justify="right")
            errors.add_column("first message", overflow="fold")
            for code, n, message in failures:
                errors.add_row(code, f"{n:,}", message)
            console.print(errors)
        for note in notes:
            console.print(note, markup=False, highlight=False)
        return
    print(f"\n{title}")
    width = max(len(label) for label, _ in rows) + 2
    for label, value in rows:
        print(f"  {label:<{width}}{value}")
    if failures:
        print("failures by error code:")
        for code, n, message in failures:
            print(f"  {code}: {n:,}" + (f"  ({message[:200]})" if message else ""))
    for note in notes:
        print(note)
    sys.stdout.flush()


def _ms(seconds: float) -> str:
    return "n/a" if math.isnan(seconds) else f"{seconds * 1e3:,.1f} ms"


def _latency_rows(latencies: array.array[float]) -> list[tuple[str, str]]:
    ordered = sorted(latencies)
    return [
        ("latency p50", _ms(_percentile(ordered, 0.5))),
        ("latency p99", _ms(_percentile(ordered, 0.99))),
        ("latency p99.9", _ms(_percentile(ordered, 0.999))),
        ("latency max", _ms(ordered[-1] if ordered else float("nan"))),
    ]


# -- signals -------------------------------------------------------------------------------


def _in_main_thread() -> bool:
    return threading.current_thread() is threading.main_thread()


class _Interrupts:
    """First Ctrl-C (or SIGTERM): stop reading/generating and flush what is in flight.
    Second: abort, failing the records still in flight."""

    def __init__(self, progress: _Progress) -> None:
        self.stop_scope = anyio.CancelScope()
        self.abort_scope = anyio.CancelScope()
        self.count = 0
        self._progress = progress

    @contextlib.asynccontextmanager
    async def watching(self) -> AsyncIterator[None]:
        """Handle the signals while the body runs (only the main thread can)."""
        if not _in_main_thread():
            yield
            return
        # asyncio's remove_signal_handler() resets handlers to the defaults: put ours back.
        previous = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
        try:
            async with anyio.create_task_group() as tg:
                await tg.start(self._watch)
                try:
                    yield
                finally:
                    tg.cancel_scope.cancel()
        finally:
            for signum, handler in previous.items():
                if handler is not None:
                    signal.signal(signum, handler)

    async def _watch(self, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            task_status.started()
            async for _ in signals:
                self.count += 1
                if self.count == 1:
                    self._progress.log(
                        "interrupted: stopping and waiting for the records in flight "
                        "(Ctrl-C again to abort)"
                    )
                    self.stop_scope.cancel()
                else:
                    self._progress.log("aborting: records in flight fail as ProducerAborted")
                    self.abort_scope.cancel()


@contextlib.contextmanager
def _signals_ignored() -> Iterator[None]:
    """Ignore SIGINT/SIGTERM (e.g. while stopping the emulator, so it is never left behind)."""
    if not _in_main_thread():
        yield
        return
    previous = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _interrupt(signum: int, frame: FrameType | None) -> None:
    if signal.getsignal(signal.SIGINT) in (signal.SIG_IGN, signal.SIG_DFL, None):
        raise KeyboardInterrupt  # SIGINT is ignored (a background job): stop anyway
    signal.raise_signal(signal.SIGINT)  # let the current SIGINT handling (trio's, ...) act


@contextlib.contextmanager
def _sigterm_as_interrupt() -> Iterator[None]:
    """SIGTERM acts as Ctrl-C (SIGINT), so that the emulator and the producer clean up."""
    if not _in_main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


async def _tick(
    tracker: _Tracker,
    progress: _Progress,
    producer: Producer,
    failed: _FailedWriter | None = None,
) -> None:
    while True:
        await anyio.sleep(_TICK)
        tracker.reap()
        progress.update(tracker, producer.outstanding_records)
        if failed is not None:
            await failed.flush()


# -- perf and demo: the load generator ------------------------------------------------------


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
            + f" ({'aggregated' if config.aggregation_enabled else 'not aggregated'}, "
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
        if result.interrupted:
            return 130
        return 1 if t.failed else 0

    return _with_target(
        args,
        lambda target: anyio.run(perf, target, backend=args.backend),
        embedded=args.stream is None,
        shard_limit=max(100, args.shards or 4),
    )


def _check_record_size(args: argparse.Namespace, config: ProducerConfig) -> None:
    largest = args.size + len(f"key-{args.keys - 1}")
    if largest > config.max_record_size:
        raise _UsageError(
            f"argument -s/--size: {args.size:,} bytes plus the partition key is over the "
            f"record size limit ({config.max_record_size:,} bytes)"
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
            f"({'aggregated' if config.aggregation_enabled else 'not aggregated'}, "
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
        if result.interrupted:
            return 130
        return 1 if t.failed else 0

    return _with_target(
        args,
        lambda target: anyio.run(demo, target, backend=args.backend),
        embedded=args.stream is None,
        shard_limit=max(100, args.shards),
    )


# -- produce: records from a file or stdin --------------------------------------------------


class _RecordError(Exception):
    """A line that cannot become a record (bad JSON, no key): fails locally."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(code, message)
        self.code = code
        self.message = message


_MISSING: Any = object()


def _lookup(obj: Any, path: str) -> Any:
    """``obj[path]``, else walk a dotted path through objects (and list indexes)."""
    if isinstance(obj, dict) and path in obj:
        return obj[path]
    current = obj
    for part in path.split("."):
        if isinstance(current, dict) and part in current:
            current = current[part]
        elif isinstance(current, list) and part.isdigit() and int(part) < len(current):
            current = current[int(part)]
        else:
            return _MISSING
    return current


def _key_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return json.dumps(value)
    return json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False)


class _TemplateFormatter(string.Formatter):
    """str.format over a record's JSON fields (dotted paths), ``{line_no}`` and ``{uuid}``;
    the record's own fields win over the two built-ins."""

    def __init__(self) -> None:
        super().__init__()
        self.obj: Any = None
        self.line_no = 0

    def get_field(self, field_name: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> Any:
        value = _lookup(self.obj, field_name)
        if value is _MISSING or value is None:
            if field_name == "line_no":
                return self.line_no, field_name
            if field_name == "uuid":
                return str(uuid.uuid4()), field_name
            raise _RecordError(
                "MissingKey", f"--key-template field {{{field_name}}} is not in the record"
            )
        if isinstance(value, (dict, list, bool)):
            value = _key_text(value)
        return value, field_name


class _Keying:
    """Turns a line into (partition key, explicit hash key), or raises _RecordError."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.json = bool(args.json)
        self.key_field: str | None = args.key_field
        self.template: str | None = args.key_template
        self.ehk_field: str | None = args.explicit_hash_key_field
        if not self.json:
            if self.key_field is not None:
                raise _UsageError("--key-field needs --json (raw lines have no fields)")
            if self.ehk_field is not None:
                raise _UsageError("--explicit-hash-key-field needs --json")
        for name, value in (
            ("--key-field", self.key_field),
            ("--explicit-hash-key-field", self.ehk_field),
        ):
            if value is not None and not value.strip():
                raise _UsageError(f"{name} must not be empty")
        self.formatter = _TemplateFormatter()
        if self.template is not None:
            try:
                fields = [
                    f for _, f, _, _ in string.Formatter().parse(self.template) if f is not None
                ]
            except ValueError as exc:
                raise _UsageError(f"--key-template {self.template!r}: {exc}") from None
            for name in fields:
                if not name or name.isdigit():
                    raise _UsageError(
                        f"--key-template {self.template!r}: use named fields, like {{line_no}}"
                    )
                if not self.json and name not in ("line_no", "uuid"):
                    raise _UsageError(
                        f"--key-template field {{{name}}} needs --json "
                        "(raw lines only have {line_no} and {uuid})"
                    )

    def key(self, line_no: int, line: bytes) -> tuple[str, str | None]:
        obj: Any = None
        if self.json:
            try:
                obj = json.loads(line)
            except ValueError as exc:
                raise _RecordError("InvalidJSON", str(exc)) from None
        if self.key_field is not None:
            value = _lookup(obj, self.key_field)
            if value is _MISSING or value is None:
                raise _RecordError("MissingKey", f"no field {self.key_field!r} in the record")
            key = _key_text(value)
        elif self.template is not None:
            self.formatter.obj = obj
            self.formatter.line_no = line_no
            try:
                key = self.formatter.format(self.template)
            except _RecordError:
                raise
            except (ValueError, TypeError, IndexError, KeyError) as exc:
                raise _RecordError("InvalidKey", f"--key-template: {exc}") from None
        else:
            key = str(uuid.uuid4())
        ehk: str | None = None
        if self.ehk_field is not None:
            value = _lookup(obj, self.ehk_field)
            if value is _MISSING or value is None:
                raise _RecordError("MissingKey", f"no field {self.ehk_field!r} in the record")
            ehk = _key_text(value)
        return key, ehk


class _ChunkReader:
    """Reads a file descriptor in a worker thread without ever blocking for long: the
    thread waits with select() in short steps, so a cancelled read (Ctrl-C while stdin is
    idle) leaves no thread stuck in read()."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.stopped = threading.Event()
        self._select = True

    def _read(self) -> bytes:
        while not self.stopped.is_set():
            if self._select:
                try:
                    ready, _, _ = select.select([self.fd], [], [], 0.2)
                except (OSError, ValueError):  # not selectable here: plain blocking reads
                    self._select = False
                    continue
                if not ready:
                    continue
            return os.read(self.fd, _READ_CHUNK)
        return b""

    async def read(self) -> bytes:
        try:
            return await anyio.to_thread.run_sync(self._read, abandon_on_cancel=True)
        except BaseException:
            self.stopped.set()
            raise


class _FailedWriter:
    """Failed records as JSON lines (written from a worker thread, once per tick)."""

    def __init__(self, file: TextIO | None) -> None:
        self.file = file
        self.buffer: list[str] = []
        self.count = 0

    def add(self, code: str, message: str, result: RecordResult | None, context: Any) -> None:
        if self.file is None:
            return
        line_no, line, truncated = context
        entry: dict[str, Any] = {"line_no": line_no}
        try:
            entry["line"] = line.decode("utf-8")
        except UnicodeDecodeError:
            import base64

            entry["line_base64"] = base64.b64encode(line).decode("ascii")
        if truncated:
            entry["line_truncated"] = True
        entry["error_code"] = code
        entry["error_message"] = message
        if result is not None:
            entry["partition_key"] = result.partition_key
            entry["attempts"] = len(result.attempts)
        self.buffer.append(json.dumps(entry, ensure_ascii=False) + "\n")
        self.count += 1

    async def flush(self) -> None:
        if self.file is not None and self.buffer:
            batch, self.buffer = self.buffer, []
            await anyio.to_thread.run_sync(self._write, self.file, batch)

    @staticmethod
    def _write(file: TextIO, lines: list[str]) -> None:
        file.writelines(lines)
        file.flush()


@dataclass
class _LineCounts:
    lines: int = 0
    blank: int = 0


async def _read_and_put(
    producer: Producer,
    reader: _ChunkReader,
    keying: _Keying,
    tracker: _Tracker,
    counts: _LineCounts,
) -> None:
    put = producer.put
    now = anyio.current_time
    limit = producer.config.max_record_size
    json_lines = keying.json
    buffer = b""
    discarding = False  # inside a line longer than max_record_size: drop up to its newline
    eof = False
    while not eof:
        chunk = await reader.read()
        if not chunk:
            eof = True
            lines = [buffer] if buffer and not discarding else []
            buffer = b""
        else:
            if discarding:
                newline = chunk.find(b"\n")
                if newline < 0:
                    continue
                chunk = chunk[newline + 1 :]
                discarding = False
            buffer += chunk
            lines = buffer.split(b"\n")
            buffer = lines.pop()
        for line in lines:
            counts.lines += 1
            if line.endswith(b"\r"):
                line = line[:-1]
            if not line or (json_lines and not line.strip()):
                counts.blank += 1
                continue
            context = (counts.lines, line, False)
            try:
                key, ehk = keying.key(counts.lines, line)
            except _RecordError as exc:
                tracker.fail_local(exc.code, exc.message, context)
                continue
            start = now()
            try:
                outcome = await put(line, key, ehk)
            except (TypeError, ValueError) as exc:
                tracker.fail_local("InvalidRecord", str(exc), context)
                continue
            tracker.add(outcome, start, len(line), context)
        if len(buffer) > limit:  # a line too long to be a record: fail it, skip to its end
            counts.lines += 1
            tracker.fail_local(
                "InvalidRecord",
                f"line longer than max_record_size ({limit} bytes)",
                (counts.lines, buffer[:1024], True),
            )
            buffer = b""
            discarding = True


def _run_produce(args: argparse.Namespace) -> int:
    config = _config(args)
    keying = _Keying(args)
    with contextlib.ExitStack() as stack:
        if args.input in (None, "-"):
            if sys.stdin is None:
                raise _UsageError("no stdin to read records from: pass a FILE")
            fd = sys.stdin.fileno()
            source = "stdin"
            if sys.stdin.isatty() and not args.quiet:
                print("reading records from the terminal (Ctrl-D to end) ...", file=sys.stderr)
        else:
            try:
                fd = os.open(args.input, os.O_RDONLY)
            except OSError as exc:
                raise _UsageError(f"cannot read {args.input}: {exc.strerror}") from None
            stack.callback(os.close, fd)
            source = args.input
        failed_file: TextIO | None = None
        if args.failed:
            try:
                failed_file = stack.enter_context(open(args.failed, "w", encoding="utf-8"))
            except OSError as exc:
                raise _UsageError(f"cannot write {args.failed}: {exc.strerror}") from None
        failed = _FailedWriter(failed_file)

        async def produce(target: _Target) -> int:
            await target.client().aclose()  # validates region and endpoint first
            tracker = _Tracker(on_failure=failed.add)
            counts = _LineCounts()
            progress = _Progress("produce", None, quiet=args.quiet, interval=args.progress_interval)
            interrupts = _Interrupts(progress)
            reader = _ChunkReader(fd)
            t0 = t1 = 0.0
            try:
                async with interrupts.watching():
                    with interrupts.abort_scope:
                        async with (
                            target.producer(args.stream, config) as producer,
                            anyio.create_task_group() as tg,
                        ):
                            tg.start_soon(_tick, tracker, progress, producer, failed)
                            t0 = anyio.current_time()
                            with interrupts.stop_scope:
                                await _read_and_put(producer, reader, keying, tracker, counts)
                            await producer.flush()
                            t1 = anyio.current_time()
                            tg.cancel_scope.cancel()
                if not t1:
                    t1 = anyio.current_time()
                tracker.reap()
                await failed.flush()
            finally:
                reader.stopped.set()
                progress.close(tracker)
            elapsed = max(t1 - t0, 1e-9)
            lines = f"{counts.lines:,}"
            if counts.blank:
                lines += f" ({counts.blank:,} blank skipped)"
            rows = [
                ("lines", lines),
                ("records sent", f"{tracker.accepted:,}"),
                ("ok", f"{tracker.ok:,}"),
                ("failed", f"{tracker.failed:,}"),
                ("elapsed", f"{elapsed:,.2f} s"),
                ("records/s", f"{tracker.accepted / elapsed:,.0f}"),
                ("MB/s", f"{tracker.accepted_bytes / elapsed / 1e6:,.2f}"),
                *_latency_rows(tracker.latencies)[:3],
                (
                    "throttles",
                    f"{tracker.throttled_attempts:,} attempts "
                    f"({tracker.throttled_records:,} records)",
                ),
            ]
            notes = []
            if failed.count:
                notes.append(f"{failed.count:,} failed records written to {args.failed}")
            elif tracker.failed and not args.failed:
                notes.append("(pass --failed FILE to keep the failed records)")
            if interrupts.count:
                notes.append("(interrupted: the rest of the input was not read)")
            _print_summary(f"produce: {source} -> {args.stream}", rows, tracker, notes)
            if interrupts.count:
                return 130
            return 1 if tracker.failed else 0

        return _with_target(
            args,
            lambda target: anyio.run(produce, target, backend=args.backend),
            embedded=False,
            shard_limit=0,
        )
    raise AssertionError("unreachable")  # pragma: no cover


# -- local: a long-running emulator ---------------------------------------------------------


def _run_local(args: argparse.Namespace) -> int:
    streams: list[tuple[str, int]] = []
    for part in filter(None, (p.strip() for p in args.streams.split(","))):
        name, _, shards = part.partition(":")
        try:
            count = int(shards or "1")
        except ValueError:
            count = 0
        if not name or count < 1:
            raise _UsageError(f"--streams: bad entry {part!r}, expected name:shards")
        streams.append((name, count))

    async def create(endpoint: str) -> None:
        async with KinesisClient(
            region_name="us-east-1", endpoint_url=endpoint, credentials=_LOCAL_CREDENTIALS
        ) as client:
            for name, shards in streams:
                await client.create_stream(name, shards)
                await client.wait_for_stream(name)
                print(f"  created stream {name} with {shards} shards", flush=True)

    emulator = LocalKinesis(args.emulator, port=args.port or None)
    try:
        print(f"starting {args.emulator} ...", flush=True)
        emulator.start()
        if streams:
            anyio.run(create, emulator.endpoint_url)
        print(f"{args.emulator} running at {emulator.endpoint_url} (Ctrl-C to stop)", flush=True)
        print(
            f"  export AWS_ENDPOINT_URL_KINESIS={emulator.endpoint_url} AWS_REGION=us-east-1",
            flush=True,
        )
        while True:
            time.sleep(0.5)
            proc = getattr(emulator, "_proc", None)
            code = proc.poll() if proc is not None else None
            if code is not None:
                tail = emulator.output_tail(5).replace("\n", " | ")
                raise _Failure(f"{args.emulator} exited unexpectedly (code {code}): {tail}")
    except KeyboardInterrupt:
        print(f"stopping {args.emulator} ...", flush=True)
    finally:
        with _signals_ignored():
            emulator.stop()
    print("stopped", flush=True)
    return 0


# -- entry point ---------------------------------------------------------------------------


_COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "produce": _run_produce,
    "perf": _run_perf,
    "demo": _run_demo,
    "local": _run_local,
}


def _one_line(text: str, limit: int = 600) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _unwrap(exc: BaseException) -> BaseException:
    """The meaningful exception inside (nested) exception groups."""
    while isinstance(exc, BaseExceptionGroup):
        inner = [
            e for e in exc.exceptions if type(e).__name__ not in ("Cancelled", "CancelledError")
        ]
        exc = (inner or list(exc.exceptions))[0]
    return exc


def _error(message: str) -> None:
    print(f"{_PROG}: error: {message}", file=sys.stderr, flush=True)


def _report(exc: BaseException) -> int | None:
    """Print ``exc`` as one line and return the exit status; None: not ours to handle."""
    if isinstance(exc, _UsageError):
        _error(str(exc))
        return 2
    if isinstance(exc, _Failure):
        _error(_one_line(str(exc)))
        return 1
    if isinstance(exc, KinesisTrioError):
        text, name = str(exc), type(exc).__name__
        if not hasattr(exc, "code") and not text.startswith(name):  # KinesisError names its code
            text = f"{name}: {text}"
        text = text.replace("profile_name=...", "--profile")
        _error(_one_line(text.replace("pass credentials=StaticCredentials(...), set", "set")))
        return 1
    if isinstance(exc, (TimeoutError, OSError)):
        _error(_one_line(f"{type(exc).__name__}: {exc}"))
        return 1
    if isinstance(exc, RuntimeError):  # e.g. the emulator could not start (keeps its log tail)
        _error(str(exc))
        return 1
    if isinstance(exc, KeyboardInterrupt):
        print(f"{_PROG}: interrupted", file=sys.stderr, flush=True)
        return 130
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``kinesis-trio`` console script."""
    args = _parser().parse_args(argv)
    with _sigterm_as_interrupt():
        try:
            return _COMMANDS[args.command](args)
        except BaseException as exc:
            status = _report(_unwrap(exc))
            if status is None:
                raise
            return status


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
