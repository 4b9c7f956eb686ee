"""Fakes with state to save and load, and the check that a loaded one is the same."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from kinesis_trio.testing import FakeKinesis, Faults
from kinesis_trio.testing._persist import StateStore
from tests.support.helpers import connect, entry

MAX_HASH = 2**128 - 1


async def populated() -> FakeKinesis:
    """Streams of each kind, written to, split, merged and rescaled, written to again."""
    fake = FakeKinesis(faults=Faults(seed=4))
    fake.create_stream("prov", 3, max_record_size_kib=2048, channel_count=2)
    fake.create_stream("od", 2, on_demand=True)
    fake.create_stream("auto", 2, on_demand=True, record_distribution_strategy="AUTO")
    fake.create_stream("empty")
    async with connect(fake) as client:
        await client.put_records("prov", [entry(b"p%d" % i, f"k{i}") for i in range(30)])
        edges = [entry(b"", "low", ehk=0), entry(b"\x00\xff" * 9, "high", ehk=MAX_HASH)]
        await client.put_records("prov", edges)
        await client.put_records("od", [entry(b"o%d" % i, f"k{i}") for i in range(10)])
        key_less = [entry(b"a%d" % i, None) for i in range(12)]
        await client.put_records("auto", [*key_less, entry(b"kept", "pk", ehk=7)])
        low = fake.streams["prov"].shards[0]
        await client.split_shard("prov", low.shard_id, str((low.start + low.end) // 2))
        await client.merge_shards("prov", "shardId-000000000001", "shardId-000000000002")
        await client.update_shard_count("od", 4)
        await client.put_records("prov", [entry(b"q%d" % i, f"k{i}") for i in range(20)])
        await client.put_records("od", [entry(b"r%d" % i, f"k{i}") for i in range(10)])
        await client.put_records("auto", [entry(b"b%d" % i, None) for i in range(6)])
    return fake


def reopened(path: Path) -> FakeKinesis:
    """A new fake loaded from the store at ``path`` (closed again)."""
    fake = FakeKinesis()
    store = StateStore(path)
    try:
        assert store.load(fake) is True
    finally:
        store.close()
    return fake


def same_state(loaded: FakeKinesis, fake: FakeKinesis) -> None:
    """The same streams, shards and records (arrival times as wall-clock times)."""
    assert sorted(loaded.streams) == sorted(fake.streams)
    # (a loaded counter also passes the starting numbers of empty shards, never used)
    assert fake._last_seq <= loaded._last_seq <= fake._last_seq + 1
    for name, stream in fake.streams.items():
        again = loaded.streams[name]
        assert [replace(s, records=[]) for s in again.shards] == [
            replace(s, records=[]) for s in stream.shards
        ]  # ranges, lineage, sequence number ranges
        for shard, before in zip(again.shards, stream.shards, strict=True):
            assert [replace(r, arrival=0.0) for r in shard.records] == [
                replace(r, arrival=0.0) for r in before.records
            ]
            assert all(
                abs(r.arrival + loaded.clock_offset - b.arrival - fake.clock_offset) < 1e-5
                for r, b in zip(shard.records, before.records, strict=True)
            )
        fields: tuple[str, ...] = ("mode", "max_record_size", "record_distribution_strategy")
        fields += ("channel_count", "created", "next_shard", "retention_hours")
        assert [getattr(again, f) for f in fields] == [getattr(stream, f) for f in fields]
