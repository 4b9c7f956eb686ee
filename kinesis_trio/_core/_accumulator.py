"""The accumulator: where a record waits for its request (pure, no awaits, ``now`` passed in).

It places each record in its shard's open containers (the KPL aggregate in formation, or
the plain records), decides when those seal (full by count or size, at their linger
deadline, on flush) and turns them into :class:`~kinesis_trio._core._pipeline_data.KRecord`
batches. What the shell must do about it goes into the engine's outbox: a ``Wake`` when a
shard's containers get a linger deadline earlier than the stream's linger timer wakes
anyway (``Accumulator.timer_sleeps``: it must wake by then) and a ``Queue``
when a batch is sealed for the shard's channel (counted in ``shard.queued``: a ``put`` that
must seal waits while it is at ``queue_size``).

Linger deadlines fall on a grid of period ``linger`` (the clock's multiples of it): containers
that open within one window all seal at its end, whichever shard they are on, so at a steady
rate one request per window carries every shard's due containers instead of one request per
shard at its own time. A record waits at most ``linger`` (the KPL's
``RecordMaxBufferedTime`` is a maximum), half of it on average. Unless the window fills first:
when ``early_size`` bytes (``linger_window_bytes``) have been placed in a stream's open
containers within one window, they are all due at once (:meth:`Accumulator.send_early`), so
at a high rate the window's records go in several requests as they come rather than all at
its end, where sealing, signing and the round trip of the whole window would add to the wait
of each of its records.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Iterable
from typing import Protocol

from ._admission import Lane
from ._aggregation import (
    _LEN3_HEADERS,
    _PK_INDEX_PIECES,
    _vlen,
    deaggregate,
    encode_parts,
    encode_records,
    record_header,
)
from ._effects import NoRoom, Outbox, Queue, Wake
from ._pipeline_data import KRecord, ShardBuffer, StreamState
from ._record import Record, sealed_into

__all__ = ["AGG_PARTITION_KEY", "Accumulator", "unpack"]

_INF = math.inf
#: Outer partition key of a multi-record aggregate (the explicit hash key routes it).
AGG_PARTITION_KEY = "a"
#: ``queue_size`` while a batch admitted as a whole is placed (``Accumulator.lift``)
_NO_LIMIT = 1 << 62


class Outstanding(Protocol):
    """The ledger's count of the bytes accepted and not resolved yet (every stream's)."""

    @property
    def bytes(self) -> int: ...


class Accumulator:
    """Placement and sealing decisions for every shard of every stream.

    Whether a stream's records are aggregated, and up to what size, is the stream's
    (``StreamState.aggregate`` and ``agg_max_size``, set by its policy: ``_stream_policy``).
    """

    __slots__ = (
        "agg_max_count",
        "coll_max_count",
        "coll_max_size",
        "early_size",
        "flushing",
        "linger",
        "outbox",
        "outstanding",
        "queue_size",
    )

    def __init__(
        self,
        *,
        agg_max_count: int,
        coll_max_count: int,
        coll_max_size: int,
        linger: float,
        queue_size: int,
        outbox: Outbox,
        outstanding: Outstanding,
        early_size: int = 262_144,
    ) -> None:
        self.agg_max_count = agg_max_count
        #: bytes placed in a stream's open containers within one linger window that make
        #: them all due at once (``linger_window_bytes``: they go now, not at its end)
        self.early_size = early_size
        #: the bytes accepted and not resolved yet (the ledger's count, every stream's)
        self.outstanding = outstanding
        #: flush() calls under way: everything buffered is due at once
        self.flushing = 0
        self.coll_max_count = coll_max_count
        self.coll_max_size = coll_max_size
        self.linger = linger
        self.queue_size = queue_size
        self.outbox = outbox

    def lift(self, shards: list[ShardBuffer]) -> list[float]:
        """No room check on ``shards`` until :meth:`restore` (their lanes admit, channels
        take any number of batches): the records of a batch admitted as a whole are placed
        (``_batch``). Returns what :meth:`restore` puts back."""
        saved = [shard.lane.lift() for shard in shards]
        saved.append(self.queue_size)
        self.queue_size = _NO_LIMIT
        return saved

    def restore(self, shards: list[ShardBuffer], saved: list[float]) -> None:
        """The room checks :meth:`lift` took off are back."""
        self.queue_size = int(saved.pop())
        for shard, allow in zip(shards, saved, strict=True):
            shard.lane.restore(allow)

    def flush_started(self) -> None:
        """A flush began: until it ends, everything buffered is due at once."""
        self.flushing += 1

    def flush_ended(self) -> None:
        """A flush ended (done, failed or cancelled)."""
        self.flushing -= 1

    def add(
        self, stream: StreamState, outcome: Record, pk_grow: int, now: float
    ) -> ShardBuffer | None:
        """Place a newly accepted record (``pk_grow``: the bytes its key would add to an
        aggregate's key table). Returns the shard whose aggregate in formation holds it
        (``None``: it went on its own).

        The common case (aggregating, room in the open aggregate) runs inline: the routing
        and sizing of :meth:`place` and ``AggregateSizer.grow/add`` (tests hold them equal).
        Raises ``NoRoom``, changing nothing, when a seal is due and the shard's
        channel is full.
        """
        hash_key = outcome.hash_key
        data = outcome.data
        n = len(data)  # type: ignore[arg-type]
        shard_map = stream.map
        index = bisect_right(shard_map.starts, hash_key) - 1
        if (
            outcome.explicit_hash_key is None
            and stream.aggregate
            and not stream.stale
            and index >= 0
            and hash_key <= shard_map.ends[index]
        ):
            shard = stream.shards[index]
            sizer = shard.sizer
            lane = shard.lane
            # admission by time, the aggregate in formation included (its records are
            # charged to the lane when it is sealed: ``_aggregate``); nothing changed yet
            if lane.owed + sizer.size >= lane.allow:
                lane.refused(now)
                raise NoRoom
            partition_key = outcome.partition_key
            pks = sizer.pks
            found = pks.get(partition_key)  # type: ignore[arg-type]
            if found is None:
                key_index = len(pks)
                grow = pk_grow
            else:
                key_index = found
                grow = 0
            inner = (
                (3 if key_index < 0x80 else 4 if key_index < 0x4000 else 2 + _vlen(key_index))
                + (1 if n < 0x80 else 2 if n < 0x4000 else _vlen(n))
                + n
            )
            grow += (2 if inner < 0x80 else 3 if inner < 0x4000 else 1 + _vlen(inner)) + inner
            if sizer.size + grow <= shard.agg_max and sizer.count < self.agg_max_count:
                if found is None:
                    pks[partition_key] = key_index  # type: ignore[index]
                sizer.took(grow)
                if shard.open_deadline == _INF:  # :meth:`_open`, inline (once per aggregate)
                    linger = self.linger
                    deadline = (math.floor(now / linger) + 1) * linger if linger > 0 else now
                    if deadline != stream.window_end:  # the first of a new window
                        stream.window_end, stream.window_bytes = deadline, 0
                    shard.open_until(deadline)
                    if (-_INF if self.flushing else deadline) < stream.wake_told:
                        self._wake(stream, shard)
                shard.members.append(outcome)
                parts = shard.parts
                if parts is not None:  # the record encoded now: the seal only joins
                    if inner < 4096 and key_index < 2048:
                        parts += (
                            _LEN3_HEADERS[inner],
                            _PK_INDEX_PIECES[key_index],
                            _LEN3_HEADERS[n],
                            data,  # type: ignore[arg-type]
                        )
                    else:
                        parts += (record_header(key_index, n, inner), data)  # type: ignore[arg-type]
                stream.window_bytes += grow
                if stream.window_bytes >= self.early_size:
                    self.send_early(stream, now)
                return shard
        return self.place(stream, outcome, outcome.size - n, now, check_room=True)

    def place(
        self, stream: StreamState, outcome: Record, pk_len: int, now: float, check_room: bool
    ) -> ShardBuffer | None:
        """Route an accepted (or re-routed) record into its shard's open containers.
        Returns the shard whose aggregate in formation holds it (``None``: it goes alone).

        With ``check_room`` (a new record) it raises ``NoRoom`` *before changing
        anything* when a seal would be needed and the shard's channel is full, or when the
        shard's lane does not admit it (admission by time, ``_admission``); else the record
        is charged to the lane. Re-routes never wait and stay charged where they were.
        """
        shard_map = stream.map
        hash_key = outcome.hash_key
        index = bisect_right(shard_map.starts, hash_key) - 1
        gap = index < 0 or hash_key > shard_map.ends[index]
        shard = stream.shards[0 if gap else index]
        if not check_room:  # placed anew: it owes its bytes where it goes now
            lane = outcome.lane
            if lane is None:  # not charged yet (it was in an aggregate in formation)
                shard.lane.charge(outcome, now)
            elif lane is not shard.lane:
                lane.move(outcome, shard.lane, now)
            return self._place(stream, shard, gap, outcome, pk_len, now, False)
        lane = shard.lane
        if lane.owed >= lane.allow:  # admission by time: nothing changed yet
            lane.refused(now)
            raise NoRoom
        where = self._place(stream, shard, gap, outcome, pk_len, now, True)
        lane.charge(outcome, now)
        return where

    def lane_for(self, stream: StreamState, outcome: Record) -> Lane:
        """The lane of the shard ``outcome`` routes to (``place``'s routing)."""
        shard_map = stream.map
        hash_key = outcome.hash_key
        index = bisect_right(shard_map.starts, hash_key) - 1
        if index < 0 or hash_key > shard_map.ends[index]:
            index = 0
        return stream.shards[index].lane

    def _place(
        self,
        stream: StreamState,
        shard: ShardBuffer,
        gap: bool,
        outcome: Record,
        pk_len: int,
        now: float,
        check_room: bool,
    ) -> ShardBuffer | None:
        if gap:
            # a gap in a stale map: send it alone, Kinesis routes it anyway
            can_aggregate = False
        else:
            # a record without a partition key (an AUTO stream's) goes alone
            can_aggregate = (
                stream.aggregate and not stream.stale and outcome.partition_key is not None
            )
        data = outcome.data
        assert data is not None
        if can_aggregate:
            pk = outcome.partition_key
            assert pk is not None
            ehk = outcome.explicit_hash_key
            sizer = shard.sizer
            agg_max_size = shard.agg_max
            grow = sizer.grow(len(data), pk, pk_len, ehk)
            if sizer.size + grow <= agg_max_size and sizer.count < self.agg_max_count:
                self._add_member(stream, shard, outcome, grow, now, not check_room)
                return shard
            if shard.members:  # the aggregate is full: seal it, start the next one
                if check_room and shard.queued >= self.queue_size:
                    raise NoRoom  # nothing changed yet
                self.seal_into_channel(shard)
                sizer = shard.sizer
                grow = sizer.grow(len(data), pk, pk_len, ehk)
                if sizer.size + grow <= agg_max_size:
                    self._add_member(stream, shard, outcome, grow, now, not check_room)
                    return shard
            # too large to aggregate: it goes alone
        size = outcome.size
        if shard.plain and (
            len(shard.plain) >= self.coll_max_count or shard.plain_bytes + size > self.coll_max_size
        ):
            if check_room and shard.queued >= self.queue_size:
                raise NoRoom
            self.seal_into_channel(shard)
        if shard.open_deadline == _INF:
            self._open(stream, shard, now)
        shard.add_plain(
            KRecord(
                [outcome],
                data,
                outcome.partition_key,
                outcome.explicit_hash_key,
                size,
                shard,
                shard.open_deadline,
                False,
            )
        )
        self._count_window(stream, size, now)
        return None

    def join(
        self, stream: StreamState, shard: ShardBuffer, outcome: Record, now: float, older: bool
    ) -> bool:
        """Add a record to ``shard``'s aggregate in formation if it routes there and fits
        without a seal (``older``: it was accepted before records already in it); else
        change nothing and return ``False``. Per-key ordering keeps a key's records in one
        Kinesis record this way."""
        if shard.retired or stream.stale or not stream.aggregate or not shard.members:
            return False
        if not shard.start <= outcome.hash_key <= shard.end:
            return False
        data = outcome.data
        pk = outcome.partition_key
        assert data is not None and pk is not None
        sizer = shard.sizer
        grow = sizer.grow(len(data), pk, key_length(outcome), outcome.explicit_hash_key)
        if sizer.size + grow > shard.agg_max or sizer.count >= self.agg_max_count:
            return False
        self._add_member(stream, shard, outcome, grow, now, older)
        return True

    def hurry(self, stream: StreamState, outcome: Record, now: float) -> None:
        """Make the open containers that hold ``outcome`` due now: it has waited its linger
        already (held back by per-key ordering behind its key's earlier records)."""
        shard_map = stream.map
        hash_key = outcome.hash_key
        index = bisect_right(shard_map.starts, hash_key) - 1
        if index < 0 or hash_key > shard_map.ends[index]:
            index = 0  # as place() does for a gap in a stale map
        self._due_now(stream, stream.shards[index], now)

    def send_early(self, stream: StreamState, now: float) -> None:
        """A request's worth (``early_size``) was placed in the stream's open containers
        within this linger window: make them all due now, unless more than that is sealed
        and unresolved already. At a steady high rate the window's records then go in
        several requests as they come, not all at its end (where their sealing, signing and
        round trip would add to the wait of every one of them); in a burst, nothing
        changes."""
        stream.window_bytes = 0
        # the shards holding records only (a stream's shards may be thousands, most empty)
        shards = list(stream.open_shards)
        held = sum(shard.sizer.size + shard.plain_bytes for shard in shards)
        if self.outstanding.bytes - held > self.early_size:
            # More than a window's worth is sealed and not written yet: the producer is
            # behind (a burst). Sending now would only cut the aggregates smaller; they fill
            # as usual and the window ends as usual.
            return
        for shard in shards:
            self._due_now(stream, shard, now)

    def _due_now(self, stream: StreamState, shard: ShardBuffer, now: float) -> None:
        if shard.is_empty() or shard.open_deadline <= now:
            return
        shard.open_until(now)
        for krec in shard.plain:
            krec.due_by(now)
        self._wake(stream, shard)

    def _wake(self, stream: StreamState, shard: ShardBuffer) -> None:
        # during a flush, containers opened now are due now (records placed again, or let
        # go by per-key ordering after their key's earlier ones were written)
        at = -_INF if self.flushing else shard.open_deadline
        if at < stream.wake_told:
            # Told only if earlier than the stream's timer wakes anyway: its last pass, or
            # a Wake since, woke it by then, and that pass sees every shard holding records.
            # A window's shards all open for the same deadline: on a stream of thousands
            # of shards, one Wake per window, not one per shard (so per record).
            stream.wake_told = at
            self.outbox.push(Wake(stream, shard, at))

    def timer_sleeps(self, stream: StreamState, until: float) -> None:
        """The stream's linger timer passed over its shards and sleeps ``until`` (the next
        deadline of those holding records; ``inf``: none): a shard whose containers are due
        no earlier needs no ``Wake``."""
        stream.wake_told = until

    def reroute(self, stream: StreamState, batch: list[KRecord], now: float) -> None:
        """Place the unresolved records of ``batch`` anew (by the stream's current map)."""
        for krec in batch:
            unpack(krec)
            for outcome in krec.members:
                if outcome.resolution is None:
                    self.place(stream, outcome, key_length(outcome), now, False)

    def _add_member(
        self,
        stream: StreamState,
        shard: ShardBuffer,
        outcome: Record,
        grow: int,
        now: float,
        rerouted: bool,
    ) -> None:
        pk = outcome.partition_key
        assert pk is not None  # only keyed records are aggregated
        shard.sizer.add(pk, outcome.explicit_hash_key, grow)
        if shard.open_deadline == _INF:
            self._open(stream, shard, now)
        if rerouted:
            shard.rerouted_into()
        shard.members.append(outcome)
        parts = shard.parts
        if parts is not None:
            if outcome.explicit_hash_key is None:
                # encoded now, as ``add`` does: in a burst every aggregate but a shard's
                # first starts here (its first record is the one the full one left out)
                data = outcome.data
                assert data is not None
                n = len(data)
                key_index = shard.sizer.pks[pk]
                parts += (record_header(key_index, n, 2 + _vlen(key_index) + _vlen(n) + n), data)
            else:  # the seal encodes the members, with their explicit hash keys
                shard.unencoded()
        self._count_window(stream, grow, now)

    def _count_window(self, stream: StreamState, size: int, now: float) -> None:
        """``size`` bytes more in the stream's open containers in this linger window; at
        ``early_size``, :meth:`send_early` (``add`` does the same inline)."""
        stream.window_bytes += size
        if stream.window_bytes >= self.early_size:
            self.send_early(stream, now)

    def _open(self, stream: StreamState, shard: ShardBuffer, now: float) -> None:
        deadline = self.deadline(now)
        if deadline != stream.window_end:  # the first containers of a new window
            stream.window_end = deadline
            stream.window_bytes = 0
        shard.open_until(deadline)
        self._wake(stream, shard)

    def deadline(self, now: float) -> float:
        """The linger deadline of containers opened at ``now``: the end of the window of
        length ``linger`` that holds ``now`` (in ``(now, now + linger]``)."""
        linger = self.linger
        if linger <= 0:
            return now
        return (math.floor(now / linger) + 1) * linger

    def due(self, shard: ShardBuffer, now: float, flushing: bool) -> bool:
        """Must the shard's open containers seal now (linger deadline passed, or a flush)?"""
        return not shard.is_empty() and (flushing or now >= shard.open_deadline)

    def wake_at(self, shard: ShardBuffer, flushing: bool) -> float:
        """When the shard's worker must wake up if nothing arrives before."""
        if shard.retired:
            return -_INF
        if shard.is_empty():
            return _INF
        return -_INF if flushing else shard.open_deadline

    def seal(self, shard: ShardBuffer) -> list[KRecord]:
        """Close the shard's open containers into a batch of Kinesis records."""
        deadline = shard.open_deadline
        members, batch, sizer, parts, rerouted = shard.take()
        if members:
            if len(members) == 1:
                only = members[0]
                data = only.data
                assert data is not None
                if only.lane is None and only.resolution is None:
                    shard.lane.charge(only, only.arrival)  # charged at the seal (``add``)
                batch.append(
                    KRecord(
                        members,
                        data,
                        only.partition_key,
                        only.explicit_hash_key,
                        only.size,
                        shard,
                        deadline,
                        False,
                    )
                )
            else:
                krec = _aggregate(members, shard, deadline, bool(sizer.ehks), parts, sizer.pks)
                if rerouted:  # re-routed members may be older than the first one
                    krec.waiting_since(min(o.arrival for o in members))
                batch.append(krec)
            sizer.clear()  # (encoded: the shard's next aggregate starts in it)
        return batch

    def seal_into_channel(self, shard: ShardBuffer) -> None:
        """Seal the shard's containers and queue the batch for its worker (a ``Queue``
        effect, counted in ``shard.queued``)."""
        self.queue(shard, self.seal(shard))

    def queue(self, shard: ShardBuffer, batch: list[KRecord]) -> None:
        """Queue ``batch`` for the shard's worker."""
        shard.queued_one()
        self.outbox.push(Queue(shard, batch))

    def batch_has_room(self, count: int, size: int) -> bool:
        """Should a shard worker take more queued batches into this one (up to a request)?"""
        return count < self.coll_max_count and size < self.coll_max_size


def track(stream: StreamState) -> None:
    """Start the accumulator's own fields of a stream: the bytes placed within its linger
    window and the window's end (the per-record path adds to them directly), and when its
    linger timer wakes at the latest (``Accumulator.timer_sleeps``; none yet: every
    deadline is told)."""
    stream.window_bytes = 0
    stream.window_end = -_INF
    stream.wake_told = _INF


def key_length(outcome: Record) -> int:
    """The UTF-8 length of a record's partition key (0 without one)."""
    pk = outcome.partition_key
    return 0 if pk is None else len(pk.encode())


def plain(outcome: Record, shard: ShardBuffer, deadline: float = -_INF) -> KRecord:
    """A Kinesis record holding one user record on its own."""
    data = outcome.data
    assert data is not None
    return KRecord(
        [outcome],
        data,
        outcome.partition_key,
        outcome.explicit_hash_key,
        outcome.size,
        shard,
        deadline,
        False,
    )


def unaggregate(batch: list[KRecord]) -> list[KRecord]:
    """Aggregates split into plain records (while the shard map is known to be stale)."""
    if not any(k.aggregated for k in batch):
        return batch
    out: list[KRecord] = []
    for krec in batch:
        if krec.aggregated:
            unpack(krec)
            out.extend(plain(o, krec.shard) for o in krec.members if o.resolution is None)
        else:
            out.append(krec)
    return out


def expired_in(batch: list[KRecord], now: float, ttl: float) -> list[Record]:
    """The records of ``batch`` whose ``ttl`` has passed."""
    return [o for krec in batch for o in krec.live() if o.arrival + ttl <= now]


def prune(batch: list[KRecord], together: bool) -> list[KRecord]:
    """``batch`` without its resolved records (expired, or failed after their key's).

    An aggregate that lost some members is sent as one plain record per member left, or
    with ``together`` (per-key ordering: a key's records stay in one Kinesis record) as one
    aggregate of them.
    """
    keep: list[KRecord] = []
    for krec in batch:
        live = krec.live()
        if len(live) == len(krec.members):
            keep.append(krec)
        elif live:
            keep += regroup(krec, live) if together else _alone(krec, live)
    return keep


def _alone(krec: KRecord, live: list[Record]) -> list[KRecord]:
    unpack(krec)
    return [plain(o, krec.shard) for o in live]


def regroup(krec: KRecord, live: list[Record]) -> list[KRecord]:
    """The members left of an aggregate (``live``, in order), sealed again as one."""
    if len(live) == 1:
        return _alone(krec, live)
    unpack(krec)
    with_ehks = any(o.explicit_hash_key is not None for o in live)
    again = _aggregate(live, krec.shard, krec.send_by, with_ehks)
    again.waiting_since(krec.since)
    return [again]


def _aggregate(
    members: list[Record],
    shard: ShardBuffer,
    deadline: float,
    with_ehks: bool,
    parts: list[bytes] | None = None,
    keys: Iterable[str] = (),
) -> KRecord:
    """A KPL aggregate of ``members`` (each with its data), which holds their data from now:
    one copy in memory, not two. ``unpack`` gives it back to the members if they must go
    another way (or fail: the ledger finds the aggregate by ``_agg``). ``parts``: the
    members already encoded (``encode_parts``, with the key table ``keys``), if they were."""
    if parts is not None and not with_ehks:
        blob = encode_parts(keys, parts)
    else:
        blob = encode_records(
            [o.data for o in members],  # type: ignore[misc]
            [o.partition_key for o in members],  # type: ignore[misc]
            [o.explicit_hash_key for o in members] if with_ehks else None,
        )
    krec = KRecord(
        members,
        blob,
        AGG_PARTITION_KEY,
        str(members[0].hash_key),
        len(blob) + len(AGG_PARTITION_KEY),
        shard,
        deadline,
        True,
    )
    lane = shard.lane
    lane.sealed(*sealed_into(members, krec, lane))
    return krec


def unpack(krec: KRecord) -> None:
    """Give an aggregate's unresolved members their data back from the aggregate.

    Sealing drops the members' copies (the aggregate holds the bytes); a member that must be
    sent another way (split after a reshard, re-routed, or re-sent alone) needs its own.
    """
    if not krec.aggregated:
        return
    members = krec.members
    if all(o.data is not None or o.resolution is not None for o in members):
        return
    records = deaggregate(krec.data, krec.partition_key or "")
    if len(records) != len(members):  # pragma: no cover - our own encoding
        raise AssertionError("an aggregate does not decode to its members")
    for outcome, record in zip(members, records, strict=True):
        if outcome.data is None and outcome.resolution is None:
            outcome.unsealed(record.data)
