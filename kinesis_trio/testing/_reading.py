"""The fake's read side: GetShardIterator and GetRecords (iterators are plain JSON)."""

from __future__ import annotations

import base64
import bisect
import json
import re
from typing import Any

from ._fake_streams import _Streams
from ._model import _MIB, FakeRecord, _arrival, _Fail, _hash_range, _seq, _seq_counter

#: "GetRecords can retrieve up to 10 MiB of data per call from a single shard, and up to
#: 10,000 records per call" (the developer guide's quotas); a larger first record still
#: comes back alone, as records may now be up to 10 MiB.
_PAGE_BYTES = 10 * _MIB
#: SequenceNumber's pattern in the service model: ``0|([1-9]\d{0,128})``
_SEQUENCE = re.compile(r"0|[1-9][0-9]{0,128}")


class _Reading(_Streams):
    """GetShardIterator and GetRecords over the fake's stored records.

    A shard iterator is plain JSON, ``[stream, shard id, n]``: it reads from the first
    record whose sequence counter is at least ``n``, so trimming records from the front of
    a shard (retention) moves no one's position."""

    def _op_GetShardIterator(self, body: dict[str, Any]) -> dict[str, Any]:
        stream = self._stream(body)
        shard = stream.shard(body["ShardId"])
        self._expire(stream, self._now())
        kind = body["ShardIteratorType"]
        records = shard.records
        if kind == "TRIM_HORIZON":
            counter = 0
        elif kind == "LATEST":
            counter = self._last_seq + 1
        elif kind in ("AT_SEQUENCE_NUMBER", "AFTER_SEQUENCE_NUMBER"):
            seq = body.get("StartingSequenceNumber")
            if not isinstance(seq, str) or not _SEQUENCE.fullmatch(seq):
                raise _Fail(
                    400,
                    "ValidationException",
                    f"1 validation error detected: Value '{seq}' at 'startingSequenceNumber' "
                    "failed to satisfy constraint: Member must satisfy regular expression "
                    "pattern: 0|([1-9]\\d{0,128})",
                )
            counter = max(0, _seq_counter(seq) + (kind == "AFTER_SEQUENCE_NUMBER"))
        else:  # AT_TIMESTAMP (the model's enum allows no other)
            when = body.get("Timestamp")
            if when is None:
                raise _Fail(
                    400,
                    "InvalidArgumentException",
                    "Must specify timestamp for AT_TIMESTAMP shard iterator type.",
                )
            at = float(when) - self.clock_offset
            pos = bisect.bisect_left(records, at, key=_arrival)
            counter = (
                _seq_counter(records[pos].sequence_number)
                if pos < len(records)
                else self._last_seq + 1
            )
        return {"ShardIterator": json.dumps([stream.name, shard.shard_id, counter])}

    def _op_GetRecords(self, body: dict[str, Any]) -> dict[str, Any]:
        name, shard_id, counter = _iterator(body["ShardIterator"])
        stream = self._get(name)
        shard = stream.shard(shard_id)
        now = self._now()
        self._expire(stream, now)
        limit = body.get("Limit") or 10_000
        records = shard.records
        pos = bisect.bisect_left(records, _seq(counter), key=_sequence)
        end, size = pos, 0
        while end < len(records) and end - pos < limit:
            size += len(records[end].data) + len((records[end].partition_key or "").encode())
            if size > _PAGE_BYTES and end > pos:
                break
            end += 1
        page = records[pos:end]
        result: dict[str, Any] = {
            "Records": [_record(r, self.clock_offset) for r in page],
            # how far behind the tip the reader is: the age of the oldest record it has not
            # been given yet (0 once it has them all)
            "MillisBehindLatest": (
                max(0, round((now - records[end].arrival) * 1000)) if end < len(records) else 0
            ),
        }
        if shard.closed and end >= len(records):
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
            after = _seq_counter(page[-1].sequence_number) + 1 if page else counter
            result["NextShardIterator"] = json.dumps([name, shard_id, after])
        return result


def _iterator(text: str) -> tuple[str, str, int]:
    """A shard iterator this fake handed out, or ``InvalidArgumentException``."""
    try:
        name, shard_id, counter = json.loads(text)
    except (ValueError, TypeError, RecursionError):
        name = None
    if not (
        isinstance(name, str)
        and isinstance(shard_id, str)
        and type(counter) is int
        and counter >= 0
    ):
        raise _Fail(400, "InvalidArgumentException", "Invalid ShardIterator.")
    return name, shard_id, counter


def _sequence(record: FakeRecord) -> str:
    return record.sequence_number


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
