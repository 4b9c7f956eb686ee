"""The fault suite: 100,000+ records through every fault at once, then the invariants.

1. Against the in-memory fake with AWS per-shard limits, random faults of every kind
   (throttled and failed entries, 500/503, hangs before and after processing, resets before
   and after processing, latency) and a shard split in the middle; on trio under MockClock
   and on asyncio.
2. Through a fault-injecting HTTP proxy in front of a real emulator: test_faults_proxy.py.

Invariants checked (see helpers.check_landed_kcl): every accepted record resolves exactly
once; every ok outcome's record is in the stream at the shard and sequence number it names
and inside that shard's range; every record not in the stream has a failed outcome;
duplicates only where an ambiguous failure (a lost answer) happened, and only of records
the fake or the proxy says were written by such a request.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from kinesis_trio import Outcome, deaggregate
from kinesis_trio.testing import FakeKinesis, Faults
from tests.support.helpers import check_landed_kcl, fake_producer, fake_rows, records

pytestmark = [pytest.mark.anyio, pytest.mark.virtual_time]


ALL_FAULTS = dict(
    throttle_entries=0.02,
    internal_failure_entries=0.01,
    http_500=0.02,
    http_503=0.02,
    hang_before=0.01,
    hang_after=0.01,
    reset_before=0.01,
    reset_after=0.01,
    latency=0.002,
    latency_jitter=0.004,
)


#: Injected once each at a fixed point of the run, on top of the random draws.
FORCED = (
    "http_500",
    "http_503",
    "hang_before",
    "hang_after",
    "reset_before",
    "reset_after",
    "throttle_entries",
)


@pytest.mark.scenario
@pytest.mark.parametrize("aggregation", [True, False], ids=["agg", "plain"])
async def test_hundred_thousand_records_through_every_fault(
    aggregation: bool, double_resolutions: list[Outcome]
) -> None:
    n = 100_000 if aggregation else 50_000  # 150,000 records per backend in all
    shards = 8
    rate = 1000  # AWS's limits
    fake = FakeKinesis(
        enforce_limits=True,
        records_per_second=rate,
        bytes_per_second=1_048_576 * rate // 1000,
        faults=Faults(**ALL_FAULTS, seed=n + aggregation),  # type: ignore[arg-type]
    )
    fake.create_stream("s", shards)
    sent: list[tuple[bytes, str, str | None, Outcome]] = []
    config: dict[str, Any] = dict(
        aggregation_enabled=aggregation,
        aggregation_max_size=8192,  # small aggregates: many requests, many faults
        collection_max_count=100,
        request_timeout=1.0,
        connect_timeout=1.0,
        record_ttl=120.0,
        rate_limit=150,
        max_outstanding_records=20_000,
    )
    async with fake_producer(fake, **config) as producer:
        for i, (data, key) in enumerate(records(n, seed=n)):
            if i == n // 4:
                # Every kind at least once, whatever the random draws give.
                for kind in FORCED:
                    fake.fail_next(1, kind)
            if i == n // 2:
                first = fake.open_shards("s")[0]
                fake.split_shard("s", first.shard_id, (first.start + first.end) // 2 + 1)
            sent.append((data, key, None, await producer.put(data, key)))
        await producer.flush()
    assert double_resolutions == []
    assert all(o.done() for *_, o in sent)
    summary = check_landed_kcl(fake_rows(fake, "s"), sent)
    # every extra copy in the stream was written by a request whose answer was lost, or is
    # an aggregate that landed across a reshard (KCL consumers drop it; its records were
    # sent again)
    confirmed = Counter(
        (o.result().shard_id, o.result().sequence_number) for *_, o in sent if o.result().ok
    )
    lost_answers = {e for event in fake.ambiguous_requests for e in event.entries}
    for shard_id, start, end, data, pk, ehk, seq in fake_rows(fake, "s"):
        where = (shard_id, seq)
        if where in confirmed or where in lost_answers:
            continue
        users = deaggregate(data, pk, explicit_hash_key=ehk, sequence_number=seq)
        assert any(not start <= u.hash_key <= end for u in users), where
    kinds = fake.stats.faults
    assert all(kinds[k] > 0 for k in FORCED if k != "throttle_entries"), kinds
    assert fake.stats.entries_throttled > 0
    assert summary["ok"] >= 0.999 * n, summary
