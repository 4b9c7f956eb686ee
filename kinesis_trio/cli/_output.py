"""Shared output: progress, summaries, latency tables, interrupts."""

from __future__ import annotations

import array
import base64
import contextlib
import json
import math
import signal
import sys
import threading
import time
from collections import Counter, deque
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from types import FrameType
from typing import Any, TextIO

import anyio
import anyio.abc
import anyio.to_thread

from .._dead_letters import FailedRecord
from .._results import RecordResult
from .._shell._outcome import Outcome
from .._shell._producer import Producer
from ._options import _THROTTLE_CODE, _TICK


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
    comes from the outcome's own ``resolved_at``, so sweeping late changes nothing. With
    ``keep_times``, it also keeps when each record was confirmed and when each throttled
    attempt started (loop clock), for a timeline.
    """

    def __init__(self, on_failure: _FailureHook | None = None, *, keep_times: bool = False) -> None:
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
        self.confirmed_at: array.array[float] | None = array.array("d") if keep_times else None
        self.throttled_at: array.array[float] | None = array.array("d") if keep_times else None
        self._on_failure = on_failure

    def add_counts(self, accepted: int, ok: int, failed: int, ok_bytes: int) -> None:
        """Add what another tracker counted (a process's progress line)."""
        self.accepted += accepted
        self.ok += ok
        self.failed += failed
        self.ok_bytes += ok_bytes

    def add_failures(self, failed: int, codes: Mapping[str, int], messages: dict[str, str]) -> None:
        """Add failed records counted elsewhere, by error code, with a message per code."""
        self.failed += failed
        self.codes.update(codes)
        self.messages.update(messages)

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
        confirmed_at, throttled_at = self.confirmed_at, self.throttled_at
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
                    if throttled_at is not None:
                        throttled_at.extend(
                            a.start for a in attempts if a.error_code == _THROTTLE_CODE
                        )
            if result.ok:
                self.ok += 1
                self.ok_bytes += entry[2]
                latencies.append(result.resolved_at - entry[1])
                if confirmed_at is not None:
                    confirmed_at.append(result.resolved_at)
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

    def restart(self, at: float) -> None:
        """Count the rates from ``at`` (``time.monotonic()``), not from when it was made."""
        self.started = self.last_line = at

    def log(self, message: str) -> None:
        if self._rich is not None:
            self._rich.console.print(message, markup=False, highlight=False)
        else:
            print(message, file=sys.stderr, flush=True)

    def update(self, tracker: _Tracker, in_flight: int, limit: str = "") -> None:
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
            + (f"  requests {limit}" if limit else "")
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


def _exit_code(tracker: _Tracker, interrupted: bool) -> int:
    """130 when interrupted (as a shell reports SIGINT), 1 when a record failed, else 0."""
    if interrupted:
        return 130
    return 1 if tracker.failed else 0


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


def _perf_rows(
    rate: float | None,
    records: int,
    elapsed: float,
    per_second: float,
    mb_per_second: float,
    latency: list[tuple[str, str]],
    cpu_us: float | None,
) -> list[tuple[str, str]]:
    """``perf``'s summary rows of records, rates, latency and CPU per record (``None``:
    no record), for one process or the sum of several; ``rate``: the target rate asked."""
    rows = [
        ("records", f"{records:,}"),
        ("elapsed", f"{elapsed:,.2f} s"),
        ("records/s", f"{per_second:,.0f}"),
        ("MB/s", f"{mb_per_second:,.2f}"),
    ]
    if rate:
        rows.append(("target rate", f"{rate:,.6g} records/s"))
    rows += latency
    rows += [
        (
            "latency from",
            "each record's scheduled time (t0 + i/rate)" if rate else "each put() call",
        ),
        ("CPU us/record", "n/a" if cpu_us is None else f"{cpu_us:,.1f}"),
    ]
    return rows


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

    def next_phase(self, progress: _Progress | None = None) -> None:
        """A new phase: a fresh stop scope (a cancel scope is entered once), and its
        progress display for the messages, if it has its own."""
        self.stop_scope = anyio.CancelScope()
        if progress is not None:
            self._progress = progress

    def _signalled(self) -> int:
        """One more SIGINT/SIGTERM: how many so far."""
        self.count += 1
        return self.count

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
                if self._signalled() == 1:
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
        progress.update(
            tracker,
            producer.outstanding_records,
            f"{producer.requests_in_flight} (limit {producer.request_limit}"
            f"/{producer.config.max_connections})",
        )
        if failed is not None:
            await failed.flush()


# -- perf and demo: the load generator ------------------------------------------------------


def _failed_entry(
    data: bytes,
    partition_key: str | None,
    explicit_hash_key: str | None,
    stream: str,
    code: str,
    message: str,
    attempts: int,
) -> dict[str, Any]:
    """A failed record as ``--failed`` writes it: the form ``produce --records`` reads
    (``data`` in base64, ``partition_key``, ``explicit_hash_key``), then what it ignores."""
    return {
        "data": base64.b64encode(data).decode("ascii"),
        "partition_key": partition_key,
        "explicit_hash_key": explicit_hash_key,
        "stream": stream,
        "error_code": code,
        "error_message": message,
        "attempts": attempts,
    }


class _FailedWriter:
    """Failed records as JSON lines (written from a worker thread, once per tick)."""

    def __init__(self, file: TextIO | None, stream: str = "") -> None:
        self.file = file
        self.stream = stream
        self.buffer: list[str] = []
        self.count = 0

    def add(self, code: str, message: str, result: RecordResult | None, context: Any) -> None:
        """``produce``'s failures: ``context`` is (line number, the record's data, whether
        it was cut short, its explicit hash key)."""
        if self.file is None:
            return
        line_no, data, truncated, ehk = context
        entry: dict[str, Any] = _failed_entry(
            data,
            result.partition_key if result is not None else None,
            ehk,
            result.stream_name if result is not None else self.stream,
            code,
            message,
            len(result.attempts) if result is not None else 0,
        )
        entry["line_no"] = line_no
        if truncated:
            entry["data_truncated"] = True
        self._append(entry)

    def add_record(self, record: FailedRecord) -> None:
        """A dead letter (``Producer.failures()``)."""
        if self.file is None:
            return
        result = record.result
        self._append(
            _failed_entry(
                record.data,
                record.partition_key,
                record.explicit_hash_key,
                record.stream_name,
                result.error_code or "UnknownError",
                result.error_message or "",
                len(result.attempts),
            )
        )

    async def take_from(self, producer: Producer) -> None:
        """Write every record that fails in ``producer``; returns after it has closed."""
        async for record in producer.failures():
            self.add_record(record)

    def _append(self, entry: dict[str, Any]) -> None:
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
