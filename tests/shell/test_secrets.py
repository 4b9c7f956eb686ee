"""No secret in any log: a producer run with DEBUG logging on for every logger."""

from __future__ import annotations

import logging

import httpx
import pytest

from kinesis_trio import Producer, ProducerConfig, StaticCredentials
from kinesis_trio.metrics import CloudWatchSink, MetricDatum
from kinesis_trio.testing import FakeKinesis

pytestmark = pytest.mark.anyio

SECRET = "wJalrXUtnFEMI-secret-access-key-EXAMPLE"
TOKEN = "FwoGZXIvYXdzE-session-token-EXAMPLE"
CREDS = StaticCredentials("AKIDSECRETTEST", SECRET, TOKEN)


def everything(caplog: pytest.LogCaptureFixture) -> str:
    return "\n".join(f"{r.name}: {r.getMessage()}" for r in caplog.records)


async def test_debug_logs_of_a_producer_run_hold_no_secret(
    caplog: pytest.LogCaptureFixture,
) -> None:
    fake = FakeKinesis()
    fake.create_stream("s", 2)
    seen_tokens: list[str] = []
    inner = fake.transport()

    class Spy(httpx.AsyncBaseTransport):
        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            seen_tokens.append(request.headers.get("X-Amz-Security-Token", ""))
            return await inner.handle_async_request(request)

    with caplog.at_level(logging.DEBUG):  # the root logger: every logger's records
        async with Producer(
            "s",
            region_name="us-east-1",
            endpoint_url="http://fake.local",
            credentials=CREDS,
            config=ProducerConfig(record_max_buffered_time=0.01),
            transport=Spy(),
        ) as producer:
            outcomes = [await producer.put(b"x%d" % i, f"k{i}") for i in range(20)]
            results = [await o.wait() for o in outcomes]
    assert all(r.ok for r in results)
    text = everything(caplog)
    assert seen_tokens and set(seen_tokens) == {TOKEN}  # the token was really used
    assert any(r.levelno == logging.DEBUG for r in caplog.records)  # DEBUG was captured
    assert "kinesis.call" in text  # including the client's own debug events
    assert SECRET not in text
    assert TOKEN not in text


async def test_debug_logs_of_the_cloudwatch_sink_hold_no_secret(
    caplog: pytest.LogCaptureFixture,
) -> None:
    requests: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        requests.append(request)
        return httpx.Response(200, json={})

    sink = CloudWatchSink(
        region_name="us-east-1",
        endpoint_url="http://cloudwatch.local",
        credentials=CREDS,
        transport=httpx.MockTransport(handler),
    )
    with caplog.at_level(logging.DEBUG):
        async with sink:
            await sink.publish(
                [
                    MetricDatum(
                        "UserRecordsPut", (("StreamName", "s"),), "Count", 1, 1.0, 1.0, 1.0, 1e9
                    )
                ]
            )
    assert requests and requests[0].headers.get("X-Amz-Security-Token") == TOKEN
    text = everything(caplog)
    assert SECRET not in text
    assert TOKEN not in text
