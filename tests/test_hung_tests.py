"""A hung test's stacks reach the log (``tests/support/hangs.py``): from an xdist worker,
whose stdout goes nowhere, under ``-q`` as CI runs the fast suites."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

#: a test module whose three tests hang: in a blocking call, and awaiting on trio and asyncio
HUNG = """
import threading

import anyio
import pytest


def blocked_in_a_thread_wait():
    threading.Event().wait()


def test_sync():
    blocked_in_a_thread_wait()


async def awaits_for_ever_on(backend):
    await anyio.sleep_forever()


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["trio", "asyncio"])
async def test_async(anyio_backend):
    print("said before hanging on", anyio_backend)
    await awaits_for_ever_on(anyio_backend)
"""


@pytest.mark.subprocess
def test_a_hung_tests_stacks_reach_the_log_from_an_xdist_worker(tmp_path: Path) -> None:
    (tmp_path / "test_hung.py").write_text(HUNG)
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    # stderr to a file: the three workers' reports land whole lines at a time
    log = tmp_path / "stderr.txt"
    command = [sys.executable, "-m", "pytest", "test_hung.py", "-p", "tests.support.hangs"]
    command += ["-n", "3", "--max-worker-restart", "0", "-q", "-p", "no:cacheprovider"]
    command += ["-o", "timeout=2", "-o", "timeout_method=thread"]
    with log.open("w") as err:
        done = subprocess.run(
            command,
            cwd=tmp_path,
            env=env,
            stdout=subprocess.PIPE,
            stderr=err,
            text=True,
            timeout=180,
            check=False,
        )
    out, lines = done.stdout, log.read_text().splitlines()
    assert "3 failed" in out, out[-3000:]
    for test in ["test_sync", "test_async[trio]", "test_async[asyncio]"]:
        assert "worker 'gw" in out and f"crashed while running 'test_hung.py::{test}'" in out
        header = f": test_hung.py::{test} ++++"
        assert any("++++ Timeout (2 s) in worker gw" in line and header in line for line in lines)
    # where each waits: a thread's stack, and each task's await stack
    text = "\n".join(lines)
    assert "in blocked_in_a_thread_wait\n    threading.Event().wait()" in text
    assert text.count("in awaits_for_ever_on\n    await anyio.sleep_forever()") == 2
    assert "Await stack of trio task" in text and "Await stack of asyncio task" in text
    # and what the tests printed before
    assert "said before hanging on trio" in text and "said before hanging on asyncio" in text
