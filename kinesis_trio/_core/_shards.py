"""Shard maps: which open shard holds a hash key (pure, no I/O)."""

from __future__ import annotations

import hashlib
import itertools
import re
from bisect import bisect_right
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from .._errors import ServiceError, malformed_answer

__all__ = ["MAX_HASH_KEY", "Shard", "ShardMap", "hash_key_for", "parse_explicit_hash_key"]

MAX_HASH_KEY = (1 << 128) - 1
#: ASCII digits only: ``\d`` would also accept other scripts' digits, which Kinesis rejects.
_EHK_RE = re.compile(r"0|[1-9][0-9]{0,38}")


def _malformed(what: str) -> ServiceError:
    return malformed_answer("ListShards", what)


def _preview(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 120 else text[:117] + "..."


def _hash_key(value: object, shard_id: str, field: str) -> int:
    if isinstance(value, str) and value.isascii() and value.isdigit() and len(value) <= 39:
        number = int(value)
        if number <= MAX_HASH_KEY:
            return number
    raise _malformed(f"shard {shard_id} has a bad {field}: {_preview(value)}")


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
        """Build from a ListShards ``Shards`` entry.

        A malformed entry raises :class:`~kinesis_trio.ServiceError` (``MalformedResponse``)
        naming what is wrong.
        """
        if not isinstance(shard, Mapping):
            raise _malformed(f"a shard is a {type(shard).__name__}, not an object")
        shard_id = shard.get("ShardId")
        if not isinstance(shard_id, str) or not shard_id:
            raise _malformed(f"a shard has no ShardId: {_preview(shard)}")
        rng = shard.get("HashKeyRange")
        if not isinstance(rng, Mapping):
            raise _malformed(f"shard {shard_id} has no HashKeyRange")
        start = _hash_key(rng.get("StartingHashKey"), shard_id, "StartingHashKey")
        end = _hash_key(rng.get("EndingHashKey"), shard_id, "EndingHashKey")
        if start > end:
            raise _malformed(f"shard {shard_id} has a hash key range that ends before it starts")
        parent = shard.get("ParentShardId")
        adjacent = shard.get("AdjacentParentShardId")
        return cls(
            shard_id=shard_id,
            start=start,
            end=end,
            parent_shard_id=parent if isinstance(parent, str) else None,
            adjacent_parent_shard_id=adjacent if isinstance(adjacent, str) else None,
        )


class ShardMap:
    """The open shards of a stream, sorted by range, looked up by bisection."""

    __slots__ = ("_by_id", "ends", "shards", "starts")

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
        #: the shards' first and last hash keys, in order (for inline bisection)
        self.starts = [s.start for s in ordered]
        self.ends = [s.end for s in ordered]
        self._by_id = {s.shard_id: s for s in ordered}

    @classmethod
    def from_api(cls, shards: Iterable[Mapping[str, Any]]) -> ShardMap:
        """Build from ListShards entries, keeping only open shards (no EndingSequenceNumber;
        some emulators send it as null).

        A malformed answer (an entry that is not a shard, no open shard, overlapping open
        shards) raises :class:`~kinesis_trio.ServiceError` (``MalformedResponse``).
        """
        open_shards = []
        for entry in shards:
            shard = Shard.from_api(entry)  # checks that entry is a mapping
            numbers = entry.get("SequenceNumberRange")
            if not isinstance(numbers, Mapping) or numbers.get("EndingSequenceNumber") is None:
                open_shards.append(shard)
        try:
            return cls(open_shards)
        except ValueError as exc:
            raise _malformed(str(exc)) from None

    def index_for(self, hash_key: int) -> int:
        """Index in :attr:`shards` of the shard holding ``hash_key``; -1 if none does."""
        i = bisect_right(self.starts, hash_key) - 1
        if i < 0 or hash_key > self.ends[i]:
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
