"""Answers that are slow or malformed: a clear error or a retry, never a hang or a crash."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kinesis_trio import (
    KinesisClient,
    Producer,
    ProducerConfig,
    RequestTimeoutError,
    ServiceError,
)
from kinesis_trio._core._shards import ShardMap
from kinesis_trio.testing import FakeKinesis
from tests.support.helpers import CREDS, fake_producer

pytestmark = [pytest.mark.anyio, pytest.mark.virtual_time]


async def trickle(first: bytes, every: float) -> AsyncIterator[bytes]:
    """A body that starts, then sends a byte every ``every`` seconds, for ever."""
    yield first
    while True:
        await anyio.sleep(every)
        yield b" "


def trickling_list_shards(fake: FakeKinesis, every: float) -> httpx.AsyncBaseTransport:
    inner = fake.transport()

    class Transport(httpx.AsyncBaseTransport):
        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            if request.headers.get("X-Amz-Target", "").endswith("ListShards"):
                return httpx.Response(200, content=trickle(b'{"Shards": [', every))
            return await inner.handle_async_request(request)

    return Transport()


async def test_a_trickling_list_shards_answer_times_out_as_a_whole() -> None:
    fake = FakeKinesis()
    fake.create_stream("s", 1)
    client = KinesisClient(
        region_name="us-east-1",
        endpoint_url="http://fake.local",
        credentials=CREDS,
        request_timeout=0.3,
        connect_timeout=0.2,
        transport=trickling_list_shards(fake, every=0.05),
    )
    async with client:
        start = anyio.current_time()
        with anyio.fail_after(30), pytest.raises(RequestTimeoutError, match="ListShards"):
            await client.list_shards("s")
        assert anyio.current_time() - start < 2


async def test_producer_enter_does_not_hang_on_a_trickling_list_shards() -> None:
    fake = FakeKinesis()
    fake.create_stream("s", 1)
    producer = Producer(
        "s",
        region_name="us-east-1",
        endpoint_url="http://fake.local",
        credentials=CREDS,
        config=ProducerConfig(request_timeout=0.3, connect_timeout=0.2),
        transport=trickling_list_shards(fake, every=0.05),
    )
    with anyio.fail_after(30), pytest.raises(RequestTimeoutError, match="ListShards"):
        async with producer:
            pass


def list_shards_answer(shards: Any) -> httpx.Response:
    return httpx.Response(200, content=json.dumps({"Shards": shards}).encode())


BAD_SHARD_LISTS: list[Any] = [
    [{"ShardId": "shardId-0"}],  # no HashKeyRange
    [{"ShardId": "shardId-0", "HashKeyRange": {"StartingHashKey": "0"}}],
    [{"ShardId": "shardId-0", "HashKeyRange": {"StartingHashKey": "x", "EndingHashKey": "1"}}],
    [None],
    ["shardId-0"],
    [{"HashKeyRange": {"StartingHashKey": "0", "EndingHashKey": "1"}}],
    [],  # no open shard
    "shards",
    7,
]


@pytest.mark.parametrize("shards", BAD_SHARD_LISTS, ids=repr)
async def test_a_malformed_list_shards_answer_is_a_kinesis_error_at_enter(shards: Any) -> None:
    async def hook(operation: str, body: dict[str, Any]) -> httpx.Response | None:
        return list_shards_answer(shards) if operation == "ListShards" else None

    fake = FakeKinesis(hook=hook)
    fake.create_stream("s", 1)
    with pytest.raises(ServiceError, match="malformed") as caught:
        async with fake_producer(fake):
            pass
    assert caught.value.code == "MalformedResponse"


async def test_a_malformed_list_shards_answer_on_refresh_is_logged_and_retried() -> None:
    broken = 0

    async def hook(operation: str, body: dict[str, Any]) -> httpx.Response | None:
        nonlocal broken
        if operation == "ListShards" and listed and broken < 3:
            broken += 1
            return list_shards_answer([{"ShardId": "shardId-000000000000"}])
        return None

    listed = False
    fake = FakeKinesis(hook=hook)
    fake.create_stream("s", 1)
    async with fake_producer(
        fake, shard_map_refresh_interval=0.2, record_max_buffered_time=0.01
    ) as producer:
        listed = True
        while broken < 3:  # noqa: ASYNC110 - waiting for the refreshes to happen
            await anyio.sleep(0.05)
        result = await (await producer.put(b"x", "k")).wait()
    assert result.ok
    assert broken == 3


@settings(max_examples=300, deadline=None)
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=5),
        lambda inner: (
            st.lists(inner, max_size=3)
            | st.dictionaries(
                st.sampled_from(
                    [
                        "ShardId",
                        "HashKeyRange",
                        "StartingHashKey",
                        "EndingHashKey",
                        "SequenceNumberRange",
                        "EndingSequenceNumber",
                        "ParentShardId",
                    ]
                ),
                inner,
                max_size=4,
            )
        ),
        max_leaves=12,
    )
)
def test_shard_map_from_garbage_is_a_map_or_a_malformed_response(shards: Any) -> None:
    try:
        entries = shards if isinstance(shards, list) else [shards]
        shard_map = ShardMap.from_api(entries)
    except ServiceError as exc:
        assert exc.code == "MalformedResponse"
    else:
        assert len(shard_map) >= 1
