"""Kill tests of the durable spool: a producer process is SIGKILLed again and again.

A producer process (``tests/support/spool_child.py``) puts records to a real emulator at a
steady rate (2000/s, in bursts every 20 ms) with ``spool_dir`` set, and journals what its
policy promises: ``spool_sync="put"``: a record whose ``put`` returned;
``spool_sync="interval"``: every record put before a ``wait_durable()`` call that returned.
It is SIGKILLed at a seeded random moment of one of these kinds:

- ``load``: while it puts (puts, commits and requests all under way);
- ``startup``: as it opens the producer (the spool, the stream, the start of recovery);
- ``recovery``: just after it opened the spool the last one left (mid-recovery);
- ``commit``: just after it asked for a commit (``wait_durable()`` called) or was promised
  one (a ``put`` returned, under "put": the next commit is under way);
- ``promise``: the moment it made its n-th promise, by its own hand (no delay at all),
  with frequent commits on a slow disk (each commit waits 5-20 ms in its thread before
  writing): whatever it promised must be on disk already;
- ``request``: while the emulator's answers are delayed (a fault proxy holds each
  PutRecords 50-250 ms): requests are out when it dies, and land after.

Before each process starts, the test reads the spool (read-only): what it will recover.
The next process recovers that and puts records of its own, and is killed in turn (some
during their recovery); a last one drains the spool and closes cleanly. The stream is read
back, and:

- every promised record is in it, and every record a process saw confirmed;
- every record a spool held when a process started is in it (recovered, then sent);
- nothing else is: each record is one a process made (its data and key);
- a record is there more than once only if it was recovered (a spool held it when a
  process started), or an outcome said it might be (an ambiguous attempt);
- the last process recovered exactly what the spool held (none failed, none damaged),
  and left it empty; no record failed.

These hold wherever the kills land: nothing is timed, only the promise is checked. The
moments are seeded; where exactly a kill lands in the process's work is not (it is a
real process), and every outcome of that race must pass.
"""

from __future__ import annotations

import contextlib
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
import zlib
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

import anyio
import pytest

from kinesis_trio import deaggregate
from tests.support import spool_child
from tests.support.emulators import EmulatorEndpoint, client_for, new_stream
from tests.support.fault_proxy import FaultProxy
from tests.support.fault_spec import Faults
from tests.support.helpers import read_stream
from tests.support.spool_child import Run, parse, record

pytestmark = pytest.mark.subprocess

ZYGOTE = Path(spool_child.__file__)
#: Kills per test (a new process each: the next recovers what the last one left).
KILLS = 16
STRATEGIES = ("load", "startup", "recovery", "commit", "promise", "request")
#: Bounds on a process's steps: one slower than that has hung (its recovery included).
STEP_TIMEOUT = 60.0
DRAIN_TIMEOUT = 60.0


class Zygote:
    """The process that forks the producer processes (``spool_child.py``): it imports
    kinesis_trio once for all of them."""

    def __init__(self, stderr: Path) -> None:
        self._err = stderr.open("wb")
        self.process = subprocess.Popen(
            [sys.executable, str(ZYGOTE)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._err,
            text=True,
        )

    def ask(self, *command: object) -> str:
        stdin, stdout = self.process.stdin, self.process.stdout
        assert stdin is not None and stdout is not None
        stdin.write(" ".join(map(str, command)) + "\n")
        stdin.flush()
        answer = stdout.readline()
        assert answer, f"the zygote died (exit {self.process.wait()})"
        return answer.strip()

    def close(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        try:
            self.process.wait(10)
        finally:
            if self.process.poll() is None:
                self.process.kill()
                self.process.wait()
            self._err.close()


class Child:
    """A producer process (forked by the zygote) and its journal (a file it appends to)."""

    def __init__(self, zygote: Zygote, tmp: Path, run: Run) -> None:
        self.zygote = zygote
        self.journal = tmp / f"journal-{run.round}.txt"
        self.stderr = tmp / f"stderr-{run.round}.txt"
        self.journal.touch()
        self.started = time.monotonic()
        answer = zygote.ask("run", self.journal, self.stderr, *run.argv())
        assert answer.startswith("pid "), answer
        self.pid = int(answer[4:])
        self.lines: list[str] = []
        self._file = self.journal.open("rb")
        self._tail = b""

    def _read(self) -> None:
        self._tail += self._file.read()
        *whole, self._tail = self._tail.split(b"\n")  # a line cut by the kill stays out
        self.lines.extend(line.decode() for line in whole)

    def _ended(self) -> bool:
        """Has it ended (a zombie until the zygote waits for it)?"""
        with open(f"/proc/{self.pid}/stat", "rb") as stat:
            return stat.read().rpartition(b")")[2].split()[0] == b"Z"

    def wait_for(self, prefix: str, count: int = 1) -> bool:
        """Wait until the journal holds ``count`` lines starting with ``prefix``; False if
        the process ended first, or took over ``STEP_TIMEOUT`` (the checks say which)."""
        deadline = time.monotonic() + STEP_TIMEOUT
        seen = 0
        while True:
            self._read()
            for line in self.lines[seen:]:
                if line.startswith(prefix):
                    count -= 1
                    if count <= 0:
                        return True
            seen = len(self.lines)
            if self._ended() or time.monotonic() > deadline:
                return False
            time.sleep(0.002)

    def kill(self) -> int:
        """SIGKILL, then its exit code (``-9``, or how it ended by itself before)."""
        os.kill(self.pid, signal.SIGKILL)
        return self.finish(10.0)

    def finish(self, timeout: float) -> int:
        """Its exit code; SIGKILLed first if it runs past ``timeout`` (a hang: ``-9``)."""
        answer = self.zygote.ask("wait", self.pid, timeout)
        self._read()
        self._file.close()
        assert answer.startswith("exit "), answer
        return int(answer[5:])

    def failure(self) -> str:
        return f"journal tail {self.lines[-5:]}\nstderr:\n{self.stderr.read_text()[-3000:]}"


class Plan(NamedTuple):
    """One round, drawn before it starts (so the draws never depend on timing)."""

    strategy: str
    interval: float  # spool_interval
    slow_disk: float  # seconds each commit waits before writing
    die_at: int  # "promise": the process kills itself at its die_at-th promise
    delay: float  # seconds before the kill, from the moment the strategy waits for
    nth: int  # "commit": the kill follows the nth W (interval) or P (put) line


def plan_rounds(seed: int, sync: str) -> list[Plan]:
    """Every strategy at least once ("promise" twice), the other rounds drawn, shuffled."""
    rng = random.Random(seed)
    base = [*STRATEGIES, "promise"]
    strategies = [*base, *(rng.choice(STRATEGIES) for _ in range(KILLS - len(base)))]
    rng.shuffle(strategies)
    plans = []
    for strategy in strategies:
        interval = rng.uniform(0.005, 0.1)
        slow = rng.choice([0.0, rng.uniform(0.001, 0.01)])
        die_at = rng.randrange(1, 300 if sync == "put" else 30)
        delay = {
            "startup": rng.uniform(0.0, 0.15),
            "recovery": rng.uniform(0.0, 0.03),
            "commit": rng.uniform(0.0, 0.003),
        }.get(strategy, rng.uniform(0.05, 0.6))
        nth = rng.randrange(1, 8) if sync == "interval" else rng.randrange(1, 300)
        if strategy == "promise":  # most promises then come with a commit under way
            interval, slow = rng.uniform(0.002, 0.02), rng.uniform(0.005, 0.02)
        else:
            die_at = 0
        plans.append(Plan(strategy, round(interval, 4), round(slow, 4), die_at, delay, nth))
    return plans


def _kill(child: Child, plan: Plan, sync: str) -> int:
    """Kill ``child`` at the moment ``plan`` says; its exit code."""
    try:
        if plan.strategy == "promise":
            return child.finish(STEP_TIMEOUT)  # it kills itself (a slow one is killed)
        if not child.wait_for("opening"):
            return child.kill()  # it ended (or hung) before: its exit code says which
        if plan.strategy != "startup":
            if not child.wait_for("ready"):
                return child.kill()
            if plan.strategy == "commit":
                child.wait_for("W " if sync == "interval" else "P ", plan.nth)
        time.sleep(plan.delay)
    except BaseException:
        child.kill()
        raise
    return child.kill()


def spool_held(spool: Path) -> list[bytes]:
    """The records a spool holds, read as the next producer will (read-only: nothing is
    checkpointed or changed)."""
    path = spool / "spool.db"
    if not path.exists():
        return []
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        tables = db.execute("SELECT name FROM sqlite_master WHERE name = 'records'").fetchall()
        if not tables:
            return []
        return [bytes(r[0]) for r in db.execute("SELECT data FROM records ORDER BY id")]
    finally:
        db.close()


@dataclass
class Journal:
    """What the processes said, over every round."""

    promised: set[bytes] = field(default_factory=set)
    confirmed: set[bytes] = field(default_factory=set)
    ambiguous: set[bytes] = field(default_factory=set)
    failed: set[bytes] = field(default_factory=set)

    def add(self, round_: int, lines: list[str]) -> None:
        for line in lines:
            kind, _, rest = line.partition(" ")
            if kind == "P":
                self.promised.add(record(round_, int(rest))[0])
            elif kind == "D":
                self.promised.update(record(round_, s)[0] for s in range(int(rest) + 1))
            elif kind in ("K", "A"):
                self.confirmed.add(rest.encode())
                if kind == "A":
                    self.ambiguous.add(rest.encode())
            elif kind == "F":
                self.failed.add(rest.encode())


def _which(lost: set[bytes], recovered: set[bytes]) -> str:
    """The lost records, by round: their seqs, and how many a spool held at some start."""
    by_round: dict[int, list[int]] = {}
    for data in lost:
        round_, seq, _key = parse(data)
        by_round.setdefault(round_, []).append(seq)
    return "; ".join(
        f"round {r}: seqs {min(seqs)}..{max(seqs)} ({len(seqs)}), "
        f"{sum(record(r, q)[0] in recovered for q in seqs)} of them were recovered"
        for r, seqs in sorted(by_round.items())
    )


@pytest.mark.parametrize("sync", ["put", "interval"])
@pytest.mark.parametrize("backend", ["trio", "asyncio"])
@pytest.mark.parametrize("emulator", ["python", "kinesalite"], indirect=True)
def test_killed_producers_lose_nothing_promised(
    emulator: EmulatorEndpoint, backend: str, sync: str, tmp_path: Path
) -> None:
    seed = zlib.crc32(f"{emulator.kind}/{backend}/{sync}".encode())
    plans = plan_rounds(seed, sync)
    stream = anyio.run(new_stream, emulator, 2, backend=backend)
    spool = tmp_path / "spool"
    journal = Journal()
    recovered: set[bytes] = set()  # every record a spool held when a process started
    summary: list[str] = []

    def start(mode: str, round_: int, endpoint: str, plan: Plan) -> Child:
        run = Run(
            mode,
            backend,
            sync,
            endpoint,
            stream,
            str(spool),
            round_,
            seed + round_,
            plan.interval,
            plan.die_at,
            plan.slow_disk,
        )
        return Child(zygote, tmp_path, run)

    zygote = Zygote(tmp_path / "zygote.stderr")
    with contextlib.ExitStack() as stack:
        stack.callback(zygote.close)
        proxy = stack.enter_context(FaultProxy(emulator.endpoint_url, seed=seed))
        for round_, plan in enumerate(plans, 1):
            held = spool_held(spool)
            recovered.update(held)
            delayed = plan.strategy == "request"
            proxy.faults = Faults(delay=0.05, delay_jitter=0.2) if delayed else Faults()
            child = start("produce", round_, proxy.url, plan)
            code = _kill(child, plan, sync)
            assert code == -signal.SIGKILL, (
                f"round {round_} ({plan.strategy}): exit {code}\n{child.failure()}"
            )
            journal.add(round_, child.lines)
            kinds = Counter(line[:2] for line in child.lines)
            summary.append(
                f"{plan.strategy}: held {len(held)}, promises {kinds['P '] + kinds['D ']}, "
                f"ok {kinds['K '] + kinds['A ']}, {time.monotonic() - child.started:.1f} s"
            )
        proxy.close()  # before the last process: what the proxy held has landed, or never will

        held = spool_held(spool)
        recovered.update(held)
        last = start("drain", KILLS + 1, emulator.endpoint_url, Plan("drain", 0.05, 0, 0, 0, 0))
        code = last.finish(DRAIN_TIMEOUT)
    assert code == 0, f"the last process exited {code} (-9: it hung)\n{last.failure()}"
    journal.add(KILLS + 1, last.lines)
    report = next(line for line in last.lines if line.startswith("recovered "))
    assert report == f"recovered {len(held)} {len(held)} 0 0", (report, len(held))
    assert spool_held(spool) == [], "the last process left records in its spool"
    summary.append(f"drain: held {len(held)}")

    async def read_back() -> list[tuple[Any, ...]]:
        async with client_for(emulator) as client:
            return await read_stream(client, stream)

    landed: Counter[bytes] = Counter()
    for _shard, _start, _end, data, pk, ehk, seq in anyio.run(read_back, backend=backend):
        for user in deaggregate(data, pk, explicit_hash_key=ehk, sequence_number=seq):
            round_, _seq, key = parse(user.data)  # a record a process made, nothing else
            assert user.partition_key == key, user
            assert 1 <= round_ <= KILLS, user
            landed[user.data] += 1

    assert not journal.failed, f"{len(journal.failed)} records failed: {sorted(journal.failed)[:5]}"
    lost = journal.promised - landed.keys()
    assert not lost, f"{len(lost)} promised records are not in the stream: " + _which(
        lost, recovered
    )
    lost = journal.confirmed - landed.keys()
    assert not lost, f"{len(lost)} confirmed records are not in the stream: {sorted(lost)[:5]}"
    lost = recovered - landed.keys()
    assert not lost, f"{len(lost)} recovered records are not in the stream: {sorted(lost)[:5]}"
    copies = {data for data, n in landed.items() if n > 1}
    unexplained = copies - recovered - journal.ambiguous
    assert not unexplained, (
        f"{len(unexplained)} records landed twice though never recovered nor ambiguous: "
        f"{sorted(unexplained)[:5]}"
    )
    assert journal.promised, "no round promised anything: the test proved nothing"
    assert recovered, "no process recovered anything: the test proved nothing"
    print(
        f"\n{emulator.kind}/{backend}/{sync}: {KILLS} kills; promised {len(journal.promised)}, "
        f"confirmed {len(journal.confirmed)}, recovered {len(recovered)}, "
        f"landed {len(landed)} ({sum(landed.values())} copies), "
        f"twice {len(copies)} (recovered {len(copies & recovered)}, "
        f"ambiguous only {len(copies - recovered)})\n  " + "\n  ".join(summary)
    )
