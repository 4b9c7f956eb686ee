"""The producer against real emulators (kinesalite and kinesis-local, started by fixtures).

Thousands of records of mixed sizes and keys are written, every shard is read back with
GetRecords, de-aggregated, and checked: nothing lost, nothing duplicated, every sub-record
inside its shard's hash key range, every Outcome naming where its record landed.
"""

from __future__ import annotations

import random
import uuid
from typing import Any

import pytest

from kinesis_trio import (
    Outcome,
    Producer,
    ProducerConfig,
    ResourceNotFoundError,
    StaticCredentials,
)
from tests.support.emulators import EmulatorEndpoint, client_for, new_stream
from tests.support.helpers import check_landed, read_stream

pytestmark = pytest.mark.anyio

CREDS = StaticCredentials("AKIDLOCAL", "local-secret")


async def read_back(emulator: EmulatorEndpoint, name: str) -> list[tuple[Any, ...]]:
    async with client_for(emulator) as client:
        return await read_stream(client, name)


def mixed_records(n: int, seed: int) -> list[tuple[bytes, str, str | None]]:
    rng = random.Random(seed)
    out: list[tuple[bytes, str, str | None]] = []
    for i in range(n):
        roll = rng.random()
        if roll < 0.005:
            size = rng.randrange(52_000, 120_000)  # over the aggregation size: sent alone
        elif roll < 0.05:
            size = rng.randrange(2_000, 20_000)
        else:
            size = rng.randrange(0, 400)
        data = rng.randbytes(size)
        kind = i % 6
        if kind == 0:
            key, ehk = f"user-{rng.randrange(500)}", None
        elif kind == 1:
            key, ehk = "ключ-é-" + str(rng.randrange(50)), None
        elif kind == 2:
            key, ehk = f"k{rng.randrange(20):03d}" + "x" * 252, None  # 256 characters
        elif kind == 3:
            key, ehk = "routed", str(rng.randrange(2**128))
        elif kind == 4:
            key, ehk = "🦀" * rng.randrange(1, 64), None
        else:
            key, ehk = uuid.UUID(int=rng.getrandbits(128)).hex, None
        out.append((data, key, ehk))
    return out


@pytest.mark.parametrize("aggregation", [True, False], ids=["agg", "noagg"])
async def test_mixed_records_round_trip_through_emulator(
    emulator: EmulatorEndpoint, aggregation: bool
) -> None:
    # kinesis-local gets slow as shards fill and on unaggregated traffic: keep it modest there
    n = 4000 if emulator.kind == "kinesalite" else 1500
    if not aggregation:
        n //= 4
    name = await new_stream(emulator, 4)
    records = mixed_records(n, seed=n + aggregation)
    sent: list[tuple[bytes, str, str | None, Outcome]] = []
    config = ProducerConfig(aggregation_enabled=aggregation, record_max_buffered_time=0.05)
    async with Producer(
        name,
        region_name="us-east-1",
        endpoint_url=emulator.endpoint_url,
        credentials=CREDS,
        config=config,
    ) as producer:
        for data, key, ehk in records:
            sent.append((data, key, ehk, await producer.put(data, key, ehk)))
        await producer.flush()
        assert all(o.done() for *_, o in sent)
    failed = [o.result() for *_, o in sent if not o.result().ok]
    assert failed == []
    check_landed(await read_back(emulator, name), sent)


async def test_missing_stream_raises_from_aenter(emulator: EmulatorEndpoint) -> None:
    with pytest.raises(ResourceNotFoundError):
        async with Producer(
            f"missing-{uuid.uuid4().hex[:8]}",
            region_name="us-east-1",
            endpoint_url=emulator.endpoint_url,
            credentials=CREDS,
        ):
            pytest.fail("entered")


async def test_second_stream_loads_on_first_put(emulator: EmulatorEndpoint) -> None:
    first = await new_stream(emulator, 1)
    second = await new_stream(emulator, 2)
    async with Producer(
        first, region_name="us-east-1", endpoint_url=emulator.endpoint_url, credentials=CREDS
    ) as producer:
        a = await producer.put(b"a", "k")
        b = await producer.put(b"b", "k", stream_name=second)
        with pytest.raises(ResourceNotFoundError):
            await producer.put(b"c", "k", stream_name=f"missing-{uuid.uuid4().hex[:8]}")
        ra, rb = await a.wait(), await b.wait()
    assert ra.ok and rb.ok and ra.stream_name == first and rb.stream_name == second
    assert len(await read_back(emulator, second)) == 1
