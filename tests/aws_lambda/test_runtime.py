"""The helper in a real Lambda runtime: awslambdaric under the Runtime Interface Emulator,
writing to the Python local engine (its own process, idle connections closed after 1 s).

- invocations one after another: each returns once its records are written;
- a freeze: the runtime is stopped (SIGSTOP) for longer than the engine's idle timeout and
  continued (SIGCONT); the next invocation's records are written, none failed, none twice;
- a kill after return: the runtime is killed (SIGKILL) right after an invocation returned
  its records unconfirmed; the next runtime sends them from the spool, none lost;
- Managed Instances: awslambdaric's three worker processes of one environment, one spool
  root: invocations served by several of them, each process with a spool of its own.

Skipped with the reason when the emulator cannot be built (no Go toolchain).
"""

from __future__ import annotations

import signal
import time
from collections import Counter
from pathlib import Path

import pytest

from kinesis_trio.testing._emulators import LocalKinesis
from tests.aws_lambda.rie import Runtime
from tests.aws_lambda.runtime_kit import IDLE_TIMEOUT, stored
from tests.aws_lambda.runtime_kit import runtime_env as _env
from tests.support.helpers import wait_until

pytestmark = [pytest.mark.integration, pytest.mark.subprocess]


def _tags(tag: str, n: int) -> set[bytes]:
    return {f"{tag}-{i}".encode() for i in range(n)}


def test_invocations_return_once_their_records_are_written(
    rie: Path, engine: LocalKinesis, stream: str
) -> None:
    with Runtime(rie, _env(engine, stream)) as runtime:
        first = runtime.invoke({"tag": "a", "n": 10})
        assert stored(engine, stream) == Counter(_tags("a", 10)), runtime.output()
        second = runtime.invoke({"tag": "b", "n": 100})
        assert first["pid"] == second["pid"]  # one producer per environment, kept
        assert stored(engine, stream) == Counter(_tags("a", 10) | _tags("b", 100))


def test_a_freeze_longer_than_the_idle_timeout(
    rie: Path, engine: LocalKinesis, stream: str
) -> None:
    with Runtime(rie, _env(engine, stream)) as runtime:
        runtime.invoke({"tag": "a", "n": 10})
        frozen = runtime.signal(signal.SIGSTOP)
        assert frozen
        time.sleep(IDLE_TIMEOUT * 3)  # the engine closes the runtime's idle connections
        runtime.signal(signal.SIGCONT)
        answer = runtime.invoke({"tag": "b", "n": 10})  # fails if a record failed
        assert "errorMessage" not in answer, answer
        assert stored(engine, stream) == Counter(_tags("a", 10) | _tags("b", 10))


def test_a_kill_after_return_loses_nothing_in_the_spool(
    rie: Path, engine: LocalKinesis, stream: str, tmp_path: Path
) -> None:
    """The invocation returns at once (a margin as long as its timeout), its records only
    in the spool (``spool_sync="put"``); the runtime is killed; the next one sends them."""
    env = _env(
        engine,
        stream,
        UNCONFIRMED="return",
        MARGIN="3600",
        SPOOL=str(tmp_path / "spool"),
        SPOOL_SYNC="put",
    )
    with Runtime(rie, env) as runtime:
        first = runtime.invoke({"tag": "a", "n": 50})
        killed = runtime.signal(signal.SIGKILL)
        assert killed == [first["pid"]]
    with Runtime(rie, env) as runtime:
        second = runtime.invoke({"tag": "b", "n": 5})
        assert second["spool"] == first["spool"]  # the dead process's spool, taken over
        deadline = time.monotonic() + 60
        while not _tags("a", 50) <= set(stored(engine, stream)):
            assert time.monotonic() < deadline, runtime.output()
            runtime.invoke({"tag": "c", "n": 0})
            time.sleep(0.2)
    found = stored(engine, stream)
    assert _tags("a", 50) | _tags("b", 5) <= set(found)


def test_managed_instances_a_spool_per_process(
    rie: Path, engine: LocalKinesis, stream: str, tmp_path: Path
) -> None:
    """Each worker opens its producer as it imports the function: three processes, three
    spools, no SpoolLockedError (an init error would fail the first invocation)."""
    root = tmp_path / "spool"
    env = _env(engine, stream, SPOOL=str(root), OPEN_AT_IMPORT="1")
    with Runtime(rie, env, concurrency=3) as runtime:
        # the emulator's classic path serves one invocation at a time
        answers = [runtime.invoke({"tag": f"t{i}", "n": 20}) for i in range(12)]
        assert all("errorMessage" not in a for a in answers), answers
        assert len(runtime.runtimes()) == 4  # awslambdaric's parent and its three workers
        wanted = {"process-0", "process-1", "process-2"}
        wait_until(
            lambda: {p.name for p in root.iterdir()} == wanted,
            timeout=60,
            what="a spool per process",
        )
        spools = {p.name for p in root.iterdir()}
        assert {a["spool"] for a in answers} <= {str(root / s) for s in spools}
    expected: set[bytes] = set()
    for i in range(12):
        expected |= _tags(f"t{i}", 20)
    assert set(stored(engine, stream)) == expected
