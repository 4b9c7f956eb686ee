"""Producer processes for the spool's kill tests (``tests/emulators/test_spool_kills.py``).

``python spool_child.py`` is a *zygote*: it imports kinesis_trio, trio and asyncio once,
then forks one producer process per command read on stdin (a process from a plain start
would spend about a second importing, every round). Commands, one per line, each answered
with one line on stdout:

``run JOURNAL STDERR <Run's fields>``
    fork a producer process (its stdout to ``JOURNAL``, its stderr to ``STDERR``);
    answers ``pid <pid>``. Its :class:`Run` says what it does: ``produce`` (open a
    Producer on the spool: it recovers what a dead one left; put records at a steady rate,
    in bursts, until killed) or ``drain`` (open it, wait for recovery to end, flush, close
    cleanly).
``wait PID TIMEOUT``
    wait for that process to end (SIGKILL it past ``TIMEOUT`` seconds: it hung); answers
    ``exit <code>`` (``-9``: killed).

A producer process writes its journal, one line per fact, each line with one ``write``
(unbuffered: a line found in the file was written before the kill):

``opening``
    it is about to open the producer
``ready``
    the producer is open (recovery, if any, has started)
``P <seq>``
    ``spool_sync="put"``: ``put`` of record ``seq`` returned (its durability is promised)
``W <seq>`` / ``D <seq>``
    ``spool_sync="interval"``: ``wait_durable()`` is called / returned when every record up
    to ``seq`` had been put (``D``: they are all promised)
``K <data>`` / ``A <data>`` / ``F <data>``
    a record (its data) has its outcome: ok / ok and a possible duplicate (an ambiguous
    attempt, or recovered from the spool) / failed. Written the moment the outcome
    resolves, before the spool can learn of it (and delete the record).
``recovered <records> <ok> <failed> <damaged>``
    ``drain``: recovery's report once it is done
``closed``
    the producer closed (``drain``)
"""

from __future__ import annotations

import itertools
import logging
import math
import os
import random
import signal
import sys
import time
import traceback
from typing import Any, NamedTuple

import anyio

KEYS = tuple(f"key-{i}" for i in range(8))
#: Records per second a producing child puts.
RATE = 2000.0
#: It puts them in bursts, one every TICK seconds.
TICK = 0.02
#: put tasks under spool_sync="put" (each put waits for a commit: they share commits)
PUT_TASKS = 32
#: A producing child that is never killed gives up (the parent died).
LIFETIME = 60.0


def record(round_: int, seq: int) -> tuple[bytes, str]:
    """Record ``seq`` of the child of round ``round_``: unique data, and its key."""
    key = KEYS[(seq * 5 + round_) % len(KEYS)]
    return f"{round_}:{seq}:{key}:".encode() + b"x" * (seq % 97), key


def parse(data: bytes) -> tuple[int, int, str]:
    """(round, seq, key) of a record :func:`record` made; ``ValueError`` for anything else."""
    round_, seq, key, _ = data.split(b":", 3)
    parsed = int(round_), int(seq), key.decode()
    if record(parsed[0], parsed[1]) != (data, parsed[2]):
        raise ValueError(f"not a record of the kill test: {data[:60]!r}")
    return parsed


def say(line: str) -> None:
    os.write(1, line.encode() + b"\n")


def _journal_outcomes() -> None:
    """Journal every outcome the moment it resolves (``K``, ``A``, ``F`` lines).

    The data is taken when the outcome is made (in ``accept``, before anything can resolve
    it): recovered records included."""
    from kinesis_trio import Outcome

    pending: dict[Outcome, bytes] = {}
    init, resolve = Outcome.__init__, Outcome.resolve

    def __init__(self: Outcome, data: bytes, *args: Any) -> None:
        init(self, data, *args)
        pending[self] = data

    def _resolve(self: Outcome, resolution: Any, sub: int = 0) -> bool:
        done = resolve(self, resolution, sub)
        if done:
            data = pending.pop(self, None)
            if data is not None:
                result = self.result()
                kind = "F " if not result.ok else "A " if result.possible_duplicate else "K "
                say(kind + data.decode())
        return done

    Outcome.__init__ = __init__  # type: ignore[method-assign,assignment]
    Outcome.resolve = _resolve  # type: ignore[method-assign,assignment]


class Run(NamedTuple):
    """What one producer process does (its command line, after ``run JOURNAL STDERR``)."""

    mode: str  # "produce" or "drain"
    backend: str  # "trio" or "asyncio"
    sync: str  # spool_sync: "put" or "interval"
    endpoint: str
    stream: str
    spool: str
    round: int  # in the records' data
    seed: int
    interval: float  # spool_interval
    die_at: int = 0  # SIGKILL itself the moment it made its die_at-th promise (0: never)
    slow_disk: float = 0.0  # each commit waits this long before it writes (a slow disk)

    def argv(self) -> list[str]:
        return [str(value) for value in self]

    @classmethod
    def parse(cls, argv: list[str]) -> Run:
        mode, backend, sync, endpoint, stream, spool, round_, seed, interval, die_at, slow = argv
        return cls(
            mode,
            backend,
            sync,
            endpoint,
            stream,
            spool,
            int(round_),
            int(seed),
            float(interval),
            int(die_at),
            float(slow),
        )


def _slow_disk(seconds: float) -> None:
    """Each commit of the spool waits ``seconds`` (in its worker thread) before it writes:
    a commit stays under way longer, and a kill finds more of them unwritten."""
    from kinesis_trio._disk._store import SpoolStore

    commit = SpoolStore.commit

    def slow_commit(self: SpoolStore, *args: Any) -> None:
        time.sleep(seconds)
        commit(self, *args)

    SpoolStore.commit = slow_commit  # type: ignore[method-assign,assignment]


async def main(run: Run) -> None:
    from kinesis_trio import Producer, ProducerConfig, StaticCredentials

    if run.slow_disk:
        _slow_disk(run.slow_disk)

    config = ProducerConfig(
        spool_dir=run.spool,
        spool_sync=run.sync,
        spool_interval=run.interval,
        record_max_buffered_time=0.05,
    )
    promises = 0

    def promise(line: str) -> None:
        nonlocal promises
        say(line)
        promises += 1
        if promises == run.die_at:
            os.kill(os.getpid(), signal.SIGKILL)

    say("opening")
    async with Producer(
        run.stream,
        region_name="us-east-1",
        endpoint_url=run.endpoint,
        credentials=StaticCredentials("AKIDLOCAL", "local-secret"),
        config=config,
    ) as producer:
        say("ready")
        if run.mode == "drain":
            report = await producer.recovered()
            await producer.flush()
            say(f"recovered {report.records} {report.ok} {report.failed} {report.damaged}")
        else:
            rng = random.Random(run.seed)
            counter = itertools.count()
            start = anyio.current_time()
            last_put = -1

            async def put_at_rate(promising: bool) -> None:
                nonlocal last_put
                while True:
                    seq = next(counter)
                    # in bursts, one every TICK: idle moments, when a commit may hold
                    # every record put so far, come as often as busy ones
                    due = start + math.ceil(seq / RATE / TICK) * TICK
                    delay = due - anyio.current_time()
                    if delay > 0:
                        await anyio.sleep(delay)
                    data, key = record(run.round, seq)
                    await producer.put(data, key)
                    last_put = seq
                    if promising:
                        promise(f"P {seq}")

            async def wait_durable() -> None:
                while True:
                    await anyio.sleep(rng.uniform(0.002, 0.05))
                    upto = last_put  # one put task: every record up to it was put
                    say(f"W {upto}")
                    await producer.wait_durable()
                    promise(f"D {upto}")

            with anyio.move_on_after(LIFETIME):
                async with anyio.create_task_group() as tg:
                    if run.sync == "put":
                        for _ in range(PUT_TASKS):
                            tg.start_soon(put_at_rate, True)
                    else:
                        tg.start_soon(put_at_rate, False)
                        tg.start_soon(wait_durable)
            raise SystemExit(3)  # never killed: the parent is gone
    say("closed")


def _producer(argv: list[str]) -> None:
    """In a forked process: the journal and stderr to their files, then the producer."""
    journal, stderr, *rest = argv
    run = Run.parse(rest)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.dup2(os.open(journal, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644), 1)
    os.dup2(os.open(stderr, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644), 2)
    code = 0
    try:
        anyio.run(main, run, backend=run.backend)
    except BaseException:
        traceback.print_exc()
        code = 1
    sys.stderr.flush()
    os._exit(code)  # never back into the zygote's loop


def _wait(pid: int, timeout: float) -> int:
    """The exit code of ``pid``; killed first if it runs past ``timeout`` (it hung)."""
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            return os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
        time.sleep(0.005)


def zygote() -> None:
    """Fork a producer process per ``run`` command; report how one ended per ``wait``."""
    for line in sys.stdin:
        command, *args = line.split()
        if command == "run":
            pid = os.fork()
            if pid == 0:
                _producer(args)
            answer = f"pid {pid}"
        elif command == "wait":
            answer = f"exit {_wait(int(args[0]), float(args[1]))}"
        else:
            answer = f"unknown command {command!r}"
        sys.stdout.write(answer + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    # warnings and errors to stderr (a file per process); SPOOL_CHILD_LOG=DEBUG for more
    logging.basicConfig(level=os.environ.get("SPOOL_CHILD_LOG", "WARNING"), stream=sys.stderr)
    _journal_outcomes()
    # everything a producer process imports, once, before the forks
    import anyio._backends._asyncio
    import anyio._backends._trio

    import kinesis_trio  # noqa: F401

    zygote()
