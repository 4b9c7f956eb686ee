"""The report of a command: the machine it ran on, its markdown tables, its published results.

Holds :func:`machine_info` / :func:`machine_line` (cores, memory, CPU, versions, commit),
:func:`markdown_table`, the first lines of a results page (:func:`report_header`),
:func:`publish` / :func:`write_results` to ``benchmarks/results/<name>.{md,json}`` and the
index of the written files (:func:`record_index`, ``results/index.{json,md}``). Used by
every command that writes or prints results, by ``_plots`` and ``_large`` (the index), and
by ``__main__`` (``RESULTS_DIR``).
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.metadata
import json
import os
import platform
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from benchmarks._command import ROOT, command_line, log

RESULTS_DIR = Path(__file__).resolve().parent / "results"


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def _git(*args: str) -> str:
    try:
        return subprocess.run(
            ["git", *args], cwd=ROOT, capture_output=True, text=True, timeout=10, check=False
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def machine_info() -> dict[str, Any]:
    """Cores, memory, CPU model, kernel, Python, package versions and the git commit."""
    mem_kib = 0
    with contextlib.suppress(OSError):
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                mem_kib = int(line.split()[1])
    model = ""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    node = ""
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        node = subprocess.run(
            ["node", "--version"], capture_output=True, text=True, timeout=10, check=False
        ).stdout.strip()
    from kinesis_trio.testing._emulators import EMULATORS

    commit = _git("rev-parse", "--short", "HEAD")
    diff = _git("diff", "HEAD", "--", "kinesis_trio")
    dirty = bool(diff)
    diff_id = hashlib.sha1(diff.encode()).hexdigest()[:10] if dirty else ""
    changed = _git("diff", "HEAD", "--stat", "--", "kinesis_trio").splitlines()[:-1]
    return {
        "cores": os.cpu_count(),
        "cpu_model": model,
        "memory_gib": round(mem_kib / 1024 / 1024, 1),
        "kernel": f"{platform.system()} {platform.release()}",
        "python": platform.python_version(),
        "node": node,
        "kinesalite": EMULATORS["kinesalite"],
        "packages": {
            name: _version(name)
            for name in (
                "kinesis-trio",
                "aiokpl",
                "aiobotocore",
                "boto3",
                "botocore",
                "aws-kinesis-agg",
                "anyio",
                "trio",
                "httpx",
            )
        },
        "git_commit": commit
        + (f" + uncommitted changes in kinesis_trio/ (diff sha1 {diff_id})" if dirty else ""),
        "uncommitted_kinesis_trio_files": [line.split("|")[0].strip() for line in changed],
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
        "loadavg_at_start": [round(x, 2) for x in os.getloadavg()],
    }


def machine_line(info: dict[str, Any]) -> str:
    pk = info["packages"]
    return (
        f"{info['cores']} cores ({info['cpu_model']}), {info['memory_gib']} GiB, "
        f"{info['kernel']}, Python {info['python']}, node {info['node']}, "
        f"kinesalite {info['kinesalite']}; kinesis-trio {pk['kinesis-trio']} at "
        f"{info['git_commit']}, aiokpl {pk['aiokpl']} (aiobotocore {pk['aiobotocore']}), "
        f"boto3 {pk['boto3']}, aws-kinesis-agg {pk['aws-kinesis-agg']}, anyio {pk['anyio']}, "
        f"trio {pk['trio']}, httpx {pk['httpx']}; {info['date']}; load average at start "
        f"{' / '.join(str(x) for x in info.get('loadavg_at_start', []))} (shared machine)"
    )


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[object]], align: str) -> str:
    """A markdown table; ``align`` has one char per column: ``l`` or ``r``."""
    lines = ["| " + " | ".join(headers) + " |"]
    lines.append("|" + "|".join("---" if a == "l" else "---:" for a in align) + "|")
    for row in rows:
        lines.append("| " + " | ".join(str(c) for c in row) + " |")
    return "\n".join(lines)


def write_results(name: str, markdown: str, data: dict[str, Any]) -> tuple[Path, Path]:
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    md = RESULTS_DIR / f"{name}.md"
    js = RESULTS_DIR / f"{name}.json"
    md.write_text(markdown.rstrip() + "\n")
    js.write_text(json.dumps(data, indent=1, sort_keys=False) + "\n")
    record_index([md, js], data.get("machine"))
    return md, js


INDEX_JSON = RESULTS_DIR / "index.json"
INDEX_MD = RESULTS_DIR / "index.md"


def index_machine(info: dict[str, Any]) -> str:
    """The machine as the index gives it (``info`` from :func:`machine_info`)."""
    return (
        f"{info['cores']} cores ({info['cpu_model']}), {info['memory_gib']} GiB, "
        f"Python {info['python']}, node {info['node'] or 'none'}; load average at start "
        f"{' / '.join(str(x) for x in info.get('loadavg_at_start', []))}"
    )


def record_index(files: Sequence[Path], info: dict[str, Any] | None = None) -> None:
    """Note each written results file in ``results/index.{json,md}``: commit, date, machine
    and the command that wrote it. ``info``: the run's :func:`machine_info`, taken at its
    start (without it, or in another shape, it is taken now)."""
    if not (isinstance(info, dict) and {"git_commit", "cores", "date"} <= info.keys()):
        info = machine_info()
    entries: dict[str, dict[str, str]] = {}
    with contextlib.suppress(OSError, ValueError):
        entries = json.loads(INDEX_JSON.read_text())
    for path in files:
        entries[path.name] = {
            "commit": str(info["git_commit"]),
            "date": str(info["date"]),
            "machine": index_machine(info),
            "command": command_line(),
        }
    render_index(entries)


def render_index(entries: dict[str, dict[str, str]]) -> None:
    """Write ``results/index.{json,md}`` from ``entries`` (the files that exist)."""
    entries = {name: entries[name] for name in sorted(entries) if (RESULTS_DIR / name).exists()}
    INDEX_JSON.write_text(json.dumps(entries, indent=1) + "\n")
    lines = [
        "# Benchmark results",
        "",
        "The headline results, each written by the command beside it (`python -m benchmarks "
        "all` writes them all). Commit: the kinesis_trio tree measured.",
        "",
        "| file | commit | date | machine | command |",
        "|---|---|---|---|---|",
    ]
    for name, e in entries.items():
        lines.append(
            f"| [{name}]({name}) | {e['commit']} | {e['date']} | {e['machine']} | "
            f"`{e['command']}` |"
        )
    INDEX_MD.write_text("\n".join(lines) + "\n")


def report_header(title: str, info: dict[str, Any], total: float) -> list[str]:
    """The first lines of a results page: title, command line and machine."""
    return [
        title,
        "",
        f"Command: `{command_line()}` ({total / 60:.1f} min)",
        "",
        f"Machine: {machine_line(info)}",
        "",
    ]


def publish(name: str, md: list[str], data: dict[str, Any], total: float) -> None:
    """Print the markdown and write ``results/<name>.{md,json}``."""
    text = "\n".join(md)
    print(text)
    md_path, json_path = write_results(name, text, data)
    log(f"wrote {md_path} and {json_path} in {total:.0f}s")
