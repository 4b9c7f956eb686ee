"""A call's deadline follows its bytes (``_core._deadline`` through the pool and the signed
client): on the in-memory fake, in virtual time on both backends."""

from __future__ import annotations

import base64
import json
import pickle
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

from kinesis_trio import KinesisClient, RequestTimeoutError, StaticCredentials
from kinesis_trio._core._retry_policy import classify_exception
from kinesis_trio.testing import FakeKinesis, Faults

pytestmark = [pytest.mark.anyio, pytest.mark.virtual_time]

MIB = 1024 * 1024


@pytest.fixture
def timeout() -> float:
    """The request and connect timeouts: the defaults (virtual time: they take none)."""
    return 6.0


@asynccontextmanager
async def client(fake: FakeKinesis, timeout: float) -> AsyncIterator[KinesisClient]:
    async with KinesisClient(
        region_name="us-east-1",
        endpoint_url="http://fake.local",
        credentials=StaticCredentials("k", "s"),
        transport=fake.transport(),
        request_timeout=timeout,
        connect_timeout=timeout,
    ) as kinesis:
        yield kinesis


def put_records(data: bytes, count: int = 1) -> bytes:
    record = {"Data": base64.b64encode(data).decode(), "PartitionKey": "k"}
    return json.dumps({"StreamName": "s", "Records": [record] * count}).encode()


async def test_an_upload_that_stops_moving_is_a_stall_and_nothing_was_sent(
    timeout: float,
) -> None:
    """A piece of the request that takes longer than ``request_timeout`` to go: a stall.
    Its last byte never went, so the endpoint cannot have processed it (not ambiguous)."""
    fake = FakeKinesis(upload_rate=64 * 1024 / (3 * timeout))  # a piece takes 3 timeouts
    fake.create_stream("s", 1)
    async with client(fake, timeout) as kinesis:
        with pytest.raises(RequestTimeoutError) as caught:
            await kinesis.call_raw("PutRecords", put_records(b"x" * 300_000), entries=1)
    error = caught.value
    assert error.stalled and not error.sent
    assert "nothing moved" in str(error)
    assert not classify_exception(error).ambiguous
    assert fake.records("s") == []


async def test_an_upload_too_slow_for_its_size_ends_at_its_bound(timeout: float) -> None:
    """Bytes keep moving, but slower than one MiB per ``request_timeout``: the request ends
    at its bound (connect + request timeout, plus a request timeout per MiB), not a stall."""
    body = put_records(b"x" * 1_000_000, 3)  # 4 MB of JSON
    rate = MIB / (2 * timeout)  # half the pace the bound allows
    fake = FakeKinesis(upload_rate=rate)
    fake.create_stream("s", 1)
    async with client(fake, timeout) as kinesis:
        with pytest.raises(RequestTimeoutError) as caught:
            await kinesis.call_raw("PutRecords", body, entries=1)
    error = caught.value
    assert not error.stalled and not error.sent
    assert "did not complete within" in str(error)


async def test_a_request_that_keeps_moving_is_answered_past_the_old_deadline(
    timeout: float,
) -> None:
    """Four MB of JSON at 1.5 MiB per ``request_timeout``: longer than the old fixed
    deadline (two timeouts), within its bound; answered."""
    body = put_records(b"x" * 1_000_000, 3)
    fake = FakeKinesis(upload_rate=1.5 * MIB / timeout)
    fake.create_stream("s", 1)
    async with client(fake, timeout) as kinesis:
        answer = await kinesis.call_raw("PutRecords", body, entries=3)
    assert answer["FailedRecordCount"] == 0
    assert len(fake.records("s")) == 3


async def test_a_request_sent_whole_and_never_answered_is_ambiguous(timeout: float) -> None:
    fake = FakeKinesis(faults=Faults(hang_after=1.0))
    fake.create_stream("s", 1)
    async with client(fake, timeout) as kinesis:
        with pytest.raises(RequestTimeoutError) as caught:
            await kinesis.call_raw("PutRecords", put_records(b"small"), entries=1)
    error = caught.value
    assert error.sent and not error.stalled
    assert classify_exception(error).ambiguous
    assert len(fake.records("s")) == 1  # it was written: a retry may duplicate it


def test_a_timeout_keeps_what_it_says_through_pickling() -> None:
    error = RequestTimeoutError("m", operation="PutRecords", sent=False, stalled=False)
    copy = pickle.loads(pickle.dumps(error))
    assert (copy.sent, copy.stalled, copy.operation) == (False, False, "PutRecords")


async def test_a_get_records_answer_slow_to_begin_is_waited_for(timeout: float) -> None:
    """An endpoint that takes longer than connect + request timeout to begin a GetRecords
    answer (a local engine on a busy machine reading a 10 MiB record): the call's bound has
    the 10 MiB GetRecords may return from the start, so it is answered."""
    fake = FakeKinesis(faults=Faults(latency=2.5 * timeout))
    fake.create_stream("s", 1)
    async with client(fake, timeout) as kinesis:
        await kinesis.call_raw("PutRecords", put_records(b"late"), entries=1, within=100 * timeout)
        body = {"StreamName": "s", "ShardId": "shardId-000000000000"}
        body["ShardIteratorType"] = "TRIM_HORIZON"
        it = await kinesis.call_raw(
            "GetShardIterator", json.dumps(body).encode(), within=100 * timeout
        )
        with pytest.raises(RequestTimeoutError):  # an operation without a large answer
            await kinesis.call_raw("GetShardIterator", json.dumps(body).encode())
        iterator = {"ShardIterator": it["ShardIterator"]}
        answer = await kinesis.call_raw("GetRecords", json.dumps(iterator).encode())
    assert [base64.b64decode(r["Data"]) for r in answer["Records"]] == [b"late"]
