"""Charts from ``benchmarks/results/*.json`` (whatever exists), as PNGs next to them.

* ``throughput_vs_record_size.png`` and ``throughput_vs_shards.png`` from ``sweeps.json``;
* ``latency_cdf.png`` from ``latency.json`` (each row's ``quantiles_ms``, 0..100 %);
* ``backpressure.png`` from ``backpressure.json`` (outstanding bytes and RSS over time);
* ``processes.png`` from ``processes.json`` (producer processes sharing a shard over time);
* ``fleet_by_producers.png`` and ``fleet_by_shards.png`` from ``fleet.json`` (``_fleet_plot``).

A missing file, or one without the rows a chart needs, skips that chart with a message.

Run: ``uv run python -m benchmarks._plots [--results DIR]``.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import sys
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.ticker import FuncFormatter, LogLocator

from benchmarks._report import record_index

RESULTS = Path(__file__).resolve().parent / "results"
MIB = 1024 * 1024
Row = dict[str, Any]

#: Sweep names (a row's ``sweep`` field) that mean "record size" / "shard count".
SIZE_SWEEPS = {"record_bytes", "record_size", "size", "record-size", "sizes"}
SHARD_SWEEPS = {"shards", "shard", "shard_count", "shard-count"}
#: Fields that tell series apart when they vary (in this order in labels).
SERIES_FIELDS = ("library", "variant", "aggregation", "mode", "backend", "rate_limits")


def log(msg: str) -> None:
    print(msg, file=sys.stderr)


def load(results: Path, name: str) -> dict[str, Any] | None:
    path = results / f"{name}.json"
    if not path.exists():
        log(f"skip: {path} does not exist")
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except ValueError as exc:
        log(f"skip: {path} is not valid JSON ({exc})")
        return None
    if isinstance(data, list):
        return {"rows": data}
    if not isinstance(data, dict):
        log(f"skip: {path} holds a {type(data).__name__}, not an object")
        return None
    return data


def rows_of(data: dict[str, Any]) -> list[Row]:
    rows = data.get("rows")
    if rows is None:
        rows = data.get("results", [])
    return [r for r in rows if isinstance(r, dict) and not r.get("error")]


def number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return None if math.isnan(value) or math.isinf(value) else float(value)


def caption(data: dict[str, Any]) -> str:
    """A one-line machine / command footnote."""
    m = data.get("machine")
    parts: list[str] = []
    if isinstance(m, dict):
        cores = m.get("cores", m.get("cpus"))
        if cores:
            parts.append(f"{cores} cores")
        for key in ("cpu_model", "kernel", "os"):
            if m.get(key):
                parts.append(str(m[key]))
        if m.get("python"):
            parts.append(f"Python {m['python']}")
        if m.get("git_commit"):
            parts.append(f"commit {m['git_commit']}")
        if m.get("date"):
            parts.append(str(m["date"]))
    text = ", ".join(parts)
    cmd = data.get("command")
    if cmd:
        text += f"\n{cmd}"
    return text


def reserve_bottom(fig: Figure, inches: float) -> None:
    """Keep ``inches`` at the bottom of a constrained-layout figure free of axes."""
    fraction = inches / fig.get_figheight()
    fig.get_layout_engine().set(rect=(0, fraction, 1, 1 - fraction))  # type: ignore[union-attr,call-arg]


def legend_below(fig: Figure, handles: list[Any], labels: list[str], ncols: int = 3) -> None:
    """A figure legend under the axes, above the footnote."""
    ncols = max(1, min(ncols, len(labels)))
    rows = -(-len(labels) // ncols)
    footnote = 0.32  # inches for the two-line footnote
    fig.legend(
        handles,
        labels,
        loc="lower center",
        bbox_to_anchor=(0.5, footnote / fig.get_figheight()),
        ncols=ncols,
        fontsize=8,
        frameon=False,
    )
    reserve_bottom(fig, footnote + 0.2 * rows + 0.1)


def finish(fig: Figure, data: dict[str, Any], path: Path) -> None:
    note = caption(data)
    if note:
        fig.text(0.01, 0.005, note, fontsize=7, color="0.4", va="bottom")
    fig.savefig(path, dpi=130)
    plt.close(fig)
    record_index([path], data.get("machine"))
    log(f"wrote {path}")


# -- series ---------------------------------------------------------------------------------


def series_label(row: Row, fields: Sequence[str]) -> str:
    parts: list[str] = []
    for f in fields:
        value = row.get(f)
        if f == "aggregation" and isinstance(value, bool):
            parts.append("aggregation on" if value else "aggregation off")
        elif value not in (None, ""):
            parts.append(str(value))
    return ", ".join(parts) or "run"


def varying(rows: Iterable[Row], fields: Sequence[str]) -> list[str]:
    rows = list(rows)
    out = [f for f in fields if len({json.dumps(r.get(f), sort_keys=True) for r in rows}) > 1]
    # a variant name usually already says library/aggregation/mode: keep it alone if it
    # tells the series apart by itself
    if "variant" in out:
        others = [f for f in out if f != "variant"]
        by_variant: dict[str, set[str]] = defaultdict(set)
        for r in rows:
            by_variant[str(r.get("variant"))].add(json.dumps([r.get(f) for f in others]))
        if all(len(v) == 1 for v in by_variant.values()):
            return ["variant"]
    return out or [f for f in fields if any(r.get(f) not in (None, "") for r in rows)][:1]


def group(
    rows: Iterable[Row], x_field: str, y: Callable[[Row], float | None], fields: Sequence[str]
) -> dict[str, dict[float, list[float]]]:
    """label -> x -> y values (repeats kept for medians and ranges)."""
    out: dict[str, dict[float, list[float]]] = defaultdict(lambda: defaultdict(list))
    for r in rows:
        x, value = number(r.get(x_field)), y(r)
        if x is None or value is None:
            continue
        out[series_label(r, fields)][x].append(value)
    return out


def plot_series(ax: Axes, series: dict[str, dict[float, list[float]]]) -> None:
    markers = "osD^v<>ph*"
    for i, (label, points) in enumerate(sorted(series.items())):
        xs = sorted(points)
        med = [statistics.median(points[x]) for x in xs]
        lo = [m - min(points[x]) for x, m in zip(xs, med, strict=True)]
        hi = [max(points[x]) - m for x, m in zip(xs, med, strict=True)]
        repeated = any(len(points[x]) > 1 for x in xs)
        ax.errorbar(
            xs,
            med,
            yerr=[lo, hi] if repeated else None,
            marker=markers[i % len(markers)],
            markersize=4,
            capsize=3,
            label=label,
        )


def sweep_rows(rows: list[Row], names: set[str], x_field: str) -> list[Row]:
    """Rows of one sweep: by their ``sweep`` field, else rows where ``x_field`` varies with
    the other swept parameters at their most common values."""
    if any("sweep" in r for r in rows):
        return [r for r in rows if str(r.get("sweep", "")).lower() in names]
    others = [f for f in ("record_bytes", "shards", "max_connections") if f != x_field]
    chosen = [r for r in rows if number(r.get(x_field)) is not None]
    for f in others:
        values = Counter(json.dumps(r.get(f)) for r in chosen)
        if len(values) > 1:
            common = values.most_common(1)[0][0]
            chosen = [r for r in chosen if json.dumps(r.get(f)) == common]
    return chosen if len({r.get(x_field) for r in chosen}) > 1 else []


def fixed_params(rows: list[Row], skip: str) -> str:
    parts = []
    for f, fmt in (
        ("record_bytes", "{} B records"),
        ("shards", "{} shard(s)"),
        ("max_connections", "max_connections {}"),
        ("records", "{:,} records"),
    ):
        values = {r.get(f) for r in rows if r.get(f) is not None}
        if f != skip and len(values) == 1:
            parts.append(fmt.format(values.pop()))
    return ", ".join(parts)


def bytes_label(value: float, _pos: object = None) -> str:
    for unit, size in (("MiB", MIB), ("KiB", 1024)):
        if value >= size:
            return f"{value / size:g} {unit}"
    return f"{value:g} B"


def mb_per_s(row: Row) -> float | None:
    value = number(row.get("mb_per_s"))
    if value is not None:
        return value
    rate, size = number(row.get("records_per_s")), number(row.get("record_bytes"))
    return rate * size / 1e6 if rate is not None and size is not None else None


def throughput_chart(
    data: dict[str, Any], names: set[str], x_field: str, path: Path, title: str
) -> bool:
    rows = sweep_rows(rows_of(data), names, x_field)
    if not rows:
        log(f"skip {path.name}: no {x_field} sweep rows in sweeps.json")
        return False
    # A sweep's variant name can include the swept value ("... record_bytes=32"): then no
    # variant has two points, and keying series by it gives one unconnected dot per point.
    x_per_variant: dict[str, set[Any]] = defaultdict(set)
    for r in rows:
        x_per_variant[str(r.get("variant"))].add(r.get(x_field))
    candidates: tuple[str, ...] = SERIES_FIELDS
    if all(len(xs) == 1 for xs in x_per_variant.values()):
        candidates = tuple(f for f in SERIES_FIELDS if f != "variant")
    fields = varying(rows, candidates)
    rate = group(rows, x_field, lambda r: number(r.get("records_per_s")), fields)
    mbps = group(rows, x_field, mb_per_s, fields)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 5.5), layout="constrained")
    plot_series(ax1, rate)
    plot_series(ax2, mbps)
    for ax in (ax1, ax2):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.grid(True, which="both", alpha=0.3)
        xs = sorted({x for s in rate.values() for x in s} | {x for s in mbps.values() for x in s})
        ax.set_xticks(xs)
        if x_field == "record_bytes":
            ax.xaxis.set_major_formatter(FuncFormatter(bytes_label))
            ax.set_xlabel("record size (data bytes)")
        else:
            ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _p: f"{v:g}"))
            ax.set_xlabel(x_field.replace("_", " "))
        ax.xaxis.set_minor_formatter(FuncFormatter(lambda _v, _p: ""))
        if len(xs) > 6:
            ax.tick_params(axis="x", labelrotation=45)
    ax1.set_ylabel("records/s (log)")
    ax2.set_ylabel("MB/s of record data (log)")
    ax1.set_title("records per second")
    ax2.set_title("megabytes per second (10^6 B)")
    handles, labels = ax1.get_legend_handles_labels()
    legend_below(fig, handles, labels)
    fixed = fixed_params(rows, x_field)
    fig.suptitle(title + (f" ({fixed})" if fixed else "") + "; median, bars: min-max")
    finish(fig, data, path)
    return True


def latency_chart(data: dict[str, Any], path: Path) -> bool:
    rows = [
        r
        for r in rows_of(data)
        if isinstance(r.get("quantiles_ms"), list) and len(r["quantiles_ms"]) >= 2
    ]
    if not rows:
        log(f"skip {path.name}: no rows with quantiles_ms in latency.json")
        return False
    rates = sorted({number(r.get("rate", r.get("target_rate"))) or 0.0 for r in rows})
    fig, axes = plt.subplots(
        1, len(rates), figsize=(6 * len(rates), 5), layout="constrained", squeeze=False
    )
    fields = varying(rows, SERIES_FIELDS)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    names = sorted({series_label(r, fields) for r in rows})
    color_of = {name: colors[i % len(colors)] for i, name in enumerate(names)}
    for ax, rate in zip(axes[0], rates, strict=True):
        chosen = [r for r in rows if (number(r.get("rate", r.get("target_rate"))) or 0.0) == rate]
        for r in sorted(chosen, key=lambda r: series_label(r, fields)):
            q = [number(v) for v in r["quantiles_ms"]]
            n = len(q) - 1
            # a logit axis shows the tail; it cannot show p0 (min) and p100 (max)
            pts = [(v, i / n) for i, v in enumerate(q) if v is not None and 0 < i < n]
            ax.plot(
                [max(v, 1e-3) for v, _ in pts],
                [p for _, p in pts],
                color=color_of[series_label(r, fields)],
            )
        ax.set_xscale("log")
        ax.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _p: f"{v:,.4g}"))
        ax.xaxis.set_minor_formatter(FuncFormatter(lambda _v, _p: ""))
        ax.set_yscale("logit")
        ax.set_xlabel("latency, put to resolved outcome (ms, log)")
        ax.set_ylabel("percentile (logit scale)")
        ticks = [0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.95, 0.99]
        ax.set_yticks(ticks, [f"p{t * 100:g}" for t in ticks])
        ax.yaxis.set_minor_formatter(FuncFormatter(lambda _v, _p: ""))
        ax.set_ylim(0.008, 0.992)
        ax.grid(True, which="major", alpha=0.3)
        ax.set_title(f"{rate:,.0f} records/s offered" if rate else "latency")
    handles = [Line2D([], [], color=color_of[name]) for name in names]
    legend_below(fig, handles, names)
    fig.suptitle("Latency CDF (from 101 quantiles per run)")
    finish(fig, data, path)
    return True


def run_label(run: dict[str, Any]) -> str:
    """A run's label without its backend (the column says it)."""
    label = str(run.get("label", ""))
    return label.removeprefix(f"{run['spec']['backend']}, ")


def backpressure_chart(data: dict[str, Any], path: Path) -> bool:
    runs = [r for r in data.get("runs", []) if isinstance(r, dict) and r.get("samples")]
    if not runs:
        log(f"skip {path.name}: no runs in backpressure.json")
        return False
    backends = list(dict.fromkeys(r["spec"]["backend"] for r in runs))
    fig, axes = plt.subplots(
        2,
        len(backends),
        figsize=(6.5 * len(backends), 8),
        layout="constrained",
        sharex="col",
        squeeze=False,
    )
    reserve_bottom(fig, 0.35)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    labels = list(dict.fromkeys(run_label(r) for r in runs))
    color_of = {label: colors[i % len(colors)] for i, label in enumerate(labels)}
    for col, backend in enumerate(backends):
        top, bottom = axes[0][col], axes[1][col]
        chosen = [r for r in runs if r["spec"]["backend"] == backend]
        t_end = max(s["t"] for r in chosen for s in r["samples"])
        window = max(r["spec"]["seconds"] for r in chosen)
        for ax in (top, bottom):
            ax.set_xlim(0, t_end * 1.02)
            ax.axvspan(window, t_end * 1.02, color="0.92", zorder=0)
            ax.grid(True, alpha=0.3)
        for bound in sorted({r["spec"]["max_bytes"] for r in chosen}):
            top.axhline(bound / MIB, color="0.2", linestyle="--", linewidth=1)
            top.annotate(
                f"max_outstanding_bytes = {bound / MIB:g} MiB",
                (window * 0.3, bound / MIB),
                xytext=(0, 3),
                textcoords="offset points",
                fontsize=7,
                color="0.2",
            )
        for i, run in enumerate(chosen):
            label = run_label(run)
            color = color_of[label]
            samples = run["samples"]
            ts = [s["t"] for s in samples]
            top.plot(ts, [s["outstanding_bytes"] / MIB for s in samples], color=color)
            rss = [s["rss_kib"] / 1024 for s in samples]
            bottom.plot(ts, rss, color=color)
            base = run.get("rss_baseline_kib")
            if isinstance(base, (int, float)):
                bottom.axhline(base / 1024, color=color, linestyle=":", linewidth=1)
                at_end = next((s for s in reversed(samples) if s["phase"] == "put"), samples[-1])
                # RSS at the end of the put window, labelled at staggered places on the line
                bottom.annotate(
                    f"{at_end['rss_kib'] / 1024 - base / 1024:+.0f} MiB over idle "
                    f"at {at_end['t']:.0f} s",
                    (window * (0.05 + 0.32 * (i % 3)), at_end["rss_kib"] / 1024),
                    xytext=(0, 4),
                    textcoords="offset points",
                    ha="left",
                    fontsize=7,
                    color=color,
                )
        top.set_ylim(0, max(r["spec"]["max_bytes"] for r in chosen) / MIB * 1.12)
        top.set_title(f"{backend}: outstanding bytes (dashed: the bound)")
        top.set_ylabel("outstanding (MiB)")
        bottom.set_title(f"{backend}: process RSS (dotted: producer open, idle)")
        bottom.set_ylabel("RSS (MiB)")
        bottom.set_xlabel("time (s); shaded: putters stopped, producer flushing")
    handles = [Line2D([], [], color=color_of[label]) for label in labels]
    legend_below(fig, handles, labels)
    delay = runs[0]["spec"].get("delay")
    fig.suptitle(
        f"Backpressure: 1 KiB records put as fast as possible, 1 shard, {delay:g} s per request"
    )
    finish(fig, data, path)
    return True


def processes_chart(data: dict[str, Any], path: Path) -> bool:
    """Each limited run of `processes`: each process's records/s and their sum over time."""
    limited = data.get("limited")
    runs = [
        f
        for f in (limited.values() if isinstance(limited, dict) else [])
        if isinstance(f, dict) and f.get("sum_records_per_s")
    ]
    if not runs:
        log(f"skip {path.name}: no limited runs in the results")
        return False
    fig, axes = plt.subplots(
        len(runs),
        1,
        figsize=(8, 2.4 * len(runs) + 0.8),
        layout="constrained",
        sharex=True,
        squeeze=False,
    )
    reserve_bottom(fig, 0.35)
    for ax, run in zip(axes[:, 0], runs, strict=True):
        step = float(run["step_s"])
        limit = float(run["limit_records_per_s"])
        for i, series in enumerate(run["per_process_records_per_s"]):
            ts = [(k + 0.5) * step for k in range(len(series))]
            ax.plot(ts, series, linewidth=1, label=f"process {i + 1}")
        sums = run["sum_records_per_s"]
        ax.plot(
            [(k + 0.5) * step for k in range(len(sums))],
            sums,
            color="black",
            linewidth=1.5,
            label="sum",
        )
        ax.axhline(limit, color="0.3", linestyle="--", linewidth=1)
        ax.axhline(0.9 * limit, color="0.6", linestyle=":", linewidth=1)
        ax.set_ylim(0, max(1.5 * limit, min(max(sums, default=0.0), 3 * limit)) * 1.05)
        ax.set_title(str(run.get("label", "")), fontsize=10)
        ax.set_ylabel("records/s")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7, loc="upper right", ncols=6)
    axes[-1][0].set_xlabel("seconds from the common start (0.5 s buckets)")
    fig.suptitle("Producer processes sharing a shard (dashed: the limit; dotted: 90 %)")
    finish(fig, data, path)
    return True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--results", type=Path, default=RESULTS, help="results folder")
    args = parser.parse_args()
    results: Path = args.results
    written = 0
    sweeps = load(results, "sizes")
    if sweeps is not None:
        written += throughput_chart(
            sweeps,
            SIZE_SWEEPS,
            "record_bytes",
            results / "throughput_vs_record_size.png",
            "Throughput vs record size",
        )
        written += throughput_chart(
            sweeps,
            SHARD_SWEEPS,
            "shards",
            results / "throughput_vs_shards.png",
            "Throughput vs shard count",
        )
    latency = load(results, "latency")
    if latency is not None:
        written += latency_chart(latency, results / "latency_cdf.png")
    backpressure = load(results, "backpressure")
    if backpressure is not None:
        written += backpressure_chart(backpressure, results / "backpressure.png")
    processes = load(results, "processes")
    if processes is not None:
        written += processes_chart(processes, results / "processes.png")
    fleet = load(results, "fleet")
    if fleet is not None:
        from benchmarks._fleet_plot import fleet_charts

        written += fleet_charts(fleet, results, "fleet")
    log(f"{written} chart(s) written to {results}")


if __name__ == "__main__":
    main()
