"""The local Kinesis answers every request as the service would, and keeps memory bounded.

Malformed bodies and members of the wrong type get the service's 400 JSON error (the shapes
from botocore's service model, ``kinesis/2013-12-02``); GetRecords has the service's caps;
the account's shard quota, retention and a bounded request log keep a long run's memory flat.
"""

from __future__ import annotations

import base64
import functools
import json
import math
from typing import Any

import anyio
import botocore.session
import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from trio.testing import MockClock

from kinesis_trio import KinesisError
from kinesis_trio.testing import FakeKinesis
from kinesis_trio.testing._local_server import LocalSettings, SettingsError, make_fake, run_local
from tests.support.helpers import connect, entry

pytestmark = pytest.mark.anyio

_MIB = 1024 * 1024


async def answer(fake: FakeKinesis, operation: str, body: bytes | str) -> tuple[int, Any]:
    """The fake's answer to a raw request body (status, parsed JSON body)."""
    content = body.encode() if isinstance(body, str) else body
    request = httpx.Request(
        "POST",
        "http://fake.local/",
        headers={
            "X-Amz-Target": f"Kinesis_20131202.{operation}",
            "Content-Type": "application/x-amz-json-1.1",
            "Authorization": "AWS4-HMAC-SHA256 Credential=k/20260101/us-east-1/kinesis",
        },
        content=content,
    )
    response = await fake.transport().handle_async_request(request)
    await response.aread()
    return response.status_code, json.loads(response.content)


async def error_code(fake: FakeKinesis, operation: str, body: Any) -> str:
    status, out = await answer(fake, operation, json.dumps(body))
    assert status == 400, (operation, body, status, out)
    assert isinstance(out.get("message"), str) and out["message"], out
    return str(out["__type"])


# -- malformed bodies and wrong types ----------------------------------------------------


async def test_a_body_nested_too_deep_is_a_serialization_error() -> None:
    """Finding 6: a 10,000-deep body raised RecursionError inside the fake (no answer)."""
    fake = FakeKinesis()
    for operation in ("ListStreams", "PutRecords", "GetRecords"):
        status, out = await answer(fake, operation, "[" * 10_000 + "]" * 10_000)
        assert (status, out["__type"]) == (400, "SerializationException")
        status, out = await answer(fake, operation, '{"a":' * 10_000 + "1" + "}" * 10_000)
        assert (status, out["__type"]) == (400, "SerializationException")
    status, out = await answer(fake, "ListStreams", '{"Limit": ' + "9" * 5000 + "}")
    assert (status, out["__type"]) == (400, "SerializationException")  # int-digit limit


async def test_members_of_the_wrong_type_get_the_services_errors() -> None:
    """Finding 6, each case the issue lists: a wrong JSON type is the protocol's
    SerializationException; a value outside the model's range is ValidationException
    (GetRecordsInput.Limit above 10,000: InvalidArgumentException, as its documentation
    says); a shard iterator or NextToken the fake did not hand out, InvalidArgumentException."""
    fake = FakeKinesis()
    fake.create_stream("s", 2)
    async with connect(fake) as client:
        iterator = await client.get_shard_iterator("s", "shardId-000000000000", "TRIM_HORIZON")
    forged = [
        "x",
        "[]",
        "null",
        '["s", "shardId-000000000000"]',
        '["s", "shardId-000000000000", -1]',
        '["s", "shardId-000000000000", 1.5]',
        '["s", "shardId-000000000000", true]',
        '[["s"], "shardId-000000000000", 0]',
        '{"a": 1}',
        "[" * 400,
    ]
    cases: list[tuple[str, dict[str, Any], str]] = [
        *[
            ("GetRecords", {"ShardIterator": iterator, "Limit": bad}, "SerializationException")
            for bad in ("abc", [1], {"n": 1}, 5.5, True)
        ],
        ("GetRecords", {"ShardIterator": iterator, "Limit": 0}, "ValidationException"),
        ("GetRecords", {"ShardIterator": iterator, "Limit": -1}, "ValidationException"),
        ("GetRecords", {"ShardIterator": iterator, "Limit": 10_001}, "InvalidArgumentException"),
        ("GetRecords", {"ShardIterator": 7}, "SerializationException"),
        ("GetRecords", {"ShardIterator": "x" * 513}, "ValidationException"),
        *[("GetRecords", {"ShardIterator": it}, "InvalidArgumentException") for it in forged],
        ("ListShards", {"StreamName": "s", "ExclusiveStartShardId": 5}, "SerializationException"),
        ("ListShards", {"StreamName": "s", "ShardFilter": "AT_LATEST"}, "SerializationException"),
        ("ListShards", {"StreamName": "s", "ShardFilter": []}, "SerializationException"),
        ("ListShards", {"StreamName": "s", "ShardFilter": {}}, "ValidationException"),
        ("ListShards", {"StreamName": "s", "ShardFilter": {"Type": "X"}}, "ValidationException"),
        ("ListShards", {"StreamName": "s", "MaxResults": "10"}, "SerializationException"),
        *[
            ("ListShards", {"NextToken": token}, "InvalidArgumentException")
            for token in (
                "x",
                base64.b64encode(b"[1, 2, 3, 4, 5]").decode(),
                base64.b64encode(b'["s", null, false, -1, 0]').decode(),
                base64.b64encode(b'["s", null, false, 0, "now"]').decode(),
                base64.b64encode(b'[["s"], null, false, 0, 0]').decode(),
                base64.b64encode(b"[" * 2000).decode(),
            )
        ],
        ("ListShards", {"NextToken": 5}, "SerializationException"),
        (
            "ListStreams",
            {"NextToken": base64.b64encode(b"[" * 2000).decode()},
            "InvalidArgumentException",
        ),
        (
            "CreateStream",
            {"StreamName": "t", "StreamModeDetails": "ON_DEMAND"},
            "SerializationException",
        ),
        ("CreateStream", {"StreamName": "t", "StreamModeDetails": {}}, "ValidationException"),
        ("CreateStream", {"StreamName": "t", "ShardCount": "2"}, "SerializationException"),
        ("CreateStream", {"StreamName": ["t"]}, "SerializationException"),
        (
            "GetShardIterator",
            {"StreamName": "s", "ShardId": "shardId-000000000000", "ShardIteratorType": "NEXT"},
            "ValidationException",
        ),
        (
            "GetShardIterator",
            {
                "StreamName": "s",
                "ShardId": "shardId-000000000000",
                "ShardIteratorType": "AT_SEQUENCE_NUMBER",
                "StartingSequenceNumber": "12x",
            },
            "ValidationException",
        ),
        (
            "GetShardIterator",
            {
                "StreamName": "s",
                "ShardId": "shardId-000000000000",
                "ShardIteratorType": "AT_TIMESTAMP",
                "Timestamp": "yesterday",
            },
            "SerializationException",
        ),
        (
            "SplitShard",
            {"StreamName": "s", "ShardToSplit": 0, "NewStartingHashKey": "1"},
            "SerializationException",
        ),
        ("PutRecords", {"StreamName": "s", "Records": "abc"}, "SerializationException"),
        (
            "PutRecord",
            {"StreamName": "s", "Data": "eA==", "PartitionKey": 5},
            "SerializationException",
        ),
        (
            "PutRecord",
            {"StreamName": "s", "Data": "eA==", "PartitionKey": "k", "DryRun": "yes"},
            "SerializationException",
        ),
    ]
    for operation, body, code in cases:
        assert await error_code(fake, operation, body) == code, (operation, body)
    status, out = await answer(fake, "GetRecords", json.dumps({"ShardIterator": iterator}))
    assert status == 200 and out["Records"] == []  # the fake still serves


async def test_nan_and_infinite_numbers_are_serialization_errors() -> None:
    """``NaN`` and ``1e400`` (Python's JSON reader takes both) are not integers."""
    fake = FakeKinesis()
    fake.create_stream("s")
    async with connect(fake) as client:
        iterator = await client.get_shard_iterator("s", "shardId-000000000000", "TRIM_HORIZON")
    for raw in ("NaN", "Infinity", "-Infinity", "1e400"):
        body = f'{{"ShardIterator": {json.dumps(iterator)}, "Limit": {raw}}}'
        status, out = await answer(fake, "GetRecords", body)
        assert (status, out["__type"]) == (400, "SerializationException"), raw


@functools.cache
def _model() -> Any:
    return botocore.session.get_session().get_service_model("kinesis")


@functools.cache
def _served() -> list[str]:
    fake = FakeKinesis()
    return sorted(
        op
        for op in _model().operation_names
        if hasattr(fake, f"_op_{op}") or op in ("PutRecords", "PutRecord")
    )


_ANY_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3)
    ),
    max_leaves=8,
)


@st.composite
def model_bodies(draw: st.DrawFn) -> tuple[str, dict[str, Any]]:
    """An operation the fake serves and a body of its input shape's members, each either a
    plausible value or any JSON at all."""
    operation = draw(st.sampled_from(_served()))
    shape = _model().operation_model(operation).input_shape
    body: dict[str, Any] = {}
    for name in draw(st.lists(st.sampled_from(sorted(shape.members)), unique=True)):
        plausible = {
            "StreamName": st.sampled_from(["s", "t", "missing"]),
            "StreamARN": st.sampled_from(
                ["arn:aws:kinesis:us-east-1:123456789012:stream/s", "arn:x"]
            ),
            "ShardId": st.sampled_from(["shardId-000000000000", "shardId-000000000009"]),
        }.get(name, _ANY_JSON)
        body[name] = draw(st.one_of(plausible, _ANY_JSON))
    return operation, body


@settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(case=model_bodies())
async def test_any_body_of_any_operation_gets_an_answer(case: tuple[str, dict[str, Any]]) -> None:
    """Every operation the fake serves, with members drawn from its input shape and any JSON
    in them: the answer is a 200 or the service's 4xx JSON error, never an exception."""
    operation, body = case
    fake = FakeKinesis()
    fake.create_stream("s", 2)
    fake.create_stream("t", 1, on_demand=True)
    status, out = await answer(fake, operation, json.dumps(body))
    assert status == 200 or (400 <= status < 500 and isinstance(out.get("__type"), str)), out


# -- GetRecords: 10 MiB a call, Limit 1-10000, MillisBehindLatest ------------------------


async def test_get_records_stops_at_10_mib_and_a_larger_record_comes_alone() -> None:
    """Finding 7: 30 records of 1 MiB came back in one 40 MB answer. The quotas page:
    "GetRecords can retrieve up to 10 MB of data per call from a single shard"."""
    fake = FakeKinesis(max_request_size=40 * _MIB)
    fake.create_stream("s", max_record_size_kib=10240)
    async with connect(fake) as client:
        for _ in range(6):
            await client.put_records("s", [entry(b"x" * (_MIB - 1), "k") for _ in range(5)])
        await client.put_records("s", [entry(b"y" * (10 * _MIB - 1), "k")])
        iterator = await client.get_shard_iterator("s", "shardId-000000000000", "TRIM_HORIZON")
        sizes = []
        while True:
            page = await client.get_records(iterator)
            sizes.append(sum(len(base64.b64decode(r["Data"])) + 1 for r in page["Records"]))
            if not page["Records"]:
                break
            iterator = page["NextShardIterator"]
    assert sizes[:3] == [10 * _MIB, 10 * _MIB, 10 * _MIB]  # ten records a call
    assert sizes[3] == 10 * _MIB and sizes[4] == 0  # the 10 MiB record alone, then the tip
    assert len(fake.records("s")) == 31


async def test_get_records_honours_limit_and_says_how_far_behind_the_reader_is() -> None:
    """``Limit`` caps the page; MillisBehindLatest is the age of the oldest record not yet
    returned (0 at the tip). Arrival times are set by hand: no clock involved."""
    fake = FakeKinesis()
    fake.create_stream("s")
    async with connect(fake) as client:
        await client.put_records("s", [entry(b"%d" % i) for i in range(5)])
        records = fake.streams["s"].shards[0].records
        for i, record in enumerate(records):
            record.arrival -= 60.0 - i  # 60 s to 56 s old
        iterator = await client.get_shard_iterator("s", "shardId-000000000000", "TRIM_HORIZON")
        page = await client.get_records(iterator, limit=2)
        assert [r["Data"] for r in page["Records"]] == ["MA==", "MQ=="]
        assert 57_500 <= page["MillisBehindLatest"] <= 58_500  # record 2: 58 s old
        page = await client.get_records(page["NextShardIterator"], limit=3)
        assert len(page["Records"]) == 3 and page["MillisBehindLatest"] == 0


# -- the account's shard quota -----------------------------------------------------------


async def test_a_huge_shard_count_is_refused_before_anything_is_built() -> None:
    """Finding 2: ``ShardCount: 2147483647`` built every shard in one blocking loop (RSS
    228 -> 980 MB). The quotas page: "The default shard quota is 20,000 shards per AWS
    account" in us-east-1; CreateStream past it: LimitExceededException."""
    fake = FakeKinesis()
    async with connect(fake) as client:
        body = {"StreamName": "big", "ShardCount": 2_147_483_647}
        with pytest.raises(KinesisError) as info:
            await client.call("CreateStream", body)
        assert info.value.code == "LimitExceededException"
        assert "Limit: 20000" in info.value.message
        assert "big" not in fake.streams
        fake.shard_limit = 6
        await client.create_stream("a", 4)
        for call, args in (
            (client.create_stream, ("b", 3)),
            (client.update_shard_count, ("a", 8)),
        ):
            with pytest.raises(KinesisError) as info:
                await call(*args)
            assert info.value.code == "LimitExceededException"
        await client.create_stream("b", 2)  # exactly at the quota
        with pytest.raises(KinesisError) as info:
            await client.call(
                "SplitShard",
                {
                    "StreamName": "b",
                    "ShardToSplit": "shardId-000000000000",
                    "NewStartingHashKey": "5",
                },
            )
        assert info.value.code == "LimitExceededException"
        await client.update_shard_count("a", 2)  # going down is always allowed
        assert len(fake.open_shards("a")) == 2


async def test_streams_asked_for_at_start_past_the_quota_are_refused() -> None:
    """``kinesis-trio local --streams big:30000`` stops with one line naming the setting."""
    settings = LocalSettings(port=0, streams=[("a", 3), ("big", 30_000)])
    with pytest.raises(SettingsError, match="--streams big:30000: LimitExceededException"):
        await run_local(settings, lambda endpoint, cert: None)
    fake = make_fake(LocalSettings(shard_limit=4))
    fake.calls.append("ListStreams")  # the served engine keeps no request log
    assert (fake.shard_limit, fake.calls) == (4, [])


# -- the request log ---------------------------------------------------------------------


async def test_the_request_log_is_bounded_and_keeps_no_record_data() -> None:
    """Finding 4: PutRecord's data stayed in ``requests`` for ever and every request added
    to ``calls``; now both keep the latest ``request_log`` requests, without data."""
    fake = FakeKinesis(request_log=50)
    fake.create_stream("s")
    async with connect(fake) as client:
        for i in range(120):
            await client.call(
                "PutRecord",
                {
                    "StreamName": "s",
                    "Data": base64.b64encode(b"x" * 1000).decode(),
                    "PartitionKey": "k",
                },
            )
            assert len(fake.calls) < 100 and len(fake.requests) < 100, i
        assert fake.requests[-1] == (
            "PutRecord",
            {"StreamName": "s", "Data": 1336, "PartitionKey": "k"},
        )
        assert fake.calls[-1] == "PutRecord" and len(fake.calls) >= 50
    silent = FakeKinesis(request_log=0)
    silent.create_stream("s")
    async with connect(silent) as client:
        await client.call("ListStreams", {})
    assert silent.calls == [] and silent.requests == []


# -- retention ---------------------------------------------------------------------------


def _age(fake: FakeKinesis, name: str, hours: float) -> None:
    """Make every record of the stream ``hours`` older, as if that time had passed."""
    stream = fake.streams[name]
    for shard in stream.shards:
        for record in shard.records:
            record.arrival -= hours * 3600
    stream.trimmed_at = -math.inf


async def test_records_older_than_the_retention_period_are_trimmed() -> None:
    """Finding 5: ``RetentionPeriodHours: 24`` was reported and never applied. Records past
    it are gone from GetRecords and from memory, TRIM_HORIZON moves, and an iterator taken
    before the trim still reads on from where it was."""
    fake = FakeKinesis()
    fake.create_stream("s")
    async with connect(fake) as client:
        await client.put_records("s", [entry(b"old-%d" % i) for i in range(3)])
        before = await client.get_shard_iterator("s", "shardId-000000000000", "TRIM_HORIZON")
        page = await client.get_records(before, limit=1)
        held = page["NextShardIterator"]  # after old-0
        _age(fake, "s", 23.9)
        await client.put_records("s", [entry(b"new")])
        assert len(fake.records("s")) == 4  # nothing is 24 h old yet
        _age(fake, "s", 0.2)  # the three old ones pass 24 h; "new" is 12 minutes old
        iterator = await client.get_shard_iterator("s", "shardId-000000000000", "TRIM_HORIZON")
        page = await client.get_records(iterator)
        assert [base64.b64decode(r["Data"]) for r in page["Records"]] == [b"new"]
        assert [r.data for r in fake.records("s")] == [b"new"]  # gone from memory too
        page = await client.get_records(held)
        assert [base64.b64decode(r["Data"]) for r in page["Records"]] == [b"new"]
        summary = await client.describe_stream_summary("s")
        assert summary["RetentionPeriodHours"] == 24


@pytest.mark.parametrize(
    "first, then",
    [("trio", "trio"), ("asyncio", "trio"), ("trio", "asyncio")],
    ids=["trio then trio", "asyncio then trio", "trio then asyncio"],
)
def test_a_fake_served_by_one_event_loop_then_another_keeps_its_time(first: str, then: str) -> None:
    """Each trio run has a clock of its own at a random offset (10,000 to 200,000 s): a
    fake served by one run and then another (two SyncProducers, a forked child's) saw its
    time jump by up to 53 hours, and trimmed the first run's records as past retention.
    Here the second loop's clock reads 100 hours later (a trio MockClock) or earlier (the
    first run's clock jumped 100 hours ahead): records stay, in arrival order."""
    fake = FakeKinesis()
    fake.create_stream("s")

    async def put(data: bytes) -> None:
        async with connect(fake) as client:
            await client.put_records("s", [entry(data)])

    async def read() -> list[bytes]:
        async with connect(fake) as client:
            it = await client.get_shard_iterator("s", "shardId-000000000000", "TRIM_HORIZON")
            page = await client.get_records(it)
        return [base64.b64decode(r["Data"]) for r in page["Records"]]

    def run(backend: str, func: Any, *args: Any, hours: float) -> Any:
        if backend == "asyncio":  # its clock: the monotonic one, wherever it stands
            return anyio.run(func, *args, backend="asyncio")
        clock = MockClock()
        clock.jump(hours * 3600)
        return anyio.run(func, *args, backend="trio", backend_options={"clock": clock})

    run(first, put, b"first", hours=200 if then == "asyncio" else 0)
    run(then, put, b"then", hours=100)
    assert run(then, read, hours=100) == [b"first", b"then"]
    arrivals = [r.arrival for r in fake.records("s")]
    assert arrivals == sorted(arrivals)


async def test_retention_is_increased_and_decreased_as_the_service_allows() -> None:
    """IncreaseStreamRetentionPeriod / DecreaseStreamRetentionPeriod (were
    UnknownOperationException): 24 to 8760 hours, up only by Increase, down only by
    Decrease; a shorter period trims at the next access."""
    fake = FakeKinesis()
    fake.create_stream("s")
    async with connect(fake) as client:
        await client.put_records("s", [entry(b"a")])

        async def retention(operation: str, hours: Any) -> dict[str, Any]:
            return await client.call(operation, {"StreamName": "s", "RetentionPeriodHours": hours})

        await retention("IncreaseStreamRetentionPeriod", 72)
        summary = await client.describe_stream_summary("s")
        assert summary["RetentionPeriodHours"] == 72
        described = await client.call("DescribeStream", {"StreamName": "s"})
        assert described["StreamDescription"]["RetentionPeriodHours"] == 72
        _age(fake, "s", 48)
        assert len(fake.records("s")) == 1 and await client.get_records(
            await client.get_shard_iterator("s", "shardId-000000000000", "TRIM_HORIZON")
        )
        for operation, hours, code in (
            ("IncreaseStreamRetentionPeriod", 48, "InvalidArgumentException"),  # lower
            ("IncreaseStreamRetentionPeriod", 8761, "InvalidArgumentException"),
            ("DecreaseStreamRetentionPeriod", 96, "InvalidArgumentException"),  # higher
            ("DecreaseStreamRetentionPeriod", 23, "InvalidArgumentException"),
            ("DecreaseStreamRetentionPeriod", "24", "SerializationException"),
            ("DecreaseStreamRetentionPeriod", None, "ValidationException"),
        ):
            with pytest.raises(KinesisError) as info:
                await retention(operation, hours)
            assert info.value.code == code, (operation, hours)
        await retention("DecreaseStreamRetentionPeriod", 24)
        iterator = await client.get_shard_iterator("s", "shardId-000000000000", "TRIM_HORIZON")
        assert (await client.get_records(iterator))["Records"] == []
        assert fake.records("s") == []
        await retention("IncreaseStreamRetentionPeriod", 8760)
        assert fake.streams["s"].retention_hours == 8760


@pytest.mark.parametrize("anyio_backend", [("trio", {"clock": MockClock(autojump_threshold=0)})])
async def test_two_days_at_a_steady_rate_hold_one_day_of_records() -> None:
    """Finding 5, over virtual time: a steady writer and a reader for 48 hours. Once the
    first records pass 24 h, the records held stop growing (about one day's worth) and
    the request log stays at its bound."""
    fake = FakeKinesis(request_log=100)
    fake.create_stream("s", 2)
    held: dict[int, int] = {}
    async with connect(fake) as client:
        start = anyio.current_time()
        iterator = await client.get_shard_iterator("s", "shardId-000000000000", "TRIM_HORIZON")
        for step in range(48 * 12):  # 50 records every 5 minutes
            batch = [entry(b"m%d-%d" % (step, i), f"k{i}") for i in range(50)]
            await client.put_records("s", batch)
            page = await client.get_records(iterator)
            iterator = page["NextShardIterator"]
            if step % 12 == 11:
                held[step // 12 + 1] = len(fake.records("s"))
            await anyio.sleep(start + (step + 1) * 300 - anyio.current_time())
    day = 24 * 600
    assert held[12] == day // 2 and held[24] == day  # nothing trimmed before a day
    for hour in range(25, 49):  # a day's worth, and the batch exactly 24 h old
        assert day <= held[hour] <= day + 50, (hour, held[hour])
    assert len(fake.calls) < 200 and len(fake.requests) < 200
