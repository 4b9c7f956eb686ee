"""The fake's streams and shards, and what changes them: creation, settings, resharding,
retention, stored records, the sequence counter and the per-shard write limits (no I/O)."""

from __future__ import annotations

import asyncio
import bisect
import math
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anyio

from ._checks import _check_channels, _check_record_kib, _check_strategy, _stream_ref
from ._model import (
    _MAX_HASH,
    _MIB,
    ACCOUNT_ID,
    REGION,
    FakeRecord,
    FakeShard,
    _arn,
    _arrival,
    _Fail,
    _seq,
)

#: Increase/DecreaseStreamRetentionPeriod: "The minimum value of a stream's retention period
#: is 24 hours", "up to a maximum value of 8760 hours (365 days)" (the API reference)
_MIN_RETENTION, _MAX_RETENTION = 24, 8760


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
    #: :meth:`routing`'s last answer, made again when its open shards change
    _routing: tuple[list[FakeShard], list[FakeShard], list[int]] | None = field(
        default=None, repr=False, compare=False
    )

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

    def routing(self) -> tuple[list[FakeShard], list[FakeShard], list[int]]:
        """Its open shards, the same in hash key order, and their starting keys: sorted
        again only when the open shards changed (a sort per request cost a stream of
        thousands of shards more than its entries)."""
        open_shards = self.open_shards()
        routing = self._routing
        if routing is None or routing[0] != open_shards:  # (compared by identity first)
            by_start = sorted(open_shards, key=_start)
            routing = self._routing = (open_shards, by_start, [s.start for s in by_start])
        return routing

    def shard(self, shard_id: str) -> FakeShard:
        for s in self.shards:
            if s.shard_id == shard_id:
                return s
        raise _Fail(
            400,
            "ResourceNotFoundException",
            f"Could not find shard {shard_id} in stream {self.name} under account {ACCOUNT_ID}.",
        )

    def add_shard(
        self,
        start: int,
        end: int,
        starting_sequence_number: str,
        parent: str | None = None,
        adjacent: str | None = None,
    ) -> FakeShard:
        """Open a shard over [start, end] under the stream's next shard id."""
        shard = FakeShard(
            f"shardId-{self.next_shard:012d}",
            start,
            end,
            parent,
            adjacent_parent_shard_id=adjacent,
            starting_sequence_number=starting_sequence_number,
        )
        self.next_shard += 1
        self.shards.append(shard)
        return shard


def _start(shard: FakeShard) -> int:
    return shard.start


@dataclass
class _Bucket:
    """A shard's token buckets: records and bytes left, as of ``time``."""

    records: float
    bytes: float
    time: float

    def take(self, rps: float, bps: float, cap: float, size: int, now: float) -> bool:
        """Refill at ``rps`` and ``bps`` (up to ``rps`` records and ``cap`` bytes) until
        ``now``; then take one record and ``size`` bytes, if the buckets hold them."""
        elapsed = max(0.0, now - self.time)
        self.records = min(rps, self.records + elapsed * rps)
        self.bytes = min(cap, self.bytes + elapsed * bps)
        self.time = now
        # a nanosecond's worth of slack absorbs float error in the clock
        if self.records + 1e-9 * rps < 1 or self.bytes + 1e-9 * bps < size:
            return False
        self.records = max(0.0, self.records - 1)
        self.bytes = max(0.0, self.bytes - size)
        return True


class _Streams:
    """The fake's streams and shards, and what changes them (no I/O)."""

    streams: dict[str, _Stream]
    #: apply the per-shard write limits (token buckets of these rates)
    enforce_limits: bool
    records_per_second: float
    bytes_per_second: float
    max_record_size: int
    _buckets: dict[tuple[str, str], _Bucket]
    _last_seq: int
    #: the account's shard quota: open shards over all streams
    shard_limit: int
    #: State changes so far (streams created, deleted, resharded or updated; records
    #: stored); reads, failed writes and DryRuns leave it as is. A server persisting the
    #: fake snapshots it when this moved since its last snapshot.
    changes: int

    if TYPE_CHECKING:  # provided by FakeKinesis
        clock_offset: float

    def __init__(
        self,
        *,
        enforce_limits: bool,
        records_per_second: float,
        bytes_per_second: float,
        max_record_size: int,
        shard_limit: int,
    ) -> None:
        if records_per_second <= 0 or bytes_per_second <= 0:
            raise ValueError("records_per_second and bytes_per_second must be > 0")
        self.streams = {}
        self.enforce_limits = enforce_limits
        self.records_per_second = records_per_second
        self.bytes_per_second = bytes_per_second
        self.max_record_size = max_record_size
        self.shard_limit = shard_limit
        self._buckets = {}
        self._last_seq = 0
        self.changes = 0
        #: each event loop that served the fake, and what its clock is shifted by
        self._clock_shifts: dict[object, float] = {}
        self._clock_last = -math.inf

    def _now(self) -> float:
        """The fake's clock: ``anyio.current_time()`` of the event loop serving it, shifted
        for a loop other than the first so that it goes on from the latest time the fake
        has seen. Each trio run has a clock of its own, started at a random offset (10,000
        to 200,000 s): a fake served by two runs in turn (two sync producers, a forked
        child's) would otherwise see time jump by up to 53 hours, trim the records stored
        from the first as past their retention, or have a busy server wait for days."""
        loop = _running_loop()
        now = anyio.current_time()
        shift = self._clock_shifts.get(loop)
        if shift is None:
            shift = 0.0 if not self._clock_shifts else self._clock_last - now
            self._clock_shifts[loop] = shift
        now += shift
        if now < self._clock_last:  # never back, even by a rounding of the shift
            return self._clock_last
        self._clock_last = now
        return now

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

    def _drop_stream(self, name: str) -> None:
        """Delete stream ``name`` (it exists), its records and its token buckets."""
        del self.streams[name]
        for key in [k for k in self._buckets if k[0] == name]:
            del self._buckets[key]
        self.changes += 1

    def _restore(self, streams: Iterable[_Stream], last_seq: int) -> None:
        """Streams loaded from saved state (their arrival times on the wall clock): this
        fake's from now on; sequence numbers go on after ``last_seq``."""
        offset = self.clock_offset
        for stream in streams:
            for shard in stream.shards:
                for record in shard.records:
                    record.arrival -= offset
            self.streams[stream.name] = stream
        self._last_seq = max(self._last_seq, last_seq)
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

    def _stream(self, body: dict[str, Any]) -> _Stream:
        """The stream a request names (``StreamName`` and/or ``StreamARN``); it must exist."""
        name = _stream_ref(body)
        if name is None:
            raise _Fail(400, "ValidationException", "StreamName or StreamARN is required")
        return self._get(name)

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
        return stream.add_shard(start, end, _seq(self._last_seq + 1), parent, adjacent)

    def _close(self, shard: FakeShard) -> None:
        shard.closed = True
        shard.ending_sequence_number = max(_seq(self._last_seq), shard.starting_sequence_number)

    def _next_seq(self) -> str:
        self._last_seq += 1
        return _seq(self._last_seq)

    def _store(self, shard: FakeShard, record: FakeRecord) -> None:
        """Append a record (numbered by :meth:`_next_seq`) to an open shard."""
        shard.records.append(record)
        self.changes += 1

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
        return bucket.take(rps, bps, cap, size, now)


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


def _even_ranges(count: int) -> list[tuple[int, int]]:
    step = (_MAX_HASH + 1) // count
    return [(i * step, _MAX_HASH if i == count - 1 else (i + 1) * step - 1) for i in range(count)]


def _running_loop() -> object:
    """The event loop running this task: trio's run (its token), or asyncio's loop (trio
    is not imported for an asyncio application: a run of it has imported it)."""
    trio = sys.modules.get("trio")
    if trio is not None:
        try:
            return trio.lowlevel.current_trio_token()
        except RuntimeError:
            pass
    return asyncio.get_running_loop()
