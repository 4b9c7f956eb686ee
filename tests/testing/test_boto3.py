"""The Python local engine (``kinesis-trio local --emulator python``) through clients nobody
here wrote: boto3 for every operation the engine serves, aws-kinesis-agg for KPL aggregates.

boto3 validates each request against botocore's service model before sending it and parses
each answer with the model, so a call that returns proves the request and answer shapes.
Parsing is lenient (a missing required member or an unknown enum value passes), so every
successful answer is also checked here against the model's output shape: required
members, enums, patterns, lengths and ranges (:func:`_shape_violations`, run by an
``after-call`` hook on every client of this module), less the bounds Kinesis itself does
not keep in its answers.

Engines: the session's ``python_engine``, plus engines started here with ``--limits aws``,
``--faults``, ``--tls`` and ``--data``. Streams are named per test, so the module shares the
session engine with other modules.
"""

from __future__ import annotations

import base64
import contextlib
import datetime
import hashlib
import itertools
import re
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import boto3
import pytest
from aws_kinesis_agg.aggregator import RecordAggregator
from aws_kinesis_agg.deaggregator import deaggregate_records
from botocore import UNSIGNED
from botocore.config import Config
from botocore.exceptions import ClientError, SSLError

from kinesis_trio import Producer, RecordResult, StaticCredentials
from kinesis_trio.testing._emulators import LocalKinesis
from tests.support.emulators import EmulatorEndpoint

pytestmark = pytest.mark.integration

MIB = 1024 * 1024
MAX_HASH = 2**128 - 1
PTE = "ProvisionedThroughputExceededException"
#: Streams of the fault engine: every write to ``FATAL_STREAM`` fails this way.
FATAL_STREAM, FATAL_CODE = "audit", "AccessDeniedException"
#: Shapes whose pattern the engine is known not to follow (none).
_PATTERN_EXEMPT: frozenset[str] = frozenset()
#: Shapes whose bounds bind requests only: Kinesis itself answers ``"EnhancedMonitoring":
#: [{"ShardLevelMetrics": []}]`` (MetricsNameList: min 1) and ``"FailedRecordCount": 0``
#: (PositiveIntegerObject: min 1).
_BOUNDS_EXEMPT = frozenset({"MetricsNameList", "PositiveIntegerObject"})


# -- response shapes ---------------------------------------------------------------------


def _shape_violations(shape: Any, value: Any, path: str, *, patterns: bool = True) -> list[str]:
    """Where ``value`` (as boto3 parsed it) breaks ``shape`` (a botocore shape)."""
    if value is None:
        return []
    kind = shape.type_name
    meta = shape.metadata
    found: list[str] = []
    if kind == "structure":
        if not isinstance(value, dict):
            return [f"{path}: {type(value).__name__}, not a structure"]
        found += [
            f"{path}.{m}: required, missing" for m in shape.required_members if m not in value
        ]
        for member, item in value.items():
            if member not in shape.members:
                found.append(f"{path}.{member}: not in the model")
            else:
                found += _shape_violations(
                    shape.members[member], item, f"{path}.{member}", patterns=patterns
                )
    elif kind == "list":
        if not isinstance(value, list):
            return [f"{path}: {type(value).__name__}, not a list"]
        bounded = shape.name not in _BOUNDS_EXEMPT
        if bounded and not meta.get("min", 0) <= len(value) <= meta.get("max", len(value)):
            found.append(f"{path}: {len(value)} members, outside {meta}")
        for i, item in enumerate(value):
            found += _shape_violations(shape.member, item, f"{path}[{i}]", patterns=patterns)
    elif kind == "map":
        for key, item in value.items():
            found += _shape_violations(shape.value, item, f"{path}[{key!r}]", patterns=patterns)
    elif kind == "string":
        if not isinstance(value, str):
            return [f"{path}: {type(value).__name__}, not a string"]
        if shape.enum and value not in shape.enum:
            found.append(f"{path}: {value!r} not in the enum {shape.enum}")
        if not meta.get("min", 0) <= len(value) <= meta.get("max", len(value)):
            found.append(f"{path}: length {len(value)} outside {meta}")
        pattern = meta.get("pattern")
        exempt = shape.name in _PATTERN_EXEMPT
        # Smithy patterns are not implicitly anchored (the model anchors the ones it means)
        if patterns and pattern and not exempt and not re.search(pattern, value):
            found.append(f"{path}: {value!r} does not match the pattern {pattern}")
    elif kind in ("integer", "long"):
        if isinstance(value, bool) or not isinstance(value, int):
            return [f"{path}: {value!r}, not an integer"]
        bounded = shape.name not in _BOUNDS_EXEMPT
        if bounded and not meta.get("min", value) <= value <= meta.get("max", value):
            found.append(f"{path}: {value} outside {meta}")
    elif kind == "boolean" and not isinstance(value, bool):
        found.append(f"{path}: {value!r}, not a boolean")
    elif kind == "timestamp" and not isinstance(value, datetime.datetime):
        found.append(f"{path}: {value!r}, not a timestamp")
    elif kind == "blob" and not isinstance(value, bytes):
        found.append(f"{path}: {type(value).__name__}, not bytes")
    return found


def _check_answer(http_response: Any, parsed: dict[str, Any], model: Any, **_: Any) -> None:
    """``after-call`` hook: a successful answer must follow the operation's output shape."""
    if http_response.status_code >= 300 or model.output_shape is None:
        return
    body = {k: v for k, v in parsed.items() if k != "ResponseMetadata"}
    violations = _shape_violations(model.output_shape, body, model.name)
    assert not violations, f"{model.name} answered outside the model: {violations}"


def make_client(
    endpoint_url: str, *, verify: bool | str | None = None, config: Config | None = None
) -> Any:
    """A boto3 Kinesis client of the engine: dummy credentials, us-east-1, no retries."""
    base = Config(retries={"total_max_attempts": 1}, connect_timeout=5, read_timeout=60)
    session = boto3.session.Session(
        aws_access_key_id="AKIDLOCALENGINE",
        aws_secret_access_key="local-engine-secret",
        region_name="us-east-1",
    )
    client = session.client(
        "kinesis",
        endpoint_url=endpoint_url,
        verify=verify,
        config=base if config is None else base.merge(config),
    )
    client.meta.events.register("after-call.kinesis", _check_answer)
    return client


# -- fixtures -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def kinesis(python_engine: EmulatorEndpoint) -> Any:
    """boto3's Kinesis client of the session's Python engine."""
    return make_client(python_engine.endpoint_url)


@pytest.fixture(scope="module")
def unvalidated(python_engine: EmulatorEndpoint) -> Any:
    """The same without boto3's parameter validation: bad arguments reach the engine."""
    return make_client(python_engine.endpoint_url, config=Config(parameter_validation=False))


@pytest.fixture
def name(request: pytest.FixtureRequest) -> str:
    """A stream name no other test uses."""
    test = re.sub(r"[^a-zA-Z0-9_.-]+", "-", request.node.name).strip("-")[:80]
    return f"{test}-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def limited_engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalKinesis]:
    """An engine with AWS's per-shard write limits (1,000 records/s, 1 MiB/s)."""
    log = tmp_path_factory.mktemp("boto3-engines") / "limits.log"
    with LocalKinesis("python", args=["--limits", "aws"], log_file=log) as engine:
        yield engine


@pytest.fixture(scope="module")
def fault_engine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalKinesis]:
    """An engine where every write to ``FATAL_STREAM`` fails with ``FATAL_CODE``."""
    log = tmp_path_factory.mktemp("boto3-engines") / "faults.log"
    args = ["--faults", f"fatal={FATAL_STREAM}:{FATAL_CODE}", "--streams", f"{FATAL_STREAM}:1"]
    with LocalKinesis("python", args=args, log_file=log) as engine:
        yield engine


# -- helpers ------------------------------------------------------------------------------


def create(kinesis: Any, name: str, shards: int = 1) -> str:
    """Create a provisioned stream; return its ARN."""
    kinesis.create_stream(StreamName=name, ShardCount=shards)
    return str(
        kinesis.describe_stream_summary(StreamName=name)["StreamDescriptionSummary"]["StreamARN"]
    )


def shard_ids(kinesis: Any, **ref: Any) -> list[str]:
    return [s["ShardId"] for s in kinesis.list_shards(**ref)["Shards"]]


def open_shards(kinesis: Any, **ref: Any) -> list[dict[str, Any]]:
    """Open shards (no EndingSequenceNumber), in hash key order."""
    shards = kinesis.list_shards(**ref)["Shards"]
    live = [s for s in shards if "EndingSequenceNumber" not in s["SequenceNumberRange"]]
    return sorted(live, key=lambda s: int(s["HashKeyRange"]["StartingHashKey"]))


def read_shard(kinesis: Any, shard_id: str, *, limit: int | None = None, **ref: Any) -> list[Any]:
    """Every record of a shard, from TRIM_HORIZON, page by page."""
    iterator = kinesis.get_shard_iterator(
        ShardId=shard_id, ShardIteratorType="TRIM_HORIZON", **ref
    )["ShardIterator"]
    records: list[Any] = []
    while iterator:
        page = kinesis.get_records(ShardIterator=iterator, **({"Limit": limit} if limit else {}))
        records += page["Records"]
        if not page["Records"]:  # caught up (an open shard always has a next iterator)
            break
        iterator = page.get("NextShardIterator")
    return records


def read_stream(kinesis: Any, **ref: Any) -> dict[str, list[Any]]:
    """Shard id -> its records, for every shard of the stream."""
    return {shard: read_shard(kinesis, shard, **ref) for shard in shard_ids(kinesis, **ref)}


def stored(kinesis: Any, **ref: Any) -> dict[tuple[str, str], tuple[bytes, str | None]]:
    """(shard id, sequence number) -> (data, partition key) of every record of a stream."""
    return {
        (shard, r["SequenceNumber"]): (r["Data"], r.get("PartitionKey"))
        for shard, records in read_stream(kinesis, **ref).items()
        for r in records
    }


def arrivals(kinesis: Any, **ref: Any) -> dict[str, datetime.datetime]:
    """Sequence number -> ApproximateArrivalTimestamp of every record of a stream."""
    return {
        r["SequenceNumber"]: r["ApproximateArrivalTimestamp"]
        for records in read_stream(kinesis, **ref).values()
        for r in records
    }


def error_of(exc: pytest.ExceptionInfo[ClientError]) -> tuple[str, int]:
    """(Error.Code, HTTP status) of a ClientError, after checking the rest of its shape."""
    response = exc.value.response
    assert response["Error"]["Message"], response
    assert response["ResponseMetadata"]["RequestId"], response
    headers = response["ResponseMetadata"]["HTTPHeaders"]
    assert headers["content-type"] == "application/x-amz-json-1.1", headers
    return response["Error"]["Code"], response["ResponseMetadata"]["HTTPStatusCode"]


def lambda_record(record: dict[str, Any]) -> dict[str, Any]:
    """A GetRecords record as aws-kinesis-agg's deaggregate_records takes it (Lambda's)."""
    return {
        "kinesis": {
            "kinesisSchemaVersion": "1.0",
            "partitionKey": record["PartitionKey"],
            "sequenceNumber": record["SequenceNumber"],
            "approximateArrivalTimestamp": record["ApproximateArrivalTimestamp"].timestamp(),
            "data": base64.b64encode(record["Data"]).decode(),
        }
    }


def user_records(kinesis: Any, **ref: Any) -> dict[bytes, tuple[str, str, int | None, str]]:
    """Data -> (shard id, sequence number, sub-sequence number, partition key) of every user
    record of a stream, de-aggregated by aws-kinesis-agg (sub-sequence ``None``: a record
    that was not aggregated)."""
    found: dict[bytes, tuple[str, str, int | None, str]] = {}
    for shard, records in read_stream(kinesis, **ref).items():
        for user in deaggregate_records([lambda_record(r) for r in records]):
            meta = user["kinesis"]
            data = base64.b64decode(meta["data"])
            assert data not in found, f"user record {data!r} read twice"
            found[data] = (
                shard,
                meta["sequenceNumber"],
                meta.get("subSequenceNumber"),
                meta["partitionKey"],
            )
    return found


# -- every operation ----------------------------------------------------------------------


def test_create_stream_describe_it_and_wait_for_it(kinesis: Any, name: str) -> None:
    kinesis.create_stream(StreamName=name, ShardCount=3)
    kinesis.get_waiter("stream_exists").wait(
        StreamName=name, WaiterConfig={"Delay": 1, "MaxAttempts": 5}
    )
    description = kinesis.describe_stream(StreamName=name)["StreamDescription"]
    assert description["StreamStatus"] == "ACTIVE"
    assert description["StreamName"] == name
    assert description["StreamARN"] == f"arn:aws:kinesis:us-east-1:123456789012:stream/{name}"
    assert description["StreamModeDetails"] == {"StreamMode": "PROVISIONED"}
    assert description["HasMoreShards"] is False
    shards = description["Shards"]
    assert len(shards) == 3
    ranges = [
        (int(s["HashKeyRange"]["StartingHashKey"]), int(s["HashKeyRange"]["EndingHashKey"]))
        for s in shards
    ]
    assert ranges[0][0] == 0 and ranges[-1][1] == MAX_HASH
    assert all(a[1] + 1 == b[0] for a, b in itertools.pairwise(ranges))
    now = datetime.datetime.now(datetime.timezone.utc)
    assert abs(description["StreamCreationTimestamp"] - now) < datetime.timedelta(minutes=5)

    summary = kinesis.describe_stream_summary(StreamName=name)["StreamDescriptionSummary"]
    assert summary["StreamStatus"] == "ACTIVE"
    assert summary["OpenShardCount"] == 3
    assert summary["StreamModeDetails"] == {"StreamMode": "PROVISIONED"}
    assert summary["MaxRecordSizeInKiB"] == 1024
    assert "RecordDistributionStrategy" not in summary  # on-demand streams only

    with pytest.raises(ClientError) as exists:
        kinesis.create_stream(StreamName=name, ShardCount=1)
    assert error_of(exists) == ("ResourceInUseException", 400)


def test_describe_stream_pages_through_the_shards(kinesis: Any, name: str) -> None:
    create(kinesis, name, shards=5)
    pages = list(
        kinesis.get_paginator("describe_stream").paginate(
            StreamName=name, PaginationConfig={"PageSize": 2}
        )
    )
    assert [len(p["StreamDescription"]["Shards"]) for p in pages] == [2, 2, 1]
    assert [p["StreamDescription"]["HasMoreShards"] for p in pages] == [True, True, False]
    listed = [s["ShardId"] for p in pages for s in p["StreamDescription"]["Shards"]]
    assert listed == shard_ids(kinesis, StreamName=name)


def test_list_streams_pages_with_the_paginator(kinesis: Any, name: str) -> None:
    names = [f"{name}-{i}" for i in range(5)]
    for stream in names:
        kinesis.create_stream(StreamName=stream, ShardCount=1)
    pages = list(kinesis.get_paginator("list_streams").paginate(PaginationConfig={"PageSize": 2}))
    listed = [n for p in pages for n in p["StreamNames"]]
    assert all(len(p["StreamNames"]) <= 2 for p in pages)
    assert len(pages) >= 3
    assert len(listed) == len(set(listed)), "a stream listed twice across pages"
    assert set(names) <= set(listed)
    assert listed == sorted(listed)
    assert [p["HasMoreStreams"] for p in pages][-1] is False
    for page in pages:
        summaries = page["StreamSummaries"]
        assert [s["StreamName"] for s in summaries] == page["StreamNames"]
        assert all(s["StreamStatus"] == "ACTIVE" for s in summaries)
    # the same through the paginator's aggregation
    whole = (
        kinesis.get_paginator("list_streams")
        .paginate(PaginationConfig={"PageSize": 2})
        .build_full_result()
    )
    assert set(names) <= set(whole["StreamNames"])


def test_list_shards_pages_and_filters(kinesis: Any, name: str) -> None:
    create(kinesis, name, shards=4)
    first = kinesis.list_shards(StreamName=name, MaxResults=3)
    assert [s["ShardId"] for s in first["Shards"]] == [f"shardId-00000000000{i}" for i in range(3)]
    rest = kinesis.list_shards(NextToken=first["NextToken"], MaxResults=3)
    assert [s["ShardId"] for s in rest["Shards"]] == ["shardId-000000000003"]
    assert "NextToken" not in rest
    # ExclusiveStartShardId and the AFTER_SHARD_ID filter
    after = kinesis.list_shards(StreamName=name, ExclusiveStartShardId="shardId-000000000001")
    assert [s["ShardId"] for s in after["Shards"]] == [
        "shardId-000000000002",
        "shardId-000000000003",
    ]
    filtered = kinesis.list_shards(
        StreamName=name, ShardFilter={"Type": "AFTER_SHARD_ID", "ShardId": "shardId-000000000002"}
    )
    assert [s["ShardId"] for s in filtered["Shards"]] == ["shardId-000000000003"]
    # NextToken and StreamName together: InvalidArgumentException, as Kinesis answers
    with pytest.raises(ClientError) as both:
        kinesis.list_shards(StreamName=name, NextToken=first["NextToken"])
    assert error_of(both) == ("InvalidArgumentException", 400)

    # after a split, AT_LATEST lists only the open shards, page by page
    shard0 = first["Shards"][0]["HashKeyRange"]
    middle = (int(shard0["StartingHashKey"]) + int(shard0["EndingHashKey"])) // 2
    kinesis.split_shard(
        StreamName=name, ShardToSplit="shardId-000000000000", NewStartingHashKey=str(middle)
    )
    assert len(shard_ids(kinesis, StreamName=name)) == 6
    latest: list[dict[str, Any]] = []
    page = kinesis.list_shards(StreamName=name, ShardFilter={"Type": "AT_LATEST"}, MaxResults=2)
    pages = 1
    latest += page["Shards"]
    while "NextToken" in page:
        page = kinesis.list_shards(NextToken=page["NextToken"], MaxResults=2)
        latest += page["Shards"]
        pages += 1
    assert pages == 3
    assert sorted(s["ShardId"] for s in latest) == [
        f"shardId-00000000000{i}" for i in (1, 2, 3, 4, 5)
    ]
    assert all("EndingSequenceNumber" not in s["SequenceNumberRange"] for s in latest)


def test_put_record_and_put_records_are_read_back(kinesis: Any, name: str) -> None:
    create(kinesis, name, shards=2)
    single = kinesis.put_record(StreamName=name, Data=b"single", PartitionKey="pk-single")
    assert single["ShardId"] in shard_ids(kinesis, StreamName=name)
    entries: list[dict[str, Any]] = [
        {"Data": f"record-{i}".encode(), "PartitionKey": f"pk-{i}"} for i in range(60)
    ]
    entries.append({"Data": b"low", "PartitionKey": "x", "ExplicitHashKey": "0"})
    entries.append({"Data": b"high", "PartitionKey": "x", "ExplicitHashKey": str(MAX_HASH)})
    batch = kinesis.put_records(StreamName=name, Records=entries)
    assert batch["FailedRecordCount"] == 0
    assert len(batch["Records"]) == len(entries)
    assert batch["Records"][-2]["ShardId"] == "shardId-000000000000"
    assert batch["Records"][-1]["ShardId"] == "shardId-000000000001"

    expected = {(single["ShardId"], single["SequenceNumber"]): (b"single", "pk-single")}
    for entry, result in zip(entries, batch["Records"], strict=True):
        expected[result["ShardId"], result["SequenceNumber"]] = (
            entry["Data"],
            entry["PartitionKey"],
        )
    assert len(expected) == len(entries) + 1  # sequence numbers are unique
    assert stored(kinesis, StreamName=name) == expected
    # the same in pages of 7 records (GetRecords Limit and NextShardIterator)
    paged = {
        (shard, r["SequenceNumber"]): (r["Data"], r["PartitionKey"])
        for shard in shard_ids(kinesis, StreamName=name)
        for r in read_shard(kinesis, shard, limit=7, StreamName=name)
    }
    assert paged == expected

    # iterators at, after and past a sequence number
    shard, seq = single["ShardId"], single["SequenceNumber"]
    at = kinesis.get_shard_iterator(
        StreamName=name,
        ShardId=shard,
        ShardIteratorType="AT_SEQUENCE_NUMBER",
        StartingSequenceNumber=seq,
    )["ShardIterator"]
    assert kinesis.get_records(ShardIterator=at, Limit=1)["Records"][0]["Data"] == b"single"
    after = kinesis.get_shard_iterator(
        StreamName=name,
        ShardId=shard,
        ShardIteratorType="AFTER_SEQUENCE_NUMBER",
        StartingSequenceNumber=seq,
    )["ShardIterator"]
    assert all(r["Data"] != b"single" for r in kinesis.get_records(ShardIterator=after)["Records"])
    latest = kinesis.get_shard_iterator(StreamName=name, ShardId=shard, ShardIteratorType="LATEST")
    assert kinesis.get_records(ShardIterator=latest["ShardIterator"])["Records"] == []
    new = kinesis.put_record(StreamName=name, Data=b"new", PartitionKey="pk-single")
    page = kinesis.get_records(ShardIterator=latest["ShardIterator"])
    assert [(r["Data"], r["SequenceNumber"]) for r in page["Records"]] == [
        (b"new", new["SequenceNumber"])
    ]
    assert page["MillisBehindLatest"] == 0
    assert int(new["SequenceNumber"]) > max(int(s) for _, s in expected)


def test_put_records_dry_run_is_refused_and_stores_nothing(kinesis: Any, name: str) -> None:
    create(kinesis, name, shards=2)
    records = [{"Data": f"dry-{i}".encode(), "PartitionKey": f"k{i}"} for i in range(10)]
    with pytest.raises(ClientError) as dry:
        kinesis.put_records(StreamName=name, Records=records, DryRun=True)
    assert error_of(dry) == ("DryRunOperationException", 400)
    with pytest.raises(kinesis.exceptions.DryRunOperationException):
        kinesis.put_record(StreamName=name, Data=b"dry", PartitionKey="k", DryRun=True)
    # a DryRun that would fail answers the failure
    with pytest.raises(ClientError) as missing:
        kinesis.put_records(StreamName=f"{name}-nope", Records=records, DryRun=True)
    assert error_of(missing) == ("ResourceNotFoundException", 400)
    assert stored(kinesis, StreamName=name) == {}


def test_split_merge_and_update_shard_count_reshape_the_shards(kinesis: Any, name: str) -> None:
    create(kinesis, name, shards=2)
    kinesis.put_record(StreamName=name, Data=b"before", PartitionKey="k", ExplicitHashKey="5")
    kinesis.split_shard(
        StreamName=name, ShardToSplit="shardId-000000000000", NewStartingHashKey=str(2**126)
    )
    shards = {s["ShardId"]: s for s in kinesis.list_shards(StreamName=name)["Shards"]}
    assert sorted(shards) == [f"shardId-00000000000{i}" for i in range(4)]
    assert "EndingSequenceNumber" in shards["shardId-000000000000"]["SequenceNumberRange"]
    low, high = shards["shardId-000000000002"], shards["shardId-000000000003"]
    assert low["ParentShardId"] == high["ParentShardId"] == "shardId-000000000000"
    assert low["HashKeyRange"] == {"StartingHashKey": "0", "EndingHashKey": str(2**126 - 1)}
    assert high["HashKeyRange"]["StartingHashKey"] == str(2**126)
    # the closed parent ends with its children
    iterator = kinesis.get_shard_iterator(
        StreamName=name, ShardId="shardId-000000000000", ShardIteratorType="TRIM_HORIZON"
    )["ShardIterator"]
    end = kinesis.get_records(ShardIterator=iterator)
    assert [r["Data"] for r in end["Records"]] == [b"before"]
    assert "NextShardIterator" not in end
    assert sorted(c["ShardId"] for c in end["ChildShards"]) == [
        "shardId-000000000002",
        "shardId-000000000003",
    ]

    kinesis.merge_shards(
        StreamName=name,
        ShardToMerge="shardId-000000000002",
        AdjacentShardToMerge="shardId-000000000003",
    )
    merged = {s["ShardId"]: s for s in kinesis.list_shards(StreamName=name)["Shards"]}[
        "shardId-000000000004"
    ]
    assert merged["ParentShardId"] == "shardId-000000000002"
    assert merged["AdjacentParentShardId"] == "shardId-000000000003"
    assert merged["HashKeyRange"] == {"StartingHashKey": "0", "EndingHashKey": str(2**127 - 1)}
    assert [s["ShardId"] for s in open_shards(kinesis, StreamName=name)] == [
        "shardId-000000000004",
        "shardId-000000000001",
    ]
    with pytest.raises(ClientError) as closed:
        kinesis.split_shard(
            StreamName=name, ShardToSplit="shardId-000000000000", NewStartingHashKey="7"
        )
    assert error_of(closed) == ("InvalidArgumentException", 400)

    scaled = kinesis.update_shard_count(
        StreamName=name, TargetShardCount=4, ScalingType="UNIFORM_SCALING"
    )
    assert (scaled["StreamName"], scaled["CurrentShardCount"], scaled["TargetShardCount"]) == (
        name,
        2,
        4,
    )
    live = open_shards(kinesis, StreamName=name)
    assert len(live) == 4
    bounds = [
        (int(s["HashKeyRange"]["StartingHashKey"]), int(s["HashKeyRange"]["EndingHashKey"]))
        for s in live
    ]
    assert bounds[0][0] == 0 and bounds[-1][1] == MAX_HASH
    assert all(a[1] + 1 == b[0] for a, b in itertools.pairwise(bounds))
    summary = kinesis.describe_stream_summary(StreamName=name)["StreamDescriptionSummary"]
    assert summary["OpenShardCount"] == 4


def test_update_max_record_size_lets_a_9_mib_record_in(kinesis: Any, name: str) -> None:
    arn = create(kinesis, name)
    big = hashlib.sha256(b"seed").digest() * (9 * MIB // 32)
    assert len(big) == 9 * MIB
    with pytest.raises(ClientError) as too_big:
        kinesis.put_record(StreamName=name, Data=big, PartitionKey="k")
    assert error_of(too_big) == ("InvalidArgumentException", 400)

    kinesis.update_max_record_size(StreamARN=arn, MaxRecordSizeInKiB=10240)
    summary = kinesis.describe_stream_summary(StreamName=name)["StreamDescriptionSummary"]
    assert summary["MaxRecordSizeInKiB"] == 10240
    put = kinesis.put_record(StreamName=name, Data=big, PartitionKey="k")
    # data + partition key over 10 MiB: refused whole (boto3 allows Data up to 10 MiB)
    with pytest.raises(ClientError) as over:
        kinesis.put_record(StreamName=name, Data=b"x" * (10 * MIB), PartitionKey="k")
    assert error_of(over) == ("InvalidArgumentException", 400)
    [record] = read_shard(kinesis, put["ShardId"], StreamName=name)
    assert record["SequenceNumber"] == put["SequenceNumber"]
    assert record["Data"] == big


def test_an_auto_stream_takes_records_without_partition_keys(kinesis: Any, name: str) -> None:
    kinesis.create_stream(StreamName=name, StreamModeDetails={"StreamMode": "ON_DEMAND"})
    summary = kinesis.describe_stream_summary(StreamName=name)["StreamDescriptionSummary"]
    assert summary["StreamModeDetails"] == {"StreamMode": "ON_DEMAND"}
    assert summary["RecordDistributionStrategy"] == "USER_PARTITION_KEY"
    entries = [{"Data": f"auto-{i}".encode()} for i in range(40)]
    with pytest.raises(ClientError) as keyless:  # botocore's model: only Data is required
        kinesis.put_records(StreamName=name, Records=entries)
    assert error_of(keyless) == ("ValidationException", 400)

    kinesis.update_stream_record_distribution_strategy(
        StreamARN=summary["StreamARN"], RecordDistributionStrategy="AUTO"
    )
    summary = kinesis.describe_stream_summary(StreamName=name)["StreamDescriptionSummary"]
    assert summary["RecordDistributionStrategy"] == "AUTO"
    batch = kinesis.put_records(StreamName=name, Records=entries)
    assert batch["FailedRecordCount"] == 0
    one = kinesis.put_record(StreamName=name, Data=b"auto-single")
    expected = {
        (r["ShardId"], r["SequenceNumber"]): (e["Data"], None)
        for e, r in zip(entries, batch["Records"], strict=True)
    }
    expected[one["ShardId"], one["SequenceNumber"]] = (b"auto-single", None)
    assert stored(kinesis, StreamName=name) == expected  # and no PartitionKey read back
    assert len({shard for shard, _ in expected}) > 1  # spread over the shards

    provisioned = create(kinesis, f"{name}-p")
    with pytest.raises(ClientError) as refused:
        kinesis.update_stream_record_distribution_strategy(
            StreamARN=provisioned, RecordDistributionStrategy="AUTO"
        )
    assert error_of(refused) == ("InvalidArgumentException", 400)


def test_delete_stream_by_name_and_by_arn(kinesis: Any, name: str) -> None:
    create(kinesis, name)
    arn = create(kinesis, f"{name}-arn")
    kinesis.delete_stream(StreamName=name)
    kinesis.delete_stream(StreamARN=arn)
    for ref in ({"StreamName": name}, {"StreamARN": arn}):
        with pytest.raises(kinesis.exceptions.ResourceNotFoundException) as gone:
            kinesis.describe_stream_summary(**ref)
        assert error_of(gone) == ("ResourceNotFoundException", 400)
    listed = kinesis.get_paginator("list_streams").paginate().build_full_result()["StreamNames"]
    assert name not in listed and f"{name}-arn" not in listed


def test_a_stream_is_addressed_by_its_arn(kinesis: Any, name: str) -> None:
    arn = create(kinesis, name, shards=2)
    summary = kinesis.describe_stream_summary(StreamARN=arn)["StreamDescriptionSummary"]
    assert (summary["StreamName"], summary["StreamARN"]) == (name, arn)
    entries = [{"Data": f"arn-{i}".encode(), "PartitionKey": f"k{i}"} for i in range(20)]
    batch = kinesis.put_records(StreamARN=arn, Records=entries)
    assert batch["FailedRecordCount"] == 0
    one = kinesis.put_record(StreamARN=arn, Data=b"arn-single", PartitionKey="k")
    assert shard_ids(kinesis, StreamARN=arn) == shard_ids(kinesis, StreamName=name)
    expected = {
        (r["ShardId"], r["SequenceNumber"]): (e["Data"], e["PartitionKey"])
        for e, r in zip(entries, batch["Records"], strict=True)
    }
    expected[one["ShardId"], one["SequenceNumber"]] = (b"arn-single", "k")
    by_arn = {
        (shard, r["SequenceNumber"]): (r["Data"], r["PartitionKey"])
        for shard in shard_ids(kinesis, StreamARN=arn)
        for r in read_shard(kinesis, shard, StreamARN=arn)  # GetShardIterator by ARN
    }
    assert by_arn == expected
    iterator = kinesis.get_shard_iterator(
        StreamARN=arn, ShardId=one["ShardId"], ShardIteratorType="AT_SEQUENCE_NUMBER",
        StartingSequenceNumber=one["SequenceNumber"],
    )["ShardIterator"]  # fmt: skip
    page = kinesis.get_records(ShardIterator=iterator, StreamARN=arn, Limit=1)
    assert page["Records"][0]["Data"] == b"arn-single"
    # an ARN of another account or region names no stream here
    for other in (
        arn.replace("123456789012", "210987654321"),
        arn.replace("us-east-1", "eu-west-1"),
    ):
        with pytest.raises(ClientError) as elsewhere:
            kinesis.describe_stream_summary(StreamARN=other)
        assert error_of(elsewhere) == ("ResourceNotFoundException", 400)


# -- error shapes -------------------------------------------------------------------------


def test_a_missing_stream_is_resource_not_found(kinesis: Any, name: str) -> None:
    calls: list[tuple[Callable[..., Any], dict[str, Any]]] = [
        (kinesis.describe_stream_summary, {}),
        (kinesis.describe_stream, {}),
        (kinesis.list_shards, {}),
        (kinesis.put_record, {"Data": b"x", "PartitionKey": "k"}),
        (kinesis.put_records, {"Records": [{"Data": b"x", "PartitionKey": "k"}]}),
        (
            kinesis.get_shard_iterator,
            {"ShardId": "shardId-000000000000", "ShardIteratorType": "LATEST"},
        ),
        (kinesis.update_shard_count, {"TargetShardCount": 2, "ScalingType": "UNIFORM_SCALING"}),
        (kinesis.delete_stream, {}),
    ]
    for call, args in calls:
        with pytest.raises(kinesis.exceptions.ResourceNotFoundException) as missing:
            call(StreamName=name, **args)
        assert error_of(missing) == ("ResourceNotFoundException", 400), call
        assert name in missing.value.response["Error"]["Message"]
    create(kinesis, name)
    with pytest.raises(ClientError) as no_shard:
        kinesis.get_shard_iterator(
            StreamName=name, ShardId="shardId-000000000009", ShardIteratorType="LATEST"
        )
    assert error_of(no_shard) == ("ResourceNotFoundException", 400)


def test_bad_arguments_are_refused_as_kinesis_refuses_them(
    unvalidated: Any, kinesis: Any, name: str
) -> None:
    arn = create(kinesis, name, shards=2)
    # constraint violations of the model (sent past boto3's own checks): ValidationException
    bad: list[tuple[Callable[..., Any], dict[str, Any]]] = [
        (unvalidated.create_stream, {"StreamName": f"{name}-new", "ShardCount": -1}),
        (
            unvalidated.create_stream,
            {"StreamName": f"{name}-new", "ShardCount": 1, "MaxRecordSizeInKiB": 10},
        ),
        (unvalidated.update_max_record_size, {"StreamARN": arn, "MaxRecordSizeInKiB": 10}),
        (unvalidated.list_shards, {"StreamName": name, "MaxResults": 0}),
        (unvalidated.put_records, {"StreamName": name, "Records": []}),
        (
            unvalidated.get_shard_iterator,
            {"StreamName": name, "ShardId": "shardId-000000000000", "ShardIteratorType": "NOW"},
        ),
    ]
    for call, args in bad:
        with pytest.raises(ClientError) as refused:
            call(**args)
        assert error_of(refused) == ("ValidationException", 400), args
    # the shapes hold, the values make no sense: InvalidArgumentException
    with pytest.raises(ClientError) as not_in_range:
        kinesis.split_shard(
            StreamName=name, ShardToSplit="shardId-000000000000", NewStartingHashKey="0"
        )
    assert error_of(not_in_range) == ("InvalidArgumentException", 400)
    with pytest.raises(ClientError) as not_adjacent:
        kinesis.merge_shards(
            StreamName=name,
            ShardToMerge="shardId-000000000000",
            AdjacentShardToMerge="shardId-000000000000",
        )
    assert error_of(not_adjacent) == ("InvalidArgumentException", 400)
    with pytest.raises(ClientError) as iterator:
        kinesis.get_records(ShardIterator="not-an-iterator")
    assert error_of(iterator) == ("InvalidArgumentException", 400)
    with pytest.raises(ClientError) as ehk:
        kinesis.put_record(
            StreamName=name, Data=b"x", PartitionKey="k", ExplicitHashKey=str(2**128)
        )
    assert error_of(ehk) == ("InvalidArgumentException", 400)
    assert stored(kinesis, StreamName=name) == {}


def test_a_shard_count_past_the_account_quota_is_limit_exceeded(kinesis: Any, name: str) -> None:
    """``create-stream --shard-count 2147483647`` (boto3 lets it through; AWS answers
    LimitExceededException) built every shard in one blocking loop: now refused at once."""
    started = time.monotonic()
    with pytest.raises(ClientError) as refused:
        kinesis.create_stream(StreamName=name, ShardCount=2_147_483_647)
    assert error_of(refused) == ("LimitExceededException", 400)
    assert time.monotonic() - started < 5.0  # answered, not building shards
    assert name not in kinesis.list_streams()["StreamNames"]


def test_wrong_types_and_get_records_limits_are_refused(
    unvalidated: Any, kinesis: Any, name: str
) -> None:
    """Members of the wrong type (sent past boto3's checks) are the protocol's
    SerializationException; GetRecords' Limit is 1 to 10,000 (above:
    InvalidArgumentException, as GetRecordsInput.Limit's documentation says)."""
    create(kinesis, name)
    iterator = kinesis.get_shard_iterator(
        StreamName=name, ShardId="shardId-000000000000", ShardIteratorType="TRIM_HORIZON"
    )["ShardIterator"]
    for limit, code in ((0, "ValidationException"), (10_001, "InvalidArgumentException")):
        with pytest.raises(ClientError) as refused:
            unvalidated.get_records(ShardIterator=iterator, Limit=limit)
        assert error_of(refused) == (code, 400), limit
    for call, args in (
        (unvalidated.get_records, {"ShardIterator": iterator, "Limit": "abc"}),
        (unvalidated.list_shards, {"StreamName": name, "ExclusiveStartShardId": 5}),
    ):
        with pytest.raises(ClientError) as refused:
            call(**args)
        assert error_of(refused) == ("SerializationException", 400), args
    with pytest.raises(ClientError) as forged:
        kinesis.get_records(ShardIterator='["x", "y", "z"]')
    assert error_of(forged) == ("InvalidArgumentException", 400)


def test_retention_is_reported_increased_and_decreased(kinesis: Any, name: str) -> None:
    """RetentionPeriodHours (24 by default) is applied, and Increase/Decrease
    StreamRetentionPeriod change it within 24 to 8760 hours."""
    create(kinesis, name)

    def hours() -> int:
        summary = kinesis.describe_stream_summary(StreamName=name)["StreamDescriptionSummary"]
        return int(summary["RetentionPeriodHours"])

    assert hours() == 24
    kinesis.increase_stream_retention_period(StreamName=name, RetentionPeriodHours=168)
    assert hours() == 168
    with pytest.raises(ClientError) as refused:
        kinesis.increase_stream_retention_period(StreamName=name, RetentionPeriodHours=48)
    assert error_of(refused) == ("InvalidArgumentException", 400)
    with pytest.raises(ClientError) as refused:
        kinesis.decrease_stream_retention_period(StreamName=name, RetentionPeriodHours=12)
    assert error_of(refused) == ("InvalidArgumentException", 400)
    kinesis.decrease_stream_retention_period(StreamName=name, RetentionPeriodHours=24)
    assert hours() == 24


def test_create_stream_with_zero_shards_is_a_validation_error(unvalidated: Any, name: str) -> None:
    with pytest.raises(ClientError) as refused:
        unvalidated.create_stream(StreamName=name, ShardCount=0)
    assert error_of(refused) == ("ValidationException", 400)


def test_create_stream_with_a_name_outside_the_pattern_is_a_validation_error(
    unvalidated: Any, name: str
) -> None:
    bad = f"{name} !"
    try:
        with pytest.raises(ClientError) as refused:
            unvalidated.create_stream(StreamName=bad, ShardCount=1)
        assert error_of(refused) == ("ValidationException", 400)
    finally:  # the shared engine's ListStreams must not list it to later tests
        with contextlib.suppress(ClientError):
            unvalidated.delete_stream(StreamName=bad)


def test_an_unsigned_request_is_missing_authentication_token(
    python_engine: EmulatorEndpoint,
) -> None:
    unsigned = make_client(python_engine.endpoint_url, config=Config(signature_version=UNSIGNED))
    for call, args in [
        (unsigned.list_streams, {}),
        (
            unsigned.put_records,
            {"StreamName": "s", "Records": [{"Data": b"x", "PartitionKey": "k"}]},
        ),
    ]:
        with pytest.raises(ClientError) as refused:
            call(**args)
        assert error_of(refused) == ("MissingAuthenticationTokenException", 400)


# -- KPL aggregates -----------------------------------------------------------------------


def test_kpl_aggregates_are_read_back_and_deaggregated(kinesis: Any, name: str) -> None:
    create(kinesis, name, shards=2)
    expected: dict[bytes, tuple[str, str, int, str]] = {}
    for a in range(4):
        aggregator = RecordAggregator()
        users = [(f"agg{a}-user{u}", f"aggregate {a} user record {u}".encode()) for u in range(12)]
        for pk, data in users:
            assert aggregator.add_user_record(pk, data) is None  # no aggregate full yet
        pk, ehk, blob = aggregator.clear_and_get().get_contents()
        assert pk == users[0][0]
        hash_key = {} if ehk is None else {"ExplicitHashKey": ehk}
        put = kinesis.put_record(StreamName=name, Data=blob, PartitionKey=pk, **hash_key)
        for sub, (user_pk, data) in enumerate(users):
            expected[data] = (put["ShardId"], put["SequenceNumber"], sub, user_pk)
    assert user_records(kinesis, StreamName=name) == expected


async def _produce(endpoint_url: str, stream: str, n: int) -> list[RecordResult]:
    async with Producer(
        stream,
        region_name="us-east-1",
        endpoint_url=endpoint_url,
        credentials=StaticCredentials("AKIDLOCALENGINE", "local-engine-secret"),
    ) as producer:
        outcomes = [await producer.put(f"user record {i}".encode(), f"user-{i}") for i in range(n)]
        return [await outcome.wait() for outcome in outcomes]


def test_a_producer_aggregates_that_aws_kinesis_agg_deaggregates(
    kinesis: Any, python_engine: EmulatorEndpoint, name: str
) -> None:
    create(kinesis, name, shards=3)
    results = anyio.run(_produce, python_engine.endpoint_url, name, 400, backend="trio")
    assert all(r.ok for r in results), [r for r in results if not r.ok][:3]
    read = user_records(kinesis, StreamName=name)
    assert len(read) == len(results)
    for i, result in enumerate(results):
        assert read[f"user record {i}".encode()] == (
            result.shard_id,
            result.sequence_number,
            result.sub_sequence_number,
            f"user-{i}",
        )
    kinesis_records = {(shard, seq) for shard, seq, _, _ in read.values()}
    assert len(kinesis_records) < len(results)  # aggregated, several user records a record
    assert {shard for shard, _ in kinesis_records} == set(shard_ids(kinesis, StreamName=name))


# -- limits and faults --------------------------------------------------------------------


@pytest.mark.subprocess
def test_the_aws_limits_throttle_a_put_records_over_1_mib(
    limited_engine: LocalKinesis, name: str
) -> None:
    kinesis = make_client(limited_engine.endpoint_url)
    create(kinesis, name)
    entries = [{"Data": bytes([i % 256]) * 4096, "PartitionKey": f"k{i}"} for i in range(500)]
    answer = kinesis.put_records(StreamName=name, Records=entries)
    failed = [r for r in answer["Records"] if "ErrorCode" in r]
    ok = [r for r in answer["Records"] if "ErrorCode" not in r]
    assert answer["FailedRecordCount"] == len(failed)
    assert 0 < len(failed) < 500
    assert {r["ErrorCode"] for r in failed} == {PTE}
    assert all("SequenceNumber" not in r and r["ErrorMessage"] for r in failed)
    # one second's worth, 1 MiB, went in, in the slots that say so
    assert len(ok) * 4096 <= MIB < (len(ok) + 1) * (4096 + 4)
    kept = stored(kinesis, StreamName=name)
    assert set(kept) == {(r["ShardId"], r["SequenceNumber"]) for r in ok}


@pytest.mark.subprocess
def test_a_fatal_fault_reaches_boto3(fault_engine: LocalKinesis, name: str) -> None:
    kinesis = make_client(fault_engine.endpoint_url)
    with pytest.raises(ClientError) as denied:
        kinesis.put_records(StreamName=FATAL_STREAM, Records=[{"Data": b"x", "PartitionKey": "k"}])
    assert error_of(denied) == (FATAL_CODE, 400)
    with pytest.raises(kinesis.exceptions.AccessDeniedException):
        kinesis.put_record(StreamName=FATAL_STREAM, Data=b"x", PartitionKey="k")
    assert shard_ids(kinesis, StreamName=FATAL_STREAM) == ["shardId-000000000000"]  # reads pass
    assert stored(kinesis, StreamName=FATAL_STREAM) == {}
    create(kinesis, name)  # other streams take writes
    assert kinesis.put_record(StreamName=name, Data=b"x", PartitionKey="k")["SequenceNumber"]


# -- arrival times ------------------------------------------------------------------------


def test_arrival_timestamps_are_wall_clock_times(kinesis: Any, name: str) -> None:
    create(kinesis, name)
    before = datetime.datetime.now(datetime.timezone.utc)
    put = kinesis.put_record(StreamName=name, Data=b"now", PartitionKey="k")
    [record] = read_shard(kinesis, put["ShardId"], StreamName=name)
    arrival = record["ApproximateArrivalTimestamp"]
    assert abs(arrival - before) < datetime.timedelta(minutes=1), arrival


def test_an_at_timestamp_iterator_finds_the_records_since(kinesis: Any, name: str) -> None:
    create(kinesis, name)
    old = kinesis.put_record(StreamName=name, Data=b"old", PartitionKey="k")
    [record] = read_shard(kinesis, old["ShardId"], StreamName=name)
    since = record["ApproximateArrivalTimestamp"] + datetime.timedelta(milliseconds=1)
    time.sleep(0.01)
    kinesis.put_record(StreamName=name, Data=b"recent", PartitionKey="k")

    def at(timestamp: datetime.datetime) -> list[bytes]:
        iterator = kinesis.get_shard_iterator(
            StreamName=name, ShardId=old["ShardId"], ShardIteratorType="AT_TIMESTAMP",
            Timestamp=timestamp,
        )["ShardIterator"]  # fmt: skip
        return [r["Data"] for r in kinesis.get_records(ShardIterator=iterator)["Records"]]

    assert at(since - datetime.timedelta(minutes=1)) == [b"old", b"recent"]
    assert at(since) == [b"recent"]
    assert at(datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(minutes=1)) == []


# -- TLS and persistence ------------------------------------------------------------------


@pytest.mark.subprocess
def test_tls_with_the_engine_certificate(tmp_path: Path, name: str) -> None:
    # --data keeps the certificate in tmp_path rather than the user's cache
    with LocalKinesis("python", args=["--tls", "--data", str(tmp_path)]) as engine:
        assert engine.endpoint_url.startswith("https://")
        certificate = engine.certificate
        assert certificate is not None and certificate.parent == tmp_path
        kinesis = make_client(engine.endpoint_url, verify=str(certificate))
        create(kinesis, name)
        put = kinesis.put_record(StreamName=name, Data=b"over tls", PartitionKey="k")
        assert stored(kinesis, StreamName=name) == {
            (put["ShardId"], put["SequenceNumber"]): (b"over tls", "k")
        }
        untrusted = make_client(engine.endpoint_url, verify=True)
        with pytest.raises(SSLError):
            untrusted.list_streams()


@pytest.mark.subprocess
def test_streams_and_records_survive_a_restart(tmp_path: Path, name: str) -> None:
    with LocalKinesis("python", args=["--data", str(tmp_path)]) as first:
        kinesis = make_client(first.endpoint_url)
        arn = create(kinesis, name, shards=2)
        entries = [{"Data": f"kept-{i}".encode(), "PartitionKey": f"k{i}"} for i in range(30)]
        assert kinesis.put_records(StreamName=name, Records=entries)["FailedRecordCount"] == 0
        kinesis.split_shard(
            StreamName=name, ShardToSplit="shardId-000000000001", NewStartingHashKey=str(3 * 2**126)
        )
        kinesis.put_record(StreamName=name, Data=b"after the split", PartitionKey="k1")
        before = stored(kinesis, StreamName=name)
        arrivals_before = arrivals(kinesis, StreamName=name)
        shards_before = kinesis.list_shards(StreamName=name)["Shards"]
        created = kinesis.describe_stream_summary(StreamName=name)["StreamDescriptionSummary"][
            "StreamCreationTimestamp"
        ]
        first.stop()  # SIGTERM: saved at a clean stop
    assert (tmp_path / "kinesis-state.sqlite").exists()

    with LocalKinesis("python", args=["--data", str(tmp_path)]) as second:
        kinesis = make_client(second.endpoint_url)
        summary = kinesis.describe_stream_summary(StreamARN=arn)["StreamDescriptionSummary"]
        assert summary["OpenShardCount"] == 3
        assert summary["StreamCreationTimestamp"] == created
        assert kinesis.list_shards(StreamName=name)["Shards"] == shards_before
        assert stored(kinesis, StreamName=name) == before
        assert len(before) == 31
        # arrival times are kept as wall-clock times across processes
        after = arrivals(kinesis, StreamName=name)
        assert after.keys() == arrivals_before.keys()
        slack = datetime.timedelta(milliseconds=1)
        assert all(abs(after[k] - arrivals_before[k]) < slack for k in after)
        new = kinesis.put_record(StreamName=name, Data=b"after the restart", PartitionKey="k")
        assert int(new["SequenceNumber"]) > max(int(seq) for _, seq in before)


# -- shapes the model constrains --------------------------------------------------------------


def test_sequence_numbers_follow_the_model_pattern(kinesis: Any, name: str) -> None:
    create(kinesis, name)
    put = kinesis.put_record(StreamName=name, Data=b"x", PartitionKey="k")
    [shard] = kinesis.list_shards(StreamName=name)["Shards"]
    pattern = kinesis.meta.service_model.shape_for("SequenceNumber").metadata["pattern"]
    for seq in (put["SequenceNumber"], shard["SequenceNumberRange"]["StartingSequenceNumber"]):
        assert re.search(pattern, seq), seq
