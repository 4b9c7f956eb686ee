"""The simulation (``fleet sim``): N producers on one stream, on virtual time, in one process.

N real producers (``kinesis_trio.Producer``: engine and shell) write to one ``FakeKinesis(
enforce_limits=True)`` (AWS's per-shard limits: 1,000 records/s and 1 MiB/s, token buckets
holding one second's worth) through ``fake.transport()``: each producer's own connection
pool, h11 framing and SigV4 over in-memory connections, no sockets. Every request takes a
round trip of ``--rtt`` (20 ms) plus ``--per-byte`` (8 ns) per body byte of virtual time,
served at once (no queue: the limits are the stream's), times a seeded draw: ``1 -
--jitter`` plus an exponential of mean ``--jitter`` (0.5: half the round trip at least, the
round trip on average, a tail to 2.8x at p99). The jitter models what varies from request
to request on a network and a server; without it the order in which requests sent at one
virtual instant reach a shard's bucket would follow the order they were sent in, the same
at every step, and the fleet would be less fair than real processes are (at N = 6, 2.25x,
4 shards, admission on: fairness 0.65-0.80 over seeds 1-5 without, 0.77-0.81 with it;
uniform ±25 % gave 0.62-0.83). All producers run in one
``trio.run`` on ``MockClock(autojump_threshold=0)``; trio's scheduler, ``random`` and every
``random.Random()`` the producers and the fake make are seeded, so a scenario gives the
same figures every time (``_fleet_sim``).

Each producer is offered an open-loop schedule: records of the row's size over random keys
(a pool of 16 per shard, 4,096 to 65,536), record *i* due at ``start + i / rate``, the
fleet's total ``offered`` times the stream's capacity, split evenly, for the row's duration
(``--stagger S`` spreads the starts over S seconds; ``--set NAME=VALUE`` sets any
``ProducerConfig`` field, ``--admission on,off`` runs each row with admission by time on
and off). The putter wakes at most every 10 ms
and puts what is due; a ``put`` that waits (admission) holds back the records behind it; at
the end of the schedule a waiting ``put`` is cancelled (its record is not accepted). Every
accepted record's outcome is awaited, before the producer closes, and classified: ok,
expired (``RecordExpired``), other failure.

Per row: **capacity used** (user data bytes confirmed from 1 s (the fake's full buckets'
second) to the end of the schedule, per second, over the stream's capacity; aggregation's
own bytes are not counted: ``stored_share`` in the JSON counts what the shards took),
**throttled** (the fake's entries throttled over all entries, drain included),
**accepted** (of the records offered), **expired** and **failed**, **fairness** (the
slowest producer's bytes confirmed from 1 s to the end of the schedule over the fastest's,
while the fleet contends: the drain after it is not counted, where with admission off every
producer's queue empties alone and an uneven fleet looks even), each
confirmed record's **age** at confirmation from its ``put`` call and from its scheduled
arrival (p99 and max, the drain after the schedule included), **put waited** (the share of
the putters' time spent inside ``put``), **CPU per record** (``time.process_time`` over the
whole run, the fake's own work and the producers' start included, over the records
confirmed) and the run's real seconds.

What a simulated request costs (about 1.5 ms of CPU here: both ends of HTTP, SigV4, the
fake) bounds the grid: a throttled fleet sends many requests (every producer retries every
shard it was throttled on), and every byte costs too (about 10 ms per MB). So the rows keep
within two budgets: a stream of more than 64 MiB/s of capacity gets every shard's limits
scaled down to fit it (the fake's rates and the producers' ``rate_limit`` times
``64 / S``: the S = 1,000 and 10,000 rows, marked ``x0.064`` and ``x0.0064``), and
records are made larger than ``--record-size`` when the fleet would be offered more than
5,000 a second (at most one shard's bytes per second). A run is cut at the fake's
30,000th request (``--max-requests``; deterministic, like the rest): every producer is
cancelled and what it still holds fails (``ProducerAborted``); the row says when. The
default grid, admission by time (``admission_ttl_share``) on and off where affordable:

* by producers, 4 shards, 2.25x: N = 1, 2, 6 for 30 s (on, off); N = 24 for 10 s,
  N = 64 for 5 s, N = 256 for 3 s (on); N = 6 at 4x for 20 s (on, off);
* by shards, 2 producers, 2.25x: S = 1 for 30 s (on, off); S = 64 and 1,000 for 5 s (on);
  S = 10,000 (1 producer, 2 s, on: a smoke run).

::

    uv run python -m benchmarks fleet sim                   # the grid, about 6 min
    uv run python -m benchmarks fleet sim --quick           # about 40 s
    uv run python -m benchmarks fleet sim --producers 6 --shards 4 --offered 2.25,4 \\
        --duration 60 --admission on,off --name fleet_n6
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from benchmarks import _fleet_sim
from benchmarks._fleet_sim import Scenario, scaled

#: (group, producers, shards, offered, duration, admission settings): the headline grid
GRID: list[tuple[str, int, int, float, float, tuple[bool, ...]]] = [
    ("producers", 1, 4, 2.25, 30.0, (True, False)),
    ("producers", 2, 4, 2.25, 30.0, (True, False)),
    ("producers", 6, 4, 2.25, 30.0, (True, False)),
    ("producers", 24, 4, 2.25, 10.0, (True,)),
    ("producers", 64, 4, 2.25, 5.0, (True,)),
    ("producers", 256, 4, 2.25, 3.0, (True,)),
    ("producers", 6, 4, 4.0, 20.0, (True, False)),
    ("shards", 2, 1, 2.25, 30.0, (True, False)),
    ("shards", 2, 64, 2.25, 5.0, (True,)),
    ("shards", 2, 1000, 2.25, 5.0, (True,)),
    ("shards", 1, 10_000, 2.25, 2.0, (True,)),
]
#: ``--quick``: under a minute
QUICK: list[tuple[str, int, int, float, float, tuple[bool, ...]]] = [
    ("producers", 1, 4, 2.25, 10.0, (True, False)),
    ("producers", 6, 4, 2.25, 10.0, (True, False)),
    ("producers", 24, 4, 2.25, 3.0, (True,)),
    ("shards", 2, 1, 2.25, 10.0, (True, False)),
    ("shards", 2, 16, 2.25, 3.0, (True,)),
]
#: a row is cut at the fake's this-many-th request (about 1.5 ms of real time each here)
MAX_REQUESTS = 30_000
QUICK_MAX_REQUESTS = 10_000
#: the columns a fleet's row starts with (the simulation's and the processes' tables)
FLEET_COLUMNS = [
    "N",
    "S",
    "offered",
    "record B",
    "seconds",
    "admission",
    "capacity used",
    "throttled",
    "accepted",
    "expired",
    "failed",
    "fairness",
]
HEADER = [
    *FLEET_COLUMNS,
    "age p99 / max from put (s)",
    "age p99 / max from schedule (s)",
    "put waited",
    "CPU µs/record",
    "real s",
]
ALIGN = "rrrrrlrrrrrrrrrrr"


def _floats(text: str) -> list[float]:
    return [float(x) for x in text.split(",") if x]


def _ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x]


def _admissions(text: str) -> tuple[bool, ...]:
    words = [w for w in text.split(",") if w]
    if not words or any(w not in ("on", "off") for w in words):
        raise SystemExit(f"--admission takes on, off or on,off, not {text!r}")
    return tuple(w == "on" for w in words)


def _setting(text: str) -> tuple[str, Any]:
    """``NAME=VALUE`` of a ProducerConfig field; the value read as JSON, else a string."""
    name, sep, value = text.partition("=")
    if not sep:
        raise argparse.ArgumentTypeError(f"--set takes NAME=VALUE, not {text!r}")
    try:
        return name, json.loads(value)
    except ValueError:
        return name, value


def grid(args: argparse.Namespace) -> list[tuple[str, Scenario]]:
    """The scenarios to run, each with its group (``producers`` or ``shards``)."""
    options: dict[str, Any] = {
        "stagger": args.stagger,
        "rtt": args.rtt,
        "per_byte": args.per_byte,
        "jitter": args.jitter,
        "seed": args.seed,
        "settings": tuple(args.set),
        "max_requests": args.max_requests
        if args.max_requests is not None
        else (QUICK_MAX_REQUESTS if args.quick else MAX_REQUESTS),
    }
    budgets = {
        "capacity_budget": args.capacity_budget * _fleet_sim.MIB,
        "records_budget": args.records_budget,
    }
    chosen = _admissions(args.admission) if args.admission else None
    if args.producers or args.shards:
        ns, ss = _ints(args.producers or "6"), _ints(args.shards or "4")
        by = "shards" if len(ss) > 1 and len(ns) == 1 else "producers"
        rows = [(by, n, s, o) for n in ns for s in ss for o in _floats(args.offered or "2.25")]
        plan = [(g, n, s, o, args.duration or 30.0, chosen or (True, False)) for g, n, s, o in rows]
    else:
        plan = [
            (g, n, s, o, args.duration or d, chosen or a)
            for g, n, s, o, d, a in (QUICK if args.quick else GRID)
            if not args.offered or o in _floats(args.offered)
        ]
    return [
        (g, scaled(n, s, o, d, args.record_size, admission=on, **budgets, **options))
        for g, n, s, o, d, admissions in plan
        for on in admissions
    ]


def _age(p99: float, top: float) -> str:
    return f"{p99:.1f} / {top:.1f}"


def table_row(row: dict[str, Any]) -> list[object]:
    """A result row as the table shows it."""
    sc = row["scenario"]
    scale = sc["limit_scale"]
    accepted = row["accepted"]
    return [
        sc["producers"],
        f"{sc['shards']:,}" + (f" (x{scale:.2g})" if scale != 1.0 else ""),
        f"{sc['offered']:g}x",
        f"{sc['record_size']:,}",
        f"{sc['duration']:g}"
        + ("" if row["cut_at_s"] is None else f" (cut {row['cut_at_s']:.1f})"),
        "on" if sc["admission"] else "off",
        f"{row['capacity_used']:.3f}",
        f"{row['throttled_share']:.1%}",
        f"{accepted / row['offered_records']:.1%}" if row["offered_records"] else "-",
        f"{row['expired']:,} ({row['expired'] / accepted:.1%})" if accepted else "0",
        f"{row['failed']:,}",
        f"{row['fairness']:.2f}",
        _age(row["age_from_put_p99_s"], row["age_from_put_max_s"]),
        _age(row["age_from_schedule_p99_s"], row["age_from_schedule_max_s"]),
        f"{row['put_wait_share']:.1%}",
        "-" if row["cpu_us_per_record"] is None else f"{row['cpu_us_per_record']:.0f}",
        f"{row['real_s']:.1f}",
    ]


def _markdown(args: argparse.Namespace, rows: list[dict[str, Any]]) -> list[str]:
    md: list[str] = [
        "Method: see `benchmarks/fleet.py` (its docstring). Each row: N producers on one "
        "`FakeKinesis(enforce_limits=True)` stream of S shards, offered the multiple of the "
        "stream's capacity for the duration (virtual seconds), records of the size given "
        f"over random keys; round trip {args.rtt * 1e3:g} ms + {args.per_byte * 1e9:g} ns "
        f"per byte, times {1 - args.jitter:g} + an exponential of mean {args.jitter:g} "
        "(seeded). S marked (xK): every shard's limits (the fake's and the producers' "
        "`rate_limit`) times K, the stream's capacity kept at 64 MiB/s. Capacity used: "
        "user data bytes confirmed per second from 1 s to the schedule's end, over the "
        "stream's capacity. Expired: of the records accepted. Ages: at confirmation, from "
        "the `put` call and from the scheduled arrival, the drain after the schedule "
        "included. CPU: the whole process over the run (the fake's own work, which is "
        "most of it, and the producers' start included) per record confirmed. A row "
        "marked (cut T) was cut at virtual second T, at the fake's "
        f"{rows[0]['scenario']['max_requests'] if rows else 0:,}th request (`--max-requests`): "
        "every producer cancelled, its unresolved records failed (`ProducerAborted`, "
        "in the failed column); its figures cover the time until then.",
        "",
    ]
    for group, title in (("producers", "By producers"), ("shards", "By shards")):
        chosen = [r for r in rows if r["group"] == group]
        if chosen:
            md += [f"## {title}", "", markdown_table(HEADER, [table_row(r) for r in chosen])]
            md.append("")
    return md


def markdown_table(headers: list[str], rows: list[list[object]]) -> str:
    from benchmarks._report import markdown_table as table

    return table(headers, rows, ALIGN)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else "")
    parser.add_argument("--producers", help="N, comma-separated (with --shards: a grid)")
    parser.add_argument("--shards", help="S, comma-separated")
    parser.add_argument("--offered", help="multiples of the capacity, comma-separated")
    parser.add_argument("--duration", type=float, help="virtual seconds (every row)")
    parser.add_argument("--record-size", type=int, default=200, help="bytes (at least)")
    parser.add_argument("--admission", help="on, off or on,off (default: the grid's)")
    parser.add_argument("--stagger", type=float, default=0.0, help="starts spread over (s)")
    parser.add_argument("--rtt", type=float, default=0.020, help="round trip (s)")
    parser.add_argument("--per-byte", type=float, default=8e-9, help="seconds per body byte")
    parser.add_argument(
        "--jitter",
        type=float,
        default=0.5,
        help="each round trip times 1 - J + an exponential draw of mean J (0: none)",
    )
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--set", type=_setting, action="append", default=[], help="ProducerConfig NAME=VALUE"
    )
    parser.add_argument("--capacity-budget", type=float, default=64.0, help="MiB/s")
    parser.add_argument("--records-budget", type=float, default=_fleet_sim.RECORDS_BUDGET)
    parser.add_argument(
        "--max-requests",
        type=int,
        help=f"cut a run at the fake's Nth request (default {MAX_REQUESTS:,}, "
        f"--quick {QUICK_MAX_REQUESTS:,}; 0: never)",
    )
    parser.add_argument("--quick", action="store_true", help="a grid of under a minute")
    parser.add_argument("--no-plot", action="store_true")
    parser.add_argument("--name", default="fleet", help="results/<name>.{md,json,png}")
    args = parser.parse_args()

    from benchmarks._command import command_line, log
    from benchmarks._report import RESULTS_DIR, machine_info, publish, report_header

    info = machine_info()
    started = time.perf_counter()
    rows: list[dict[str, Any]] = []
    for group, scenario in grid(args):
        summary, cost = _fleet_sim.run(scenario)
        rows.append({"group": group, **summary, **cost})
        log(
            f"{scenario.label()}: capacity {summary['capacity_used']:.3f}, expired "
            f"{summary['expired']:,}, p99 age {summary['age_from_put_p99_s']:.1f} s, "
            f"{cost['real_s']:.1f} s real (at {time.perf_counter() - started:.0f} s)"
        )
    total = time.perf_counter() - started
    md = report_header("# A fleet of producers on one stream, on virtual time", info, total)
    md += _markdown(args, rows)
    data = {"command": command_line(), "machine": info, "settings": vars(args), "rows": rows}
    if not args.no_plot:
        from benchmarks._fleet_plot import fleet_charts

        fleet_charts(data, RESULTS_DIR, args.name)
    publish(args.name, md, data, total)


if __name__ == "__main__":
    main()
