"""The fault suite over the real network path: a fault-injecting HTTP proxy in front of
kinesalite (5xx, throttled entries, resets before and after processing, lost answers,
delays), on trio and asyncio with real clocks. Same invariants as test_faults.py.
"""

from __future__ import annotations

import uuid

import pytest

from kinesis_trio import (
    KinesisClient,
    Outcome,
    Producer,
    ProducerConfig,
    StaticCredentials,
    deaggregate,
)
from tests.support.emulators import EmulatorEndpoint
from tests.support.fault_proxy import FaultProxy
from tests.support.helpers import check_landed_kcl, read_stream, records

FORCED = ("http_500", "http_503", "reset_before", "reset_after", "hang_after", "throttle_entries")

pytestmark = pytest.mark.anyio


async def test_through_a_fault_proxy_in_front_of_kinesalite(
    local_engine: EmulatorEndpoint, double_resolutions: list[Outcome]
) -> None:
    name = f"faults-{uuid.uuid4().hex[:10]}"
    creds = StaticCredentials("AKIDLOCAL", "local-secret")
    direct = KinesisClient(
        region_name="us-east-1", endpoint_url=local_engine.endpoint_url, credentials=creds
    )
    async with direct:
        await direct.create_stream(name, 4)
        await direct.wait_for_stream(name)
    n = 20_000
    sent: list[tuple[bytes, str, str | None, Outcome]] = []
    with FaultProxy(local_engine.endpoint_url, seed=3) as proxy:
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
        # each kind at least once, whatever the timing (the random draws add more)
        proxy.force_next(*FORCED)
        config = ProducerConfig(
            aggregation_max_size=4096,
            collection_max_count=40,
            request_timeout=1.0,
            connect_timeout=1.0,
            record_max_buffered_time=0.02,
            # nothing expires: every record must be confirmed, however long a busy machine
            # (1 s timeouts against a slow emulator) takes to (the 30 s default did not)
            record_ttl=3600.0,
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
    for kind in FORCED:
        assert stats[kind] > 0, stats
    async with KinesisClient(
        region_name="us-east-1", endpoint_url=local_engine.endpoint_url, credentials=creds
    ) as client:
        rows = await read_stream(client, name)
    summary = check_landed_kcl(rows, sent)
    assert summary["ok"] == n, summary
    # Every copy nobody confirmed came from a lost answer, or holds only records flagged
    # possible_duplicate: a request the producer's own 1 s timeout ended (on a busy machine,
    # answers the proxy did pass on came later than that).
    confirmed = {(o.result().shard_id, o.result().sequence_number) for *_, o in sent}
    flagged = {data for data, *_, o in sent if o.result().possible_duplicate}
    for shard_id, _, _, data, pk, ehk, seq in rows:
        if (shard_id, seq) in confirmed or (shard_id, seq) in lost:
            continue
        users = deaggregate(data, pk, explicit_hash_key=ehk, sequence_number=seq)
        assert all(u.data in flagged for u in users), "an unconfirmed copy not from a lost answer"
