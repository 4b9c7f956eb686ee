"""Batching decisions as properties: hypothesis drives the real pipeline over the fake.

For random records and limits: every PutRecords request respects the entry and size limits,
every aggregate respects the aggregation limits and holds records of one shard only, a record
too large to aggregate goes alone, and every record lands exactly once where its outcome says.
"""

from __future__ import annotations

import base64
from typing import Any

import anyio
import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kinesis_trio import deaggregate
from kinesis_trio._core._aggregation import partition_hash_key
from kinesis_trio.testing import FakeKinesis
from tests.support.helpers import check_landed, fake_producer, fake_rows

records_strategy = st.lists(
    st.tuples(
        st.integers(0, 3000),  # data size
        st.one_of(
            st.sampled_from(["a", "b", "c", "ü", "k" * 256]),
            st.text(min_size=1, max_size=20),
        ),
        st.one_of(st.none(), st.integers(0, 2**128 - 1).map(str)),
    ),
    min_size=1,
    max_size=300,
)


def _valid_key(key: str) -> bool:
    try:
        key.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return 1 <= len(key) <= 256


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    records=records_strategy,
    shards=st.integers(1, 5),
    aggregation=st.booleans(),
    agg_max_size=st.integers(64, 8000),
    agg_max_count=st.integers(1, 50),
    coll_max_count=st.integers(1, 500),
    coll_extra=st.integers(0, 20_000),
    backend=st.sampled_from(["trio", "asyncio"]),
)
def test_batching_limits_and_shard_purity(
    records: list[tuple[int, str, str | None]],
    shards: int,
    aggregation: bool,
    agg_max_size: int,
    agg_max_count: int,
    coll_max_count: int,
    coll_extra: int,
    backend: str,
) -> None:
    records = [r for r in records if _valid_key(r[1])]
    max_record_size = 4096
    coll_max_size = max_record_size + coll_extra
    requests: list[list[dict[str, Any]]] = []

    async def hook(operation: str, body: dict[str, Any]) -> httpx.Response | None:
        if operation == "PutRecords":
            requests.append(body["Records"])
        return None

    fake = FakeKinesis(hook=hook)
    fake.create_stream("s", shards)
    sent: list[tuple[bytes, str, str | None, Any]] = []

    async def run() -> None:
        async with fake_producer(
            fake,
            aggregation_enabled=aggregation,
            aggregation_max_size=agg_max_size,
            aggregation_max_count=agg_max_count,
            collection_max_count=coll_max_count,
            collection_max_size=coll_max_size,
            max_record_size=max_record_size,
            max_outstanding_bytes=max_record_size * 8,
        ) as producer:
            for i, (size, key, ehk) in enumerate(records):
                data = bytes([i % 256]) * min(size, max_record_size - len(key.encode()))
                sent.append((data, key, ehk, await producer.put(data, key, ehk)))

    anyio.run(run, backend=backend)

    for request in requests:
        assert 1 <= len(request) <= coll_max_count
        size = sum(
            len(base64.b64decode(e["Data"])) + len(e["PartitionKey"].encode()) for e in request
        )
        assert size <= coll_max_size
        for entry in request:
            blob = base64.b64decode(entry["Data"])
            users = deaggregate(
                blob, entry["PartitionKey"], explicit_hash_key=entry.get("ExplicitHashKey")
            )
            if users and users[0].aggregated:
                assert aggregation
                assert len(blob) <= agg_max_size
                assert 2 <= len(users) <= agg_max_count  # one record goes as a plain record
                owners = {fake_shard(fake, u.hash_key) for u in users}
                outer = int(entry["ExplicitHashKey"])
                assert owners == {fake_shard(fake, outer)}
    check_landed(fake_rows(fake), sent)
    assert len(sent) == len(records)


def fake_shard(fake: FakeKinesis, hash_key: int) -> str:
    return next(s.shard_id for s in fake.open_shards("s") if s.start <= hash_key <= s.end)


def test_partition_hash_key_matches_md5() -> None:
    assert partition_hash_key("a") == int("0cc175b9c0f1b6a831c399e269772661", 16)
