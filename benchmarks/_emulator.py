"""The emulator the benchmarks write to: its credentials, kinesalite and its streams.

Holds the SigV4 credentials and region the emulator accepts, the "lifted" per-shard rate
limits (the emulators enforce none), :func:`start_emulator` (kinesalite on a free port) and
:func:`create_stream` / :func:`delete_stream` (a fresh stream per run). Used by the runners
(``benchmarks/runners``: the credentials and limits, in the child process) and by the commands
that set up their own streams (``ab``, ``admission``, ``ordering``, ``overload``, ``aws_lambda``,
``processes``, ``_engines``, ``_steady_rates``) or go through ``_runs``.
"""

from __future__ import annotations

import contextlib
import uuid
from typing import Any

#: Credentials for the emulator (any SigV4-shaped credentials pass).
ACCESS_KEY = "AKIDBENCH"
SECRET_KEY = "bench-secret"
REGION = "us-east-1"

#: "lifted" per-shard rate limits: the emulators enforce none, and the benchmarks measure the
#: producers, not their limiters. 10^9 records/s and bytes/s per shard are never reached.
LIFTED_RECORDS_PER_SHARD = 1e9
LIFTED_BYTES_PER_SHARD = 1e12


def start_emulator(shard_limit: int = 1000) -> Any:
    """Start kinesalite (``LocalKinesis``) on a free port; the caller stops it."""
    from kinesis_trio.testing._emulators import LocalKinesis

    emulator = LocalKinesis("kinesalite", shard_limit=shard_limit)
    emulator.start()
    return emulator


def create_stream(endpoint: str, shards: int, prefix: str = "bench") -> str:
    """Create a fresh stream with ``shards`` shards and wait until it is ACTIVE."""
    import anyio

    from kinesis_trio import KinesisClient, StaticCredentials

    name = f"{prefix}-{uuid.uuid4().hex[:10]}"

    async def go() -> None:
        async with KinesisClient(
            region_name=REGION,
            endpoint_url=endpoint,
            credentials=StaticCredentials(ACCESS_KEY, SECRET_KEY),
        ) as client:
            await client.create_stream(name, shards)
            await client.wait_for_stream(name)

    anyio.run(go)
    return name


def delete_stream(endpoint: str, name: str) -> None:
    """Delete a stream (frees the emulator's memory between runs); errors are ignored."""
    import anyio

    from kinesis_trio import KinesisClient, StaticCredentials

    async def go() -> None:
        async with KinesisClient(
            region_name=REGION,
            endpoint_url=endpoint,
            credentials=StaticCredentials(ACCESS_KEY, SECRET_KEY),
        ) as client:
            await client.delete_stream(name)

    with contextlib.suppress(Exception):
        anyio.run(go)
