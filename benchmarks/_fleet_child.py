"""A fleet's producer in a process of its own, on real time, against a local engine.

Holds the :class:`Job` of one child (``python -m benchmarks._fleet_child --child JOB``), the
child's run (:func:`_child`: a ``_fleet_member.Member`` on the wall clock through a real
``Producer``, its requests timed) and the parent's side: :func:`run_fleet` (N children
started together: each opens its producer and says so, then all are given one start time
on the wall clock) and :func:`run_stream` (one child that runs the schedule through a
null producer, then through the producer, with its memory read before and after). Used by
``_fleet_processes`` and ``_fleet_streams``.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from typing import IO, Any

import anyio
import anyio.to_thread

from benchmarks._command import ROOT
from benchmarks._fleet_member import WARMUP, Member, NullProducer, fleet_keys

#: seconds a child waits for its outcomes past the schedule's end plus ``record_ttl``
#: before it closes its producer (which fails what is left): a guard, not a figure
DRAIN_GUARD = 30.0
#: the start is this long after the last child said it was ready (s)
START_DELAY = 1.0
CREDS = ("AKIDBENCH", "bench-secret")


@dataclass
class Job:
    """One child: producer ``index`` of a fleet on ``stream`` at ``endpoint``."""

    endpoint: str
    stream: str
    index: int
    rate: float
    duration: float
    record_size: int
    keys: int
    seed: int = 1
    #: ProducerConfig fields (``admission_ttl_share`` None: admission by time off)
    settings: dict[str, Any] = field(default_factory=dict)
    #: "fleet": wait for the parent's start time; "stream": a null run first, then the
    #: producer's, at once, with the process's memory read
    mode: str = "fleet"


def _rss_mib() -> float:
    from benchmarks._child import proc_rss_mib

    return proc_rss_mib(os.getpid())


class _Timed:
    """The producer's PutRecords calls: how many, and their seconds (the round trips)."""

    def __init__(self, producer: Any) -> None:
        self.calls = 0
        self.seconds: list[float] = []
        client = producer.client
        original = client.call_raw

        async def timed(operation: str, body: bytes, **options: Any) -> Any:
            started = time.perf_counter()
            try:
                return await original(operation, body, **options)
            finally:
                self.calls += 1
                self.seconds.append(time.perf_counter() - started)

        client.call_raw = timed

    def figures(self) -> dict[str, float]:
        took = sorted(self.seconds)
        return {
            "requests": self.calls,
            "request_p50_s": took[len(took) // 2] if took else 0.0,
            "request_p99_s": took[min(len(took) - 1, int(0.99 * len(took)))] if took else 0.0,
        }


def _member(job: Job, start: float, ttl: float) -> Member:
    end = start + job.duration
    return Member(
        rate=job.rate,
        start=start,
        end=end,
        record_size=job.record_size,
        keys=fleet_keys(job.seed, job.keys),
        seed=f"{job.seed}/putter/{job.index}",
        window=(start + WARMUP, end),
        drain_until=end + ttl + DRAIN_GUARD,
    )


async def _start_time() -> float:
    """Say ready, read the start time (wall clock) from the parent: it on the loop's clock."""
    print(json.dumps({"ready": os.getpid()}), flush=True)
    line = await anyio.to_thread.run_sync(sys.stdin.readline)
    return anyio.current_time() + float(line) - time.time()


async def _child(job: Job) -> dict[str, Any]:
    from kinesis_trio import Producer, ProducerConfig, StaticCredentials

    config = ProducerConfig(**job.settings)
    out: dict[str, Any] = {"index": job.index, "pid": os.getpid()}
    if job.mode == "stream":
        # the harness's own cost: the same schedule through a null producer, first
        null = _member(job, anyio.current_time(), config.record_ttl)
        cpu0 = time.process_time()
        await null.run(NullProducer())
        out["null_cpu_s"] = time.process_time() - cpu0
        out["null_records"] = null.tally.accepted
        del null
        gc.collect()
        out["rss_before_mib"] = _rss_mib()
    producer = Producer(
        job.stream,
        region_name="us-east-1",
        endpoint_url=job.endpoint,
        credentials=StaticCredentials(*CREDS),
        config=config,
    )
    async with producer:
        timed = _Timed(producer)
        if job.mode == "stream":
            out["rss_open_mib"] = _rss_mib()
            cpu0 = time.process_time()
            await anyio.sleep(1.0)
            out["idle_cpu_first_s"] = time.process_time() - cpu0
            start = anyio.current_time()
        else:
            start = await _start_time()
            await anyio.sleep_until(start)
        member = _member(job, start, config.record_ttl)
        cpu0 = time.process_time()
        await member.run(producer)
        out["cpu_s"] = time.process_time() - cpu0
        out["rss_end_mib"] = _rss_mib()
        out["totals"] = producer.metrics.totals()
        out.update(timed.figures())
    member.settle()
    out["report"] = member.report(digits=4)
    return out


def _spawn(job: Job, stderr: IO[bytes]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "benchmarks._fleet_child", "--child", json.dumps(asdict(job))],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=stderr,
        text=True,
    )


def _result(proc: subprocess.Popen[str], out: str, stderr: IO[bytes]) -> dict[str, Any]:
    line = next((ln for ln in reversed(out.splitlines()) if ln.startswith('{"index"')), None)
    if proc.returncode or line is None:
        stderr.seek(0)
        tail = stderr.read().decode(errors="replace")[-2000:]
        raise RuntimeError(f"a fleet child failed ({proc.returncode}): {tail}")
    result: dict[str, Any] = json.loads(line)
    return result


def run_fleet(jobs: list[Job], timeout: float) -> tuple[list[dict[str, Any]], float]:
    """Start every job's child, wait until each has opened its producer, give them one
    start time; their results, and the seconds from the first start to the start time."""
    with contextlib.ExitStack() as stack:
        errs = [stack.enter_context(tempfile.TemporaryFile()) for _ in jobs]
        t0 = time.time()
        procs = [_spawn(job, err) for job, err in zip(jobs, errs, strict=True)]
        try:
            for proc, err in zip(procs, errs, strict=True):
                assert proc.stdout is not None
                if not proc.stdout.readline():
                    proc.wait()
                    _result(proc, "", err)
            start = time.time() + START_DELAY
            for proc in procs:
                assert proc.stdin is not None
                proc.stdin.write(f"{start!r}\n")
                proc.stdin.flush()
            deadline = time.monotonic() + timeout
            results = []
            for proc, err in zip(procs, errs, strict=True):
                out, _ = proc.communicate(timeout=max(1.0, deadline - time.monotonic()))
                results.append(_result(proc, out, err))
        finally:
            for proc in procs:
                if proc.poll() is None:
                    proc.kill()
                    proc.wait()
    return results, start - t0


def run_stream(job: Job, timeout: float) -> dict[str, Any]:
    """One ``stream`` job's child: its result."""
    with tempfile.TemporaryFile() as err:
        proc = _spawn(job, err)
        try:
            out, _ = proc.communicate(timeout=timeout)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        return _result(proc, out, err)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else "")
    parser.add_argument("--child", required=True, help="a Job as JSON")
    args = parser.parse_args()
    job = Job(**json.loads(args.child))
    print(json.dumps(anyio.run(_child, job, backend="trio")), flush=True)


if __name__ == "__main__":
    main()
