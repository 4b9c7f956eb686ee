"""Running the ``kinesis-trio`` command in tests: its environment, a run, a stream to use."""

from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
import uuid
from dataclasses import dataclass
from typing import IO, Any

import anyio

import kinesis_trio

_DROPPED_ENV = (
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_KINESIS",
    "AWS_PROFILE",
    "AWS_DEFAULT_PROFILE",
    "AWS_SESSION_TOKEN",
)


def cli_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _DROPPED_ENV}
    env.update(
        AWS_ACCESS_KEY_ID="AKIDCLITEST",
        AWS_SECRET_ACCESS_KEY="cli-test-secret",
        AWS_REGION="us-east-1",
        PYTHONUNBUFFERED="1",
    )
    return env


def cli_command(*args: str) -> list[str]:
    return [sys.executable, "-m", "kinesis_trio", *args]


def run_cli(
    *args: str, stdin: str | None = None, timeout: float = 180
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        cli_command(*args),
        input=stdin,
        stdin=subprocess.DEVNULL if stdin is None else None,
        capture_output=True,
        text=True,
        timeout=timeout,
        env=cli_env(),
        check=False,
    )


def client(endpoint: str) -> kinesis_trio.KinesisClient:
    return kinesis_trio.KinesisClient(
        region_name="us-east-1",
        endpoint_url=endpoint,
        credentials=kinesis_trio.StaticCredentials("a", "b"),
    )


def create_stream(endpoint: str, shards: int = 1) -> str:
    name = f"cli-{uuid.uuid4().hex[:10]}"

    async def create() -> None:
        async with client(endpoint) as c:
            await c.create_stream(name, shards)
            await c.wait_for_stream(name)

    anyio.run(create)
    return name


def summary(stdout: str) -> dict[str, str]:
    """The plain-text summary rows (``  label   value``) printed at the end of a run."""
    rows: dict[str, str] = {}
    for line in stdout.splitlines():
        match = re.fullmatch(r"  (\S+(?: \S+)*) {2,}(.+)", line)
        if match:
            rows[match[1]] = match[2].strip()
    return rows


def number(text: str) -> float:
    return float(text.split()[0].replace(",", ""))


@dataclass(frozen=True)
class Landed:
    shard_id: str
    shard_start: int
    shard_end: int
    data: bytes
    partition_key: str


def read_back(endpoint: str, stream: str) -> list[Landed]:
    """Every user record in the stream, de-aggregated, with its shard's hash key range."""

    async def read() -> tuple[list[dict[str, Any]], dict[str, list[dict[str, Any]]]]:
        async with client(endpoint) as c:
            return await c.list_shards(stream, at_latest=False), await c.read_all(stream)

    shards, records = anyio.run(read)
    ranges = {
        s["ShardId"]: (
            int(s["HashKeyRange"]["StartingHashKey"]),
            int(s["HashKeyRange"]["EndingHashKey"]),
        )
        for s in shards
    }
    landed = []
    for shard_id, shard_records in records.items():
        start, end = ranges[shard_id]
        for record in shard_records:
            for user in kinesis_trio.deaggregate(
                record["Data"], record["PartitionKey"], sequence_number=record["SequenceNumber"]
            ):
                landed.append(Landed(shard_id, start, end, user.data, user.partition_key))
    return landed


def output_lines(stream: IO[str]) -> queue.Queue[str | None]:
    lines: queue.Queue[str | None] = queue.Queue()

    def pump() -> None:
        for line in stream:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=pump, daemon=True).start()
    return lines


def wait_for_line(lines: queue.Queue[str | None], pattern: str, timeout: float) -> re.Match[str]:
    deadline = time.monotonic() + timeout
    seen: list[str] = []
    while True:
        line = lines.get(timeout=max(0.01, deadline - time.monotonic()))
        if line is None:
            raise AssertionError(f"output ended without {pattern!r}: {seen}")
        seen.append(line)
        match = re.search(pattern, line)
        if match:
            return match


def default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)
