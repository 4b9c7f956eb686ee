"""Shard maps and resharding (no awaits): swapping maps in, and the KCL's rule for an
aggregate that Kinesis wrote to a shard other than the one it was built for.

An aggregate is routed by its explicit hash key. After a reshard it can land in a shard
whose range does not hold every member's hash key, and a KCL consumer then drops the whole
aggregate (``AggregatorUtil.deaggregate`` removes every sub-record of it). So a member is
reported written only when the shard's range is known and holds them all; otherwise all are
placed again (:func:`~kinesis_trio._core._interpret.kcl_delivers`).
"""

from __future__ import annotations

import random

from .._logging import get_logger
from .._results import R_SHARD_ID, Resolution, resolution_attempt
from ._accumulator import unpack
from ._admission import OFF, Admission
from ._effects import Refresh, RetireShard, StartShard
from ._interpret import kcl_delivers, outside_range, unknown_range
from ._limiter import SHARD_BYTES_PER_SECOND, SHARD_RECORDS_PER_SECOND, ShardLimiter
from ._ordering import refusal
from ._pipeline_data import KRecord, ShardBuffer, StreamState, Unverified
from ._placing import Parts, Placing
from ._shards import MAX_HASH_KEY, Shard, ShardMap, hash_key_for
from ._stream_policy import AUTO_SHARD_ID, StreamFacts, policy_for

__all__ = ["ShardMaps"]

_log = get_logger("kinesis_trio.producer")
#: An AUTO stream's map: one buffer for every hash key (the service picks the shard).
AUTO_MAP = ShardMap([Shard(AUTO_SHARD_ID, 0, MAX_HASH_KEY)])


class ShardMaps(Placing):
    """The streams' shard maps as the engine sees them, and what a change of map means for
    the records buffered, in flight, or written where no map predicted."""

    def __init__(self, parts: Parts, admission: Admission = OFF) -> None:
        super().__init__(parts)
        #: admission by time: each new shard buffer gets a lane of it
        self.admission = admission

    # -- stream facts ---------------------------------------------------------------------

    def apply_facts(
        self, stream: StreamState, facts: StreamFacts, shard_map: ShardMap, now: float
    ) -> None:
        """A stream's facts and open shards, loaded or reloaded: apply its policy
        (``_stream_policy.policy_for``), then the map it implies (an ``AUTO`` stream's is one
        buffer for the whole stream, rate-limited for all of its shards)."""
        config = self.config
        policy = policy_for(
            facts,
            aggregation_enabled=config.aggregation_enabled,
            channel_aggregation=config.channel_aggregation,
            max_record_size=config.max_record_size,
        )
        first = not stream.shards
        before = stream.policy
        why = None
        if config.ordering == "per_key":
            why = refusal(facts)
            if why is not None and stream.refusal is None and not first:
                _log.warning("ordering_refused", stream=stream.name, reason=why)
        stream.adopt(
            facts,
            policy,
            agg_max_size=min(config.aggregation_max_size, policy.max_record_size),
            accept_max=min(policy.max_record_size, config.max_outstanding_bytes),
            shard_count=len(shard_map),
            refusal=why,
            lowered=not first and policy.max_record_size < before.max_record_size,
        )
        for shard in shard_map.shards:
            stream.learn(shard.shard_id, shard.start, shard.end)
        self.apply_map(stream, AUTO_MAP if policy.auto else shard_map, now)
        records, size = self._rates(stream)
        for state in stream.shards:
            state.place_anywhere(policy.auto)
            state.limiter.resize(records, size, policy.max_record_size, now)
            state.paced(stream.agg_max_size)
        if first or policy != before:
            self._say(stream, first)

    def _say(self, stream: StreamState, first: bool) -> None:
        """Log what the stream's policy is and why (once per change)."""
        p, facts = stream.policy, stream.facts
        _log.info(
            "stream_loaded" if first else "stream_changed",
            stream=stream.name,
            record_distribution=facts.strategy,
            stream_mode=facts.mode or None,
            max_record_size=p.max_record_size,
            channels=facts.channel_count,
            aggregation=p.aggregate,
            shards=stream.shard_count,
        )
        if p.why_not_aggregated:
            _log.info("aggregation_off", stream=stream.name, reason=p.why_not_aggregated)
        if p.overridden:
            _log.warning("setting_overridden", stream=stream.name, reason=p.overridden)
        if not facts.known:
            _log.warning(
                "stream_facts_assumed",
                stream=stream.name,
                reason="DescribeStreamSummary was denied: assuming a 1 MiB record limit, "
                "partition-key placement and no channels (allow kinesis:DescribeStreamSummary "
                "for AUTO streams, records over 1 MiB and channels)",
            )

    def _rates(self, stream: StreamState) -> tuple[float, float]:
        """Records/s and bytes/s of one buffer: a shard's, or all of an AUTO stream's."""
        n = stream.shard_count if stream.auto else 1
        return SHARD_RECORDS_PER_SECOND * n, SHARD_BYTES_PER_SECOND * n

    def limiter(self, stream: StreamState, now: float) -> ShardLimiter:
        """The rate limiter of a new buffer of ``stream``."""
        records, size = self._rates(stream)
        return ShardLimiter(
            self.config.rate_limit,
            now,
            records_per_second=records,
            bytes_per_second=size,
            burst_bytes=stream.max_record_size,
        )

    def give_key(self, krec: KRecord, rand: random.Random) -> None:
        """A key for a record put without one to a stream that was ``AUTO`` then and is
        not now (Kinesis requires a key there): a random one, as a placement of the
        service's would be."""
        key = f"{rand.getrandbits(128):032x}"
        krec.keyed(key)
        hash_key = hash_key_for(key)
        for outcome in krec.members:
            outcome.keyed(key, hash_key)

    # -- shard maps -------------------------------------------------------------------------

    def apply_map(self, stream: StreamState, new_map: ShardMap, now: float) -> None:
        """Swap in a new shard map; re-route what was buffered for shards that changed."""
        old = {s.shard_id: s for s in stream.shards}
        # a new shard's lane starts at the pace the stream's shards confirmed at, on average
        # (a lane that never measured one would admit up to the caps)
        paces = [s.lane.rate for s in stream.shards if s.lane.rate]
        pace = sum(paces) / len(paces) if paces else 0.0
        states: list[ShardBuffer] = []
        for shard in new_map.shards:
            stream.learn(shard.shard_id, shard.start, shard.end)
            state = old.pop(shard.shard_id, None)
            if state is None or (state.start, state.end) != (shard.start, shard.end):
                if state is not None:
                    old[shard.shard_id] = state  # same id, new range: retire the old state
                state = ShardBuffer(
                    shard.shard_id,
                    shard.start,
                    shard.end,
                    self.limiter(stream, now),
                    self.admission.lane(stream.name, shard.shard_id, pace),
                    stream.open_shards,
                )
                self.outbox.push(StartShard(stream, state))
            states.append(state)
        stream.use_map(new_map, states)
        for gone in old.values():
            gone.retire()
            self.place.reroute(stream, self.acc.seal(gone), now)
            self.outbox.push(RetireShard(gone))
        if old:
            _log.info(
                "shard_map_changed", stream=stream.name, shards=len(new_map), retired=sorted(old)
            )

    def needs_history(self, stream: StreamState) -> bool:
        """Did an aggregate land in a shard no map showed (born and closed between two
        reloads)? Then the stream's closed shards must be listed too."""
        return any(u.res[R_SHARD_ID] not in stream.known for u in stream.unverified)

    def learn_shards(self, stream: StreamState, shards: list[Shard]) -> None:
        """Remember the hash key ranges of shards (closed ones included)."""
        for shard in shards:
            stream.learn(shard.shard_id, shard.start, shard.end)

    def landed_elsewhere(
        self, stream: StreamState, elsewhere: list[tuple[KRecord, Resolution]], now: float
    ) -> None:
        """Records Kinesis wrote to another shard than the one they were sent for."""
        for krec, res in elsewhere:
            # The map was out of date (a reshard), or the shard was retired since.
            if not krec.shard.retired:
                stream.mark_stale()
                self.outbox.push(Refresh(stream))
            if not krec.aggregated:
                self.endings.resolve(krec.members, res)
                continue
            # Kinesis routed the aggregate by its explicit hash key: is it where a KCL
            # consumer will deliver it?
            attempt = resolution_attempt(res)
            assert attempt is not None  # a success carries its attempt
            item = Unverified(krec, res, attempt)
            if res[R_SHARD_ID] in stream.known:
                self.verify(stream, item, now)
            else:
                stream.wait_for_range(item)
                self.outbox.push(Refresh(stream))

    def verify(self, stream: StreamState, item: Unverified, now: float) -> None:
        """Apply the KCL's rule: all the aggregate's members count as written where it
        landed, or none does and all are placed again."""
        krec, res = item.krec, item.res
        shard_id = res[R_SHARD_ID] or ""
        rng = stream.known.get(shard_id)
        if kcl_delivers(rng, krec.members):
            self.endings.resolve(krec.members, res)
            return
        again = krec.live()
        if not again:
            return
        note = outside_range(item.attempt, res, rng is not None, shard_id)
        unpack(krec)
        _log.info(
            "records_resent_after_reshard",
            stream=stream.name,
            shard_id=shard_id,
            records=len(again),
        )
        for outcome in again:
            outcome.attempted(note)
        self.place.reroute(stream, [krec], now)

    def verify_pending(self, stream: StreamState, now: float) -> None:
        """Apply the KCL's rule to the aggregates that waited for a map reload."""
        for item in stream.take_unverified():
            self.verify(stream, item, now)

    def expire_unverified(self, stream: StreamState, now: float) -> None:
        """The map could not be reloaded: expire unverified records past their TTL."""
        at = self.endings.pauses.ttl_now(now)
        for item in stream.take_unverified():
            if item.krec.since + self.ttl <= at:
                members = item.krec.live()
                note = unknown_range(
                    item.attempt, item.res[R_SHARD_ID], "(its shard map could not be reloaded)"
                )
                for o in members:
                    o.attempted(note)
                self.endings.expire(members, now, "its shard map could not be reloaded")
            else:
                stream.wait_for_range(item)

    def note_unverified(self, stream: StreamState, when: str) -> None:
        """The producer stops: note on each unverified aggregate's records that its shard's
        range was never known (they are in the stream; KCL consumers may or may not deliver
        them) and forget them; the ledger fails them next."""
        for item in stream.take_unverified():
            note = unknown_range(item.attempt, item.res[R_SHARD_ID], when)
            for o in item.krec.live():
                o.attempted(note)
