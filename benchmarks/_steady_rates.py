"""How fast a steady rate the producer holds, and a web handler's shape (issue 25).

* **Sweep**: 32 shards, 200-byte records over 256 keys, default settings (linger 0.1 s).
  The rate steps up (``--rates``) on each backend; the highest rate held is the last step
  whose p99 latency, from each record's scheduled arrival (no coordinated omission), is
  within ``linger + 20 ms`` with the arrival loop keeping up (99 % of the scheduled
  records put in the step). The steps go on past that, for the plot, until the loop falls
  behind or p99 passes ten times the bound. Each step is a fresh process on a fresh
  stream (``_harness``).
* **Handler shape**: a task per record puts it and awaits its own outcome, 5,000 records/s
  on 8 shards; p99 against ``linger + 30 ms``.
* **The collector** (``--gc``): each of the above runs with the interpreter's garbage
  collector as it is (``default``) and again with the application calling ``gc.collect();
  gc.freeze()`` once its producer has started (``freeze``), so that a full collection no
  longer walks the objects every import made. The time in the collector and its full passes
  are reported for each run.

Writes ``results/<name>.{md,json}`` and ``results/<name>.png`` (p99 against rate).

    uv run python -m benchmarks steady rates     # --rates 10000,20000,...  --duration 5
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from benchmarks._harness import Job, _run_child

LINGER_MS = 100.0
SWEEP_BOUND_MS = LINGER_MS + 20.0
HANDLER_BOUND_MS = LINGER_MS + 30.0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--rates", default="10000,20000,30000,40000,50000,60000,70000,80000,90000,100000"
    )
    parser.add_argument("--shards", type=int, default=32)
    parser.add_argument("--backends", default="trio,asyncio")
    parser.add_argument("--duration", type=float, default=5.0)
    parser.add_argument("--handler-rate", type=float, default=5000.0)
    parser.add_argument("--handler-shards", type=int, default=8)
    parser.add_argument("--engine", choices=["kinesalite", "kinesis-local", "python"])
    parser.add_argument("--gc", default="default,freeze", help="default and/or freeze")
    parser.add_argument(
        "--awaiter", choices=["drain", "each"], default="drain", help="see _harness"
    )
    parser.add_argument("--name", default="steady_rates", help="results/<name>.{md,json,png}")
    args = parser.parse_args()

    from benchmarks._emulator import create_stream, delete_stream
    from benchmarks._report import (
        RESULTS_DIR,
        machine_info,
        markdown_table,
        publish,
        record_index,
        report_header,
    )
    from kinesis_trio.testing._emulators import LocalKinesis, default_engine

    info = machine_info()
    started = time.perf_counter()
    rates = [float(r) for r in args.rates.split(",") if r]
    backends = [b for b in args.backends.split(",") if b]
    modes = [m for m in args.gc.split(",") if m]
    # a variant: the backend, and ", gc frozen" when the application froze the collector
    variants = [(b, m) for m in modes for b in backends]
    labels = {v: v[0] + (", gc frozen" if v[1] == "freeze" else "") for v in variants}
    kind = args.engine or default_engine()
    sweep: dict[str, list[dict[str, Any]]] = {labels[v]: [] for v in variants}
    handler: dict[str, dict[str, Any]] = {}

    def run(url: str, shards: int, job_args: dict[str, Any]) -> dict[str, Any]:
        stream = create_stream(url, shards, prefix="sweep")
        try:
            return _run_child(Job(endpoint=url, stream=stream, **job_args))
        finally:
            delete_stream(url, stream)

    with LocalKinesis(kind, shard_limit=200) as engine:
        url = engine.endpoint_url
        for backend, gc_mode in variants:
            label = labels[backend, gc_mode]
            for rate in rates:
                out = run(
                    url,
                    args.shards,
                    dict(
                        mode="producer",
                        backend=backend,
                        rate=rate,
                        duration=args.duration,
                        count=0,
                        gc=gc_mode,
                        awaiter=args.awaiter,
                    ),
                )
                scheduled = int(rate * args.duration)
                out["rate"] = rate
                # the loop stops at the end of the step: the last tick's records may miss it
                out["behind"] = out["records"] < 0.99 * scheduled
                out["held"] = out["p99_s"] * 1e3 <= SWEEP_BOUND_MS and not out["behind"]
                sweep[label].append(out)
                print(
                    f"sweep {label:18} {rate:9,.0f}/s  records {out['records']:8,}"
                    f"  p50 {out['p50_s'] * 1e3:7.1f} ms  p99 {out['p99_s'] * 1e3:7.1f} ms"
                    f"  cpu {out['cpu_s']:.2f} s  {'held' if out['held'] else 'BROKE'}",
                    flush=True,
                )
                if out["behind"] or out["p99_s"] * 1e3 > 10 * SWEEP_BOUND_MS:
                    break  # past the bound the curve goes on (plotted) until it falls behind
            out = run(
                url,
                args.handler_shards,
                dict(
                    mode="producer",
                    backend=backend,
                    rate=args.handler_rate,
                    duration=args.duration,
                    count=0,
                    shape="handler",
                    gc=gc_mode,
                ),
            )
            handler[label] = out
            print(
                f"handler {label:18} {args.handler_rate:,.0f}/s p50 {out['p50_s'] * 1e3:.1f} ms"
                f"  p99 {out['p99_s'] * 1e3:.1f} ms  gc {_gc(out)}",
                flush=True,
            )

    rows = []
    for label, outs in sweep.items():
        for out in outs:
            rows.append(
                [
                    label,
                    f"{out['rate']:,.0f}",
                    f"{out['records'] / out['wall_s']:,.0f}",
                    f"{out['p50_s'] * 1e3:.1f}",
                    f"{out['p99_s'] * 1e3:.1f}",
                    f"{out['cpu_s'] / out['wall_s'] * 100:.0f} %",
                    _gc(out),
                    "yes" if out["held"] else ("no (behind)" if out["behind"] else "no"),
                ]
            )
    highest = {
        label: max((o["rate"] for o in outs if o["held"]), default=0.0)
        for label, outs in sweep.items()
    }
    hrows = [
        [
            label,
            f"{args.handler_rate:,.0f}",
            f"{out['p50_s'] * 1e3:.1f}",
            f"{out['p99_s'] * 1e3:.1f}",
            _gc(out),
            "yes" if out["p99_s"] * 1e3 <= HANDLER_BOUND_MS else "no",
        ]
        for label, out in handler.items()
    ]
    png = RESULTS_DIR / f"{args.name}.png"
    _plot(sweep, png, args.shards)
    record_index([png], info)
    total = time.perf_counter() - started
    md = report_header("# Steady rates: the highest held, and a handler's shape", info, total)
    md += [
        f"Engine: {kind}. 200-byte records over 256 keys, default settings (linger "
        f"{LINGER_MS:g} ms), {args.duration:g} s per step, each step a fresh process on a "
        "fresh stream; latency from each record's scheduled arrival. CPU: the whole "
        "process (producer and arrival loop) as a share of one core. GC: the time in the "
        "garbage collector as a share of the process CPU, then the full collections and "
        'the longest of them; "gc frozen": the application called `gc.collect(); '
        "gc.freeze()` once its producer had started. The sweep's awaiter: "
        f"`{args.awaiter}` (benchmarks/_harness.py).",
        "",
        f"## Sweep: {args.shards} shards; held: p99 within {SWEEP_BOUND_MS:g} ms, loop on time",
        "",
        markdown_table(
            ["run", "rate/s", "records/s", "p50 ms", "p99 ms", "CPU", "GC", "held"],
            rows,
            "lrrrrrrl",
        ),
        "",
        "Highest rate held: "
        + ", ".join(f"{label} {rate:,.0f}/s" for label, rate in highest.items())
        + f" (the steps: {args.rates}). Plot: `{png.name}`.",
        "",
        f"## Handler shape: a task per record, {args.handler_shards} shards, "
        f"p99 bound {HANDLER_BOUND_MS:g} ms",
        "",
        markdown_table(["run", "rate/s", "p50 ms", "p99 ms", "GC", "within"], hrows, "lrrrrl"),
        "",
    ]
    publish(
        args.name,
        md,
        {"machine": info, "sweep": sweep, "handler": handler, "highest": highest},
        total,
    )


def _gc(out: dict[str, Any]) -> str:
    """The collector's share of the CPU, its full passes and the longest."""
    if "gc_s" not in out:
        return ""
    share = out["gc_s"] / out["cpu_s"] * 100 if out["cpu_s"] else 0.0
    return f"{share:.0f} %, {out['gc_full']} full, max {out['gc_full_max_s'] * 1e3:.0f} ms"


def _plot(sweep: dict[str, list[dict[str, Any]]], path: Any, shards: int) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    for label, outs in sweep.items():
        ax.plot(
            [o["rate"] for o in outs],
            [o["p99_s"] * 1e3 for o in outs],
            marker="o",
            linestyle="--" if "frozen" in label else "-",
            label=label,
        )
    ax.axhline(SWEEP_BOUND_MS, color="grey", linestyle="--", label="linger + 20 ms")
    ax.set_xlabel("records/s (steady, scheduled)")
    ax.set_ylabel("p99 latency, ms")
    ax.set_yscale("log")
    ax.set_title(f"p99 against a steady rate, {shards} shards")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    main()
