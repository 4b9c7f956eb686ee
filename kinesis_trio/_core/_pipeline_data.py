"""The pipeline's data: Kinesis records in flight, per-shard buffers, per-stream state.

Objects with slots whose fields change here only, through small methods: the engine's pure
modules (``_accumulator``, ``_reshard``, ``_retry_schedule``, ``_requests``, ``_engine``) decide
what happens to them and say so by calling those methods. The async shell keeps its
channels and wake-up scopes in records of its own, keyed by these objects.
"""

from __future__ import annotations

import json
import math

from .._results import Attempt, Resolution
from ._admission import OFF, Lane
from ._aggregation import AggregateSizer
from ._limiter import ShardLimiter, paced_size
from ._record import Record
from ._shards import ShardMap
from ._stream_policy import StreamFacts, StreamPolicy

_INF = math.inf


class KRecord:
    """One Kinesis record in flight: a plain user record or a KPL aggregate of several."""

    __slots__ = (
        "aggregated",
        "data",
        "ehk",
        "members",
        "paid",
        "partition_key",
        "send_by",
        "shard",
        "since",
        "size",
        "tail",
    )

    def __init__(
        self,
        members: list[Record],
        data: bytes,
        partition_key: str | None,
        ehk: str | None,
        size: int,
        shard: ShardBuffer,
        send_by: float,
        aggregated: bool,
    ) -> None:
        self.members = members
        self.data = data
        self.partition_key = partition_key
        self.ehk = ehk
        self.size = size
        self.shard = shard
        #: when the request holding it must go at the latest (its linger deadline)
        self.send_by = send_by
        self.aggregated = aggregated
        #: the rest of its PutRecords JSON entry after the data, made when first sent
        #: (None for a plain record with a key and no explicit hash key: its key's tail is
        #: shared, ``_requests._ENTRY_TAILS``)
        self.tail: bytes | None = None
        #: the start of the wait its next attempt ends (arrival, or the last attempt's end)
        self.since = members[0].arrival
        #: its share of what the retry budget charged for sending it again
        self.paid = 0.0

    def live(self) -> list[Record]:
        """Its records that are not resolved yet."""
        return [o for o in self.members if o.resolution is None]

    # Its fields change here only: the engine's modules say what happened.

    def due_by(self, when: float) -> None:
        """The request holding it must go by ``when`` (``-inf``: at once)."""
        if when < self.send_by:
            self.send_by = when

    def waiting_since(self, when: float) -> None:
        """Its next attempt's wait starts at ``when`` (the last attempt's end, or the
        earliest arrival of what it holds)."""
        self.since = when

    def charged(self, paid: float) -> float:
        """Its share of what the retry budget charged is now ``paid``; returns the share
        it had."""
        before, self.paid = self.paid, paid
        return before

    def keyed(self, partition_key: str) -> None:
        """A record put without a key gets ``partition_key`` (its entry and size grow)."""
        self.partition_key = partition_key
        self.tail = None
        self.size += len(partition_key)

    def keep_tail(self, tail: bytes) -> bytes:
        """Keep the rest of its PutRecords JSON entry after the data (made when it is first
        sent); returns it."""
        self.tail = tail
        return tail


class ShardBuffer:
    """A shard's open containers (the aggregate in formation and plain records), its count
    of queued batches, its limiter and its consecutive failures."""

    __slots__ = (
        "agg_max",
        "anywhere",
        "end",
        "failures",
        "first",
        "lane",
        "limiter",
        "members",
        "open_deadline",
        "opened",
        "parts",
        "plain",
        "plain_bytes",
        "queued",
        "rerouted",
        "retired",
        "shard_id",
        "sizer",
        "start",
    )

    def __init__(
        self,
        shard_id: str,
        start: int,
        end: int,
        limiter: ShardLimiter,
        lane: Lane | None = None,
        opened: dict[ShardBuffer, None] | None = None,
        agg_max_size: int = 51_200,
    ) -> None:
        self.shard_id = shard_id
        #: the shards of its stream whose containers are open (``StreamState.open_shards``):
        #: it is in it from its containers' first record until they are taken, so that what
        #: runs per linger window visits the shards that hold records, not every shard
        self.opened: dict[ShardBuffer, None] = {} if opened is None else opened
        #: its admission by time (``_admission``): the bytes it owes, the pace it confirms at
        self.lane = lane if lane is not None else OFF.lane("", shard_id)
        self.start = start
        self.end = end
        self.sizer = AggregateSizer()
        self.members: list[Record] = []
        #: the open aggregate's records already encoded, in order (``encode_parts``), while
        #: every member came by the accumulator's common path; None once one did not (the
        #: seal then encodes the members)
        self.parts: list[bytes] | None = []
        self.plain: list[KRecord] = []
        self.plain_bytes = 0
        #: records whose retry is due: the next batch the shard sends starts with them,
        #: before anything it holds (``_retry_schedule``: older records go first)
        self.first: list[KRecord] = []
        #: the linger deadline of the open containers (infinite while they are empty)
        self.open_deadline = _INF
        #: sealed batches waiting in the shard's channel (``shard_queue_size`` bounds it):
        #: counted as the engine queues one (a ``Queue`` effect) and as the shell tells it
        #: the worker took them (``Outgoing.taken``)
        self.queued = 0
        self.rerouted = False  # the open aggregate holds re-routed (older) records
        self.retired = False  # a reshard closed the shard: what it holds goes elsewhere
        self.limiter = limiter
        #: the bytes its aggregate in formation may hold: the stream's ``agg_max_size``,
        #: less while its limiter is slowed by throttling (``_limiter.paced_size``)
        self.agg_max = paced_size(agg_max_size, limiter.multiplier)
        self.failures = 0  # consecutive failed writes: drives this shard's retry backoff
        #: the stream's one buffer when the service places records (AUTO): a record written
        #: to any shard is where it was sent
        self.anywhere = False

    def is_empty(self) -> bool:
        return not self.members and not self.plain

    # Its fields change here only: the accumulator, the shard maps and the engine say what
    # happened.

    def open_until(self, deadline: float) -> None:
        """Its open containers are due at ``deadline``."""
        if self.open_deadline == _INF:
            self.opened[self] = None
        self.open_deadline = deadline

    def add_plain(self, krec: KRecord) -> None:
        """A record that goes on its own joins the open plain records."""
        self.plain.append(krec)
        self.plain_bytes += krec.size

    def unencoded(self) -> None:
        """A member came another way than the common path: the seal encodes them all."""
        self.parts = None

    def rerouted_into(self) -> None:
        """The open aggregate holds re-routed (older) records."""
        self.rerouted = True

    def take(self) -> tuple[list[Record], list[KRecord], AggregateSizer, list[bytes] | None, bool]:
        """Empty the open containers: ``(members, plain, sizer, parts, rerouted)``. The
        sizer stays the shard's: the seal reads it, then clears it
        (``AggregateSizer.clear``)."""
        out = (self.members, self.plain, self.sizer, self.parts, self.rerouted)
        self.members = []
        self.parts = []
        self.rerouted = False
        self.plain = []
        self.plain_bytes = 0
        self.open_deadline = _INF
        self.opened.pop(self, None)
        return out

    def retry_first(self, krecs: list[KRecord]) -> None:
        """Records whose retry is due go before everything the shard holds."""
        self.first += krecs

    def take_first(self) -> list[KRecord]:
        """The records whose retry is due (they go first no more unless given back)."""
        out, self.first = self.first, []
        return out

    def queued_one(self) -> None:
        """A sealed batch was queued for its worker."""
        self.queued += 1

    def took(self, batches: int) -> None:
        """Its worker took ``batches`` queued batches."""
        self.queued -= batches

    def retire(self) -> None:
        """A reshard closed the shard."""
        self.retired = True

    def place_anywhere(self, anywhere: bool) -> None:
        """The stream is ``AUTO`` (its one buffer: the service places records) or not."""
        self.anywhere = anywhere

    def wrote(self, ok: bool) -> None:
        """A write to the shard succeeded (the failures run ends) or failed."""
        self.failures = 0 if ok else self.failures + 1

    def paced(self, agg_max_size: int) -> None:
        """Its limiter's rate changed (or the stream's ``agg_max_size``): what its
        aggregates may hold follows (``_limiter.paced_size``)."""
        self.agg_max = paced_size(agg_max_size, self.limiter.multiplier)


class Unverified:
    """An aggregate written to a shard we did not predict, waiting for that shard's range."""

    __slots__ = ("attempt", "krec", "res")

    def __init__(self, krec: KRecord, res: Resolution, attempt: Attempt) -> None:
        self.krec = krec
        self.res = res
        self.attempt = attempt


class StreamState:
    """One stream: its facts and policy, its shard map and buffers, what the last writes
    revealed."""

    __slots__ = (
        "accept_max",
        "agg_max_size",
        "aggregate",
        "arn",
        "auto",
        "facts",
        "json_head",
        "key",
        "keyless",
        "known",
        "limit_lowered",
        "map",
        "max_record_size",
        "name",
        "open_shards",
        "policy",
        "received",
        "refusal",
        "shard_count",
        "shards",
        "stale",
        "unverified",
        "wake_told",
        "window_bytes",
        "window_end",
    )

    #: records accepted since the last metrics update (the engine's: ``Engine.add_stream``)
    received: int
    #: bytes placed within the linger window ending at ``window_end`` (the accumulator's:
    #: ``_accumulator.track``, ``Accumulator.send_early``)
    window_bytes: int
    window_end: float
    #: when its linger timer wakes at the latest: its last pass's next deadline, or a
    #: ``Wake`` told since (the accumulator's: ``Accumulator.timer_sleeps``)
    wake_told: float

    def __init__(
        self,
        name: str,
        shard_map: ShardMap,
        facts: StreamFacts | None = None,
        policy: StreamPolicy | None = None,
        *,
        arn: str | None = None,
        agg_max_size: int = 51_200,
    ) -> None:
        #: the stream's name (outcomes, metrics and logs name it)
        self.name = name
        #: the ARN it is addressed by (sent as StreamARN), or None: addressed by name
        self.arn = arn
        #: how the producer's users refer to it (its key in ``Engine.streams``)
        self.key = arn or name
        self.json_head = (
            b'{"StreamARN":%s,"Records":[' % json.dumps(arn).encode()
            if arn
            else b'{"StreamName":%s,"Records":[' % json.dumps(name).encode()
        )
        self.facts = facts or StreamFacts.assumed(name, arn)
        if policy is None:
            policy = StreamPolicy(False, True, self.facts.max_record_size)
        #: the policy's decisions (``_stream_policy.policy_for``), applied by
        #: ``ShardMaps.apply_facts`` (through :meth:`adopt`)
        self.auto = policy.auto
        self.aggregate = policy.aggregate
        self.max_record_size = policy.max_record_size
        #: ``aggregation_max_size``, never above the stream's record limit
        self.agg_max_size = min(agg_max_size, policy.max_record_size)
        #: the largest record ``put`` takes (also within ``max_outstanding_bytes``)
        self.accept_max = policy.max_record_size
        self.policy = policy
        #: records without a partition key were accepted (while the stream was AUTO)
        self.keyless = False
        #: the record limit was lowered while records were outstanding: check each request
        self.limit_lowered = False
        #: open shards of the stream (on an AUTO stream, what its one buffer's limits scale by)
        self.shard_count = len(shard_map)
        self.map = shard_map
        self.shards: list[ShardBuffer] = []
        #: the shards whose containers are open, in the order they opened (each
        #: ``ShardBuffer`` adds and removes itself: ``open_until``, ``take``)
        self.open_shards: dict[ShardBuffer, None] = {}
        #: A write revealed that the map is out of date: aggregate nothing until it's reloaded.
        self.stale = False
        #: Every shard's hash key range seen so far, closed ones included.
        self.known: dict[str, tuple[int, int]] = {
            s.shard_id: (s.start, s.end) for s in shard_map.shards
        }
        self.unverified: list[Unverified] = []
        # Two fields of the stream are other modules' own, set and changed only there (the
        # per-record path writes them directly): ``received`` (records accepted since the
        # last metrics update) is the engine's, set in ``Engine.add_stream``;
        # ``window_bytes`` and ``window_end`` (bytes placed in open containers within the
        # linger window ending at ``window_end``) and ``wake_told`` are the accumulator's,
        # set by ``_accumulator.track``.
        #: why ``put`` refuses records for the stream (``ordering="per_key"`` on an ``AUTO``
        #: stream: ``_ordering.refusal``), or None
        self.refusal: str | None = None

    # Its fields change here only: the shard maps, the accumulator and the engine say what
    # happened.

    def adopt(
        self,
        facts: StreamFacts,
        policy: StreamPolicy,
        *,
        agg_max_size: int,
        accept_max: int,
        shard_count: int,
        refusal: str | None,
        lowered: bool,
    ) -> None:
        """The stream's facts (re)loaded and the policy they imply (``lowered``: its record
        limit went down while records were outstanding)."""
        self.facts = facts
        self.policy = policy
        if lowered:
            self.limit_lowered = True
        self.auto = policy.auto
        self.refusal = refusal
        self.aggregate = policy.aggregate
        self.max_record_size = policy.max_record_size
        self.agg_max_size = agg_max_size
        self.accept_max = accept_max
        self.shard_count = shard_count
        for shard in self.shards:
            shard.paced(agg_max_size)

    def learn(self, shard_id: str, start: int, end: int) -> None:
        """A shard's hash key range (an open or a closed shard's)."""
        self.known[shard_id] = (start, end)

    def use_map(self, shard_map: ShardMap, shards: list[ShardBuffer]) -> None:
        """A new shard map and its buffers."""
        for shard in shards:
            shard.paced(self.agg_max_size)
        self.map = shard_map
        self.shards = shards
        self.stale = False

    def mark_stale(self) -> None:
        """A write revealed the map is out of date."""
        self.stale = True

    def wait_for_range(self, item: Unverified) -> None:
        """An aggregate waits for its shard's range (a map reload)."""
        self.unverified.append(item)

    def take_unverified(self) -> list[Unverified]:
        """The aggregates waiting for a range (they wait no more unless given back)."""
        out, self.unverified = self.unverified, []
        return out

    def took_keyless(self) -> None:
        """A record without a partition key was accepted."""
        self.keyless = True
