"""What a stream is and what that means for the producer (pure, no I/O).

The service of 2025-2026 made streams differ in ways a producer must follow (botocore's
Kinesis model, 1.43; the AWS developer guide):

- ``MaxRecordSizeInKiB`` (DescribeStreamSummary; 1024-10240, absent: 1 MiB) is the largest
  record (data + partition key) the stream takes.
- ``RecordDistributionStrategy`` ``AUTO`` (on-demand streams only): "Amazon Kinesis Data
  Streams distributes records evenly across shards and ignores any partition key and
  ``ExplicitHashKey`` that producers supply" (``UpdateStreamRecordDistributionStrategy``).
  The partition key is optional there. The AWS guide: KPL aggregation "is not supported on
  streams configured with service-managed record distribution", and KCL consumers drop such
  aggregates: nothing can predict the shard, so no aggregate can pass the KCL's range rule.
- ``ChannelCount`` > 0: the stream feeds channels that write its records to S3 or Iceberg
  tables as JSON, text or bytes. No AWS page says a channel de-aggregates, so an aggregate
  reaches those files (or the channel's dead-letter prefix) still packed.
- Streams are addressed by ``StreamARN`` as well as by name (another account's stream only
  by ARN).

:class:`StreamFacts` reads a DescribeStreamSummary answer; :func:`policy_for` is the rule
that turns facts and settings into what the producer does for the stream
(:class:`StreamPolicy`); :func:`parse_stream_arn` reads and checks an ARN, and
:func:`default_stream_ref`, :func:`arn_ref` and :func:`name_and_arn` read the producer's
stream references (a name or an ARN).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from .._errors import ServiceError, malformed_answer

__all__ = [
    "AUTO",
    "AUTO_SHARD_ID",
    "USER_PARTITION_KEY",
    "StreamArn",
    "StreamFacts",
    "StreamPolicy",
    "arn_ref",
    "default_stream_ref",
    "is_arn",
    "name_and_arn",
    "parse_stream_arn",
    "policy_for",
]

AUTO = "AUTO"
USER_PARTITION_KEY = "USER_PARTITION_KEY"
#: The one buffer of a stream whose records the service places (no shard is predicted).
AUTO_SHARD_ID = "service-placed"
KIB = 1024
#: ``MaxRecordSizeInKiB`` bounds in botocore's model; absent means the 1 MiB of old.
MIN_RECORD_KIB = 1024
MAX_RECORD_KIB = 10240
DEFAULT_MAX_RECORD_SIZE = MIN_RECORD_KIB * KIB

# botocore's StreamARN pattern is ``arn:aws.*:kinesis:.*:\d{12}:stream/\S+``; the parts are
# checked one by one so that the error can name the part that is wrong.
_PARTITION = re.compile(r"aws(-[a-z]+)*")
_REGION = re.compile(r"[a-z]{2}(-[a-z]+)+-\d+")
_ACCOUNT = re.compile(r"\d{12}")
_STREAM_NAME = re.compile(r"[a-zA-Z0-9_.-]{1,128}")


@dataclass(frozen=True, slots=True)
class StreamArn:
    """A stream's ARN, read into its parts."""

    arn: str
    partition: str
    region: str
    account: str
    name: str


def is_arn(text: str) -> bool:
    """Does this stream reference look like an ARN (rather than a name)?"""
    return text.startswith("arn:")


def parse_stream_arn(arn: object, region: str | None = None) -> StreamArn:
    """Read a Kinesis stream ARN (``arn:<partition>:kinesis:<region>:<account>:stream/<name>``).

    Raises ``TypeError`` for a non-string and ``ValueError`` naming the part that is wrong;
    with ``region``, an ARN of another region is a ``ValueError`` too (the client signs for
    one region and sends to its endpoint).
    """
    if not isinstance(arn, str):
        raise TypeError(f"stream_arn must be a str, got {type(arn).__name__}")
    parts = arn.split(":", 5)
    if len(parts) != 6 or parts[0] != "arn":
        raise ValueError(
            f"not a stream ARN: {arn[:200]!r} (expected "
            "arn:<partition>:kinesis:<region>:<account>:stream/<name>)"
        )
    _, partition, service, arn_region, account, resource = parts
    if not _PARTITION.fullmatch(partition):
        raise ValueError(f"stream ARN {arn!r} has a bad partition {partition!r}")
    if service != "kinesis":
        raise ValueError(f"stream ARN {arn!r} is not a Kinesis ARN (service {service!r})")
    if not _REGION.fullmatch(arn_region):
        raise ValueError(f"stream ARN {arn!r} has a bad region {arn_region!r}")
    if not _ACCOUNT.fullmatch(account):
        raise ValueError(f"stream ARN {arn!r} has a bad account id {account!r} (12 digits)")
    kind, _, name = resource.partition("/")
    if kind != "stream" or not _STREAM_NAME.fullmatch(name):
        raise ValueError(
            f"stream ARN {arn!r} does not name a stream (expected stream/<name>, names of "
            "1-128 letters, digits, '_', '.', '-')"
        )
    if region is not None and arn_region != region:
        raise ValueError(
            f"stream ARN {arn!r} is in region {arn_region}, but the producer's client is for "
            f"{region}: pass region_name={arn_region!r} (one producer writes to one region)"
        )
    return StreamArn(arn, partition, arn_region, account, name)


def default_stream_ref(stream_name: str | None, stream_arn: str | None) -> str | None:
    """The producer's default stream from its ``stream_name`` / ``stream_arn`` (at most one),
    checked: a name non-empty, an ARN well formed (its region is checked when used)."""
    if stream_name is not None and (not isinstance(stream_name, str) or not stream_name):
        raise ValueError(f"stream_name must be a non-empty str, got {stream_name!r}")
    if stream_arn is not None:
        if stream_name is not None:
            raise ValueError("pass stream_name or stream_arn, not both")
        parse_stream_arn(stream_arn)
        return stream_arn
    if stream_name is not None and is_arn(stream_name):
        parse_stream_arn(stream_name)
    return stream_name


def arn_ref(stream_name: str | None, stream_arn: str) -> str:
    """A put's ``stream_arn`` as its stream reference (``stream_name`` must be ``None``)."""
    if stream_name is not None:
        raise ValueError("pass stream_name or stream_arn, not both")
    if not isinstance(stream_arn, str) or not stream_arn:
        raise TypeError(f"stream_arn must be a non-empty str, got {stream_arn!r}")
    return stream_arn


def name_and_arn(ref: str, region: str) -> tuple[str, str | None]:
    """A stream reference (a name, or an ARN checked against ``region``) as the stream's
    name and its ARN (``None`` for a name)."""
    if is_arn(ref):
        return parse_stream_arn(ref, region).name, ref
    return ref, None


def _malformed(what: str) -> ServiceError:
    return malformed_answer("DescribeStreamSummary", what)


@dataclass(frozen=True, slots=True)
class StreamFacts:
    """What DescribeStreamSummary says about a stream, as far as a producer cares."""

    name: str
    arn: str | None = None
    #: ``PROVISIONED`` or ``ON_DEMAND`` ("" when the answer did not say)
    mode: str = ""
    #: ``AUTO`` or ``USER_PARTITION_KEY`` (absent: ``USER_PARTITION_KEY``)
    strategy: str = USER_PARTITION_KEY
    #: the largest record the stream takes, data + partition key, in bytes
    max_record_size: int = DEFAULT_MAX_RECORD_SIZE
    channel_count: int = 0
    open_shards: int | None = None
    #: False when the facts are assumed (DescribeStreamSummary was denied)
    known: bool = True

    @classmethod
    def assumed(cls, name: str, arn: str | None = None) -> StreamFacts:
        """The facts of a stream of before 2025, for when the summary cannot be read."""
        return cls(name, arn, known=False)

    @classmethod
    def from_summary(cls, summary: Any, name: str) -> StreamFacts:
        """Read a ``StreamDescriptionSummary``. A field of the wrong type or out of the
        model's range raises :class:`~kinesis_trio.ServiceError` (``MalformedResponse``)."""
        if not isinstance(summary, Mapping):
            raise _malformed(f"it is a {type(summary).__name__}, not an object")
        got_name = summary.get("StreamName", name)
        arn = summary.get("StreamARN")
        if not isinstance(got_name, str) or not got_name:
            raise _malformed(f"StreamName {got_name!r}")
        if arn is not None and not isinstance(arn, str):
            raise _malformed(f"StreamARN {arn!r}")
        details = summary.get("StreamModeDetails")
        mode = details.get("StreamMode", "") if isinstance(details, Mapping) else ""
        if not isinstance(mode, str):
            raise _malformed(f"StreamMode {mode!r}")
        strategy = summary.get("RecordDistributionStrategy", USER_PARTITION_KEY)
        if strategy not in (AUTO, USER_PARTITION_KEY):
            raise _malformed(f"RecordDistributionStrategy {strategy!r}")
        kib = summary.get("MaxRecordSizeInKiB")
        if kib is None:
            size = DEFAULT_MAX_RECORD_SIZE
        elif (
            isinstance(kib, bool)
            or not isinstance(kib, int)
            or not MIN_RECORD_KIB <= kib <= MAX_RECORD_KIB
        ):
            raise _malformed(f"MaxRecordSizeInKiB {kib!r} (1024 to 10240)")
        else:
            size = kib * KIB
        channels = summary.get("ChannelCount", 0)
        if isinstance(channels, bool) or not isinstance(channels, int) or channels < 0:
            raise _malformed(f"ChannelCount {channels!r}")
        shards = summary.get("OpenShardCount")
        if shards is not None and (
            isinstance(shards, bool) or not isinstance(shards, int) or shards < 0
        ):
            raise _malformed(f"OpenShardCount {shards!r}")
        return cls(got_name, arn, mode, strategy, size, channels, shards)


@dataclass(frozen=True, slots=True)
class StreamPolicy:
    """What the producer does on one stream (the result of :func:`policy_for`)."""

    #: the service places the records: one buffer for the stream, no shard predicted
    auto: bool
    #: pack records into KPL aggregates
    aggregate: bool
    #: the largest record accepted (data + partition key)
    max_record_size: int
    #: why aggregation is off, or "" when it is on (or turned off by the settings)
    why_not_aggregated: str = ""
    #: a setting the stream overrides, said as a WARNING ("" when none)
    overridden: str = ""


def policy_for(
    facts: StreamFacts,
    *,
    aggregation_enabled: bool | None,
    channel_aggregation: bool,
    max_record_size: int | None,
) -> StreamPolicy:
    """The rule: the producer's settings applied to a stream's facts.

    - Aggregation is off when the settings say so; on an ``AUTO`` stream (even if
      ``aggregation_enabled=True``: said in ``overridden``); and on a stream that feeds
      channels unless ``channel_aggregation``.
    - The record limit is the stream's; a ``max_record_size`` setting can only lower it.
    """
    limit = facts.max_record_size
    if max_record_size is not None:
        limit = min(limit, max_record_size)
    auto = facts.strategy == AUTO
    if aggregation_enabled is False:
        return StreamPolicy(auto, False, limit)
    if auto:
        return StreamPolicy(
            True,
            False,
            limit,
            "the stream's RecordDistributionStrategy is AUTO: the service places each "
            "record, so an aggregate's shard cannot be predicted and KCL consumers would "
            "drop it",
            "aggregation_enabled=True is ignored on an AUTO stream" if aggregation_enabled else "",
        )
    if facts.channel_count > 0 and not channel_aggregation:
        return StreamPolicy(
            False,
            False,
            limit,
            f"the stream feeds {facts.channel_count} channel(s), which store records as "
            "they are (an aggregate would reach S3 still packed, or fail JSON/STRING "
            "validation); set channel_aggregation=True to keep it",
        )
    return StreamPolicy(False, True, limit)
