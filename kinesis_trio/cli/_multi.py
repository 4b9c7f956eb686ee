"""``perf --processes N``: N producer processes on one stream, their figures summed.

The parent resolves the target once (the endpoint, or the embedded engine it starts) and the
stream, then starts N children (``python -m kinesis_trio perf --child SPEC``), each running
perf's load with its share of ``-n`` and ``-r``. A child says it is ready (its producer
open) in a JSON line on stdout; once all are, the parent writes a common start time (wall
clock) to their stdin and each waits for it. Children send their progress and, at the end,
their result as JSON lines; the parent sums the results.

Children run in sessions of their own, so a terminal's Ctrl-C reaches the parent alone; the
parent passes each Ctrl-C or SIGTERM on as SIGTERM: the first stops the children (they wait
for their records in flight), the second aborts them, a third kills them. A child whose
stdin closes (the parent is gone) stops as on Ctrl-C.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import signal
import sys
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.abc
from anyio.streams.buffered import BufferedByteReceiveStream

from .._config import ProducerConfig
from ._load import (
    _json_report,
    _perf_header,
    _perf_plan,
    _perf_stream,
    _Phase,
    _process_result,
    _run_perf,
    _run_phases,
    _with_perf_target,
    _write_json,
)
from ._options import (
    _LOCAL_CREDENTIALS,
    _TICK,
    _config_fields,
    _Target,
    _UsageError,
)
from ._output import (
    _exit_code,
    _Interrupts,
    _ms,
    _perf_rows,
    _print_summary,
    _Progress,
    _Tracker,
)
from ._sums import ProcessResult, Sum, split_evenly, sum_results

#: Seconds between the start time's announcement and the start.
_START_MARGIN = 0.2
#: Lines of a child's stderr kept for its report.
_TAIL_LINES = 20
_MAX_LINE = 1 << 28


def _run_perf_command(args: argparse.Namespace) -> int:
    """``perf``: in this process, as one of N processes (``--child``), or as their parent."""
    if args.child is not None:
        return _run_child(args)
    if args.stagger and args.processes == 1:
        raise _UsageError("argument --stagger: needs --processes 2 or more")
    if args.failed and args.processes > 1:
        raise _UsageError("argument --failed: not with --processes (yet): use one process")
    if args.processes == 1:
        return _run_perf(args)
    return _run_parent(args)


# -- a child --------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Spec:
    """A child's load: where, what, and its share; ``offset``: seconds after the common start
    at which its first record is due; ``config``: the ProducerConfig fields set."""

    index: int
    endpoint_url: str | None
    region: str | None
    profile: str | None
    local: bool
    stream: str
    size: int
    keys: int
    count: int | None
    rate: float | None
    duration: float | None
    offset: float
    backend: str
    config: dict[str, Any]

    def to_json(self) -> str:
        return json.dumps(dataclasses.asdict(self), separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> _Spec:
        return cls(**json.loads(text))


def _emit(message: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message, separators=(",", ":")) + "\n")
    sys.stdout.flush()


class _ChildProgress(_Progress):
    """Progress as JSON lines on stdout, for the parent: [accepted, ok, failed, ok bytes,
    in flight]."""

    def __init__(self) -> None:
        super().__init__("perf", None, quiet=True, interval=_TICK)

    def update(self, tracker: _Tracker, in_flight: int, limit: str = "") -> None:
        t = tracker
        _emit({"progress": [t.accepted, t.ok, t.failed, t.ok_bytes, in_flight]})

    def log(self, message: str) -> None:
        print(message, file=sys.stderr, flush=True)


async def _follow_parent(fd: int, on_start: Callable[[float], None]) -> None:
    """Read the start time from ``fd`` (the parent's pipe); at its end, stop as on Ctrl-C.

    Polled (a non-blocking read, then a sleep): it works on every backend and anyio 4."""
    os.set_blocking(fd, False)
    buffer = b""
    started = False
    while True:
        try:
            data = os.read(fd, 4096)
        except BlockingIOError:
            await anyio.sleep(0.25 if started else 0.005)
            continue
        if not data:
            os.kill(os.getpid(), signal.SIGTERM)
            return
        buffer += data
        if not started and b"\n" in buffer:
            line, _, buffer = buffer.partition(b"\n")
            on_start(float(json.loads(line)["start"]))
            started = True


def _run_child(args: argparse.Namespace) -> int:
    spec = _Spec.from_json(args.child)
    try:
        config = ProducerConfig(**spec.config)
    except ValueError as exc:
        raise _UsageError(str(exc)) from None
    credentials = _LOCAL_CREDENTIALS if spec.local else None
    target = _Target(spec.endpoint_url, spec.region, spec.profile, credentials, spec.local)
    load = argparse.Namespace(size=spec.size, keys=spec.keys, quiet=True, progress_interval=_TICK)
    count = sys.maxsize if spec.count is None else spec.count
    phase = _Phase("perf", count, spec.rate, spec.duration)

    async def child() -> int:
        got_start = anyio.Event()
        origin: list[float] = []

        def on_start(start: float) -> None:
            origin.append(start)
            got_start.set()

        async def before() -> None:
            _emit({"ready": os.getpid()})
            await got_start.wait()
            await anyio.sleep(max(0.0, origin[0] + spec.offset - time.time()))

        async with anyio.create_task_group() as tg:
            tg.start_soon(_follow_parent, sys.stdin.fileno(), on_start)
            results = await _run_phases(
                load,
                target,
                spec.stream,
                config,
                [phase],
                progress_for=lambda _: _ChildProgress(),
                before=before,
                keep_times=True,
            )
            tg.cancel_scope.cancel()
        if not results:  # stopped before the start
            return 130
        (result,) = results
        _emit({"result": _process_result(result, origin[0]).to_json()})
        return _exit_code(result.tracker, bool(result.interrupted))

    code: int = anyio.run(child, backend=spec.backend)
    return code


# -- the parent -----------------------------------------------------------------------------


@dataclass(eq=False)
class _Child:
    """A child as the parent follows it."""

    spec: _Spec
    settled: anyio.Event  # it is ready, or it has exited
    process: anyio.abc.Process | None = None
    progress: tuple[int, ...] = (0, 0, 0, 0, 0)
    result: ProcessResult | None = None
    returncode: int | None = None
    tail: deque[str] = field(default_factory=lambda: deque(maxlen=_TAIL_LINES))

    @property
    def pid(self) -> int | None:
        return None if self.process is None else self.process.pid

    def signal(self, signum: int) -> None:
        if self.process is not None and self.returncode is None:
            with contextlib.suppress(OSError):
                self.process.send_signal(signal.Signals(signum))

    def take(self, line: bytes) -> None:
        """One line of the child's stdout."""
        try:
            message = json.loads(line)
            if "progress" in message:
                self.progress = tuple(int(n) for n in message["progress"])
            elif "ready" in message:
                self.settled.set()
            elif "result" in message:
                self.result = ProcessResult.from_json(message["result"])
            else:
                raise ValueError("unknown message")
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            text = line.decode("utf-8", "replace").rstrip()
            self.tail.append(f"(stdout, {type(exc).__name__}) {text[:500]}")


async def _follow_child(child: _Child) -> None:
    process = child.process
    assert process is not None and process.stdout is not None
    async with anyio.create_task_group() as tg:
        tg.start_soon(_read_stderr, child)
        lines = BufferedByteReceiveStream(process.stdout)
        while True:
            try:
                line = await lines.receive_until(b"\n", _MAX_LINE)
            except (anyio.EndOfStream, anyio.IncompleteRead, anyio.ClosedResourceError):
                break
            except anyio.DelimiterNotFound:
                child.tail.append(f"(stdout: a line over {_MAX_LINE:,} bytes)")
                break
            child.take(line)
    child.returncode = await process.wait()
    child.settled.set()


async def _read_stderr(child: _Child) -> None:
    assert child.process is not None and child.process.stderr is not None
    partial = b""
    async for chunk in child.process.stderr:
        *lines, partial = (partial + chunk).split(b"\n")
        child.tail.extend(line.decode("utf-8", "replace")[:500] for line in lines)
    if partial:
        child.tail.append(partial.decode("utf-8", "replace")[:500])


class _Forwarder(_Interrupts):
    """Ctrl-C / SIGTERM: SIGTERM to the children (stop, then abort), then SIGKILL."""

    def __init__(self, progress: _Progress, children: Sequence[_Child]) -> None:
        super().__init__(progress)
        self.children = children

    async def _watch(self, *, task_status: anyio.abc.TaskStatus[None]) -> None:
        with anyio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            task_status.started()
            async for _ in signals:
                count = self._signalled()
                signum = signal.SIGTERM
                if count == 1:
                    self._progress.log(
                        "interrupted: stopping the processes; they wait for their records in "
                        "flight (Ctrl-C again to abort)"
                    )
                elif count == 2:
                    self._progress.log(
                        "aborting: the processes' records in flight fail as ProducerAborted "
                        "(Ctrl-C again to kill them)"
                    )
                else:
                    self._progress.log("killing the processes")
                    signum = signal.SIGKILL
                for child in self.children:
                    child.signal(signum)


def _summed_progress(children: Sequence[_Child]) -> tuple[_Tracker, int]:
    tracker = _Tracker()
    in_flight = 0
    for child in children:
        accepted, ok, failed, ok_bytes, flying = child.progress
        tracker.add_counts(accepted, ok, failed, ok_bytes)
        in_flight += flying
    return tracker, in_flight


async def _run_children(
    args: argparse.Namespace, specs: Sequence[_Spec], total: int | None
) -> tuple[list[_Child], int]:
    """Start the children, start them together, follow them to their end; return them and
    how many times the parent was interrupted."""
    children = [_Child(spec, anyio.Event()) for spec in specs]
    progress = _Progress("perf", total, quiet=args.quiet, interval=args.progress_interval)
    forwarder = _Forwarder(progress, children)
    command = [sys.executable, "-m", "kinesis_trio", "perf", "--child"]
    try:
        async with forwarder.watching(), anyio.create_task_group() as outer:
            ticking = anyio.CancelScope()

            async def tick() -> None:
                with ticking:
                    while True:
                        await anyio.sleep(_TICK)
                        progress.update(*_summed_progress(children))

            async with anyio.create_task_group() as followers:
                for child in children:
                    if forwarder.count:  # interrupted while starting them
                        break
                    child.process = await anyio.open_process(
                        [*command, child.spec.to_json()], start_new_session=True
                    )
                    followers.start_soon(_follow_child, child)
                for child in children:
                    if child.process is not None:
                        await child.settled.wait()
                if forwarder.count:
                    # those started after the signal wait for the start: the end of their
                    # stdin stops them
                    for child in children:
                        if child.process is not None and child.process.stdin is not None:
                            await child.process.stdin.aclose()
                else:
                    start = json.dumps({"start": time.time() + _START_MARGIN}).encode() + b"\n"
                    progress.restart(time.monotonic() + _START_MARGIN)
                    for child in children:
                        if child.returncode is None and child.process is not None:
                            assert child.process.stdin is not None
                            with contextlib.suppress(anyio.BrokenResourceError):
                                await child.process.stdin.send(start)
                    outer.start_soon(tick)
            ticking.cancel()
    finally:
        progress.close(_summed_progress(children)[0])
        with anyio.CancelScope(shield=True):
            for child in children:
                if child.process is not None:
                    if child.returncode is None:
                        with contextlib.suppress(OSError):
                            child.process.kill()
                    await child.process.aclose()
    return children, forwarder.count


def _run_parent(args: argparse.Namespace) -> int:
    config, count = _perf_plan(args)
    n = args.processes
    counts: list[int | None]
    if count < sys.maxsize:
        if count < n:
            raise _UsageError(
                f"argument --processes: {n} processes need at least {n} records (-n {count:,})"
            )
        counts = list(split_evenly(count, n))
    else:
        counts = [None] * n
    rate = args.rate / n if args.rate else None

    async def perf(target: _Target) -> int:
        stream, created = await _perf_stream(args, target)
        print(_perf_header(args, stream, config, count) + _share_text(counts, rate, args.stagger))
        sys.stdout.flush()
        specs = [
            _Spec(
                index=i,
                endpoint_url=target.endpoint_url,
                region=target.region,
                profile=target.profile,
                local=target.local,
                stream=stream,
                size=args.size,
                keys=args.keys,
                count=counts[i],
                rate=rate,
                duration=args.duration,
                offset=i * args.stagger + (i / args.rate if args.rate else 0.0),
                backend=args.backend,
                config=_config_fields(args),
            )
            for i in range(n)
        ]
        children, interrupted = await _run_children(
            args, specs, count if count < sys.maxsize else None
        )
        code = _report(args, stream, children, interrupted)
        if created and not target.local:
            print(f"(stream {stream} was left in place; delete it when done)")
        if args.json_report is not None:
            processes = [
                {
                    "index": i,
                    "pid": child.pid,
                    "exit": child.returncode,
                    "status": _status(child, interrupted),
                    "result": None if child.result is None else child.result.to_json(),
                    "stderr_tail": list(child.tail),
                }
                for i, child in enumerate(children)
            ]
            results = [c.result for c in children if c.result is not None]
            _write_json(args.json_report, _json_report(args, stream, config, processes, results))
        return code

    return _with_perf_target(args, perf)


def _share_text(counts: Sequence[int | None], rate: float | None, stagger: float) -> str:
    """E.g. `` in 2 processes: 50,000 records at 2,500 records/s each``."""
    shares = []
    sizes = sorted({c for c in counts if c is not None})
    if sizes:
        shares.append(" or ".join(f"{c:,}" for c in sizes) + " records")
    if rate is not None:
        shares.append(f"at {rate:,.6g} records/s")
    text = f" in {len(counts)} processes"
    if shares:
        text += ": " + " ".join(shares) + " each"
    if stagger:
        text += f", each started {stagger:g} s after the previous"
    return text


# -- the report -----------------------------------------------------------------------------


def _status(child: _Child, interrupted: int) -> str:
    """``ok``, ``failed records``, ``interrupted``, ``stopped before the start``, ``not
    started`` (interrupted first) or ``crashed``: no result, or an exit status its result
    does not explain."""
    code, result = child.returncode, child.result
    if child.process is None:
        return "not started"
    if result is None:
        if interrupted and code is not None and code in (130, -signal.SIGTERM, -signal.SIGKILL):
            return "stopped before the start"
        return "crashed"
    expected = 130 if result.interrupted else (1 if result.failed else 0)
    if code != expected:
        return "crashed"
    return {0: "ok", 1: "failed records", 130: "interrupted"}[code]


def _exit_text(code: int | None) -> str:
    if code is None:
        return "?"
    if code < 0:
        with contextlib.suppress(ValueError):
            return f"killed by {signal.Signals(-code).name}"
    return str(code)


def _latency_rows(total: Sum) -> list[tuple[str, str]]:
    latency = total.latency
    return [
        ("latency p50", _ms(latency.percentile(0.5))),
        ("latency p99", _ms(latency.percentile(0.99))),
        ("latency p99.9", _ms(latency.percentile(0.999))),
        ("latency max", _ms(latency.percentile(1.0))),
    ]


def _process_row(index: int, child: _Child, first_start: float, interrupted: int) -> str:
    r = child.result
    cells = [str(index + 1), str(child.pid or "")]
    if r is None:
        cells += [""] * 10
    else:
        p50, p99 = (r.latency.percentile(q) * 1e3 for q in (0.5, 0.99))
        cells += [
            f"+{(r.started - first_start) * 1e3:,.0f}",
            f"{r.accepted:,}",
            f"{r.accepted / r.elapsed:,.0f}",
            f"{r.accepted_bytes / r.elapsed / 1e6:,.2f}",
            "n/a" if r.latency.count == 0 else f"{p50:,.1f}",
            "n/a" if r.latency.count == 0 else f"{p99:,.1f}",
            f"{r.cpu / r.accepted * 1e6:,.1f}" if r.accepted else "n/a",
            f"{r.throttled_attempts:,}",
            f"{r.failed:,}",
            f"{r.peak_rss_mib:,.0f}",
        ]
    cells.append(f"{_exit_text(child.returncode)} ({_status(child, interrupted)})")
    return "| " + " | ".join(cells) + " |"


def _report(
    args: argparse.Namespace, stream: str, children: Sequence[_Child], interrupted: int
) -> int:
    """Print the sum and a row per process; report crashed children on stderr; the exit
    status (1 if a child crashed, else as perf's)."""
    n = len(children)
    results = [c.result for c in children if c.result is not None]
    crashed = [(i, c) for i, c in enumerate(children) if _status(c, interrupted) == "crashed"]
    tracker = _Tracker()
    first_start = 0.0
    if results:
        total = sum_results(results)
        first_start = total.started
        tracker.add_failures(total.failed, total.codes, total.messages)
        reported = f"{n}" if len(results) == n else f"{n} ({n - len(results)} without a result)"
        rows = [("processes", reported)]
        rows += _perf_rows(
            args.rate,
            total.accepted,
            total.elapsed,
            total.records_per_s,
            total.mb_per_s,
            _latency_rows(total),
            total.cpu_us_per_record if total.accepted else None,
        )
        rows += [
            ("CPU", f"{total.cpu:,.2f} s ({total.cpu / total.elapsed:,.2f} cores)"),
            (
                "throttles",
                f"{total.throttled_attempts:,} attempts ({total.throttled_records:,} records)",
            ),
            ("failed", f"{total.failed:,}"),
            (
                "peak RSS",
                f"{total.peak_rss_mib_max:,.0f} MiB in the largest process, "
                f"{total.peak_rss_mib_sum:,.0f} MiB summed",
            ),
        ]
        notes = [
            f"(summed over {len(results)} processes: elapsed from the earliest start to the "
            "latest end; latency over all their records; CPU: the processes' own)"
        ]
        if total.interrupted or interrupted:
            notes.append("(interrupted)")
        _print_summary(f"perf: {stream}, {n} processes", rows, tracker, notes)
    elif interrupted:
        print("(interrupted before the processes started)")
    else:
        print("(no process reported a result)")
    print()
    print(
        "| process | pid | start ms | records | records/s | MB/s | p50 ms | p99 ms "
        "| CPU µs/record | throttles | failed | peak RSS MiB | exit |"
    )
    print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|:---|")
    for i, child in enumerate(children):
        print(_process_row(i, child, first_start, interrupted))
    sys.stdout.flush()
    for i, child in crashed:
        how = (
            "was killed by " + _exit_text(child.returncode).removeprefix("killed by ")
            if child.returncode is not None and child.returncode < 0
            else f"exited with status {_exit_text(child.returncode)}"
        )
        why = "without a result" if child.result is None else "after its result"
        tail = "\n".join(f"  | {line}" for line in child.tail) or "  (nothing on stderr)"
        print(
            f"kinesis-trio: error: process {i + 1} (pid {child.pid}) {how} {why}; "
            f"the end of its stderr:\n{tail}",
            file=sys.stderr,
            flush=True,
        )
    if crashed:
        return 1
    if interrupted or any(r.interrupted for r in results):
        return 130
    return 1 if any(r.failed for r in results) else 0
