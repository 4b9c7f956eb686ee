"""The producer on the service of 2026, through the fake (no emulator has AUTO streams or
DryRun; kinesis-local's 10 MiB records and StreamARN are tested in test_integration_2026).

Sources: botocore's Kinesis model 1.43 (``RecordDistributionStrategy``: on AUTO the service
"ignores any partition key and ExplicitHashKey that producers supply", the key is optional;
``DryRun``: "Checks if your request will succeed", answered by ``DryRunOperationException``;
``MaxRecordSizeInKiB``; ``ChannelCount``; ``StreamARN``) and the AWS developer guide (KPL
aggregation "is not supported on streams configured with service-managed record
distribution").
"""

from __future__ import annotations

import logging

import pytest

from kinesis_trio import (
    AccessDeniedError,
    Outcome,
    Producer,
    ProducerConfig,
    ResourceNotFoundError,
    deaggregate,
)
from kinesis_trio.testing import ACCOUNT_ID, FakeKinesis, Faults
from tests.support.helpers import CREDS, fake_producer

pytestmark = pytest.mark.anyio

MIB = 1024 * 1024


def messages(caplog: pytest.LogCaptureFixture, event: str) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name.startswith("kinesis_trio") and f"event='{event}'" in r.getMessage()
    ]


def stored_users(fake: FakeKinesis, name: str = "s") -> list[tuple[bytes, str, str, bool]]:
    """(data, shard id, sequence number, aggregated) of every user record the fake holds."""
    out = []
    for shard in fake.streams[name].shards:
        for r in shard.records:
            for user in deaggregate(r.data, r.partition_key):
                out.append((user.data, shard.shard_id, r.sequence_number, user.aggregated))
    return out


def assert_each_landed_once_where_said(fake: FakeKinesis, outcomes: list[Outcome]) -> None:
    users = stored_users(fake)
    datas = [u[0] for u in users]
    assert len(datas) == len(set(datas)), "a record was written twice"
    where = {u[0]: (u[1], u[2]) for u in users}
    for outcome in outcomes:
        result = outcome.result()
        assert result.ok, result
        data = outcome.data  # the producer keeps plain records' data until resolved
        if data is not None:
            assert where[data] == (result.shard_id, result.sequence_number)
    assert len(datas) == len(outcomes)


async def test_an_auto_stream_takes_records_without_keys_and_never_aggregates(
    caplog: pytest.LogCaptureFixture,
) -> None:
    fake = FakeKinesis()
    fake.rng.seed(3)
    fake.create_stream("s", 4, on_demand=True, record_distribution_strategy="AUTO")
    with caplog.at_level(logging.INFO, logger="kinesis_trio"):
        async with fake_producer(fake) as producer:
            outcomes = [await producer.put(b"r%d" % i) for i in range(300)]
            outcomes += [await producer.put(b"k%d" % i, partition_key="same") for i in range(300)]
            await producer.flush()
    assert_each_landed_once_where_said(fake, outcomes)
    assert not any(u[3] for u in stored_users(fake))  # no aggregate
    keyed = [r for s in fake.streams["s"].shards for r in s.records if r.partition_key]
    assert len(keyed) == 300 and {r.partition_key for r in keyed} == {"same"}
    assert len({r.shard_id for r in keyed}) == 4  # the service placed them, not the key
    said = messages(caplog, "aggregation_off")
    assert len(said) == 1 and "AUTO" in said[0]


async def test_aggregation_enabled_true_does_not_override_auto(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The issue's case: aggregates on an AUTO stream land on any shard; with the KCL's rule
    their records were sent again (each written twice for a reader without that rule)."""
    fake = FakeKinesis()
    fake.create_stream("s", 4, on_demand=True, record_distribution_strategy="AUTO")
    with caplog.at_level(logging.INFO, logger="kinesis_trio"):
        async with fake_producer(fake, aggregation_enabled=True) as producer:
            outcomes = [await producer.put(b"r%d" % i, f"key{i % 256}") for i in range(3000)]
            await producer.flush()
    assert_each_landed_once_where_said(fake, outcomes)
    assert not any(u[3] for u in stored_users(fake))
    assert len(messages(caplog, "setting_overridden")) == 1


async def test_a_keyed_stream_refuses_a_record_without_a_key_and_keeps_working() -> None:
    fake = FakeKinesis()
    fake.create_stream("s", 2)
    async with fake_producer(fake) as producer:
        with pytest.raises(ValueError, match="partition_key is required"):
            await producer.put(b"x")
        outcome = await producer.put(b"y", "k")
    assert (await outcome.wait()).ok


async def test_a_stream_switched_to_auto_and_back_mid_run_keeps_every_outcome_true() -> None:
    fake = FakeKinesis()
    fake.rng.seed(5)
    fake.create_stream("s", 4, on_demand=True)
    async with fake_producer(fake, shard_map_refresh_interval=0.5) as producer:
        outcomes = [await producer.put(b"a%d" % i, f"key{i}") for i in range(500)]
        await producer.flush()
        fake.update_record_distribution_strategy("s", "AUTO")
        before = len(stored_users(fake))
        # keyed records put now still go aggregated until the refresh notices the switch
        # (or a write that lands elsewhere reveals it)
        outcomes += [await producer.put(b"b%d" % i, f"key{i}") for i in range(500)]
        await producer.flush()
        while not producer._engine._streams["s"].auto:  # type: ignore[union-attr]
            outcomes.append(await producer.put(b"c%d" % len(outcomes), "k"))
            await producer.flush()
        keyless = [await producer.put(b"d%d" % i) for i in range(50)]
        await producer.flush()
        fake.update_record_distribution_strategy("s", "USER_PARTITION_KEY")
        while producer._engine._streams["s"].auto:  # type: ignore[union-attr]
            outcomes.append(await producer.put(b"e%d" % len(outcomes), "k"))
            await producer.flush()
        with pytest.raises(ValueError, match="partition_key is required"):
            await producer.put(b"no key")
        outcomes += [await producer.put(b"f%d" % i, f"key{i}") for i in range(200)]
        await producer.flush()
    assert before == 500
    results = [o.result() for o in outcomes + keyless]
    assert all(r.ok for r in results)
    # A KCL reader sees each record where its outcome says: an aggregate written under AUTO
    # outside its members' ranges was sent again (the KCL rule), never reported written.
    rows = {(u[1], u[2]) for u in stored_users(fake)}
    assert all((r.shard_id, r.sequence_number) in rows for r in results)
    # after the switch back, keyed records are aggregated again
    assert any(u[3] and u[0].startswith(b"f") for u in stored_users(fake))


async def test_streams_that_feed_channels_get_plain_records_unless_kept(
    caplog: pytest.LogCaptureFixture,
) -> None:
    for keep in (False, True):
        fake = FakeKinesis()
        fake.create_stream("s", 1, on_demand=True, channel_count=1)
        with caplog.at_level(logging.INFO, logger="kinesis_trio"):
            async with fake_producer(fake, channel_aggregation=keep) as producer:
                outcomes = [await producer.put(b"r%d" % i, f"k{i}") for i in range(100)]
                await producer.flush()
        assert all(o.result().ok for o in outcomes)
        aggregated = any(u[3] for u in stored_users(fake))
        assert aggregated is keep
    said = messages(caplog, "aggregation_off")
    assert len(said) == 1 and "channel" in said[0]


async def test_the_arn_addresses_every_call_and_outcomes_name_the_stream() -> None:
    fake = FakeKinesis()
    fake.create_stream("s", 2)
    fake.create_stream("other", 1)
    arn = fake.stream_arn("s")
    async with Producer(
        stream_arn=arn,
        region_name="us-east-1",
        endpoint_url="http://fake.local",
        credentials=CREDS,
        transport=fake.transport(),
    ) as producer:
        first = await producer.put(b"x", "k")
        second = await producer.put(b"y", "k", stream_arn=fake.stream_arn("other"))
        third = await producer.put(b"z", "k", stream_name=fake.stream_arn("other"))
        await producer.flush()
    assert [(await o.wait()).ok for o in (first, second, third)] == [True] * 3
    assert (first.stream_name, second.stream_name) == ("s", "other")
    for operation, request in fake.requests:
        if operation in ("PutRecords", "ListShards", "DescribeStreamSummary"):
            if "NextToken" in request:
                continue
            assert "StreamARN" in request and "StreamName" not in request, (operation, request)
    assert {op for op, _ in fake.requests} >= {"PutRecords", "ListShards", "DescribeStreamSummary"}
    other = [u.data for r in fake.records("other") for u in deaggregate(r.data, r.partition_key)]
    assert sorted(other) == [b"y", b"z"]


async def test_an_arn_of_another_region_or_a_malformed_one_is_refused_at_once() -> None:
    fake = FakeKinesis()
    fake.create_stream("s", 1)
    async with fake_producer(fake) as producer:
        with pytest.raises(ValueError, match="region eu-west-1"):
            await producer.put(
                b"x", "k", stream_arn=f"arn:aws:kinesis:eu-west-1:{ACCOUNT_ID}:stream/s"
            )
        with pytest.raises(ValueError, match="account"):
            producer.put_nowait(b"x", "k", stream_name="arn:aws:kinesis:us-east-1:12:stream/s")
        with pytest.raises(ValueError, match="not both"):
            await producer.put(b"x", "k", stream_name="s", stream_arn=fake.stream_arn("s"))
        ok = await producer.put(b"y", "k")
    assert (await ok.wait()).ok
    with pytest.raises(ValueError, match="not a stream ARN"):
        Producer(stream_arn="orders")


async def test_check_access_writes_nothing_and_raises_what_would_fail() -> None:
    fake = FakeKinesis()
    fake.create_stream("s", 1)
    fake.create_stream("denied", 1)
    fake.faults = Faults(fatal={"denied": "AccessDeniedException"})
    async with fake_producer(fake) as producer:
        await producer.check_access()
        await producer.check_access(fake.stream_arn("s"))
        with pytest.raises(AccessDeniedError):
            await producer.check_access("denied")
        with pytest.raises(ResourceNotFoundError):
            await producer.check_access("missing")
    assert fake.records("s") == [] and fake.records("denied") == []
    dry = [body for op, body in fake.requests if op == "PutRecords"]
    assert len(dry) == 4 and all(body.get("DryRun") is True for body in dry)


async def test_check_access_on_enter_fails_fast_and_says_when_dry_run_is_ignored(
    caplog: pytest.LogCaptureFixture,
) -> None:
    fake = FakeKinesis()
    fake.create_stream("s", 1)
    fake.faults = Faults(fatal={"s": "AccessDeniedException"})
    with pytest.raises(AccessDeniedError):
        async with fake_producer(fake, check_access=True):
            pytest.fail("entered a producer that may not write")
    fake.faults = Faults()
    fake.honor_dry_run = False
    with caplog.at_level(logging.WARNING, logger="kinesis_trio"):
        async with fake_producer(fake, check_access=True) as producer:
            outcome = await producer.put(b"x", "k")
    assert (await outcome.wait()).ok
    assert len(messages(caplog, "dry_run_ignored")) == 1
    assert len(fake.records("s")) == 2  # the probe was written, as the warning says


async def test_records_up_to_the_streams_raised_limit() -> None:
    fake = FakeKinesis(enforce_limits=True)
    fake.create_stream("s", 1, max_record_size_kib=10240)
    fake.create_stream("small", 1)
    async with fake_producer(fake, rate_limit=100) as producer:
        big = await producer.put(b"b" * (9 * MIB), "k")
        with pytest.raises(ValueError, match=r"over max_record_size \(1048576 bytes"):
            await producer.put(b"x" * (3 * MIB // 2), "k", stream_name="small")
        small = [await producer.put(b"s%d" % i, "k", stream_name="small") for i in range(10)]
        await producer.flush()
    assert (await big.wait()).ok and all(o.result().ok for o in small)
    assert len(fake.records("s")[0].data) == 9 * MIB


async def test_a_limit_raised_mid_run_takes_effect_at_the_refresh() -> None:
    fake = FakeKinesis()
    fake.create_stream("s", 1)
    async with fake_producer(fake, shard_map_refresh_interval=1.0) as producer:
        with pytest.raises(ValueError):
            await producer.put(b"x" * (2 * MIB), "k")
        fake.update_max_record_size("s", 4096)
        while producer.record_limit() < 4 * MIB:
            await producer.put(b"tick", "k")
            await producer.flush()
        outcome = await producer.put(b"x" * (2 * MIB), "k")
    assert (await outcome.wait()).ok


@pytest.mark.parametrize("backend", ["trio", "asyncio"])
def test_sync_producer_puts_without_keys_to_an_auto_stream_only(backend: str) -> None:
    from kinesis_trio import SyncProducer

    fake = FakeKinesis()
    fake.create_stream("auto", 2, on_demand=True, record_distribution_strategy="AUTO")
    fake.create_stream("keyed", 2)
    for name in ("auto", "keyed"):
        with SyncProducer(
            name,
            region_name="us-east-1",
            endpoint_url="http://fake.local",
            credentials=CREDS,
            transport=fake.transport(),
            backend=backend,
        ) as producer:
            if name == "auto":
                assert producer.put(b"x").result(timeout=30).ok
            else:  # the stream is loaded at open: refused at once, in the caller's thread
                with pytest.raises(ValueError, match="partition_key is required"):
                    producer.put(b"x")
                assert producer.put(b"y", "k").result(timeout=30).ok
    assert len(fake.records("auto")) == 1 and len(fake.records("keyed")) == 1


@pytest.mark.parametrize("backend", ["trio", "asyncio"])
def test_sync_producer_checks_a_keyless_record_without_touching_the_engine(backend: str) -> None:
    """``SyncProducer.put`` checks a record in its caller's thread, against the stream's
    facts: it reads them and writes nothing there (it marked the stream as holding
    keyless records, a field of the engine's loop, even for a record it then refused)."""
    from kinesis_trio import SyncProducer

    fake = FakeKinesis()
    fake.create_stream("auto", 2, on_demand=True, record_distribution_strategy="AUTO")
    with SyncProducer(
        "auto",
        region_name="us-east-1",
        endpoint_url="http://fake.local",
        credentials=CREDS,
        transport=fake.transport(),
        backend=backend,
        config=ProducerConfig(max_record_size=1024),
    ) as producer:
        engine = producer._producer._engine
        assert engine is not None
        stream = engine._streams["auto"]
        with pytest.raises(ValueError, match="record too large"):
            producer.put(b"x" * 2000)  # no key, and refused: nothing accepted
        assert not stream.keyless
        assert producer.put(b"x").result(timeout=30).ok
        assert stream.keyless  # set by the loop, as it accepted one


async def test_keyless_records_of_a_stream_switched_back_before_a_refresh_get_keys() -> None:
    """Records put without a key while the stream was AUTO, sent after it went back to
    USER_PARTITION_KEY and before a refresh noticed: Kinesis rejects each such entry (the
    fake, from the model: with USER_PARTITION_KEY "a partition key is required for each
    record"); the producer gives it a key, reloads the stream's facts and sends it again."""
    fake = FakeKinesis()
    fake.create_stream("s", 2, on_demand=True, record_distribution_strategy="AUTO")
    async with fake_producer(fake, record_max_buffered_time=5.0) as producer:
        outcomes = [await producer.put(b"r%d" % i) for i in range(20)]
        fake.update_record_distribution_strategy("s", "USER_PARTITION_KEY")
        await producer.flush()
    results = [o.result() for o in outcomes]
    assert all(r.ok for r in results), [r.error_code for r in results if not r.ok][:3]
    assert all(r.partition_key and len(r.partition_key) == 32 for r in results)
    assert any(len(r.attempts) > 1 for r in results)  # some were refused, then sent again
    # (user records: sent again with keys, records may go aggregated; a linger window, on
    # the clock's multiples of 5 s, may also have sent some while the stream was AUTO)
    stored = [
        u.data
        for r in fake.records("s")
        for u in deaggregate(r.data, r.partition_key, explicit_hash_key=r.explicit_hash_key)
    ]
    assert sorted(stored) == sorted(b"r%d" % i for i in range(20))
