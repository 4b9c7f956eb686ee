"""Reading a stream back (``kinesis-trio tail``): the decisions, without I/O.

- :class:`ShardLineage`: which shards to read and when. A child shard starts only after
  every parent it has (``ParentShardId``, ``AdjacentParentShardId``) was read to its end,
  as the KCL does, so records of one key come out in the order they were written.
- :class:`ReadPacer`: when a shard's next GetRecords may go. The service allows five calls
  per second and 2 MiB per second per shard: a call at ``t`` that returned ``b`` bytes
  lets the next one go at ``t + max(0.2, b / 2 MiB)``; a throttled call backs off
  exponentially; an empty page at the end of the shard waits the idle interval.
- :func:`split_record`: one Kinesis record into its user records, with the KCL's rule for
  KPL aggregates (``AggregatorUtil.deaggregate``): an aggregate holding a member whose hash
  key is outside the shard's range is dropped whole.

Nothing here awaits or reads the clock: ``now`` is an argument.
"""

from __future__ import annotations

import datetime
import random
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from .._backoff import backoff_delay
from .._core import UserRecord, deaggregate, hash_key_for
from .._errors import malformed_answer

__all__ = [
    "BYTES_PER_SECOND",
    "CALLS_PER_SECOND",
    "Page",
    "ReadPacer",
    "ShardInfo",
    "ShardLineage",
    "Split",
    "parse_timestamp",
    "read_page",
    "split_record",
]

CALLS_PER_SECOND = 5
"""GetRecords calls a shard allows per second."""
BYTES_PER_SECOND = 2 * 1024 * 1024
"""Bytes a shard's GetRecords may return per second."""


# -- shards and their lineage ----------------------------------------------------------------


@dataclass(frozen=True)
class ShardInfo:
    """A shard as ListShards describes it: its id, parents, hash key range, and whether it
    is closed (it has an ``EndingSequenceNumber``)."""

    shard_id: str
    parents: tuple[str, ...]
    start: int
    end: int
    closed: bool

    @classmethod
    def from_api(cls, shard: Any) -> ShardInfo:
        """From one entry of a ListShards answer; a malformed entry raises ``ServiceError``
        (``MalformedResponse``, not from the service: retried)."""
        try:
            parents = tuple(
                str(p)
                for p in (shard.get("ParentShardId"), shard.get("AdjacentParentShardId"))
                if p
            )
            keys = shard.get("HashKeyRange") or {}
            seq = shard.get("SequenceNumberRange") or {}
            shard_id = shard["ShardId"]
            start = _hash_key(keys.get("StartingHashKey", 0))
            end = _hash_key(keys.get("EndingHashKey", (1 << 128) - 1))
            closed = seq.get("EndingSequenceNumber") is not None
        except (AttributeError, KeyError, TypeError, ValueError):
            raise malformed_answer("ListShards", "a shard entry that cannot be read") from None
        if type(shard_id) is not str:
            raise malformed_answer("ListShards", "a shard id that is not a string")
        return cls(shard_id, parents, start, end, closed)

    def holds(self, hash_key: int) -> bool:
        """Whether ``hash_key`` lies in [start, end]."""
        return self.start <= hash_key <= self.end


@dataclass
class ShardLineage:
    """Which shards to read, in the KCL's order: parents before children.

    ``begin="all"`` reads every shard (TRIM_HORIZON, AT_TIMESTAMP): the shards with no
    known parent first. ``begin="open"`` (LATEST) reads the shards open at the first
    :meth:`update`; the shards closed then count as read. ``only`` restricts the reading
    to one shard (``--shard``): its children are never started.

    A shard is *started* once :meth:`ready` has returned it and *finished* once
    :meth:`finish` was called for it (read to the end of a closed shard). A child is
    ready when every parent is finished or unknown (trimmed from the stream).
    """

    begin: Literal["all", "open"] = "all"
    only: str | None = None
    shards: dict[str, ShardInfo] = field(default_factory=dict)
    started: set[str] = field(default_factory=set)
    finished: set[str] = field(default_factory=set)
    _updated: bool = False

    def update(self, shards: Iterable[ShardInfo]) -> None:
        """Learn the shards of a ListShards answer (all of them, open and closed)."""
        first = not self._updated
        self._updated = True
        for shard in shards:
            known = self.shards.get(shard.shard_id)
            self.shards[shard.shard_id] = shard
            if known is None and first and self.begin == "open" and shard.closed:
                self.finished.add(shard.shard_id)
                self.started.add(shard.shard_id)

    def ready(self) -> list[str]:
        """The shards to start now (marked started), in shard id order."""
        out: list[str] = []
        for shard_id in sorted(self.shards):
            if shard_id in self.started:
                continue
            if self.only is not None and shard_id != self.only:
                continue
            shard = self.shards[shard_id]
            if self.only is None and not all(
                p in self.finished or p not in self.shards for p in shard.parents
            ):
                continue
            self.started.add(shard_id)
            out.append(shard_id)
        return out

    def finish(self, shard_id: str) -> None:
        """``shard_id`` was read to its end (GetRecords gave no next iterator)."""
        self.finished.add(shard_id)

    def waiting(self) -> list[str]:
        """Known shards not started yet (children of shards still being read)."""
        if self.only is not None:
            return [s for s in (self.only,) if s in self.shards and s not in self.started]
        return sorted(s for s in self.shards if s not in self.started)


def _hash_key(value: Any) -> int:
    """A hash key of a ListShards answer: a decimal string (or int) of at most 39 digits."""
    text = str(value) if type(value) in (str, int) else ""
    if not text.isdigit() or len(text) > 39:
        raise ValueError("not a hash key")
    return int(text)


# -- pacing ------------------------------------------------------------------------------------


@dataclass
class ReadPacer:
    """When one shard's next GetRecords may go (times in seconds, ``now`` passed in).

    ``next_at`` starts at 0 (at once). After a call that returned ``nbytes``: not before
    ``now + max(1 / CALLS_PER_SECOND, nbytes / BYTES_PER_SECOND)``; after an empty page at
    the shard's end (``idle``): not before ``now + idle_interval`` either. A failed call
    (throttled, or an error worth another try) waits the package's one backoff
    (:func:`~kinesis_trio._backoff.backoff_delay`: full jitter under ``backoff_base * 2 **
    (n - 1)`` for the n-th failure in a row, capped at ``backoff_max``), and never less
    than the call rate allows; a successful call resets the count.
    """

    idle_interval: float = 1.0
    backoff_base: float = 0.5
    backoff_max: float = 10.0
    next_at: float = 0.0
    throttles: int = 0
    rand: random.Random = field(default_factory=random.Random, repr=False)

    def delay(self, now: float) -> float:
        """Seconds to wait before the next call (0: go now)."""
        return max(0.0, self.next_at - now)

    def answered(self, now: float, nbytes: int, *, idle: bool = False) -> None:
        """A call started at ``now`` returned ``nbytes`` of record data."""
        self.throttles = 0
        gap = max(1.0 / CALLS_PER_SECOND, nbytes / BYTES_PER_SECOND)
        if idle:
            gap = max(gap, self.idle_interval)
        self.next_at = now + gap

    def throttled(self, now: float) -> float:
        """A call was throttled at ``now``: back off; returns the wait."""
        self.throttles += 1
        wait = backoff_delay(
            self.throttles, base=self.backoff_base, cap=self.backoff_max, rand=self.rand
        )
        wait = max(wait, 1.0 / CALLS_PER_SECOND)
        self.next_at = now + wait
        return wait


# -- a GetRecords answer ------------------------------------------------------------------------


@dataclass(frozen=True)
class Page:
    """A GetRecords answer, checked: ``records`` are objects with string ``Data``,
    ``PartitionKey`` and ``SequenceNumber``; ``next_iterator`` is a string or ``None`` (the
    shard is closed and read to its end); ``behind`` is ``MillisBehindLatest`` (``None``
    when not given)."""

    records: list[dict[str, Any]]
    next_iterator: str | None
    behind: int | None


def read_page(answer: Mapping[str, Any]) -> Page:
    """Check a GetRecords answer; a malformed one raises ``ServiceError``
    (``MalformedResponse``, not from the service: read again after a backoff)."""
    records = answer.get("Records")
    if records is None:
        records = []
    if type(records) is not list:
        raise malformed_answer("GetRecords", "Records is not a list")
    for record in records:
        if type(record) is not dict or not all(
            type(record.get(name)) is str for name in ("Data", "PartitionKey", "SequenceNumber")
        ):
            raise malformed_answer(
                "GetRecords", "a record without a string Data, PartitionKey or SequenceNumber"
            )
    iterator = answer.get("NextShardIterator")
    if iterator is not None and type(iterator) is not str:
        raise malformed_answer("GetRecords", "NextShardIterator is not a string")
    behind = answer.get("MillisBehindLatest")
    if behind is not None and (type(behind) is not int or behind < 0):
        raise malformed_answer("GetRecords", "MillisBehindLatest is not a count of milliseconds")
    return Page(records, iterator or None, behind)


# -- de-aggregation with the shard's range ----------------------------------------------------

_JAVA_INTEGER = re.compile(r"[+-]?[0-9]+")


def _effective_hash_key(record: UserRecord) -> int | None:
    """The member's hash key as the KCL computes it (``None``: its explicit hash key is not
    an integer, which the KCL reports as an error)."""
    if record.explicit_hash_key is None:
        return hash_key_for(record.partition_key)
    if _JAVA_INTEGER.fullmatch(record.explicit_hash_key) is None:
        return None
    return int(record.explicit_hash_key)


@dataclass(frozen=True)
class Split:
    """The user records of one Kinesis record, and why members were dropped (``None``:
    none were)."""

    records: list[UserRecord]
    dropped: str | None = None


def split_record(
    data: bytes,
    partition_key: str | None,
    sequence_number: str | None,
    shard: ShardInfo,
) -> Split:
    """De-aggregate one Kinesis record read from ``shard``, with the KCL's rules.

    A record that is not a valid KPL aggregate (no magic, bad MD5, unparsable) is one
    user record, unchecked. For an aggregate, each member's effective hash key (its explicit
    hash key, else the MD5 of its partition key) must be in the shard's range: at the first
    member outside it, the whole aggregate is dropped (the KCL removes the members it
    already emitted). A member whose explicit hash key is not an integer ends the aggregate
    there: the members before it are kept, the rest dropped (the KCL logs the exception).
    """
    members = deaggregate(data, partition_key, sequence_number=sequence_number)
    if not members or not members[0].aggregated:
        return Split(members)
    for index, member in enumerate(members):
        key = _effective_hash_key(member)
        if key is None:
            return Split(
                members[:index],
                f"member {index} has an explicit hash key that is not an integer "
                f"({member.explicit_hash_key!r}): it and the {len(members) - index - 1} "
                "after it dropped",
            )
        if not shard.holds(key):
            return Split(
                [],
                f"member {index} of {len(members)} has hash key {key}, outside the shard's "
                f"range [{shard.start}, {shard.end}]: the whole aggregate dropped",
            )
    return Split(members)


# -- options ------------------------------------------------------------------------------------


def parse_timestamp(text: str) -> float:
    """Epoch seconds from ``text``: a number of seconds since the epoch, or ISO 8601
    (``2026-11-25T10:00:00Z``, ``2026-11-25 10:00:00+01:00``; no zone means UTC).
    ``ValueError`` otherwise."""
    value = text.strip()
    try:
        seconds = float(value)
    except ValueError:
        pass
    else:
        if seconds != seconds or seconds in (float("inf"), float("-inf")) or seconds < 0:
            raise ValueError(f"not a time: {text!r}")
        return seconds
    if value.endswith(("Z", "z")):
        value = value[:-1] + "+00:00"
    try:
        moment = datetime.datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(
            f"not a time (ISO 8601 like 2026-11-25T10:00:00Z, or epoch seconds): {text!r}"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=datetime.timezone.utc)
    return moment.timestamp()
