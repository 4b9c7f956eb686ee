"""Where a steady rate's extra CPU goes: ``bench_virtual``'s segments under a CPU-time profiler.

``bench_virtual`` finds the producer's own CPU per record higher at a steady rate than in a
burst. This runs its schedule (one process; each round runs every rate, then the burst,
each producer segment next to its null one; 5 rounds) with ``cProfile`` on a CPU-time timer
(``time.process_time``: time the process is not running is not counted) and reports, per
segment:

- the calls and profiled CPU per record, the null segment's subtracted (CPU: the median
  over the rounds; the null loop's own work moves between rounds on trio);
- the CPU per call of the functions every record goes through once (``put`` to the
  accumulator and the outcome), which run the same code whatever the rate;
- a request's calls by library at the first rate.

The profiler's own cost inflates every call, so the figures are for comparison between
segments and backends, not absolute. Call counts are exact.

    uv run python -m benchmarks.bench_profile     # --rates 1000,5000 --shards 8
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import time
from typing import Any

from benchmarks import bench_virtual
from benchmarks.bench_steady import _drive

#: the functions each record goes through once: (file name, function name)
PER_RECORD = [
    ("_producer.py", "put"),
    ("_producer.py", "put_nowait"),
    ("_engine.py", "accept"),
    ("_ledger.py", "accept"),
    ("_accumulator.py", "add"),
    ("_outcome.py", "__init__"),
    ("_outcome.py", "_resolve"),
]

#: pstats' raw table: (file, line, function) -> (primitive calls, calls, tottime, cumtime, ...)
_Table = dict[tuple[str, int, str], tuple[Any, ...]]


def _profiled(segments: dict[str, list[tuple[int, _Table]]]) -> Any:
    """``bench_virtual``'s segment driver, profiled: each segment's table (with its record
    count) is added to ``segments`` under ``"<mode> <rate>"``, one per round."""

    async def profiled(job: Any, producer: Any) -> dict[str, Any]:
        profile = cProfile.Profile(time.process_time)
        profile.enable()
        try:
            out: dict[str, Any] = await _drive(job, producer)
        finally:
            profile.disable()
        table: _Table = pstats.Stats(profile).stats  # type: ignore[attr-defined]
        segments.setdefault(f"{job.mode} {job.rate:g}", []).append((out["records"], table))
        return out

    return profiled


def _per_record(records: int, table: _Table) -> tuple[float, float]:
    """(calls, profiled µs) per record in a segment."""
    calls = sum(row[1] for row in table.values())
    cpu = sum(row[2] for row in table.values())
    return calls / records, cpu / records * 1e6


def _per_call(table: _Table) -> dict[str, float]:
    """Profiled µs per call of each of ``PER_RECORD``."""
    out: dict[str, float] = {}
    for (path, _line, name), row in table.items():
        for file, function in PER_RECORD:
            if name == function and path.endswith(f"kinesis_trio/{file}") and row[1]:
                out[f"{file[1:-3]}.{function}"] = row[2] / row[1] * 1e6
    return out


def _requests(table: _Table) -> int:
    """The segment's PutRecords answers and errors handled by the engine."""
    return sum(
        row[1]
        for (path, _line, name), row in table.items()
        if path.endswith("kinesis_trio/_engine.py") and name in ("on_answer", "on_error")
    )


def _library(path: str) -> str:
    """A profiled function's library: a package, a stdlib module, or ``built-in``."""
    if path == "~":
        return "built-in (C)"
    if "/kinesis_trio/testing/" in path or "/benchmarks/" in path:
        return "the endpoint and the harness"
    if "site-packages/" in path:
        package = path.split("site-packages/")[1].split("/")[0]
        # the producer's pool posts without httpx; the endpoint builds httpx answers
        return "httpx (the endpoint's answers)" if package == "httpx" else package
    if "/kinesis_trio/" in path:
        return "kinesis_trio"
    stdlib = path.rsplit("/python3.", 1)[-1].split("/", 1)[-1]
    return stdlib.split("/")[0].removesuffix(".py") + " (stdlib)"


def _by_library(table: _Table, null: _Table, requests: int) -> list[tuple[str, float]]:
    """(library, calls) per request, the null segment's subtracted (calls are exact; the
    CPU of one library's share is not: the null segment's loop work moves between rounds)."""
    calls: dict[str, float] = {}
    for key, row in table.items():
        zero = null.get(key, (0, 0, 0.0))
        lib = _library(key[0])
        calls[lib] = calls.get(lib, 0.0) + (row[1] - zero[1]) / requests
    return sorted(calls.items(), key=lambda r: -r[1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", default="1000,5000")
    parser.add_argument("--shards", type=int, default=8)
    parser.add_argument("--backends", default="trio,asyncio")
    parser.add_argument("--records", type=int, default=5_000, help="per segment")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--name", default="profile_steady", help="results/<name>.{md,json}")
    args = parser.parse_args()

    from benchmarks.common import machine_info, markdown_table, median_of, publish, report_header

    info = machine_info()
    started = time.perf_counter()
    rates = [float(r) for r in args.rates.split(",") if r]
    names = [f"{r:g}" for r in rates] + ["0"]
    backends = [b for b in args.backends.split(",") if b]
    rows: list[list[object]] = []
    libraries: dict[str, list[tuple[str, float]]] = {}
    data: dict[str, Any] = {"info": info, "segments": {}}
    for backend in backends:
        segments: dict[str, list[tuple[int, _Table]]] = {}
        bench_virtual._drive = _profiled(segments)  # type: ignore[attr-defined]  # its segments call it
        plan = bench_virtual.Plan(backend, args.shards, [*rates, 0.0], args.records, args.rounds)
        bench_virtual._run(plan)
        segments[f"producer {names[0]}"].pop(0)  # the warm-up, at the first rate
        for name in names:
            pairs = list(zip(segments[f"producer {name}"], segments[f"null {name}"], strict=True))
            own = [_per_record(*producer)[1] - _per_record(*null)[1] for producer, null in pairs]
            cpu = median_of(own)
            records, table = pairs[-1][0]
            calls = _per_record(records, table)[0] - _per_record(*pairs[-1][1])[0]
            requests = _requests(table)
            tables = [_per_call(producer[1]) for producer, _ in pairs]
            per_call = {key: median_of([t.get(key, 0.0) for t in tables]) for key in tables[0]}
            label = "burst" if name == "0" else f"{float(name):,.0f}/s"
            data["segments"][f"{backend} {label}"] = {
                "records": records,
                "requests": requests,
                "calls_per_record": calls,
                "profiled_us_per_record": cpu,
                "profiled_us_per_record_rounds": own,
                "per_call_us": per_call,
            }
            rows.append(
                [
                    backend,
                    label,
                    f"{records / requests:.0f}" if requests else "",
                    f"{calls:.1f}",
                    f"{cpu:.1f} ({min(own):.1f} to {max(own):.1f})",
                    *(f"{per_call.get(f'{f[1:-3]}.{n}', 0.0):.2f}" for f, n in PER_RECORD),
                ]
            )
        _records, table = segments[f"producer {names[0]}"][-1]
        null_table = segments[f"null {names[0]}"][-1][1]
        libraries[backend] = _by_library(table, null_table, _requests(table))
    data["libraries"] = libraries
    total = time.perf_counter() - started
    md = report_header("# Where a steady rate's extra CPU goes (profiled)", info, total)
    md += [
        f"`bench_virtual`'s schedule ({args.shards} shards, {args.records:,} records a "
        f"segment, {args.rounds} rounds) under `cProfile` with a CPU-time timer. Per record: "
        "the producer segment's calls (the last round's; counts are exact) and profiled CPU (the "
        "median over the rounds, and their range) minus its null segment's. Then the CPU per "
        "call (median) of the functions every record goes through once, the same code at "
        "every rate. The profiler's cost inflates every call: compare rows, not with "
        "`virtual.md`.",
        "",
        markdown_table(
            [
                "backend",
                "segment",
                "records/request",
                "calls/record",
                "profiled µs/record (range)",
                *(f"`{f[1:-3]}.{n}` µs/call" for f, n in PER_RECORD),
            ],
            rows,
            "llrrr" + "r" * len(PER_RECORD),
        ),
        "",
        f"Calls per request at {float(names[0]):,.0f}/s by library "
        "(the null segment's subtracted; the records' own calls are in `kinesis_trio` "
        "and the built-ins):",
        "",
    ]
    for backend in backends:
        md += [
            f"{backend}:",
            "",
            markdown_table(
                ["library", "calls/request"],
                [[lib, f"{c:.0f}"] for lib, c in libraries[backend][:12]],
                "lr",
            ),
            "",
        ]
    publish(args.name, md, data, total)


if __name__ == "__main__":
    main()
