"""``kinesis-trio perf --processes N``, run as subprocesses against the Python local engine.

The parent starts N producer processes on one stream and sums their figures; a child that
crashes is reported with its stderr; Ctrl-C / SIGTERM stops the children and the parent
still reports.
"""

from __future__ import annotations

import http.server
import json
import os
import queue
import signal
import subprocess
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import (
    cli_command,
    cli_env,
    default_sigint,
    output_lines,
    read_back,
    run_cli,
    summary,
    wait_for_line,
)
from tests.support.emulators import EmulatorEndpoint
from tests.support.helpers import wait_until

pytestmark = pytest.mark.subprocess


def process_rows(stdout: str) -> list[list[str]]:
    """The per-process table's rows, as cells."""
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| process | pid |"))
    rows = []
    for line in lines[start + 2 :]:
        if not line.startswith("| "):
            break
        rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
    return rows


def count(text: str) -> int:
    return int(text.replace(",", ""))


def children_of(pid: int) -> list[int]:
    """The pids whose parent is ``pid`` (Linux /proc)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if int(stat[stat.rindex(")") + 2 :].split()[1]) == pid:
            found.append(int(entry.name))
    return found


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.mark.parametrize("backend", ["trio", "asyncio"])
def test_perf_processes_sum_to_the_count_with_a_row_per_process(
    python_engine: EmulatorEndpoint, backend: str, tmp_path: Path
) -> None:
    stream = f"cli-procs-{uuid.uuid4().hex[:8]}"
    report = tmp_path / "report.json"
    out = run_cli(
        "perf",
        "--endpoint-url",
        python_engine.endpoint_url,
        "--stream",
        stream,
        "--shards",
        "2",
        "-n",
        "2000",
        "-s",
        "100",
        "--processes",
        "2",
        "--backend",
        backend,
        "--json-report",
        str(report),
    )
    assert out.returncode == 0, out.stderr
    assert "Traceback" not in out.stderr
    assert " in 2 processes: 1,000 records each" in out.stdout
    rows = summary(out.stdout)
    assert (rows["processes"], rows["records"], rows["failed"]) == ("2", "2,000", "0")
    assert rows["latency from"] == "each put() call"
    assert rows["throttles"] == "0 attempts (0 records)"
    table = process_rows(out.stdout)
    assert len(table) == 2
    assert [row[0] for row in table] == ["1", "2"]
    assert [count(row[3]) for row in table] == [1000, 1000]
    assert [row[10] for row in table] == ["0", "0"]  # failed
    assert [row[-1] for row in table] == ["0 (ok)", "0 (ok)"]
    assert len({row[1] for row in table}) == 2  # two pids

    data: dict[str, Any] = json.loads(report.read_text())
    total = data["sum"]
    assert (total["ok"], total["failed"], total["processes"]) == (2000, 0, 2)
    per_process = data["per_process"]
    assert [p["result"]["ok"] for p in per_process] == [1000, 1000]
    assert total["started"] == min(p["result"]["started"] for p in per_process)
    assert total["ended"] == max(p["result"]["ended"] for p in per_process)
    assert sum(total["timeline"]["ok"]) == 2000
    assert sum(p["result"]["latency"]["count"] for p in per_process) == 2000
    assert total["cpu"] == pytest.approx(sum(p["result"]["cpu"] for p in per_process))
    assert len(read_back(python_engine.endpoint_url, stream)) == 2000


def test_perf_json_report_in_process(python_engine: EmulatorEndpoint, tmp_path: Path) -> None:
    report = tmp_path / "report.json"
    out = run_cli(
        "perf",
        "--endpoint-url",
        python_engine.endpoint_url,
        "--shards",
        "1",
        "-n",
        "500",
        "--json-report",
        str(report),
    )
    assert out.returncode == 0, out.stderr
    assert "processes" not in summary(out.stdout)  # the in-process report, as before
    data = json.loads(report.read_text())
    (process,) = data["per_process"]
    assert (process["status"], process["exit"]) == ("in process", 0)
    assert (data["processes"], data["sum"]["ok"], data["sum"]["failed"]) == (1, 500, 0)
    assert sum(process["result"]["timeline"]["ok"]) == 500
    assert process["result"]["latency"]["count"] == 500


def test_perf_processes_split_the_rate(python_engine: EmulatorEndpoint) -> None:
    out = run_cli(
        "perf",
        "--endpoint-url",
        python_engine.endpoint_url,
        "--shards",
        "1",
        "-r",
        "600",
        "--duration",
        "1",
        "--processes",
        "3",
    )
    assert out.returncode == 0, out.stderr
    assert "in 3 processes: 200 records at 200 records/s each" in out.stdout
    rows = summary(out.stdout)
    assert (rows["records"], rows["failed"]) == ("600", "0")
    assert rows["target rate"] == "600 records/s"
    assert rows["latency from"].startswith("each record's scheduled time")
    assert float(rows["elapsed"].split()[0]) >= 599 / 600 - 0.01  # paced, not a burst
    assert [count(row[3]) for row in process_rows(out.stdout)] == [200, 200, 200]


class _DenyingHandler(http.server.BaseHTTPRequestHandler):
    """A Kinesis whose streams exist (DescribeStreamSummary) but deny everything else."""

    protocol_version = "HTTP/1.1"

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", "0"))) or b"{}")
        operation = self.headers.get("X-Amz-Target", "").rpartition(".")[2]
        reply: dict[str, Any]
        if operation == "DescribeStreamSummary":
            status = 200
            reply = {
                "StreamDescriptionSummary": {
                    "StreamName": body.get("StreamName"),
                    "StreamStatus": "ACTIVE",
                    "OpenShardCount": 1,
                }
            }
        else:
            status = 400
            reply = {"__type": "AccessDeniedException", "message": f"{operation} denied (stub)"}
        payload = json.dumps(reply).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/x-amz-json-1.1")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def denying_endpoint() -> Iterator[str]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _DenyingHandler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_perf_processes_report_a_failing_child_with_its_stderr(denying_endpoint: str) -> None:
    # the parent finds the stream; each child fails on its first ListShards
    out = run_cli(
        "perf", "--endpoint-url", denying_endpoint, "--stream", "s", "-n", "10", "--processes", "2"
    )
    assert out.returncode == 1
    assert "Traceback" not in out.stderr
    assert "(no process reported a result)" in out.stdout
    table = process_rows(out.stdout)
    assert [row[-1] for row in table] == ["1 (crashed)", "1 (crashed)"]
    for index, row in enumerate(table, 1):
        assert (
            f"kinesis-trio: error: process {index} (pid {row[1]}) exited with status 1 "
            "without a result; the end of its stderr:"
        ) in out.stderr
    assert out.stderr.count("AccessDeniedException: ListShards denied (stub)") == 2


def test_perf_processes_on_a_missing_stream_fail_in_the_parent(
    python_engine: EmulatorEndpoint,
) -> None:
    out = run_cli(
        "perf",
        "--endpoint-url",
        python_engine.endpoint_url,
        "--stream",
        f"nope-{uuid.uuid4().hex}",
        "--processes",
        "2",
    )
    assert out.returncode == 1
    (line,) = out.stderr.strip().splitlines()
    assert line.startswith("kinesis-trio: error: stream ") and "--shards" in line


def _start(*args: str) -> tuple[subprocess.Popen[str], queue.Queue[str | None]]:
    proc = subprocess.Popen(
        cli_command(*args),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=cli_env(),
        preexec_fn=default_sigint,  # as from a terminal (see test_cli)
    )
    assert proc.stderr is not None
    return proc, output_lines(proc.stderr)


def _finish(proc: subprocess.Popen[str], stderr: queue.Queue[str | None]) -> tuple[str, list[str]]:
    """Wait for the command; its stdout and the rest of its stderr."""
    assert proc.stdout is not None
    stdout = proc.stdout.read()
    proc.wait(timeout=60)
    rest = []
    while (line := stderr.get(timeout=10)) is not None:
        rest.append(line)
    return stdout, rest


def _wait_for_children(pid: int, n: int, timeout: float = 60) -> list[int]:
    children: list[int] = []

    def started() -> bool:
        children[:] = children_of(pid)
        return len(children) == n

    wait_until(started, timeout=timeout, interval=0.05, what=f"{n} children to start")
    return children


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_perf_processes_stop_cleanly_when_the_parent_is_interrupted(
    python_engine: EmulatorEndpoint, signum: signal.Signals
) -> None:
    proc, stderr = _start(
        "perf",
        "--endpoint-url",
        python_engine.endpoint_url,
        "--shards",
        "2",
        "-r",
        "2000",
        "--duration",
        "120",
        "--processes",
        "2",
        "--progress-interval",
        "0.2",
    )
    try:
        children = _wait_for_children(proc.pid, 2)
        wait_for_line(stderr, r"perf: [1-9][\d,]* done", 60)  # the load is under way
        proc.send_signal(signum)
        stdout, rest = _finish(proc, stderr)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, (stdout, rest)
    assert "Traceback" not in "".join(rest)
    rows = summary(stdout)
    assert rows["failed"] == "0"  # the children waited for their records in flight
    assert count(rows["records"]) > 0
    assert "(interrupted)" in stdout
    assert [row[-1] for row in process_rows(stdout)] == ["130 (interrupted)"] * 2
    assert not any(alive(pid) for pid in children)


def test_perf_processes_report_a_killed_child(python_engine: EmulatorEndpoint) -> None:
    proc, stderr = _start(
        "perf",
        "--endpoint-url",
        python_engine.endpoint_url,
        "--shards",
        "2",
        "-r",
        "2000",
        "--duration",
        "3",
        "--processes",
        "2",
        "--progress-interval",
        "0.2",
    )
    try:
        victim = _wait_for_children(proc.pid, 2)[0]
        wait_for_line(stderr, r"perf: [1-9][\d,]* done", 60)
        os.kill(victim, signal.SIGKILL)
        stdout, rest = _finish(proc, stderr)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 1
    rows = summary(stdout)
    assert rows["processes"] == "2 (1 without a result)"
    table = {row[1]: row for row in process_rows(stdout)}
    killed = table.pop(str(victim))
    (survivor,) = table.values()
    assert killed[-1] == "killed by SIGKILL (crashed)"
    assert survivor[-1] == "0 (ok)"
    assert rows["records"] == survivor[3]
    assert any(
        f"process {killed[0]} (pid {victim}) was killed by SIGKILL without a result" in line
        for line in rest
    ), rest
