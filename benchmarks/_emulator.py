"""The emulator the benchmarks write to: its credentials, kinesalite and its streams.

Holds the SigV4 credentials and region the emulator accepts, the "lifted" per-shard rate
limits (the emulators enforce none), :func:`start_emulator` (kinesalite on a free port, over
HTTPS with ``tls=True``: :class:`TlsKinesalite`) and :func:`create_stream` /
:func:`delete_stream` (a fresh stream per run). Used by the runners
(``benchmarks/runners``: the credentials and limits, in the child process) and by the commands
that set up their own streams (``ab``, ``admission``, ``ordering``, ``overload``, ``aws_lambda``,
``processes``, ``_engines``, ``_steady_rates``) or go through ``_runs``.
"""

from __future__ import annotations

import contextlib
import http.client
import os
import signal
import socket
import ssl
import subprocess
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

#: Credentials for the emulator (any SigV4-shaped credentials pass).
ACCESS_KEY = "AKIDBENCH"
SECRET_KEY = "bench-secret"
REGION = "us-east-1"

#: "lifted" per-shard rate limits: the emulators enforce none, and the benchmarks measure the
#: producers, not their limiters. 10^9 records/s and bytes/s per shard are never reached.
LIFTED_RECORDS_PER_SHARD = 1e9
LIFTED_BYTES_PER_SHARD = 1e12


def start_emulator(shard_limit: int = 1000, *, tls: bool = False) -> Any:
    """Start kinesalite (``LocalKinesis``) on a free port; the caller stops it.

    ``tls``: kinesalite with its ``--ssl`` option (its own self-signed certificate), for
    clients that speak only HTTPS (the KPL); ``endpoint_url`` is then ``https://...``.
    """
    if tls:
        tls_emulator = TlsKinesalite(shard_limit)
        tls_emulator.start()
        return tls_emulator
    from kinesis_trio.testing._emulators import LocalKinesis

    emulator = LocalKinesis("kinesalite", shard_limit=shard_limit)
    emulator.start()
    return emulator


class TlsKinesalite:
    """kinesalite over HTTPS (``--ssl``): ``endpoint_url``, ``host``, ``port``, ``pid``,
    ``start()`` and ``stop()`` as ``LocalKinesis`` has them (which starts kinesalite only
    over plain HTTP)."""

    host = "127.0.0.1"

    def __init__(self, shard_limit: int = 1000) -> None:
        self.shard_limit = shard_limit
        self.port = 0
        self._proc: subprocess.Popen[bytes] | None = None
        self._log: Path | None = None

    @property
    def endpoint_url(self) -> str:
        return f"https://{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    def start(self, timeout: float = 60.0) -> None:
        """Install kinesalite if needed, start it on a free port, wait until it answers."""
        import shutil

        from kinesis_trio.testing._emulators import ensure_installed

        node = shutil.which("node")
        if node is None:
            raise RuntimeError("kinesalite needs node, and node is not on the PATH")
        pkg = ensure_installed("kinesalite")
        with socket.socket() as probe:
            probe.bind((self.host, 0))
            self.port = probe.getsockname()[1]
        fd, log = tempfile.mkstemp(prefix="kinesalite-tls-", suffix=".log")
        self._log = Path(log)
        cmd = [
            node, str(pkg / "cli.js"), "--ssl",
            "--port", str(self.port),
            "--createStreamMs", "0",
            "--deleteStreamMs", "0",
            "--updateStreamMs", "0",
            "--shardLimit", str(self.shard_limit),
        ]  # fmt: skip
        with os.fdopen(fd, "wb") as out:
            self._proc = subprocess.Popen(
                cmd,
                cwd=pkg,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + timeout
        while not self._answers():
            if self._proc.poll() is not None or time.monotonic() > deadline:
                tail = self._log.read_text(errors="replace")[-2000:]
                self.stop()
                raise RuntimeError(f"kinesalite --ssl did not start on {self.port}: {tail}")
            time.sleep(0.05)

    def _answers(self) -> bool:
        """Any HTTPS answer to a POST (kinesalite's own certificate is not checked)."""
        context = ssl._create_unverified_context()
        conn = http.client.HTTPSConnection(self.host, self.port, timeout=1.0, context=context)
        try:
            conn.request("POST", "/", body=b"{}")
            conn.getresponse().read()
            return True
        except OSError:
            return False
        finally:
            conn.close()

    def stop(self) -> None:
        """SIGTERM its process group, SIGKILL after 5 s; remove the log."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        if self._log is not None:
            self._log.unlink(missing_ok=True)


def verify_for(endpoint: str) -> bool:
    """Whether a client of ``endpoint`` checks its certificate: not for the emulators'
    own self-signed ones (every ``https`` endpoint the benchmarks start)."""
    return not endpoint.startswith("https://")


def create_stream(endpoint: str, shards: int, prefix: str = "bench") -> str:
    """Create a fresh stream with ``shards`` shards and wait until it is ACTIVE."""
    import anyio

    from kinesis_trio import KinesisClient, StaticCredentials

    name = f"{prefix}-{uuid.uuid4().hex[:10]}"

    async def go() -> None:
        async with KinesisClient(
            region_name=REGION,
            endpoint_url=endpoint,
            credentials=StaticCredentials(ACCESS_KEY, SECRET_KEY),
            verify=verify_for(endpoint),
        ) as client:
            await client.create_stream(name, shards)
            await client.wait_for_stream(name)

    anyio.run(go)
    return name


def delete_stream(endpoint: str, name: str) -> None:
    """Delete a stream (frees the emulator's memory between runs); errors are ignored."""
    import anyio

    from kinesis_trio import KinesisClient, StaticCredentials

    async def go() -> None:
        async with KinesisClient(
            region_name=REGION,
            endpoint_url=endpoint,
            credentials=StaticCredentials(ACCESS_KEY, SECRET_KEY),
            verify=verify_for(endpoint),
        ) as client:
            await client.delete_stream(name)

    with contextlib.suppress(Exception):
        anyio.run(go)
