"""A real Lambda runtime for tests: ``awslambdaric`` under the Runtime Interface Emulator.

The emulator (Go module ``github.com/aws/aws-lambda-runtime-interface-emulator``) is built
on first use with the Go toolchain into the cache folder (``KINESIS_TRIO_CACHE``, else
``~/.cache/kinesis-trio``), as the npm emulators are installed; without Go the tests that
need it are skipped, saying so. :class:`Runtime` starts it with a handler of
``tests/aws_lambda/function.py`` and invokes it over its HTTP API.

Managed Instances: awslambdaric with ``AWS_LAMBDA_MAX_CONCURRENCY`` forks that many worker
processes, each polling the runtime API (``lambda_multi_concurrent_utils.py``); here that
variable is given to the runtime only, under the emulator's classic path, which serves one
invocation at a time. The emulator's own Managed Instances path (the variable in its own
environment) runs the runtime as uid 993 (``supervisor/local/process.go``: ``Uid:
uint32(993)``) from ``/var/task`` or ``/opt`` only, where this machine's interpreter and
checkout are out of reach.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Mapping
from pathlib import Path
from typing import Any

#: the emulator's version: the Go module proxy's newest for it
VERSION = "v0.0.0-20261030222936-bef5c4ba774d"
MODULE = "github.com/aws/aws-lambda-runtime-interface-emulator"
HERE = Path(__file__).resolve().parent


def _cache() -> Path:
    root = os.environ.get("KINESIS_TRIO_CACHE")
    return Path(root) if root else Path.home() / ".cache" / "kinesis-trio"


def ensure_rie() -> tuple[Path | None, str]:
    """The emulator's binary (built now if missing), or None and the reason why not."""
    target = _cache() / "rie" / VERSION / "aws-lambda-rie"
    if target.exists():
        return target, ""
    go = shutil.which("go") or (
        "/usr/local/go/bin/go" if Path("/usr/local/go/bin/go").exists() else None
    )
    if go is None:
        return None, "Go is not installed: the Lambda Runtime Interface Emulator cannot be built"
    target.parent.mkdir(parents=True, exist_ok=True)
    env = dict(os.environ, GOBIN=str(target.parent), GOFLAGS="-mod=mod")
    out = subprocess.run(
        [go, "install", f"{MODULE}/cmd/aws-lambda-rie@{VERSION}"],
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
        check=False,
    )
    if out.returncode != 0 or not target.exists():
        return None, f"building the emulator failed: {out.stderr[-500:]}"
    return target, ""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _children(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            if int(fields[1]) == pid:
                found.append(int(entry.name))
    return found


def descendants(pid: int) -> list[int]:
    """Every process under ``pid``."""
    out, todo = [], [pid]
    while todo:
        for child in _children(todo.pop()):
            out.append(child)
            todo.append(child)
    return out


class Runtime:
    """The emulator running ``handler`` (``function.handler`` unless named) with ``env``
    (a context manager)."""

    def __init__(
        self,
        rie: Path,
        env: Mapping[str, str],
        *,
        concurrency: int | None = None,
        handler: str = "function.handler",
    ) -> None:
        self.rie = rie
        self.handler = handler
        self.env = dict(env)
        self.concurrency = concurrency
        self.port = _free_port()
        self._proc: subprocess.Popen[bytes] | None = None
        self._log = tempfile.NamedTemporaryFile(  # noqa: SIM115 -- closed in __exit__
            prefix="rie-", suffix=".log", delete=False
        )

    def __enter__(self) -> Runtime:
        env = dict(
            os.environ,
            PYTHONPATH=os.pathsep.join([str(HERE), *sys.path]),
            AWS_LAMBDA_FUNCTION_TIMEOUT="30",
            **self.env,
        )
        command = [sys.executable, "-m", "awslambdaric", self.handler]
        rie = [
            str(self.rie),
            "--runtime-interface-emulator-address",
            f"127.0.0.1:{self.port}",
            "--runtime-api-address",
            f"127.0.0.1:{_free_port()}",
        ]
        if self.concurrency is not None:
            # awslambdaric's Managed Instances mode: it forks this many worker processes
            command = ["env", f"AWS_LAMBDA_MAX_CONCURRENCY={self.concurrency}", *command]
        argv = [*rie, *command]
        self._proc = subprocess.Popen(
            argv, env=env, cwd=HERE, stdout=self._log, stderr=subprocess.STDOUT
        )
        self._wait_listening()
        return self

    def _wait_listening(self) -> None:
        end = time.monotonic() + 30
        while time.monotonic() < end:
            assert self._proc is not None and self._proc.poll() is None, self.output()
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2),
            ):
                return
            time.sleep(0.05)
        raise TimeoutError(f"the emulator did not listen: {self.output()}")

    def invoke(self, event: Any, timeout: float = 60) -> Any:
        """Invoke the function; its answer (or its error, as the emulator returns it)."""
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.port}/2015-03-31/functions/function/invocations",
            data=json.dumps(event).encode(),
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            return json.loads(answer.read() or b"null")

    def runtimes(self) -> list[int]:
        """The runtime's Python processes (the workers under Managed Instances)."""
        assert self._proc is not None
        found = []
        for pid in descendants(self._proc.pid):
            with contextlib.suppress(OSError):
                if b"awslambdaric" in Path(f"/proc/{pid}/cmdline").read_bytes():
                    found.append(pid)
        return found

    def signal(self, sig: signal.Signals) -> list[int]:
        pids = self.runtimes()
        for pid in pids:
            os.kill(pid, sig)
        return pids

    def output(self) -> str:
        return Path(self._log.name).read_text(errors="replace")[-4000:]

    def __exit__(self, *exc: object) -> None:
        proc = self._proc
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                for pid in self.runtimes():
                    os.kill(pid, signal.SIGCONT)
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        self._log.close()
        os.unlink(self._log.name)
