"""kinesis_trio.testing: the fake models the 2026 Kinesis service (botocore's kinesis
2013-12-02 service model): per-stream max record size, record distribution strategy,
StreamARN addressing, DryRun, PutRecord, ChannelCount and large records under the limits.

Driven through :class:`kinesis_trio.KinesisClient` over ``fake.transport()``, or through the
model's methods for synchronous checks. Each test's docstring names the shape or
operation documentation it models.
"""

from __future__ import annotations

import base64
import json
import time
from collections import Counter
from collections.abc import Awaitable, Callable, Iterator
from datetime import timezone
from typing import Any

import anyio
import anyio.from_thread
import botocore.awsrequest
import botocore.parsers
import botocore.session
import httpx
import pytest
from trio.testing import MockClock

from kinesis_trio import KinesisClient, KinesisError, deaggregate
from kinesis_trio._core._aggregation import encode_aggregate
from kinesis_trio.testing import ACCOUNT_ID, REGION, FakeKinesis, Faults
from tests.support.helpers import connect, entry

pytestmark = pytest.mark.anyio

MIB = 1024 * 1024
MAX_HASH = 2**128 - 1
PTE = "ProvisionedThroughputExceededException"
DRY_RUN_MESSAGE = "The request was rejected because the DryRun parameter was specified."


async def fails(call: Awaitable[Any]) -> KinesisError:
    """The KinesisError ``call`` raises (the test fails if it succeeds)."""
    with pytest.raises(KinesisError) as info:
        await call
    return info.value


def slots(result: dict[str, Any]) -> list[str]:
    return ["ok" if "SequenceNumber" in r else r["ErrorCode"] for r in result["Records"]]


async def summary(client: KinesisClient, name: str) -> dict[str, Any]:
    return await client.describe_stream_summary(name)


def arn(name: str, region: str = REGION, account: str = ACCOUNT_ID) -> str:
    return f"arn:aws:kinesis:{region}:{account}:stream/{name}"


# -- max record size ---------------------------------------------------------------------


async def test_max_record_size_is_per_stream_created_updated_and_described() -> None:
    """CreateStreamInput.MaxRecordSizeInKiB, UpdateMaxRecordSizeInput (StreamARN,
    MaxRecordSizeInKiB: "between 1024 and 10240 KiB ... out of this range ...
    ValidationException"), StreamDescriptionSummary.MaxRecordSizeInKiB."""
    fake = FakeKinesis()
    fake.create_stream("default")
    fake.create_stream("big", max_record_size_kib=10240)
    for bad in (1023, 10241, True):
        with pytest.raises(ValueError, match="ValidationException"):
            fake.create_stream("bad", max_record_size_kib=bad)
    assert "bad" not in fake.streams
    async with connect(fake) as client:
        assert (await summary(client, "default"))["MaxRecordSizeInKiB"] == 1024
        assert (await summary(client, "big"))["MaxRecordSizeInKiB"] == 10240
        await client.call("CreateStream", {"StreamName": "op", "MaxRecordSizeInKiB": 4096})
        assert (await summary(client, "op"))["MaxRecordSizeInKiB"] == 4096
        bad_create = client.call("CreateStream", {"StreamName": "x", "MaxRecordSizeInKiB": 10})
        assert (await fails(bad_create)).code == "ValidationException"

        # addressed by StreamARN, as the model has it; StreamName accepted too
        await client.call(
            "UpdateMaxRecordSize", {"StreamARN": fake.stream_arn("op"), "MaxRecordSizeInKiB": 2048}
        )
        assert (await summary(client, "op"))["MaxRecordSizeInKiB"] == 2048
        await client.call("UpdateMaxRecordSize", {"StreamName": "op", "MaxRecordSizeInKiB": 1024})
        assert (await summary(client, "op"))["MaxRecordSizeInKiB"] == 1024
        for body in (
            {"StreamARN": fake.stream_arn("op"), "MaxRecordSizeInKiB": 1023},
            {"StreamARN": fake.stream_arn("op"), "MaxRecordSizeInKiB": 10241},
            {"StreamARN": fake.stream_arn("op")},
        ):
            error = await fails(client.call("UpdateMaxRecordSize", body))
            assert error.code == "ValidationException"
        missing = {"StreamARN": fake.stream_arn("nope"), "MaxRecordSizeInKiB": 2048}
        assert (await fails(client.call("UpdateMaxRecordSize", missing))).code == (
            "ResourceNotFoundException"
        )
        assert (await summary(client, "op"))["MaxRecordSizeInKiB"] == 1024
    fake.update_max_record_size("default", 3072)
    assert fake.streams["default"].max_record_size == 3072 * 1024
    with pytest.raises(ValueError, match="ValidationException"):
        fake.update_max_record_size("default", 20000)


async def test_entries_over_the_streams_own_limit_fail_the_request() -> None:
    """PutRecordsRequestEntry.Data: "When the data blob ... is added to the partition key
    size, the total size must not exceed the maximum record size"; the limit is the
    stream's MaxRecordSizeInKiB."""
    fake = FakeKinesis()
    fake.create_stream("small")  # 1 MiB
    fake.create_stream("large", max_record_size_kib=2048)
    at_limit = entry(b"x" * (2 * MIB - 1), "k")  # data + one-byte key: exactly 2 MiB
    over = entry(b"x" * (2 * MIB), "k")
    async with connect(fake) as client:
        error = await fails(client.put_records("small", [at_limit]))
        assert error.code == "InvalidArgumentException"
        assert slots(await client.put_records("large", [at_limit])) == ["ok"]
        error = await fails(client.put_records("large", [entry(b"y"), over]))
        assert error.code == "InvalidArgumentException"
        # a multi-byte key counts in UTF-8 bytes
        euro = entry(b"x" * (2 * MIB - 3), "\u20ac")  # 3 bytes of key: exactly 2 MiB
        assert slots(await client.put_records("large", [euro])) == ["ok"]
        euro_over = entry(b"x" * (2 * MIB - 2), "\u20ac")
        assert (await fails(client.put_records("large", [euro_over]))).code == (
            "InvalidArgumentException"
        )
        # raised at once; lowered at once
        fake.update_max_record_size("small", 2048)
        assert slots(await client.put_records("small", [at_limit])) == ["ok"]
        fake.update_max_record_size("large", 1024)
        assert (await fails(client.put_records("large", [at_limit]))).code == (
            "InvalidArgumentException"
        )
    assert [len(r.data) for r in fake.records("large")] == [2 * MIB - 1, 2 * MIB - 3]
    assert len(fake.records("small")) == 1


async def test_a_request_may_carry_10_mib_including_partition_keys() -> None:
    """PutRecords documentation: "up to a limit of 10 MiB for the entire request, including
    partition keys"."""
    fake = FakeKinesis()
    assert fake.max_request_size == 10 * MIB
    fake.create_stream("s")
    full = [entry(b"x" * (MIB - 1), "k")] * 10  # 10 records of exactly 1 MiB with their keys
    async with connect(fake) as client:
        assert slots(await client.put_records("s", full)) == ["ok"] * 10
        error = await fails(client.put_records("s", [*full, entry(b"", "k")]))  # one byte more
        assert error.code == "InvalidArgumentException"
    assert len(fake.records("s")) == 10


# -- record distribution strategy ----------------------------------------------------------


async def test_record_distribution_strategy_is_set_switched_and_described() -> None:
    """CreateStreamInput.RecordDistributionStrategy ("only supported for streams that use
    the on-demand capacity mode"), UpdateStreamRecordDistributionStrategy ("Attempting to
    set AUTO on a provisioned stream results in an InvalidArgumentException"; the enum
    AUTO | USER_PARTITION_KEY), StreamDescriptionSummary.RecordDistributionStrategy ("only
    present for streams that use the on-demand capacity mode")."""
    fake = FakeKinesis()
    fake.create_stream("prov", 2)
    fake.create_stream("od", 2, on_demand=True)
    fake.create_stream("auto", 2, on_demand=True, record_distribution_strategy="AUTO")
    with pytest.raises(ValueError, match="InvalidArgumentException"):
        fake.create_stream("p2", record_distribution_strategy="AUTO")
    with pytest.raises(ValueError, match="ValidationException"):
        fake.create_stream("o2", on_demand=True, record_distribution_strategy="RANDOM")
    async with connect(fake) as client:
        assert "RecordDistributionStrategy" not in await summary(client, "prov")
        assert (await summary(client, "od"))["RecordDistributionStrategy"] == ("USER_PARTITION_KEY")
        assert (await summary(client, "auto"))["RecordDistributionStrategy"] == "AUTO"

        on_demand = {"StreamMode": "ON_DEMAND"}
        await client.call(
            "CreateStream",
            {
                "StreamName": "op",
                "StreamModeDetails": on_demand,
                "RecordDistributionStrategy": "AUTO",
            },
        )
        assert (await summary(client, "op"))["RecordDistributionStrategy"] == "AUTO"
        provisioned = {"StreamName": "p3", "ShardCount": 1, "RecordDistributionStrategy": "AUTO"}
        assert (await fails(client.call("CreateStream", provisioned))).code == (
            "InvalidArgumentException"
        )

        update = "UpdateStreamRecordDistributionStrategy"
        await client.call(
            update, {"StreamARN": fake.stream_arn("od"), "RecordDistributionStrategy": "AUTO"}
        )
        assert (await summary(client, "od"))["RecordDistributionStrategy"] == "AUTO"
        by_name = {"StreamName": "od", "RecordDistributionStrategy": "USER_PARTITION_KEY"}
        # the model's UpdateStreamRecordDistributionStrategyInput requires StreamARN
        assert (await fails(client.call(update, by_name))).code == "ValidationException"
        await client.call(
            update,
            {
                "StreamARN": fake.stream_arn("od"),
                "RecordDistributionStrategy": "USER_PARTITION_KEY",
            },
        )
        assert (await summary(client, "od"))["RecordDistributionStrategy"] == ("USER_PARTITION_KEY")
        to_prov = {"StreamARN": fake.stream_arn("prov"), "RecordDistributionStrategy": "AUTO"}
        assert (await fails(client.call(update, to_prov))).code == "InvalidArgumentException"
        bogus = {"StreamARN": fake.stream_arn("od"), "RecordDistributionStrategy": "RANDOM"}
        assert (await fails(client.call(update, bogus))).code == "ValidationException"
        without = {"StreamARN": fake.stream_arn("od")}
        assert (await fails(client.call(update, without))).code == "ValidationException"
        assert "RecordDistributionStrategy" not in await summary(client, "prov")
    assert fake.streams["prov"].record_distribution_strategy == "USER_PARTITION_KEY"
    with pytest.raises(ValueError, match="InvalidArgumentException"):
        fake.update_record_distribution_strategy("prov", "USER_PARTITION_KEY")
    fake.update_record_distribution_strategy("od", "AUTO")
    assert fake.streams["od"].record_distribution_strategy == "AUTO"


async def put_spread(seed: int) -> tuple[list[str], FakeKinesis]:
    fake = FakeKinesis(faults=Faults(seed=seed))
    fake.create_stream("auto", 4, on_demand=True, record_distribution_strategy="AUTO")
    fake.create_stream("keyed", 4, on_demand=True)
    same = [entry(b"%d" % i, "one-key", ehk=0) for i in range(400)]
    async with connect(fake) as client:
        result = await client.put_records("auto", same)
        keyed = await client.put_records("keyed", same)
    assert {r["ShardId"] for r in keyed["Records"]} == {"shardId-000000000000"}
    return [r["ShardId"] for r in result["Records"]], fake


async def test_auto_places_entries_at_random_ignoring_keys_reproducibly() -> None:
    """PutRecordsRequestEntry.PartitionKey: on an AUTO stream "any value you provide is
    ignored, along with any ExplicitHashKey"; UpdateStreamRecordDistributionStrategy:
    "distributes records evenly across shards". The fake picks an open shard uniformly
    from ``fake.rng``, so a seeded run is reproducible."""
    placed, fake = await put_spread(seed=42)
    counts = Counter(placed)
    assert set(counts) == {f"shardId-00000000000{i}" for i in range(4)}
    assert all(60 <= n <= 140 for n in counts.values()), counts  # 100 each on average
    again, _ = await put_spread(seed=42)
    assert again == placed
    other, _ = await put_spread(seed=43)
    assert other != placed
    # stored as sent: the key and explicit hash key are kept, just not used to place
    stored = fake.records("auto")
    assert {(r.partition_key, r.explicit_hash_key) for r in stored} == {("one-key", "0")}
    for shard in fake.open_shards("auto"):
        assert all(r.hash_key == shard.start for r in shard.records)


async def test_auto_ignores_the_explicit_hash_key_range_but_not_its_pattern() -> None:
    """PutRecordsRequestEntry.ExplicitHashKey on AUTO: ignored for placement (so the
    [0, 2^128-1] range is not checked), while the HashKey shape's pattern
    ``0|([1-9]\\d{0,38})`` still applies as input validation."""
    fake = FakeKinesis()
    fake.create_stream("auto", 2, on_demand=True, record_distribution_strategy="AUTO")
    fake.create_stream("keyed", 2, on_demand=True)
    async with connect(fake) as client:
        beyond = [entry(b"x", "k", ehk=MAX_HASH + 1)]
        assert slots(await client.put_records("auto", beyond)) == ["ok"]
        assert (await fails(client.put_records("keyed", beyond))).code == (
            "InvalidArgumentException"
        )
        leading_zero = [entry(b"x", "k", ehk="007")]
        assert (await fails(client.put_records("auto", leading_zero))).code == (
            "ValidationException"
        )


async def test_key_less_entries_are_taken_on_auto_only() -> None:
    """PutRecordsRequestEntry.PartitionKey: "If the stream uses the USER_PARTITION_KEY
    record distribution strategy (the default), a partition key is required for each
    record. If the stream uses the AUTO record distribution strategy, the partition key is
    optional". Record.PartitionKey (GetRecords): "this value is not returned if the
    producer did not provide a partition key"."""
    fake = FakeKinesis(faults=Faults(seed=1))
    fake.create_stream("auto", 2, on_demand=True, record_distribution_strategy="AUTO")
    fake.create_stream("keyed", 2, on_demand=True)
    fake.create_stream("prov", 2)
    async with connect(fake) as client:
        result = await client.put_records("auto", [entry(b"a", None), entry(b"b", "kept")])
        assert slots(result) == ["ok", "ok"]
        # the size of a key-less record is its data alone
        exactly = entry(b"m" * MIB, None)
        assert slots(await client.put_records("auto", [exactly])) == ["ok"]
        for name in ("keyed", "prov"):
            error = await fails(client.put_records(name, [entry(b"a"), entry(b"b", None)]))
            assert error.code == "ValidationException"
            assert "records.2.member.partitionKey" in error.message
            assert fake.records(name) == []
        error = await fails(client.call("PutRecord", {"StreamName": "keyed", "Data": b"x"}))
        assert error.code == "ValidationException" and "'partitionKey'" in error.message

        by_data = {r.data: r for r in fake.records("auto")}
        assert by_data[b"a"].partition_key is None
        assert by_data[b"b"].partition_key == "kept"
        read = await client.read_all("auto")
        records = {r["Data"]: r for shard in read.values() for r in shard}
        assert set(records) == {b"a", b"b", b"m" * MIB}
        assert "PartitionKey" not in records[b"a"]
        assert records[b"a"]["SequenceNumber"] == by_data[b"a"].sequence_number
        assert records[b"b"]["PartitionKey"] == "kept"


async def test_a_kpl_aggregate_is_stored_as_is_wherever_auto_puts_it() -> None:
    """UpdateStreamRecordDistributionStrategy (AUTO ignores the keys a producer supplies):
    an aggregate record's own partition key does not place it, and its bytes are stored
    untouched, its sub-records' keys inside it."""
    fake = FakeKinesis(faults=Faults(seed=3))
    fake.create_stream("auto", 4, on_demand=True, record_distribution_strategy="AUTO")
    users = [(b"u%d" % i, f"user-{i}", None) for i in range(5)]
    blob = encode_aggregate(users)
    async with connect(fake) as client:
        result = await client.put_records("auto", [entry(blob, "a")] * 20)
    assert len({r["ShardId"] for r in result["Records"]}) > 1  # same key, several shards
    for record in fake.records("auto"):
        assert record.data == blob
        got = deaggregate(record.data, record.partition_key or "")
        assert [(u.data, u.partition_key) for u in got] == [(d, k) for d, k, _ in users]


async def test_the_strategy_switched_mid_run_applies_to_the_next_request() -> None:
    """UpdateStreamRecordDistributionStrategy: "You can switch between the following
    strategies at any time ... New records that arrive after the change are distributed
    according to the new strategy. Records already in the stream keep their original shard
    assignments"."""
    fake = FakeKinesis(faults=Faults(seed=9))
    fake.create_stream("s", 4, on_demand=True, record_distribution_strategy="AUTO")
    update = "UpdateStreamRecordDistributionStrategy"
    same_key = [entry(b"%d" % i, "pk") for i in range(40)]
    async with connect(fake) as client:
        first = await client.put_records("s", same_key)
        assert len({r["ShardId"] for r in first["Records"]}) > 1
        before = {s.shard_id: list(s.records) for s in fake.open_shards("s")}

        await client.call(
            update,
            {"StreamARN": fake.stream_arn("s"), "RecordDistributionStrategy": "USER_PARTITION_KEY"},
        )
        second = await client.put_records("s", same_key)
        assert len({r["ShardId"] for r in second["Records"]}) == 1  # one key, one shard
        assert (await fails(client.put_records("s", [entry(b"x", None)]))).code == (
            "ValidationException"
        )
        for shard in fake.open_shards("s"):  # the earlier records stayed where they were
            assert shard.records[: len(before[shard.shard_id])] == before[shard.shard_id]

        fake.update_record_distribution_strategy("s", "AUTO")
        third = await client.put_records("s", [entry(b"y", None), *same_key])
        assert slots(third) == ["ok"] * 41
        assert len({r["ShardId"] for r in third["Records"]}) > 1
    assert len(fake.records("s")) == 121


# -- StreamARN ---------------------------------------------------------------------------

SPLIT_AT = str(2**127)

#: (operation, the stream it targets, the rest of its body, a check of its effect)
OPERATIONS: list[tuple[str, str, dict[str, Any], Callable[[FakeKinesis, dict[str, Any]], bool]]] = [
    (
        "PutRecords",
        "s",
        {"Records": [entry(b"x")]},
        lambda fake, out: len(fake.records("s")) == 1 and out["FailedRecordCount"] == 0,
    ),
    (
        "PutRecord",
        "s",
        entry(b"x"),
        lambda fake, out: [r.sequence_number for r in fake.records("s")] == [out["SequenceNumber"]],
    ),
    ("ListShards", "s", {}, lambda fake, out: len(out["Shards"]) == 2),
    (
        "DescribeStreamSummary",
        "s",
        {},
        lambda fake, out: out["StreamDescriptionSummary"]["StreamARN"] == fake.stream_arn("s"),
    ),
    (
        "GetShardIterator",
        "s",
        {"ShardId": "shardId-000000000001", "ShardIteratorType": "TRIM_HORIZON"},
        lambda fake, out: bool(out["ShardIterator"]),
    ),
    (
        "SplitShard",
        "s",
        {"ShardToSplit": "shardId-000000000000", "NewStartingHashKey": "1"},
        lambda fake, out: len(fake.open_shards("s")) == 3,
    ),
    (
        "MergeShards",
        "s",
        {"ShardToMerge": "shardId-000000000000", "AdjacentShardToMerge": "shardId-000000000001"},
        lambda fake, out: len(fake.open_shards("s")) == 1,
    ),
    (
        "UpdateShardCount",
        "s",
        {"TargetShardCount": 4, "ScalingType": "UNIFORM_SCALING"},
        lambda fake, out: len(fake.open_shards("s")) == 4 and out["StreamName"] == "s",
    ),
    (
        "UpdateMaxRecordSize",
        "s",
        {"MaxRecordSizeInKiB": 5120},
        lambda fake, out: fake.streams["s"].max_record_size == 5120 * 1024,
    ),
    (
        "UpdateStreamRecordDistributionStrategy",
        "od",
        {"RecordDistributionStrategy": "AUTO"},
        lambda fake, out: fake.streams["od"].record_distribution_strategy == "AUTO",
    ),
    (
        "DescribeStream",
        "s",
        {},
        lambda fake, out: (
            out["StreamDescription"]["StreamARN"] == fake.stream_arn("s")
            and len(out["StreamDescription"]["Shards"]) == 2
        ),
    ),
    ("DeleteStream", "s", {}, lambda fake, out: "s" not in fake.streams),
]


@pytest.mark.parametrize(
    ("operation", "target", "rest", "took_effect"), OPERATIONS, ids=[op[0] for op in OPERATIONS]
)
async def test_every_stream_operation_is_addressed_by_stream_arn(
    operation: str,
    target: str,
    rest: dict[str, Any],
    took_effect: Callable[[FakeKinesis, dict[str, Any]], bool],
) -> None:
    """StreamARN (pattern ``arn:aws.*:kinesis:.*:\\d{12}:stream/\\S+``) on every stream
    operation; the operations' note: "you must use either the StreamARN or the StreamName
    parameter, or both". A malformed ARN: ValidationException; one of another region or
    account: ResourceNotFoundException naming it; a name and an ARN naming different
    streams: InvalidArgumentException. ``fake.requests`` shows what was sent."""
    fake = FakeKinesis()
    fake.create_stream("s", 2)
    fake.create_stream("od", 2, on_demand=True)
    async with connect(fake) as client:
        for bad in (
            "not-an-arn",
            f"arn:aws:kinesis:{REGION}:123:stream/{target}",  # account of 3 digits
            f"arn:aws:sqs:{REGION}:{ACCOUNT_ID}:stream/{target}",
            f"arn:aws:kinesis:{REGION}:{ACCOUNT_ID}:table/{target}",
            f"arn:aws:kinesis:{REGION}:{ACCOUNT_ID}:stream/",
            f"arn:aws:kinesis:{REGION}:{ACCOUNT_ID}:stream/a b",
        ):
            error = await fails(client.call(operation, {"StreamARN": bad, **rest}))
            assert error.code == "ValidationException", bad
        for elsewhere in (
            arn(target, region="eu-west-1"),
            arn(target, account="210987654321"),
            f"arn:aws-cn:kinesis:{REGION}:{ACCOUNT_ID}:stream/{target}",
        ):
            error = await fails(client.call(operation, {"StreamARN": elsewhere, **rest}))
            assert error.code == "ResourceNotFoundException", elsewhere
            assert elsewhere in error.message
        other = "od" if target == "s" else "s"
        mixed = {"StreamName": other, "StreamARN": arn(target), **rest}
        assert (await fails(client.call(operation, mixed))).code == "InvalidArgumentException"
        missing = {"StreamARN": arn("missing"), **rest}
        assert (await fails(client.call(operation, missing))).code == ("ResourceNotFoundException")
        assert fake.records("s") == [] and len(fake.open_shards("s")) == 2  # nothing changed

        out = await client.call(operation, {"StreamARN": fake.stream_arn(target), **rest})
        assert took_effect(fake, out)
    assert fake.stream_arn(target) == f"arn:aws:kinesis:us-east-1:{ACCOUNT_ID}:stream/{target}"
    sent_operation, sent = fake.requests[-1]
    assert sent_operation == operation
    assert sent["StreamARN"] == fake.stream_arn(target) and "StreamName" not in sent
    if operation == "PutRecords":
        assert sent["Records"] == 1  # the entry count, not the entries


async def test_a_name_and_arn_naming_the_same_stream_are_fine_and_requests_are_logged() -> None:
    """PutRecordsInput (StreamName, StreamARN, Records): "use either the StreamARN or the
    StreamName parameter, or both"; ``fake.requests`` logs (operation, body) with Records
    replaced by its count, failed requests included."""
    fake = FakeKinesis()
    fake.create_stream("s")
    stream_arn = fake.stream_arn("s")
    async with connect(fake) as client:
        await client.put_records("s", [entry(b"a"), entry(b"b")], stream_arn=stream_arn)
        await client.put_records(None, [entry(b"c")] * 3, stream_arn=stream_arn)
        await fails(client.put_records(None, [entry(b"d", "")], stream_arn=stream_arn))
        assert (await client.describe_stream_summary("s", stream_arn=stream_arn))[
            "StreamName"
        ] == "s"
    assert fake.requests == [
        ("PutRecords", {"StreamName": "s", "StreamARN": stream_arn, "Records": 2}),
        ("PutRecords", {"StreamARN": stream_arn, "Records": 3}),
        ("PutRecords", {"StreamARN": stream_arn, "Records": 1}),
        ("DescribeStreamSummary", {"StreamName": "s", "StreamARN": stream_arn}),
    ]
    assert len(fake.records("s")) == 5


# -- PutRecord ---------------------------------------------------------------------------


async def test_put_record_places_validates_and_fails_like_put_records() -> None:
    """PutRecordInput (Data, PartitionKey, ExplicitHashKey, StreamARN) and PutRecordOutput
    (required ShardId and SequenceNumber); its errors: ProvisionedThroughputExceededException,
    InternalFailureException, AccessDeniedException."""
    fake = FakeKinesis(
        enforce_limits=True,
        records_per_second=2,
        faults=Faults(fatal={"denied": "AccessDeniedException"}),
    )
    fake.create_stream("s", 2)
    fake.create_stream("denied")
    async with connect(fake) as client:
        low = await client.call("PutRecord", {"StreamName": "s", **entry(b"a", ehk=0)})
        assert low == {"ShardId": "shardId-000000000000", "SequenceNumber": low["SequenceNumber"]}
        high = await client.call(
            "PutRecord", {"StreamARN": fake.stream_arn("s"), **entry(b"b", ehk=MAX_HASH)}
        )
        assert high["ShardId"] == "shardId-000000000001"
        assert high["SequenceNumber"] > low["SequenceNumber"]
        again = await client.call("PutRecord", {"StreamName": "s", **entry(b"c", ehk=0)})
        throttled = await fails(client.call("PutRecord", {"StreamName": "s", **entry(b"d", ehk=0)}))
        assert (throttled.code, throttled.status_code) == (PTE, 400)  # 2 records a second
        assert "shardId-000000000000 in stream s" in throttled.message
        fake.fail_next(1, "internal_failure_entries")
        failed = await fails(
            client.call("PutRecord", {"StreamName": "s", **entry(b"e", ehk=MAX_HASH)})
        )
        assert (failed.code, failed.status_code) == ("InternalFailure", 500)
        denied = await fails(client.call("PutRecord", {"StreamName": "denied", **entry(b"f")}))
        assert denied.code == "AccessDeniedException"
        too_big = {"StreamName": "s", **entry(b"x" * MIB)}
        assert (await fails(client.call("PutRecord", too_big))).code == ("InvalidArgumentException")
        bad_key = {"StreamName": "s", **entry(b"x", "k" * 257)}
        error = await fails(client.call("PutRecord", bad_key))
        assert error.code == "ValidationException" and "'partitionKey'" in error.message
    stored = [(r.data, r.shard_id, r.sequence_number) for r in fake.records("s")]
    assert sorted(stored) == [
        (b"a", "shardId-000000000000", low["SequenceNumber"]),
        (b"b", "shardId-000000000001", high["SequenceNumber"]),
        (b"c", "shardId-000000000000", again["SequenceNumber"]),
    ]


# -- DryRun ------------------------------------------------------------------------------


async def test_dry_run_is_checked_answered_and_changes_nothing() -> None:
    """PutRecordsInput.DryRun / PutRecordInput.DryRun: "Checks if your request will
    succeed"; DryRunOperationException: "The request was rejected because the DryRun
    parameter was specified." (no httpStatusCode in the model: HTTP 400)."""
    fake = FakeKinesis(enforce_limits=True, records_per_second=2, faults=Faults(seed=5))
    fake.create_stream("s")
    fake.create_stream("auto", 2, on_demand=True, record_distribution_strategy="AUTO")
    fake.fail_next(1, "http_500")  # pending: a DryRun must not take it
    rng_state = fake.rng.getstate()
    two = [entry(b"a"), entry(b"b")]
    async with connect(fake) as client:
        for _ in range(3):
            error = await fails(
                client.call("PutRecords", {"StreamName": "s", "Records": two, "DryRun": True})
            )
            assert (error.code, error.status_code, error.message) == (
                "DryRunOperationException",
                400,
                DRY_RUN_MESSAGE,
            )
        put_record = {"StreamARN": fake.stream_arn("s"), **entry(b"c"), "DryRun": True}
        assert (await fails(client.call("PutRecord", put_record))).code == (
            "DryRunOperationException"
        )
        key_less = {"StreamName": "auto", "Records": [entry(b"k", None)], "DryRun": True}
        assert (await fails(client.call("PutRecords", key_less))).code == (
            "DryRunOperationException"
        )
        # checked exactly as a real request would be
        for body, code in (
            ({"StreamName": "nope", "Records": two}, "ResourceNotFoundException"),
            ({"StreamName": "s", "Records": [entry(b"x", "")]}, "ValidationException"),
            ({"StreamName": "s", "Records": [entry(b"x", None)]}, "ValidationException"),
            ({"StreamName": "s", "Records": []}, "ValidationException"),
            ({"StreamName": "s", "Records": [entry(b"x" * MIB)]}, "InvalidArgumentException"),
            (
                {"StreamARN": arn("s", region="eu-west-1"), "Records": two},
                "ResourceNotFoundException",
            ),
        ):
            error = await fails(client.call("PutRecords", {**body, "DryRun": True}))
            assert error.code == code, body
        assert fake.records("s") == [] and fake.records("auto") == []
        assert fake.rng.getstate() == rng_state  # no fault drawn, no shard picked
        assert fake.stats.entries == 0 and fake.stats.dry_runs == 11
        assert fake.stats.requests_by_status == {400: 11}

        # the pending fault and both tokens are still there for the real requests
        assert (await fails(client.put_records("s", two))).code == "InternalFailure"
        assert slots(await client.put_records("s", two)) == ["ok", "ok"]
        assert slots(await client.put_records("s", [entry(b"z")])) == [PTE]
    assert [r.data for r in fake.records("s")] == [b"a", b"b"]


async def test_dry_run_meets_a_fatal_injection_first() -> None:
    """DryRunOperationException is returned only when the request would have succeeded; the
    operations' other errors (AccessDeniedException, KMS*) come first, as from
    ``Faults.fatal``."""
    fake = FakeKinesis(
        faults=Faults(fatal={"audit": "AccessDeniedException", "kms": "KMSNotFoundException"})
    )
    for name in ("audit", "kms"):
        fake.create_stream(name)
    async with connect(fake) as client:
        body = {"StreamName": "audit", "Records": [entry(b"x")], "DryRun": True}
        assert (await fails(client.call("PutRecords", body))).code == "AccessDeniedException"
        one = {"StreamARN": fake.stream_arn("audit"), **entry(b"x"), "DryRun": True}
        assert (await fails(client.call("PutRecord", one))).code == "AccessDeniedException"
        kms = {"StreamName": "kms", "Records": [entry(b"x")], "DryRun": True}
        assert (await fails(client.call("PutRecords", kms))).code == "KMSNotFoundException"
    assert [e.kind for e in fake.fault_events] == [
        "AccessDeniedException",
        "AccessDeniedException",
        "KMSNotFoundException",
    ]


async def test_an_endpoint_that_ignores_dry_run_stores_the_records() -> None:
    """PutRecordsInput.DryRun is optional; endpoints that do not know it (both npm
    emulators) serve the request as a normal write: ``honor_dry_run=False``."""
    fake = FakeKinesis(honor_dry_run=False)
    fake.create_stream("s")
    async with connect(fake) as client:
        body = {"StreamName": "s", "Records": [entry(b"a"), entry(b"b")], "DryRun": True}
        assert slots(await client.call("PutRecords", body)) == ["ok", "ok"]
        one = await client.call("PutRecord", {"StreamName": "s", **entry(b"c"), "DryRun": True})
        assert one["ShardId"] == "shardId-000000000000"
        fake.honor_dry_run = True
        assert (await fails(client.call("PutRecords", body))).code == "DryRunOperationException"
    assert [r.data for r in fake.records("s")] == [b"a", b"b", b"c"]
    assert fake.stats.dry_runs == 1


# -- ChannelCount ------------------------------------------------------------------------


async def test_channel_count_is_reported() -> None:
    """StreamDescriptionSummary.ChannelCount ("The number of channels associated with the
    stream"; ChannelCountObject: 0 to 1,000,000)."""
    fake = FakeKinesis()
    fake.create_stream("plain")
    fake.create_stream("channels", channel_count=3)
    with pytest.raises(ValueError, match="ValidationException"):
        fake.create_stream("bad", channel_count=-1)
    async with connect(fake) as client:
        assert (await summary(client, "plain"))["ChannelCount"] == 0
        assert (await summary(client, "channels"))["ChannelCount"] == 3
        fake.set_channel_count("plain", 1_000_000)
        assert (await summary(client, "plain"))["ChannelCount"] == 1_000_000
    with pytest.raises(ValueError, match="ValidationException"):
        fake.set_channel_count("plain", 1_000_001)
    with pytest.raises(ValueError, match="ResourceNotFoundException"):
        fake.set_channel_count("missing", 1)


# -- large records under the per-shard limits --------------------------------------------


async def test_a_9_mib_record_passes_a_full_bucket_of_a_10_mib_stream() -> None:
    """GetRecords documentation: "Amazon Kinesis Data Streams supports large records up to
    10 MiB in size, but the average throughput for your stream cannot exceed 1 MiB per
    second" (developer guide, large records: a stream "can burst up to 10 MiB while
    averaging 1 MiB per second"); UpdateMaxRecordSize raises the limit."""
    fake = FakeKinesis(enforce_limits=True)
    fake.create_stream("big")
    fake.create_stream("small")
    nine = entry(b"n" * (9 * MIB))
    async with connect(fake) as client:
        await client.call(
            "UpdateMaxRecordSize",
            {"StreamARN": fake.stream_arn("big"), "MaxRecordSizeInKiB": 10240},
        )
        assert slots(await client.put_records("big", [nine])) == ["ok"]
        # 1 MiB of the 10 left in the bucket: the next one waits for the refill
        assert slots(await client.put_records("big", [nine])) == [PTE]
        assert slots(await client.put_records("big", [entry(b"s" * (MIB // 2))])) == ["ok"]
        error = await fails(client.put_records("small", [nine]))
        assert error.code == "InvalidArgumentException"
    assert [len(r.data) for r in fake.records("big")] == [9 * MIB, MIB // 2]
    assert fake.records("small") == []


def test_the_bytes_bucket_holds_the_max_record_size_and_refills_at_the_byte_rate() -> None:
    """Developer guide, large records: "can burst up to 10 MiB while averaging 1 MiB per
    second"; CreateStream documentation: "Each shard can support writes up to 1,000
    records per second, up to a maximum data write total of 1 MiB per second". Checked on
    the model with explicit times."""
    fake = FakeKinesis(enforce_limits=True)
    fake.create_stream("s", max_record_size_kib=10240)
    fake.create_stream("one")
    stream, shard = fake.streams["s"], fake.streams["s"].shards[0]
    take = fake._take_tokens
    assert take(stream, shard, 9 * MIB, 0.0)
    assert not take(stream, shard, 9 * MIB, 0.0)
    assert not take(stream, shard, 9 * MIB, 7.9)  # 1 + 7.9 MiB refilled: not yet
    assert take(stream, shard, 9 * MIB, 8.0)
    assert take(stream, shard, 10 * MIB, 1000.0)  # the bucket never holds more than 10 MiB
    assert not take(stream, shard, 1, 1000.0)
    # records: still 1000 a second, whatever the byte size
    assert sum(take(stream, shard, 1, 2000.0) for _ in range(1001)) == 1000
    # a 1 MiB stream keeps a bucket of one second's worth
    one, first = fake.streams["one"], fake.streams["one"].shards[0]
    assert take(one, first, MIB, 0.0)
    assert not take(one, first, 1, 0.0)
    assert take(one, first, MIB, 1000.0) and not take(one, first, 1, 1000.0)


def test_fake_level_default_max_record_size_applies_to_new_streams() -> None:
    """StreamDescriptionSummary.MaxRecordSizeInKiB of a stream created without one: the
    fake's ``max_record_size`` (1 MiB unless set), fixed at creation."""
    fake = FakeKinesis(max_record_size=4 * MIB)
    fake.create_stream("a")
    fake.max_record_size = 2 * MIB
    fake.create_stream("b")
    assert fake.streams["a"].max_record_size == 4 * MIB
    assert fake.streams["b"].max_record_size == 2 * MIB
    assert FakeKinesis().max_record_size == MIB


# -- DescribeStream, ListStreams ---------------------------------------------------------


def service_model() -> Any:
    return botocore.session.get_session().get_service_model("kinesis")


def off_model(shape: Any, value: Any, where: str = "$") -> list[str]:
    """Where ``value`` lacks a member the botocore ``shape`` requires, or has one it does
    not define (empty: it follows the shape's member names)."""
    problems: list[str] = []
    if shape.type_name == "structure" and isinstance(value, dict):
        problems += [f"{where}.{m} missing" for m in shape.required_members if m not in value]
        problems += [f"{where}.{m} unknown" for m in value if m not in shape.members]
        for name, member in shape.members.items():
            if name in value:
                problems += off_model(member, value[name], f"{where}.{name}")
    elif shape.type_name == "list" and isinstance(value, list):
        for i, item in enumerate(value):
            problems += off_model(shape.member, item, f"{where}[{i}]")
    return problems


def parsed_by_botocore(operation: str, answer: dict[str, Any]) -> dict[str, Any]:
    """The answer as botocore's JSON parser reads it (timestamps become datetimes)."""
    output = service_model().operation_model(operation).output_shape
    raw = {"body": json.dumps(answer).encode(), "headers": {}, "status_code": 200}
    parsed: dict[str, Any] = botocore.parsers.create_parser("json").parse(raw, output)
    return parsed


async def test_describe_stream_follows_the_model_and_pages_the_shards() -> None:
    """DescribeStreamOutput.StreamDescription (required: StreamName, StreamARN,
    StreamStatus, Shards, HasMoreShards, RetentionPeriodHours, StreamCreationTimestamp,
    EnhancedMonitoring; Shards of the Shard shape ListShards uses); DescribeStreamInput:
    Limit ("The default value is 100. If you specify a value greater than 100, at most 100
    results are returned", DescribeStreamInputLimit 1 to 10000), ExclusiveStartShardId
    ("the shard whose ID immediately follows"); the paginator's HasMoreShards."""
    fake = FakeKinesis()
    before = time.time()
    fake.create_stream("s", 3)
    after = time.time()
    fake.split_shard("s", "shardId-000000000001", fake.streams["s"].shards[1].start + 1)
    fake.create_stream("wide", 120)
    fake.create_stream("od", 2, on_demand=True)
    async with connect(fake) as client:
        out = await client.call("DescribeStream", {"StreamName": "s"})
        assert off_model(service_model().operation_model("DescribeStream").output_shape, out) == []
        desc = out["StreamDescription"]
        listed = (await client.call("ListShards", {"StreamName": "s"}))["Shards"]
        assert desc["Shards"] == listed and len(listed) == 5  # closed parents included
        assert desc["HasMoreShards"] is False
        assert {
            k: v for k, v in desc.items() if k not in ("Shards", "StreamCreationTimestamp")
        } == {
            "StreamName": "s",
            "StreamARN": arn("s"),
            "StreamStatus": "ACTIVE",
            "StreamModeDetails": {"StreamMode": "PROVISIONED"},
            "HasMoreShards": False,
            "RetentionPeriodHours": 24,
            "EnhancedMonitoring": [{"ShardLevelMetrics": []}],
            "EncryptionType": "NONE",
        }
        # an epoch-seconds number, fixed at creation, the same in DescribeStreamSummary
        created = desc["StreamCreationTimestamp"]
        assert isinstance(created, float) and before - 0.001 <= created <= after + 0.001
        assert (await summary(client, "s"))["StreamCreationTimestamp"] == created
        parsed = parsed_by_botocore("DescribeStream", out)["StreamDescription"]
        assert parsed["StreamCreationTimestamp"].tzinfo is not None
        assert parsed["StreamCreationTimestamp"].timestamp() == pytest.approx(created)
        od = await client.call("DescribeStream", {"StreamARN": fake.stream_arn("od")})
        assert od["StreamDescription"]["StreamModeDetails"] == {"StreamMode": "ON_DEMAND"}

        # pages of Limit shards, each after the last one's id
        ids, start = [], None
        for expect_more in (True, True, False):
            body: dict[str, Any] = {"StreamName": "s", "Limit": 2}
            if start is not None:
                body["ExclusiveStartShardId"] = start
            page = (await client.call("DescribeStream", body))["StreamDescription"]
            assert page["HasMoreShards"] is expect_more
            ids += [shard["ShardId"] for shard in page["Shards"]]
            start = ids[-1]
        assert ids == [shard["ShardId"] for shard in listed]
        # at most 100 a page, whatever the Limit
        for limit in (None, 100, 10_000):
            body = (
                {"StreamName": "wide"} if limit is None else {"StreamName": "wide", "Limit": limit}
            )
            page = (await client.call("DescribeStream", body))["StreamDescription"]
            assert (len(page["Shards"]), page["HasMoreShards"]) == (100, True)
        body = {"StreamName": "wide", "ExclusiveStartShardId": "shardId-000000000099"}
        page = (await client.call("DescribeStream", body))["StreamDescription"]
        assert (len(page["Shards"]), page["HasMoreShards"]) == (20, False)

        fake.split_shard("s", "shardId-000000000000", 1)  # the timestamp stays put
        again = await client.call("DescribeStream", {"StreamName": "s"})
        assert again["StreamDescription"]["StreamCreationTimestamp"] == created
        assert len(again["StreamDescription"]["Shards"]) == 7

        for bad in (
            {"StreamName": "s", "Limit": 0},
            {"StreamName": "s", "Limit": 10_001},
            {"StreamName": "s", "ExclusiveStartShardId": ""},
            {"StreamName": "s", "ExclusiveStartShardId": "shard 1"},
            {"StreamName": "s", "ExclusiveStartShardId": "x" * 129},
            {"StreamName": "s", "StreamId": "not-a-stream-id"},
            {},
        ):
            assert (await fails(client.call("DescribeStream", bad))).code == (
                "ValidationException"
            ), bad
        for wrong_type in ({"StreamName": "s", "Limit": True}, {"StreamName": "s", "Limit": "5"}):
            assert (await fails(client.call("DescribeStream", wrong_type))).code == (
                "SerializationException"
            ), wrong_type
        missing = await fails(client.call("DescribeStream", {"StreamName": "nope"}))
        assert missing.code == "ResourceNotFoundException"


async def test_list_streams_pages_names_in_order_with_summaries() -> None:
    """ListStreamsOutput (required StreamNames, HasMoreStreams; NextToken; StreamSummaries
    of StreamName, StreamARN, StreamStatus, StreamModeDetails, StreamCreationTimestamp);
    ListStreamsInput: Limit (default 100, "at most 100 results are returned", 1 to 10000),
    ExclusiveStartStreamName ("the name of the stream to start the list with", the
    StreamName shape), NextToken (the paginator's input token)."""
    fake = FakeKinesis()
    async with connect(fake) as client:
        assert await client.call("ListStreams", {}) == {
            "StreamNames": [],
            "HasMoreStreams": False,
            "StreamSummaries": [],
        }
        for name in ("charlie", "alpha", "echo", "bravo"):
            fake.create_stream(name)
        fake.create_stream("delta", 2, on_demand=True)
        names = ["alpha", "bravo", "charlie", "delta", "echo"]

        out = await client.call("ListStreams", {})
        assert off_model(service_model().operation_model("ListStreams").output_shape, out) == []
        assert out["StreamNames"] == names and out["HasMoreStreams"] is False
        assert "NextToken" not in out
        for name, item in zip(names, out["StreamSummaries"], strict=True):
            assert item == {
                "StreamName": name,
                "StreamARN": fake.stream_arn(name),
                "StreamStatus": "ACTIVE",
                "StreamModeDetails": {
                    "StreamMode": "ON_DEMAND" if name == "delta" else "PROVISIONED"
                },
                "StreamCreationTimestamp": (await summary(client, name))["StreamCreationTimestamp"],
            }
        parsed = parsed_by_botocore("ListStreams", out)["StreamSummaries"][0]
        assert parsed["StreamCreationTimestamp"].tzinfo is not None

        # NextToken pages
        got, body = [], {"Limit": 2}
        while True:
            page = await client.call("ListStreams", body)
            got.append(page["StreamNames"])
            assert [s["StreamName"] for s in page["StreamSummaries"]] == page["StreamNames"]
            if not page["HasMoreStreams"]:
                assert "NextToken" not in page
                break
            body = {"Limit": 2, "NextToken": page["NextToken"]}
        assert got == [["alpha", "bravo"], ["charlie", "delta"], ["echo"]]
        # ExclusiveStartStreamName pages; a NextToken takes precedence (a paginator sends both)
        page = await client.call("ListStreams", {"ExclusiveStartStreamName": "bravo", "Limit": 2})
        assert (page["StreamNames"], page["HasMoreStreams"]) == (["charlie", "delta"], True)
        follow = {"ExclusiveStartStreamName": "bravo", "Limit": 2, "NextToken": page["NextToken"]}
        assert (await client.call("ListStreams", follow))["StreamNames"] == ["echo"]
        after_all = await client.call("ListStreams", {"ExclusiveStartStreamName": "zulu"})
        assert (after_all["StreamNames"], after_all["HasMoreStreams"]) == ([], False)

        shards = await client.call("ListShards", {"StreamName": "delta", "MaxResults": 1})
        for bad, code in (
            ({"Limit": 0}, "ValidationException"),
            ({"Limit": 10_001}, "ValidationException"),
            # a value of the wrong JSON type: the protocol's SerializationException
            ({"Limit": "2"}, "SerializationException"),
            ({"Limit": False}, "SerializationException"),
            ({"ExclusiveStartStreamName": ""}, "ValidationException"),
            ({"ExclusiveStartStreamName": "a b"}, "ValidationException"),
            ({"ExclusiveStartStreamName": 5}, "SerializationException"),
            ({"NextToken": "garbage"}, "InvalidArgumentException"),
            ({"NextToken": base64.b64encode(b"[1, 2]").decode()}, "InvalidArgumentException"),
            ({"NextToken": shards["NextToken"]}, "InvalidArgumentException"),
        ):
            assert (await fails(client.call("ListStreams", bad))).code == code, bad

        for i in range(100):
            fake.create_stream(f"z{i:03d}")
        for limit in (None, 100, 10_000):
            body = {} if limit is None else {"Limit": limit}
            page = await client.call("ListStreams", body)
            assert (len(page["StreamNames"]), page["HasMoreStreams"]) == (100, True)
            assert page["StreamNames"][-1] == "z094"
        rest = await client.call("ListStreams", {"NextToken": page["NextToken"]})
        assert rest["StreamNames"] == [f"z{i:03d}" for i in range(95, 100)]


@pytest.mark.parametrize("anyio_backend", [("trio", {"clock": MockClock(autojump_threshold=0)})])
async def test_a_list_streams_next_token_expires(anyio_backend: Any) -> None:
    """ListStreams errors: ExpiredNextTokenException ("The pagination token passed to the
    operation is expired"); the fake's tokens last 300 s, as ListShards' do."""
    fake = FakeKinesis()
    for name in ("a", "b", "c"):
        fake.create_stream(name)
    async with connect(fake) as client:
        page = await client.call("ListStreams", {"Limit": 1})
        await anyio.sleep(299)
        assert (await client.call("ListStreams", {"NextToken": page["NextToken"]}))[
            "StreamNames"
        ] == ["b", "c"]
        await anyio.sleep(2)
        error = await fails(client.call("ListStreams", {"NextToken": page["NextToken"]}))
        assert error.code == "ExpiredNextTokenException"


class _Body:
    """The ``raw`` of a botocore ``AWSResponse``: its content, all at once."""

    def __init__(self, content: bytes) -> None:
        self.content = content

    def stream(self, **_: Any) -> Iterator[bytes]:
        yield self.content


def botocore_client(fake: FakeKinesis) -> Any:
    """A stock botocore Kinesis client whose requests the fake serves (call it from a
    worker thread of the event loop the fake runs in)."""
    transport = fake.transport()
    client = botocore.session.get_session().create_client(
        "kinesis",
        region_name=REGION,
        endpoint_url="http://fake.local",
        aws_access_key_id="k",
        aws_secret_access_key="s",
    )

    async def serve(request: httpx.Request) -> tuple[int, dict[str, str], bytes]:
        response = await transport.handle_async_request(request)
        return response.status_code, dict(response.headers), await response.aread()

    def send(request: Any, **_: Any) -> Any:
        headers = {k: v.decode() if isinstance(v, bytes) else v for k, v in request.headers.items()}
        body = request.body or b""
        content = body.encode() if isinstance(body, str) else bytes(body)
        ask = httpx.Request(request.method, request.url, headers=headers, content=content)
        status, got, raw = anyio.from_thread.run(serve, ask)
        return botocore.awsrequest.AWSResponse(request.url, status, got, _Body(raw))

    client.meta.events.register("before-send.kinesis", send)
    return client


async def test_botocore_waiters_and_paginators_run_against_the_fake() -> None:
    """botocore's Kinesis waiters (StreamExists: DescribeStream until
    StreamDescription.StreamStatus is ACTIVE; StreamNotExists: until
    ResourceNotFoundException) and paginators (DescribeStream by ExclusiveStartShardId and
    HasMoreShards; ListStreams by NextToken), through the stock client and parser."""
    fake = FakeKinesis()
    for name in ("s", "b", "a", "c", "d"):
        fake.create_stream(name, 3)
    fake.split_shard("s", "shardId-000000000002", fake.streams["s"].shards[2].start + 1)

    def use() -> tuple[Any, Any, Any]:
        client = botocore_client(fake)
        fast = {"Delay": 0, "MaxAttempts": 1}
        client.get_waiter("stream_exists").wait(StreamName="s", WaiterConfig=fast)
        client.get_waiter("stream_not_exists").wait(StreamName="gone", WaiterConfig=fast)
        streams = client.get_paginator("list_streams").paginate(PaginationConfig={"PageSize": 2})
        shards = client.get_paginator("describe_stream").paginate(
            StreamName="s", PaginationConfig={"PageSize": 2}
        )
        described = client.describe_stream_summary(StreamName="s")
        return streams.build_full_result(), shards.build_full_result(), described

    streams, shards, described = await anyio.to_thread.run_sync(use)
    assert streams["StreamNames"] == ["a", "b", "c", "d", "s"]
    assert [s["StreamARN"] for s in streams["StreamSummaries"]] == [
        arn(n) for n in streams["StreamNames"]
    ]
    description = shards["StreamDescription"]
    assert [s["ShardId"] for s in description["Shards"]] == [
        f"shardId-00000000000{i}" for i in range(5)
    ]
    created = fake.streams["s"].created
    assert description["StreamCreationTimestamp"].timestamp() == pytest.approx(created)
    stamp = described["StreamDescriptionSummary"]["StreamCreationTimestamp"]
    assert stamp.astimezone(timezone.utc).timestamp() == pytest.approx(created)
    assert [op for op in fake.calls if op == "ListStreams"] == ["ListStreams"] * 3
