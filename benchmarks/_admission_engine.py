"""The endpoint of ``admission``: the Python engine, paced, throttled or behind a slow link.

Holds the :class:`EngineSpec` of a run's engine (a fresh ``FakeKinesis`` served over HTTP:
one worker at a fixed pace, AWS's per-shard limits, or the ``_shaper`` proxy in front),
:func:`serve_engine` (in the caller's event loop), and :class:`EngineProcess` with the
``--engine`` child's loop (:func:`_engine_child`: an engine in a process of its own,
``python -m benchmarks.admission --engine SPEC``). Used by ``_admission_runs`` (the cases and
their runs), by ``admission`` (its ``--engine`` option) and by the benchmark's tests.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import subprocess
import sys
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import anyio

from ._command import ROOT

STREAM = "admission"
SHARDS = 4


@dataclass
class EngineSpec:
    """A Python engine for one run: a fresh ``FakeKinesis`` served over HTTP."""

    shards: int = SHARDS
    #: serve every request at this many request bytes/s, one at a time (None: at once)
    pace: float | None = None
    #: AWS's per-shard write limits (1,000 records/s, 1 MiB/s)
    limits: bool = False
    #: a shaping proxy in front, its upload paced to this many bytes/s (None: no proxy)
    link: float | None = None


@dataclass
class Served:
    """A running engine: where to send, and its figures at the end."""

    endpoint_url: str
    stats: Callable[[], dict[str, Any]]


@contextlib.asynccontextmanager
async def serve_engine(spec: EngineSpec) -> AsyncIterator[Served]:
    """Serve ``spec``'s engine (and its proxy) in the caller's event loop."""
    from kinesis_trio.testing import FakeKinesis, ServerModel, serve

    from ._shaper import shaping_proxy

    server = None
    if spec.pace is not None:
        server = ServerModel(workers=1, per_request=0.0, per_byte=1.0 / spec.pace)
    fake = FakeKinesis(enforce_limits=spec.limits, server=server, request_log=0)
    fake.create_stream(STREAM, shard_count=spec.shards)

    def stats() -> dict[str, Any]:
        s = fake.stats
        out: dict[str, Any] = {
            "requests": s.requests,
            "entries_stored": s.entries_ok,
            "entries_throttled": s.entries_throttled,
        }
        if server is not None:
            out["served"] = server.served
            out["abandoned"] = server.abandoned
        return out

    async with serve(fake) as local:
        if spec.link is None:
            yield Served(local.endpoint_url, stats)
            return
        host, port = local.endpoint_url.rsplit("/", 1)[-1].rsplit(":", 1)
        async with shaping_proxy(host, int(port), spec.link) as proxy:

            def with_link() -> dict[str, Any]:
                return {**stats(), **proxy.stats()}

            yield Served(proxy.endpoint_url, with_link)


async def _engine_child(spec: EngineSpec) -> None:
    """``--engine SPEC``: serve, print ``{"endpoint": ...}``, and at EOF on stdin the
    figures (``{"stats": ...}``), then exit."""
    async with serve_engine(spec) as served:
        print(json.dumps({"endpoint": served.endpoint_url}), flush=True)
        await anyio.to_thread.run_sync(sys.stdin.read)
        print(json.dumps({"stats": served.stats()}), flush=True)


class EngineProcess:
    """A Python engine in a process of its own (``python -m benchmarks.admission --engine``)."""

    def __init__(self, spec: EngineSpec) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "benchmarks.admission", "--engine", json.dumps(asdict(spec))],
            cwd=ROOT,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            self.proc.kill()
            raise RuntimeError("the engine process exited before serving")
        self.endpoint_url: str = json.loads(line)["endpoint"]

    def stop(self) -> dict[str, Any]:
        """Stop it; its figures."""
        try:
            out, _ = self.proc.communicate("", timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            return {}
        for line in reversed(out.splitlines()):
            if line.startswith("{"):
                stats: dict[str, Any] = json.loads(line).get("stats", {})
                return stats
        return {}


def asdict(spec: EngineSpec) -> dict[str, Any]:
    return dataclasses.asdict(spec)
