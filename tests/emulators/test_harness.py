"""The local Kinesis emulator harness (kinesis_trio.testing._emulators) and its pytest fixtures."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
import time
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from kinesis_trio.testing import _emulators as _emulator
from kinesis_trio.testing._emulators import (
    EMULATORS,
    LocalKinesis,
    cache_dir,
    ensure_installed,
    node_available,
)
from tests.support.emulators import EmulatorEndpoint
from tests.support.helpers import wait_until

pytestmark = pytest.mark.subprocess

KINDS = ["kinesalite", "kinesis-local"]
needs_node = pytest.mark.skipif(
    not node_available(), reason="the npm emulators need Node.js 18+ (node and npm on PATH)"
)

_HEADERS = {
    "Content-Type": "application/x-amz-json-1.1",
    "Authorization": (
        "AWS4-HMAC-SHA256 Credential=test/20200101/us-east-1/kinesis/aws4_request, "
        "SignedHeaders=host, Signature=00"
    ),
}


def _call(
    client: httpx.Client, url: str, op: str, body: dict[str, Any], *, auth: bool = True
) -> httpx.Response:
    headers = {
        **_HEADERS,
        "X-Amz-Target": f"Kinesis_20131202.{op}",
        "X-Amz-Date": time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()),
    }
    if not auth:
        del headers["Authorization"]
    return client.post(url + "/", headers=headers, content=json.dumps(body))


def _stream_name() -> str:
    return f"test-emulator-{uuid.uuid4().hex[:12]}"


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def _port_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


# -- against the session emulators ------------------------------------------------------


def test_create_stream_then_list_shards(emulator: EmulatorEndpoint) -> None:
    name = _stream_name()
    with httpx.Client(timeout=10) as client:
        r = _call(
            client, emulator.endpoint_url, "CreateStream", {"StreamName": name, "ShardCount": 2}
        )
        assert r.status_code == 200, r.text

        summary: dict[str, Any] = {}

        def active() -> bool:
            r = _call(client, emulator.endpoint_url, "DescribeStreamSummary", {"StreamName": name})
            assert r.status_code == 200, r.text
            summary.update(r.json()["StreamDescriptionSummary"])
            return bool(summary["StreamStatus"] == "ACTIVE")

        wait_until(active, timeout=30, interval=0.05, what=f"the stream {name} ACTIVE")
        assert summary["OpenShardCount"] == 2

        r = _call(client, emulator.endpoint_url, "ListShards", {"StreamName": name})
        assert r.status_code == 200, r.text
        assert len(r.json()["Shards"]) == 2


def test_requests_without_authorization_are_rejected(emulator: EmulatorEndpoint) -> None:
    with httpx.Client(timeout=10) as client:
        r = _call(client, emulator.endpoint_url, "ListStreams", {}, auth=False)
    assert r.status_code == 400
    assert r.json()["__type"].endswith("MissingAuthenticationTokenException")


def test_fixtures_mark_integration(request: pytest.FixtureRequest, local_engine: Any) -> None:
    assert request.node.get_closest_marker("integration") is not None


# -- lifecycle of emulators started here ------------------------------------------------


@pytest.mark.integration
@pytest.mark.parametrize("kind", [*KINDS, "python"])
def test_stop_ends_process_and_frees_port(kind: _emulator.EmulatorKind) -> None:
    if kind != "python" and not node_available():
        pytest.skip("the npm emulators need Node.js 18+ (node and npm on PATH)")
    emu = LocalKinesis(kind)
    emu.start()
    pid, port, log = emu.pid, emu.port, emu.log_path
    assert pid is not None and log is not None and log.exists()
    assert emu.endpoint_url == f"http://127.0.0.1:{port}"
    assert emu in _emulator._RUNNING
    assert not _port_free(port)

    emu.stop()
    assert emu.pid is None
    assert not _pid_alive(pid)
    assert _port_free(port)
    assert not log.exists()  # the temporary log is removed
    assert emu not in _emulator._RUNNING
    emu.stop()  # idempotent


@pytest.mark.integration
@needs_node
def test_kinesis_local_initialize_streams(tmp_path: Path) -> None:
    name = _stream_name()
    log = tmp_path / "kl.log"
    with (
        LocalKinesis("kinesis-local", initialize_streams=f"{name}:3", log_file=log) as emu,
        httpx.Client(timeout=10) as client,
    ):

        def listed() -> bool:
            return name in _call(client, emu.endpoint_url, "ListStreams", {}).json()["StreamNames"]

        wait_until(
            listed,
            timeout=30,
            interval=0.05,
            what=f"the stream {name} listed",
        )
        r = _call(client, emu.endpoint_url, "ListShards", {"StreamName": name})
        assert len(r.json()["Shards"]) == 3
    assert log.exists()  # a caller's log file is kept


@pytest.mark.integration
@needs_node
def test_startup_failure_reports_emulator_output() -> None:
    # kinesis-local needs a unit on durations: a bare "0" makes it exit at once.
    emu = LocalKinesis(
        "kinesis-local", extra_env={"CREATE_STREAM_DURATION": "0"}, startup_timeout=30
    )
    with pytest.raises(RuntimeError, match="exited during startup") as info:
        emu.start()
    assert "CREATE_STREAM_DURATION" in str(info.value)
    assert emu.pid is None


@pytest.mark.integration
@pytest.mark.parametrize(
    ("kind", "message"), [("kinesalite", "EADDRINUSE"), ("python", "Address already in use")]
)
def test_port_in_use_is_reported(kind: _emulator.EmulatorKind, message: str) -> None:
    if kind != "python" and not node_available():
        pytest.skip("the npm emulators need Node.js 18+ (node and npm on PATH)")
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        emu = LocalKinesis(kind, port=port, startup_timeout=30)
        with pytest.raises(RuntimeError, match=message):
            emu.start()
        assert emu.pid is None


def test_invalid_arguments() -> None:
    with pytest.raises(ValueError, match="unknown emulator"):
        LocalKinesis("localstack")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="kinesis-local"):
        LocalKinesis("kinesalite", initialize_streams="a:1")
    with pytest.raises(RuntimeError, match="not started"):
        _ = LocalKinesis("kinesalite").endpoint_url
    with pytest.raises(ValueError, match="unknown emulator"):
        ensure_installed("localstack")


# -- installation ---------------------------------------------------------------------------


def test_cache_dir(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("KINESIS_TRIO_CACHE", str(tmp_path / "explicit"))
    assert cache_dir() == tmp_path / "explicit"
    monkeypatch.delenv("KINESIS_TRIO_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert cache_dir() == tmp_path / "xdg" / "kinesis-trio"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert cache_dir() == tmp_path / "home" / ".cache" / "kinesis-trio"


@needs_node
@pytest.mark.parametrize("kind", KINDS)
def test_ensure_installed_is_idempotent(kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    first = ensure_installed(kind)  # installs on a cold cache
    assert first.name == kind
    assert json.loads((first / "package.json").read_text())["version"] == EMULATORS[kind]

    def no_npm(*args: object, **kwargs: object) -> None:
        raise AssertionError("npm must not run when the package is installed")

    monkeypatch.setattr(subprocess, "run", no_npm)  # what _emulator calls npm with
    assert ensure_installed(kind) == first


_FAKE_NPM = """\
#!{python}
import json, os, pathlib, sys, time
log = pathlib.Path(os.environ["FAKE_NPM_LOG"])
with log.open("a") as f:
    f.write(" ".join(sys.argv[1:]) + "\\n")
if os.environ.get("FAKE_NPM_FAIL"):
    sys.stderr.write("npm ERR! code E404\\nnpm ERR! boom: no such package\\n")
    sys.exit(1)
time.sleep(1.0)  # long enough for a second installer to queue on the lock
args = sys.argv[1:]
prefix = pathlib.Path(args[args.index("--prefix") + 1])
name, version = args[-1].rsplit("@", 1)
pkg = prefix / "node_modules" / name
pkg.mkdir(parents=True)
(pkg / "package.json").write_text(json.dumps({{"name": name, "version": version}}))
"""


@pytest.fixture
def fake_npm(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Put a fake `npm` (and a `node` that is never run) first on PATH, and an empty cache;
    return npm's call log."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    npm = bin_dir / "npm"
    npm.write_text(_FAKE_NPM.format(python=sys.executable))
    npm.chmod(0o755)
    node = bin_dir / "node"
    node.write_text("#!/bin/sh\nexit 1\n")
    node.chmod(0o755)
    log = tmp_path / "npm-calls.log"
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    monkeypatch.setenv("FAKE_NPM_LOG", str(log))
    monkeypatch.setenv("KINESIS_TRIO_CACHE", str(tmp_path / "cache"))
    return log


def test_concurrent_installs_run_npm_once(fake_npm: Path, tmp_path: Path) -> None:
    # Load the module by path: importing the whole package would only slow the children.
    code = textwrap.dedent(
        """
        import importlib.util, sys
        spec = importlib.util.spec_from_file_location("emu", sys.argv[1])
        emu = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(emu)
        print(emu.ensure_installed("kinesalite"))
        """
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, _emulator.__file__], stdout=subprocess.PIPE, text=True
        )
        for _ in range(3)
    ]
    outputs = [p.communicate(timeout=60)[0].strip() for p in procs]
    assert all(p.returncode == 0 for p in procs)
    expected = tmp_path / "cache" / "npm" / "kinesalite-3.3.3" / "node_modules" / "kinesalite"
    assert outputs == [str(expected)] * 3
    calls = fake_npm.read_text().splitlines()
    assert len(calls) == 1
    assert calls[0].startswith("install --no-audit --no-fund --prefix ")
    assert calls[0].endswith(" kinesalite@3.3.3")
    # no scratch folders left behind
    assert sorted(p.name for p in (tmp_path / "cache" / "npm").iterdir()) == [
        "kinesalite-3.3.3",
        "kinesalite-3.3.3.lock",
    ]


def test_failed_install_reports_npm_stderr(fake_npm: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_NPM_FAIL", "1")
    with pytest.raises(RuntimeError, match=r"(?s)kinesis-local@0\.6\.2.*boom: no such package"):
        ensure_installed("kinesis-local")
    assert not (cache_dir() / "npm" / "kinesis-local-0.6.2").exists()


def test_missing_npm_is_named(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KINESIS_TRIO_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(RuntimeError, match="`npm` was not found on PATH"):
        ensure_installed("kinesalite")
