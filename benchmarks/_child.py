"""The parent side of a child process: start a benchmark child and read its output.

Holds :func:`run_child` (``python -m benchmarks.<module> --json ARGS`` with a timeout, its one
JSON result line parsed into a :class:`ChildResult`, with the emulator's CPU time over the run)
and the readings of another process from ``/proc`` (:func:`proc_cpu_seconds`,
:func:`proc_rss_mib`: the emulator's, an engine's). Used by ``_runs``, ``ordering`` and the
commands that measure an emulator or engine process (``_engines``, ``_soak``, ``processes``).
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks._command import ROOT


def proc_cpu_seconds(pid: int | None) -> float:
    """utime + stime of a process from ``/proc/<pid>/stat`` (nan if unreadable)."""
    if pid is None:
        return math.nan
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return math.nan
    # the command name (field 2) may hold spaces: split after its closing parenthesis
    fields = text[text.rindex(")") + 2 :].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks  # fields 14 and 15 of stat(5)


def proc_rss_mib(pid: int | None) -> float:
    """Current RSS of a process (VmRSS) in MiB (nan if unreadable)."""
    if pid is None:
        return math.nan
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    except OSError:
        pass
    return math.nan


@dataclass
class ChildResult:
    ok: bool
    data: dict[str, Any]
    error: str = ""
    wall_s: float = 0.0
    emulator_cpu_s: float = math.nan


def run_child(
    module: str,
    args: Sequence[str],
    *,
    timeout: float,
    emulator_pid: int | None = None,
) -> ChildResult:
    """Run ``python -m benchmarks.<module> --json ARGS`` and parse its JSON result line.

    Returns ``ok=False`` with the reason (exit code, stderr tail, timeout) instead of
    raising, so that one failing variant does not stop a benchmark.
    """
    cmd = [sys.executable, "-m", f"benchmarks.{module}", "--json", *args]
    emu0 = proc_cpu_seconds(emulator_pid)
    t0 = time.perf_counter()
    try:
        proc = subprocess.run(
            cmd,
            cwd=ROOT,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        tail = (exc.stderr or b"")[-2000:]
        text = tail.decode(errors="replace") if isinstance(tail, bytes) else str(tail)
        return ChildResult(
            False,
            {},
            f"timed out after {timeout:.0f}s: {text.strip()}",
            time.perf_counter() - t0,
            proc_cpu_seconds(emulator_pid) - emu0,
        )
    wall = time.perf_counter() - t0
    emu = proc_cpu_seconds(emulator_pid) - emu0
    line = next(
        (ln for ln in reversed(proc.stdout.splitlines()) if ln.startswith("{")),
        None,
    )
    if proc.returncode != 0 or line is None:
        err = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-15:])
        return ChildResult(False, {}, f"exit code {proc.returncode}: {err}", wall, emu)
    data: dict[str, Any] = json.loads(line)
    data["child_wall_s"] = round(wall, 3)
    data["loadavg_1m_after"] = round(os.getloadavg()[0], 2)
    data["emulator_cpu_s"] = round(emu, 3)
    if data.get("records"):
        data["emulator_cpu_us_per_record"] = round(emu / data["records"] * 1e6, 3)
    return ChildResult(True, data, "", wall, emu)
