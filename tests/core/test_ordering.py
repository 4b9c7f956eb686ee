"""Per-key ordering (``ordering="per_key"``): the rule in ``_ordering``, driven through the
engine without an event loop (a recording shell, the time passed in), and a seeded
simulation of a faulty service that checks the order a consumer would see."""

from __future__ import annotations

import contextlib
import random
from dataclasses import dataclass, field
from typing import Any

import pytest

from kinesis_trio import Outcome, deaggregate
from kinesis_trio._config import ProducerConfig
from kinesis_trio._core._effects import NoRoom
from kinesis_trio._core._engine import Engine
from kinesis_trio._core._pipeline_data import KRecord, ShardBuffer, StreamState
from kinesis_trio._core._shards import Shard, ShardMap, hash_key_for
from kinesis_trio._core._stream_policy import AUTO, StreamFacts
from kinesis_trio._errors import (
    ProvisionedThroughputExceededError,
    RequestTimeoutError,
    ServiceError,
)
from kinesis_trio._results import PRECEDING_FAILED
from kinesis_trio.testing import FakeKinesis, Faults
from tests.support.engine import MAX_HASH, RecordingShell, engine, retry_due, shell_of
from tests.support.helpers import fake_producer, stream_state

THROTTLED = {"ErrorCode": "ProvisionedThroughputExceededException", "ErrorMessage": "slow down"}


def ordered(shards: int = 1, **config: Any) -> tuple[Engine[Outcome], RecordingShell, StreamState]:
    return engine(shards=shards, ordering="per_key", **config)


def sealed(eng: Engine[Outcome], stream: StreamState) -> list[KRecord]:
    """What the engine sealed since the last call, and what it holds, sealed now."""
    shell = shell_of(eng)
    assert isinstance(shell, RecordingShell)
    out = [k for _, batch in shell.sealed_batches for k in batch]
    for shard, _ in shell.sealed_batches:
        eng.out.taken(shard, 1)
    shell.sealed_batches.clear()
    for shard in stream.shards:
        out += eng._acc.seal(shard)
    return out


def answer_ok(
    eng: Engine[Outcome], stream: StreamState, krecs: list[KRecord], seq: int = 1
) -> None:
    entries = [
        {"ShardId": k.shard.shard_id, "SequenceNumber": str(seq + i)} for i, k in enumerate(krecs)
    ]
    eng.apply_answer(stream, krecs, {"Records": entries}, 1.0, 1.1)


def test_unordered_is_the_default_and_has_no_rule() -> None:
    eng, _shell, _stream = engine()
    assert eng._order is None and eng._endings.order is None and eng._place is eng._acc
    with pytest.raises(ValueError, match="ordering must be 'none' or 'per_key'"):
        ProducerConfig(ordering="by_key")


def test_a_key_has_one_unconfirmed_record_the_next_waits_for_it() -> None:
    eng, _shell, stream = ordered(aggregation_enabled=False)
    first = eng.accept(stream, b"1", "a", None, 0.0)
    second = eng.accept(stream, b"2", "a", None, 0.0)
    other = eng.accept(stream, b"x", "b", None, 0.0)
    krecs = sealed(eng, stream)
    assert [k.members for k in krecs] == [[first], [other]]  # "a"'s second waits
    assert eng._ledger.records == 3 and eng._order is not None and eng._order.pending() == 1
    answer_ok(eng, stream, krecs)
    assert first.result().ok and other.result().ok and not second.done()
    [again] = sealed(eng, stream)
    assert again.members == [second]
    answer_ok(eng, stream, [again], seq=5)
    assert second.result().sequence_number == "5" and eng._order.tables["s"] == {}


def test_a_record_that_waited_its_linger_for_its_key_goes_at_once() -> None:
    eng, _shell, stream = ordered(aggregation_enabled=False, record_max_buffered_time=0.1)
    eng.accept(stream, b"1", "a", None, 0.0)
    second = eng.accept(stream, b"2", "a", None, 0.01)
    [first] = sealed(eng, stream)
    eng.accept(stream, b"x", "b", None, 1.02)  # opens the containers: deadline 1.1
    shard = stream.shards[0]
    assert shard.open_deadline > 1.05
    entry = {"ShardId": shard.shard_id, "SequenceNumber": "1"}
    eng.apply_answer(stream, [first], {"Records": [entry]}, 1.0, 1.05)
    # "a"'s second waited 1.04 s, more than its linger: its containers are due now
    assert shard.open_deadline == 1.05 and all(k.send_by <= 1.05 for k in shard.plain)
    assert [k.members for k in shard.plain][-1] == [second]
    eng.accept(stream, b"3", "c", None, 1.06)
    assert shard.open_deadline == 1.05  # still due


def test_a_key_s_records_share_one_aggregate_and_the_rest_wait() -> None:
    eng, shell, stream = ordered(aggregation_max_count=3)
    outs = [eng.accept(stream, b"%d" % i, "a", None, 0.0) for i in range(5)]
    # three join the aggregate; the fourth finds it full: it is sealed at once and the
    # fourth and fifth wait for it to be written
    assert len(shell.sealed_batches) == 1
    [agg] = sealed(eng, stream)
    assert agg.aggregated and agg.members == outs[:3]
    answer_ok(eng, stream, [agg])
    [agg2] = sealed(eng, stream)
    assert agg2.members == outs[3:]
    answer_ok(eng, stream, [agg2], seq=2)
    assert [o.result().sequence_number for o in outs] == ["1", "1", "1", "2", "2"]
    assert [o.result().sub_sequence_number for o in outs] == [0, 1, 2, 0, 1]


def test_a_throttled_record_is_retried_before_the_next_of_its_key_goes() -> None:
    eng, shell, stream = ordered(aggregation_enabled=False)
    first = eng.accept(stream, b"1", "a", None, 0.0)
    second = eng.accept(stream, b"2", "a", None, 0.0)
    [krec] = sealed(eng, stream)
    eng.apply_answer(stream, [krec], {"Records": [THROTTLED]}, 1.0, 1.1)
    assert not first.done() and not second.done()
    assert sealed(eng, stream) == []  # nothing of "a" goes while its first is unconfirmed
    due = retry_due(eng, stream, max(shell.retries))
    [[retry]] = due.values()
    assert retry.members == [first]
    answer_ok(eng, stream, [retry], seq=3)
    [after] = sealed(eng, stream)
    assert after.members == [second]


def test_a_record_that_fails_for_good_fails_the_rest_of_its_key() -> None:
    eng, _shell, stream = ordered(aggregation_enabled=False, fail_if_throttled=True)
    first = eng.accept(stream, b"1", "a", None, 0.0)
    rest = [eng.accept(stream, b"%d" % i, "a", None, 0.0) for i in (2, 3)]
    other = eng.accept(stream, b"x", "b", None, 0.0)
    krecs = sealed(eng, stream)
    eng.apply_answer(
        stream, krecs, {"Records": [THROTTLED, {"ShardId": "x", "SequenceNumber": "1"}]}, 1.0, 1.1
    )
    assert first.result().error_code == "ProvisionedThroughputExceededException"
    for o in rest:
        result = o.result()
        assert result.error_code == PRECEDING_FAILED and "partition key 'a'" in (
            result.error_message or ""
        )
    assert other.result().ok
    assert eng._ledger.records == 0
    # the key starts afresh: a record put now goes at once
    later = eng.accept(stream, b"4", "a", None, 2.0)
    [krec] = sealed(eng, stream)
    assert krec.members == [later]


def test_an_expired_record_fails_its_key_s_later_ones_and_the_others_stay_one_aggregate() -> None:
    eng, _shell, stream = ordered(record_ttl=5.0)
    old = eng.accept(stream, b"old", "a", None, 0.0)
    b1 = eng.accept(stream, b"b1", "b", None, 1.0)
    young = eng.accept(stream, b"young", "a", None, 4.0)
    b2 = eng.accept(stream, b"b2", "b", None, 4.0)
    [agg] = sealed(eng, stream)
    shard = stream.shards[0]
    batch = eng.out.batch(stream, shard, [agg], 5.5)
    assert old.result().error_code == "RecordExpired"
    assert young.result().error_code == PRECEDING_FAILED
    [again] = batch
    assert again.aggregated and again.members == [b1, b2]
    assert [r.data for r in deaggregate(again.data, "a")] == [b"b1", b"b2"]
    answer_ok(eng, stream, batch)
    assert b1.result().ok and b2.result().ok


def test_a_stale_map_sends_one_plain_record_per_key_and_the_rest_wait() -> None:
    eng, _shell, stream = ordered()
    a = [eng.accept(stream, b"a%d" % i, "a", None, 0.0) for i in range(3)]
    b = eng.accept(stream, b"b", "b", None, 0.0)
    [agg] = sealed(eng, stream)
    stream.stale = True
    out = eng.out.check(stream, [agg], 1.0)
    assert [(k.members, k.aggregated) for k in out] == [([a[0]], False), ([b], False)]
    stream.stale = False  # the map was reloaded: "a"'s next ones go together
    answer_ok(eng, stream, out)
    [next_run] = sealed(eng, stream)
    assert next_run.aggregated and next_run.members == a[1:]


def test_a_retired_shard_s_records_are_placed_again_with_their_key_s_run() -> None:
    eng, shell, stream = ordered()
    a = [eng.accept(stream, b"a%d" % i, "a", None, 0.0) for i in range(2)]
    half = (MAX_HASH + 1) // 2
    children = ShardMap(
        [Shard("shardId-000000000001", 0, half - 1), Shard("shardId-000000000002", half, MAX_HASH)]
    )
    eng._maps.apply_facts(stream, StreamFacts("s"), children, 1.0)
    assert shell.retired_shards
    placed = [o for s in stream.shards for o in s.members]
    assert placed == a  # both in the one child that holds "a": one Kinesis record still
    late = eng.accept(stream, b"a2", "a", None, 1.0)
    [agg] = sealed(eng, stream)
    assert agg.members == [*a, late]


def test_an_aggregate_outside_its_range_is_sent_again_as_its_keys_runs() -> None:
    eng, _shell, stream = ordered()
    a = [eng.accept(stream, b"a%d" % i, "a", None, 0.0) for i in range(2)]
    z = eng.accept(stream, b"z", "z", str(MAX_HASH), 0.0)
    [agg] = sealed(eng, stream)
    stream.known["shardId-000000000009"] = (0, 10)  # a child that holds neither
    answer = {"Records": [{"ShardId": "shardId-000000000009", "SequenceNumber": "7"}]}
    eng.apply_answer(stream, [agg], answer, 1.0, 1.1)
    assert not any(o.done() for o in (*a, z))
    # the map is stale now: plain records, the key's first alone
    stream.stale = False
    again = sealed(eng, stream)
    assert [k.members for k in again] == [[a[0], a[1], z]] or [k.members for k in again] == [
        [a[0]],
        [z],
    ]


def test_per_key_is_refused_on_an_auto_stream_at_load_and_when_a_refresh_shows_it() -> None:
    eng, _shell, stream = ordered(facts=StreamFacts("s", strategy=AUTO))
    with pytest.raises(ValueError, match="AUTO"):
        eng.accept(stream, b"x", "a", None, 0.0)
    assert eng._ledger.records == 0
    eng2, _shell2, stream2 = ordered()
    kept = eng2.accept(stream2, b"x", "a", None, 0.0)
    eng2._maps.apply_facts(stream2, StreamFacts("s", strategy=AUTO), stream2.map, 1.0)
    with pytest.raises(ValueError, match="RecordDistributionStrategy is AUTO"):
        eng2.accept(stream2, b"y", "a", None, 1.0)
    assert not kept.done() and eng2._ledger.records == 1  # what was accepted goes on
    plain_eng, _s, plain_stream = engine(facts=StreamFacts("s", strategy=AUTO))
    assert not plain_eng.accept(plain_stream, b"x", None, None, 0.0).done()


def test_a_put_that_must_wait_for_room_changes_nothing() -> None:
    eng, _shell, stream = ordered(shard_queue_size=1, aggregation_max_count=1)
    eng.accept(stream, b"1", "a", None, 0.0)
    eng.accept(stream, b"2", "b", None, 0.0)  # seals "a"'s: the queue is full now
    assert stream.shards[0].queued == 1
    with pytest.raises(NoRoom):
        eng.accept(stream, b"3", "c", None, 0.0)
    assert eng._order is not None and "c" not in eng._order.tables["s"]
    assert eng._ledger.records == 2


# -- a seeded simulation: faults, a reshard, the consumer's view ------------------------------


@dataclass
class Service:
    """A Kinesis stream in miniature: it routes by the true map, writes or refuses each
    entry at random, and keeps each shard's records as a consumer (KCL) would read them."""

    rand: random.Random
    shards: list[Shard]
    seq: int = 0
    born: int = 100
    #: (sequence number, sub-sequence or 0, data) a consumer reads, per partition key
    read: dict[str, list[tuple[int, int, bytes]]] = field(default_factory=dict)

    def route(self, krec: KRecord) -> Shard:
        h = int(krec.ehk) if krec.ehk is not None else hash_key_for(krec.partition_key or "")
        return next(s for s in self.shards if s.start <= h <= s.end)

    def write(self, krec: KRecord) -> tuple[str, int]:
        shard = self.route(krec)
        self.seq += 1
        if krec.aggregated:
            members = deaggregate(krec.data, krec.partition_key or "")
            hashes = [
                int(m.explicit_hash_key) if m.explicit_hash_key else hash_key_for(m.partition_key)
                for m in members
            ]
            # the KCL drops a whole aggregate when a member hashes outside its shard
            if all(shard.start <= h <= shard.end for h in hashes):
                for sub, m in enumerate(members):
                    self.read.setdefault(m.partition_key, []).append((self.seq, sub, m.data))
        else:
            self.read.setdefault(krec.partition_key or "", []).append((self.seq, 0, krec.data))
        return shard.shard_id, self.seq

    def split(self) -> None:
        """Split the widest open shard into two children (new shard ids)."""
        widest = max(self.shards, key=lambda s: s.end - s.start)
        mid = (widest.start + widest.end) // 2
        n = self.born
        self.born += 2
        self.shards = [s for s in self.shards if s is not widest] + [
            Shard(f"shardId-{n:012d}", widest.start, mid),
            Shard(f"shardId-{n + 1:012d}", mid + 1, widest.end),
        ]
        self.shards.sort(key=lambda s: s.start)

    def merge(self) -> None:
        """Merge the first two adjacent open shards."""
        if len(self.shards) < 2:
            return
        a, b = self.shards[0], self.shards[1]
        n = self.born
        self.born += 1
        self.shards = [Shard(f"shardId-{n:012d}", a.start, b.end), *self.shards[2:]]


@dataclass
class Run:
    """What a simulated run saw: its figures, and each break of per-key order."""

    records: int = 0
    written: int = 0
    failed: int = 0
    after_failure: int = 0
    copies: int = 0
    reshards: int = 0
    disorder: list[str] = field(default_factory=list)
    #: admission by time was on (it may hold puts the simulated endpoint would not confirm)
    admission: bool = False


def simulate(seed: int, steps: int = 400, ordering: str = "per_key") -> Run:
    """A producer against a faulty stream that splits and merges: every record resolved,
    and what a consumer reads checked for order."""
    rand = random.Random(seed)
    run = Run()
    eng, shell, stream = engine(
        ordering=ordering,
        shards=2,
        record_ttl=rand.choice([2.0, 30.0]),
        # admission by time refuses what the simulated endpoint's pace would not confirm
        # in time: with it on and off, whatever is accepted stays in order
        admission_ttl_share=rand.choice([None, 0.5]),
        aggregation_enabled=rand.choice([True, False]),
        aggregation_max_count=rand.choice([2, 5, 1000]),
        collection_max_count=rand.choice([3, 500]),
        fail_if_throttled=rand.random() < 0.2,
        retry_backoff_base=0.02,
        retry_backoff_max=0.2,
    )
    eng._rand.seed(seed)
    run.admission = eng._admission.on
    service = Service(rand, list(stream.map.shards))
    keys = [f"k{i}" for i in range(rand.choice([1, 3, 8]))]
    # some keys are routed by an explicit hash key of their own
    ehks = {k: str(rand.randrange(MAX_HASH)) if rand.random() < 0.3 else None for k in keys}
    put: dict[str, list[Outcome]] = {k: [] for k in keys}
    channel: list[tuple[ShardBuffer, list[KRecord]]] = []
    collector: list[KRecord] = []
    flying: list[list[KRecord]] = []
    refreshes = 0
    now = 0.0

    def take_sealed() -> None:
        for shard, batch in shell.sealed_batches:
            channel.append((shard, batch))
        shell.sealed_batches.clear()

    def forward(shard: ShardBuffer, batch: list[KRecord]) -> None:
        collector.extend(eng.out.batch(stream, shard, batch, now))

    def answer(krecs: list[KRecord]) -> None:
        fate = rand.random()
        if fate < 0.1:  # a 5xx: nothing written
            eng.apply_error(
                stream, krecs, ServiceError("InternalFailure", status_code=500), now, now
            )
            return
        if fate < 0.2:  # a timeout: the service may have written some of it
            for krec in krecs:
                if rand.random() < 0.5:
                    service.write(krec)
            eng.apply_error(
                stream, krecs, RequestTimeoutError("timed out", operation="PutRecords"), now, now
            )
            return
        if fate < 0.23:  # the request throttled as a whole
            error = ProvisionedThroughputExceededError(
                "ProvisionedThroughputExceededException", status_code=400
            )
            eng.apply_error(stream, krecs, error, now, now)
            return
        entries: list[dict[str, str]] = []
        for krec in krecs:
            roll = rand.random()
            if roll < 0.2:
                entries.append(THROTTLED)
            elif roll < 0.25:
                entries.append({"ErrorCode": "InternalFailure", "ErrorMessage": "oops"})
            else:
                shard_id, seq = service.write(krec)
                entries.append({"ShardId": shard_id, "SequenceNumber": str(seq)})
        eng.apply_answer(stream, krecs, {"Records": entries}, now, now)

    def step(putting: bool) -> None:
        nonlocal now, refreshes
        now += rand.choice([0.001, 0.01, 0.05])
        action = rand.random()
        if putting and action < 0.35:
            key = rand.choice(keys)
            with contextlib.suppress(NoRoom):
                put[key].append(
                    eng.accept(
                        stream, b"%s:%d" % (key.encode(), len(put[key])), key, ehks[key], now
                    )
                )
        elif action < 0.5:
            for shard in stream.shards:
                if eng._acc.due(shard, now, not putting):
                    shell.sealed_batches.append((shard, eng._acc.seal(shard)))
            take_sealed()
            while channel:
                shard, batch = channel.pop(0)
                shard.queued -= 1
                forward(shard, batch)
        elif action < 0.6 and collector:
            n = rand.randint(1, len(collector))
            krecs = eng.out.check(stream, collector[:n], now)
            del collector[:n]
            if krecs:
                flying.append(krecs)
        elif action < 0.85 and flying:
            answer(flying.pop(rand.randrange(len(flying))))
        elif action < 0.92:
            for shard, krecs in retry_due(eng, stream, now).items():
                shard.queued += 1
                channel.append((shard, krecs))
        elif action < 0.93 and putting:
            service.split() if rand.random() < 0.6 else service.merge()
            run.reshards += 1
        flying.extend(shell.apart)
        shell.apart.clear()
        take_sealed()
        # a refresh asked for comes a few steps later (the map stays stale meanwhile)
        if (shell.refreshes > refreshes and rand.random() < 0.1) or (not putting and stream.stale):
            refreshes = shell.refreshes
            shard_map = ShardMap(list(service.shards))
            for s in service.shards:
                stream.known[s.shard_id] = (s.start, s.end)
            eng._maps.apply_facts(stream, StreamFacts("s"), shard_map, now)
            eng._maps.verify_pending(stream, now)
            take_sealed()

    for _ in range(steps):
        step(True)
    for _ in range(20_000):
        if not eng._ledger.unresolved():
            break
        step(False)
        while channel:
            shard, batch = channel.pop(0)
            shard.queued -= 1
            forward(shard, batch)
        # the retirement of shards is done by their worker in the real shell
    assert eng._ledger.unresolved() == 0, f"seed {seed}: records left unresolved"
    assert eng._order is None or not any(eng._order.tables.values())

    for key, outs in put.items():
        results = [o.result() for o in outs]
        run.records += len(results)
        run.written += sum(r.ok for r in results)
        run.failed += sum(not r.ok for r in results)
        run.after_failure += sum(r.error_code == PRECEDING_FAILED for r in results)
        run.copies += len(service.read.get(key, [])) - len(
            {d for *_, d in service.read.get(key, [])}
        )
        # what the producer reported: every written record after the ones put before it
        written = [
            (int(o.result().sequence_number or 0), o.result().sub_sequence_number or 0)
            for o in outs
            if o.result().ok
        ]
        assert len(set(written)) == len(written), (seed, key)
        if written != sorted(written):
            run.disorder.append(f"{key}: reported sequence numbers out of put order")
        # what a consumer reads: the first copy of each record, in the order put
        first: list[int] = []
        seen: set[bytes] = set()
        for _seq, _sub, data in sorted(service.read.get(key, [])):
            if data not in seen:
                seen.add(data)
                first.append(int(data.split(b":")[1]))
        if first != sorted(first):
            run.disorder.append(f"{key}: a consumer reads {first}")
        # every record reported written is where its outcome says
        where = {(s, sub): d for s, sub, d in service.read.get(key, [])}
        for i, o in enumerate(outs):
            r = o.result()
            if r.ok:
                at = (int(r.sequence_number or 0), r.sub_sequence_number or 0)
                assert where.get(at) == b"%s:%d" % (key.encode(), i), (seed, key, i)
        # a failed record's later records failed too (none written after a gap)
        codes = [o.result().error_code for o in outs]
        for i, o in enumerate(outs):
            # the next one may only be written if it was put after the failure
            if (
                not o.result().ok
                and i + 1 < len(outs)
                and outs[i + 1].result().ok
                and outs[i + 1].arrival < o.result().resolved_at
            ):
                run.disorder.append(f"{key}: written after a gap ({codes})")
    return run


@pytest.mark.parametrize("seed", range(60))
def test_faults_and_reshards_keep_each_key_in_order(seed: int) -> None:
    run = simulate(seed)
    assert run.records > (10 if run.admission else 50) and run.written > 0  # it did something
    assert run.disorder == [], (seed, run)


def test_the_simulated_faults_do_reorder_an_unordered_producer() -> None:
    """The simulation can fail: the same faults, without the rule, break the order."""
    runs = [simulate(seed, ordering="none") for seed in range(60)]
    assert sum(bool(r.disorder) for r in runs) >= 10
    ordered_runs = [simulate(seed) for seed in range(60)]
    # and the ordered runs saw every kind of trouble
    assert sum(r.failed for r in ordered_runs) > 0
    assert sum(r.after_failure for r in ordered_runs) > 0
    assert sum(r.copies for r in ordered_runs) > 0
    assert sum(r.reshards for r in ordered_runs) > 0


# -- the producer, on both backends, against the fake ------------------------------------------


@pytest.mark.anyio
async def test_a_producer_writes_each_key_in_put_order_through_throttling() -> None:
    fake = FakeKinesis()
    fake.rng.seed(5)
    fake.create_stream("s", 2)
    fake.faults = Faults(throttle_entries=0.3, seed=11)
    keys = [f"k{i}" for i in range(5)]
    config: dict[str, Any] = {
        "ordering": "per_key",
        "record_max_buffered_time": 0.01,
        "aggregation_max_count": 7,
    }
    async with fake_producer(fake, **config) as p:
        outs: dict[str, list[Outcome]] = {k: [] for k in keys}
        for k in keys:  # (no await in a nested comprehension: Python 3.10)
            for i in range(60):
                outs[k].append(await p.put(b"%s:%d" % (k.encode(), i), k))
        await p.flush()
    throttled = [
        o
        for outcomes in outs.values()
        for o in outcomes
        if any(
            a.error_code == "ProvisionedThroughputExceededException" for a in o.result().attempts
        )
    ]
    assert len(throttled) > 10
    for key, outcomes in outs.items():
        results = [o.result() for o in outcomes]
        assert all(r.ok for r in results), key
        at = [(int(r.sequence_number or 0), r.sub_sequence_number or 0) for r in results]
        assert at == sorted(at) and len(set(at)) == len(at), key
        read = [
            d
            for rec in sorted(
                (
                    r
                    for s in fake.streams["s"].shards
                    for r in s.records
                    if r.partition_key in (key, "a")
                ),
                key=lambda r: int(r.sequence_number),
            )
            for d in ([m.data for m in deaggregate(rec.data, rec.partition_key)])
            if d.startswith(key.encode() + b":")
        ]
        assert [int(d.split(b":")[1]) for d in read] == list(range(60)), key


@pytest.mark.anyio
async def test_a_producer_refuses_per_key_on_an_auto_stream() -> None:
    fake = FakeKinesis()
    fake.create_stream("auto", 2, on_demand=True, record_distribution_strategy=AUTO)
    fake.create_stream("keyed", 2, on_demand=True)
    async with fake_producer(fake, None, ordering="per_key") as p:
        with pytest.raises(ValueError, match="RecordDistributionStrategy is AUTO"):
            await p.put(b"x", "k", stream_name="auto")
        kept = await p.put(b"x", "k", stream_name="keyed")
        await p.flush()
        assert kept.result().ok
        # the stream turns AUTO; the refresh that shows it makes put refuse it
        fake.update_record_distribution_strategy("keyed", AUTO)
        pipeline = p._pipeline
        assert pipeline is not None
        assert await pipeline._refresh_once(stream_state(p, "keyed"))
        assert stream_state(p, "keyed").refusal is not None
        with pytest.raises(ValueError, match="AUTO"):
            await p.put(b"y", "k", stream_name="keyed")
