"""Resharding under load over HTTP (kinesis-local, the Python engine): split, merge, update count.

Records are written throughout; the stream is resharded three times in the middle. Every
shard (closed ones too) is read back and checked as a KCL consumer would: nothing lost,
every confirmed record where its outcome says and inside that shard's range.
"""

from __future__ import annotations

import uuid

import anyio
import pytest

from kinesis_trio import KinesisClient, Outcome, Producer, ProducerConfig, StaticCredentials
from tests.support.emulators import EMULATOR_FIXTURES, EmulatorEndpoint
from tests.support.helpers import check_landed_kcl, read_stream

# its emulator comes through getfixturevalue, which the marking hook cannot see
pytestmark = [pytest.mark.anyio, pytest.mark.integration]

CREDS = StaticCredentials("AKIDLOCAL", "local-secret")


@pytest.fixture(params=["kinesis-local", "python"])
def engine(request: pytest.FixtureRequest) -> EmulatorEndpoint:
    endpoint = request.getfixturevalue(EMULATOR_FIXTURES[request.param])
    assert isinstance(endpoint, EmulatorEndpoint)
    return endpoint


async def test_split_merge_and_update_shard_count_mid_run(engine: EmulatorEndpoint) -> None:
    kinesis_local = engine
    name = f"reshard-{uuid.uuid4().hex[:10]}"
    client = KinesisClient(
        region_name="us-east-1", endpoint_url=kinesis_local.endpoint_url, credentials=CREDS
    )
    sent: list[tuple[bytes, str, str | None, Outcome]] = []
    async with client:
        await client.create_stream(name, 2)
        await client.wait_for_stream(name)
        config = ProducerConfig(record_max_buffered_time=0.02)
        async with Producer(
            name,
            region_name="us-east-1",
            endpoint_url=kinesis_local.endpoint_url,
            credentials=CREDS,
            config=config,
        ) as producer:
            total = 3000

            async def writer() -> None:
                for i in range(total):
                    data = b"rec-%d" % i
                    key = f"user-{i % 613}"
                    sent.append((data, key, None, await producer.put(data, key)))
                    if i % 25 == 0:
                        await anyio.sleep(0.005)

            async def reshard() -> None:
                async def wait_for(count: int) -> None:
                    while len(sent) < count:  # noqa: ASYNC110 - polling a list
                        await anyio.sleep(0.01)

                await wait_for(600)
                shards = await client.list_shards(name)
                first = min(shards, key=lambda s: int(s["HashKeyRange"]["StartingHashKey"]))
                lo = int(first["HashKeyRange"]["StartingHashKey"])
                hi = int(first["HashKeyRange"]["EndingHashKey"])
                await client.split_shard(name, first["ShardId"], (lo + hi) // 2 + 1)
                await client.wait_for_stream(name)
                await wait_for(1400)
                shards = sorted(
                    await client.list_shards(name),
                    key=lambda s: int(s["HashKeyRange"]["StartingHashKey"]),
                )
                await client.merge_shards(name, shards[1]["ShardId"], shards[2]["ShardId"])
                await client.wait_for_stream(name)
                await wait_for(2200)
                await client.update_shard_count(name, 4)
                await client.wait_for_stream(name)

            async with anyio.create_task_group() as tg:
                tg.start_soon(writer)
                tg.start_soon(reshard)
            await producer.flush()
            open_now = {s["ShardId"] for s in await client.list_shards(name)}
            last = await producer.put(b"last", "last")
            sent.append((b"last", "last", None, last))
            await last.wait()
        results = [o.result() for *_, o in sent]
        failures = [r for r in results if not r.ok]
        assert failures == []
        summary = check_landed_kcl(await read_stream(client, name), sent)
        assert summary["ok"] == len(sent)
        all_shards = await client.list_shards(name, at_latest=False)
        assert len(all_shards) > 4  # the reshards really happened
        assert len(open_now) == 4
