"""What one ``perf`` process reports, and the sum over processes. Pure: no I/O, no clock."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

#: Latency bucket ``k`` holds ``[_FLOOR * GROWTH**k, _FLOOR * GROWTH**(k + 1))`` seconds: a
#: bucket's middle is within 0.05 % of any latency in it.
GROWTH = 1.001
_FLOOR = 1e-6
_LOG_GROWTH = math.log(GROWTH)

#: Seconds per timeline bucket (confirmed records and throttled attempts).
TIMELINE_STEP = 0.5


def rank(count: int, q: float) -> int:
    """The index of quantile ``q`` among ``count`` sorted values (as ``_output._percentile``)."""
    return min(count - 1, max(0, round(q * (count - 1))))


class LatencyHistogram:
    """Latencies in seconds, in log-scale buckets 0.1 % wide: mergeable across processes,
    percentiles within 0.05 % of the exact ones, the exact minimum and maximum."""

    __slots__ = ("buckets", "count", "high", "low")

    def __init__(self) -> None:
        self.buckets: Counter[int] = Counter()
        self.count = 0
        self.low = math.inf
        self.high = -math.inf

    @classmethod
    def of(cls, values: Iterable[float]) -> LatencyHistogram:
        histogram = cls()
        histogram.add_all(values)
        return histogram

    def add_all(self, values: Iterable[float]) -> None:
        floor, log, scale = _FLOOR, math.log, 1.0 / _LOG_GROWTH
        values = list(values)
        if not values:
            return
        self.buckets.update(int(log(max(v, floor) / floor) * scale) for v in values)
        self.count += len(values)
        self.low = min(self.low, min(values))
        self.high = max(self.high, max(values))

    def merge(self, other: LatencyHistogram) -> None:
        self.buckets.update(other.buckets)
        self.count += other.count
        self.low = min(self.low, other.low)
        self.high = max(self.high, other.high)

    def percentile(self, q: float) -> float:
        """The value at quantile ``q`` (0..1); nan when empty. ``q`` 0 and 1 are the exact
        minimum and maximum."""
        if not self.count:
            return math.nan
        if q <= 0.0:
            return self.low
        if q >= 1.0:
            return self.high
        index = rank(self.count, q)
        seen = 0
        for key in sorted(self.buckets):
            seen += self.buckets[key]
            if seen > index:
                middle: float = _FLOOR * GROWTH ** (key + 0.5)
                return min(self.high, max(self.low, middle))
        return self.high  # pragma: no cover - the counts add up to count

    def to_json(self) -> dict[str, Any]:
        return {
            "growth": GROWTH,
            "count": self.count,
            "min": self.low if self.count else None,
            "max": self.high if self.count else None,
            "buckets": sorted([k, n] for k, n in self.buckets.items()),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> LatencyHistogram:
        if data.get("growth") != GROWTH:
            raise ValueError(f"latency buckets of growth {data.get('growth')!r}, not {GROWTH}")
        histogram = cls()
        histogram.buckets = Counter({int(k): int(n) for k, n in data["buckets"]})
        histogram.count = int(data["count"])
        if histogram.count:
            histogram.low = float(data["min"])
            histogram.high = float(data["max"])
        return histogram


@dataclass(frozen=True)
class Timeline:
    """Counts per ``step`` seconds from ``origin`` (wall clock): confirmed records, throttled
    attempts."""

    origin: float
    step: float
    ok: list[int] = field(default_factory=list)
    throttled: list[int] = field(default_factory=list)

    @classmethod
    def of(
        cls,
        origin: float,
        step: float,
        confirmed: Iterable[float],
        throttled: Iterable[float],
    ) -> Timeline:
        """From wall-clock times (before ``origin``: the first bucket)."""
        return cls(origin, step, _counts(origin, step, confirmed), _counts(origin, step, throttled))

    def shifted_to(self, origin: float) -> Timeline:
        """The same counts, on a timeline from an earlier ``origin`` (whole steps)."""
        pad = [0] * max(0, round((self.origin - origin) / self.step))
        return Timeline(origin, self.step, pad + self.ok, pad + self.throttled)

    def to_json(self) -> dict[str, Any]:
        return {
            "origin": self.origin,
            "step": self.step,
            "ok": self.ok,
            "throttled": self.throttled,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Timeline:
        return cls(
            float(data["origin"]),
            float(data["step"]),
            [int(n) for n in data["ok"]],
            [int(n) for n in data["throttled"]],
        )


def _counts(origin: float, step: float, times: Iterable[float]) -> list[int]:
    counts: list[int] = []
    for t in times:
        index = max(0, int((t - origin) // step))
        if index >= len(counts):
            counts.extend([0] * (index + 1 - len(counts)))
        counts[index] += 1
    return counts


def _add(a: list[int], b: Sequence[int]) -> list[int]:
    out = a + [0] * max(0, len(b) - len(a))
    for i, n in enumerate(b):
        out[i] += n
    return out


@dataclass(frozen=True)
class _Figures:
    """What a load put and what became of it (records and bytes; failures by code, a
    message for each; throttling), its wall interval (wall clock), its CPU seconds and
    its latencies."""

    accepted: int
    accepted_bytes: int
    ok: int
    ok_bytes: int
    failed: int
    codes: dict[str, int]
    messages: dict[str, str]
    throttled_attempts: int
    throttled_records: int
    started: float
    ended: float
    cpu: float
    latency: LatencyHistogram

    @property
    def elapsed(self) -> float:
        return max(self.ended - self.started, 1e-9)


@dataclass(frozen=True)
class ProcessResult(_Figures):
    """One process's load: what it put, what became of it, its wall interval (``started``:
    its first put, ``ended``: its last record resolved; wall clock) and its CPU seconds."""

    peak_rss_mib: float
    interrupted: bool
    timeline: Timeline

    def to_json(self) -> dict[str, Any]:
        data = {name: getattr(self, name) for name in _PLAIN_FIELDS}
        data["latency"] = self.latency.to_json()
        data["timeline"] = self.timeline.to_json()
        return data

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> ProcessResult:
        return cls(
            accepted=int(data["accepted"]),
            accepted_bytes=int(data["accepted_bytes"]),
            ok=int(data["ok"]),
            ok_bytes=int(data["ok_bytes"]),
            failed=int(data["failed"]),
            codes={str(k): int(v) for k, v in data["codes"].items()},
            messages={str(k): str(v) for k, v in data["messages"].items()},
            throttled_attempts=int(data["throttled_attempts"]),
            throttled_records=int(data["throttled_records"]),
            started=float(data["started"]),
            ended=float(data["ended"]),
            cpu=float(data["cpu"]),
            latency=LatencyHistogram.from_json(data["latency"]),
            peak_rss_mib=float(data["peak_rss_mib"]),
            interrupted=bool(data["interrupted"]),
            timeline=Timeline.from_json(data["timeline"]),
        )


_PLAIN_FIELDS = (
    "accepted",
    "accepted_bytes",
    "ok",
    "ok_bytes",
    "failed",
    "codes",
    "messages",
    "throttled_attempts",
    "throttled_records",
    "started",
    "ended",
    "cpu",
    "peak_rss_mib",
    "interrupted",
)


@dataclass(frozen=True)
class Sum(_Figures):
    """The processes' figures together: counts and CPU summed, the wall interval from the
    earliest start to the latest end, latency percentiles over every record."""

    processes: int
    peak_rss_mib_max: float
    peak_rss_mib_sum: float
    interrupted: bool
    timeline: Timeline

    @property
    def records_per_s(self) -> float:
        return self.accepted / self.elapsed

    @property
    def mb_per_s(self) -> float:
        return self.accepted_bytes / self.elapsed / 1e6

    @property
    def cpu_us_per_record(self) -> float:
        return self.cpu / self.accepted * 1e6 if self.accepted else math.nan

    def to_json(self) -> dict[str, Any]:
        latency = self.latency
        return {
            "processes": self.processes,
            "accepted": self.accepted,
            "accepted_bytes": self.accepted_bytes,
            "ok": self.ok,
            "ok_bytes": self.ok_bytes,
            "failed": self.failed,
            "codes": self.codes,
            "messages": self.messages,
            "throttled_attempts": self.throttled_attempts,
            "throttled_records": self.throttled_records,
            "started": self.started,
            "ended": self.ended,
            "elapsed": self.elapsed,
            "records_per_s": self.records_per_s,
            "mb_per_s": self.mb_per_s,
            "cpu": self.cpu,
            "cpu_us_per_record": None if not self.accepted else self.cpu_us_per_record,
            "latency_s": {
                name: None if math.isnan(v) else v
                for name, v in (
                    ("p50", latency.percentile(0.5)),
                    ("p99", latency.percentile(0.99)),
                    ("p99.9", latency.percentile(0.999)),
                    ("max", latency.percentile(1.0)),
                )
            },
            "peak_rss_mib_max": self.peak_rss_mib_max,
            "peak_rss_mib_sum": self.peak_rss_mib_sum,
            "interrupted": self.interrupted,
            "timeline": self.timeline.to_json(),
        }


def sum_results(results: Sequence[ProcessResult]) -> Sum:
    """Add up the processes' results (at least one)."""
    if not results:
        raise ValueError("no results to add up")
    codes: Counter[str] = Counter()
    messages: dict[str, str] = {}
    latency = LatencyHistogram()
    for r in results:
        codes.update(r.codes)
        for code, message in r.messages.items():
            messages.setdefault(code, message)
        latency.merge(r.latency)
    origin = min(r.timeline.origin for r in results)
    ok: list[int] = []
    throttled: list[int] = []
    for r in results:
        timeline = r.timeline.shifted_to(origin)
        ok = _add(ok, timeline.ok)
        throttled = _add(throttled, timeline.throttled)
    return Sum(
        processes=len(results),
        accepted=sum(r.accepted for r in results),
        accepted_bytes=sum(r.accepted_bytes for r in results),
        ok=sum(r.ok for r in results),
        ok_bytes=sum(r.ok_bytes for r in results),
        failed=sum(r.failed for r in results),
        codes=dict(codes.most_common()),
        messages=messages,
        throttled_attempts=sum(r.throttled_attempts for r in results),
        throttled_records=sum(r.throttled_records for r in results),
        started=min(r.started for r in results),
        ended=max(r.ended for r in results),
        cpu=sum(r.cpu for r in results),
        latency=latency,
        peak_rss_mib_max=max(r.peak_rss_mib for r in results),
        peak_rss_mib_sum=sum(r.peak_rss_mib for r in results),
        interrupted=any(r.interrupted for r in results),
        timeline=Timeline(origin, results[0].timeline.step, ok, throttled),
    )


def split_evenly(total: int, parts: int) -> list[int]:
    """``total`` in ``parts`` whole shares that differ by at most one (the larger first)."""
    share, extra = divmod(total, parts)
    return [share + (1 if i < extra else 0) for i in range(parts)]
