"""The public surface is a decision: this pins it."""

from __future__ import annotations

import subprocess
import sys
import types

import pytest

import kinesis_trio
from kinesis_trio.testing._emulators import default_engine


def test_exported_names() -> None:
    public = {
        name
        for name, value in vars(kinesis_trio).items()
        if not name.startswith("_") and not isinstance(value, types.ModuleType)
    }
    assert public == {
        "AccessDeniedError",
        "Attempt",
        "AuthenticationError",
        "ConnectError",
        "ConnectionLostError",
        "CredentialsError",
        "EndpointError",
        "ExpiredTokenError",
        "FailedRecord",
        "KMSError",
        "KinesisClient",
        "KinesisError",
        "KinesisTrioError",
        "LimitExceededError",
        "Outcome",
        "Producer",
        "ProducerClosedError",
        "ProducerForkedError",
        "RecoveryReport",
        "SpoolError",
        "SpoolFormatError",
        "SpoolLockedError",
        "SpoolWriteError",
        "ProducerConfig",
        "ProvisionedThroughputExceededError",
        "RecordResult",
        "RequestTimeoutError",
        "ResourceInUseError",
        "ResourceNotFoundError",
        "ServiceError",
        "StaticCredentials",
        "SyncProducer",
        "TransportError",
        "UserRecord",
        "ValidationError",
        "deaggregate",
    }
    assert kinesis_trio.__version__


@pytest.mark.subprocess
def test_demo_command_runs_against_the_embedded_emulator() -> None:
    """The README's first command, shortened: it starts the default local engine (kinesalite
    with Node.js, else the Python engine) and writes records at a steady rate."""
    out = subprocess.run(
        [sys.executable, "-m", "kinesis_trio", "demo", "-n", "3000", "--shards", "2"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert f"starting an embedded {default_engine()}" in out.stdout
    row = next(line for line in out.stdout.splitlines() if line.startswith("| steady | 3,000 |"))
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[-1] == "0"  # failed
    assert float(cells[2].replace(",", "")) > 0  # records/s


@pytest.mark.subprocess
def test_cli_bad_arguments_get_one_line_errors() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "kinesis_trio", "demo", "--linger", "-1"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert out.returncode == 2
    assert out.stderr.strip().splitlines() == [
        "kinesis-trio: error: ProducerConfig.record_max_buffered_time must be a positive, "
        "finite number of seconds, got -1.0"
    ]
    assert "Traceback" not in out.stderr


@pytest.mark.subprocess
def test_importing_the_producer_loads_neither_trio_nor_protobuf() -> None:
    """An asyncio application does not pay for trio, nor a producer for protobuf's runtime
    (only reading aggregates needs it): each is objects more for every full garbage
    collection to walk. Both still work once they are wanted, in the same process."""
    script = (
        "import sys\n"
        "import kinesis_trio\n"
        "print(sorted(m for m in ('trio', 'google.protobuf') if m in sys.modules))\n"
        "import asyncio\n"
        "from kinesis_trio.testing import FakeKinesis\n"
        "async def main():\n"
        "    fake = FakeKinesis()\n"
        "    fake.create_stream('s', shard_count=1)\n"
        "    async with kinesis_trio.Producer(\n"
        "        's', region_name='us-east-1', endpoint_url='http://fake',\n"
        "        credentials=kinesis_trio.StaticCredentials('a', 'b'),\n"
        "        transport=fake.transport(),\n"
        "    ) as p:\n"
        "        r = await (await p.put(b'x', 'k')).wait()\n"
        "    print(r.ok, 'trio' in sys.modules)\n"
        "asyncio.run(main())\n"
        "from kinesis_trio import deaggregate\n"
        "print(len(deaggregate(b'plain', 'k')), 'google.protobuf' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.splitlines() == ["[]", "True False", "1 False"]
