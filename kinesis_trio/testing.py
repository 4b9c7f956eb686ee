"""Test helpers: an in-memory fake Kinesis to point a Producer at, no sockets needed.

::

    from kinesis_trio import Producer, StaticCredentials
    from kinesis_trio.testing import FakeKinesis

    fake = FakeKinesis()
    fake.create_stream("orders", shard_count=4)
    async with Producer("orders", region_name="us-east-1", endpoint_url="http://fake",
                        credentials=StaticCredentials("k", "s"),
                        transport=fake.transport()) as producer:
        ...
    assert len(fake.records("orders")) == ...

It speaks the same JSON 1.1 operations a Producer uses (PutRecords, ListShards,
DescribeStreamSummary, CreateStream, DeleteStream, GetShardIterator, GetRecords), routes by
hash key like Kinesis, and answers PutRecords entries in request order.
"""

from __future__ import annotations

import base64
import hashlib
import itertools
import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx

__all__ = ["FakeKinesis", "FakeRecord", "FakeShard"]

_MAX_HASH = (1 << 128) - 1


@dataclass
class FakeRecord:
    """A Kinesis record as stored by the fake."""

    data: bytes
    partition_key: str
    explicit_hash_key: str | None
    hash_key: int
    sequence_number: str
    shard_id: str


@dataclass
class FakeShard:
    """One shard of a fake stream, with its records."""

    shard_id: str
    start: int
    end: int
    parent_shard_id: str | None = None
    closed: bool = False
    records: list[FakeRecord] = field(default_factory=list)


@dataclass
class _Stream:
    name: str
    shards: list[FakeShard]
    next_shard: int


Handler = Callable[[str, dict[str, Any]], Awaitable[httpx.Response | None]]


class FakeKinesis:
    """An in-memory Kinesis: streams, shards, records; use :meth:`transport` with a Producer.

    ``hook`` (optional) is an async callable ``(operation, body) -> httpx.Response | None``
    called before each request is served: return a response to answer in its place (to
    inject an error), or ``None`` to serve it normally. It may sleep to add latency.
    """

    def __init__(self, hook: Handler | None = None) -> None:
        self.streams: dict[str, _Stream] = {}
        self.hook = hook
        self.calls: list[str] = []
        self._seq = itertools.count(1)

    # -- set-up and inspection ------------------------------------------------------------

    def create_stream(self, name: str, shard_count: int = 1) -> None:
        """Create an ACTIVE stream whose shards split the hash key space evenly."""
        if name in self.streams:
            raise ValueError(f"stream {name!r} exists")
        step = (_MAX_HASH + 1) // shard_count
        shards = []
        for i in range(shard_count):
            start = i * step
            end = _MAX_HASH if i == shard_count - 1 else (i + 1) * step - 1
            shards.append(FakeShard(f"shardId-{i:012d}", start, end))
        self.streams[name] = _Stream(name, shards, shard_count)

    def split_shard(self, name: str, shard_id: str, new_starting_hash_key: int) -> None:
        """Close ``shard_id`` and open two children split at ``new_starting_hash_key``."""
        stream = self.streams[name]
        parent = next(s for s in stream.shards if s.shard_id == shard_id and not s.closed)
        if not parent.start < new_starting_hash_key <= parent.end:
            raise ValueError("split key outside the shard")
        parent.closed = True
        for start, end in (
            (parent.start, new_starting_hash_key - 1),
            (new_starting_hash_key, parent.end),
        ):
            stream.shards.append(
                FakeShard(f"shardId-{stream.next_shard:012d}", start, end, parent.shard_id)
            )
            stream.next_shard += 1

    def open_shards(self, name: str) -> list[FakeShard]:
        return [s for s in self.streams[name].shards if not s.closed]

    def records(self, name: str) -> list[FakeRecord]:
        """Every record written to the stream, across shards."""
        return [r for s in self.streams[name].shards for r in s.records]

    def transport(self) -> httpx.AsyncBaseTransport:
        """An httpx transport serving this fake (pass it as ``Producer(transport=...)``)."""
        return httpx.MockTransport(self._handle)

    # -- serving --------------------------------------------------------------------------

    async def _handle(self, request: httpx.Request) -> httpx.Response:
        target = request.headers.get("x-amz-target", "")
        operation = target.rpartition(".")[2]
        if "authorization" not in request.headers:
            return _error(400, "MissingAuthenticationTokenException", "no Authorization header")
        body: dict[str, Any] = json.loads(await request.aread() or b"{}")
        self.calls.append(operation)
        if self.hook is not None:
            injected = await self.hook(operation, body)
            if injected is not None:
                return injected
        method = getattr(self, f"_op_{operation}", None)
        if method is None:
            return _error(400, "UnknownOperationException", operation)
        try:
            result: dict[str, Any] = method(body)
        except _Fail as fail:
            return _error(fail.status, fail.code, fail.message)
        return httpx.Response(200, json=result)

    def _stream(self, body: dict[str, Any]) -> _Stream:
        name = body.get("StreamName") or str(body.get("StreamARN", "")).rpartition("/")[2]
        stream = self.streams.get(name)
        if stream is None:
            raise _Fail(400, "ResourceNotFoundException", f"Stream {name} not found.")
        return stream

    def _op_CreateStream(self, body: dict[str, Any]) -> dict[str, Any]:
        if body["StreamName"] in self.streams:
            raise _Fail(400, "ResourceInUseException", "exists")
        self.create_stream(body["StreamName"], int(body.get("ShardCount") or 1))
        return {}

    def _op_DeleteStream(self, body: dict[str, Any]) -> dict[str, Any]:
        del self.streams[self._stream(body).name]
        return {}

    def _op_DescribeStreamSummary(self, body: dict[str, Any]) -> dict[str, Any]:
        stream = self._stream(body)
        return {
            "StreamDescriptionSummary": {
                "StreamName": stream.name,
                "StreamStatus": "ACTIVE",
                "StreamModeDetails": {"StreamMode": "PROVISIONED"},
                "OpenShardCount": len([s for s in stream.shards if not s.closed]),
            }
        }

    def _op_ListShards(self, body: dict[str, Any]) -> dict[str, Any]:
        if "NextToken" in body:
            name = body["NextToken"]
            stream = self.streams[name]
        else:
            stream = self._stream(body)
        at_latest = body.get("ShardFilter", {}).get("Type") == "AT_LATEST"
        shards = []
        for s in stream.shards:
            if at_latest and s.closed:
                continue
            entry: dict[str, Any] = {
                "ShardId": s.shard_id,
                "HashKeyRange": {"StartingHashKey": str(s.start), "EndingHashKey": str(s.end)},
                "SequenceNumberRange": {"StartingSequenceNumber": "1"},
            }
            if s.parent_shard_id:
                entry["ParentShardId"] = s.parent_shard_id
            if s.closed:
                entry["SequenceNumberRange"]["EndingSequenceNumber"] = "9"
            shards.append(entry)
        return {"Shards": shards}

    def _op_PutRecords(self, body: dict[str, Any]) -> dict[str, Any]:
        stream = self._stream(body)
        entries = body.get("Records") or []
        if not 1 <= len(entries) <= 500:
            raise _Fail(400, "ValidationException", "1 to 500 records per request")
        results = []
        for entry in entries:
            data = base64.b64decode(entry["Data"])
            pk = entry["PartitionKey"]
            ehk = entry.get("ExplicitHashKey")
            hk = (
                int(ehk)
                if ehk is not None
                else int.from_bytes(hashlib.md5(pk.encode()).digest(), "big")
            )
            shard = next(s for s in stream.shards if not s.closed and s.start <= hk <= s.end)
            seq = f"{next(self._seq):056d}"
            shard.records.append(FakeRecord(data, pk, ehk, hk, seq, shard.shard_id))
            results.append({"ShardId": shard.shard_id, "SequenceNumber": seq})
        return {"FailedRecordCount": 0, "Records": results}

    def _op_GetShardIterator(self, body: dict[str, Any]) -> dict[str, Any]:
        stream = self._stream(body)
        return {"ShardIterator": json.dumps([stream.name, body["ShardId"], 0])}

    def _op_GetRecords(self, body: dict[str, Any]) -> dict[str, Any]:
        name, shard_id, pos = json.loads(body["ShardIterator"])
        shard = next(s for s in self.streams[name].shards if s.shard_id == shard_id)
        limit = int(body.get("Limit") or 10_000)
        page = shard.records[pos : pos + limit]
        return {
            "Records": [
                {
                    "Data": base64.b64encode(r.data).decode(),
                    "PartitionKey": r.partition_key,
                    "SequenceNumber": r.sequence_number,
                    **({"ExplicitHashKey": r.explicit_hash_key} if r.explicit_hash_key else {}),
                }
                for r in page
            ],
            "NextShardIterator": json.dumps([name, shard_id, pos + len(page)]),
            "MillisBehindLatest": 0,
        }


class _Fail(Exception):
    def __init__(self, status: int, code: str, message: str) -> None:
        self.status, self.code, self.message = status, code, message


def _error(status: int, code: str, message: str) -> httpx.Response:
    return httpx.Response(status, json={"__type": code, "message": message})
