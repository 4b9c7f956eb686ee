"""Structured logs: stable event names and keys, quiet by default, never a secret."""

from __future__ import annotations

import logging
from typing import Any

import httpx
import pytest

from kinesis_trio.testing import FakeKinesis
from tests.support.helpers import CREDS, error_response, fake_producer, throttle_response

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


def test_an_event_below_the_level_returns_before_structlog_and_one_above_it_is_logged(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kinesis_trio._logging import get_logger

    log = get_logger("kinesis_trio.test_levels")
    reached: list[str] = []
    inner = log._logger()  # structlog is imported at the first event that passes
    for level in ("debug", "info", "warning", "error", "exception"):
        original = getattr(inner, level)

        def spy(event: str, _level: str = level, _f: Any = original, **kw: Any) -> None:
            reached.append(_level)
            _f(event, **kw)

        monkeypatch.setattr(inner, level, spy)
    with caplog.at_level(logging.WARNING, logger="kinesis_trio.test_levels"):
        log.debug("quiet", n=1)
        log.info("quiet", n=2)
        log.warning("loud", n=3)
        log.error("loud", n=4)
        try:
            raise ValueError("boom")
        except ValueError:
            log.exception("loud", n=5)
    # below WARNING nothing reached structlog (no processors, no DropEvent raised)
    assert reached == ["warning", "error", "exception"]
    logged = messages(caplog, "kinesis_trio.test_levels")
    assert [m.split()[0] for m in logged] == ["event='loud'"] * 3
    assert "n=3" in logged[0] and "n=5" in logged[2]
    assert "ValueError: boom" in logged[2]
    reached.clear()
    caplog.clear()
    with caplog.at_level(logging.DEBUG, logger="kinesis_trio.test_levels"):
        log.debug("now", n=6)
    assert reached == ["debug"]
    assert messages(caplog, "kinesis_trio.test_levels") == ["event='now' level='debug' n=6"]


def test_an_event_whose_structlog_import_fails_goes_out_through_the_stdlib(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """structlog is imported at the first event that passes the level; a process out of
    file descriptors (the local engine's EMFILE warning) cannot import it. The event still
    goes out, and the caller gets no exception (before, it stopped the engine's accept
    loop); the next event tries the import again."""
    import builtins
    import errno

    from kinesis_trio._logging import _Logger

    real_import = builtins.__import__

    def no_descriptors(name: str, *args: Any, **kw: Any) -> Any:
        if name == "structlog":
            raise OSError(errno.EMFILE, "Too many open files")
        return real_import(name, *args, **kw)

    log = _Logger(logging.getLogger("kinesis_trio.test_emfile"))
    caplog.set_level(logging.WARNING, logger="kinesis_trio.test_emfile")
    monkeypatch.setattr(builtins, "__import__", no_descriptors)
    log.warning("local_kinesis_accept_failed", error="OSError: [Errno 24] Too many open files")
    monkeypatch.setattr(builtins, "__import__", real_import)
    log.warning("local_kinesis_accept_resumed", failures=1)
    lines = messages(caplog, "kinesis_trio.test_emfile")
    assert len(lines) == 2
    assert "event='local_kinesis_accept_failed'" in lines[0]
    assert "Too many open files" in lines[0] and "structlog not loaded: OSError" in lines[0]
    assert "event='local_kinesis_accept_resumed'" in lines[1] and "not loaded" not in lines[1]
