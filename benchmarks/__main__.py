"""``python -m benchmarks``: the benchmark suite, one command per question a user asks.

    uv run python -m benchmarks                   # the commands and what each answers
    uv run python -m benchmarks throughput        # one command (its results in results/)
    uv run python -m benchmarks throughput --help # its options
    uv run python -m benchmarks all               # every headline result, then the index

``all`` empties ``results/`` and regenerates every headline result at the checked-out commit
(``--only`` / ``--skip`` run a subset and keep the other files), then draws the charts;
``results/index.md`` gives each file's commit, date, machine and command. Run it on a quiet
machine: nothing else busy, no test suite, no other benchmark.
"""

from __future__ import annotations

import argparse
import importlib
import os
import subprocess
import sys
import time

#: name -> (module, the question it answers, minutes on a 2-core machine). Each command's
#: defaults are its headline run; ``all`` runs them in this order (about 76 minutes).
COMMANDS: dict[str, tuple[str, str, float]] = {
    "throughput": (
        "benchmarks.throughput",
        "Throughput and CPU per record against aiokpl, aws-kinesis-agg + boto3 and boto3",
        2,
    ),
    "latency": (
        "benchmarks.latency",
        "Latency from scheduled arrival at 1,000 and 5,000 records/s, against the peers",
        3,
    ),
    "steady": (
        "benchmarks.steady",
        "CPU per record at a steady rate, and the highest steady rate held",
        5,
    ),
    "sizes": (
        "benchmarks.sizes",
        "Record size (up to 10 MiB), shard count and connections: throughput and CPU",
        7,
    ),
    "backpressure": (
        "benchmarks.backpressure",
        "Backpressure and memory when the endpoint is slower than the application",
        13,
    ),
    "overload": (
        "benchmarks.overload",
        "An overloaded endpoint: time, timeouts and truthful outcomes, adaptive vs fixed",
        7,
    ),
    "reliability": (
        "benchmarks.reliability",
        "AWS's shard limits (share of the limit reached) and failing fast",
        1,
    ),
    "ordering": (
        "benchmarks.ordering",
        'What ordering="per_key" costs against "none"',
        3,
    ),
    "processes": (
        "benchmarks.processes",
        "Many producer processes: scaling, and sharing one shard's limit",
        5,
    ),
    "engines": (
        "benchmarks.engines",
        "The local engines side by side, and the Python engine over days of engine time",
        7,
    ),
    "spool": (
        "benchmarks.spool",
        "The durable spool's cost: no spool, spool_sync interval and put; the disk's fsync",
        6,
    ),
    "lambda": (
        "benchmarks.aws_lambda",
        "A Lambda function: cold start to the first confirmed record, warm invocations, "
        "against boto3's put_records and its retry loop",
        2,
    ),
    "fleet": (
        "benchmarks.fleet",
        "Fleets on one stream: simulated (1 to 256 producers, 1 to 10,000 shards), real "
        "processes beside their simulation, one producer on big streams (parts sim, "
        "processes, streams)",
        15,
    ),
    "kpl": (
        "benchmarks.kpl",
        "Against the real KPL (Java) on a TLS endpoint: a burst's records/s and CPU per "
        "record, put and put_many; latency at 5,000 records/s, in order and a task per record",
        3,
    ),
}
#: Tools: not headline results.
TOOLS: dict[str, tuple[str, str]] = {
    "ab": ("benchmarks.ab", "Two trees of kinesis_trio side by side (an A/B for a change)"),
    "plots": ("benchmarks._plots", "The charts, drawn from the results' JSON"),
    "gsr": (
        "benchmarks.gsr",
        "Glue Schema Registry: CPU per record of each format against plain bytes, and the "
        "cached put path's requests (printed, no result file; about 2 min)",
    ),
    "admission": (
        "benchmarks.admission",
        "Admission by time on and off: slow, throttled and overloaded endpoints, a slow link "
        "(printed, no result file; about 20 min)",
    ),
}


def _list() -> None:
    print(__doc__.strip() if __doc__ else "")
    print("\nheadline commands (python -m benchmarks NAME --help):")
    for name, (_, question, minutes) in COMMANDS.items():
        print(f"  {name:13} {question} (about {minutes:g} min)")
    print("\ntools:")
    for name, (_, what) in TOOLS.items():
        print(f"  {name:13} {what}")


def _run_all(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks all")
    parser.add_argument("--only", default="", help="commands, comma-separated")
    parser.add_argument("--skip", default="", help="commands, comma-separated")
    args = parser.parse_args(argv)
    names = [n for n in args.only.split(",") if n] or list(COMMANDS)
    names = [n for n in names if n not in args.skip.split(",")]
    unknown = [n for n in names if n not in COMMANDS]
    if unknown:
        raise SystemExit(f"unknown commands: {', '.join(unknown)}")
    from benchmarks._report import RESULTS_DIR

    load = os.getloadavg()[0]
    if load > 0.5:
        print(f"warning: load average {load:.2f}: the figures need a quiet machine", flush=True)
    if names == list(COMMANDS):
        for path in RESULTS_DIR.glob("*"):
            path.unlink()
    started = time.perf_counter()
    for name in [*names, "plots"]:
        print(f"\n== benchmarks {name} (at {time.perf_counter() - started:.0f} s)", flush=True)
        # the charts are drawn once, by "plots", at the end
        extra = ["--no-plot"] if name == "latency" else []
        subprocess.run([sys.executable, "-m", "benchmarks", name, *extra], check=True)
    print(f"\n== done in {(time.perf_counter() - started) / 60:.1f} min", flush=True)


def main() -> None:
    argv = sys.argv[1:]
    if not argv or argv[0] in ("-h", "--help", "list"):
        _list()
        return
    name, rest = argv[0], argv[1:]
    if name == "all":
        _run_all(rest)
        return
    module = COMMANDS[name][0] if name in COMMANDS else TOOLS.get(name, ("", ""))[0]
    if not module:
        raise SystemExit(f"benchmarks: no command {name!r} (python -m benchmarks lists them)")
    from benchmarks import _command

    _command.COMMAND[:] = ["benchmarks", name, *rest]
    sys.argv = [f"python -m benchmarks {name}", *rest]
    importlib.import_module(module).main()


if __name__ == "__main__":
    main()
