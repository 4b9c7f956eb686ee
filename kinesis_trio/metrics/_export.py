"""Shared by the Prometheus and OpenTelemetry sinks: series, labels, units."""

from __future__ import annotations

import importlib
import re
from collections.abc import Iterable
from typing import Any, NamedTuple

from .._metric_names import (
    _ERROR_CODE,
    _SHARD,
    _SPECS,
    _STREAM,
    Dimensions,
    MetricDatum,
    MetricUnit,
)

# -- Prometheus / OpenTelemetry --------------------------------------------------------------

_COUNTERS = frozenset(
    {
        "UserRecordsReceived",
        "UserRecordsPut",
        "UserRecordsDataPut",
        "KinesisRecordsPut",
        "KinesisRecordsDataPut",
        "ErrorsByCode",
        "AllErrors",
        "UserRecordExpired",
        "FailedRecordsDropped",
        "SpoolRecordsRecovered",
        "SpoolRecordsRecoveredFailed",
        "SpoolRecordsDamaged",
    }
)
_GAUGES = frozenset(
    {"UserRecordsPending", "RequestConcurrencyLimit", "RequestsWaitingForSlot", "RetryBudgetLevel"}
)
# Counters whose zero samples are failures (the KPL's success-rate metrics).
_SUCCESS_RATES = frozenset({"UserRecordsPut", "KinesisRecordsPut"})
_LABELS = {_ERROR_CODE: "error_code", _STREAM: "stream_name", _SHARD: "shard_id"}


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def _hierarchy_depth(dims: Dimensions) -> int:
    depth = 0
    for key, _ in dims:
        if key == _STREAM:
            depth = max(depth, 1)
        elif key == _SHARD:
            depth = 2
    return depth


def _parent(dims: Dimensions) -> Dimensions:
    depth = _hierarchy_depth(dims)
    drop = _SHARD if depth == 2 else _STREAM
    return tuple(pair for pair in dims if pair[0] != drop)


def _label_names(name: str, depth: int) -> tuple[str, ...]:
    spec = _SPECS.get(name)
    limit = min(depth, spec.depth if spec else 2)
    names: list[str] = ["error_code"] if name == "ErrorsByCode" else []
    if limit >= 1:
        names.append("stream_name")
    if limit >= 2:
        names.append("shard_id")
    return tuple(names)


class _Series(NamedTuple):
    name: str
    labels: dict[str, str]
    samples: int
    total: float
    maximum: float | None  # None for a residual (its extremes are unknown)
    unit: MetricUnit


def _series(data: Iterable[MetricDatum], depth: int) -> list[_Series]:
    """Non-overlapping series: the finest datums up to ``depth``, plus residuals.

    A parent datum whose children (at most ``depth`` deep) do not account for all of its
    samples (errors with no shard, say) contributes the remainder with the finer labels
    empty. Summing every series of a metric then gives its global total, without double
    counting.
    """
    nodes: dict[tuple[str, Dimensions], MetricDatum] = {}
    for datum in data:
        if datum.name in _SPECS and _hierarchy_depth(datum.dimensions) <= depth:
            nodes[(datum.name, datum.dimensions)] = datum
    children: dict[tuple[str, Dimensions], list[float]] = {}
    for (name, dims), datum in nodes.items():
        if _hierarchy_depth(dims) > 0:
            parent = (name, _parent(dims))
            if parent in nodes:
                acc = children.setdefault(parent, [0.0, 0.0])
                acc[0] += datum.count
                acc[1] += datum.sum
    out: list[_Series] = []
    for key, datum in nodes.items():
        names = _label_names(datum.name, depth)
        labels = dict.fromkeys(names, "")
        for dim, value in datum.dimensions:
            label = _LABELS.get(dim)
            if label in labels:
                labels[label] = value
        below = children.get(key)
        if below is None:
            out.append(
                _Series(datum.name, labels, datum.count, datum.sum, datum.maximum, datum.unit)
            )
            continue
        rest = int(datum.count - below[0])
        if rest > 0:
            residual = max(0.0, datum.sum - below[1])
            out.append(_Series(datum.name, labels, rest, residual, None, datum.unit))
    return out


def _scale(unit: MetricUnit) -> float:
    return 0.001 if unit == "Milliseconds" else 1.0


def _optional(module: str, sink: str, package: str, extra: str) -> Any:
    """Import an optional dependency of a sink, or say which extra installs it."""
    try:
        importlib.import_module(module.partition(".")[0])  # a blocked package stops here
        return importlib.import_module(module)
    except ImportError as exc:
        raise ImportError(f"{sink} needs {package}: pip install 'kinesis-trio[{extra}]'") from exc
