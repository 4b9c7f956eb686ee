"""``Producer.put_many``: a batch accepted in one call, against the fake on both backends.

The outcomes come back in order and each resolves on its own; a bad record refuses the
whole batch naming its index; a batch waits as a whole for room, and a wait that is
cancelled accepted nothing; with ``spool_sync="put"`` it returns once the batch is on disk.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from kinesis_trio import deaggregate
from kinesis_trio._shell._batch_puts import BatchRecord
from kinesis_trio.testing import FakeKinesis
from tests.support.helpers import fake_producer
from tests.support.spool import data_on_disk

pytestmark = pytest.mark.anyio


class Gate:
    """A fake hook holding every PutRecords until ``open`` is set."""

    def __init__(self) -> None:
        self.open = anyio.Event()

    async def __call__(self, operation: str, body: dict[str, Any]) -> httpx.Response | None:
        if operation == "PutRecords":
            await self.open.wait()
        return None


def written(fake: FakeKinesis, stream: str = "s") -> list[bytes]:
    return [
        user.data
        for record in fake.records(stream)
        for user in deaggregate(
            record.data, record.partition_key, explicit_hash_key=record.explicit_hash_key
        )
    ]


def new_fake(shards: int = 4, hook: Any = None) -> FakeKinesis:
    fake = FakeKinesis(hook)
    fake.create_stream("s", shard_count=shards)
    return fake


async def test_the_outcomes_come_in_order_and_every_record_is_written_once() -> None:
    fake = new_fake()
    records = [(b"r%04d" % i, f"k{i % 37}") for i in range(500)]
    async with fake_producer(fake, record_max_buffered_time=0.01) as producer:
        outcomes = await producer.put_many(records)
        assert [o.data for o in outcomes] == [r[0] for r in records]
        assert [o.partition_key for o in outcomes] == [r[1] for r in records]
        extra: list[BatchRecord] = [(bytearray(b"x1"), "k"), (b"x2", "k", "7")]
        more = producer.put_many_nowait(iter(extra))
        results = [await o.wait() for o in outcomes + more]
    assert all(r.ok for r in results)
    assert sorted(written(fake)) == sorted([r[0] for r in records] + [b"x1", b"x2"])
    assert sum(1 for d in written(fake) if d == b"r0007") == 1


@pytest.mark.parametrize(
    ("bad", "error", "words"),
    [
        (("text", "k"), TypeError, "data must be bytes"),
        ((b"x" * 5000, "k"), ValueError, "record too large"),
        ((b"x", 7), TypeError, "partition_key"),
        ((b"x", "k", "not-a-number"), ValueError, "explicit_hash_key"),
        ((b"x", None), ValueError, "partition_key is required"),
        ((b"x",), TypeError, "a record is a (data, partition_key)"),
        (b"x", TypeError, "a record is a (data, partition_key)"),
    ],
)
async def test_a_bad_record_refuses_the_whole_batch_naming_its_index(
    bad: Any, error: type[Exception], words: str
) -> None:
    fake = new_fake()
    records: list[Any] = [(b"ok%d" % i, "k") for i in range(6)]
    records.insert(4, bad)
    async with fake_producer(fake, max_record_size=4096) as producer:
        with pytest.raises(error, match=r"^records\[4\]: ") as caught:
            await producer.put_many(records)
        assert words in str(caught.value)
        with pytest.raises(error, match=r"^records\[4\]: "):
            producer.put_many_nowait(records)
        assert producer.outstanding_records == 0
        await producer.flush()
    assert written(fake) == []


async def test_a_batch_larger_than_the_caps_is_refused_at_once() -> None:
    fake = new_fake()
    async with fake_producer(fake, max_outstanding_records=10) as producer:
        with pytest.raises(ValueError, match="max_outstanding_records"):
            await producer.put_many([(b"r", "k")] * 11)
        assert producer.outstanding_records == 0
        assert len(await producer.put_many([(b"r", "k")] * 10)) == 10


@pytest.mark.virtual_time
async def test_a_batch_waits_as_a_whole_for_room_and_a_cancelled_wait_accepts_nothing() -> None:
    gate = Gate()
    fake = new_fake(hook=gate)
    config: dict[str, Any] = {"max_outstanding_records": 10, "record_max_buffered_time": 0.01}
    async with fake_producer(fake, **config) as producer:
        head = [(b"first%d" % i, "k") for i in range(7)]
        first = await producer.put_many(head)
        batch = [(b"batch%d" % i, "k") for i in range(4)]
        with pytest.raises(anyio.WouldBlock):
            producer.put_many_nowait(batch)
        assert producer.outstanding_records == 7  # none of it: 3 would have fit
        # cancelled while it waits: nothing accepted
        with anyio.move_on_after(0.05) as scope:
            await producer.put_many([(b"cancelled%d" % i, "k") for i in range(4)])
        assert scope.cancelled_caught
        assert producer.outstanding_records == 7
        # waits until the whole batch fits, then takes it at once
        got: list[Any] = []

        async def put_batch() -> None:
            got.extend(await producer.put_many(batch))

        async with anyio.create_task_group() as tg:
            tg.start_soon(put_batch)
            await anyio.sleep(0.05)
            assert got == [] and producer.outstanding_records == 7
            gate.open.set()
        assert [o.data for o in got] == [r[0] for r in batch]
        results = [await o.wait() for o in first + got]
    assert all(r.ok for r in results)
    data = written(fake)
    assert sorted(data) == sorted(r[0] for r in head + batch)
    assert not any(d.startswith(b"cancelled") for d in data)


async def test_each_record_of_a_batch_resolves_on_its_own() -> None:
    """Entries of one request answered apart (a fatal KMS error for some): each outcome
    says its own record's fate."""

    async def hook(operation: str, body: dict[str, Any]) -> httpx.Response | None:
        if operation != "PutRecords":
            return None
        entries = []
        for i, entry in enumerate(body["Records"]):
            if base64.b64decode(entry["Data"]).startswith(b"doomed"):
                entries.append(
                    {"ErrorCode": "KMSAccessDeniedException", "ErrorMessage": "denied (test)"}
                )
            else:
                entries.append({"SequenceNumber": str(i), "ShardId": "shardId-000000000000"})
        failed = sum(1 for e in entries if "ErrorCode" in e)
        return httpx.Response(200, json={"FailedRecordCount": failed, "Records": entries})

    fake = new_fake(shards=1, hook=hook)
    records = [(b"doomed%d" % i if i % 3 == 0 else b"fine%d" % i, "k") for i in range(30)]
    async with fake_producer(
        fake, aggregation_enabled=False, record_max_buffered_time=0.01
    ) as producer:
        outcomes = await producer.put_many(records)
        results = [await o.wait() for o in outcomes]
    for (data, _), result in zip(records, results, strict=True):
        if data.startswith(b"doomed"):
            assert not result.ok and result.error_code == "KMSAccessDeniedException"
        else:
            assert result.ok


async def test_a_batch_to_another_stream_loads_it() -> None:
    fake = new_fake()
    fake.create_stream("other", shard_count=2)
    async with fake_producer(fake, record_max_buffered_time=0.01) as producer:
        outcomes = await producer.put_many(
            [(b"o%d" % i, "k") for i in range(5)], stream_name="other"
        )
        assert {o.stream for o in outcomes} == {"other"}
        results = [await o.wait() for o in outcomes]
    assert all(r.ok for r in results)
    assert sorted(written(fake, "other")) == [b"o%d" % i for i in range(5)]


async def test_a_closed_producer_refuses_a_batch() -> None:
    producer = fake_producer(new_fake())
    with pytest.raises(Exception, match="not open"):
        await producer.put_many([(b"r", "k")])


async def test_with_spool_sync_put_the_batch_is_on_disk_when_it_returns(tmp_path: Path) -> None:
    fake = new_fake(shards=1)
    spool = tmp_path / "spool"
    config: dict[str, Any] = {
        "spool_sync": "put",
        "record_max_buffered_time": 1e5,
        "record_ttl": 1e6,
    }
    async with fake_producer(fake, spool_dir=spool, **config) as producer:
        outcomes = await producer.put_many([(b"s%d" % i, "k") for i in range(20)])
        assert not any(o.done() for o in outcomes)  # unsent, held by the linger
        assert data_on_disk(spool) == [b"s%d" % i for i in range(20)]
        with pytest.raises(ValueError, match=r"^records\[1\]: record too large"):
            await producer.put_many([(b"a", "k"), (b"x" * 2_000_000, "k")])
        await producer.flush()
        assert all(o.result().ok for o in outcomes)
    assert data_on_disk(spool) == []
