"""The fake's read side: GetShardIterator and GetRecords (iterators are plain JSON)."""

from __future__ import annotations

import base64
import json
from typing import TYPE_CHECKING, Any

from ._model import FakeRecord, _Fail, _hash_range, _Stream


class _Reading:
    """GetShardIterator and GetRecords over the fake's stored records."""

    if TYPE_CHECKING:  # provided by FakeKinesis and _Streams

        def _stream(self, body: dict[str, Any]) -> _Stream: ...

        def _get(self, name: str) -> _Stream: ...

        clock_offset: float

    def _op_GetShardIterator(self, body: dict[str, Any]) -> dict[str, Any]:
        stream = self._stream(body)
        shard = stream.shard(str(body.get("ShardId")))
        kind = body.get("ShardIteratorType", "TRIM_HORIZON")
        records = shard.records
        if kind == "TRIM_HORIZON":
            pos = 0
        elif kind == "LATEST":
            pos = len(records)
        elif kind in ("AT_SEQUENCE_NUMBER", "AFTER_SEQUENCE_NUMBER"):
            seq = str(body.get("StartingSequenceNumber"))
            pos = next((i for i, r in enumerate(records) if r.sequence_number >= seq), len(records))
            if (
                kind == "AFTER_SEQUENCE_NUMBER"
                and pos < len(records)
                and records[pos].sequence_number == seq
            ):
                pos += 1
        elif kind == "AT_TIMESTAMP":
            ts = float(body.get("Timestamp", 0)) - self.clock_offset
            pos = next((i for i, r in enumerate(records) if r.arrival >= ts), len(records))
        else:
            raise _Fail(400, "ValidationException", f"unknown ShardIteratorType {kind!r}")
        return {"ShardIterator": json.dumps([stream.name, shard.shard_id, pos])}

    def _op_GetRecords(self, body: dict[str, Any]) -> dict[str, Any]:
        try:
            name, shard_id, pos = json.loads(body["ShardIterator"])
        except (KeyError, ValueError, TypeError):
            raise _Fail(400, "InvalidArgumentException", "Invalid ShardIterator.") from None
        stream = self._get(name)
        shard = stream.shard(shard_id)
        limit = int(body.get("Limit") or 10_000)
        page = shard.records[pos : pos + limit]
        end = pos + len(page)
        result: dict[str, Any] = {
            "Records": [_record(r, self.clock_offset) for r in page],
            "MillisBehindLatest": 0,
        }
        if shard.closed and end >= len(shard.records):
            result["NextShardIterator"] = None
            result["ChildShards"] = [
                {
                    "ShardId": c.shard_id,
                    "ParentShards": [
                        p for p in (c.parent_shard_id, c.adjacent_parent_shard_id) if p
                    ],
                    "HashKeyRange": _hash_range(c),
                }
                for c in stream.shards
                if shard.shard_id in (c.parent_shard_id, c.adjacent_parent_shard_id)
            ]
        else:
            result["NextShardIterator"] = json.dumps([name, shard_id, end])
        return result


def _record(record: FakeRecord, offset: float) -> dict[str, Any]:
    """A record as GetRecords returns it: like Kinesis, without its ExplicitHashKey, and
    without a PartitionKey when it was written without one (the model's ``Record``: "this
    value is not returned if the producer did not provide a partition key")."""
    out: dict[str, Any] = {
        "Data": base64.b64encode(record.data).decode(),
        "SequenceNumber": record.sequence_number,
        "ApproximateArrivalTimestamp": record.arrival + offset,
    }
    if record.partition_key is not None:
        out["PartitionKey"] = record.partition_key
    return out
