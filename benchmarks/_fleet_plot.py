"""The charts of ``fleet``: capacity used, records expired and p99 age, against the producers
(N) and against the shards (S), from its JSON rows. Drawn by ``fleet`` after its runs and by
``_plots`` (``python -m benchmarks plots``) from ``results/fleet.json``."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable
from pathlib import Path
from typing import Any

import matplotlib.pyplot as plt
from matplotlib.axes import Axes

from benchmarks._plots import finish, legend_below, log

Row = dict[str, Any]
#: (title, y of a row, y label)
_PANELS: list[tuple[str, Callable[[Row], float], str]] = [
    ("capacity used", lambda r: float(r["capacity_used"]), "share of the stream's capacity"),
    (
        "expired",
        lambda r: 100.0 * r["expired"] / r["accepted"] if r["accepted"] else 0.0,
        "% of the records accepted",
    ),
    ("p99 age from put", lambda r: float(r["age_from_put_p99_s"]), "seconds"),
    ("p99 age from schedule", lambda r: float(r["age_from_schedule_p99_s"]), "seconds"),
]


def _series(rows: list[Row], x: str, fixed: str) -> dict[str, list[Row]]:
    """Rows by series (the other parameter, the offered load and admission), in x order."""
    out: dict[str, list[Row]] = defaultdict(list)
    for r in rows:
        sc = r["scenario"]
        admission = "on" if sc["admission"] else "off"
        out[f"{fixed}={sc[_FIELD[fixed]]}, {sc['offered']:g}x, admission {admission}"].append(r)
    return {k: sorted(v, key=lambda r: float(r["scenario"][x])) for k, v in sorted(out.items())}


_FIELD = {"N": "producers", "S": "shards"}


def _chart(data: dict[str, Any], rows: list[Row], x: str, fixed: str, path: Path) -> bool:
    series = _series(rows, x, fixed)
    if not any(len({r["scenario"][x] for r in s}) > 1 for s in series.values()):
        log(f"skip {path.name}: no series with two values of {x}")
        return False
    fig, axes = plt.subplots(
        1, len(_PANELS), figsize=(4.2 * len(_PANELS), 4.2), layout="constrained"
    )
    markers = "osD^v<>ph*"
    for ax, (title, y, label) in zip(axes, _PANELS, strict=True):
        _panel(ax, series, x, y, markers)
        ax.set_title(title, fontsize=10)
        ax.set_ylabel(label)
        ax.set_xlabel("producers (N)" if x == "producers" else "shards (S)")
        ax.set_xscale("log")
        ticks = sorted({float(r["scenario"][x]) for r in rows})
        ax.set_xticks(ticks, [f"{t:,.0f}" for t in ticks])
        ax.minorticks_off()
        ax.set_ylim(bottom=0)
        ax.grid(True, alpha=0.3)
    axes[0].set_ylim(0, 1.1)
    handles, labels = axes[0].get_legend_handles_labels()
    legend_below(fig, handles, labels, ncols=3)
    fig.suptitle(
        f"A fleet on one stream, against {'N' if x == 'producers' else 'S'} (virtual time; "
        "solid: admission by time on, dashed: off; by a point: its schedule's length)"
    )
    finish(fig, data, path)
    return True


def _panel(
    ax: Axes, series: dict[str, list[Row]], x: str, y: Callable[[Row], float], markers: str
) -> None:
    for i, (label, rows) in enumerate(series.items()):
        xs = [float(r["scenario"][x]) for r in rows]
        ys = [y(r) for r in rows]
        style = "-" if "admission on" in label else "--"
        ax.plot(xs, ys, style, marker=markers[i % len(markers)], label=label)
        notes = [
            f"{r['scenario']['duration']:g} s" + (" cut" if r.get("cut_at_s") is not None else "")
            for r in rows
        ]
        if len(set(notes)) > 1:  # the schedules differ along the line, or a run was cut
            for px, py, d in zip(xs, ys, notes, strict=True):
                ax.annotate(
                    d,
                    (px, py),
                    fontsize=6,
                    color="0.4",
                    xytext=(3, 3),
                    textcoords="offset points",
                )


def fleet_charts(data: dict[str, Any], results: Path, name: str) -> int:
    """``<name>_by_producers.png`` and ``<name>_by_shards.png``; the number written."""
    rows: list[Row] = [r for r in data.get("rows", []) if isinstance(r, dict) and "scenario" in r]
    by_n = [r for r in rows if r.get("group") == "producers"]
    shard_rows = [r for r in rows if r.get("group") == "shards"]
    # the by-producers rows of a fleet size the shard rows use join them (S = 4 of N = 2)
    sizes = {r["scenario"]["producers"] for r in shard_rows}
    by_s = shard_rows + [r for r in by_n if r["scenario"]["producers"] in sizes]
    return sum(
        _chart(data, chosen, x, fixed, results / f"{name}_by_{x}.png")
        for chosen, x, fixed in ((by_n, "producers", "S"), (by_s, "shards", "N"))
    )
