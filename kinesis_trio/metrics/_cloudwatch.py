"""The CloudWatch sink: PutMetricData, signed with SigV4, batched and retried (which
failures are worth another try is ``_error_codes.metrics_retryable``)."""

from __future__ import annotations

import datetime
import re
import time
import urllib.parse
from collections.abc import Iterator, Mapping, Sequence

import anyio
import httpx

from .._aws._credentials import CredentialProvider, StaticCredentials
from .._aws._service import SignedService
from .._backoff import backoff_delay
from .._error_codes import metrics_retryable
from .._errors import CredentialsError, KinesisTrioError, TransportError, parse_json
from .._metric_names import DEFAULT_NAMESPACE, MetricDatum, _log

# -- CloudWatch -----------------------------------------------------------------------------

_CW_VERSION = "2010-08-01"
_CW_CONTENT_TYPE = "application/x-www-form-urlencoded; charset=utf-8"
MAX_DATUMS_PER_REQUEST = 1000  # PutMetricData: "no more than 1000 different metrics"
MAX_REQUEST_BYTES = 1_000_000  # "limited to 1 MB in size for HTTP POST requests"
MAX_DIMENSIONS = 30  # "up to 30 dimensions per metric"
_HEADERS = {"Content-Type": _CW_CONTENT_TYPE}
_MAX_ERROR_BODY = 64 * 1024  # of an error answer, what is searched for its code
_BACKOFF_CAP = 10.0  # seconds: the longest wait between two tries
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


def _parse_error(
    status: int, headers: Mapping[str, str], content: bytes
) -> tuple[str, str, str | None, bool]:
    """(code, message, request id, sent by the service) from a query-protocol (XML) or JSON
    error response. Never raises: a body that cannot be read gives the status as the code."""
    request_id = headers.get("x-amzn-RequestId") or headers.get("x-amz-request-id")
    text = content[:_MAX_ERROR_BODY].decode("utf-8", "replace")
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
        body = parse_json(content)
        if isinstance(body, dict):
            raw = body.get("__type") or body.get("code") or ""
            code = code or (raw.rsplit("#", 1)[-1] if isinstance(raw, str) else "")
            raw_message = body.get("message") or body.get("Message") or ""
            message = raw_message if isinstance(raw_message, str) else ""
    from_service = bool(code) and 400 <= status < 600
    if not code:
        code = "Throttling" if status == 429 else f"HTTP{status}"
    return code[:256], _one_line(message), request_id, from_service


def _read_answer(status: int, headers: Mapping[str, str], content: bytes) -> CloudWatchError | None:
    """A PutMetricData answer: ``None`` for a 2xx, the service's error (returned), or an
    answer that only looks like an error (raised: its connection is closed)."""
    if 200 <= status < 300:
        return None
    code, message, request_id, from_service = _parse_error(status, headers, content)
    error = CloudWatchError(code, message, status_code=status, request_id=request_id)
    if not from_service:
        raise error
    return error


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


class CloudWatchSink(SignedService):
    """Publishes windows with CloudWatch PutMetricData (AWS query protocol, SigV4, httpx).

    Each datum is sent as a statistic set (SampleCount, Sum, Minimum, Maximum) with its
    unit, dimensions and timestamp. Requests hold at most ``max_datums_per_request`` datums
    (API limit 1000) and ``max_request_bytes`` of body (API limit 1 MB); throttling, 5xx
    and network errors are retried ``max_attempts - 1`` times with jittered exponential
    backoff, an expired token once after a credential refresh. :meth:`publish` raises
    :class:`CloudWatchError` if any batch finally failed (after trying every batch); the
    :class:`Metrics` recorder logs and counts that. Nothing secret is ever logged.

    Region, endpoint (``AWS_ENDPOINT_URL_CLOUDWATCH``, ``AWS_ENDPOINT_URL``, else botocore's
    rules for CloudWatch: ``https://monitoring.{region}.amazonaws.com`` in the commercial
    partition, FIPS and dual-stack as the settings ask) and credentials resolve like
    :class:`KinesisClient`'s; pass ``credentials=client.credentials`` to share a provider.
    ``namespace=None`` adopts the :class:`Metrics` namespace (default
    ``KinesisProducerLibrary``).
    """

    name = "cloudwatch"
    _probe_operation = "PutMetricData"

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
        super().__init__(
            "monitoring",
            "CLOUDWATCH",
            region_name=region_name,
            endpoint_url=endpoint_url,
            credentials=credentials,
            profile_name=profile_name,
            transport=transport,
            max_connections=2,
            request_timeout=request_timeout,
            connect_timeout=request_timeout,
            user_agent="kinesis-trio-metrics",
            model="cloudwatch",
        )
        self.namespace = namespace
        self._max_attempts = max_attempts
        self._backoff = max(0.0, retry_backoff)
        self._max_datums = max_datums_per_request
        self._max_bytes = max_request_bytes
        self._request_timeout = request_timeout

    def __repr__(self) -> str:
        return (
            f"CloudWatchSink(endpoint_url={self.endpoint_url!r}, "
            f"region_name={self.region_name!r}, namespace={self.namespace!r})"
        )

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
        self._check_open()
        first: BaseException | None = None
        for body, count in self._batches(data):
            try:
                await self._send(body, count)
            except Exception as exc:
                first = first or exc
        if first is not None:
            raise first

    async def _send(self, body: bytes, count: int) -> None:
        for attempt in range(1, self._max_attempts + 1):
            start = time.perf_counter()
            try:
                await self._call(
                    "PutMetricData",
                    body,
                    _HEADERS,
                    _read_answer,
                    within=self._request_timeout,
                )
            except CloudWatchError as exc:
                error = exc
                retryable = metrics_retryable(exc.code, exc.status_code or 0)
            except TransportError as exc:
                error = CloudWatchError(type(exc).__name__, _one_line(str(exc)))
                retryable = True
            except CredentialsError as exc:
                error = CloudWatchError("CredentialsError", _one_line(str(exc)))
                retryable = False
            else:
                _log.debug(
                    "cloudwatch.put_metric_data",
                    status="ok",
                    datums=count,
                    bytes=len(body),
                    attempt=attempt,
                    duration=round(time.perf_counter() - start, 6),
                )
                return
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
            await anyio.sleep(backoff_delay(attempt, base=self._backoff, cap=_BACKOFF_CAP))
