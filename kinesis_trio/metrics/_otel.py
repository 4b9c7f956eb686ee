"""The OpenTelemetry sink."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .._metric_names import _DEPTH, MetricDatum, MetricsGranularity
from ._export import _COUNTERS, _GAUGES, _SUCCESS_RATES, _optional, _scale, _series, _snake


class OpenTelemetrySink:
    """Records the windows through OpenTelemetry instruments (``kinesis-trio[otel]``).

    Instruments are named ``kinesis_producer.`` + the KPL name in snake case: counters for
    counts and bytes (``kinesis_producer.user_records_put`` and its ``.failed``,
    ``kinesis_producer.user_records_data_put`` in ``By``), ``.count``/``.sum`` counters and a
    ``.max`` gauge for the distributions (times in seconds), gauges
    ``kinesis_producer.user_records_pending`` (window average) and ``.max``. Attributes:
    ``stream_name``, ``shard_id``, ``error_code``, down to ``granularity`` (default
    per stream), non-overlapping. ``meter`` defaults to the global ``kinesis_trio`` meter.
    """

    name = "opentelemetry"

    def __init__(
        self,
        meter: Any = None,
        *,
        prefix: str = "kinesis_producer",
        granularity: MetricsGranularity | str = MetricsGranularity.STREAM,
    ) -> None:
        if meter is None:
            api = _optional(
                "opentelemetry.metrics", "OpenTelemetrySink", "opentelemetry-api", "otel"
            )
            meter = api.get_meter("kinesis_trio")
        self._meter: Any = meter
        self._prefix = prefix
        self._depth = _DEPTH[MetricsGranularity(granularity)]
        self._instruments: dict[str, Any] = {}

    def _instrument(self, kind: str, name: str, unit: str, doc: str) -> Any:
        inst = self._instruments.get(name)
        if inst is None:
            create = getattr(self._meter, f"create_{kind}")
            inst = self._instruments[name] = create(name, unit=unit, description=doc)
        return inst

    async def publish(self, data: Sequence[MetricDatum]) -> None:
        """Record one window."""
        for s in _series(data, self._depth):
            base = f"{self._prefix}.{_snake(s.name)}"
            attrs = {k: v for k, v in s.labels.items() if v}
            doc = f"KPL {s.name}"
            scale = _scale(s.unit)
            unit = {"Bytes": "By", "Milliseconds": "s"}.get(s.unit, "1")
            if s.name in _GAUGES:
                if s.samples:
                    self._instrument("gauge", base, unit, doc).set(s.total / s.samples, attrs)
                if s.maximum is not None:
                    self._instrument("gauge", base + ".max", unit, doc).set(s.maximum, attrs)
            elif s.name in _COUNTERS:
                if s.total > 0:
                    self._instrument("counter", base, unit, doc).add(s.total, attrs)
                if s.name in _SUCCESS_RATES and s.samples > s.total:
                    failed = self._instrument("counter", base + ".failed", unit, doc + " failed")
                    failed.add(s.samples - s.total, attrs)
            else:
                self._instrument("counter", base + ".count", "1", doc).add(s.samples, attrs)
                self._instrument("counter", base + ".sum", unit, doc).add(s.total * scale, attrs)
                if s.maximum is not None:
                    gauge = self._instrument("gauge", base + ".max", unit, doc)
                    gauge.set(s.maximum * scale, attrs)
