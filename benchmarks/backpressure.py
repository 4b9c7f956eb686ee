"""Backpressure: memory stays bounded against a slow backend; ``put`` waits, no queue grows.

Putter tasks put fresh 1 KiB records as fast as ``put`` lets them for ``--seconds``
(default 25) against a deliberately slow backend:

* ``fake``: the in-memory FakeKinesis, 1 shard, AWS per-shard limits enforced (1000
  records/s, 1 MiB/s) and 0.5 s latency on every request;
* ``kinesalite``: a real kinesalite (1 shard) behind ``tests.support.fault_proxy.FaultProxy``
  delaying every PutRecords by 0.5 s.

Each backend runs with ``max_outstanding_bytes`` = 8 MiB (``max_outstanding_records`` =
20,000) and with both bounds 4x larger (32 MiB / 80,000, so the byte bound still binds),
each run in a fresh Python process so RSS readings start clean. Every ``--interval`` (0.5 s)
a sampler records outstanding records/bytes, records accepted so far, records confirmed
(resolved ok) so far, put calls currently waiting, and RSS (VmRSS of /proc/self/status).
After the window the putters are cancelled (a waiting put is then not accepted) and the
producer is flushed, so every accepted record is accounted for.

The fake keeps every stored record in memory: the sampler drops them (and the proxy's
event log) as it goes, so the process's RSS is the producer's (plus fixed overheads), not
the backend's.

Run: ``uv run python -m benchmarks backpressure`` (prints markdown; writes
``benchmarks/results/backpressure.md`` and ``.json`` unless ``--no-write``).
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import dataclasses
import datetime
import json
import os
import platform
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio

from benchmarks._command import command_line
from benchmarks._report import record_index
from kinesis_trio import KinesisClient, Outcome, Producer, ProducerConfig, StaticCredentials
from kinesis_trio import __version__ as kinesis_trio_version
from kinesis_trio.testing import FakeKinesis, Faults
from kinesis_trio.testing._emulators import EMULATORS, LocalKinesis

MIB = 1024 * 1024
CREDS = StaticCredentials("AKIDBENCH", "bench-secret")
RESULTS = Path(__file__).resolve().parent / "results"
REPO = Path(__file__).resolve().parent.parent
RECORD_BYTES = 1024
KEYS = [f"key-{i:04d}" for i in range(4096)]  # 8 bytes each: 1032 bytes per record
DEFAULT_QUEUE = ProducerConfig().shard_queue_size


@dataclass(frozen=True)
class Spec:
    """One run: backend, bounds, duration."""

    backend: str  # "fake" | "kinesalite"
    max_bytes: int
    max_records: int
    seconds: float
    interval: float
    delay: float
    putters: int
    event_loop: str
    shard_queue_size: int
    endpoint: str | None = None  # kinesalite's, for the kinesalite backend
    drain_timeout: float = 120.0

    @property
    def label(self) -> str:
        label = f"{self.backend}, {self.max_bytes // MIB} MiB bound"
        if self.shard_queue_size == DEFAULT_QUEUE:
            label += f", default shard_queue_size ({DEFAULT_QUEUE})"
        return label


@dataclass
class State:
    """Counters shared by the putters and the sampler (one event loop: no locks)."""

    producer: Producer
    max_bytes: int
    max_records: int
    accepted: int = 0
    in_put: int = 0
    waited_puts: int = 0
    first_block_t: float | None = None
    first_block_accepted: int = 0
    max_outstanding_bytes: int = 0
    max_outstanding_records: int = 0
    confirmed: int = 0
    failed: int = 0
    failures: collections.Counter[str] = field(default_factory=collections.Counter)
    pending: collections.deque[Outcome] = field(default_factory=collections.deque)
    next_i: int = 0

    def scan(self) -> None:
        """Count newly resolved outcomes (ok / failed) and forget them."""
        still: collections.deque[Outcome] = collections.deque()
        for outcome in self.pending:
            if outcome.done():
                result = outcome.result()
                if result.ok:
                    self.confirmed += 1
                else:
                    self.failed += 1
                    self.failures[result.error_code or "?"] += 1
            else:
                still.append(outcome)
        self.pending = still


def rss_kib(field_name: str = "VmRSS") -> int:
    with open("/proc/self/status", encoding="ascii") as f:
        for line in f:
            if line.startswith(field_name + ":"):
                return int(line.split()[1])
    raise RuntimeError(f"{field_name} not in /proc/self/status")


async def putter(state: State, t0: float) -> None:
    producer = state.producer
    buf = bytearray(b"r" * RECORD_BYTES)
    size = RECORD_BYTES + len(KEYS[0])
    while True:
        i = state.next_i
        state.next_i += 1
        buf[:8] = i.to_bytes(8, "big")
        data = bytes(buf)  # a fresh object per record, as an application would have
        if (
            producer.outstanding_records >= state.max_records
            or producer.outstanding_bytes + size > state.max_bytes
        ):
            state.waited_puts += 1
            if state.first_block_t is None:
                state.first_block_t = time.perf_counter() - t0
                state.first_block_accepted = state.accepted
        state.in_put += 1
        try:
            outcome = await producer.put(data, KEYS[i % len(KEYS)])
        finally:
            state.in_put -= 1
        state.accepted += 1
        # put returned without a task switch after accepting: these are the true maxima
        if producer.outstanding_bytes > state.max_outstanding_bytes:
            state.max_outstanding_bytes = producer.outstanding_bytes
        if producer.outstanding_records > state.max_outstanding_records:
            state.max_outstanding_records = producer.outstanding_records
        state.pending.append(outcome)


def sample(state: State, t: float, phase: str) -> dict[str, Any]:
    state.scan()
    p = state.producer
    return {
        "t": round(t, 3),
        "phase": phase,
        "outstanding_records": p.outstanding_records,
        "outstanding_bytes": p.outstanding_bytes,
        "accepted": state.accepted,
        "confirmed": state.confirmed,
        "failed": state.failed,
        "blocked_puts": state.in_put,
        "rss_kib": rss_kib(),
    }


async def run_one(spec: Spec) -> dict[str, Any]:
    fake: FakeKinesis | None = None
    proxy: Any = None
    stream = "bp"
    with contextlib.ExitStack() as stack:
        if spec.backend == "fake":
            fake = FakeKinesis(enforce_limits=True, faults=Faults(latency=spec.delay))
            fake.create_stream(stream, 1)
            endpoint = "http://fake"
            transport = fake.transport()
        else:
            from tests.support.fault_proxy import FaultProxy

            assert spec.endpoint is not None
            stream = f"bp-{uuid.uuid4().hex[:8]}"
            async with KinesisClient(
                region_name="us-east-1", endpoint_url=spec.endpoint, credentials=CREDS
            ) as client:
                await client.create_stream(stream, 1)
                await client.wait_for_stream(stream)
            proxy = stack.enter_context(FaultProxy(spec.endpoint, seed=1))
            proxy.set_faults(delay=spec.delay)
            endpoint = proxy.url
            transport = None
        config = ProducerConfig(
            max_outstanding_bytes=spec.max_bytes,
            max_outstanding_records=spec.max_records,
            # the 32 MiB runs hold ~35 s of a ~1 MiB/s shard: keep records from expiring
            record_ttl=300.0,
            close_timeout=5.0,
            shard_queue_size=spec.shard_queue_size,
        )
        rss_before = rss_kib()
        samples: list[dict[str, Any]] = []
        async with Producer(
            stream,
            region_name="us-east-1",
            endpoint_url=endpoint,
            credentials=CREDS,
            config=config,
            transport=transport,
        ) as producer:
            state = State(producer, spec.max_bytes, spec.max_records)
            rss_baseline = rss_kib()  # producer open and idle
            t0 = time.perf_counter()
            samples.append(sample(state, 0.0, "put"))

            def trim() -> None:
                if fake is not None:  # the fake keeps every record: drop them
                    for shard in fake.streams[stream].shards:
                        shard.records.clear()
                    fake.calls.clear()
                if proxy is not None:
                    proxy.reset_log()

            async with anyio.create_task_group() as tg:
                for _ in range(spec.putters):
                    tg.start_soon(putter, state, t0)
                k = 1
                while (t := k * spec.interval) <= spec.seconds + 1e-9:
                    await anyio.sleep(max(0.0, t0 + t - time.perf_counter()))
                    trim()
                    samples.append(sample(state, time.perf_counter() - t0, "put"))
                    k += 1
                tg.cancel_scope.cancel()  # waiting puts are cancelled: not accepted
            rss_hwm_window = rss_kib("VmHWM")
            stopped = time.perf_counter()
            drained = False
            with anyio.move_on_after(spec.drain_timeout):
                async with anyio.create_task_group() as tg:

                    async def sampler() -> None:
                        while True:
                            await anyio.sleep(spec.interval)
                            trim()
                            samples.append(sample(state, time.perf_counter() - t0, "drain"))

                    tg.start_soon(sampler)
                    await producer.flush()
                    drained = True
                    tg.cancel_scope.cancel()
            drain_s = time.perf_counter() - stopped
        state.scan()
        samples.append(sample(state, time.perf_counter() - t0, "closed"))
        throttled = fake.stats.entries_throttled if fake is not None else 0
    return {
        "spec": dataclasses.asdict(spec),
        "label": spec.label,
        "samples": samples,
        "rss_before_producer_kib": rss_before,
        "rss_baseline_kib": rss_baseline,
        "rss_hwm_window_kib": rss_hwm_window,
        "max_outstanding_bytes": state.max_outstanding_bytes,
        "max_outstanding_records": state.max_outstanding_records,
        "first_block_s": state.first_block_t,
        "first_block_accepted": state.first_block_accepted,
        "waited_puts": state.waited_puts,
        "accepted": state.accepted,
        "confirmed": state.confirmed,
        "failed": state.failed,
        "failures": dict(state.failures),
        "unresolved": len(state.pending),
        "drained": drained,
        "drain_s": drain_s,
        "fake_throttled_entries": throttled,
    }


def _at(samples: list[dict[str, Any]], t: float) -> dict[str, Any]:
    return min(samples, key=lambda s: abs(s["t"] - t))


def verdict(run: dict[str, Any]) -> dict[str, Any]:
    """The per-run figures the markdown and JSON report."""
    spec = run["spec"]
    window = [s for s in run["samples"] if s["phase"] == "put"]
    start, end = window[0], window[-1]
    quarter = _at(window, spec["seconds"] * 0.25)
    span = end["t"] - quarter["t"]
    put_rate = (end["accepted"] - quarter["accepted"]) / span
    confirmed_rate = (end["confirmed"] - quarter["confirmed"]) / span
    # least-squares slope of RSS over the window after the 25 % mark, MiB per minute
    tail = [s for s in window if s["t"] >= quarter["t"]]
    ts = [s["t"] for s in tail]
    rs = [s["rss_kib"] / 1024 for s in tail]
    mt, mr = sum(ts) / len(ts), sum(rs) / len(rs)
    slope = sum((a - mt) * (b - mr) for a, b in zip(ts, rs, strict=True)) / sum(
        (a - mt) ** 2 for a in ts
    )
    rss_quarter = quarter["rss_kib"] / 1024
    rss_end = end["rss_kib"] / 1024
    growth = rss_end - rss_quarter
    bound_mib = spec["max_bytes"] / MIB
    tolerance = max(0.1 * bound_mib, 0.02 * rss_quarter)
    # one-sided: the question is whether RSS grows with time; falling back is fine
    no_growth = growth <= tolerance
    trend = "GREW" if not no_growth else ("fell" if growth < -tolerance else "no growth")
    first_block = run["first_block_s"]
    after_fill = [s for s in window if s["t"] >= first_block] if first_block is not None else []
    return {
        "bound_mib": bound_mib,
        "outstanding_bytes_share_after_bound_reached": (
            [
                min(s["outstanding_bytes"] for s in after_fill) / spec["max_bytes"],
                max(s["outstanding_bytes"] for s in after_fill) / spec["max_bytes"],
            ]
            if after_fill
            else None
        ),
        "max_outstanding_mib": run["max_outstanding_bytes"] / MIB,
        "max_outstanding_records": run["max_outstanding_records"],
        "bytes_bound_held": run["max_outstanding_bytes"] <= spec["max_bytes"],
        "records_bound_held": run["max_outstanding_records"] <= spec["max_records"],
        "rss_baseline_mib": run["rss_baseline_kib"] / 1024,
        "rss_at_25pct_mib": rss_quarter,
        "rss_end_mib": rss_end,
        "rss_growth_after_warmup_mib": growth,
        "rss_slope_mib_per_min": slope * 60,
        "rss_peak_mib": run["rss_hwm_window_kib"] / 1024,
        "rss_above_baseline_mib": rss_end - run["rss_baseline_kib"] / 1024,
        "rss_growth_tolerance_mib": tolerance,
        "rss_no_growth": no_growth,
        "rss_trend": trend,
        "put_rate": put_rate,
        "confirmed_rate": confirmed_rate,
        "confirmed_over_put": confirmed_rate / put_rate if put_rate else float("nan"),
        "fill_rate": (
            run["first_block_accepted"] / run["first_block_s"] if run["first_block_s"] else None
        ),
        "first_block_s": run["first_block_s"],
        "blocked_samples": sum(1 for s in window[1:] if s["blocked_puts"] == spec["putters"])
        / max(1, len(window) - 1),
        "window_s": end["t"] - start["t"],
    }


def machine() -> dict[str, Any]:
    mem = 0
    with open("/proc/meminfo", encoding="ascii") as f:
        for line in f:
            if line.startswith("MemTotal:"):
                mem = int(line.split()[1]) * 1024
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True
        ).stdout.strip()
        # the code measured: changes elsewhere (docs, results) do not make it another tree
        dirty = bool(
            subprocess.run(
                ["git", "status", "--porcelain", "--untracked-files=no", "--", "kinesis_trio"],
                cwd=REPO,
                capture_output=True,
                text=True,
                check=True,
            ).stdout.strip()
        )
    except (OSError, subprocess.CalledProcessError):
        commit, dirty = "unknown", False
    return {
        "cpus": os.cpu_count(),
        "memory_gib": round(mem / 2**30, 1),
        "os": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "kinesis_trio": kinesis_trio_version,
        "kinesalite": EMULATORS["kinesalite"],
        "git_commit": commit,
        "git_dirty": dirty,
        "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
    }


def child(spec_json: str) -> None:
    spec = Spec(**json.loads(spec_json))
    result = anyio.run(run_one, spec, backend=spec.event_loop)
    print("RESULT " + json.dumps(result), flush=True)


def run_in_subprocess(spec: Spec) -> dict[str, Any]:
    cmd = [
        sys.executable,
        "-m",
        "benchmarks.backpressure",
        "--child",
        json.dumps(dataclasses.asdict(spec)),
    ]
    proc = subprocess.run(cmd, cwd=REPO, stdout=subprocess.PIPE, text=True, check=True)
    for line in proc.stdout.splitlines():
        if line.startswith("RESULT "):
            result: dict[str, Any] = json.loads(line[len("RESULT ") :])
            return result
    raise RuntimeError(f"no result from {cmd}:\n{proc.stdout}")


def _f(x: float, digits: int = 1) -> str:
    return f"{x:,.{digits}f}"


def markdown(runs: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    out: list[str] = []
    m = meta["machine"]
    spec0 = runs[0]["spec"]
    out.append("# Backpressure: bounded memory against a slow backend\n")
    out.append(f"Command: `{meta['command']}`  ")
    out.append(
        f"Machine: {m['cpus']} cores, {m['memory_gib']} GiB, {m['os']}, Python {m['python']}, "
        f"kinesis-trio {m['kinesis_trio']}, kinesalite {m['kinesalite']}, commit "
        f"{m['git_commit'][:12]}"
        f"{' (+ uncommitted changes in kinesis_trio/)' if m['git_dirty'] else ''}, "
        f"{m['date']}.\n"
    )
    out.append(
        f"{spec0['putters']} putter tasks on {spec0['event_loop']} put fresh "
        f"{RECORD_BYTES}-byte records (8-byte keys: {RECORD_BYTES + 8} bytes counted per "
        f"record) as fast as `put` returns, for {spec0['seconds']:g} s, sampled every "
        f"{spec0['interval']:g} s. Backends: **fake** = in-memory FakeKinesis, 1 shard, "
        f"`enforce_limits=True` (1000 records/s, 1 MiB/s), `Faults(latency={spec0['delay']:g})`;"
        f" **kinesalite** = kinesalite, 1 shard, behind `FaultProxy(delay={spec0['delay']:g})`. "
        "Default ProducerConfig (aggregation on, `rate_limit=150`) except the bounds, "
        f"`shard_queue_size={spec0['shard_queue_size']}`, `record_ttl=300` (the 32 MiB runs "
        "hold ~35 s of a ~1 MiB/s shard: records must not expire) and `close_timeout=5`. "
        f"With the default `shard_queue_size` ({DEFAULT_QUEUE} sealed batches per shard) a "
        "single shard's queue of ~50 KiB aggregates fills before 8 MiB are outstanding, so "
        "`put` waits on that instead; the runs marked *default shard_queue_size* show it. "
        "Each run is a fresh process. After the window the putters are cancelled (a waiting "
        "`put` is then not accepted) and the producer flushed.\n"
    )
    out.append("## Verdict\n")
    bound_runs = [r for r in runs if r["first_block_s"] is not None]
    all_held = all(
        r["verdict"]["bytes_bound_held"] and r["verdict"]["records_bound_held"] for r in runs
    )
    all_flat = all(r["verdict"]["rss_no_growth"] for r in runs)
    growths = [r["verdict"]["rss_growth_after_warmup_mib"] for r in runs]
    ratios = [r["verdict"]["confirmed_over_put"] for r in runs]
    if bound_runs:
        shares = [r["verdict"]["outstanding_bytes_share_after_bound_reached"] for r in bound_runs]
        lo = min(share[0] for share in shares)
        hi = max(share[1] for share in shares)
        at_bound = (
            f" (in the {len(bound_runs)} runs where they bind, the outstanding bytes stayed "
            f"between {lo:.1%} and {hi:.1%} of the bound from when it was first reached to "
            "the end of the window)"
        )
    else:
        at_bound = " (they never bound: the shard queues filled first)"
    out.append(
        f"**{'Bounded' if all_held and all_flat else 'NOT bounded'}.** In all {len(runs)} runs "
        f"the outstanding bounds {'held' if all_held else 'were EXCEEDED'}{at_bound}; RSS "
        f"{'did not grow' if all_flat else 'GREW'} after warm-up (change from the 25 % mark to "
        f"the end: {min(growths):+.1f} to {max(growths):+.1f} MiB); `put` ran at the "
        "confirmation rate "
        f"(confirmed / put {min(ratios):.3f} to {max(ratios):.3f}); "
        f"{sum(r['failed'] for r in runs):,} records failed.\n"
    )
    out.append(
        "| run | bound | max outstanding | RSS baseline → at 25 % → end (MiB) | "
        "RSS growth after warm-up | RSS slope after warm-up | RSS end - baseline | "
        "put rate (rec/s) | confirmed rate (rec/s) | confirmed / put | "
        "samples with every putter waiting | failed |"
    )
    out.append("|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    for run in runs:
        v = run["verdict"]
        held = "✓" if v["bytes_bound_held"] and v["records_bound_held"] else "✗ EXCEEDED"
        flat = v["rss_trend"]
        out.append(
            f"| {run['label']} | {v['bound_mib']:g} MiB / {run['spec']['max_records']:,} rec | "
            f"{_f(v['max_outstanding_mib'], 2)} MiB / {v['max_outstanding_records']:,} rec "
            f"{held} | {_f(v['rss_baseline_mib'])} → {_f(v['rss_at_25pct_mib'])} → "
            f"{_f(v['rss_end_mib'])} | {v['rss_growth_after_warmup_mib']:+.1f} MiB ({flat}) | "
            f"{v['rss_slope_mib_per_min']:+.2f} MiB/min | {_f(v['rss_above_baseline_mib'])} MiB |"
            f" {_f(v['put_rate'], 0)} | {_f(v['confirmed_rate'], 0)} | "
            f"{v['confirmed_over_put']:.3f} | {v['blocked_samples']:.0%} | "
            f"{run['failed']:,} |"
        )
    out.append("")
    for backend in dict.fromkeys(r["spec"]["backend"] for r in runs):
        pair = [
            r
            for r in runs
            if r["spec"]["backend"] == backend and r["spec"]["shard_queue_size"] != DEFAULT_QUEUE
        ]
        if len(pair) == 2:
            small, big = sorted(pair, key=lambda r: r["spec"]["max_bytes"])
            a = small["verdict"]["rss_above_baseline_mib"]
            b = big["verdict"]["rss_above_baseline_mib"]
            ratio = b / a if a > 0 else float("nan")
            per_mib = (b - a) / (big["verdict"]["bound_mib"] - small["verdict"]["bound_mib"])
            fixed = a - per_mib * small["verdict"]["bound_mib"]
            out.append(
                f"- **{backend}**: bound x{big['spec']['max_bytes'] / small['spec']['max_bytes']:g}"
                f" → RSS above baseline {a:.1f} → {b:.1f} MiB (x{ratio:.2f}); per MiB of bound: "
                f"{a / small['verdict']['bound_mib']:.2f} vs "
                f"{b / big['verdict']['bound_mib']:.2f} MiB of RSS; as a line: "
                f"{fixed:.1f} MiB fixed + {per_mib:.2f} MiB of RSS per MiB of bound."
            )
    for run in runs:
        v = run["verdict"]
        fill = v["fill_rate"]
        if fill:
            how = (
                f"`put` took the first {run['first_block_accepted']:,} records at "
                f"{fill:,.0f} records/s and reached the bound at {v['first_block_s']:.3f} s; "
                f"from then on it ran at the confirmation rate ({v['put_rate']:,.0f} records/s, "
                f"{fill / v['put_rate']:,.0f}x slower) and {run['waited_puts']:,} put calls "
                "found the producer at its bound and waited"
            )
        else:
            how = (
                "the outstanding bounds were never reached: `put` waited on the full shard "
                f"queue instead (shard_queue_size={run['spec']['shard_queue_size']}), with at "
                f"most {v['max_outstanding_mib']:.2f} MiB / {v['max_outstanding_records']:,} "
                f"records outstanding, and ran at {v['put_rate']:,.0f} records/s"
            )
        drain = (
            f"flush after the window took {run['drain_s']:.1f} s"
            if run["drained"]
            else f"flush did not finish within {run['spec']['drain_timeout']:g} s"
        )
        out.append(
            f"- {run['label']}: {how}. {run['accepted']:,} accepted, "
            f"{run['confirmed']:,} confirmed ok, {run['failed']:,} failed"
            f"{' ' + str(run['failures']) if run['failures'] else ''}, "
            f"{run['unresolved']:,} unresolved; {drain}"
            + (
                f"; the fake throttled {run['fake_throttled_entries']:,} Kinesis records."
                if run["spec"]["backend"] == "fake"
                else "."
            )
        )
    out.append(
        "\nRSS change is from the 25 % mark to the end of the put window: *no growth* when it "
        "grew by at most 10 % of the bound or 2 % of RSS, whichever is larger (*fell* when it "
        "dropped by more; *GREW* otherwise). Rates are over the same stretch. `put` returns "
        "no faster than records are confirmed: confirmed / put ≈ 1 means no queue grows "
        "behind it. The fill rates (before the bound is reached) are noisy: other benchmarks "
        "shared the 2 cores.\n"
    )
    for run in runs:
        out.append(f"## Time series: {run['label']}\n")
        out.append(
            "| t (s) | phase | outstanding records | outstanding MiB | accepted | confirmed ok |"
            " failed | puts waiting | RSS MiB | put rec/s | confirmed rec/s |"
        )
        out.append("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        prev: dict[str, Any] | None = None
        for s in run["samples"]:
            if prev is not None and s["t"] > prev["t"]:
                dt = s["t"] - prev["t"]
                pr = _f((s["accepted"] - prev["accepted"]) / dt, 0)
                cr = _f((s["confirmed"] - prev["confirmed"]) / dt, 0)
            else:
                pr = cr = ""
            out.append(
                f"| {s['t']:.1f} | {s['phase']} | {s['outstanding_records']:,} | "
                f"{s['outstanding_bytes'] / MIB:.2f} | {s['accepted']:,} | {s['confirmed']:,} |"
                f" {s['failed']:,} | {s['blocked_puts']} | {s['rss_kib'] / 1024:.1f} | {pr} |"
                f" {cr} |"
            )
            prev = s
        out.append("")
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--seconds", type=float, default=120.0, help="put window per run")
    parser.add_argument("--interval", type=float, default=0.5, help="sampling interval")
    parser.add_argument("--delay", type=float, default=0.5, help="backend delay per request")
    parser.add_argument("--putters", type=int, default=4, help="putter tasks")
    parser.add_argument("--bound-mib", type=int, default=8, help="max_outstanding_bytes, MiB")
    parser.add_argument("--max-records", type=int, default=20_000)
    parser.add_argument("--scale", type=int, default=4, help="the second run's bound factor")
    parser.add_argument(
        "--shard-queue-size",
        type=int,
        default=4096,
        help="ProducerConfig.shard_queue_size for the bound runs (large: the bounds bind)",
    )
    parser.add_argument(
        "--no-default-queue-run",
        action="store_true",
        help="skip the extra run per backend with the default shard_queue_size",
    )
    parser.add_argument("--event-loop", choices=["trio", "asyncio"], default="trio")
    parser.add_argument(
        "--backends", default="fake,kinesalite", help="comma-separated: fake, kinesalite"
    )
    parser.add_argument("--no-write", action="store_true", help="do not write results/")
    parser.add_argument(
        "--from-json",
        type=Path,
        help="re-render the markdown from a backpressure.json (no measurement)",
    )
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child)
        return
    if args.from_json:
        saved = json.loads(args.from_json.read_text(encoding="utf-8"))
        for run in saved["runs"]:
            run["verdict"] = verdict(run)
        text = markdown(saved["runs"], saved)
        print(text)
        if not args.no_write:
            write(text, saved, saved["runs"])
        return

    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    unknown = set(backends) - {"fake", "kinesalite"}
    if unknown:
        parser.error(f"unknown backends {sorted(unknown)}")
    command = command_line()
    runs: list[dict[str, Any]] = []
    with contextlib.ExitStack() as stack:
        endpoint = None
        if "kinesalite" in backends:
            endpoint = stack.enter_context(LocalKinesis("kinesalite")).endpoint_url
        variants = [(1, args.shard_queue_size), (args.scale, args.shard_queue_size)]
        if not args.no_default_queue_run:
            variants.append((1, DEFAULT_QUEUE))
        for backend in backends:
            for factor, queue in variants:
                spec = Spec(
                    backend=backend,
                    max_bytes=args.bound_mib * factor * MIB,
                    max_records=args.max_records * factor,
                    shard_queue_size=queue,
                    seconds=args.seconds,
                    interval=args.interval,
                    delay=args.delay,
                    putters=args.putters,
                    event_loop=args.event_loop,
                    endpoint=endpoint if backend == "kinesalite" else None,
                )
                print(f"running {spec.label} ...", file=sys.stderr, flush=True)
                run = run_in_subprocess(spec)
                run["verdict"] = verdict(run)
                runs.append(run)
    meta = {"machine": machine(), "command": command}
    text = markdown(runs, meta)
    print(text)
    if not args.no_write:
        write(text, meta, runs)


def write(text: str, meta: dict[str, Any], runs: list[dict[str, Any]]) -> None:
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "backpressure.md").write_text(text + "\n", encoding="utf-8")
    payload = {
        "machine": meta["machine"],
        "command": meta["command"],
        "record_bytes": RECORD_BYTES,
        "runs": runs,
        "verdict": {r["label"]: r["verdict"] for r in runs},
    }
    (RESULTS / "backpressure.json").write_text(
        json.dumps(payload, indent=1) + "\n", encoding="utf-8"
    )
    record_index([RESULTS / "backpressure.md", RESULTS / "backpressure.json"])
    print(f"wrote {RESULTS / 'backpressure.md'} and .json", file=sys.stderr)


if __name__ == "__main__":
    main()
