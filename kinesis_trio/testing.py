"""A fake Kinesis, in memory, for your own tests: point a Producer at it; no sockets needed.

Point a Producer at it
======================

::

    from kinesis_trio import Producer, StaticCredentials
    from kinesis_trio.testing import FakeKinesis, Faults

    fake = FakeKinesis(enforce_limits=True)
    fake.create_stream("orders", shard_count=4)
    async with Producer("orders", region_name="us-east-1", endpoint_url="http://fake",
                        credentials=StaticCredentials("k", "s"),
                        transport=fake.transport()) as producer:
        outcome = await producer.put(b"data", "partition-key")
    assert (await outcome.wait()).ok
    assert len(fake.records("orders")) == 1

The fake speaks Kinesis' JSON 1.1 protocol (``X-Amz-Target: Kinesis_20131202.<Op>``; an
``Authorization`` header is required, any value passes) through an ``httpx.MockTransport``:
PutRecords, ListShards, DescribeStreamSummary, CreateStream, DeleteStream, SplitShard,
MergeShards, UpdateShardCount, GetShardIterator and GetRecords. It routes every PutRecords
entry to the open shard whose hash key range holds the entry's explicit hash key (or the MD5
of its partition key), answers entries in request order, and validates entries and requests
like Kinesis (1 to 500 entries, partition keys of 1 to 256 characters counted in UTF-16
code units, explicit hash keys in ASCII digits, 1 MiB records, 5 MiB requests). It runs
inside the event loop, on trio or asyncio, and reads time only with ``anyio.current_time()``.

Per-shard write limits
======================

``FakeKinesis(enforce_limits=True, records_per_second=1000, bytes_per_second=1_048_576)``
gives every shard a token bucket refilled continuously at those rates, holding at most one
second's worth and starting full. An entry that finds too few tokens (one record, and its
data plus UTF-8 partition key bytes) fails in its slot with
``ProvisionedThroughputExceededException`` (HTTP 200, counted in ``FailedRecordCount``) and is
not stored; the other entries of the request go on. ``fake.stats`` (:class:`FakeStats`)
counts requests, entries and, per shard, accepted records and bytes with the first and last
accept time, to compute achieved rates.

Faults on demand
================

``fake.faults = Faults(http_500=0.05, reset_after=0.01, throttle_entries=0.1, seed=7)``
injects faults at random (per PutRecords request, or per entry for ``*_entries``) from
``fake.rng``, a ``random.Random(seed)``, so a run is reproducible;
``fake.fail_next(3, "hang_after")`` injects one kind (or an error code such as
``"ExpiredTokenException"``) into the next PutRecords requests; ``Faults(fatal={"audit":
"AccessDeniedException"})`` fails every write to a stream. See :class:`Faults` for what each
kind stores and what the client sees. The hang kinds never answer: the client's timeout (the
Producer's ``request_timeout``) ends them. Request-level faults are logged in
``fake.fault_events`` (:class:`FaultEvent`); those whose records were stored but whose
answer was lost (``hang_after``, ``reset_after``) are ``fake.ambiguous_requests``, and only
the records they name may legitimately be duplicated by a producer's retry::

    confirmed = {(r.shard_id, r.sequence_number) for r in results}
    stored = {(r.shard_id, r.sequence_number) for r in fake.records("orders")}
    lost_answers = {e for event in fake.ambiguous_requests for e in event.entries}
    assert confirmed <= stored and stored - confirmed <= lost_answers

For anything else, ``FakeKinesis(hook=...)`` takes an async ``(operation, body)`` callable
that may sleep, or return an ``httpx.Response`` to answer in the fake's place.

Resharding
==========

``fake.split_shard``, ``fake.merge_shards`` and ``fake.update_shard_count`` (or the API
operations SplitShard, MergeShards, UpdateShardCount) take effect at once (no ``UPDATING``
phase): parents close, keep their records, show an ``EndingSequenceNumber`` in ListShards
and take no more writes; writes go to the open children. UpdateShardCount is simplified:
every open shard closes and ``TargetShardCount`` evenly split children open (Kinesis gets
there by a series of splits and merges). Every shard, open or closed, stays in
``fake.streams[name].shards``. ListShards pages (``MaxResults``, default 1000; a follow-up
sends only ``NextToken``, which expires after 300 s) and honours ``ShardFilter`` type
``AT_LATEST`` (open shards only; otherwise all shards).

Virtual time
============

The fake waits only with ``anyio.sleep`` and reads only ``anyio.current_time()``, so under
trio's ``MockClock(autojump_threshold=0)`` an hour of throttling, backoff, latency and hung
requests takes seconds of real time. With the anyio pytest plugin::

    import pytest
    from trio.testing import MockClock

    @pytest.fixture
    def anyio_backend():
        return ("trio", {"clock": MockClock(autojump_threshold=0)})

    @pytest.mark.anyio
    async def test_an_hour_of_writes():
        ...  # anyio.current_time() and anyio.sleep() follow the virtual clock
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import random
import re
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, NoReturn

import anyio
import httpx

__all__ = [
    "ACCOUNT_ID",
    "AMBIGUOUS_FAULTS",
    "ENTRY_FAULTS",
    "REGION",
    "REQUEST_FAULTS",
    "FakeKinesis",
    "FakeRecord",
    "FakeShard",
    "FakeStats",
    "FaultEvent",
    "Faults",
    "ShardStats",
]

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


@dataclass
class FakeRecord:
    """A Kinesis record as stored by the fake (``arrival``: ``anyio.current_time()``)."""

    data: bytes
    partition_key: str
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

    @property
    def arn(self) -> str:
        return f"arn:aws:kinesis:{REGION}:{ACCOUNT_ID}:stream/{self.name}"

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


def _astral(text: str) -> int:
    """Characters outside the Basic Multilingual Plane (two UTF-16 code units each)."""
    return 0 if text.isascii() else sum(1 for c in text if ord(c) > 0xFFFF)


@dataclass
class Faults:
    """Faults to inject, set as ``fake.faults = Faults(...)``.

    Probabilities apply per PutRecords request, except the ``*_entries`` ones, per entry.
    Request-level kinds exclude each other (one draw per request picks at most one), as do
    the entry-level kinds (one draw per entry); each group's sum must be at most 1.

    - ``throttle_entries``: the entry fails with ``ProvisionedThroughputExceededException``
      whatever the limits (and uses no tokens); not stored.
    - ``internal_failure_entries``: the entry fails with ``InternalFailure``; not stored.
    - ``http_500`` / ``http_503``: the request is answered ``500 InternalFailure`` /
      ``503 ServiceUnavailable``; nothing stored.
    - ``hang_before``: never processed, never answered (only the client's timeout or a
      cancellation ends it); nothing stored.
    - ``hang_after``: processed (entries stored as usual), then never answered: ambiguous.
    - ``reset_before``: raises ``httpx.ReadError("connection reset by peer")``; nothing
      stored.
    - ``reset_after``: processed (stored), then raises ``httpx.ReadError``: ambiguous.
    - ``latency`` seconds, plus up to ``latency_jitter`` more (uniform), before serving
      every request (all operations).
    - ``fatal``: stream name -> error code answering every request to that stream whose
      operation is in ``fatal_operations`` (default: PutRecords only, so a Producer still
      learns the shards and its records fail fast), e.g. ``{"audit":
      "AccessDeniedException"}``; HTTP 400 (500 for ``InternalFailure``, 503 for
      ``ServiceUnavailable``); nothing stored.
    - ``seed``: seeds ``fake.rng`` (a ``random.Random``) when the faults are assigned.
    """

    throttle_entries: float = 0.0
    internal_failure_entries: float = 0.0
    http_500: float = 0.0
    http_503: float = 0.0
    hang_before: float = 0.0
    hang_after: float = 0.0
    reset_before: float = 0.0
    reset_after: float = 0.0
    latency: float = 0.0
    latency_jitter: float = 0.0
    fatal: dict[str, str] = field(default_factory=dict)
    fatal_operations: frozenset[str] = frozenset({"PutRecords"})
    seed: int | None = None

    def __post_init__(self) -> None:
        for group in (ENTRY_FAULTS, REQUEST_FAULTS):
            for name in group:
                p = getattr(self, name)
                if not 0.0 <= p <= 1.0:
                    raise ValueError(f"Faults.{name} must be a probability, got {p!r}")
            if sum(getattr(self, name) for name in group) > 1.0 + 1e-12:
                raise ValueError(f"Faults: {', '.join(group)} add up to more than 1")
        if self.latency < 0 or self.latency_jitter < 0:
            raise ValueError("Faults.latency and latency_jitter must be >= 0")


@dataclass
class FaultEvent:
    """A request-level fault the fake injected.

    ``kind``: a :data:`REQUEST_FAULTS` name, or the error code of a ``fatal`` stream or of a
    ``fail_next`` code. ``entries``: (shard_id, sequence_number) of the records the request
    stored (only ``hang_after`` and ``reset_after`` store any).
    """

    time: float
    kind: str
    stream: str
    entries: list[tuple[str, str]] = field(default_factory=list)

    @property
    def ambiguous(self) -> bool:
        """The request was processed but the client never got the answer."""
        return self.kind in AMBIGUOUS_FAULTS


@dataclass
class ShardStats:
    """Records and bytes (data + partition key) accepted by one shard, and when."""

    records: int = 0
    bytes: int = 0
    throttled: int = 0
    first_accept: float | None = None
    last_accept: float | None = None


@dataclass
class FakeStats:
    """PutRecords counters (requests answered by a ``hook`` are not counted).

    ``requests_by_status`` counts answered requests by HTTP status; hangs and resets count in
    ``requests_unanswered``. ``entries`` counts the entries of processed requests, of which
    ``entries_ok`` were stored, ``entries_throttled`` failed with
    ``ProvisionedThroughputExceededException`` (limits or faults) and ``entries_failed`` with
    ``InternalFailure``. ``faults`` counts injected faults by kind (per entry for the entry
    kinds). ``shards[stream][shard_id]`` is a :class:`ShardStats`. Assign a fresh
    ``FakeStats()`` to ``fake.stats`` to start counting again.
    """

    requests: int = 0
    requests_by_status: Counter[int] = field(default_factory=Counter)
    requests_unanswered: int = 0
    entries: int = 0
    entries_ok: int = 0
    entries_throttled: int = 0
    entries_failed: int = 0
    faults: Counter[str] = field(default_factory=Counter)
    shards: dict[str, dict[str, ShardStats]] = field(default_factory=dict)

    def shard(self, stream: str, shard_id: str) -> ShardStats:
        """The stats of one shard (created empty on first use)."""
        return self.shards.setdefault(stream, {}).setdefault(shard_id, ShardStats())


@dataclass
class _Bucket:
    records: float
    bytes: float
    time: float


@dataclass
class _Pending:
    remaining: int
    kind: str
    stream: str | None


Handler = Callable[[str, dict[str, Any]], Awaitable[httpx.Response | None]]


class FakeKinesis:
    """An in-memory Kinesis: streams, shards, records; use :meth:`transport` with a Producer.

    ``hook`` (optional) is an async callable ``(operation, body) -> httpx.Response | None``
    called before each request is served: return a response to answer in its place (to
    inject an error), or ``None`` to serve it normally. It may sleep to add latency.

    ``enforce_limits``: apply per-shard write limits of ``records_per_second`` and
    ``bytes_per_second`` (token buckets holding one second's worth). ``faults``: see
    :class:`Faults`. ``max_record_size`` (data + partition key) and ``max_request_size``
    bound PutRecords entries and requests like Kinesis (larger ones: HTTP 400).
    All of these are attributes that may be changed at any time.
    """

    def __init__(
        self,
        hook: Handler | None = None,
        *,
        enforce_limits: bool = False,
        records_per_second: float = 1000,
        bytes_per_second: float = _MIB,
        faults: Faults | None = None,
        max_record_size: int = _MIB,
        max_request_size: int = 5 * _MIB,
    ) -> None:
        if records_per_second <= 0 or bytes_per_second <= 0:
            raise ValueError("records_per_second and bytes_per_second must be > 0")
        self.streams: dict[str, _Stream] = {}
        self.hook = hook
        #: The operation of every request received, in order.
        self.calls: list[str] = []
        self.enforce_limits = enforce_limits
        self.records_per_second = records_per_second
        self.bytes_per_second = bytes_per_second
        self.max_record_size = max_record_size
        self.max_request_size = max_request_size
        self.stats = FakeStats()
        #: Request-level faults injected so far, in order.
        self.fault_events: list[FaultEvent] = []
        self.rng = random.Random()
        self._faults = Faults()
        self.faults = faults or Faults()
        self._pending: list[_Pending] = []
        self._buckets: dict[tuple[str, str], _Bucket] = {}
        self._last_seq = 0
        self._request_ids = 0

    @property
    def faults(self) -> Faults:
        """The faults in force; assigning new ones reseeds :attr:`rng` with their seed."""
        return self._faults

    @faults.setter
    def faults(self, faults: Faults) -> None:
        self._faults = faults
        self.rng = random.Random(faults.seed)

    @property
    def ambiguous_requests(self) -> list[FaultEvent]:
        """Fault events whose records were stored but whose answer was lost."""
        return [e for e in self.fault_events if e.ambiguous]

    def fail_next(self, n: int, kind: str, *, stream: str | None = None) -> None:
        """Inject ``kind`` into the next ``n`` PutRecords requests (to ``stream``, if given).

        ``kind``: a :data:`REQUEST_FAULTS` name; an :data:`ENTRY_FAULTS` name (every entry
        of the request fails that way); or an error code such as ``"ExpiredTokenException"``
        answering the whole request (HTTP 400; 500 for ``InternalFailure``, 503 for
        ``ServiceUnavailable``). Queued after earlier ``fail_next`` calls; while one is
        pending it replaces the random request-level draw.
        """
        if n < 1:
            raise ValueError(f"n must be >= 1, got {n!r}")
        known = kind in ENTRY_FAULTS or kind in REQUEST_FAULTS
        if not known and not kind[:1].isupper():
            raise ValueError(
                f"unknown fault kind {kind!r}: use one of {ENTRY_FAULTS + REQUEST_FAULTS} "
                "or an error code such as 'AccessDeniedException'"
            )
        self._pending.append(_Pending(n, kind, stream))

    # -- set-up and inspection ------------------------------------------------------------

    def create_stream(self, name: str, shard_count: int = 1, *, on_demand: bool = False) -> None:
        """Create an ACTIVE stream whose shards split the hash key space evenly."""
        if name in self.streams:
            raise _Fail(400, "ResourceInUseException", f"Stream {name} already exists.")
        if shard_count < 1:
            raise _Fail(400, "ValidationException", "ShardCount must be at least 1")
        stream = _Stream(name, [], 0, "ON_DEMAND" if on_demand else "PROVISIONED")
        for start, end in _even_ranges(shard_count):
            self._open(stream, start, end)
        self.streams[name] = stream

    def open_shards(self, name: str) -> list[FakeShard]:
        """The stream's open shards, in hash key order."""
        return sorted(self._get(name).open_shards(), key=lambda s: s.start)

    def records(self, name: str) -> list[FakeRecord]:
        """Every record written to the stream, across shards."""
        return [r for s in self._get(name).shards for r in s.records]

    def transport(self) -> httpx.AsyncBaseTransport:
        """An httpx transport serving this fake (pass it as ``Producer(transport=...)``)."""
        return httpx.MockTransport(self._handle)

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
        self._close(parent)
        low = self._open(stream, parent.start, new_starting_hash_key - 1, parent.shard_id)
        high = self._open(stream, new_starting_hash_key, parent.end, parent.shard_id)
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
        return self._open(
            stream,
            min(first.start, second.start),
            max(first.end, second.end),
            first.shard_id,
            second.shard_id,
        )

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
        return children

    # -- internals ----------------------------------------------------------------------------

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
            starting_sequence_number=f"{self._last_seq + 1:056d}",
        )
        stream.next_shard += 1
        stream.shards.append(shard)
        return shard

    def _close(self, shard: FakeShard) -> None:
        shard.closed = True
        shard.ending_sequence_number = max(f"{self._last_seq:056d}", shard.starting_sequence_number)

    def _next_seq(self) -> str:
        self._last_seq += 1
        return f"{self._last_seq:056d}"

    def _take_tokens(self, stream: str, shard: FakeShard, size: int, now: float) -> bool:
        rps, bps = float(self.records_per_second), float(self.bytes_per_second)
        bucket = self._buckets.get((stream, shard.shard_id))
        if bucket is None:
            bucket = self._buckets[stream, shard.shard_id] = _Bucket(rps, bps, now)
        else:
            elapsed = max(0.0, now - bucket.time)
            bucket.records = min(rps, bucket.records + elapsed * rps)
            bucket.bytes = min(bps, bucket.bytes + elapsed * bps)
            bucket.time = now
        # a nanosecond's worth of slack absorbs float error in the clock
        if bucket.records + 1e-9 * rps < 1 or bucket.bytes + 1e-9 * bps < size:
            return False
        bucket.records = max(0.0, bucket.records - 1)
        bucket.bytes = max(0.0, bucket.bytes - size)
        return True

    def _take_fault(self, stream: str) -> str | None:
        for pending in self._pending:
            if pending.stream is None or pending.stream == stream:
                pending.remaining -= 1
                if pending.remaining == 0:
                    self._pending.remove(pending)
                return pending.kind
        faults = self._faults
        draw = self.rng.random()
        total = 0.0
        for kind in REQUEST_FAULTS:
            total += getattr(faults, kind)
            if draw < total:
                return kind
        return None

    def _event(self, kind: str, stream: str, entries: list[tuple[str, str]] | None = None) -> None:
        self.stats.faults[kind] += 1
        self.fault_events.append(FaultEvent(anyio.current_time(), kind, stream, entries or []))

    def _respond(self, status: int, body: dict[str, Any]) -> httpx.Response:
        self._request_ids += 1
        return httpx.Response(
            status,
            json=body,
            headers={"x-amzn-RequestId": f"fake-{self._request_ids:08d}"},
        )

    def _error(self, status: int, code: str, message: str) -> httpx.Response:
        return self._respond(status, {"__type": code, "message": message})

    # -- serving --------------------------------------------------------------------------

    async def _handle(self, request: httpx.Request) -> httpx.Response:
        target = request.headers.get("x-amz-target", "")
        operation = target.rpartition(".")[2]
        if "authorization" not in request.headers:
            return self._error(
                400, "MissingAuthenticationTokenException", "no Authorization header"
            )
        try:
            body: Any = json.loads(await request.aread() or b"{}")
        except ValueError:
            return self._error(400, "SerializationException", "the body is not JSON")
        if not isinstance(body, dict):
            return self._error(400, "SerializationException", "the body is not a JSON object")
        self.calls.append(operation)
        if self.hook is not None:
            injected = await self.hook(operation, body)
            if injected is not None:
                return injected
        faults = self._faults
        if faults.latency or faults.latency_jitter:
            jitter = self.rng.uniform(0.0, faults.latency_jitter) if faults.latency_jitter else 0
            await anyio.sleep(faults.latency + jitter)
        put = operation == "PutRecords"
        method = getattr(self, f"_op_{operation}", None)
        if method is None and not put:
            return self._error(400, "UnknownOperationException", operation)
        name = _stream_name(body)
        if put:
            self.stats.requests += 1
        code = faults.fatal.get(name) if name is not None else None
        if code is not None and operation in faults.fatal_operations:
            status = _STATUS.get(code, 400)
            if put:
                self._event(code, name or "")
                self.stats.requests_by_status[status] += 1
            return self._error(status, code, f"{code} (injected)")
        if put or method is None:
            return await self._serve_put_records(request, body, name or "")
        try:
            result: dict[str, Any] = method(body)
        except _Fail as fail:
            return self._error(fail.status, fail.code, fail.message)
        return self._respond(200, result)

    async def _serve_put_records(
        self, request: httpx.Request, body: dict[str, Any], name: str
    ) -> httpx.Response:
        stats = self.stats
        kind = self._take_fault(name)
        if kind is not None and kind not in ENTRY_FAULTS and kind not in AMBIGUOUS_FAULTS:
            self._event(kind, name)
            if kind == "hang_before":
                stats.requests_unanswered += 1
                await anyio.sleep_forever()
            if kind == "reset_before":
                stats.requests_unanswered += 1
                _reset(request)
            code = {"http_500": "InternalFailure", "http_503": "ServiceUnavailable"}.get(kind, kind)
            status = _STATUS.get(code, 400)
            stats.requests_by_status[status] += 1
            message = "Internal service failure." if status == 500 else f"{code} (injected)"
            return self._error(status, code, message)
        stored: list[tuple[str, str]] = []
        try:
            result = self._put_records(body, kind if kind in ENTRY_FAULTS else None, stored)
            response = self._respond(200, result)
        except _Fail as fail:
            response = self._error(fail.status, fail.code, fail.message)
        if kind in AMBIGUOUS_FAULTS:
            assert kind is not None
            self._event(kind, name, stored)
            stats.requests_unanswered += 1
            if kind == "hang_after":
                await anyio.sleep_forever()
            _reset(request)
        stats.requests_by_status[response.status_code] += 1
        return response

    def _put_records(
        self, body: dict[str, Any], forced: str | None, stored: list[tuple[str, str]]
    ) -> dict[str, Any]:
        stream = self._stream(body)
        entries = body.get("Records")
        if not isinstance(entries, list) or not 1 <= len(entries) <= 500:
            raise _Fail(
                400,
                "ValidationException",
                "1 validation error detected: Value at 'records' failed to satisfy "
                "constraint: Member must have length between 1 and 500",
            )
        parsed = [self._parse_entry(i, entry) for i, entry in enumerate(entries)]
        total = sum(len(data) + len(pk_bytes) for data, _, pk_bytes, _, _ in parsed)
        if total > self.max_request_size:
            raise _Fail(
                400,
                "InvalidArgumentException",
                f"Records size {total} exceeds the limit of {self.max_request_size} bytes",
            )
        now = anyio.current_time()
        faults, stats, rng = self._faults, self.stats, self.rng
        open_shards = stream.open_shards()
        results: list[dict[str, str]] = []
        failed = 0
        for data, pk, pk_bytes, ehk, hash_key in parsed:
            stats.entries += 1
            shard = next(s for s in open_shards if s.holds(hash_key))
            size = len(data) + len(pk_bytes)
            code = forced
            draw = rng.random()
            if code is None:
                if draw < faults.throttle_entries:
                    code = "throttle_entries"
                elif draw < faults.throttle_entries + faults.internal_failure_entries:
                    code = "internal_failure_entries"
            if code is not None:
                stats.faults[code] += 1
            elif self.enforce_limits and not self._take_tokens(stream.name, shard, size, now):
                code = "throttle_entries"
            if code == "throttle_entries":
                failed += 1
                stats.entries_throttled += 1
                stats.shard(stream.name, shard.shard_id).throttled += 1
                results.append(
                    {
                        "ErrorCode": _PTE,
                        "ErrorMessage": f"Rate exceeded for shard {shard.shard_id} in stream "
                        f"{stream.name} under account {ACCOUNT_ID}.",
                    }
                )
                continue
            if code is not None:
                failed += 1
                stats.entries_failed += 1
                results.append(
                    {"ErrorCode": "InternalFailure", "ErrorMessage": "Internal service failure."}
                )
                continue
            seq = self._next_seq()
            shard.records.append(FakeRecord(data, pk, ehk, hash_key, seq, shard.shard_id, now))
            stored.append((shard.shard_id, seq))
            stats.entries_ok += 1
            shard_stats = stats.shard(stream.name, shard.shard_id)
            shard_stats.records += 1
            shard_stats.bytes += size
            if shard_stats.first_accept is None:
                shard_stats.first_accept = now
            shard_stats.last_accept = now
            results.append({"ShardId": shard.shard_id, "SequenceNumber": seq})
        return {"FailedRecordCount": failed, "Records": results}

    def _parse_entry(self, i: int, entry: Any) -> tuple[bytes, str, bytes, str | None, int]:
        where = f"'records.{i + 1}.member"
        if not isinstance(entry, dict):
            raise _Fail(400, "SerializationException", f"{where}' is not an object")
        pk = entry.get("PartitionKey")
        # 256 UTF-16 code units, as Kinesis and both emulators count: an emoji counts as two
        if not isinstance(pk, str) or not 1 <= len(pk) + _astral(pk) <= 256:
            raise _Fail(
                400,
                "ValidationException",
                f"1 validation error detected: Value at {where}.partitionKey' failed to "
                "satisfy constraint: Member must have length between 1 and 256",
            )
        try:
            pk_bytes = pk.encode("utf-8")
        except UnicodeEncodeError:
            raise _Fail(
                400, "ValidationException", f"{where}.partitionKey' is not valid Unicode"
            ) from None
        raw = entry.get("Data")
        try:
            data = base64.b64decode(raw, validate=True) if isinstance(raw, str) else None
        except (binascii.Error, ValueError):
            data = None
        if data is None:
            raise _Fail(400, "SerializationException", f"{where}.data' is not base64")
        if len(data) + len(pk_bytes) > self.max_record_size:
            raise _Fail(
                400,
                "InvalidArgumentException",
                f"Record {i} has a size (data + partition key) of {len(data) + len(pk_bytes)} "
                f"bytes, over the limit of {self.max_record_size}",
            )
        ehk = entry.get("ExplicitHashKey")
        if ehk is None:
            hash_key = int.from_bytes(hashlib.md5(pk_bytes).digest(), "big")
        else:
            if not isinstance(ehk, str) or not _EHK.fullmatch(ehk):
                raise _Fail(
                    400,
                    "ValidationException",
                    f"1 validation error detected: Value at {where}.explicitHashKey' failed "
                    "to satisfy constraint: Member must satisfy regular expression pattern: "
                    "0|([1-9]\\d{0,38})",
                )
            hash_key = int(ehk)
            if hash_key > _MAX_HASH:
                raise _Fail(
                    400,
                    "InvalidArgumentException",
                    f"Invalid ExplicitHashKey. ExplicitHashKey must be in the range: "
                    f"[0, 2^128-1]. Specified value was {ehk}",
                )
        return data, pk, pk_bytes, ehk, hash_key

    def _stream(self, body: dict[str, Any]) -> _Stream:
        name = _stream_name(body)
        if name is None:
            raise _Fail(400, "ValidationException", "StreamName or StreamARN is required")
        return self._get(name)

    # -- operations -------------------------------------------------------------------------

    def _op_CreateStream(self, body: dict[str, Any]) -> dict[str, Any]:
        name = body.get("StreamName")
        if not isinstance(name, str) or not name:
            raise _Fail(400, "ValidationException", "StreamName is required")
        mode = (body.get("StreamModeDetails") or {}).get("StreamMode", "PROVISIONED")
        on_demand = mode == "ON_DEMAND"
        count = 4 if on_demand else int(body.get("ShardCount") or 1)
        self.create_stream(name, count, on_demand=on_demand)
        return {}

    def _op_DeleteStream(self, body: dict[str, Any]) -> dict[str, Any]:
        name = self._stream(body).name
        del self.streams[name]
        for key in [k for k in self._buckets if k[0] == name]:
            del self._buckets[key]
        return {}

    def _op_DescribeStreamSummary(self, body: dict[str, Any]) -> dict[str, Any]:
        stream = self._stream(body)
        return {
            "StreamDescriptionSummary": {
                "StreamName": stream.name,
                "StreamARN": stream.arn,
                "StreamStatus": "ACTIVE",
                "StreamModeDetails": {"StreamMode": stream.mode},
                "RetentionPeriodHours": 24,
                "EncryptionType": "NONE",
                "EnhancedMonitoring": [{"ShardLevelMetrics": []}],
                "OpenShardCount": len(stream.open_shards()),
                "ConsumerCount": 0,
                "MaxRecordSizeInKiB": self.max_record_size // 1024,
            }
        }

    def _op_ListShards(self, body: dict[str, Any]) -> dict[str, Any]:
        max_results = body.get("MaxResults", 1000)
        if not isinstance(max_results, int) or not 1 <= max_results <= 10_000:
            raise _Fail(400, "ValidationException", "MaxResults must be from 1 to 10000")
        now = anyio.current_time()
        token = body.get("NextToken")
        if token is not None:
            if _stream_name(body) is not None or "ExclusiveStartShardId" in body:
                raise _Fail(
                    400,
                    "InvalidArgumentException",
                    "NextToken and StreamName/StreamARN/ExclusiveStartShardId cannot be "
                    "provided together.",
                )
            try:
                state = json.loads(base64.b64decode(token))
                name, after, at_latest, offset, issued = state
            except (ValueError, TypeError, binascii.Error):
                raise _Fail(400, "InvalidArgumentException", "Invalid NextToken.") from None
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

    def _op_GetShardIterator(self, body: dict[str, Any]) -> dict[str, Any]:
        stream = self._stream(body)
        shard = stream.shard(str(body.get("ShardId")))
        kind = body.get("ShardIteratorType", "TRIM_HORIZON")
        records = shard.records
        if kind == "TRIM_HORIZON":
            pos = 0
        elif kind == "LATEST":
            pos = len(records)
        elif kind in ("AT_SEQUENCE_NUMBER", "AFTER_SEQUENCE_NUMBER"):
            seq = str(body.get("StartingSequenceNumber"))
            pos = next((i for i, r in enumerate(records) if r.sequence_number >= seq), len(records))
            if (
                kind == "AFTER_SEQUENCE_NUMBER"
                and pos < len(records)
                and records[pos].sequence_number == seq
            ):
                pos += 1
        elif kind == "AT_TIMESTAMP":
            ts = float(body.get("Timestamp", 0))
            pos = next((i for i, r in enumerate(records) if r.arrival >= ts), len(records))
        else:
            raise _Fail(400, "ValidationException", f"unknown ShardIteratorType {kind!r}")
        return {"ShardIterator": json.dumps([stream.name, shard.shard_id, pos])}

    def _op_GetRecords(self, body: dict[str, Any]) -> dict[str, Any]:
        try:
            name, shard_id, pos = json.loads(body["ShardIterator"])
        except (KeyError, ValueError, TypeError):
            raise _Fail(400, "InvalidArgumentException", "Invalid ShardIterator.") from None
        stream = self._get(name)
        shard = stream.shard(shard_id)
        limit = int(body.get("Limit") or 10_000)
        page = shard.records[pos : pos + limit]
        end = pos + len(page)
        result: dict[str, Any] = {
            # like Kinesis, records carry no ExplicitHashKey
            "Records": [
                {
                    "Data": base64.b64encode(r.data).decode(),
                    "PartitionKey": r.partition_key,
                    "SequenceNumber": r.sequence_number,
                    "ApproximateArrivalTimestamp": r.arrival,
                }
                for r in page
            ],
            "MillisBehindLatest": 0,
        }
        if shard.closed and end >= len(shard.records):
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
            result["NextShardIterator"] = json.dumps([name, shard_id, end])
        return result


class _Fail(ValueError):
    """An error the fake answers with (HTTP ``status``, ``code``); a ValueError in Python."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(f"{code}: {message}")
        self.status, self.code, self.message = status, code, message


def _reset(request: httpx.Request) -> NoReturn:
    raise httpx.ReadError("connection reset by peer", request=request)


def _stream_name(body: dict[str, Any]) -> str | None:
    name = body.get("StreamName")
    if isinstance(name, str) and name:
        return name
    arn = body.get("StreamARN")
    if isinstance(arn, str) and arn:
        return arn.rpartition("/")[2]
    return None


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
