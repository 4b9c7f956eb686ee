"""The fake's control plane: the stream operations other than reads and writes."""

from __future__ import annotations

import base64
import binascii
import json
import math
from typing import Any

from ._checks import (
    _EHK,
    _PAGE_CAP,
    _check_limit,
    _check_name,
    _check_record_kib,
    _check_strategy,
    _check_stream_id,
    _required,
    _stream_name,
)
from ._fake_streams import _Streams
from ._model import FakeShard, _Fail, _hash_range

_TOKEN_TTL = 300.0  # seconds a ListShards or ListStreams NextToken stays valid


class _Control(_Streams):
    """CreateStream, DeleteStream, the Describe and List operations, resharding and the
    stream settings: an ``_op_<Operation>`` each, from the request body (checked against
    its input shape) to the answer's."""

    def _op_CreateStream(self, body: dict[str, Any]) -> dict[str, Any]:
        _required(body, "StreamName")
        name = _check_name(body, "StreamName")
        assert name is not None
        mode = (body.get("StreamModeDetails") or {}).get("StreamMode", "PROVISIONED")
        on_demand = mode == "ON_DEMAND"
        shards = body.get("ShardCount")
        if shards is not None and (type(shards) is not int or shards < 1):
            raise _Fail(
                400,
                "ValidationException",
                f"1 validation error detected: Value '{shards}' at 'shardCount' failed to "
                "satisfy constraint: Member must have value greater than or equal to 1",
            )
        count = 4 if on_demand else (shards or 1)
        self.create_stream(
            name,
            count,
            on_demand=on_demand,
            max_record_size_kib=body.get("MaxRecordSizeInKiB"),
            record_distribution_strategy=body.get("RecordDistributionStrategy"),
        )
        return {}

    def _op_UpdateMaxRecordSize(self, body: dict[str, Any]) -> dict[str, Any]:
        kib = _check_record_kib(_required(body, "MaxRecordSizeInKiB"))
        self.update_max_record_size(self._stream(body).name, kib)
        return {}

    def _op_UpdateStreamRecordDistributionStrategy(self, body: dict[str, Any]) -> dict[str, Any]:
        strategy = _check_strategy(_required(body, "RecordDistributionStrategy"))
        self.update_record_distribution_strategy(self._stream(body).name, strategy)
        return {}

    def _op_IncreaseStreamRetentionPeriod(self, body: dict[str, Any]) -> dict[str, Any]:
        self.set_retention(self._stream(body).name, body["RetentionPeriodHours"], increase=True)
        return {}

    def _op_DecreaseStreamRetentionPeriod(self, body: dict[str, Any]) -> dict[str, Any]:
        self.set_retention(self._stream(body).name, body["RetentionPeriodHours"], increase=False)
        return {}

    def _op_DeleteStream(self, body: dict[str, Any]) -> dict[str, Any]:
        self._drop_stream(self._stream(body).name)
        return {}

    def _op_DescribeStreamSummary(self, body: dict[str, Any]) -> dict[str, Any]:
        stream = self._stream(body)
        summary: dict[str, Any] = {
            "StreamName": stream.name,
            "StreamARN": stream.arn,
            "StreamStatus": "ACTIVE",
            "StreamModeDetails": {"StreamMode": stream.mode},
            "RetentionPeriodHours": stream.retention_hours,
            "StreamCreationTimestamp": stream.created,
            "EncryptionType": "NONE",
            "EnhancedMonitoring": [{"ShardLevelMetrics": []}],
            "OpenShardCount": len(stream.open_shards()),
            "ConsumerCount": 0,
            "MaxRecordSizeInKiB": stream.max_record_size // 1024,
            "ChannelCount": stream.channel_count,
        }
        if stream.on_demand:  # "only present for streams that use the on-demand capacity mode"
            summary["RecordDistributionStrategy"] = stream.record_distribution_strategy
        return {"StreamDescriptionSummary": summary}

    def _op_DescribeStream(self, body: dict[str, Any]) -> dict[str, Any]:
        """DescribeStreamInput (StreamName/StreamARN, Limit, ExclusiveStartShardId, StreamId)
        and StreamDescription: shards in ListShards' shape, at most 100 a page, after
        ``ExclusiveStartShardId``; ``HasMoreShards`` when more follow."""
        limit = min(_check_limit(body, "Limit", _PAGE_CAP), _PAGE_CAP)
        after = _check_name(body, "ExclusiveStartShardId")
        _check_stream_id(body)
        stream = self._stream(body)
        shards = [s for s in stream.shards if after is None or s.shard_id > after]
        page = shards[:limit]
        description: dict[str, Any] = {
            "StreamName": stream.name,
            "StreamARN": stream.arn,
            "StreamStatus": "ACTIVE",
            "StreamModeDetails": {"StreamMode": stream.mode},
            "Shards": [_describe_shard(s) for s in page],
            "HasMoreShards": len(page) < len(shards),
            "RetentionPeriodHours": stream.retention_hours,
            "StreamCreationTimestamp": stream.created,
            "EnhancedMonitoring": [{"ShardLevelMetrics": []}],
            "EncryptionType": "NONE",
        }
        return {"StreamDescription": description}

    def _op_ListStreams(self, body: dict[str, Any]) -> dict[str, Any]:
        """ListStreamsInput (Limit, ExclusiveStartStreamName, NextToken): stream names in
        order, at most 100 a page. A ``NextToken`` (valid 300 s) continues where its page
        ended and takes precedence over ``ExclusiveStartStreamName`` (a paginator resends
        the first request's members with it)."""
        limit = min(_check_limit(body, "Limit", _PAGE_CAP), _PAGE_CAP)
        after = _check_name(body, "ExclusiveStartStreamName")
        now = self._now()
        token = body.get("NextToken")
        if token is not None:
            try:
                after, issued = json.loads(base64.b64decode(token))
                if not isinstance(after, str) or not isinstance(issued, (int, float)):
                    raise TypeError(token)
            except (ValueError, TypeError, RecursionError, binascii.Error):
                raise _Fail(400, "InvalidArgumentException", "Invalid NextToken.") from None
            if now - issued > _TOKEN_TTL:
                raise _Fail(400, "ExpiredNextTokenException", "The NextToken has expired.")
        names = sorted(n for n in self.streams if after is None or n > after)
        page = names[:limit]
        result: dict[str, Any] = {
            "StreamNames": page,
            "HasMoreStreams": len(page) < len(names),
            "StreamSummaries": [
                {
                    "StreamName": stream.name,
                    "StreamARN": stream.arn,
                    "StreamStatus": "ACTIVE",
                    "StreamModeDetails": {"StreamMode": stream.mode},
                    "StreamCreationTimestamp": stream.created,
                }
                for stream in (self.streams[n] for n in page)
            ],
        }
        if result["HasMoreStreams"]:
            result["NextToken"] = base64.b64encode(json.dumps([page[-1], now]).encode()).decode()
        return result

    def _op_ListShards(self, body: dict[str, Any]) -> dict[str, Any]:
        max_results = body.get("MaxResults", 1000)
        if not isinstance(max_results, int) or not 1 <= max_results <= 10_000:
            raise _Fail(400, "ValidationException", "MaxResults must be from 1 to 10000")
        now = self._now()
        token = body.get("NextToken")
        if token is not None:
            if _stream_name(body) is not None or "ExclusiveStartShardId" in body:
                raise _Fail(
                    400,
                    "InvalidArgumentException",
                    "NextToken and StreamName/StreamARN/ExclusiveStartShardId cannot be "
                    "provided together.",
                )
            name, after, at_latest, offset, issued = _list_shards_token(token)
            if now - issued > _TOKEN_TTL:
                raise _Fail(400, "ExpiredNextTokenException", "The NextToken has expired.")
            stream = self._get(name)
        else:
            stream = self._stream(body)
            shard_filter = body.get("ShardFilter") or {}
            kind = shard_filter.get("Type")
            at_latest = kind == "AT_LATEST"
            after = body.get("ExclusiveStartShardId")
            if kind == "AFTER_SHARD_ID":
                after = shard_filter.get("ShardId") or after
            offset = 0
        shards = [
            s
            for s in stream.shards
            if not (at_latest and s.closed) and (after is None or s.shard_id > after)
        ]
        page = shards[offset : offset + max_results]
        result: dict[str, Any] = {"Shards": [_describe_shard(s) for s in page]}
        if offset + max_results < len(shards):
            state = [stream.name, after, at_latest, offset + max_results, now]
            result["NextToken"] = base64.b64encode(json.dumps(state).encode()).decode()
        return result

    def _op_SplitShard(self, body: dict[str, Any]) -> dict[str, Any]:
        stream = self._stream(body)
        key = str(body.get("NewStartingHashKey", ""))
        if not _EHK.fullmatch(key):
            raise _Fail(400, "ValidationException", "NewStartingHashKey must be a decimal number")
        self.split_shard(stream.name, str(body.get("ShardToSplit")), int(key))
        return {}

    def _op_MergeShards(self, body: dict[str, Any]) -> dict[str, Any]:
        stream = self._stream(body)
        self.merge_shards(
            stream.name, str(body.get("ShardToMerge")), str(body.get("AdjacentShardToMerge"))
        )
        return {}

    def _op_UpdateShardCount(self, body: dict[str, Any]) -> dict[str, Any]:
        stream = self._stream(body)
        if body.get("ScalingType", "UNIFORM_SCALING") != "UNIFORM_SCALING":
            raise _Fail(400, "ValidationException", "ScalingType must be UNIFORM_SCALING")
        target = body.get("TargetShardCount")
        if not isinstance(target, int):
            raise _Fail(400, "ValidationException", "TargetShardCount is required")
        current = len(stream.open_shards())
        self.update_shard_count(stream.name, target)
        return {
            "StreamName": stream.name,
            "StreamARN": stream.arn,
            "CurrentShardCount": current,
            "TargetShardCount": target,
        }


def _list_shards_token(token: str) -> tuple[str, str | None, bool, int, float]:
    """A ListShards NextToken this fake handed out, or ``InvalidArgumentException``."""
    try:
        name, after, at_latest, offset, issued = json.loads(base64.b64decode(token))
    except (ValueError, TypeError, RecursionError, binascii.Error):
        name = None
    if not (
        isinstance(name, str)
        and (after is None or isinstance(after, str))
        and isinstance(at_latest, bool)
        and type(offset) is int
        and offset >= 0
        and isinstance(issued, (int, float))
        and not isinstance(issued, bool)
        and math.isfinite(issued)
    ):
        raise _Fail(400, "InvalidArgumentException", "Invalid NextToken.")
    return name, after, at_latest, offset, float(issued)


def _describe_shard(shard: FakeShard) -> dict[str, Any]:
    seq: dict[str, str] = {"StartingSequenceNumber": shard.starting_sequence_number}
    if shard.ending_sequence_number is not None:
        seq["EndingSequenceNumber"] = shard.ending_sequence_number
    entry: dict[str, Any] = {
        "ShardId": shard.shard_id,
        "HashKeyRange": _hash_range(shard),
        "SequenceNumberRange": seq,
    }
    if shard.parent_shard_id:
        entry["ParentShardId"] = shard.parent_shard_id
    if shard.adjacent_parent_shard_id:
        entry["AdjacentParentShardId"] = shard.adjacent_parent_shard_id
    return entry
