"""Shard maps: which open shard holds a hash key (pure, no I/O)."""

from __future__ import annotations

import hashlib
import itertools
import re
from bisect import bisect_right
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["MAX_HASH_KEY", "Shard", "ShardMap", "hash_key_for", "parse_explicit_hash_key"]

MAX_HASH_KEY = (1 << 128) - 1
#: ASCII digits only: ``\d`` would also accept other scripts' digits, which Kinesis rejects.
_EHK_RE = re.compile(r"0|[1-9][0-9]{0,38}")


def hash_key_for(partition_key: str) -> int:
    """The 128-bit hash key Kinesis derives from a partition key (MD5, big-endian)."""
    return int.from_bytes(hashlib.md5(partition_key.encode("utf-8")).digest(), "big")


def parse_explicit_hash_key(value: str) -> int:
    """Validate an ExplicitHashKey string and return its value.

    Raises ``TypeError`` for a non-string and ``ValueError`` naming the problem otherwise.
    """
    if not isinstance(value, str):
        raise TypeError(f"explicit_hash_key must be a decimal str, got {type(value).__name__}")
    if _EHK_RE.fullmatch(value) is None:
        raise ValueError(
            f"explicit_hash_key must be a decimal integer string without sign or leading "
            f"zeros, got {value[:60]!r}"
        )
    number = int(value)
    if number > MAX_HASH_KEY:
        raise ValueError(f"explicit_hash_key must be at most 2**128 - 1, got {value!r}")
    return number


@dataclass(frozen=True, slots=True)
class Shard:
    """One shard's id and inclusive hash key range."""

    shard_id: str
    start: int
    end: int
    parent_shard_id: str | None = None
    adjacent_parent_shard_id: str | None = None

    def holds(self, hash_key: int) -> bool:
        return self.start <= hash_key <= self.end

    @classmethod
    def from_api(cls, shard: Mapping[str, Any]) -> Shard:
        """Build from a ListShards ``Shards`` entry."""
        rng = shard["HashKeyRange"]
        return cls(
            shard_id=shard["ShardId"],
            start=int(rng["StartingHashKey"]),
            end=int(rng["EndingHashKey"]),
            parent_shard_id=shard.get("ParentShardId"),
            adjacent_parent_shard_id=shard.get("AdjacentParentShardId"),
        )


class ShardMap:
    """The open shards of a stream, sorted by range, looked up by bisection."""

    __slots__ = ("_by_id", "_ends", "_starts", "shards")

    def __init__(self, shards: Iterable[Shard]) -> None:
        ordered = sorted(shards, key=lambda s: s.start)
        if not ordered:
            raise ValueError("a shard map needs at least one open shard")
        for left, right in itertools.pairwise(ordered):
            if right.start <= left.end:
                raise ValueError(
                    f"overlapping shards {left.shard_id} and {right.shard_id}: "
                    "pass only open shards"
                )
        self.shards: tuple[Shard, ...] = tuple(ordered)
        self._starts = [s.start for s in ordered]
        self._ends = [s.end for s in ordered]
        self._by_id = {s.shard_id: s for s in ordered}

    @classmethod
    def from_api(cls, shards: Iterable[Mapping[str, Any]]) -> ShardMap:
        """Build from ListShards entries, keeping only open shards (no EndingSequenceNumber;
        some emulators send it as null)."""
        return cls(
            Shard.from_api(s)
            for s in shards
            if (s.get("SequenceNumberRange") or {}).get("EndingSequenceNumber") is None
        )

    def index_for(self, hash_key: int) -> int:
        """Index in :attr:`shards` of the shard holding ``hash_key``; -1 if none does."""
        i = bisect_right(self._starts, hash_key) - 1
        if i < 0 or hash_key > self._ends[i]:
            return -1
        return i

    def shard_for(self, hash_key: int) -> Shard | None:
        i = self.index_for(hash_key)
        return None if i < 0 else self.shards[i]

    def get(self, shard_id: str) -> Shard | None:
        return self._by_id.get(shard_id)

    def __len__(self) -> int:
        return len(self.shards)

    def __repr__(self) -> str:
        return f"<ShardMap {len(self.shards)} open shards>"
