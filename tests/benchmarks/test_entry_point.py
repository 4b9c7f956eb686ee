"""``python -m benchmarks``: every command it lists exists, and the pieces a benchmark
patches by name are still where it looks for them (a refactor that moves one breaks the
benchmark only at run time, so it is checked here)."""

from __future__ import annotations

import importlib
import subprocess
import sys
from pathlib import Path

import pytest

from benchmarks import __main__ as entry
from benchmarks import _command, _report

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", [*entry.COMMANDS, *entry.TOOLS])
def test_each_command_has_a_module_with_a_main(name: str) -> None:
    module = entry.COMMANDS[name][0] if name in entry.COMMANDS else entry.TOOLS[name][0]
    assert callable(importlib.import_module(module).main)


@pytest.mark.parametrize("module", ["benchmarks.steady", "benchmarks.sizes", "benchmarks.engines"])
def test_each_part_of_a_command_has_a_main(module: str) -> None:
    parts = importlib.import_module(module).PARTS
    assert len(parts) == 2
    for part_module in parts.values():
        assert callable(importlib.import_module(part_module).main)


def test_the_entry_point_lists_every_headline_command_and_tool() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    for name in [*entry.COMMANDS, *entry.TOOLS]:
        assert f"\n  {name} " in out
    assert len(entry.COMMANDS) <= 14


def test_an_unknown_command_or_part_is_refused_by_name() -> None:
    for argv in (["nope"], ["steady", "nope"]):
        proc = subprocess.run(
            [sys.executable, "-m", "benchmarks", *argv],
            cwd=ROOT,
            capture_output=True,
            text=True,
            check=False,
            timeout=60,
        )
        assert proc.returncode != 0
        assert "'nope'" in proc.stderr


def test_the_pieces_the_steady_benchmark_times_still_exist() -> None:
    from benchmarks import _steady_cpu

    for module_name, path, _label in _steady_cpu._PIECES:
        owner: object = importlib.import_module(module_name)
        for part in path.split("."):
            owner = getattr(owner, part)
        assert callable(owner), (module_name, path)


def test_the_index_names_each_file_with_its_commit_and_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_report, "RESULTS_DIR", tmp_path)
    monkeypatch.setattr(_report, "INDEX_JSON", tmp_path / "index.json")
    monkeypatch.setattr(_report, "INDEX_MD", tmp_path / "index.md")
    monkeypatch.setattr(_command, "COMMAND", ["benchmarks", "reliability", "--seconds", "5"])
    info = {
        "git_commit": "abc1234",
        "date": "2026-11-27 16:00:00 UTC",
        "cores": 2,
        "cpu_model": "AMD EPYC",
        "memory_gib": 23.5,
        "python": "3.11.7",
        "node": "v20",
        "loadavg_at_start": [0.1, 0.2, 0.3],
    }
    (tmp_path / "reliability.md").write_text("# r\n")
    (tmp_path / "gone.md").write_text("# g\n")
    _report.record_index([tmp_path / "reliability.md", tmp_path / "gone.md"], info)
    (tmp_path / "gone.md").unlink()
    _report.record_index([tmp_path / "reliability.md"], info)
    index = (tmp_path / "index.md").read_text()
    row = next(line for line in index.splitlines() if "reliability.md" in line)
    assert "abc1234" in row
    assert "`uv run python -m benchmarks reliability --seconds 5`" in row
    assert "gone.md" not in index
