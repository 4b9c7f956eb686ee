"""The fault suite over the real network path: a fault-injecting HTTP proxy in front of
kinesalite (5xx, throttled entries, resets before and after processing, lost answers,
delays), on trio and asyncio with real clocks. Same invariants as test_faults.py.
"""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from kinesis_trio import KinesisClient, Outcome, Producer, ProducerConfig, StaticCredentials
from kinesis_trio._outcome import Outcome as OutcomeImpl

from .emulator_fixtures import EmulatorEndpoint
from .fault_proxy import FaultProxy
from .helpers import check_landed_kcl
from .test_faults import records

pytestmark = pytest.mark.anyio


@pytest.fixture
def double_resolutions(monkeypatch: pytest.MonkeyPatch) -> list[Outcome]:
    seen: list[Outcome] = []
    original = OutcomeImpl._resolve

    def resolve(self: OutcomeImpl, resolution: Any, sub: int = 0) -> bool:
        done = original(self, resolution, sub)
        if not done:
            seen.append(self)
        return done

    monkeypatch.setattr(OutcomeImpl, "_resolve", resolve)
    return seen


async def test_through_a_fault_proxy_in_front_of_kinesalite(
    kinesalite: EmulatorEndpoint, double_resolutions: list[Outcome]
) -> None:
    name = f"faults-{uuid.uuid4().hex[:10]}"
    creds = StaticCredentials("AKIDLOCAL", "local-secret")
    direct = KinesisClient(
        region_name="us-east-1", endpoint_url=kinesalite.endpoint_url, credentials=creds
    )
    async with direct:
        await direct.create_stream(name, 4)
        await direct.wait_for_stream(name)
    n = 20_000
    sent: list[tuple[bytes, str, str | None, Outcome]] = []
    with FaultProxy(kinesalite.endpoint_url, seed=3) as proxy:
        proxy.set_faults(
            http_500=0.03,
            http_503=0.03,
            throttle_entries=0.05,
            reset_before=0.03,
            reset_after=0.03,
            hang_after=0.03,
            delay=0.001,
            delay_jitter=0.004,
        )
        config = ProducerConfig(
            aggregation_max_size=4096,
            collection_max_count=40,
            request_timeout=1.0,
            connect_timeout=1.0,
            record_max_buffered_time=0.02,
        )
        async with Producer(
            name, region_name="us-east-1", endpoint_url=proxy.url, credentials=creds, config=config
        ) as producer:
            for data, key in records(n, seed=99):
                sent.append((data, key, None, await producer.put(data, key)))
            await producer.flush()
        stats = proxy.stats
        lost = {(r["ShardId"], r["SequenceNumber"]) for r in proxy.ambiguous_records()}
        assert proxy.errors == []
    assert double_resolutions == []
    for kind in (
        "http_500",
        "http_503",
        "reset_before",
        "reset_after",
        "hang_after",
        "throttle_entries",
    ):
        assert stats[kind] > 0, stats
    async with KinesisClient(
        region_name="us-east-1", endpoint_url=kinesalite.endpoint_url, credentials=creds
    ) as client:
        shards = {s["ShardId"]: s for s in await client.list_shards(name, at_latest=False)}
        rows = []
        for shard_id, recs in (await client.read_all(name)).items():
            rng = shards[shard_id]["HashKeyRange"]
            for r in recs:
                rows.append(
                    (
                        shard_id,
                        int(rng["StartingHashKey"]),
                        int(rng["EndingHashKey"]),
                        r["Data"],
                        r["PartitionKey"],
                        None,
                        r["SequenceNumber"],
                    )
                )
    summary = check_landed_kcl(rows, sent)
    assert summary["ok"] == n, summary
    confirmed = {(o.result().shard_id, o.result().sequence_number) for *_, o in sent}
    for row in rows:
        if (row[0], row[6]) not in confirmed:
            assert (row[0], row[6]) in lost, "an unconfirmed copy not from a lost answer"
