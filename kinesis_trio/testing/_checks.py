"""Checks of request members, as Kinesis makes them: stream references (name and ARN),
names, page limits, record sizes, distribution strategies and channel counts."""

from __future__ import annotations

import re
from typing import Any

from ._model import ACCOUNT_ID, REGION, _Fail

#: ASCII digits only (Python's ``\d`` also matches other scripts' digits; Kinesis's doesn't).
_EHK = re.compile(r"0|[1-9][0-9]{0,38}")
#: MaxRecordSizeInKiB: "Specify a value between 1024 and 10240 KiB" (UpdateMaxRecordSizeInput)
_MIN_RECORD_KIB, _MAX_RECORD_KIB = 1024, 10240
#: ChannelCountObject: an integer from 0 to 1,000,000
_MAX_CHANNELS = 1_000_000
#: The RecordDistributionStrategy enum; the first is the default
_STRATEGIES = ("USER_PARTITION_KEY", "AUTO")
#: The service model's StreamARN pattern (matched in full, as Kinesis matches patterns)
_ARN_PATTERN = r"arn:aws.*:kinesis:.*:\d{12}:stream/\S+"
_ARN = re.compile(_ARN_PATTERN)
_ARN_PARTS = re.compile(r"arn:([^:]+):kinesis:(.*):(\d{12}):stream/(\S+)")
#: The StreamName and ShardId shapes: 1 to 128 of these characters
_NAME = re.compile(r"[a-zA-Z0-9_.-]{1,128}")
#: The StreamId shape ("Not Implemented. Reserved for future use."): validated, ignored
_STREAM_ID = re.compile(r"[a-z0-9]{20}-[a-z0-9]{3}")
#: DescribeStream and ListStreams: Limit 1 to 10000, "If you specify a value greater than
#: 100, at most 100 results are returned"
_MAX_LIMIT, _PAGE_CAP = 10_000, 100


def _stream_ref(body: dict[str, Any]) -> str | None:
    """The stream a request names by ``StreamName`` and/or ``StreamARN`` (``None``: neither).

    The ARN must match the model's pattern (else ``ValidationException``) and name the
    fake's partition, region and account (else ``ResourceNotFoundException``); a name and
    an ARN naming different streams: ``InvalidArgumentException``.
    """
    name = body.get("StreamName")
    if not (isinstance(name, str) and name):
        name = None
    arn = body.get("StreamARN")
    if arn is None:
        return name
    if not isinstance(arn, str) or not 1 <= len(arn) <= 2048 or not _ARN.fullmatch(arn):
        raise _Fail(
            400,
            "ValidationException",
            f"1 validation error detected: Value '{arn}' at 'streamARN' failed to satisfy "
            f"constraint: Member must satisfy regular expression pattern: {_ARN_PATTERN}",
        )
    parts = _ARN_PARTS.fullmatch(arn)
    if parts is None or parts.group(1, 2, 3) != ("aws", REGION, ACCOUNT_ID):
        raise _Fail(400, "ResourceNotFoundException", f"Stream {arn} not found.")
    from_arn = parts.group(4)
    if name is not None and name != from_arn:
        raise _Fail(
            400,
            "InvalidArgumentException",
            f"StreamName {name} and StreamARN {arn} name different streams.",
        )
    return from_arn


def _check_record_kib(kib: object) -> int:
    if isinstance(kib, bool) or not isinstance(kib, int):
        raise _Fail(400, "ValidationException", "MaxRecordSizeInKiB must be an integer")
    if not _MIN_RECORD_KIB <= kib <= _MAX_RECORD_KIB:
        raise _Fail(
            400,
            "ValidationException",
            f"1 validation error detected: Value '{kib}' at 'maxRecordSizeInKiB' failed to "
            f"satisfy constraint: Member must have value between {_MIN_RECORD_KIB} and "
            f"{_MAX_RECORD_KIB}",
        )
    return kib


def _check_strategy(strategy: object) -> str:
    if strategy not in _STRATEGIES:
        raise _Fail(
            400,
            "ValidationException",
            f"1 validation error detected: Value '{strategy}' at 'recordDistributionStrategy' "
            "failed to satisfy constraint: Member must satisfy enum value set: "
            "[AUTO, USER_PARTITION_KEY]",
        )
    assert isinstance(strategy, str)
    return strategy


def _check_channels(n: object) -> int:
    if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n <= _MAX_CHANNELS:
        raise _Fail(
            400, "ValidationException", f"ChannelCount must be from 0 to {_MAX_CHANNELS}: {n!r}"
        )
    return n


def _check_limit(body: dict[str, Any], member: str, default: int) -> int:
    """An optional integer member of 1 to 10000 (``default`` when absent)."""
    value = body.get(member)
    if value is None:
        return default
    where = member[0].lower() + member[1:]
    if isinstance(value, bool) or not isinstance(value, int):
        raise _Fail(
            400,
            "ValidationException",
            f"1 validation error detected: Value '{value}' at '{where}' failed to satisfy "
            "constraint: Member must be an integer",
        )
    if not 1 <= value <= _MAX_LIMIT:
        bound = "greater than or equal to 1" if value < 1 else f"less than or equal to {_MAX_LIMIT}"
        raise _Fail(
            400,
            "ValidationException",
            f"1 validation error detected: Value '{value}' at '{where}' failed to satisfy "
            f"constraint: Member must have value {bound}",
        )
    return value


def _check_name(body: dict[str, Any], member: str) -> str | None:
    """An optional member of the StreamName or ShardId shape (1 to 128 of
    ``[a-zA-Z0-9_.-]``)."""
    value = body.get(member)
    if value is None:
        return None
    if not isinstance(value, str) or not _NAME.fullmatch(value):
        where = member[0].lower() + member[1:]
        raise _Fail(
            400,
            "ValidationException",
            f"1 validation error detected: Value '{value}' at '{where}' failed to satisfy "
            "constraint: Member must satisfy regular expression pattern: [a-zA-Z0-9_.-]+ "
            "and have length between 1 and 128",
        )
    return value


def _check_stream_id(body: dict[str, Any]) -> None:
    value = body.get("StreamId")
    if value is not None and (not isinstance(value, str) or not _STREAM_ID.fullmatch(value)):
        raise _Fail(
            400,
            "ValidationException",
            f"1 validation error detected: Value '{value}' at 'streamId' failed to satisfy "
            "constraint: Member must satisfy regular expression pattern: "
            "[a-z0-9]{20}-[a-z0-9]{3}",
        )


def _required(body: dict[str, Any], member: str) -> Any:
    value = body.get(member)
    if value is None:
        where = member[0].lower() + member[1:]
        raise _Fail(
            400,
            "ValidationException",
            f"1 validation error detected: Value null at '{where}' failed to satisfy "
            "constraint: Member must not be null",
        )
    return value


def _stream_name(body: dict[str, Any]) -> str | None:
    """The stream a request names, leniently (for ``fatal`` and ``fail_next`` targeting)."""
    name = body.get("StreamName")
    if isinstance(name, str) and name:
        return name
    arn = body.get("StreamARN")
    if isinstance(arn, str) and arn:
        return arn.rpartition("/")[2]
    return None
