"""The real KPL (1.1.1, Java + its native daemon) as a benchmark contender.

Holds :func:`build` (``mvn -q -o package`` of ``benchmarks/runners/kpl``, the reason when
``java``/``mvn`` are missing or the build fails) and :func:`run` (one run of its
``bench.KplRunner`` on a fresh stream, its JSON result line read like the Python runners',
with the emulator's CPU over the run). Used by ``benchmarks kpl``.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks._child import ChildResult, proc_cpu_seconds
from benchmarks._emulator import ACCESS_KEY, REGION, SECRET_KEY, create_stream, delete_stream
from benchmarks._runner import latency_fields

RUNNER_DIR = Path(__file__).resolve().parent / "runners" / "kpl"
#: the KPL version the runner's pom.xml pins (reported)
KPL_VERSION = "1.1.1"


def build() -> tuple[str, str]:
    """Build the runner; ``(classpath, "")``, or ``("", why not)``.

    Offline first (the dependencies already in ``~/.m2``), then once with the network.
    """
    missing = [tool for tool in ("java", "mvn") if shutil.which(tool) is None]
    if missing:
        return "", f"{' and '.join(missing)} not found on the PATH"
    error = ""
    for offline in (["-o"], []):
        proc = subprocess.run(
            ["mvn", "-q", *offline, "package"],
            cwd=RUNNER_DIR,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
        )
        if proc.returncode == 0:
            target = RUNNER_DIR / "target"
            return f"{target / 'kpl-runner.jar'}{os.pathsep}{target / 'lib' / '*'}", ""
        error = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-8:])
    return "", f"the KPL runner did not build (mvn package): {error}"


def java_version() -> str:
    """``java -version``'s first line (it prints to stderr)."""
    proc = subprocess.run(
        ["java", "-version"], capture_output=True, text=True, timeout=60, check=False
    )
    lines = (proc.stderr or proc.stdout).strip().splitlines()
    return lines[0] if lines else ""


def run(
    classpath: str,
    emulator: Any,
    *,
    shards: int,
    load: Sequence[str],
    size: int,
    keys: int,
    linger: float,
    variant: str,
    timeout: float,
) -> ChildResult:
    """One KPL run on a fresh ``shards``-shard stream (deleted after it).

    ``load``: ``--count N`` (a burst) or ``--rate R --duration S``. A paced run's latencies
    come back as the Python runners' latency fields (:func:`latency_fields`).
    """
    stream = create_stream(emulator.endpoint_url, shards, prefix="kpl")
    cmd = [
        "java",
        "-cp",
        classpath,
        "bench.KplRunner",
        "--host", emulator.host,
        "--port", str(emulator.port),
        "--stream", stream,
        "--shards", str(shards),
        "--size", str(size),
        "--keys", str(keys),
        "--linger-ms", str(round(linger * 1000)),
        "--clk-tck", str(os.sysconf("SC_CLK_TCK")),
        "--variant", variant,
        *load,
    ]  # fmt: skip
    # the KPL's credentials come from the environment (EnvironmentVariableCredentialsProvider)
    env = dict(os.environ, AWS_ACCESS_KEY_ID=ACCESS_KEY, AWS_SECRET_ACCESS_KEY=SECRET_KEY)
    env["AWS_REGION"] = REGION
    emu0 = proc_cpu_seconds(emulator.pid)
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(
            cmd,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired:
        delete_stream(emulator.endpoint_url, stream)
        return ChildResult(False, {}, f"timed out after {timeout:.0f}s")
    wall = time.perf_counter() - t0
    emu = proc_cpu_seconds(emulator.pid) - emu0
    delete_stream(emulator.endpoint_url, stream)
    line = next((ln for ln in reversed(proc.stdout.splitlines()) if ln.startswith("{")), None)
    if proc.returncode != 0 or line is None:
        err = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-15:])
        return ChildResult(False, {}, f"exit code {proc.returncode}: {err}", wall, emu)
    data: dict[str, Any] = json.loads(line)
    latencies_ms = data.pop("latencies_ms", None)
    if latencies_ms is not None:
        data.update(latency_fields([x / 1000.0 for x in latencies_ms]))
    data["child_wall_s"] = round(wall, 3)
    data["emulator_cpu_s"] = round(emu, 3)
    records = data.get("records") or 0
    data["emulator_cpu_us_per_record"] = round(emu / records * 1e6, 3) if records else math.nan
    return ChildResult(True, data, "", wall, emu)
