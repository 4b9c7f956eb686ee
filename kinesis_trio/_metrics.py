"""KPL-style producer metrics: one-minute statistic sets, delivered to pluggable sinks.

The producer calls a :class:`Metrics` recorder (per Kinesis record or per request, with
counts); every ``upload_interval`` the current window is closed and handed to each sink:
:class:`InMemorySink`, :class:`CloudWatchSink` (PutMetricData, SigV4, no boto3),
:class:`PrometheusSink` and :class:`OpenTelemetrySink`.

Names, units, levels and dimensions follow the KPL (``aws/metrics/metrics_constants.cc`` and
``metrics.md`` in awslabs/amazon-kinesis-producer; the "Monitor the KPL with Amazon
CloudWatch" page of the Kinesis Data Streams guide).
"""

from __future__ import annotations

import contextlib
import datetime
import enum
import hashlib
import json
import os
import random
import re
import time
import urllib.parse
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NamedTuple, Protocol, runtime_checkable

import anyio
import botocore.auth
import botocore.awsrequest
import botocore.session
import httpx

from ._credentials import CredentialProvider, RequestSigner, StaticCredentials, resolve_region
from ._errors import KinesisTrioError
from ._logging import get_logger

__all__ = [
    "CloudWatchError",
    "CloudWatchSink",
    "InMemorySink",
    "MetricDatum",
    "Metrics",
    "MetricsGranularity",
    "MetricsLevel",
    "MetricsSink",
    "OpenTelemetrySink",
    "PrometheusSink",
]

_log = get_logger("kinesis_trio.metrics")

DEFAULT_NAMESPACE = "KinesisProducerLibrary"

MetricUnit = Literal["Count", "Milliseconds", "Bytes"]
Dimensions = tuple[tuple[str, str], ...]


class MetricsLevel(enum.Enum):
    """Which metrics are recorded: none, the summary ones, or all (the KPL's MetricsLevel)."""

    NONE = "none"
    SUMMARY = "summary"
    DETAILED = "detailed"


class MetricsGranularity(enum.Enum):
    """Finest dimension set recorded: global, per stream, per shard (KPL MetricsGranularity)."""

    GLOBAL = "global"
    STREAM = "stream"
    SHARD = "shard"


_LEVEL_RANK = {MetricsLevel.NONE: 0, MetricsLevel.SUMMARY: 1, MetricsLevel.DETAILED: 2}
_DEPTH = {MetricsGranularity.GLOBAL: 0, MetricsGranularity.STREAM: 1, MetricsGranularity.SHARD: 2}


class _Spec(NamedTuple):
    level: MetricsLevel
    unit: MetricUnit
    depth: int  # finest granularity the metric exists at: 0 global, 1 stream, 2 shard


_S, _D = MetricsLevel.SUMMARY, MetricsLevel.DETAILED
# Level and unit: metrics_constants.cc; depth ("not available at shard level"): metrics.md.
_SPECS: dict[str, _Spec] = {
    "UserRecordsReceived": _Spec(_D, "Count", 1),
    "UserRecordsPending": _Spec(_D, "Count", 0),
    "UserRecordsPut": _Spec(_S, "Count", 2),
    "UserRecordsDataPut": _Spec(_D, "Bytes", 2),
    "KinesisRecordsPut": _Spec(_S, "Count", 2),
    "KinesisRecordsDataPut": _Spec(_D, "Bytes", 2),
    "ErrorsByCode": _Spec(_S, "Count", 2),
    "AllErrors": _Spec(_S, "Count", 2),
    "RetriesPerRecord": _Spec(_D, "Count", 2),
    "UserRecordExpired": _Spec(_S, "Count", 2),
    "BufferingTime": _Spec(_S, "Milliseconds", 2),
    "RequestTime": _Spec(_D, "Milliseconds", 1),
    "UserRecordsPerKinesisRecord": _Spec(_D, "Count", 2),
    "KinesisRecordsPerPutRecordsRequest": _Spec(_D, "Count", 1),
    "UserRecordsPerPutRecordsRequest": _Spec(_D, "Count", 1),
}
del _S, _D

_STREAM, _SHARD, _ERROR_CODE = "StreamName", "ShardId", "ErrorCode"


@dataclass(frozen=True)
class MetricDatum:
    """One statistic set: a metric over one window, for one dimension set.

    ``dimensions`` is ordered like the KPL's (``ErrorCode``, ``StreamName``, ``ShardId``);
    ``()`` is the global datum. ``timestamp`` is Unix time in seconds (the window's end).
    """

    name: str
    dimensions: Dimensions
    unit: MetricUnit
    count: int
    sum: float
    minimum: float
    maximum: float
    timestamp: float

    @property
    def average(self) -> float:
        """``sum / count``."""
        return self.sum / self.count if self.count else 0.0

    def dimension(self, name: str) -> str | None:
        """The value of dimension ``name``, or ``None``."""
        for key, value in self.dimensions:
            if key == name:
                return value
        return None


@runtime_checkable
class MetricsSink(Protocol):
    """Receives each closed window. May raise or be slow: :class:`Metrics` contains both."""

    async def publish(self, data: Sequence[MetricDatum]) -> None: ...


def _sink_name(sink: object) -> str:
    name = getattr(sink, "name", None)
    return name if isinstance(name, str) and name else type(sink).__name__


def _describe(exc: BaseException, limit: int = 300) -> str:
    text = str(exc).strip().splitlines()
    first = text[0] if text else ""
    out = f"{type(exc).__name__}: {first}" if first else type(exc).__name__
    return out if len(out) <= limit else out[: limit - 3] + "..."


class Metrics:
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
        rank = _LEVEL_RANK[self._level]
        self._enabled = frozenset(
            name for name, spec in _SPECS.items() if _LEVEL_RANK[spec.level] <= rank
        )
        self._active = bool(self._enabled)
        self._depth = _DEPTH[self._granularity]
        self._window: dict[tuple[str, Dimensions], list[float]] = {}
        self._totals: dict[str, float] = {}
        self._scopes: dict[tuple[str, str | None], tuple[Dimensions, ...]] = {}
        self._error_scopes: dict[tuple[str, str | None, str], tuple[Dimensions, ...]] = {}
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
    def enabled(self) -> bool:
        """False at level NONE (every recording call is a no-op)."""
        return self._active

    @property
    def sink_failures(self) -> int:
        """Sink publishes that raised or timed out, since construction."""
        return self._sink_failures

    @property
    def windows_published(self) -> int:
        """Non-empty windows handed to the sinks, since construction."""
        return self._windows_published

    def is_enabled(self, name: str) -> bool:
        """Whether metric ``name`` (a KPL name, e.g. ``"RequestTime"``) is recorded."""
        return name in self._enabled

    # -- recording --------------------------------------------------------------------------

    def _scope(self, stream: str, shard: str | None, depth: int) -> tuple[Dimensions, ...]:
        key = (stream, shard if depth >= 2 else None)
        scopes = self._scopes.get(key)
        if scopes is None:
            limit = min(depth, self._depth)
            out: list[Dimensions] = [()]
            if limit >= 1 and stream:
                out.append(((_STREAM, stream),))
                if limit >= 2 and key[1]:
                    out.append(((_STREAM, stream), (_SHARD, key[1])))
            scopes = self._scopes[key] = tuple(out)
        return scopes

    def _put(
        self,
        name: str,
        scopes: tuple[Dimensions, ...],
        n: int,
        total: float,
        lo: float,
        hi: float,
    ) -> None:
        window = self._window
        for dims in scopes:
            key = (name, dims)
            stats = window.get(key)
            if stats is None:
                window[key] = [n, total, lo, hi]
            else:
                stats[0] += n
                stats[1] += total
                if lo < stats[2]:
                    stats[2] = lo
                if hi > stats[3]:
                    stats[3] = hi
        totals = self._totals
        totals[name] = totals.get(name, 0.0) + total

    def _samples(self, name: str, scopes: tuple[Dimensions, ...], n: int, value: float) -> None:
        if n > 0:
            self._put(name, scopes, n, value * n, value, value)

    def user_records_received(self, stream: str, count: int) -> None:
        """UserRecordsReceived: ``count`` user records accepted by ``put`` (detailed)."""
        if self._active and "UserRecordsReceived" in self._enabled:
            self._samples("UserRecordsReceived", self._scope(stream, None, 1), count, 1.0)

    def user_records_pending(self, count: int) -> None:
        """UserRecordsPending: a sample of the records buffered or in flight (detailed)."""
        if self._active and "UserRecordsPending" in self._enabled:
            value = float(count)
            self._put("UserRecordsPending", ((),), 1, value, value, value)
            self._totals["UserRecordsPending"] = value  # a gauge: totals() keeps the latest

    def user_records_put(
        self, stream: str, shard: str, count: int, data_bytes: int, *, failed: int = 0
    ) -> None:
        """UserRecordsPut (summary) and UserRecordsDataPut (detailed) for ``count`` successes.

        ``failed`` user records that finally failed add zero samples to UserRecordsPut, as
        in the KPL (its average is then the success rate; count minus sum the failures).
        """
        if not self._active:
            return
        scopes = self._scope(stream, shard, 2)
        if "UserRecordsPut" in self._enabled and count + failed > 0:
            self._put(
                "UserRecordsPut",
                scopes,
                count + failed,
                float(count),
                0.0 if failed > 0 else 1.0,
                1.0 if count > 0 else 0.0,
            )
        if "UserRecordsDataPut" in self._enabled and count > 0:
            mean = data_bytes / count
            self._put("UserRecordsDataPut", scopes, count, float(data_bytes), mean, mean)

    def kinesis_records_put(
        self, stream: str, shard: str, count: int, data_bytes: int, *, failed: int = 0
    ) -> None:
        """KinesisRecordsPut (summary) and KinesisRecordsDataPut (detailed).

        Also adds ``count`` zero samples to AllErrors, as the KPL does for each Kinesis
        record put. ``failed`` Kinesis records (per-record errors) add zero samples to
        KinesisRecordsPut; report their error codes with :meth:`errors`.
        """
        if not self._active:
            return
        scopes = self._scope(stream, shard, 2)
        enabled = self._enabled
        if "KinesisRecordsPut" in enabled and count + failed > 0:
            self._put(
                "KinesisRecordsPut",
                scopes,
                count + failed,
                float(count),
                0.0 if failed > 0 else 1.0,
                1.0 if count > 0 else 0.0,
            )
        if count > 0:
            if "KinesisRecordsDataPut" in enabled:
                mean = data_bytes / count
                self._put("KinesisRecordsDataPut", scopes, count, float(data_bytes), mean, mean)
            if "AllErrors" in enabled:
                self._put("AllErrors", scopes, count, 0.0, 0.0, 0.0)

    def errors(self, stream: str, shard: str | None, code: str, count: int) -> None:
        """ErrorsByCode (with an ``ErrorCode`` dimension) and AllErrors (summary).

        Count once per Kinesis record for per-record errors; ``shard=None`` for errors that
        cannot be traced to a shard (a failed request), recorded per stream and globally.
        """
        if not self._active or count <= 0:
            return
        scopes = self._scope(stream, shard, 2)
        if "ErrorsByCode" in self._enabled:
            key = (stream, shard if self._depth >= 2 else None, code)
            coded = self._error_scopes.get(key)
            if coded is None:
                prefix = ((_ERROR_CODE, code or "Unknown"),)
                coded = self._error_scopes[key] = tuple(prefix + dims for dims in scopes)
            self._samples("ErrorsByCode", coded, count, 1.0)
        if "AllErrors" in self._enabled:
            self._samples("AllErrors", scopes, count, 1.0)

    def retries_per_record(self, stream: str, shard: str, retries: int, count: int) -> None:
        """RetriesPerRecord: ``count`` user records finished after ``retries`` retries."""
        if self._active and "RetriesPerRecord" in self._enabled:
            self._samples("RetriesPerRecord", self._scope(stream, shard, 2), count, float(retries))

    def user_record_expired(self, stream: str, shard: str | None, count: int) -> None:
        """UserRecordExpired: ``count`` user records failed for reaching the record TTL."""
        if self._active and "UserRecordExpired" in self._enabled:
            self._samples("UserRecordExpired", self._scope(stream, shard, 2), count, 1.0)

    def buffering_time(self, stream: str, shard: str, seconds: float, count: int) -> None:
        """BufferingTime (ms): ``count`` user records waited ``seconds`` before a send."""
        if self._active and "BufferingTime" in self._enabled:
            self._samples("BufferingTime", self._scope(stream, shard, 2), count, seconds * 1000.0)

    def request_time(self, stream: str, seconds: float) -> None:
        """RequestTime (ms): the duration of one PutRecords request (detailed)."""
        if self._active and "RequestTime" in self._enabled:
            ms = seconds * 1000.0
            self._put("RequestTime", self._scope(stream, None, 1), 1, ms, ms, ms)

    def user_records_per_kinesis_record(self, stream: str, shard: str, value: int) -> None:
        """UserRecordsPerKinesisRecord: user records in one (aggregated) Kinesis record."""
        if self._active and "UserRecordsPerKinesisRecord" in self._enabled:
            v = float(value)
            self._put("UserRecordsPerKinesisRecord", self._scope(stream, shard, 2), 1, v, v, v)

    def kinesis_records_per_request(self, stream: str, value: int) -> None:
        """KinesisRecordsPerPutRecordsRequest: Kinesis records in one PutRecords request."""
        if self._active and "KinesisRecordsPerPutRecordsRequest" in self._enabled:
            v = float(value)
            scopes = self._scope(stream, None, 1)
            self._put("KinesisRecordsPerPutRecordsRequest", scopes, 1, v, v, v)

    def user_records_per_request(self, stream: str, value: int) -> None:
        """UserRecordsPerPutRecordsRequest: user records in one PutRecords request."""
        if self._active and "UserRecordsPerPutRecordsRequest" in self._enabled:
            v = float(value)
            scopes = self._scope(stream, None, 1)
            self._put("UserRecordsPerPutRecordsRequest", scopes, 1, v, v, v)

    # -- reading ----------------------------------------------------------------------------

    def _wall_now(self) -> float:
        return self._wall_anchor + self._clock()

    def _data(
        self, window: dict[tuple[str, Dimensions], list[float]], timestamp: float
    ) -> list[MetricDatum]:
        out = [
            MetricDatum(
                name,
                dims,
                _SPECS[name].unit,
                int(stats[0]),
                stats[1],
                stats[2],
                stats[3],
                timestamp,
            )
            for (name, dims), stats in window.items()
        ]
        out.sort(key=lambda d: (d.name, len(d.dimensions), d.dimensions))
        return out

    def snapshot(self) -> list[MetricDatum]:
        """The current (not yet published) window, every dimension set, sorted."""
        return self._data(self._window, self._wall_now())

    def totals(self) -> dict[str, float]:
        """Lifetime sums per metric name at global granularity (UserRecordsPending: latest)."""
        return dict(self._totals)

    def _close_window(self) -> list[MetricDatum]:
        window, self._window = self._window, {}
        # Shard ids come and go with resharding: do not let the caches grow forever.
        if len(self._scopes) > 4096:
            self._scopes.clear()
        if len(self._error_scopes) > 4096:
            self._error_scopes.clear()
        return self._data(window, self._wall_now())

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


# -- CloudWatch -----------------------------------------------------------------------------

_CW_VERSION = "2010-08-01"
_CW_CONTENT_TYPE = "application/x-www-form-urlencoded; charset=utf-8"
MAX_DATUMS_PER_REQUEST = 1000  # PutMetricData: "no more than 1000 different metrics"
MAX_REQUEST_BYTES = 1_000_000  # "limited to 1 MB in size for HTTP POST requests"
MAX_DIMENSIONS = 30  # "up to 30 dimensions per metric"
_THROTTLING_CODES = frozenset(
    {
        "Throttling",
        "ThrottlingException",
        "ThrottledException",
        "RequestThrottled",
        "RequestThrottledException",
        "TooManyRequestsException",
        "RequestLimitExceeded",
        "RequestTimeout",
        "RequestTimeoutException",
        "RequestExpired",
        "PriorRequestNotComplete",
        "InternalFailure",
        "InternalServiceFault",
        "InternalServiceError",
        "ServiceUnavailable",
    }
)
_EXPIRED_CODES = frozenset({"ExpiredToken", "ExpiredTokenException"})
_XML_FIELD = {
    tag: re.compile(rf"<{tag}>([^<]*)</{tag}>") for tag in ("Code", "Message", "RequestId")
}


class CloudWatchError(KinesisTrioError):
    """A PutMetricData call failed (after retries, when the error was transient)."""

    def __init__(
        self,
        code: str,
        message: str,
        *,
        status_code: int | None = None,
        request_id: str | None = None,
    ) -> None:
        self.code = code
        self.message = message
        self.status_code = status_code
        self.request_id = request_id
        status = f" (HTTP {status_code})" if status_code is not None else ""
        super().__init__(f"PutMetricData failed: {code}{status}: {message}")


def _one_line(text: str, limit: int = 256) -> str:
    # AWS signature errors quote the canonical request (with the session token) after the
    # first line: never keep more than the first line.
    lines = text.strip().splitlines()
    line = lines[0].strip() if lines else ""
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _parse_error(response: httpx.Response) -> tuple[str, str, str | None]:
    """(code, message, request id) from a query-protocol (XML) or JSON error response."""
    headers = response.headers
    request_id = headers.get("x-amzn-RequestId") or headers.get("x-amz-request-id")
    text = response.text
    code = message = ""
    query_error = headers.get("x-amzn-query-error")
    if query_error:
        code = query_error.split(";", 1)[0]
    match = _XML_FIELD["Code"].search(text)
    if match:
        code = code or match.group(1)
        msg = _XML_FIELD["Message"].search(text)
        message = msg.group(1) if msg else ""
        rid = _XML_FIELD["RequestId"].search(text)
        request_id = request_id or (rid.group(1) if rid else None)
    elif text.lstrip().startswith("{"):
        try:
            body = json.loads(text)
        except ValueError:
            body = None
        if isinstance(body, dict):
            raw = str(body.get("__type") or body.get("code") or "")
            code = code or raw.rsplit("#", 1)[-1]
            message = str(body.get("message") or body.get("Message") or "")
    if not code:
        code = "Throttling" if response.status_code == 429 else f"HTTP{response.status_code}"
    return code, _one_line(message), request_id


def _fmt_number(value: float) -> str:
    if value.is_integer() and abs(value) < 1e15:
        return str(int(value))
    return repr(float(value))


def _fmt_time(timestamp: float) -> str:
    moment = datetime.datetime.fromtimestamp(timestamp, tz=datetime.timezone.utc)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


def _quote(text: str) -> str:
    return urllib.parse.quote(text, safe="-_.~")


def _encode_datum(index: int, datum: MetricDatum) -> str:
    p = f"MetricData.member.{index}."
    parts = [
        f"{p}MetricName={_quote(datum.name)}",
        f"{p}Timestamp={_quote(_fmt_time(datum.timestamp))}",
        f"{p}Unit={datum.unit}",
        f"{p}StatisticValues.SampleCount={_fmt_number(float(datum.count))}",
        f"{p}StatisticValues.Sum={_fmt_number(datum.sum)}",
        f"{p}StatisticValues.Minimum={_fmt_number(datum.minimum)}",
        f"{p}StatisticValues.Maximum={_fmt_number(datum.maximum)}",
    ]
    # CloudWatch rejects blank dimension values (the KPL skips them too).
    dims = [(k, v) for k, v in datum.dimensions if v.strip()][:MAX_DIMENSIONS]
    for j, (key, value) in enumerate(dims, 1):
        parts.append(f"{p}Dimensions.member.{j}.Name={_quote(key)}")
        parts.append(f"{p}Dimensions.member.{j}.Value={_quote(value)}")
    return "&".join(parts)


def _resolve_cloudwatch_endpoint(endpoint_url: str | None, region: str) -> str:
    url = endpoint_url
    ignore = os.environ.get("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "").strip().lower()
    if not url and ignore not in ("1", "true", "yes", "on"):
        url = os.environ.get("AWS_ENDPOINT_URL_CLOUDWATCH") or os.environ.get("AWS_ENDPOINT_URL")
    if not url:
        suffix = "amazonaws.com.cn" if region.startswith("cn-") else "amazonaws.com"
        return f"https://monitoring.{region}.{suffix}"
    url = url.strip().rstrip("/")
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.lower() not in ("http", "https") or not rest:
        raise ValueError(f"invalid endpoint URL {url!r}: expected http(s)://host[:port]")
    return url


class CloudWatchSink:
    """Publishes windows with CloudWatch PutMetricData (AWS query protocol, SigV4, httpx).

    Each datum is sent as a statistic set (SampleCount, Sum, Minimum, Maximum) with its
    unit, dimensions and timestamp. Requests hold at most ``max_datums_per_request`` datums
    (API limit 1000) and ``max_request_bytes`` of body (API limit 1 MB); throttling, 5xx
    and network errors are retried ``max_attempts - 1`` times with jittered exponential
    backoff, an expired token once after a credential refresh. :meth:`publish` raises
    :class:`CloudWatchError` if any batch finally failed (after trying every batch); the
    :class:`Metrics` recorder logs and counts that. Nothing secret is ever logged.

    Region, endpoint (``AWS_ENDPOINT_URL_CLOUDWATCH``, ``AWS_ENDPOINT_URL``, else
    ``https://monitoring.{region}.amazonaws.com``) and credentials resolve like
    :class:`KinesisClient`'s; pass ``credentials=client.credentials`` to share a provider.
    ``namespace=None`` adopts the :class:`Metrics` namespace (default
    ``KinesisProducerLibrary``).
    """

    name = "cloudwatch"

    def __init__(
        self,
        *,
        region_name: str | None = None,
        endpoint_url: str | None = None,
        credentials: StaticCredentials | CredentialProvider | None = None,
        namespace: str | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        profile_name: str | None = None,
        request_timeout: float = 5.0,
        max_attempts: int = 3,
        retry_backoff: float = 0.5,
        max_datums_per_request: int = MAX_DATUMS_PER_REQUEST,
        max_request_bytes: int = MAX_REQUEST_BYTES,
    ) -> None:
        if not 1 <= max_datums_per_request <= MAX_DATUMS_PER_REQUEST:
            raise ValueError(f"max_datums_per_request must be 1..{MAX_DATUMS_PER_REQUEST}")
        if not 1024 <= max_request_bytes <= MAX_REQUEST_BYTES:
            raise ValueError(f"max_request_bytes must be 1024..{MAX_REQUEST_BYTES}")
        if max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        session: Any = None
        if credentials is None or profile_name is not None:
            session = botocore.session.Session(profile=profile_name)
        self.region_name = resolve_region(region_name, session)
        self.endpoint_url = _resolve_cloudwatch_endpoint(endpoint_url, self.region_name)
        if isinstance(credentials, CredentialProvider):
            self._credentials = credentials
        else:
            self._credentials = CredentialProvider(
                credentials if credentials is not None else session
            )
        self.namespace = namespace
        self._url = self.endpoint_url + "/"
        self._host = httpx.URL(self._url).netloc.decode("ascii")
        self._max_attempts = max_attempts
        self._backoff = max(0.0, retry_backoff)
        self._max_datums = max_datums_per_request
        self._max_bytes = max_request_bytes
        self._signer = RequestSigner("monitoring", self.region_name, self._url, self._host)
        self._http = httpx.AsyncClient(
            timeout=httpx.Timeout(request_timeout),
            transport=transport,
            headers={"User-Agent": "kinesis-trio-metrics"},
        )
        self._closed = False

    def __repr__(self) -> str:
        return (
            f"CloudWatchSink(endpoint_url={self.endpoint_url!r}, "
            f"region_name={self.region_name!r}, namespace={self.namespace!r})"
        )

    async def __aenter__(self) -> CloudWatchSink:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the connection pool. Idempotent."""
        if not self._closed:
            self._closed = True
            await self._http.aclose()

    def _batches(self, data: Sequence[MetricDatum]) -> Iterator[tuple[bytes, int]]:
        namespace = self.namespace or DEFAULT_NAMESPACE
        header = f"Action=PutMetricData&Version={_CW_VERSION}&Namespace={_quote(namespace)}"
        parts: list[str] = []
        size = len(header)
        for datum in data:
            if datum.count <= 0:
                continue
            fragment = _encode_datum(len(parts) + 1, datum)
            if parts and (
                len(parts) >= self._max_datums or size + 1 + len(fragment) > self._max_bytes
            ):
                yield "&".join([header, *parts]).encode("ascii"), len(parts)
                parts, size = [], len(header)
                fragment = _encode_datum(1, datum)
            parts.append(fragment)
            size += 1 + len(fragment)
        if parts:
            yield "&".join([header, *parts]).encode("ascii"), len(parts)

    async def publish(self, data: Sequence[MetricDatum]) -> None:
        """PutMetricData for every datum, in as few requests as the limits allow."""
        if self._closed:
            raise RuntimeError("CloudWatchSink is closed")
        first: BaseException | None = None
        for body, count in self._batches(data):
            try:
                await self._send(body, count)
            except Exception as exc:
                first = first or exc
        if first is not None:
            raise first

    async def _send(self, body: bytes, count: int) -> None:
        digest = hashlib.sha256(body).hexdigest()
        for attempt in range(1, self._max_attempts + 1):
            creds = await self._credentials.get()
            headers = self._signer.sign(body, digest, creds, {"Content-Type": _CW_CONTENT_TYPE})
            start = time.perf_counter()
            try:
                response = await self._http.post(self._url, content=body, headers=headers)
            except httpx.RequestError as exc:
                error = CloudWatchError(type(exc).__name__, _one_line(str(exc)))
                retryable = True
            else:
                status = response.status_code
                if 200 <= status < 300:
                    _log.debug(
                        "cloudwatch.put_metric_data",
                        status=status,
                        datums=count,
                        bytes=len(body),
                        attempt=attempt,
                        duration=round(time.perf_counter() - start, 6),
                    )
                    return
                code, message, request_id = _parse_error(response)
                error = CloudWatchError(code, message, status_code=status, request_id=request_id)
                retryable = status >= 500 or status == 429 or code in _THROTTLING_CODES
                if code in _EXPIRED_CODES:
                    fresh = await self._credentials.force_refresh(creds)
                    retryable = fresh != creds
            _log.debug(
                "cloudwatch.put_metric_data",
                status=error.status_code,
                error=error.code,
                request_id=error.request_id,
                datums=count,
                bytes=len(body),
                attempt=attempt,
                retry=retryable and attempt < self._max_attempts,
            )
            if not retryable or attempt >= self._max_attempts:
                raise error
            delay = self._backoff * (2 ** (attempt - 1))
            await anyio.sleep(delay * (0.5 + random.random() / 2))


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
    }
)
_GAUGES = frozenset({"UserRecordsPending"})
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
        try:
            import prometheus_client
            import prometheus_client.core
        except ImportError as exc:
            raise ImportError(
                "PrometheusSink needs prometheus-client: pip install 'kinesis-trio[prometheus]'"
            ) from exc
        if not re.fullmatch(r"[a-zA-Z_:][a-zA-Z0-9_:]*", prefix):
            raise ValueError(f"invalid Prometheus metric prefix {prefix!r}")
        self._core: Any = prometheus_client.core
        self._prefix = prefix
        self._depth = _DEPTH[MetricsGranularity(granularity)]
        # family -> label values -> [count, sum]; cumulative
        self._cumulative: dict[str, dict[tuple[str, ...], list[float]]] = {}
        # family -> label values -> value; the last window only
        self._window: dict[str, dict[tuple[str, ...], float]] = {}
        self._registry: Any = registry if registry is not None else prometheus_client.REGISTRY
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
        try:
            from opentelemetry import metrics as otel_metrics
        except ImportError as exc:
            raise ImportError(
                "OpenTelemetrySink needs opentelemetry-api: pip install 'kinesis-trio[otel]'"
            ) from exc
        self._meter: Any = meter if meter is not None else otel_metrics.get_meter("kinesis_trio")
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
