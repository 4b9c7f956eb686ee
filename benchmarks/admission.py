"""Admission by time, on and off, side by side: does a slow endpoint still expire records?

``ProducerConfig.admission_ttl_share`` (on: a share of ``record_ttl``, a third by default) makes
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
import json
import os
import time
from typing import Any, Literal

import anyio

from ._admission_engine import EngineSpec, _engine_child
from ._admission_runs import (
    BODY_PER_BYTE,
    CASE_NAMES,
    RECORD,
    Run,
    Sizes,
    _config_fields,
    cases,
    client_send_buffer,
    default_share,
    run_case,
)

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
