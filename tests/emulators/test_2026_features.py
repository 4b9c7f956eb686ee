"""The 2026 features over HTTP: kinesis-local (kinesis-mock 0.6.x) and the Python engine.

Both have ``UpdateMaxRecordSize`` / ``MaxRecordSizeInKiB`` (records up to 10 MiB) and
``StreamARN`` addressing. kinesis-local ignores ``DryRun`` (the probe is written), which is
what the producer's warning is for; the Python engine honours it. ``AUTO`` streams exist on
the Python engine only (of the local engines; kinesalite has none of these features).
"""

from __future__ import annotations

import logging
import uuid

import pytest

from kinesis_trio import KinesisClient, Producer, ProducerConfig, StaticCredentials, deaggregate
from tests.support.emulators import EMULATOR_FIXTURES, EmulatorEndpoint

# its engine comes through getfixturevalue, which the marking hook cannot see
pytestmark = [pytest.mark.anyio, pytest.mark.integration]

CREDS = StaticCredentials("AKIDLOCAL", "local-secret")
MIB = 1024 * 1024


def client_for(emulator: EmulatorEndpoint, request_timeout: float = 6.0) -> KinesisClient:
    return KinesisClient(
        region_name="us-east-1",
        endpoint_url=emulator.endpoint_url,
        credentials=CREDS,
        request_timeout=request_timeout,
    )


async def new_stream(emulator: EmulatorEndpoint, shards: int, kib: int | None = None) -> str:
    """A fresh stream; with ``kib``, its record limit raised by UpdateMaxRecordSize.
    Returns its ARN (from DescribeStreamSummary)."""
    name = f"it26-{uuid.uuid4().hex[:12]}"
    async with client_for(emulator) as client:
        await client.create_stream(name, shards)
        summary = await client.wait_for_stream(name)
        arn = str(summary["StreamARN"])
        if kib is not None:
            await client.call("UpdateMaxRecordSize", {"StreamARN": arn, "MaxRecordSizeInKiB": kib})
            await client.wait_for_stream(name)
    return arn


async def read_users(emulator: EmulatorEndpoint, name: str) -> list[bytes]:
    # A long timeout: records of 9 MiB come back from a busy kinesis-local in more than the
    # default's 12 s for a GetRecords (a busy machine's slowness, not the test's subject).
    async with client_for(emulator, request_timeout=120.0) as client:
        shards = await client.read_all(name)
    return [
        u.data for records in shards.values() for r in records for u in deaggregate(r["Data"], "")
    ]


@pytest.fixture(params=["kinesis-local", "python"])
def engine(request: pytest.FixtureRequest) -> EmulatorEndpoint:
    """kinesis-local and the Python engine: the local engines with the 2026 features."""
    endpoint = request.getfixturevalue(EMULATOR_FIXTURES[request.param])
    assert isinstance(endpoint, EmulatorEndpoint)
    return endpoint


async def test_records_up_to_10_mib_by_arn(
    engine: EmulatorEndpoint, caplog: pytest.LogCaptureFixture
) -> None:
    kinesis_local = engine
    arn = await new_stream(kinesis_local, 2, kib=10240)
    name = arn.rpartition("/")[2]
    big = [bytes([65 + i]) * (9 * MIB) for i in range(2)]
    small = [b"small-%d" % i for i in range(200)]
    with caplog.at_level(logging.WARNING, logger="kinesis_trio"):
        async with Producer(
            stream_arn=arn,
            region_name="us-east-1",
            endpoint_url=kinesis_local.endpoint_url,
            credentials=CREDS,
            config=ProducerConfig(request_timeout=60.0, check_access=True),
        ) as producer:
            assert producer.record_limit() == 10 * MIB
            outcomes = [await producer.put(data, f"big-{i}") for i, data in enumerate(big)]
            outcomes += [await producer.put(data, f"k{i % 16}") for i, data in enumerate(small)]
            with pytest.raises(ValueError, match="over max_record_size"):
                await producer.put(b"x" * (10 * MIB), "k")
            await producer.flush()
    results = [await o.wait() for o in outcomes]
    assert all(r.ok for r in results), [r.error_code for r in results if not r.ok][:3]
    assert all(r.stream_name == name for r in results)
    stored = await read_users(kinesis_local, name)
    probe = [d for d in stored if d == b""]
    assert sorted(d for d in stored if d) == sorted(big + small)
    ignored = any("dry_run_ignored" in r.getMessage() for r in caplog.records)
    if engine.kind == "kinesis-local":
        # kinesis-local ignores DryRun: the probe was written, and the producer said so
        assert len(probe) == 1 and ignored
    else:  # the Python engine answers DryRunOperationException: nothing written
        assert probe == [] and not ignored


async def test_a_stream_of_1_mib_refuses_larger_records_at_put(engine: EmulatorEndpoint) -> None:
    kinesis_local = engine
    arn = await new_stream(kinesis_local, 1)
    name = arn.rpartition("/")[2]
    async with Producer(
        name,
        region_name="us-east-1",
        endpoint_url=kinesis_local.endpoint_url,
        credentials=CREDS,
    ) as producer:
        assert producer.record_limit() == MIB
        with pytest.raises(ValueError, match=r"MaxRecordSizeInKiB 1024"):
            await producer.put(b"x" * (3 * MIB // 2), "k")
        outcome = await producer.put(b"fits", "k")
    assert (await outcome.wait()).ok


async def test_an_auto_stream_on_the_python_engine(python_engine: EmulatorEndpoint) -> None:
    """CreateStream with ``RecordDistributionStrategy: AUTO`` (botocore's CreateStreamInput
    member): records without keys are accepted and placed by the service; aggregation off."""
    name = f"auto-{uuid.uuid4().hex[:12]}"
    async with client_for(python_engine) as client:
        await client.call(
            "CreateStream",
            {
                "StreamName": name,
                "StreamModeDetails": {"StreamMode": "ON_DEMAND"},
                "RecordDistributionStrategy": "AUTO",
            },
        )
        summary = await client.wait_for_stream(name)
        assert summary["RecordDistributionStrategy"] == "AUTO"
    async with Producer(
        name,
        region_name="us-east-1",
        endpoint_url=python_engine.endpoint_url,
        credentials=CREDS,
        config=ProducerConfig(check_access=True),
    ) as producer:
        outcomes = [await producer.put(b"auto-%d" % i) for i in range(400)]
        await producer.flush()
    results = [await o.wait() for o in outcomes]
    assert all(r.ok for r in results)
    assert len({r.shard_id for r in results}) > 1  # placed across the open shards
    async with client_for(python_engine) as client:
        shards = await client.read_all(name)
    stored = [r for records in shards.values() for r in records]
    assert sorted(r["Data"] for r in stored) == sorted(b"auto-%d" % i for i in range(400))
    assert all("PartitionKey" not in r for r in stored)  # not aggregated, sent without keys
