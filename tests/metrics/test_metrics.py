"""Tests for the KPL-style metrics recorder and its sinks (no sockets: httpx.MockTransport).

Time-dependent tests run on virtual time on both backends (trio's
``MockClock(autojump_threshold=0)``, an asyncio loop whose clock leaps to its next timer),
with the KPL's real 60 s upload interval.
"""

from __future__ import annotations

import dataclasses
import logging
import re
import sys
import time
import urllib.parse
from collections.abc import Callable, Sequence
from typing import Any

import anyio
import botocore.auth
import botocore.awsrequest
import botocore.credentials
import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kinesis_trio._aws._credentials import StaticCredentials
from kinesis_trio.metrics import (
    CloudWatchError,
    CloudWatchSink,
    InMemorySink,
    MetricDatum,
    Metrics,
    MetricsGranularity,
    MetricsLevel,
    MetricsSink,
    OpenTelemetrySink,
    PrometheusSink,
)
from tests.support.helpers import wait_until_async

pytestmark = [pytest.mark.anyio, pytest.mark.virtual_time]

AKID = "ASIAEXAMPLE123456789"
SECRET = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYsecretKEY"
TOKEN = "IQoJb3JpZ2luX2VjEXAMPLEsessionTOKEN"
CREDS = StaticCredentials(AKID, SECRET, TOKEN)

SHARD0 = "shardId-000000000000"
SHARD1 = "shardId-000000000001"

SUMMARY_METRICS = {
    "UserRecordsPut",
    "KinesisRecordsPut",
    "ErrorsByCode",
    "AllErrors",
    "UserRecordExpired",
    "BufferingTime",
    "FailedRecordsDropped",
}
DETAILED_ONLY = {
    "UserRecordsReceived",
    "UserRecordsPending",
    "UserRecordsDataPut",
    "KinesisRecordsDataPut",
    "RetriesPerRecord",
    "RequestTime",
    "UserRecordsPerKinesisRecord",
    "KinesisRecordsPerPutRecordsRequest",
    "UserRecordsPerPutRecordsRequest",
}


@pytest.fixture
def interval() -> float:
    """The KPL's upload interval (virtual time: it costs nothing)."""
    return 60.0


@pytest.fixture(autouse=True)
def _no_endpoint_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_CLOUDWATCH"):
        monkeypatch.delenv(name, raising=False)


# -- helpers --------------------------------------------------------------------------------


def find(data: Sequence[MetricDatum], name: str, **dims: str) -> MetricDatum:
    matches = [d for d in data if d.name == name and dict(d.dimensions) == dims]
    assert len(matches) == 1, (name, dims, data)
    return matches[0]


def dimension_sets(data: Sequence[MetricDatum], name: str) -> set[tuple[tuple[str, str], ...]]:
    return {d.dimensions for d in data if d.name == name}


def record_everything(m: Metrics, stream: str = "s") -> None:
    m.user_records_received(stream, 3)
    m.user_records_pending(5)
    m.user_records_put(stream, SHARD0, 3, 300)
    m.kinesis_records_put(stream, SHARD0, 1, 320)
    m.errors(stream, SHARD0, "ProvisionedThroughputExceededException", 1)
    m.retries_per_record(stream, SHARD0, 1, 3)
    m.user_record_expired(stream, SHARD0, 1)
    m.failed_records_dropped(stream, 1)
    m.buffering_time(stream, SHARD0, 0.1, 3)
    m.request_time(stream, 0.02)
    m.user_records_per_kinesis_record(stream, SHARD0, 3)
    m.kinesis_records_per_request(stream, 1)
    m.user_records_per_request(stream, 3)


class TimedSink(InMemorySink):
    """An InMemorySink that also notes when (event-loop time) each window arrived."""

    def __init__(self) -> None:
        super().__init__()
        self.times: list[float] = []

    async def publish(self, data: Sequence[MetricDatum]) -> None:
        self.times.append(anyio.current_time())
        await super().publish(data)


class RaisingSink:
    name = "raising"

    def __init__(self) -> None:
        self.calls = 0

    async def publish(self, data: Sequence[MetricDatum]) -> None:
        self.calls += 1
        raise RuntimeError("boom")


class HangingSink:
    def __init__(self) -> None:
        self.calls = 0

    async def publish(self, data: Sequence[MetricDatum]) -> None:
        self.calls += 1
        await anyio.sleep_forever()


def form(request: httpx.Request) -> dict[str, str]:
    pairs = urllib.parse.parse_qsl(request.content.decode("ascii"), keep_blank_values=True)
    out = dict(pairs)
    assert len(out) == len(pairs), "duplicate form keys"
    return out


def members(body: dict[str, str]) -> list[int]:
    return sorted(
        {int(m.group(1)) for k in body if (m := re.match(r"MetricData\.member\.(\d+)\.", k))}
    )


def cw_sink(handler: Callable[[httpx.Request], httpx.Response], **kwargs: Any) -> CloudWatchSink:
    kwargs.setdefault("region_name", "us-east-1")
    kwargs.setdefault("endpoint_url", "https://monitoring.test")
    kwargs.setdefault("credentials", CREDS)
    kwargs.setdefault("retry_backoff", 0.001)
    return CloudWatchSink(transport=httpx.MockTransport(handler), **kwargs)


OK_XML = (
    '<PutMetricDataResponse xmlns="http://monitoring.amazonaws.com/doc/2010-08-01/">'
    "<ResponseMetadata><RequestId>req-ok</RequestId></ResponseMetadata>"
    "</PutMetricDataResponse>"
)


def error_xml(code: str, message: str = "nope", kind: str = "Sender") -> str:
    return (
        '<ErrorResponse xmlns="http://monitoring.amazonaws.com/doc/2010-08-01/">'
        f"<Error><Type>{kind}</Type><Code>{code}</Code><Message>{message}</Message></Error>"
        "<RequestId>req-err</RequestId></ErrorResponse>"
    )


def datums(n: int, *, name: str = "UserRecordsPut") -> list[MetricDatum]:
    now = time.time()
    return [
        MetricDatum(name, (("StreamName", f"stream-{i:05d}"),), "Count", 2, 2.0, 1.0, 1.0, now)
        for i in range(n)
    ]


# -- recording: statistic sets, dimensions, levels ------------------------------------------


def test_statistic_sets_and_dimensions_at_shard_granularity() -> None:
    m = Metrics()
    before = time.time()
    m.user_records_put("s", SHARD0, 10, 1000)
    m.user_records_put("s", SHARD1, 4, 40)
    m.user_records_put("t", SHARD0, 1, 7)
    data = m.snapshot()

    glob = find(data, "UserRecordsPut")
    assert (glob.unit, glob.count, glob.sum, glob.minimum, glob.maximum) == (
        "Count",
        15,
        15.0,
        1.0,
        1.0,
    )
    assert before - 1 <= glob.timestamp <= time.time() + 1
    assert find(data, "UserRecordsPut", StreamName="s").count == 14
    assert find(data, "UserRecordsPut", StreamName="t").count == 1
    shard = find(data, "UserRecordsPut", StreamName="s", ShardId=SHARD1)
    assert shard.dimensions == (("StreamName", "s"), ("ShardId", SHARD1))
    assert (shard.count, shard.sum) == (4, 4.0)

    size = find(data, "UserRecordsDataPut")
    assert (size.unit, size.count, size.sum, size.minimum, size.maximum) == (
        "Bytes",
        15,
        1047.0,
        7.0,
        100.0,
    )
    assert size.average == pytest.approx(1047 / 15)
    assert find(data, "UserRecordsDataPut", StreamName="s", ShardId=SHARD0).sum == 1000.0
    # 3 UserRecordsPut datums for s (global, stream, 2 shards) + t: 1 + 2 + 2 = 6
    assert len(dimension_sets(data, "UserRecordsPut")) == 6


@pytest.mark.parametrize(
    ("granularity", "expected"),
    [
        (MetricsGranularity.GLOBAL, {()}),
        (MetricsGranularity.STREAM, {(), (("StreamName", "s"),)}),
        (
            MetricsGranularity.SHARD,
            {(), (("StreamName", "s"),), (("StreamName", "s"), ("ShardId", SHARD0))},
        ),
        ("stream", {(), (("StreamName", "s"),)}),
    ],
)
def test_granularity(
    granularity: MetricsGranularity | str, expected: set[tuple[tuple[str, str], ...]]
) -> None:
    m = Metrics(granularity=granularity)
    m.kinesis_records_put("s", SHARD0, 2, 100)
    m.buffering_time("s", SHARD0, 0.05, 2)
    data = m.snapshot()
    for name in ("KinesisRecordsPut", "KinesisRecordsDataPut", "BufferingTime", "AllErrors"):
        assert dimension_sets(data, name) == expected, name
    assert m.granularity is MetricsGranularity(granularity)


def test_metrics_not_available_at_shard_level() -> None:
    m = Metrics(granularity="shard")
    m.user_records_received("s", 5)
    m.request_time("s", 0.5)
    m.kinesis_records_per_request("s", 7)
    m.user_records_per_request("s", 70)
    m.user_records_pending(12)
    data = m.snapshot()
    per_stream = {(), (("StreamName", "s"),)}
    for name in (
        "UserRecordsReceived",
        "RequestTime",
        "KinesisRecordsPerPutRecordsRequest",
        "UserRecordsPerPutRecordsRequest",
    ):
        assert dimension_sets(data, name) == per_stream, name
    assert dimension_sets(data, "UserRecordsPending") == {()}
    pending = find(data, "UserRecordsPending")
    assert (pending.count, pending.sum, pending.maximum) == (1, 12.0, 12.0)
    assert find(data, "UserRecordsReceived", StreamName="s").sum == 5.0
    assert find(data, "RequestTime").unit == "Milliseconds"
    assert find(data, "RequestTime").sum == pytest.approx(500.0)
    assert find(data, "KinesisRecordsPerPutRecordsRequest").maximum == 7.0
    assert find(data, "UserRecordsPerPutRecordsRequest").sum == 70.0


def test_errors_by_code_dimensions_and_all_errors() -> None:
    m = Metrics()
    m.errors("s", SHARD1, "ProvisionedThroughputExceededException", 3)
    m.errors("s", None, "InternalFailure", 1)  # a failed request: no shard
    m.kinesis_records_put("s", SHARD1, 5, 500)  # KPL: AllErrors 0 per record put
    data = m.snapshot()

    throttled = "ProvisionedThroughputExceededException"
    assert dimension_sets(data, "ErrorsByCode") == {
        (("ErrorCode", throttled),),
        (("ErrorCode", throttled), ("StreamName", "s")),
        (("ErrorCode", throttled), ("StreamName", "s"), ("ShardId", SHARD1)),
        (("ErrorCode", "InternalFailure"),),
        (("ErrorCode", "InternalFailure"), ("StreamName", "s")),
    }
    assert find(data, "ErrorsByCode", ErrorCode=throttled, StreamName="s", ShardId=SHARD1).sum == 3
    assert find(data, "ErrorsByCode", ErrorCode="InternalFailure").count == 1

    total = find(data, "AllErrors")
    assert (total.count, total.sum, total.minimum, total.maximum) == (9, 4.0, 0.0, 1.0)
    shard = find(data, "AllErrors", StreamName="s", ShardId=SHARD1)
    assert (shard.count, shard.sum) == (8, 3.0)
    assert dimension_sets(data, "AllErrors") == {
        (),
        (("StreamName", "s"),),
        (("StreamName", "s"), ("ShardId", SHARD1)),
    }
    assert m.totals()["ErrorsByCode"] == 4.0
    assert m.totals()["AllErrors"] == 4.0


def test_failed_records_are_zero_samples_like_the_kpl() -> None:
    m = Metrics()
    m.user_records_put("s", SHARD0, 3, 30, failed=1)
    m.user_records_put("s", SHARD0, 0, 0, failed=2)
    m.kinesis_records_put("s", SHARD0, 0, 0, failed=1)
    data = m.snapshot()
    put = find(data, "UserRecordsPut", StreamName="s", ShardId=SHARD0)
    assert (put.count, put.sum, put.minimum, put.maximum) == (6, 3.0, 0.0, 1.0)
    assert put.average == 0.5  # the success rate
    assert find(data, "UserRecordsDataPut").count == 3  # only successes carry bytes
    kinesis = find(data, "KinesisRecordsPut")
    assert (kinesis.count, kinesis.sum, kinesis.maximum) == (1, 0.0, 0.0)
    assert not dimension_sets(data, "KinesisRecordsDataPut")
    assert not dimension_sets(data, "AllErrors")


def test_distributions_units_and_samples() -> None:
    m = Metrics()
    m.buffering_time("s", SHARD0, 0.25, 4)
    m.buffering_time("s", SHARD0, 0.010, 1)
    m.retries_per_record("s", SHARD0, 2, 3)
    m.retries_per_record("s", SHARD0, 0, 5)
    m.user_records_per_kinesis_record("s", SHARD0, 12)
    m.user_records_per_kinesis_record("s", SHARD0, 2)
    m.user_record_expired("s", None, 2)
    data = m.snapshot()
    buffering = find(data, "BufferingTime", StreamName="s", ShardId=SHARD0)
    assert buffering.unit == "Milliseconds"
    assert (buffering.count, buffering.minimum, buffering.maximum) == (5, 10.0, 250.0)
    assert buffering.sum == pytest.approx(1010.0)
    retries = find(data, "RetriesPerRecord")
    assert (retries.count, retries.sum, retries.minimum, retries.maximum) == (8, 6.0, 0.0, 2.0)
    per = find(data, "UserRecordsPerKinesisRecord", StreamName="s", ShardId=SHARD0)
    assert (per.count, per.sum, per.minimum, per.maximum) == (2, 14.0, 2.0, 12.0)
    assert dimension_sets(data, "UserRecordExpired") == {(), (("StreamName", "s"),)}
    assert find(data, "UserRecordExpired").sum == 2.0


def test_zero_and_negative_counts_record_nothing() -> None:
    m = Metrics()
    m.user_records_put("s", SHARD0, 0, 0)
    m.errors("s", SHARD0, "X", 0)
    m.buffering_time("s", SHARD0, 1.0, 0)
    m.user_records_received("s", 0)
    assert m.snapshot() == []


@pytest.mark.parametrize(
    ("level", "expected"),
    [
        (MetricsLevel.SUMMARY, SUMMARY_METRICS),
        ("summary", SUMMARY_METRICS),
        (MetricsLevel.DETAILED, SUMMARY_METRICS | DETAILED_ONLY),
    ],
)
def test_level_filtering(level: MetricsLevel | str, expected: set[str]) -> None:
    m = Metrics(level=level)
    record_everything(m)
    assert {d.name for d in m.snapshot()} == expected
    assert set(m.totals()) == expected
    assert all(m.is_enabled(name) for name in expected)
    assert not any(m.is_enabled(name) for name in (SUMMARY_METRICS | DETAILED_ONLY) - expected)


async def test_level_none_is_a_no_op() -> None:
    sink = InMemorySink()
    m = Metrics(level="none", sinks=[sink])
    record_everything(m)
    assert not m.enabled
    assert m.snapshot() == []
    assert m.totals() == {}
    await m.flush()
    assert sink.all() == []


def test_totals_survive_windows_and_pending_is_the_latest_sample() -> None:
    m = Metrics()
    m.user_records_put("s", SHARD0, 10, 100)
    m.user_records_pending(40)
    m.user_records_pending(25)
    m._close_window()
    m.user_records_put("s", SHARD1, 5, 50)
    assert m.totals()["UserRecordsPut"] == 15.0
    assert m.totals()["UserRecordsDataPut"] == 150.0
    assert m.totals()["UserRecordsPending"] == 25.0
    assert find(m.snapshot(), "UserRecordsPut").count == 5  # only the current window


def test_timestamps_follow_the_clock() -> None:
    now = [1000.0]
    m = Metrics(clock=lambda: now[0])
    m.user_records_received("s", 1)
    first = m.snapshot()[0].timestamp
    now[0] += 90.0
    assert m.snapshot()[0].timestamp == pytest.approx(first + 90.0)


def test_validation() -> None:
    with pytest.raises(ValueError):
        Metrics(upload_interval=0)
    with pytest.raises(ValueError):
        Metrics(level="verbose")
    with pytest.raises(ValueError):
        Metrics(granularity="host")
    with pytest.raises(ValueError):
        Metrics(namespace="")
    with pytest.raises(TypeError):
        Metrics(sinks=[object()])  # type: ignore[list-item]
    with pytest.raises(ValueError):
        InMemorySink(maxlen=0)
    assert isinstance(InMemorySink(), MetricsSink)


# -- windows, run(), flush() -----------------------------------------------------------------


async def test_run_rolls_windows_every_upload_interval(interval: float) -> None:
    sink = TimedSink()
    m = Metrics(sinks=[sink], upload_interval=interval)
    async with anyio.create_task_group() as tg:
        start = anyio.current_time()
        tg.start_soon(m.run)
        m.user_records_put("s", SHARD0, 3, 30)
        await wait_until_async(
            lambda: len(sink.all()) >= 1,
            timeout=interval * 20,
            interval=interval / 10,
            what="the first window at the sink",
        )
        assert sink.times[0] - start == pytest.approx(interval)
        assert find(sink.latest(), "UserRecordsPut").count == 3
        assert m.snapshot() == []

        m.user_records_put("s", SHARD0, 5, 50)
        await wait_until_async(
            lambda: len(sink.all()) >= 2,
            timeout=interval * 20,
            interval=interval / 10,
            what="the second window at the sink",
        )
        assert find(sink.latest(), "UserRecordsPut").count == 5  # not cumulative
        assert sink.times[1] - start == pytest.approx(2 * interval)
        # empty windows are not published
        await anyio.sleep(interval * 3)
        assert len(sink.all()) == 2
        tg.cancel_scope.cancel()
    assert m.windows_published == 2
    assert m.sink_failures == 0
    assert m.totals()["UserRecordsPut"] == 8.0


async def test_run_returns_only_when_cancelled(interval: float) -> None:
    m = Metrics(upload_interval=interval)
    with anyio.move_on_after(interval * 3.5) as scope:
        await m.run()
    assert scope.cancelled_caught


async def test_flush_delivers_now_and_empties_the_window() -> None:
    sink = InMemorySink()
    m = Metrics(sinks=[sink])
    m.kinesis_records_put("s", SHARD0, 2, 2000)
    await m.flush()
    assert len(sink.all()) == 1
    assert find(sink.latest(), "KinesisRecordsDataPut").sum == 2000.0
    assert m.snapshot() == []
    await m.flush()  # nothing new: nothing published
    assert len(sink.all()) == 1
    assert m.windows_published == 1


async def test_in_memory_sink_is_bounded() -> None:
    sink = InMemorySink(maxlen=3)
    assert sink.latest() == []
    for i in range(5):
        await sink.publish(datums(i + 1))
    windows = sink.all()
    assert [len(w) for w in windows] == [3, 4, 5]
    assert len(sink.latest()) == 5
    sink.clear()
    assert sink.all() == []


# -- failing sinks --------------------------------------------------------------------------


async def test_failing_and_hanging_sinks_do_not_stop_others(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="kinesis_trio.metrics")
    timeout = 5.0
    raising, hanging, memory = RaisingSink(), HangingSink(), InMemorySink()
    m = Metrics(sinks=[raising, hanging, memory], sink_timeout=timeout)
    m.user_records_put("s", SHARD0, 1, 10)
    start = anyio.current_time()
    await m.flush()
    elapsed = anyio.current_time() - start
    assert elapsed < timeout * 5
    assert len(memory.all()) == 1
    assert m.sink_failures == 2
    text = caplog.text
    assert "metrics_sink_failed" in text
    assert "sink='raising'" in text and "RuntimeError: boom" in text
    assert "sink='HangingSink'" in text and "TimeoutError" in text

    # recording and later windows are unaffected
    m.user_records_put("s", SHARD0, 2, 20)
    await m.flush()
    assert len(memory.all()) == 2
    assert find(memory.latest(), "UserRecordsPut").count == 2
    assert (raising.calls, hanging.calls, m.sink_failures) == (2, 2, 4)


async def test_run_keeps_going_with_failing_sinks(interval: float) -> None:
    memory = InMemorySink()
    m = Metrics(
        sinks=[RaisingSink(), HangingSink(), memory],
        upload_interval=interval,
        sink_timeout=interval / 2,
    )
    async with anyio.create_task_group() as tg:
        tg.start_soon(m.run)
        for i in range(3):
            m.user_records_received("s", i + 1)
            await wait_until_async(
                lambda i=i: len(memory.all()) > i,  # type: ignore[misc]
                timeout=interval * 20,
                interval=interval / 10,
                what=f"window {i + 1} at the in-memory sink",
            )
        # the third window's hanging publish times out after the others delivered
        await wait_until_async(
            lambda: m.sink_failures >= 6,
            timeout=interval * 20,
            interval=interval / 10,
            what="six sink failures",
        )
        tg.cancel_scope.cancel()
    assert [find(w, "UserRecordsReceived").sum for w in memory.all()] == [1.0, 2.0, 3.0]
    assert m.sink_failures == 6


# -- CloudWatch -----------------------------------------------------------------------------


def _expected_signature(request: httpx.Request) -> str:
    """Recompute the SigV4 signature of ``request`` with botocore, from its own headers."""
    headers = {
        "Host": request.headers["host"],
        "Content-Type": request.headers["content-type"],
        "X-Amz-Date": request.headers["x-amz-date"],
        "X-Amz-Security-Token": request.headers["x-amz-security-token"],
    }
    aws_request = botocore.awsrequest.AWSRequest(
        method="POST", url=str(request.url), data=request.content, headers=headers
    )
    aws_request.context["timestamp"] = headers["X-Amz-Date"]
    creds = botocore.credentials.ReadOnlyCredentials(AKID, SECRET, TOKEN)
    signer = botocore.auth.SigV4Auth(creds, "monitoring", "us-east-1")
    canonical = signer.canonical_request(aws_request)
    string_to_sign = signer.string_to_sign(aws_request, canonical)
    return str(signer.signature(string_to_sign, aws_request))


async def test_cloudwatch_request_format() -> None:
    requests: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        requests.append(request)
        return httpx.Response(200, text=OK_XML)

    m = Metrics(granularity="shard")
    m.user_records_put("orders", SHARD0, 10, 1000)
    m.buffering_time("orders", SHARD0, 0.125, 10)
    m.errors("orders", None, "InternalFailure", 1)
    data = m.snapshot()
    async with cw_sink(handler) as sink:
        assert sink.namespace is None
        await sink.publish(data)

    assert len(requests) == 1
    request = requests[0]
    assert request.method == "POST"
    assert str(request.url) == "https://monitoring.test/"
    assert request.headers["content-type"].startswith("application/x-www-form-urlencoded")
    auth = request.headers["authorization"]
    assert auth.startswith(f"AWS4-HMAC-SHA256 Credential={AKID}/")
    assert "/us-east-1/monitoring/aws4_request" in auth
    assert "SignedHeaders=content-type;host;x-amz-date;x-amz-security-token" in auth
    assert request.headers["x-amz-security-token"] == TOKEN
    assert auth.endswith("Signature=" + _expected_signature(request))

    body = form(request)
    assert body["Action"] == "PutMetricData"
    assert body["Version"] == "2010-08-01"
    assert body["Namespace"] == "KinesisProducerLibrary"
    assert members(body) == list(range(1, len(data) + 1))
    by_key: dict[tuple[str, tuple[tuple[str, str], ...]], dict[str, str]] = {}
    for i in members(body):
        p = f"MetricData.member.{i}."
        fields = {k[len(p) :]: v for k, v in body.items() if k.startswith(p)}
        dims: list[tuple[str, str]] = []
        j = 1
        while f"Dimensions.member.{j}.Name" in fields:
            dims.append(
                (fields[f"Dimensions.member.{j}.Name"], fields[f"Dimensions.member.{j}.Value"])
            )
            j += 1
        assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z", fields["Timestamp"])
        by_key[(fields["MetricName"], tuple(dims))] = fields
    assert set(by_key) == {(d.name, d.dimensions) for d in data}

    shard = by_key[("UserRecordsPut", (("StreamName", "orders"), ("ShardId", SHARD0)))]
    assert shard["Unit"] == "Count"
    assert shard["StatisticValues.SampleCount"] == "10"
    assert shard["StatisticValues.Sum"] == "10"
    assert shard["StatisticValues.Minimum"] == "1"
    assert shard["StatisticValues.Maximum"] == "1"
    assert by_key[("UserRecordsDataPut", ())]["Unit"] == "Bytes"
    buffering = by_key[("BufferingTime", ())]
    assert buffering["Unit"] == "Milliseconds"
    assert buffering["StatisticValues.Sum"] == "1250"
    assert buffering["StatisticValues.Maximum"] == "125"
    err = by_key[("ErrorsByCode", (("ErrorCode", "InternalFailure"), ("StreamName", "orders")))]
    assert err["StatisticValues.Sum"] == "1"


async def test_cloudwatch_sink_adopts_the_metrics_namespace() -> None:
    bodies: list[dict[str, str]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        bodies.append(form(request))
        return httpx.Response(200, text=OK_XML)

    async with cw_sink(handler) as adopted, cw_sink(handler, namespace="Own/NS") as own:
        m = Metrics(namespace="MyApp/Producer", sinks=[adopted, own])
        assert adopted.namespace == "MyApp/Producer"
        assert own.namespace == "Own/NS"
        m.user_records_received("s", 1)
        await m.flush()
    assert sorted(b["Namespace"] for b in bodies) == ["MyApp/Producer", "Own/NS"]
    assert m.sink_failures == 0


async def test_cloudwatch_batches_at_the_datum_limit() -> None:
    bodies: list[dict[str, str]] = []
    sizes: list[int] = []

    def handler(request: httpx.Request) -> httpx.Response:
        bodies.append(form(request))
        sizes.append(len(request.content))
        return httpx.Response(200, text=OK_XML)

    data = datums(2500)
    async with cw_sink(handler) as sink:
        await sink.publish(data)
    assert [len(members(b)) for b in bodies] == [1000, 1000, 500]
    assert all(members(b) == list(range(1, len(members(b)) + 1)) for b in bodies)
    assert all(size <= 1_000_000 for size in sizes)
    streams = [v for b in bodies for k, v in b.items() if k.endswith(".Dimensions.member.1.Value")]
    assert sorted(streams) == sorted(d.dimensions[0][1] for d in data)


async def test_cloudwatch_batches_at_the_byte_limit() -> None:
    bodies: list[dict[str, str]] = []
    sizes: list[int] = []

    def handler(request: httpx.Request) -> httpx.Response:
        bodies.append(form(request))
        sizes.append(len(request.content))
        return httpx.Response(200, text=OK_XML)

    data = datums(120)
    async with cw_sink(handler, max_request_bytes=4096) as sink:
        await sink.publish(data)
    assert len(bodies) > 3
    assert all(size <= 4096 for size in sizes)
    assert sum(len(members(b)) for b in bodies) == 120
    assert all(b["Namespace"] == "KinesisProducerLibrary" for b in bodies)
    with pytest.raises(ValueError):
        cw_sink(handler, max_datums_per_request=1001)
    with pytest.raises(ValueError):
        cw_sink(handler, max_request_bytes=2_000_000)


@pytest.mark.parametrize(
    "first",
    [
        httpx.Response(500, text=error_xml("InternalServiceFault", kind="Receiver")),
        httpx.Response(400, text=error_xml("Throttling", "Rate exceeded")),
        httpx.Response(503, text="Service Unavailable"),
        "connect-error",
    ],
    ids=["500", "throttling", "503-plain", "network"],
)
async def test_cloudwatch_retries_transient_errors(first: httpx.Response | str) -> None:
    calls: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        if len(calls) == 1:
            if isinstance(first, str):
                raise httpx.ConnectError("connection refused", request=request)
            return first
        return httpx.Response(200, text=OK_XML)

    async with cw_sink(handler) as sink:
        await sink.publish(datums(3))
    assert len(calls) == 2
    assert calls[0].content == calls[1].content


async def test_cloudwatch_gives_up_after_max_attempts_and_on_client_errors() -> None:
    calls = 0

    def always_500(request: httpx.Request) -> httpx.Response:
        nonlocal calls
        calls += 1
        return httpx.Response(500, text=error_xml("InternalServiceFault", kind="Receiver"))

    async with cw_sink(always_500, max_attempts=3) as sink:
        with pytest.raises(CloudWatchError) as info:
            await sink.publish(datums(1))
    assert calls == 3
    assert (info.value.code, info.value.status_code) == ("InternalServiceFault", 500)
    assert info.value.request_id == "req-err"

    calls = 0

    def invalid(request: httpx.Request) -> httpx.Response:
        nonlocal calls
        calls += 1
        return httpx.Response(400, text=error_xml("InvalidParameterValue", "bad unit"))

    async with cw_sink(invalid) as sink:
        with pytest.raises(CloudWatchError, match=r"InvalidParameterValue.*bad unit"):
            await sink.publish(datums(1))
    assert calls == 1


async def test_cloudwatch_json_error_body_is_understood() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(
            400,
            json={"__type": "com.amazonaws#InvalidParameterCombination", "message": "x"},
            headers={"x-amzn-RequestId": "rid-1"},
        )

    async with cw_sink(handler) as sink:
        with pytest.raises(CloudWatchError) as info:
            await sink.publish(datums(1))
    assert (info.value.code, info.value.request_id) == ("InvalidParameterCombination", "rid-1")


async def test_cloudwatch_logs_no_secrets(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="kinesis_trio")
    signature_error = (
        "The request signature we calculated does not match the signature you provided.\n"
        "The Canonical String for this request should have been\n"
        f"'POST\n/\n\nx-amz-security-token:{TOKEN}\n' {SECRET}"
    )
    responses = [
        httpx.Response(200, text=OK_XML),
        httpx.Response(403, text=error_xml("SignatureDoesNotMatch", signature_error)),
    ]

    def handler(request: httpx.Request) -> httpx.Response:
        return responses.pop(0)

    async with cw_sink(handler) as sink:
        m = Metrics(sinks=[sink])
        m.user_records_received("s", 1)
        await m.flush()
        m.user_records_received("s", 1)
        await m.flush()
        assert TOKEN not in repr(sink) and SECRET not in repr(sink)
    assert m.sink_failures == 1
    text = caplog.text
    assert "cloudwatch.put_metric_data" in text
    assert "metrics_sink_failed" in text and "SignatureDoesNotMatch" in text
    for secret in (SECRET, TOKEN, "Signature=", "AWS4-HMAC-SHA256"):
        assert secret not in text


def test_cloudwatch_endpoint_resolution(monkeypatch: pytest.MonkeyPatch) -> None:
    transport = httpx.MockTransport(lambda r: httpx.Response(200))
    sink = CloudWatchSink(region_name="eu-west-1", credentials=CREDS, transport=transport)
    assert sink.endpoint_url == "https://monitoring.eu-west-1.amazonaws.com"
    sink = CloudWatchSink(region_name="cn-north-1", credentials=CREDS, transport=transport)
    assert sink.endpoint_url == "https://monitoring.cn-north-1.amazonaws.com.cn"
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://localhost:4566/")
    sink = CloudWatchSink(region_name="us-east-1", credentials=CREDS, transport=transport)
    assert sink.endpoint_url == "http://localhost:4566"
    monkeypatch.setenv("AWS_ENDPOINT_URL_CLOUDWATCH", "http://localhost:9999")
    sink = CloudWatchSink(region_name="us-east-1", credentials=CREDS, transport=transport)
    assert sink.endpoint_url == "http://localhost:9999"
    with pytest.raises(ValueError):
        CloudWatchSink(region_name="us-east-1", credentials=CREDS, endpoint_url="ftp://x")


# -- Prometheus -----------------------------------------------------------------------------


def _prometheus_metrics() -> Metrics:
    m = Metrics(granularity="shard")
    m.user_records_put("s", SHARD0, 10, 1000)
    m.user_records_put("s", SHARD1, 5, 500, failed=1)
    m.user_records_put("t", SHARD0, 2, 20)
    m.errors("s", SHARD1, "ProvisionedThroughputExceededException", 3)
    m.errors("s", None, "InternalFailure", 2)
    m.buffering_time("s", SHARD0, 0.2, 4)
    m.buffering_time("s", SHARD1, 0.5, 1)
    m.request_time("s", 0.05)
    m.user_records_pending(10)
    m.user_records_pending(30)
    return m


async def test_prometheus_sink_values() -> None:
    from prometheus_client import CollectorRegistry

    registry = CollectorRegistry()
    sink = PrometheusSink(registry)
    m = _prometheus_metrics()
    await sink.publish(m.snapshot())

    def value(name: str, **labels: str) -> float | None:
        return registry.get_sample_value(name, labels)

    assert value("kinesis_producer_user_records_put_total", stream_name="s") == 15.0
    assert value("kinesis_producer_user_records_put_total", stream_name="t") == 2.0
    assert value("kinesis_producer_user_records_put_failed_total", stream_name="s") == 1.0
    assert value("kinesis_producer_user_records_data_put_bytes_total", stream_name="s") == 1500
    throttled = "ProvisionedThroughputExceededException"
    assert (
        value("kinesis_producer_errors_by_code_total", error_code=throttled, stream_name="s") == 3.0
    )
    assert value("kinesis_producer_all_errors_total", stream_name="s") == 5.0
    assert value("kinesis_producer_buffering_time_seconds_count", stream_name="s") == 5.0
    assert value("kinesis_producer_buffering_time_seconds_sum", stream_name="s") == pytest.approx(
        1.3
    )
    assert value(
        "kinesis_producer_buffering_time_seconds_window_max", stream_name="s"
    ) == pytest.approx(0.5)
    assert value("kinesis_producer_request_time_seconds_sum", stream_name="s") == pytest.approx(
        0.05
    )
    assert value("kinesis_producer_user_records_pending") == 20.0
    assert value("kinesis_producer_user_records_pending_max") == 30.0
    # no shard-level series at the default (stream) granularity
    assert (
        value("kinesis_producer_user_records_put_total", stream_name="s", shard_id=SHARD0) is None
    )

    # counters accumulate across windows; window gauges are replaced
    m._close_window()
    m.user_records_put("s", SHARD0, 1, 1)
    m.buffering_time("s", SHARD0, 0.1, 1)
    await sink.publish(m.snapshot())
    assert value("kinesis_producer_user_records_put_total", stream_name="s") == 16.0
    assert value("kinesis_producer_buffering_time_seconds_count", stream_name="s") == 6.0
    assert value(
        "kinesis_producer_buffering_time_seconds_window_max", stream_name="s"
    ) == pytest.approx(0.1)
    assert value("kinesis_producer_user_records_pending") is None

    with pytest.raises(ValueError):
        PrometheusSink(registry)  # same names twice in one registry
    sink.close()
    assert registry.get_sample_value("kinesis_producer_user_records_put_total", {}) is None
    PrometheusSink(registry, prefix="other")


async def test_prometheus_shard_series_do_not_overlap() -> None:
    from prometheus_client import CollectorRegistry

    registry = CollectorRegistry()
    sink = PrometheusSink(registry, granularity="shard")
    m = _prometheus_metrics()
    await sink.publish(m.snapshot())

    def samples(name: str) -> dict[tuple[tuple[str, str], ...], float]:
        return {
            tuple(sorted(s.labels.items())): s.value
            for family in registry.collect()
            for s in family.samples
            if s.name == name
        }

    all_errors = samples("kinesis_producer_all_errors_total")
    assert all_errors == {
        (("shard_id", ""), ("stream_name", "s")): 2.0,  # the request-level error
        (("shard_id", SHARD1), ("stream_name", "s")): 3.0,
    }
    assert sum(all_errors.values()) == m.totals()["AllErrors"]
    put = samples("kinesis_producer_user_records_put_total")
    assert sum(put.values()) == m.totals()["UserRecordsPut"]
    assert put[(("shard_id", SHARD0), ("stream_name", "t"))] == 2.0
    request = samples("kinesis_producer_request_time_seconds_count")
    assert request == {(("stream_name", "s"),): 1.0}  # a per-stream metric: no shard label


def test_prometheus_missing_dependency(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "prometheus_client", None)
    with pytest.raises(ImportError, match=r"kinesis-trio\[prometheus\]"):
        PrometheusSink()


# -- OpenTelemetry --------------------------------------------------------------------------


async def test_opentelemetry_sink_values() -> None:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    sink = OpenTelemetrySink(meter=provider.get_meter("test"))
    m = _prometheus_metrics()
    await sink.publish(m.snapshot())
    m._close_window()
    m.user_records_put("s", SHARD0, 1, 1)
    await sink.publish(m.snapshot())

    points: dict[tuple[str, frozenset[tuple[str, Any]]], Any] = {}
    data = reader.get_metrics_data()
    assert data is not None
    for rm in data.resource_metrics:
        for sm in rm.scope_metrics:
            for metric in sm.metrics:
                for point in metric.data.data_points:
                    attributes = dict(point.attributes or {})
                    points[(metric.name, frozenset(attributes.items()))] = point

    def value(name: str, **attrs: str) -> float:
        return float(points[(name, frozenset(attrs.items()))].value)

    assert value("kinesis_producer.user_records_put", stream_name="s") == 16.0
    assert value("kinesis_producer.user_records_put", stream_name="t") == 2.0
    assert value("kinesis_producer.user_records_put.failed", stream_name="s") == 1.0
    assert value("kinesis_producer.user_records_data_put", stream_name="s") == 1501.0
    assert value("kinesis_producer.all_errors", stream_name="s") == 5.0
    assert (
        value(
            "kinesis_producer.errors_by_code",
            stream_name="s",
            error_code="InternalFailure",
        )
        == 2.0
    )
    assert value("kinesis_producer.buffering_time.count", stream_name="s") == 5.0
    assert value("kinesis_producer.buffering_time.sum", stream_name="s") == pytest.approx(1.3)
    assert value("kinesis_producer.buffering_time.max", stream_name="s") == pytest.approx(0.5)
    assert value("kinesis_producer.user_records_pending") == 20.0
    assert value("kinesis_producer.user_records_pending.max") == 30.0
    provider.shutdown()


def test_opentelemetry_missing_dependency(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "opentelemetry", None)
    monkeypatch.setitem(sys.modules, "opentelemetry.metrics", None)
    with pytest.raises(ImportError, match=r"kinesis-trio\[otel\]"):
        OpenTelemetrySink()


async def test_all_sinks_together_through_metrics(interval: float) -> None:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from prometheus_client import CollectorRegistry

    bodies: list[dict[str, str]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        bodies.append(form(request))
        return httpx.Response(200, text=OK_XML)

    registry = CollectorRegistry()
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    memory = InMemorySink()
    async with cw_sink(handler) as cloudwatch:
        m = Metrics(
            sinks=[
                memory,
                cloudwatch,
                PrometheusSink(registry),
                OpenTelemetrySink(meter=provider.get_meter("t")),
                RaisingSink(),
            ],
            upload_interval=interval,
        )
        async with anyio.create_task_group() as tg:
            tg.start_soon(m.run)
            record_everything(m)
            await wait_until_async(
                lambda: bool(memory.all()) and bool(bodies),
                timeout=interval * 20,
                interval=interval / 10,
                what="a window at both sinks",
            )
            tg.cancel_scope.cancel()
    assert len(members(bodies[0])) == len(memory.latest())
    assert registry.get_sample_value(
        "kinesis_producer_user_records_put_total", {"stream_name": "s"}
    )
    assert m.sink_failures == 1
    provider.shutdown()


@settings(max_examples=200)
@given(
    granularity=st.sampled_from(["global", "stream", "shard"]),
    calls=st.lists(
        st.tuples(
            st.sampled_from(["put", "kput", "errors", "retries", "buffering", "per_request"]),
            st.sampled_from(["s1", "s2"]),
            st.sampled_from(["shard-0", "shard-1", None]),
            st.integers(min_value=0, max_value=5),
            st.integers(min_value=0, max_value=3),
        ),
        max_size=40,
    ),
)
def test_a_sample_kept_once_rolls_up_to_every_dimension_set(
    granularity: str, calls: list[tuple[str, str, str | None, int, int]]
) -> None:
    """Samples are stored under their most specific dimensions and rolled up when read: the
    window equals one where each sample was added to every dimension set at once."""
    m = Metrics(granularity=granularity)
    expected: dict[tuple[str, Any], list[float]] = {}
    original = m._put

    def put(name: str, scopes: Any, n: int, total: float, lo: float, hi: float) -> None:
        for dims in scopes:
            stats = expected.setdefault((name, dims), [0, 0.0, lo, hi])
            stats[0] += n
            stats[1] += total
            stats[2] = min(stats[2], lo)
            stats[3] = max(stats[3], hi)
        original(name, scopes, n, total, lo, hi)

    m._put = put  # type: ignore[method-assign]
    for kind, stream, shard, count, extra in calls:
        if kind == "put":
            m.user_records_put(stream, shard or "shard-9", count, count * 10, failed=extra)
        elif kind == "kput":
            m.kinesis_records_put(stream, shard or "shard-9", count, count * 7, failed=extra)
        elif kind == "errors":
            m.errors(stream, shard, f"Code{extra}", count)
        elif kind == "retries":
            m.retries_per_record(stream, shard or "shard-9", extra, count)
        elif kind == "buffering":
            m.buffering_time(stream, shard or "shard-9", extra / 10, count)
        else:
            m.user_records_per_request(stream, count)
    got = {(d.name, d.dimensions): [d.count, d.sum, d.minimum, d.maximum] for d in m.snapshot()}
    assert got == {k: [int(v[0]), v[1], v[2], v[3]] for k, v in expected.items()}
    # and the window closes to the same data, then starts empty
    assert {(d.name, d.dimensions) for d in m._close_window()} == set(expected)
    assert m.snapshot() == []


def test_a_shards_aggregates_summarized_at_once_give_the_samples_of_one_call_each() -> None:
    one_by_one, at_once = Metrics(), Metrics()
    for n in (12, 2, 7):
        one_by_one.user_records_per_kinesis_record("s", SHARD0, n)
    at_once.user_records_per_kinesis_records("s", SHARD0, 3, 21, 2, 12)
    at_once.user_records_per_kinesis_records("s", SHARD0, 0, 0, 0, 0)  # nothing: no sample
    before, after = one_by_one.snapshot(), at_once.snapshot()
    assert [d for d in after if d.name == "UserRecordsPerKinesisRecord"]
    assert [(d.dimensions, d.count, d.sum, d.minimum, d.maximum) for d in before] == [
        (d.dimensions, d.count, d.sum, d.minimum, d.maximum) for d in after
    ]
    assert one_by_one.totals() == at_once.totals()


@pytest.mark.parametrize("level", ["detailed", "summary", "none"])
@pytest.mark.parametrize("granularity", ["shard", "stream", "global"])
@settings(max_examples=25, deadline=None)
@given(
    answers=st.lists(
        st.tuples(
            st.sampled_from(["shardId-000000000000", "shardId-000000000001"]),
            st.integers(1, 500),  # user records
            st.integers(0, 10**6),  # their bytes
            st.integers(1, 50),  # Kinesis records
            st.integers(0, 10**6),  # their bytes
            st.floats(0, 30, allow_nan=False),  # seconds waited, summed
            st.integers(0, 3),  # aggregates among them
            st.integers(1, 100),  # fewest in one
            st.integers(0, 100),  # more in the fullest one
            st.integers(0, 3),  # retries of each of its user records
        ),
        min_size=1,
        max_size=6,
    )
)
def test_a_shards_answer_in_one_call_gives_the_samples_of_the_separate_calls(
    level: str, granularity: str, answers: list[tuple[Any, ...]]
) -> None:
    separate = Metrics(level=level, granularity=granularity)
    at_once = Metrics(level=level, granularity=granularity)
    for shard, users, ubytes, kinesis, kbytes, waited, aggs, lo, extra, tries in answers:
        hi = lo + extra
        separate.user_records_put("s", shard, users, ubytes)
        separate.kinesis_records_put("s", shard, kinesis, kbytes)
        separate.buffering_time("s", shard, waited / users, users)
        separate.user_records_per_kinesis_records("s", shard, aggs, aggs * lo + extra, lo, hi)
        separate.retries_per_record("s", shard, tries, users)
        at_once.shard_answer(
            "s",
            shard,
            users,
            ubytes,
            kinesis,
            kbytes,
            waited,
            aggs,
            aggs * lo + extra,
            lo,
            hi,
            tries * users,
            tries,
            tries,
        )
    expected = [
        (d.name, d.dimensions, d.count, d.minimum, d.maximum, d.sum) for d in separate.snapshot()
    ]
    got = [(d.name, d.dimensions, d.count, d.minimum, d.maximum, d.sum) for d in at_once.snapshot()]
    assert [row[:-1] for row in got] == [row[:-1] for row in expected]
    # the same samples, summed shard by shard (the answers are summed per shard until the
    # window is read): a float sum (BufferingTime) may differ in its last bits
    assert [row[-1] for row in got] == pytest.approx([row[-1] for row in expected], rel=1e-12)
    assert at_once.totals() == pytest.approx(separate.totals(), rel=1e-12)
    if level == "none":
        assert got == []
    else:
        names = {name for name, *_ in got}
        assert {"UserRecordsPut", "KinesisRecordsPut", "AllErrors"} <= names
        assert ("RetriesPerRecord" in names) == (level == "detailed")


def test_answers_are_counted_once_however_often_the_window_is_read() -> None:
    """``shard_answer`` sums are folded into the window when it is read: reading again
    (totals, snapshot) adds nothing, an upload takes them and the next window starts empty,
    and later answers land in the next window."""
    m = Metrics()
    m.shard_answer("s", "shardId-000000000000", 10, 2000, 2, 2100, 0.5, 2, 10, 4, 6)
    m.shard_answer("s", "shardId-000000000001", 3, 600, 3, 660, 0.3, 0, 0, 0, 0)
    assert m.totals()["UserRecordsPut"] == 13
    assert m.totals()["UserRecordsPut"] == 13
    first = {(d.name, d.dimensions): d for d in m.snapshot()}
    again = {(d.name, d.dimensions): d for d in m.snapshot()}
    assert {k: dataclasses.replace(d, timestamp=0.0) for k, d in first.items()} == {
        k: dataclasses.replace(d, timestamp=0.0) for k, d in again.items()
    }
    put = first[("UserRecordsPut", ())]
    assert (put.count, put.sum) == (13, 13.0)
    buffering = first[("BufferingTime", ())]
    assert buffering.count == 13
    assert (buffering.minimum, buffering.maximum, buffering.sum) == pytest.approx((50, 100, 800))
    per_aggregate = first[("UserRecordsPerKinesisRecord", ())]
    assert (per_aggregate.count, per_aggregate.sum) == (2, 10.0)
    assert (per_aggregate.minimum, per_aggregate.maximum) == (4, 6)
    published = {(d.name, d.dimensions): d for d in m._close_window()}
    assert published[("KinesisRecordsPut", ())].count == 5
    assert m.snapshot() == []
    m.shard_answer("s", "shardId-000000000000", 1, 100, 1, 120, 0.0, 0, 0, 0, 0)
    assert {(d.name, d.count) for d in m.snapshot() if d.dimensions == ()} >= {
        ("UserRecordsPut", 1),
        ("KinesisRecordsPut", 1),
    }
    assert m.totals()["UserRecordsPut"] == 14
