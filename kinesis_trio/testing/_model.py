"""The fake's model: streams, shards, records, resharding and per-shard write limits."""

from __future__ import annotations

import bisect
import math
import re
import time
from dataclasses import dataclass, field
from typing import Any

#: The account id in ARNs and throttling messages.
ACCOUNT_ID = "123456789012"
#: The region in ARNs.
REGION = "us-east-1"

#: Per-entry fault kinds: the entry fails in its slot (HTTP 200), nothing stored for it.
ENTRY_FAULTS = ("throttle_entries", "internal_failure_entries")
#: Per-request fault kinds, in the order :class:`Faults` draws them.
REQUEST_FAULTS = (
    "http_500",
    "http_503",
    "hang_before",
    "hang_after",
    "reset_before",
    "reset_after",
)
#: Faults that store the records and lose the answer: a retry may duplicate them.
AMBIGUOUS_FAULTS = frozenset({"hang_after", "reset_after"})

_MAX_HASH = (1 << 128) - 1
_MIB = 1024 * 1024
_PTE = "ProvisionedThroughputExceededException"
#: ASCII digits only (Python's ``\d`` also matches other scripts' digits; Kinesis's doesn't).
_EHK = re.compile(r"0|[1-9][0-9]{0,38}")
_TOKEN_TTL = 300.0  # seconds a ListShards NextToken stays valid
_STATUS = {"InternalFailure": 500, "ServiceUnavailable": 503}
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
#: Increase/DecreaseStreamRetentionPeriod: "The minimum value of a stream's retention period
#: is 24 hours", "up to a maximum value of 8760 hours (365 days)" (the API reference)
_MIN_RETENTION, _MAX_RETENTION = 24, 8760
#: DescribeStream and ListStreams: Limit 1 to 10000, "If you specify a value greater than
#: 100, at most 100 results are returned"
_MAX_LIMIT, _PAGE_CAP = 10_000, 100


def _arn(name: str) -> str:
    return f"arn:aws:kinesis:{REGION}:{ACCOUNT_ID}:stream/{name}"


@dataclass(slots=True)
class FakeRecord:
    """A Kinesis record as stored by the fake (``arrival``: ``anyio.current_time()``).

    ``partition_key`` is ``None`` for a record written without one (an ``AUTO`` stream).
    ``hash_key`` is the hash key that placed it: the MD5 of its partition key or its
    explicit hash key; on an ``AUTO`` stream, the starting hash key of the shard the fake
    picked.
    """

    data: bytes
    partition_key: str | None
    explicit_hash_key: str | None
    hash_key: int
    sequence_number: str
    shard_id: str
    arrival: float = 0.0


@dataclass
class FakeShard:
    """One shard of a fake stream: its hash key range [start, end], lineage and records."""

    shard_id: str
    start: int
    end: int
    parent_shard_id: str | None = None
    closed: bool = False
    records: list[FakeRecord] = field(default_factory=list)
    adjacent_parent_shard_id: str | None = None
    starting_sequence_number: str = "0" * 56
    ending_sequence_number: str | None = None

    def holds(self, hash_key: int) -> bool:
        """Whether ``hash_key`` lies in this shard's range (open or not)."""
        return self.start <= hash_key <= self.end


@dataclass
class _Stream:
    name: str
    shards: list[FakeShard]
    next_shard: int
    mode: str = "PROVISIONED"
    #: the largest record (data + UTF-8 partition key bytes) it takes, in bytes
    max_record_size: int = _MIB
    #: "USER_PARTITION_KEY" or "AUTO" (on-demand streams only; provisioned ones keep the
    #: default, which DescribeStreamSummary does not show)
    record_distribution_strategy: str = "USER_PARTITION_KEY"
    channel_count: int = 0
    #: StreamCreationTimestamp: wall-clock seconds since the epoch, fixed at creation
    created: float = 0.0
    #: RetentionPeriodHours: records older than this are trimmed (24 to 8760)
    retention_hours: int = 24
    #: when its shards were last trimmed (``anyio.current_time()``): at most once a second
    trimmed_at: float = -math.inf

    @property
    def arn(self) -> str:
        return _arn(self.name)

    @property
    def on_demand(self) -> bool:
        return self.mode == "ON_DEMAND"

    @property
    def auto(self) -> bool:
        """Records go to shards the fake picks; partition and explicit hash keys ignored."""
        return self.record_distribution_strategy == "AUTO"

    def open_shards(self) -> list[FakeShard]:
        return [s for s in self.shards if not s.closed]

    def shard(self, shard_id: str) -> FakeShard:
        for s in self.shards:
            if s.shard_id == shard_id:
                return s
        raise _Fail(
            400,
            "ResourceNotFoundException",
            f"Could not find shard {shard_id} in stream {self.name} under account {ACCOUNT_ID}.",
        )


def _arrival(record: FakeRecord) -> float:
    return record.arrival


def _astral(text: str) -> int:
    """Characters outside the Basic Multilingual Plane (two UTF-16 code units each)."""
    return 0 if text.isascii() else sum(1 for c in text if ord(c) > 0xFFFF)


@dataclass
class _Bucket:
    records: float
    bytes: float
    time: float


class _Fail(ValueError):
    """An error the fake answers with (HTTP ``status``, ``code``); a ValueError in Python."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.status, self.code, self.message = status, code, message


class _Streams:
    """The fake's streams and shards, and what changes them (no I/O)."""

    streams: dict[str, _Stream]
    records_per_second: float
    bytes_per_second: float
    max_record_size: int
    _buckets: dict[tuple[str, str], _Bucket]
    _last_seq: int
    #: the account's shard quota: open shards over all streams
    shard_limit: int
    #: State changes so far (streams created, deleted, resharded or updated; records
    #: stored): a server snapshots the fake only when this moved since its last snapshot
    changes: int

    # -- set-up and inspection ------------------------------------------------------------

    def create_stream(
        self,
        name: str,
        shard_count: int = 1,
        *,
        on_demand: bool = False,
        max_record_size_kib: int | None = None,
        record_distribution_strategy: str | None = None,
        channel_count: int = 0,
    ) -> None:
        """Create an ACTIVE stream whose shards split the hash key space evenly.

        ``max_record_size_kib``: 1024 to 10240 (``None``: the fake's ``max_record_size``).
        ``record_distribution_strategy``: ``"USER_PARTITION_KEY"`` (the default) or
        ``"AUTO"``, on-demand streams only (CreateStreamInput: "only supported for streams
        that use the on-demand capacity mode").
        """
        if name in self.streams:
            raise _Fail(400, "ResourceInUseException", f"Stream {name} already exists.")
        if shard_count < 1:
            raise _Fail(400, "ValidationException", "ShardCount must be at least 1")
        self._check_shard_limit(shard_count)
        if max_record_size_kib is None:
            size = self.max_record_size
        else:
            size = _check_record_kib(max_record_size_kib) * 1024
        stream = _Stream(
            name,
            [],
            0,
            "ON_DEMAND" if on_demand else "PROVISIONED",
            max_record_size=size,
            created=round(time.time(), 3),
        )
        if record_distribution_strategy is not None:
            _set_strategy(stream, record_distribution_strategy)
        stream.channel_count = _check_channels(channel_count)
        for start, end in _even_ranges(shard_count):
            self._open(stream, start, end)
        self.streams[name] = stream
        self.changes += 1

    def stream_arn(self, name: str) -> str:
        """The ARN of stream ``name`` in the fake's region and account (it need not exist)."""
        return _arn(name)

    def update_max_record_size(self, name: str, kib: int) -> None:
        """Set the stream's max record size (1024 to 10240 KiB), at once (UpdateMaxRecordSize)."""
        stream = self._get(name)
        stream.max_record_size = _check_record_kib(kib) * 1024
        self.changes += 1

    def update_record_distribution_strategy(self, name: str, strategy: str) -> None:
        """Switch an on-demand stream to ``"AUTO"`` or ``"USER_PARTITION_KEY"``.

        Takes effect for the next request; stored records stay where they are. A
        provisioned stream: ``InvalidArgumentException``; another value:
        ``ValidationException`` (UpdateStreamRecordDistributionStrategy).
        """
        _check_strategy(strategy)
        _set_strategy(self._get(name), strategy)
        self.changes += 1

    def set_channel_count(self, name: str, n: int) -> None:
        """Set the ``ChannelCount`` DescribeStreamSummary reports (0 to 1,000,000)."""
        self._get(name).channel_count = _check_channels(n)
        self.changes += 1

    def open_shards(self, name: str) -> list[FakeShard]:
        """The stream's open shards, in hash key order."""
        return sorted(self._get(name).open_shards(), key=lambda s: s.start)

    def records(self, name: str) -> list[FakeRecord]:
        """Every record written to the stream, across shards."""
        return [r for s in self._get(name).shards for r in s.records]

    # -- resharding -------------------------------------------------------------------------

    def split_shard(
        self, name: str, shard_id: str, new_starting_hash_key: int
    ) -> tuple[FakeShard, FakeShard]:
        """Close open shard ``shard_id``; open children [start, key - 1] and [key, end]."""
        stream = self._get(name)
        parent = self._open_shard(stream, shard_id)
        if not parent.start < new_starting_hash_key <= parent.end:
            raise _Fail(
                400,
                "InvalidArgumentException",
                f"NewStartingHashKey {new_starting_hash_key} must lie in "
                f"({parent.start}, {parent.end}] for shard {shard_id}",
            )
        self._check_shard_limit(1)  # two children for one parent
        self._close(parent)
        low = self._open(stream, parent.start, new_starting_hash_key - 1, parent.shard_id)
        high = self._open(stream, new_starting_hash_key, parent.end, parent.shard_id)
        self.changes += 1
        return low, high

    def merge_shards(
        self, name: str, shard_to_merge: str, adjacent_shard_to_merge: str
    ) -> FakeShard:
        """Close two adjacent open shards; open one child covering both ranges.

        The child's ``parent_shard_id`` is ``shard_to_merge``, its
        ``adjacent_parent_shard_id`` is ``adjacent_shard_to_merge``.
        """
        stream = self._get(name)
        first = self._open_shard(stream, shard_to_merge)
        second = self._open_shard(stream, adjacent_shard_to_merge)
        if first is second or not (first.end + 1 == second.start or second.end + 1 == first.start):
            raise _Fail(
                400,
                "InvalidArgumentException",
                f"Shards {shard_to_merge} and {adjacent_shard_to_merge} in stream {name} "
                f"under account {ACCOUNT_ID} are not adjacent.",
            )
        self._close(first)
        self._close(second)
        child = self._open(
            stream,
            min(first.start, second.start),
            max(first.end, second.end),
            first.shard_id,
            second.shard_id,
        )
        self.changes += 1
        return child

    def update_shard_count(self, name: str, target_shard_count: int) -> list[FakeShard]:
        """UNIFORM_SCALING, simplified: close every open shard; open ``target`` even shards.

        Kinesis gets there by splits and merges; the fake does it in one step. Each child's
        ``parent_shard_id`` is the old shard holding its starting hash key and its
        ``adjacent_parent_shard_id`` the one holding its ending hash key, if different.
        Like Kinesis, the target must lie within half and double the open shard count.
        """
        stream = self._get(name)
        old = sorted(stream.open_shards(), key=lambda s: s.start)
        if not len(old) / 2 <= target_shard_count <= len(old) * 2 or target_shard_count < 1:
            raise _Fail(
                400,
                "LimitExceededException",
                f"UpdateShardCount cannot scale from {len(old)} open shards to "
                f"{target_shard_count}: stay within half and double the current count.",
            )
        self._check_shard_limit(target_shard_count - len(old))
        for shard in old:
            self._close(shard)
        children = []
        for start, end in _even_ranges(target_shard_count):
            parent = next(s for s in old if s.holds(start))
            adjacent = next(s for s in old if s.holds(end))
            children.append(
                self._open(
                    stream,
                    start,
                    end,
                    parent.shard_id,
                    adjacent.shard_id if adjacent is not parent else None,
                )
            )
        self.changes += 1
        return children

    # -- retention ---------------------------------------------------------------------------

    def set_retention(self, name: str, hours: int, *, increase: bool) -> None:
        """Increase/DecreaseStreamRetentionPeriod: ``hours`` within 24 to 8760, not below
        the current period when increasing, not above it when decreasing. Records already
        trimmed stay gone; a shorter period trims at the next access."""
        stream = self._get(name)
        if hours < _MIN_RETENTION:
            raise _Fail(
                400,
                "InvalidArgumentException",
                f"Minimum allowed retention period is {_MIN_RETENTION} hours. Requested "
                f"retention period ({hours} hours) is too short.",
            )
        if hours > _MAX_RETENTION:
            raise _Fail(
                400,
                "InvalidArgumentException",
                f"Maximum allowed retention period is {_MAX_RETENTION} hours. Requested "
                f"retention period ({hours} hours) is too long.",
            )
        current = stream.retention_hours
        if increase and hours < current:
            raise _Fail(
                400,
                "InvalidArgumentException",
                f"Requested retention period ({hours} hours) for stream {name} can not be "
                f"shorter than existing retention period ({current} hours). Use "
                "DecreaseStreamRetentionPeriod API.",
            )
        if not increase and hours > current:
            raise _Fail(
                400,
                "InvalidArgumentException",
                f"Requested retention period ({hours} hours) for stream {name} can not be "
                f"longer than existing retention period ({current} hours). Use "
                "IncreaseStreamRetentionPeriod API.",
            )
        stream.retention_hours = hours
        stream.trimmed_at = -math.inf  # a shorter period applies at the next access
        self.changes += 1

    def _expire(self, stream: _Stream, now: float) -> None:
        """Trim the records older than the stream's retention period from its shards (at
        most once a second: a record is gone within a second of expiring)."""
        if now - stream.trimmed_at < 1.0:
            return
        stream.trimmed_at = now
        cutoff = now - stream.retention_hours * 3600.0
        for shard in stream.shards:
            records = shard.records
            if records and records[0].arrival < cutoff:
                del records[: bisect.bisect_left(records, cutoff, key=_arrival)]
                self.changes += 1

    # -- internals ----------------------------------------------------------------------------

    def _check_shard_limit(self, added: int) -> None:
        """``LimitExceededException`` if ``added`` more open shards pass the shard quota."""
        if added <= 0:
            return
        current = sum(len(s.open_shards()) for s in self.streams.values())
        if current + added > self.shard_limit:
            raise _Fail(
                400,
                "LimitExceededException",
                f"This request would exceed the shard limit for the account {ACCOUNT_ID} in "
                f"{REGION}. Current shard count for the account: {current}. Limit: "
                f"{self.shard_limit}. Number of additional shards that would have resulted "
                f"from this request: {added}.",
            )

    def _get(self, name: str) -> _Stream:
        stream = self.streams.get(name)
        if stream is None:
            raise _Fail(
                400,
                "ResourceNotFoundException",
                f"Stream {name} under account {ACCOUNT_ID} not found.",
            )
        return stream

    def _open_shard(self, stream: _Stream, shard_id: str) -> FakeShard:
        shard = stream.shard(shard_id)
        if shard.closed:
            raise _Fail(
                400,
                "InvalidArgumentException",
                f"Shard {shard_id} in stream {stream.name} under account {ACCOUNT_ID} "
                "has already been merged or split, and thus is not eligible for merging "
                "or splitting.",
            )
        return shard

    def _open(
        self,
        stream: _Stream,
        start: int,
        end: int,
        parent: str | None = None,
        adjacent: str | None = None,
    ) -> FakeShard:
        shard = FakeShard(
            f"shardId-{stream.next_shard:012d}",
            start,
            end,
            parent,
            adjacent_parent_shard_id=adjacent,
            starting_sequence_number=_seq(self._last_seq + 1),
        )
        stream.next_shard += 1
        stream.shards.append(shard)
        return shard

    def _close(self, shard: FakeShard) -> None:
        shard.closed = True
        shard.ending_sequence_number = max(_seq(self._last_seq), shard.starting_sequence_number)

    def _next_seq(self) -> str:
        self._last_seq += 1
        return _seq(self._last_seq)

    def _take_tokens(self, stream: _Stream, shard: FakeShard, size: int, now: float) -> bool:
        """Take one record and ``size`` bytes from the shard's buckets, if they hold them.

        The bytes bucket holds max(bytes_per_second, the stream's max record size), so one
        record of the largest size passes a full bucket ("can burst up to 10 MiB while
        averaging 1 MiB per second", AWS developer guide, large records); it refills at
        bytes_per_second. The records bucket holds one second's worth.
        """
        rps, bps = float(self.records_per_second), float(self.bytes_per_second)
        cap = max(bps, float(stream.max_record_size))
        bucket = self._buckets.get((stream.name, shard.shard_id))
        if bucket is None:
            bucket = self._buckets[stream.name, shard.shard_id] = _Bucket(rps, cap, now)
        else:
            elapsed = max(0.0, now - bucket.time)
            bucket.records = min(rps, bucket.records + elapsed * rps)
            bucket.bytes = min(cap, bucket.bytes + elapsed * bps)
            bucket.time = now
        # a nanosecond's worth of slack absorbs float error in the clock
        if bucket.records + 1e-9 * rps < 1 or bucket.bytes + 1e-9 * bps < size:
            return False
        bucket.records = max(0.0, bucket.records - 1)
        bucket.bytes = max(0.0, bucket.bytes - size)
        return True


#: Sequence numbers are 56 digits without a leading zero (SequenceNumber's pattern
#: ``^(0|([1-9]\d{0,128}))$``; Kinesis' own look like ``4959...``): this base plus a counter,
#: so their string order is their numeric order.
_SEQ_BASE = 49 * 10**54


def _seq(counter: int) -> str:
    """The sequence number of the ``counter``-th record the fake stored."""
    return str(_SEQ_BASE + counter)


def _seq_counter(sequence_number: str) -> int:
    """The counter behind a sequence number of :func:`_seq` (below 0 for smaller ones)."""
    return int(sequence_number) - _SEQ_BASE


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


def _set_strategy(stream: _Stream, strategy: str) -> None:
    _check_strategy(strategy)
    if not stream.on_demand:
        raise _Fail(
            400,
            "InvalidArgumentException",
            f"Stream {stream.name} under account {ACCOUNT_ID} uses the provisioned capacity "
            "mode, which does not support the record distribution strategy setting.",
        )
    stream.record_distribution_strategy = strategy


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


def _even_ranges(count: int) -> list[tuple[int, int]]:
    step = (_MAX_HASH + 1) // count
    return [(i * step, _MAX_HASH if i == count - 1 else (i + 1) * step - 1) for i in range(count)]


def _hash_range(shard: FakeShard) -> dict[str, str]:
    return {"StartingHashKey": str(shard.start), "EndingHashKey": str(shard.end)}


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
