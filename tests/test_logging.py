"""Structured logs: stable event names and keys, quiet by default, never a secret."""

from __future__ import annotations

import logging
from typing import Any

import httpx
import pytest

from kinesis_trio.testing import FakeKinesis

from .helpers import CREDS, error_response, fake_producer, throttle_response

pytestmark = pytest.mark.anyio


def messages(caplog: pytest.LogCaptureFixture, name: str = "kinesis_trio") -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name.startswith(name)]


async def test_failures_are_logged_with_stable_keys(caplog: pytest.LogCaptureFixture) -> None:
    calls = 0

    async def hook(operation: str, body: dict[str, Any]) -> httpx.Response | None:
        nonlocal calls
        if operation != "PutRecords":
            return None
        calls += 1
        if calls == 1:
            return error_response(503, "ServiceUnavailable")
        return throttle_response(body, "KMSNotFoundException")

    fake = FakeKinesis(hook=hook)
    fake.create_stream("s", 1)
    with caplog.at_level(logging.INFO, logger="kinesis_trio"):
        async with fake_producer(fake, record_max_buffered_time=0.01) as producer:
            outcomes = [await producer.put(b"12345", f"k{i}") for i in range(3)]
            for outcome in outcomes:
                await outcome.wait()
    logged = messages(caplog)
    failed_request = next(m for m in logged if "event='put_records_failed'" in m)
    for key in (
        "stream='s'",
        "error_code='ServiceUnavailable'",
        "attempt=1",
        "records=3",
        "bytes=",
        "action='retry'",
    ):
        assert key in failed_request, failed_request
    failed = next(m for m in logged if "event='records_failed'" in m)
    for key in (
        "stream='s'",
        "shard_id='shardId-000000000000'",
        "error_code='KMSNotFoundException'",
        "attempt=2",
        "records=3",
        "bytes=21",
    ):
        assert key in failed, failed


async def test_quiet_by_default_and_no_secrets_even_at_debug(
    caplog: pytest.LogCaptureFixture,
) -> None:
    fake = FakeKinesis()
    fake.create_stream("s", 1)
    caplog.set_level(logging.WARNING)
    async with fake_producer(fake, record_max_buffered_time=0.01) as producer:
        await (await producer.put(b"x", "k")).wait()
    assert messages(caplog) == []  # nothing below WARNING unless the application asks
    with caplog.at_level(logging.DEBUG, logger="kinesis_trio"):
        async with fake_producer(fake, record_max_buffered_time=0.01) as producer:
            await (await producer.put(b"x", "k")).wait()
    logged = "\n".join(messages(caplog))
    assert "kinesis.call" in logged  # debug shows the requests
    assert CREDS.secret_access_key not in logged
    assert "Signature=" not in logged and "Authorization" not in logged
