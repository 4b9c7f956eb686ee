"""The engine driven without an event loop: a recording shell, the time passed in."""

from __future__ import annotations

import math

from kinesis_trio._core._pipeline_data import KRecord
from kinesis_trio._core._shards import ShardMap
from kinesis_trio._errors import KinesisError
from kinesis_trio._results import Attempt
from tests.support.engine import engine, even_shards, retry_due, sealed

HALF = 2**127


def test_accept_seal_answer_resolves_each_record_once() -> None:
    eng, shell, stream = engine()
    outcomes = [eng.accept(stream, b"r%d" % i, f"k{i}", None, 0.0) for i in range(5)]
    assert eng._ledger.records == 5
    [agg] = sealed(eng, stream)
    assert agg.aggregated and len(agg.members) == 5
    eng.apply_answer(
        stream,
        [agg],
        {"Records": [{"ShardId": agg.shard.shard_id, "SequenceNumber": "9"}]},
        0.0,
        0.1,
    )
    assert all(o.result().ok for o in outcomes)
    assert [o.result().sub_sequence_number for o in outcomes] == [0, 1, 2, 3, 4]
    assert eng._ledger.records == 0 and shell.progress_calls >= 1


def test_the_members_of_an_aggregate_share_its_attempt_a_plain_record_gets_its_own() -> None:
    """An aggregate's successful attempt is built once, when it is written, and shared by
    its members (not once per member awaited); a plain record's is built when asked for."""
    eng, _, stream = engine()
    members = [eng.accept(stream, b"r%d" % i, f"k{i}", None, 0.0) for i in range(3)]
    [agg] = sealed(eng, stream)
    eng.apply_answer(
        stream,
        [agg],
        {"Records": [{"ShardId": agg.shard.shard_id, "SequenceNumber": "9"}]},
        1.0,
        1.5,
    )
    first, second, _ = (o.result() for o in members)
    assert first.attempts == second.attempts == (Attempt(1.0, 1.0, 0.5, True),)
    assert first.attempts[0] is second.attempts[0]
    plain_eng, _, plain_stream = engine(aggregation_enabled=False)
    [alone] = [plain_eng.accept(plain_stream, b"p", "k", None, 0.0)]
    [krec] = sealed(plain_eng, plain_stream)
    assert not krec.aggregated
    plain_eng.apply_answer(
        plain_stream,
        [krec],
        {"Records": [{"ShardId": krec.shard.shard_id, "SequenceNumber": "7"}]},
        1.0,
        1.5,
    )
    assert alone.result().attempts == (Attempt(1.0, 1.0, 0.5, True),)


def test_an_aggregate_written_across_a_split_is_sent_again_whole() -> None:
    eng2, shell2, stream2 = engine()
    members = [
        eng2.accept(stream2, b"m%d" % i, f"key{i}", str(h), 0.0)
        for i, h in enumerate((5, HALF + 5))
    ]
    [agg] = sealed(eng2, stream2)
    assert len(agg.members) == 2
    stream2.known["shardId-000000000001"] = (0, HALF - 1)  # a child that holds one member
    answer = {"Records": [{"ShardId": "shardId-000000000001", "SequenceNumber": "7"}]}
    eng2.apply_answer(stream2, [agg], answer, 1.0, 1.1)
    assert not any(o.done() for o in members)
    for o in members:
        assert o.attempts[-1].error_code == "WrittenOutsideShardRange"
    assert stream2.stale and shell2.refreshes == 1
    replaced = [o for shard in stream2.shards for o in shard.members] + [
        k.members[0] for shard in stream2.shards for k in shard.plain
    ]
    assert sorted(map(id, replaced)) == sorted(map(id, members))


def test_an_aggregate_in_a_shard_that_holds_it_all_is_written() -> None:
    eng, _shell, stream = engine()
    members = [eng.accept(stream, b"m%d" % i, f"key{i}", str(i), 0.0) for i in range(3)]
    [agg] = sealed(eng, stream)
    stream.known["shardId-000000000001"] = (0, HALF - 1)
    answer = {"Records": [{"ShardId": "shardId-000000000001", "SequenceNumber": "7"}]}
    eng.apply_answer(stream, [agg], answer, 1.0, 1.1)
    assert all(o.result().ok and o.result().shard_id == "shardId-000000000001" for o in members)


def test_a_named_bad_entry_fails_alone_and_the_rest_wait_for_their_retry() -> None:
    eng, shell, stream = engine(aggregation_enabled=False)
    outcomes = [eng.accept(stream, b"r%d" % i, f"k{i}", None, 0.0) for i in range(3)]
    krecs = sealed(eng, stream)
    error = KinesisError(
        "ValidationException",
        "Value at 'records.2.member.partitionKey' failed to satisfy constraint",
        status_code=400,
    )
    eng.apply_error(stream, krecs, error, 1.0, 1.1)
    assert [o.done() for o in outcomes] == [False, True, False]
    assert outcomes[1].result().error_code == "ValidationException"
    assert len(shell.retries) == 2  # each record after its own (jittered) backoff
    due = retry_due(eng, stream, max(shell.retries))
    again = [k.members[0] for k in due[stream.shards[0]]]
    assert sorted(again, key=id) == sorted([outcomes[0], outcomes[2]], key=id)


def test_an_unnamed_rejection_is_sent_again_in_halves() -> None:
    eng, shell, stream = engine(aggregation_enabled=False)
    for i in range(5):
        eng.accept(stream, b"r%d" % i, f"k{i}", None, 0.0)
    krecs = sealed(eng, stream)
    error = KinesisError(
        "ValidationException", "Partition key must be between 1 and 256 in length", status_code=400
    )
    eng.apply_error(stream, krecs, error, 1.0, 1.1)
    assert [len(part) for part in shell.apart] == [2, 3]
    assert eng._ledger.records == 5


def test_retries_past_the_ttl_expire_with_their_history() -> None:
    eng, _shell, stream = engine(record_ttl=1.0, aggregation_enabled=False)
    o = eng.accept(stream, b"r", "k", None, 0.0)
    krecs = sealed(eng, stream)
    error = KinesisError("InternalFailure", "boom", status_code=500)
    eng.apply_error(stream, krecs, error, 0.95, 1.0)  # any backoff ends past the TTL
    result = o.result()
    assert result.error_code == "RecordExpired"
    assert [a.error_code for a in result.attempts] == ["InternalFailure"]


def test_close_fails_the_unresolved_and_flags_unverified_aggregates() -> None:
    eng, _shell, stream = engine()
    members = [eng.accept(stream, b"m%d" % i, f"key{i}", str(i), 0.0) for i in range(2)]
    [agg] = sealed(eng, stream)
    answer = {"Records": [{"ShardId": "shardId-000000000009", "SequenceNumber": "7"}]}
    eng.apply_answer(stream, [agg], answer, 1.0, 1.1)  # a shard nobody knows: unverified
    assert len(stream.unverified) == 1
    assert eng.fail_unresolved("ProducerCloseTimeout", "closing", 2.0) == 2
    for o in members:
        result = o.result()
        assert result.error_code == "ProducerCloseTimeout" and result.possible_duplicate


def test_a_new_map_retires_changed_shards_and_places_their_records_anew() -> None:
    eng, shell, stream = engine()
    for i in range(50):
        eng.accept(stream, b"r%d" % i, f"k{i}", None, 0.0)
    old = stream.shards[0]
    eng._maps.apply_map(stream, ShardMap(even_shards(2)), 1.0)
    assert old.retired and shell.retired_shards == [old] and old.is_empty()
    assert len(stream.shards) == 2
    placed = [o for shard in stream.shards for o in shard.members]
    assert len(placed) == 50
    for shard in stream.shards:
        assert all(shard.start <= o.hash_key <= shard.end for o in shard.members)


def test_the_timers_pass_seals_the_due_shards_and_admits_what_their_limiters_let_go() -> None:
    """``out.due_shards`` finds the due shards among those holding records (and the next
    deadline of the others); ``out.seal_due`` seals them and adds what their limiters let go
    now to the timer's message, queueing the rest for its worker (all of it when the
    collector has no room), or leaves it to its worker if it has batches queued."""
    eng, shell, stream = engine(
        shards=4, record_max_buffered_time=0.1, rate_limit=0.2, aggregation_enabled=False
    )
    out = eng.out
    eng.accept(stream, b"a", "k-1", None, 0.01)
    eng.accept(stream, b"b", "k-2", None, 0.15)
    due, wake = out.due_shards(stream, 0.1)
    assert [s.open_deadline for s in due] == [0.1] and wake == 0.2
    [shard] = due
    sent: list[KRecord] = []
    assert out.seal_due(stream, [shard], 0.1, sent) == []
    assert [k.data for k in sent] == [b"a"] and not shell.sealed_batches
    # 0.2 % of 1,000 records/s: a bucket of 2 records, one taken; 0.2 more by 0.2 s
    for data in (b"c", b"d", b"e"):
        eng.accept(stream, data, "k-1", None, 0.12)
    due, wake = out.due_shards(stream, 0.2)
    assert shard in due and len(due) == 2 and wake == math.inf
    assert out.seal_due(stream, [shard], 0.2, sent) == []
    assert [k.data for k in sent] == [b"a", b"c"]
    [(queued_for, rest)] = shell.sealed_batches
    assert queued_for is shard and [k.data for k in rest] == [b"d", b"e"]
    # queued batches go first: its worker's to seal, nothing changed
    eng.accept(stream, b"f", "k-1", None, 0.25)
    assert out.seal_due(stream, [shard], 0.3, sent) == [shard] and not shard.is_empty()
    # no room at the collector: the whole batch is queued
    other = next(s for s in due if s is not shard)
    assert out.seal_due(stream, [other], 0.2, None) == []
    assert [k.data for k in shell.sealed_batches[-1][1]] == [b"b"]


def test_the_timers_pass_expires_what_waited_past_its_ttl_and_sends_the_rest() -> None:
    """A due shard's batch goes through the outgoing checks only when one applies: a record
    past its TTL expires there, and the rest of the pass goes on."""
    eng, _, stream = engine(
        shards=4, record_max_buffered_time=0.1, record_ttl=1.0, aggregation_enabled=False
    )
    old = eng.accept(stream, b"old", "k-1", None, 0.0)
    fresh = eng.accept(stream, b"new", "k-2", None, 1.05)
    sent: list[KRecord] = []
    due, _ = eng.out.due_shards(stream, 1.1)
    assert len(due) == 2
    assert eng.out.seal_due(stream, due, 1.1, sent) == []
    assert [k.data for k in sent] == [b"new"] and not fresh.done()
    result = old.result()
    assert not result.ok and result.error_code == "RecordExpired"
