"""The Prometheus sink."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Sequence
from typing import Any

from .._metric_names import _DEPTH, _SPECS, MetricDatum, MetricsGranularity, MetricUnit
from ._export import (
    _COUNTERS,
    _GAUGES,
    _SUCCESS_RATES,
    _label_names,
    _optional,
    _scale,
    _series,
    _snake,
)


class PrometheusSink:
    """Exposes the windows through prometheus_client (``pip install 'kinesis-trio[prometheus]'``).

    Per metric (``{prefix}_`` + the KPL name in snake case): counters
    (``..._user_records_put_total``, ``..._user_records_data_put_bytes_total``,
    ``..._errors_by_code_total{error_code}``, ...; ``..._user_records_put_failed_total`` and
    ``..._kinesis_records_put_failed_total`` count the KPL's zero samples); summaries with
    ``_count``/``_sum`` for the distributions (``..._buffering_time_seconds``,
    ``..._request_time_seconds``, ``..._retries_per_record``, ...) plus a ``..._window_max``
    gauge of the last window; gauges ``..._user_records_pending`` (last window's average)
    and ``..._max``. Labels go down to ``granularity`` (default per stream: ``stream_name``;
    ``shard_id`` at SHARD); series never overlap (summing them gives the total). Values move
    once per window. ``close()`` unregisters the collector.
    """

    name = "prometheus"

    def __init__(
        self,
        registry: Any = None,
        prefix: str = "kinesis_producer",
        *,
        granularity: MetricsGranularity | str = MetricsGranularity.STREAM,
    ) -> None:
        core = _optional(
            "prometheus_client.core", "PrometheusSink", "prometheus-client", "prometheus"
        )
        if not re.fullmatch(r"[a-zA-Z_:][a-zA-Z0-9_:]*", prefix):
            raise ValueError(f"invalid Prometheus metric prefix {prefix!r}")
        self._core: Any = core
        self._prefix = prefix
        self._depth = _DEPTH[MetricsGranularity(granularity)]
        # family -> label values -> [count, sum]; cumulative
        self._cumulative: dict[str, dict[tuple[str, ...], list[float]]] = {}
        # family -> label values -> value; the last window only
        self._window: dict[str, dict[tuple[str, ...], float]] = {}
        self._registry: Any = registry if registry is not None else core.REGISTRY
        self._registry.register(self)

    def close(self) -> None:
        """Unregister from the registry."""
        with contextlib.suppress(KeyError):
            self._registry.unregister(self)

    def _family(self, name: str, unit: MetricUnit) -> str:
        base = f"{self._prefix}_{_snake(name)}"
        if unit == "Bytes":
            return base + "_bytes"
        if unit == "Milliseconds":
            return base + "_seconds"
        return base

    async def publish(self, data: Sequence[MetricDatum]) -> None:
        """Fold one window into the exposed values."""
        window: dict[str, dict[tuple[str, ...], float]] = {}
        for s in _series(data, self._depth):
            family = self._family(s.name, s.unit)
            values = tuple(s.labels.values())
            scale = _scale(s.unit)
            if s.name in _GAUGES:
                if s.samples:
                    window.setdefault(family, {})[values] = s.total / s.samples
                if s.maximum is not None:
                    window.setdefault(family + "_max", {})[values] = s.maximum
                continue
            acc = self._cumulative.setdefault(family, {}).setdefault(values, [0.0, 0.0])
            acc[0] += s.samples
            acc[1] += s.total * scale
            if s.name not in _COUNTERS and s.maximum is not None:
                window.setdefault(family + "_window_max", {})[values] = s.maximum * scale
        self._window = window

    def _families(self, with_samples: bool) -> list[Any]:
        core = self._core
        cumulative = self._cumulative if with_samples else {}
        window = self._window if with_samples else {}
        out: list[Any] = []
        for name, spec in _SPECS.items():
            family = self._family(name, spec.unit)
            labels = list(_label_names(name, self._depth))
            unit = {"Milliseconds": "seconds", "Bytes": "bytes"}.get(spec.unit, "count")
            doc = f"KPL {name} ({unit})"
            gauges: tuple[tuple[str, str], ...]
            if name in _GAUGES:
                gauges = ((family, doc + ", average of the last window"),)
                gauges += ((family + "_max", doc + ", maximum of the last window"),)
            elif name in _COUNTERS:
                counter = core.CounterMetricFamily(family, doc, labels=labels)
                rows = cumulative.get(family, {})
                for values, (_, total) in rows.items():
                    counter.add_metric(list(values), total)
                out.append(counter)
                if name in _SUCCESS_RATES:
                    failed = core.CounterMetricFamily(
                        family + "_failed", f"KPL {name}: zero samples (failures)", labels=labels
                    )
                    for values, (count, total) in rows.items():
                        failed.add_metric(list(values), max(0.0, count - total))
                    out.append(failed)
                gauges = ()
            else:
                summary = core.SummaryMetricFamily(family, doc, labels=labels)
                for values, (count, total) in cumulative.get(family, {}).items():
                    summary.add_metric(list(values), count_value=int(count), sum_value=total)
                out.append(summary)
                gauges = ((family + "_window_max", doc + ", maximum of the last window"),)
            for gauge_name, gauge_doc in gauges:
                gauge = core.GaugeMetricFamily(gauge_name, gauge_doc, labels=labels)
                for values, value in window.get(gauge_name, {}).items():
                    gauge.add_metric(list(values), value)
                out.append(gauge)
        return out

    def describe(self) -> list[Any]:
        """The metric families (names only), for the registry's duplicate check."""
        return self._families(with_samples=False)

    def collect(self) -> list[Any]:
        """The metric families with their current values."""
        return self._families(with_samples=True)
