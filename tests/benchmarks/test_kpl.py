"""``python -m benchmarks kpl``: its pieces, without an emulator or a JVM (the rows it runs,
the KPL rows skipped with a reason when Java is missing, the TLS endpoint's certificate not
checked by the Python clients, the harness's failure count)."""

from __future__ import annotations

import argparse
import shutil
from typing import Any

import pytest

from benchmarks import _emulator, _harness, _kpl, kpl
from benchmarks.runners import kinesis_trio as runner


def test_the_rows_are_the_issues_burst_and_latency_contenders() -> None:
    rows = kpl.rows()
    keys = [r.key for r in rows]
    assert len(keys) == len(set(keys))
    burst = {r.key for r in rows if r.part == "burst"}
    latency = {r.key for r in rows if r.part == "latency"}
    assert burst == {
        "kt-put-trio",
        "kt-put-asyncio",
        "kt-putmany-trio",
        "kt-putmany-asyncio",
        "agg-boto3",
        "kpl-burst",
    }
    assert latency == {
        "kt-loop-trio",
        "kt-loop-asyncio",
        "kt-handler-trio",
        "kt-handler-asyncio",
        "kpl-latency",
    }
    put_many = next(r for r in rows if r.key == "kt-putmany-trio")
    assert put_many.args[-2:] == ["--put-many", "500"]


def test_without_java_the_kpl_rows_are_skipped_with_the_reason(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(shutil, "which", lambda tool: None if tool == "java" else "/usr/bin/mvn")
    classpath, reason = _kpl.build()
    assert classpath == ""
    assert reason == "java not found on the PATH"


def test_only_an_https_endpoint_goes_unverified() -> None:
    assert _emulator.verify_for("https://127.0.0.1:4567") is False
    assert _emulator.verify_for("http://127.0.0.1:4567") is True
    base: dict[str, Any] = {
        "linger": 0.1,
        "aggregation": "on",
        "max_connections": 24,
        "fixed_connections": False,
        "ordering": "none",
        "rate_limits": "default",
        "max_outstanding": 0,
        "max_outstanding_mib": 0,
        "spool_dir": "",
        "spool_sync": "interval",
    }
    tls = runner._config(argparse.Namespace(endpoint="https://127.0.0.1:1", **base))
    plain = runner._config(argparse.Namespace(endpoint="http://127.0.0.1:1", **base))
    assert tls.verify is False
    assert plain.verify is True


class _Failed:
    ok = False
    error_code = "Expired"


class _FailingOutcome:
    async def wait(self) -> _Failed:
        return _Failed()


class _FailingProducer:
    async def put(self, data: bytes, partition_key: str) -> _FailingOutcome:
        return _FailingOutcome()


@pytest.mark.anyio
@pytest.mark.virtual_time
@pytest.mark.parametrize("shape", ["loop", "handler"])
async def test_the_harness_counts_the_records_that_failed_by_code(shape: str) -> None:
    job = _harness.Job(
        mode="producer",
        backend="trio",
        rate=0 if shape == "loop" else 1000.0,
        duration=0.05,
        count=20,
        endpoint="",
        stream="",
        shape=shape,
        keep_latencies=True,
    )
    out = await _harness._drive(job, _FailingProducer())
    assert out["failed"] == out["records"] > 0
    assert out["error_codes"] == {"Expired": out["records"]}
    assert len(out["latencies_s"]) == out["records"]


@pytest.mark.anyio
@pytest.mark.virtual_time
async def test_a_paced_harness_run_without_failures_reports_none() -> None:
    job = _harness.Job(
        mode="null",
        backend="trio",
        rate=1000.0,
        duration=0.05,
        count=0,
        endpoint="",
        stream="",
        shape="handler",
    )
    out = await _harness._drive(job, _harness._NullProducer())
    assert out["records"] > 0
    assert out["failed"] == 0
    assert out["error_codes"] == {}
    assert "latencies_s" not in out
