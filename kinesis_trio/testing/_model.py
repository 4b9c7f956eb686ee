"""The fake's vocabulary: its account and region, fault kinds, records, shards, sequence
numbers and the error it answers with."""

from __future__ import annotations

from dataclasses import dataclass, field

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
_STATUS = {"InternalFailure": 500, "ServiceUnavailable": 503}


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


def _arrival(record: FakeRecord) -> float:
    return record.arrival


class _Fail(ValueError):
    """An error the fake answers with (HTTP ``status``, ``code``); a ValueError in Python."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.status, self.code, self.message = status, code, message


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


def _hash_range(shard: FakeShard) -> dict[str, str]:
    return {"StartingHashKey": str(shard.start), "EndingHashKey": str(shard.end)}
