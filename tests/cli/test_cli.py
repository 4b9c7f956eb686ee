"""The ``kinesis-trio`` command, run as subprocesses.

``produce`` and ``perf`` run against the session's kinesalite (``--endpoint-url``); records
are read back with GetRecords and de-aggregated. Per-record failures come from a tiny
in-test Kinesis stub (an HTTP server answering ListShards / DescribeStreamSummary /
PutRecords) that throttles chosen entries: with ``--fail-if-throttled`` they fail at once.
"""

from __future__ import annotations

import base64
import concurrent.futures
import contextlib
import hashlib
import http.server
import json
import math
import os
import re
import signal
import socket
import sqlite3
import subprocess
import threading
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import anyio
import pytest

from kinesis_trio.cli._load import _key_bytes, _limit_note, _steady_rate
from kinesis_trio.testing._emulators import default_engine, node_available
from tests.support.cli import (
    cli_command,
    cli_env,
    client,
    create_stream,
    default_sigint,
    number,
    output_lines,
    read_back,
    run_cli,
    summary,
    wait_for_line,
)
from tests.support.emulators import EmulatorEndpoint
from tests.support.helpers import wait_until

pytestmark = pytest.mark.subprocess

_MAX_HASH_KEY = (1 << 128) - 1


# -- streams ---------------------------------------------------------------------------------


# -- a tiny Kinesis stub for per-record failures ------------------------------------------------


@dataclass
class StubState:
    """``fail_marker``: entries whose data contains it are throttled; ``throttle_every``:
    every n-th PutRecords request has all its entries throttled."""

    fail_marker: bytes | None = None
    throttle_every: int = 0
    requests: int = 0
    written: list[bytes] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)


class _StubHandler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    state: StubState

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
        operation = self.headers.get("X-Amz-Target", "").rpartition(".")[2]
        status = 200
        reply: dict[str, Any]
        if operation == "ListShards":
            reply = {
                "Shards": [
                    {
                        "ShardId": "shardId-000000000000",
                        "HashKeyRange": {
                            "StartingHashKey": "0",
                            "EndingHashKey": str(_MAX_HASH_KEY),
                        },
                        "SequenceNumberRange": {"StartingSequenceNumber": "1"},
                    }
                ]
            }
        elif operation == "DescribeStreamSummary":
            reply = {
                "StreamDescriptionSummary": {
                    "StreamName": body.get("StreamName"),
                    "StreamStatus": "ACTIVE",
                    "OpenShardCount": 1,
                }
            }
        elif operation == "PutRecords":
            reply = self._put_records(body["Records"])
        else:
            status, reply = 400, {"__type": "UnknownOperationException", "message": operation}
        payload = json.dumps(reply).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/x-amz-json-1.1")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def _put_records(self, records: list[dict[str, str]]) -> dict[str, Any]:
        state = self.state
        with state.lock:
            state.requests += 1
            throttle_all = (
                bool(state.throttle_every) and (state.requests - 1) % state.throttle_every == 0
            )
            entries: list[dict[str, str]] = []
            failed = 0
            for record in records:
                data = base64.b64decode(record["Data"])
                if throttle_all or (state.fail_marker is not None and state.fail_marker in data):
                    failed += 1
                    entries.append(
                        {
                            "ErrorCode": "ProvisionedThroughputExceededException",
                            "ErrorMessage": "Rate exceeded for shard shardId-000000000000 (stub)",
                        }
                    )
                else:
                    state.written.append(data)
                    entries.append(
                        {
                            "ShardId": "shardId-000000000000",
                            "SequenceNumber": str(len(state.written)).zfill(20),
                        }
                    )
        return {"FailedRecordCount": failed, "Records": entries}

    def log_message(self, format: str, *args: Any) -> None:
        pass


@dataclass
class Stub:
    endpoint_url: str
    state: StubState


@pytest.fixture
def stub() -> Iterator[Stub]:
    state = StubState()
    handler = type("Handler", (_StubHandler,), {"state": state})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield Stub(f"http://127.0.0.1:{server.server_address[1]}", state)
    finally:
        server.shutdown()
        server.server_close()


# -- produce -----------------------------------------------------------------------------------


def test_produce_raw_lines_from_stdin_with_uuid_keys(local_engine: EmulatorEndpoint) -> None:
    stream = create_stream(local_engine.endpoint_url)
    out = run_cli(
        "produce",
        "--stream",
        stream,
        "--endpoint-url",
        local_engine.endpoint_url,
        stdin="alpha\nbeta\n\ngamma\r\ndelta",
    )
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr
    rows = summary(out.stdout)
    assert rows["lines"] == "5 (1 blank skipped)"
    assert (rows["records sent"], rows["ok"], rows["failed"]) == ("4", "4", "0")
    assert "latency p99" in rows
    landed = read_back(local_engine.endpoint_url, stream)
    assert sorted(r.data for r in landed) == [b"alpha", b"beta", b"delta", b"gamma"]
    keys = [r.partition_key for r in landed]
    assert len(set(keys)) == 4
    assert all(uuid.UUID(k).version == 4 for k in keys)


def test_produce_json_lines_with_a_dotted_key_field(local_engine: EmulatorEndpoint) -> None:
    stream = create_stream(local_engine.endpoint_url, shards=2)
    lines = [
        json.dumps({"user": {"id": f"user-{i % 7}"}, "n": i, "text": "é ✓"}, ensure_ascii=False)
        for i in range(50)
    ]
    out = run_cli(
        "produce",
        "--stream",
        stream,
        "--endpoint-url",
        local_engine.endpoint_url,
        "--json",
        "--key-field",
        "user.id",
        stdin="\n".join(lines) + "\n",
    )
    assert out.returncode == 0, out.stderr
    assert summary(out.stdout)["ok"] == "50"
    landed = read_back(local_engine.endpoint_url, stream)
    assert sorted(r.data for r in landed) == sorted(line.encode() for line in lines)
    for record in landed:
        assert record.partition_key == json.loads(record.data)["user"]["id"]
        hash_key = int.from_bytes(hashlib.md5(record.partition_key.encode()).digest(), "big")
        assert record.shard_start <= hash_key <= record.shard_end


def test_produce_from_a_file_with_a_key_template_and_explicit_hash_keys(
    local_engine: EmulatorEndpoint, tmp_path: Path
) -> None:
    stream = create_stream(local_engine.endpoint_url, shards=2)
    documents = [
        {"tenant": "acme", "ehk": "0"},
        {"tenant": "globex", "ehk": str(_MAX_HASH_KEY)},
        {"tenant": "acme", "ehk": 1},
    ]
    path = tmp_path / "records.jsonl"
    path.write_text("".join(json.dumps(d) + "\n" for d in documents), encoding="utf-8")
    out = run_cli(
        "produce",
        "--stream",
        stream,
        "--endpoint-url",
        local_engine.endpoint_url,
        "--json",
        "--key-template",
        "{tenant}-{line_no:03d}",
        "--explicit-hash-key-field",
        "ehk",
        "--no-aggregation",
        str(path),
    )
    assert out.returncode == 0, out.stderr
    assert f"produce: {path} -> {stream}" in out.stdout
    landed = {r.partition_key: r for r in read_back(local_engine.endpoint_url, stream)}
    assert sorted(landed) == ["acme-001", "acme-003", "globex-002"]
    assert landed["acme-001"].shard_start == 0  # explicit hash key 0: the first shard
    assert landed["acme-003"].shard_start == 0
    assert landed["globex-002"].shard_end == _MAX_HASH_KEY  # the last shard
    assert json.loads(landed["globex-002"].data) == documents[1]


def test_produce_to_a_missing_stream_is_a_one_line_error(local_engine: EmulatorEndpoint) -> None:
    out = run_cli(
        "produce",
        "--stream",
        f"missing-{uuid.uuid4().hex[:8]}",
        "--endpoint-url",
        local_engine.endpoint_url,
        stdin="a\n",
    )
    assert out.returncode == 1
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert lines[0].startswith("kinesis-trio: error: ResourceNotFoundException"), lines


def test_produce_writes_failed_records_and_exits_1(stub: Stub, tmp_path: Path) -> None:
    stub.state.fail_marker = b'"fail"'
    failed = tmp_path / "failed.jsonl"
    lines = [
        '{"id": "a"}',
        '{"id": "b", "fail": true}',
        "not json",
        '{"id": "c"}',
        '{"other": 1}',
    ]
    out = run_cli(
        "produce",
        "--stream",
        "s",
        "--endpoint-url",
        stub.endpoint_url,
        "--json",
        "--key-field",
        "id",
        "--no-aggregation",
        "--fail-if-throttled",
        "--failed",
        str(failed),
        stdin="\n".join(lines) + "\n",
    )
    assert out.returncode == 1, out.stderr
    rows = summary(out.stdout)
    assert (rows["records sent"], rows["ok"], rows["failed"]) == ("3", "2", "3")
    assert "3 failed records written to" in out.stdout
    assert sorted(stub.state.written) == [b'{"id": "a"}', b'{"id": "c"}']
    entries = [json.loads(line) for line in failed.read_text(encoding="utf-8").splitlines()]
    by_line = {e["line_no"]: e for e in entries}
    assert sorted(by_line) == [2, 3, 5]
    assert base64.b64decode(by_line[2]["data"]) == lines[1].encode()
    assert by_line[2]["error_code"] == "ProvisionedThroughputExceededException"
    assert "Rate exceeded" in by_line[2]["error_message"]
    assert (by_line[2]["partition_key"], by_line[2]["stream"]) == ("b", "s")
    assert by_line[2]["attempts"] == 1
    assert by_line[3] | {"error_message": ""} == {
        "line_no": 3,
        "data": base64.b64encode(b"not json").decode(),
        "partition_key": None,
        "explicit_hash_key": None,
        "stream": "s",
        "error_code": "InvalidJSON",
        "error_message": "",
        "attempts": 0,
    }
    assert by_line[5]["error_code"] == "MissingKey"


def failed_entries(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_produce_failed_records_sent_again_with_records_all_arrive(
    stub: Stub, local_engine: EmulatorEndpoint, tmp_path: Path
) -> None:
    """The round trip: records that fail (throttled, --fail-if-throttled) are written by
    --failed; produce --records sends that file to a healthy stream, where each arrives
    once, with its data, its partition key and its explicit hash key."""
    stub.state.fail_marker = b"FAIL"
    failed = tmp_path / "failed.jsonl"
    lines = []
    for i in range(60):
        doc: dict[str, Any] = {"id": f"u{i}", "n": i, "mark": "FAIL" if i % 3 == 0 else "ok"}
        doc["ehk"] = str(i * (_MAX_HASH_KEY // 60))  # across the shards
        doc["text"] = "é" * (i % 5)
        lines.append(json.dumps(doc, ensure_ascii=False))
    out = run_cli(
        "produce",
        "--stream",
        "s",
        "--endpoint-url",
        stub.endpoint_url,
        "--json",
        "--key-field",
        "id",
        "--explicit-hash-key-field",
        "ehk",
        "--fail-if-throttled",
        "--no-aggregation",
        "--failed",
        str(failed),
        stdin="\n".join(lines) + "\n",
    )
    assert out.returncode == 1, out.stderr
    expected = {
        line.encode(): json.loads(line) for line in lines if json.loads(line)["mark"] == "FAIL"
    }
    entries = failed_entries(failed)
    assert len(entries) == len(expected) == 20
    assert all(e["error_code"] == "ProvisionedThroughputExceededException" for e in entries)

    stream = create_stream(local_engine.endpoint_url, shards=2)
    again = run_cli(
        "produce",
        str(failed),
        "--records",
        "--stream",
        stream,
        "--endpoint-url",
        local_engine.endpoint_url,
    )
    assert again.returncode == 0, again.stderr
    assert summary(again.stdout)["ok"] == "20"
    landed = read_back(local_engine.endpoint_url, stream)
    assert sorted(r.data for r in landed) == sorted(expected)
    for record in landed:
        doc = expected[record.data]
        assert record.partition_key == doc["id"]
        assert record.shard_start <= int(doc["ehk"]) <= record.shard_end  # routed by it


def test_perf_writes_failed_records_that_produce_sends_again(
    stub: Stub, local_engine: EmulatorEndpoint, tmp_path: Path
) -> None:
    stub.state.throttle_every = 1  # every request throttled, and throttled records fail
    failed = tmp_path / "perf-failed.jsonl"
    out = run_cli(
        "perf",
        "--endpoint-url",
        stub.endpoint_url,
        "--stream",
        "s",
        "-n",
        "30",
        "-s",
        "40",
        "--keys",
        "7",
        "--fail-if-throttled",
        "--failed",
        str(failed),
    )
    assert out.returncode == 1, out.stderr
    assert "30 failed records written to" in out.stdout
    entries = failed_entries(failed)
    assert len(entries) == 30
    assert sorted(e["partition_key"] for e in entries) == sorted(f"key-{i % 7}" for i in range(30))
    assert {e["stream"] for e in entries} == {"s"}
    assert all(e["attempts"] == 1 and len(base64.b64decode(e["data"])) == 40 for e in entries)

    stream = create_stream(local_engine.endpoint_url)
    again = run_cli(
        "produce",
        str(failed),
        "--records",
        "--stream",
        stream,
        "--endpoint-url",
        local_engine.endpoint_url,
    )
    assert again.returncode == 0, again.stderr
    landed = read_back(local_engine.endpoint_url, stream)
    assert sorted((r.data, r.partition_key) for r in landed) == sorted(
        (base64.b64decode(e["data"]), e["partition_key"]) for e in entries
    )


def test_produce_records_rejects_bad_lines_and_key_options(stub: Stub, tmp_path: Path) -> None:
    failed = tmp_path / "again.jsonl"
    good = {"data": base64.b64encode(b"fine").decode(), "partition_key": "k", "stream": "x"}
    lines = [
        json.dumps(good),
        "not json",
        json.dumps({"data": "%%%", "partition_key": "k"}),
        json.dumps({"data": "AAAA", "partition_key": "k", "data_truncated": True}),
        json.dumps({"data": "AAAA", "partition_key": 5}),
    ]
    out = run_cli(
        "produce",
        "--records",
        "--stream",
        "s",
        "--endpoint-url",
        stub.endpoint_url,
        "--failed",
        str(failed),
        stdin="\n".join(lines) + "\n",
    )
    assert out.returncode == 1, out.stderr
    assert stub.state.written == [b"fine"]
    codes = {e["line_no"]: e["error_code"] for e in failed_entries(failed)}
    assert codes == {2: "InvalidJSON", 3: "InvalidRecord", 4: "TruncatedRecord", 5: "InvalidKey"}


# -- perf --------------------------------------------------------------------------------------


def test_perf_with_a_count_creates_the_stream(local_engine: EmulatorEndpoint) -> None:
    stream = f"cli-perf-{uuid.uuid4().hex[:8]}"
    out = run_cli(
        "perf",
        "--endpoint-url",
        local_engine.endpoint_url,
        "--stream",
        stream,
        "--shards",
        "2",
        "-n",
        "2000",
        "-s",
        "100",
    )
    assert out.returncode == 0, out.stderr
    assert f"created stream {stream} with 2 shards" in out.stdout
    rows = summary(out.stdout)
    assert rows["records"] == "2,000"
    assert rows["failed"] == "0"
    assert rows["latency from"] == "each put() call"
    for label in ("latency p50", "latency p99", "latency p99.9"):
        assert rows[label].endswith(" ms"), rows
    assert (
        number(rows["latency p50"]) <= number(rows["latency p99"]) <= number(rows["latency p99.9"])
    )
    assert number(rows["records/s"]) > 0
    assert number(rows["MB/s"]) > 0
    assert number(rows["CPU us/record"]) > 0
    assert rows["throttles"] == "0 attempts (0 records)"
    landed = read_back(local_engine.endpoint_url, stream)
    assert len(landed) == 2000
    assert {len(r.data) for r in landed} == {100}
    assert len({r.shard_id for r in landed}) == 2


@pytest.mark.parametrize(
    ("args", "expected"),
    [(("-n", "300", "-r", "500"), 300), (("-r", "400", "--duration", "1"), 400)],
    ids=["count-and-rate", "rate-and-duration"],
)
def test_perf_with_a_rate_reports_latency_from_the_schedule(
    local_engine: EmulatorEndpoint, args: tuple[str, ...], expected: int
) -> None:
    stream = create_stream(local_engine.endpoint_url)
    out = run_cli("perf", "--endpoint-url", local_engine.endpoint_url, "--stream", stream, *args)
    assert out.returncode == 0, out.stderr
    rows = summary(out.stdout)
    assert number(rows["records"]) == expected
    rate = float(args[args.index("-r") + 1])
    assert number(rows["elapsed"]) >= (expected - 1) / rate - 0.01  # paced, not a burst
    assert rows["latency from"].startswith("each record's scheduled time")
    p50, p99, p999 = (number(rows[f"latency {p}"]) for p in ("p50", "p99", "p99.9"))
    assert 0 < p50 <= p99 <= p999
    assert len(read_back(local_engine.endpoint_url, stream)) == expected


def test_perf_counts_throttled_attempts(stub: Stub) -> None:
    stub.state.throttle_every = 2  # every other PutRecords: all entries throttled
    out = run_cli(
        "perf",
        "--endpoint-url",
        stub.endpoint_url,
        "--stream",
        "s",
        "-n",
        "200",
        "-s",
        "50",
        "--no-aggregation",
        "--linger",
        "10ms",
    )
    assert out.returncode == 0, out.stderr
    rows = summary(out.stdout)
    assert rows["failed"] == "0"
    match = re.fullmatch(r"([\d,]+) attempts \(([\d,]+) records\)", rows["throttles"])
    assert match, rows["throttles"]
    assert int(match[1].replace(",", "")) >= 1
    assert len(stub.state.written) == 200


def test_perf_fails_with_exit_1_when_records_fail(stub: Stub) -> None:
    stub.state.throttle_every = 1  # every request throttled...
    out = run_cli(
        "perf",
        "--endpoint-url",
        stub.endpoint_url,
        "--stream",
        "s",
        "-n",
        "20",
        "--fail-if-throttled",  # ...and throttled records fail at once
    )
    assert out.returncode == 1, out.stderr
    assert summary(out.stdout)["failed"] == "20"
    assert "ProvisionedThroughputExceededException: 20" in out.stdout


@pytest.mark.integration
def test_perf_without_an_endpoint_starts_the_embedded_emulator() -> None:
    out = run_cli("perf", "-n", "500", "-s", "64", "--shards", "1")
    assert out.returncode == 0, out.stderr
    kind = default_engine()
    assert f"no endpoint configured: starting an embedded {kind} emulator" in out.stdout
    if kind == "python":
        assert "Node.js not found: using the Python local engine" in out.stdout
    assert summary(out.stdout)["records"] == "500"


def test_perf_on_a_missing_stream_without_shards_is_an_error(
    local_engine: EmulatorEndpoint,
) -> None:
    out = run_cli(
        "perf", "--endpoint-url", local_engine.endpoint_url, "--stream", f"nope-{uuid.uuid4().hex}"
    )
    assert out.returncode == 1
    (line,) = out.stderr.strip().splitlines()
    assert line.startswith("kinesis-trio: error: stream ") and "--shards" in line


# -- demo --------------------------------------------------------------------------------------

_MIB = 1_048_576
_DEMO_HEADER = "| phase | records | records/s | MB/s | p50 ms | p99 ms | CPU µs/record | failed |"


def demo_table(stdout: str) -> dict[str, list[str]]:
    """The demo's table: phase -> its cells (records, records/s, MB/s, p50, p99, CPU, failed)."""
    lines = stdout.splitlines()
    start = lines.index(_DEMO_HEADER)
    assert lines[start + 1] == "|:---|---:|---:|---:|---:|---:|---:|---:|"
    rows: dict[str, list[str]] = {}
    for line in lines[start + 2 :]:
        if not line.startswith("| "):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        assert len(cells) == 8, line
        rows[cells[0]] = cells[1:]
    return rows


def demo_notes(stdout: str) -> dict[str, str]:
    """The explanation lines after the table, by their label (``latency (steady)``, ...)."""
    notes: dict[str, str] = {}
    for line in stdout.splitlines():
        label, sep, text = line.partition(": ")
        if sep and label in (
            "records/s, MB/s",
            "latency (steady)",
            "latency (burst)",
            "CPU",
            "failed",
            "peak RSS",
        ):
            notes[label] = text
    return notes


def test_demo_key_bytes_is_the_mean_length_of_key_n() -> None:
    assert _key_bytes(1) == len("key-0") == 5
    assert _key_bytes(10) == 5
    assert _key_bytes(11) == (10 * 5 + 6) / 11
    assert _key_bytes(256) == (10 * 5 + 90 * 6 + 156 * 7) / 256  # about 6.6


@pytest.mark.parametrize(("shards", "size", "keys"), [(4, 200, 256), (1, 200, 1), (3, 5000, 10)])
def test_demo_rate_aggregated_is_80_percent_of_the_bytes_limit(
    shards: int, size: int, keys: int
) -> None:
    record = size + _key_bytes(keys)
    rate, bytes_bind = _steady_rate(shards, record, aggregated=True)
    # the records limit counts aggregates, so 1 MiB/s binds even for small records
    assert bytes_bind
    assert rate == pytest.approx(0.8 * shards * _MIB / record)
    assert _steady_rate(shards, record, aggregated=True, load=1.0)[0] == pytest.approx(rate / 0.8)


def test_demo_default_rate_is_16244_records_per_second() -> None:
    """The README's command: 4 shards, 200-byte records over 256 keys, aggregated."""
    rate, _ = _steady_rate(4, 200 + _key_bytes(256), aggregated=True)
    assert f"{rate:,.0f}" == "16,244"


def test_demo_rate_not_aggregated_takes_the_lower_limit() -> None:
    # small records: 1,000 records/s per shard binds
    assert _steady_rate(4, 206.6, aggregated=False) == pytest.approx((3200, False))
    assert _steady_rate(1, 1000, aggregated=False) == pytest.approx((800, False))
    # records over 1,048.576 bytes: 1 MiB/s binds first
    rate, bytes_bind = _steady_rate(3, 4096, aggregated=False)
    assert bytes_bind
    assert rate == pytest.approx(0.8 * 3 * _MIB / 4096)  # 614.4
    # rates scale with the shards
    assert _steady_rate(10, 4096, aggregated=False)[0] == pytest.approx(rate * 10 / 3)


def test_demo_limit_note_says_which_limit_binds() -> None:
    assert _limit_note(4, 206.6, aggregated=True) == (
        "4 shards' limits: 1 MiB/s each; records are aggregated, so bytes bind"
    )
    assert _limit_note(1, 206.6, aggregated=False) == (
        "1 shard's limits: 1,000 records/s each; records are not aggregated, so records/s binds"
    )
    assert _limit_note(2, 4096, aggregated=False) == (
        "2 shards' limits: 1 MiB/s each; records are not aggregated but 4,096 bytes each, "
        "so bytes bind"
    )


@pytest.mark.parametrize("backend", ["trio", "asyncio"])
def test_demo_writes_a_steady_phase_at_80_percent_of_the_limits(
    local_engine: EmulatorEndpoint, backend: str
) -> None:
    out = run_cli(
        "demo",
        "--endpoint-url",
        local_engine.endpoint_url,
        "--shards",
        "2",
        "--duration",
        "0.5",
        "--backend",
        backend,
    )
    assert out.returncode == 0, out.stderr
    rate, _ = _steady_rate(2, 200 + _key_bytes(256), aggregated=True)
    assert (
        f"steady phase: {rate:,.0f} records/s for 0.5 s (80 % of 2 shards' limits: 1 MiB/s "
        "each; records are aggregated, so bytes bind)"
    ) in out.stdout.splitlines()
    assert "then a burst" not in out.stdout
    table = demo_table(out.stdout)
    assert list(table) == ["steady"]
    records, per_s, mb_s, p50, p99, cpu, failed = table["steady"]
    assert number(records) == math.ceil(0.5 * rate)
    assert failed == "0"
    assert number(per_s) > 0 and number(mb_s) > 0 and number(cpu) > 0
    assert 0 < number(p50) <= number(p99)
    notes = demo_notes(out.stdout)
    assert set(notes) == {"records/s, MB/s", "latency (steady)", "CPU", "failed", "peak RSS"}
    assert notes["latency (steady)"].startswith(
        "from each record's scheduled arrival (start + i/rate) to its confirmed write; the "
        "producer holds a record up to the linger (0.1 s) to fill an aggregate"
    )
    assert notes["CPU"].startswith("this process's CPU time (producer and load loop)")
    assert notes["failed"] == (
        "0 failed: every record was confirmed by the service (a sequence number for each)."
    )
    assert notes["peak RSS"].endswith(" MiB (this process's peak resident memory).")
    stream = re.search(r"created stream (\S+) with 2 shards", out.stdout)
    assert stream is not None
    assert len(read_back(local_engine.endpoint_url, stream[1])) == number(records)


@pytest.mark.parametrize("backend", ["trio", "asyncio"])
def test_demo_rate_and_burst_on_an_existing_stream(
    local_engine: EmulatorEndpoint, backend: str
) -> None:
    stream = create_stream(local_engine.endpoint_url, shards=3)
    out = run_cli(
        "demo",
        "--endpoint-url",
        local_engine.endpoint_url,
        "--stream",
        stream,
        "--rate",
        "400",
        "--duration",
        "0.5",
        "--burst",
        "1500",
        "--no-aggregation",
        "--linger",
        "50ms",
        "--backend",
        backend,
    )
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    # the existing stream's 3 open shards set the limits: 400 is 13 % of 3,000 records/s
    assert (
        "steady phase: 400 records/s for 0.5 s (--rate: 13 % of 3 shards' limits: 1,000 "
        "records/s each; records are not aggregated, so records/s binds)"
    ) in lines
    assert "then a burst: 1,500 records as fast as put() allows" in lines
    table = demo_table(out.stdout)
    assert list(table) == ["steady", "burst"]
    assert (table["steady"][0], table["steady"][-1]) == ("200", "0")
    assert (table["burst"][0], table["burst"][-1]) == ("1,500", "0")
    notes = demo_notes(out.stdout)
    assert "to fill a request" in notes["latency (steady)"]
    assert "(0.05 s)" in notes["latency (steady)"]
    assert notes["latency (burst)"].startswith("from each put() call to its confirmed write")
    assert len(read_back(local_engine.endpoint_url, stream)) == 1700


def test_demo_explains_failures_and_exits_1(stub: Stub) -> None:
    stub.state.throttle_every = 1  # every request throttled...
    out = run_cli(
        "demo",
        "--endpoint-url",
        stub.endpoint_url,
        "--stream",
        "s",
        "--rate",
        "100",
        "--duration",
        "1",
        "-n",
        "20",
        "--fail-if-throttled",  # ...and throttled records fail at once
    )
    assert out.returncode == 1, out.stderr
    lines = out.stdout.splitlines()
    steady = next(line for line in lines if line.startswith("steady phase: "))
    # the stub's stream has one open shard
    assert steady.startswith(
        "steady phase: 100 records/s for 1 s, at most 20 records by --count (--rate: 2 % of "
        "1 shard's limits: 1 MiB/s each"
    )
    assert demo_table(out.stdout)["steady"][0] == "20"
    assert demo_table(out.stdout)["steady"][-1] == "20"
    assert demo_notes(out.stdout)["failed"] == "20 records not written; by error code:"
    (code_line,) = (line for line in lines if line.startswith("  Provisioned"))
    assert code_line.startswith(
        "  ProvisionedThroughputExceededException: 20: a shard refused the write because it "
        "was over its limits"
    )
    assert "--fail-if-throttled" in code_line


def test_demo_on_a_missing_stream_is_a_one_line_error(local_engine: EmulatorEndpoint) -> None:
    out = run_cli(
        "demo",
        "--endpoint-url",
        local_engine.endpoint_url,
        "--stream",
        f"nope-{uuid.uuid4().hex}",
    )
    assert out.returncode == 1
    (line,) = out.stderr.strip().splitlines()
    assert line.startswith("kinesis-trio: error: stream ") and "does not exist" in line


# -- produce --spool ---------------------------------------------------------------------------


def spooled(spool: Path) -> int:
    """Records in the spool's database (0 before it exists), read as another process may."""
    path = spool / "spool.db"
    if not path.exists():
        return 0
    with contextlib.closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)) as db:
        try:
            return int(db.execute("SELECT count(*) FROM records").fetchone()[0])
        except sqlite3.OperationalError:  # the table is not created yet
            return 0


@pytest.mark.parametrize(("backend", "sync"), [("trio", "put"), ("asyncio", "interval")])
def test_produce_spool_sends_what_a_killed_run_held_when_started_again(
    stub: Stub, local_engine: EmulatorEndpoint, tmp_path: Path, backend: str, sync: str
) -> None:
    """A produce --spool whose records cannot be written (the stub throttles every entry) is
    killed with SIGKILL once its spool holds every line; started again on the same spool
    with empty input, against a healthy endpoint, it sends them all and ends normally."""
    stub.state.throttle_every = 1
    stream = create_stream(local_engine.endpoint_url)
    spool = tmp_path / "spool"
    lines = [f"line-{i:03d}" for i in range(40)]
    first = subprocess.Popen(
        cli_command(
            "produce",
            "--stream",
            stream,
            "--endpoint-url",
            stub.endpoint_url,
            "--spool",
            str(spool),
            "--spool-sync",
            sync,
            "--backend",
            backend,
            "-q",
        ),
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        text=True,
        env=cli_env(),
    )
    try:
        assert first.stdin is not None
        first.stdin.write("".join(line + "\n" for line in lines))
        first.stdin.flush()  # and left open: the run goes on until it is killed
        wait_until(
            lambda: spooled(spool) == len(lines),
            timeout=60,
            interval=0.05,
            what="the spool to hold every line",
        )
        wait_until(
            lambda: stub.state.requests > 0, timeout=60, interval=0.05, what="a PutRecords request"
        )
    finally:
        first.kill()
        first.wait(timeout=30)
    assert first.returncode == -signal.SIGKILL
    assert stub.state.written == []  # the first run wrote nothing: all comes from the spool

    again = run_cli(
        "produce",
        "--stream",
        stream,
        "--endpoint-url",
        local_engine.endpoint_url,
        "--spool",
        str(spool),
        "--backend",
        backend,
        stdin="",
    )
    assert again.returncode == 0, again.stderr
    rows = summary(again.stdout)
    assert rows["recovered"] == "40 (ok 40, failed 0)"
    assert (rows["lines"], rows["failed"]) == ("0", "0")
    assert sorted(r.data for r in read_back(local_engine.endpoint_url, stream)) == [
        line.encode() for line in lines
    ]
    assert spooled(spool) == 0  # each record left the spool once written


def test_produce_on_a_spool_in_use_is_a_one_line_error(stub: Stub, tmp_path: Path) -> None:
    """A second produce on a spool that a running one owns exits 1 with one line naming the
    owner; the owner goes on, and closes normally at the end of its input."""
    spool = tmp_path / "spool"
    owner = subprocess.Popen(
        cli_command(
            "produce",
            "--stream",
            "s",
            "--endpoint-url",
            stub.endpoint_url,
            "--spool",
            str(spool),
            "--spool-sync",
            "put",
            "-q",
        ),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=cli_env(),
    )
    try:
        assert owner.stdin is not None
        owner.stdin.write("first\n")
        owner.stdin.flush()
        wait_until(
            lambda: stub.state.written == [b"first"],
            timeout=60,
            interval=0.05,
            what="the owner's first record",
        )
        second = run_cli(
            "produce",
            "--stream",
            "s",
            "--endpoint-url",
            stub.endpoint_url,
            "--spool",
            str(spool),
            "--backend",
            "asyncio",
            stdin="second\n",
        )
        assert second.returncode == 1
        (line,) = second.stderr.strip().splitlines()
        assert line.startswith("kinesis-trio: error: SpoolLockedError: the spool "), line
        assert f"in use by another producer (pid {owner.pid})" in line
        assert "give each process its own --spool" in line
        assert second.stdout == ""
        stdout, stderr = owner.communicate("last\n", timeout=60)
    finally:
        if owner.poll() is None:
            owner.kill()
            owner.wait()
    assert owner.returncode == 0, stderr
    assert summary(stdout)["ok"] == "2"
    assert sorted(stub.state.written) == [b"first", b"last"]
    assert spooled(spool) == 0


def test_produce_on_a_spool_of_a_newer_format_is_a_one_line_error(
    stub: Stub, tmp_path: Path
) -> None:
    spool = tmp_path / "spool"
    spool.mkdir()
    with contextlib.closing(sqlite3.connect(spool / "spool.db")) as db:
        db.execute("PRAGMA application_id=0x4B545253")  # a spool's, of format 99
        db.execute("PRAGMA user_version=99")
        db.execute("CREATE TABLE records (id INTEGER PRIMARY KEY)")
        db.commit()
    out = run_cli(
        "produce",
        "--stream",
        "s",
        "--endpoint-url",
        stub.endpoint_url,
        "--spool",
        str(spool),
        stdin="a\n",
    )
    assert out.returncode == 1
    (line,) = out.stderr.strip().splitlines()
    assert line.startswith("kinesis-trio: error: SpoolFormatError: the spool "), line
    assert "has format version 99, newer than this kinesis_trio's" in line
    assert stub.state.written == []


# -- bad arguments ------------------------------------------------------------------------------

BAD_ARGUMENTS: list[tuple[list[str], str]] = [
    ([], "the following arguments are required: COMMAND"),
    (["nosuch"], "invalid choice: 'nosuch'"),
    (["produce"], "the following arguments are required: --stream"),
    (["produce", "--stream", "s", "--key-field", "a"], "--key-field needs --json"),
    (["produce", "--stream", "s", "--records", "--json"], "--json cannot be used with --records"),
    (
        ["produce", "--stream", "s", "--json", "--key-field", "a", "--key-template", "b"],
        "not allowed with argument --key-field",
    ),
    (["produce", "--stream", "s", "--key-template", "{"], "Single '{' encountered"),
    (["produce", "--stream", "s", "--key-template", "{tenant}"], "{tenant} needs --json"),
    (["produce", "--stream", "s", "/nonexistent/records.txt"], "cannot read /nonexistent"),
    (["produce", "--stream", "s", "--spool-sync", "put"], "--spool-sync needs --spool DIR"),
    (
        ["produce", "--stream", "s", "--spool", "d", "--spool-interval", "0"],
        "ProducerConfig.spool_interval",
    ),
    (["perf", "-n", "0"], "argument -n/--count: must be at least 1, got 0"),
    (["perf", "-s", "big"], "argument -s/--size: not a size"),
    (["perf", "-r", "-5"], "argument -r/--rate: must be a positive number"),
    (["perf", "--linger", "soon"], "argument --linger: not a duration"),
    (["perf", "--processes", "0"], "argument --processes: must be at least 1, got 0"),
    (
        ["perf", "--processes", "2", "--failed", "f.jsonl"],
        "argument --failed: not with --processes (yet): use one process",
    ),
    (["perf", "--processes", "x"], "argument --processes: not an integer: 'x'"),
    (
        ["perf", "--processes", "3", "-n", "2"],
        "argument --processes: 3 processes need at least 3 records (-n 2)",
    ),
    (["perf", "--stagger", "1"], "argument --stagger: needs --processes 2 or more"),
    (["perf", "--processes", "2", "--stagger", "-1"], "argument --stagger: must be 0 or a"),
    (["demo", "--burst", "0"], "argument --burst: must be at least 1, got 0"),
    (["demo", "--duration", "0"], "argument --duration: must be a positive duration"),
    (["demo", "--rate", "0"], "argument --rate: must be a positive number"),
    (["perf", "--rate-limit", "0"], "ProducerConfig.rate_limit must be a positive percentage"),
    (["perf", "--max-connections", "0"], "ProducerConfig.max_connections must be a positive int"),
    (
        ["produce", "--stream", "s", "--record-ttl", "-1"],
        "ProducerConfig.record_ttl must be a positive",
    ),
    (
        ["produce", "--stream", "s", "--max-record-size", "2m", "--max-outstanding-bytes", "1m"],
        "ProducerConfig.max_outstanding_bytes must be at least max_record_size",
    ),
    (["perf", "--max-outstanding-records", "x"], "argument --max-outstanding-records"),
    (["perf", "--endpoint-url", "ftp://example", "--stream", "s"], "invalid endpoint URL"),
    (["local", "--streams", "a:x"], "--streams: bad entry 'a:x'"),
    (["local", "--port", "70000"], "argument --port"),
    (["local", "--shard-limit", "0"], "argument --shard-limit"),
    (["local", "--emulator", "kinesalite", "--shard-limit", "5"], "--shard-limit: only with"),
]


def _one_line_error(argv: list[str], code: object, stdout: str, stderr: str, expected: str) -> str:
    """What is wrong with a bad argument's answer ('' when it is one line and exit 2)."""
    lines = stderr.strip().splitlines()
    if (
        code != 2
        or len(lines) != 1
        or not lines[0].startswith("kinesis-trio: error: ")
        or expected not in lines[0]
        or stdout
    ):
        return f"{argv}: exit {code}, stderr {stderr!r}, stdout {stdout!r}"
    return ""


def test_bad_arguments_get_one_line_errors_and_exit_2(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # in this process: an interpreter per case took 70 s of CI's time on two cores (the
    # test below runs the real command for each kind of error)
    from kinesis_trio.cli import main

    for name in os.environ:
        if name not in cli_env():
            monkeypatch.delenv(name)
    for name, value in cli_env().items():
        monkeypatch.setenv(name, value)
    problems = []
    for argv, expected in BAD_ARGUMENTS:
        try:
            code: object = main(argv)
        except SystemExit as exc:
            code = exc.code
        out, err = capsys.readouterr()
        problems.append(_one_line_error(argv, code, out, err, expected))
    assert not [p for p in problems if p], "\n".join(p for p in problems if p)


#: one of each kind of bad argument: argparse's, a file the command cannot read,
#: ProducerConfig's, the client's
_BAD_ARGUMENT_KINDS = [0, 8, 26, 29]


def test_bad_arguments_exit_2_from_the_real_command() -> None:
    def run(argv: list[str]) -> subprocess.CompletedProcess[str]:
        return run_cli(*argv, timeout=120)

    cases = [BAD_ARGUMENTS[i] for i in _BAD_ARGUMENT_KINDS]
    with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
        done = list(pool.map(run, [argv for argv, _ in cases]))
    problems = [
        _one_line_error(argv, proc.returncode, proc.stdout, proc.stderr, expected)
        for (argv, expected), proc in zip(cases, done, strict=True)
    ]
    assert not [p for p in problems if p], "\n".join(p for p in problems if p)


# -- local -------------------------------------------------------------------------------------


def _port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        return s.connect_ex(("127.0.0.1", port)) == 0


@pytest.mark.integration
@pytest.mark.parametrize("engine", ["kinesalite", "python"])
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_local_runs_until_interrupted_and_stops_the_emulator(
    signum: signal.Signals, engine: str
) -> None:
    if engine != "python" and not node_available():
        pytest.skip(f"{engine} is an npm package and needs Node.js 18+")
    proc = subprocess.Popen(
        cli_command("local", "--emulator", engine, "--port", "0", "--streams", "orders:2,events"),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=cli_env(),
        # as started from a terminal: a test run launched as a background job (`cmd &` in a
        # script) ignores SIGINT, and its children would inherit that
        preexec_fn=default_sigint,
    )
    try:
        assert proc.stdout is not None
        lines = output_lines(proc.stdout)
        match = wait_for_line(lines, rf"{engine}.* running at (http://127\.0\.0\.1:(\d+))", 120)
        endpoint, port = match[1], int(match[2])

        async def shard_counts() -> dict[str, int]:
            async with client(endpoint) as c:
                return {name: len(await c.list_shards(name)) for name in ("orders", "events")}

        assert anyio.run(shard_counts) == {"orders": 2, "events": 1}
        proc.send_signal(signum)
        assert proc.wait(timeout=30) == 0
        wait_for_line(lines, r"^stopped$", 5)
        assert proc.stderr is not None
        assert "Traceback" not in proc.stderr.read()
        assert not _port_open(port), "the emulator is still listening"
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
