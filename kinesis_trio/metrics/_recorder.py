"""The recorder: the recording window (``_window``), each window closed and handed to the sinks."""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Sequence

import anyio

from .._config import ProducerConfig
from .._core import MetricWindow, Stats
from .._metric_names import (
    _SPECS,
    DEFAULT_NAMESPACE,
    MetricDatum,
    MetricsGranularity,
    MetricsLevel,
    MetricsSink,
    _describe,
    _log,
    _sink_name,
)


class Metrics(MetricWindow):
    """The producer's metrics recorder (the KPL's metrics manager).

    Recording is synchronous and cheap (a few dict updates per call); calls for metrics
    above ``level`` and every call at :attr:`MetricsLevel.NONE` return at once. Each call
    records the global datum and, up to ``granularity``, the ``StreamName`` and
    ``StreamName``+``ShardId`` datums (metrics that exist only per stream or globally stop
    there; ``ErrorsByCode`` also carries ``ErrorCode``). A window is a statistic set per
    (metric, dimensions): sample count, sum, minimum, maximum.

    :meth:`run` closes the window every ``upload_interval`` seconds and hands it to every
    sink concurrently, each bounded by ``sink_timeout``; a sink that raises or hangs is
    logged (``metrics_sink_failed``) and counted in :attr:`sink_failures`, never
    propagated. ``clock`` (monotonic seconds) dates the windows; it is anchored to the wall
    clock once, at construction. ``level`` and ``granularity`` also accept the KPL's
    strings (``"summary"``, ``"stream"``, ...). Sinks with a ``namespace`` attribute left
    at ``None`` (such as :class:`CloudWatchSink`) adopt ``namespace``.
    """

    def __init__(
        self,
        *,
        level: MetricsLevel | str = MetricsLevel.DETAILED,
        granularity: MetricsGranularity | str = MetricsGranularity.SHARD,
        namespace: str = DEFAULT_NAMESPACE,
        sinks: Sequence[MetricsSink] = (),
        upload_interval: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
        sink_timeout: float = 30.0,
    ) -> None:
        self._level = MetricsLevel(level)
        self._granularity = MetricsGranularity(granularity)
        if not namespace or namespace.startswith(":"):
            raise ValueError(f"invalid metrics namespace {namespace!r}")
        if not upload_interval > 0:
            raise ValueError("upload_interval must be positive")
        if not sink_timeout > 0:
            raise ValueError("sink_timeout must be positive")
        self._namespace = namespace
        self._sinks = tuple(sinks)
        for sink in self._sinks:
            if not callable(getattr(sink, "publish", None)):
                raise TypeError(f"{type(sink).__name__} has no publish() method")
            if hasattr(sink, "namespace") and getattr(sink, "namespace", None) is None:
                setattr(sink, "namespace", namespace)  # noqa: B010
        self._upload_interval = float(upload_interval)
        self._sink_timeout = float(sink_timeout)
        self._clock = clock
        self._wall_anchor = time.time() - clock()
        super().__init__(self._level, self._granularity)
        self._sink_failures = 0
        self._windows_published = 0

    # -- properties -------------------------------------------------------------------------

    @property
    def level(self) -> MetricsLevel:
        """The configured level."""
        return self._level

    @property
    def granularity(self) -> MetricsGranularity:
        """The configured granularity."""
        return self._granularity

    @property
    def namespace(self) -> str:
        """The CloudWatch namespace (sinks without their own adopt it)."""
        return self._namespace

    @property
    def upload_interval(self) -> float:
        """Seconds between window closes in :meth:`run`."""
        return self._upload_interval

    @property
    def sinks(self) -> tuple[MetricsSink, ...]:
        """The sinks each window goes to."""
        return self._sinks

    @property
    def sink_failures(self) -> int:
        """Sink publishes that raised or timed out, since construction."""
        return self._sink_failures

    @property
    def windows_published(self) -> int:
        """Non-empty windows handed to the sinks, since construction."""
        return self._windows_published

    # -- reading ----------------------------------------------------------------------------

    def _wall_now(self) -> float:
        return self._wall_anchor + self._clock()

    def _data(self, stats: Stats, timestamp: float) -> list[MetricDatum]:
        out = [
            MetricDatum(name, dims, _SPECS[name].unit, int(s[0]), s[1], s[2], s[3], timestamp)
            for (name, dims), s in stats.items()
        ]
        out.sort(key=lambda d: (d.name, len(d.dimensions), d.dimensions))
        return out

    def snapshot(self) -> list[MetricDatum]:
        """The current (not yet published) window, every dimension set, sorted."""
        return self._data(self._open_stats(), self._wall_now())

    def _close_window(self) -> list[MetricDatum]:
        return self._data(self._closed_stats(), self._wall_now())

    # -- delivering -------------------------------------------------------------------------

    async def _publish_one(self, sink: MetricsSink, data: Sequence[MetricDatum]) -> None:
        try:
            with anyio.move_on_after(self._sink_timeout) as scope:
                await sink.publish(data)
        except Exception as exc:
            error = _describe(exc)
        else:
            if not scope.cancelled_caught:
                return
            error = f"TimeoutError: publish took longer than {self._sink_timeout:g}s"
        self._sink_failures += 1
        _log.warning("metrics_sink_failed", sink=_sink_name(sink), error=error)

    async def _deliver(self, data: list[MetricDatum]) -> None:
        if not data:
            return
        self._windows_published += 1
        if not self._sinks:
            return
        frozen = tuple(data)
        if len(self._sinks) == 1:
            await self._publish_one(self._sinks[0], frozen)
            return
        async with anyio.create_task_group() as tg:
            for sink in self._sinks:
                tg.start_soon(self._publish_one, sink, frozen)

    async def flush(self) -> None:
        """Close the current window and deliver it now (on producer close). Never raises."""
        await self._deliver(self._close_window())

    async def run(self) -> None:
        """Close and deliver a window every ``upload_interval``; returns only when cancelled.

        Sink failures are logged and counted, never raised. A delivery slower than the
        interval skips the missed ticks (the next window is longer).
        """
        if not self._active:
            await anyio.sleep_forever()
        interval = self._upload_interval
        deadline = anyio.current_time() + interval
        while True:
            await anyio.sleep_until(deadline)
            await self._deliver(self._close_window())
            deadline += interval
            now = anyio.current_time()
            if deadline <= now:
                deadline = now + interval


def metrics_for(config: ProducerConfig, sinks: Sequence[MetricsSink] = ()) -> Metrics:
    """The metrics recorder ``config`` asks for (level, granularity, namespace, upload
    interval), publishing to ``sinks``."""
    return Metrics(
        level=config.metrics_level,
        granularity=config.metrics_granularity,
        namespace=config.metrics_namespace,
        sinks=sinks,
        upload_interval=config.metrics_upload_delay,
    )


# -- in-memory ------------------------------------------------------------------------------


class InMemorySink:
    """Keeps the last ``maxlen`` published windows (for tests and ``producer.metrics``)."""

    name = "memory"

    def __init__(self, maxlen: int = 60) -> None:
        if maxlen < 1:
            raise ValueError("maxlen must be at least 1")
        self._windows: deque[list[MetricDatum]] = deque(maxlen=maxlen)

    async def publish(self, data: Sequence[MetricDatum]) -> None:
        """Store one window."""
        self._windows.append(list(data))

    def latest(self) -> list[MetricDatum]:
        """The last window published (empty if none)."""
        return list(self._windows[-1]) if self._windows else []

    def all(self) -> list[list[MetricDatum]]:
        """Every window kept, oldest first."""
        return [list(w) for w in self._windows]

    def clear(self) -> None:
        """Forget the windows kept."""
        self._windows.clear()
