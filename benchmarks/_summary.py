"""The summary of a command's runs: medians, spreads and the numbers in its tables.

Holds the medians over the runs' result lines (:func:`median_of`, :func:`median_field`,
:func:`cost_medians`, :func:`run_summary`), the failed records of all runs, the spread of a
figure (:func:`spread_pct`) and the formatting of a table cell (:func:`fmt`, :func:`fmt_int`).
Used by the commands that repeat runs and tabulate them (``latency``, ``throughput``,
``spool``, ``_sweeps``, ``_engines``, ``_steady_cpu``, ``aws_lambda``).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from typing import Any


def median_of(values: Sequence[float]) -> float:
    clean = [v for v in values if isinstance(v, (int, float)) and not math.isnan(v)]
    return statistics.median(clean) if clean else math.nan


def median_field(runs: Sequence[dict[str, Any]], key: str) -> float:
    """Median of ``key`` over the runs that have it (nan if none)."""
    return median_of([float(r[key]) for r in runs if key in r])


def failed_total(runs: Sequence[dict[str, Any]]) -> int:
    return int(sum(int(r["failed"]) for r in runs))


def cost_medians(runs: Sequence[dict[str, Any]]) -> dict[str, float]:
    """Medians of elapsed time, rates, CPU per record and peak RSS over the runs."""
    return {
        "elapsed_s": round(median_field(runs, "elapsed_s"), 4),
        "records_per_s": round(median_field(runs, "records_per_s"), 1),
        "mb_per_s": round(median_field(runs, "mb_per_s"), 3),
        "cpu_us_per_record": round(median_field(runs, "cpu_us_per_record"), 2),
        "cpu_us_per_record_process": round(median_field(runs, "cpu_us_per_record_process"), 2),
        "peak_rss_mib": round(median_field(runs, "peak_rss_mib"), 1),
    }


def run_summary(runs: Sequence[dict[str, Any]]) -> dict[str, Any]:
    """Records, record size and shards of the first run, :func:`cost_medians`, emulator CPU
    per record and the failed records of all runs."""
    return {
        "records": int(runs[0]["records"]) if runs else 0,
        "record_bytes": int(runs[0]["record_bytes"]) if runs else 0,
        "shards": int(runs[0]["shards"]) if runs else 0,
        **cost_medians(runs),
        "emulator_cpu_us_per_record": round(median_field(runs, "emulator_cpu_us_per_record"), 2),
        "failed": failed_total(runs),
    }


def spread_pct(values: Sequence[float]) -> float:
    """(max - min) / median, in percent."""
    clean = [v for v in values if isinstance(v, (int, float)) and not math.isnan(v)]
    if len(clean) < 2:
        return 0.0
    med = statistics.median(clean)
    return (max(clean) - min(clean)) / med * 100.0 if med else math.nan


def fmt_int(v: float) -> str:
    return "n/a" if isinstance(v, float) and math.isnan(v) else f"{v:,.0f}"


def fmt(v: float, digits: int = 2) -> str:
    return "n/a" if isinstance(v, float) and math.isnan(v) else f"{v:,.{digits}f}"
