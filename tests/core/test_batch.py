"""A batch through the engine without an event loop (``_core/_batch``): validated in one
pass, admitted as a whole or not at all, placed as one ``accept`` per record would be."""

from __future__ import annotations

import random
from typing import Any

import pytest

from kinesis_trio import Outcome
from kinesis_trio._core import NoRoom
from kinesis_trio._core._engine import Engine
from kinesis_trio._core._pipeline_data import KRecord, StreamState
from kinesis_trio._core._stream_policy import AUTO, StreamFacts
from kinesis_trio._errors import SpoolWriteError
from tests.support.engine import engine, sealed


def accept_many(
    eng: Engine[Outcome], stream: StreamState, records: Any, now: float = 0.0
) -> list[Outcome]:
    return eng.accept_many(stream, eng.batch(stream, records), now)


def mixed(count: int, seed: int) -> list[tuple[bytes, str, str | None]]:
    """Records of many sizes and keys, some with an explicit hash key."""
    rng = random.Random(seed)
    out = []
    for i in range(count):
        size = rng.choice([1, 20, 200, 200, 3000, 60_000, 300_000])
        ehk = str(rng.randrange(2**128)) if rng.random() < 0.1 else None
        out.append((b"%d:" % i + b"x" * size, f"k{rng.randrange(50)}", ehk))
    return out


def shape(krecs: list[KRecord]) -> list[tuple[bytes, str | None, str | None, list[bytes]]]:
    return [(k.data, k.partition_key, k.ehk, [m.data or b"" for m in k.members]) for k in krecs]


@pytest.mark.parametrize("aggregation", [True, False])
@pytest.mark.parametrize("seed", [1, 2])
def test_a_batch_is_placed_as_one_accept_per_record_would_place_it(
    aggregation: bool, seed: int
) -> None:
    """The same Kinesis records, byte for byte, in the same order on every shard; the same
    counts in the ledger and on the lanes."""
    records = mixed(400, seed)
    config: dict[str, Any] = {"aggregation_enabled": aggregation, "admission_ttl_share": None}
    one, _, one_stream = engine(shards=4, **config)
    many, _, many_stream = engine(shards=4, **config)
    singles = [one.accept(one_stream, d, k, e, 0.0) for d, k, e in records]
    batch = accept_many(many, many_stream, records)
    assert [o.data for o in batch] == [o.data for o in singles]
    assert [o.hash_key for o in batch] == [o.hash_key for o in singles]
    assert shape(sealed(many, many_stream)) == shape(sealed(one, one_stream))
    assert (many._ledger.records, many._ledger.bytes) == (one._ledger.records, one._ledger.bytes)
    lanes = [s.lane.owed for s in many_stream.shards]
    assert lanes == [s.lane.owed for s in one_stream.shards]
    assert many_stream.received == one_stream.received == 400


@pytest.mark.parametrize(
    ("bad", "error", "words"),
    [
        (("text", "k"), TypeError, "data must be bytes"),
        ((b"x" * 2_000_000, "k"), ValueError, "record too large"),
        ((b"x", ["k"]), TypeError, "partition_key"),
        ((b"x", ""), ValueError, "partition_key"),
        ((b"x", "k", "-1"), ValueError, "explicit_hash_key"),
        ((b"x", None), ValueError, "partition_key is required"),
        ((b"x", "k", None, "extra"), TypeError, "got one of 4 items"),
        ({"data": b"x"}, TypeError, "got dict"),
    ],
)
def test_the_first_bad_record_refuses_the_batch_naming_its_index(
    bad: Any, error: type[Exception], words: str
) -> None:
    eng, shell, stream = engine(shards=2)
    records: list[Any] = [(b"ok", "k")] * 3 + [bad] + [(b"fine", "k")] * 2 + [("also bad", "k")]
    with pytest.raises(error, match=r"^records\[3\]: ") as caught:
        eng.batch(stream, records)
    assert words in str(caught.value)
    assert eng._ledger.records == 0 and shell.opened_shards == []


def test_the_error_is_the_one_accept_raises_for_the_record() -> None:
    eng, _, stream = engine()
    with pytest.raises(ValueError) as single:
        eng.accept(stream, b"x" * 2_000_000, "k", None, 0.0)
    with pytest.raises(ValueError) as batch:
        eng.batch(stream, [(b"x" * 2_000_000, "k")])
    assert str(batch.value) == f"records[0]: {single.value}"


def test_an_auto_stream_takes_keyless_records_in_a_batch() -> None:
    eng, _, stream = engine(StreamFacts("s", strategy=AUTO))
    [keyless, keyed] = accept_many(eng, stream, [(b"a", None), (b"b", "k")])
    assert keyless.partition_key is None and keyed.partition_key == "k"
    assert stream.keyless


def test_a_batch_over_the_caps_on_its_own_can_never_be_admitted() -> None:
    eng, _, stream = engine(max_outstanding_records=5, max_outstanding_bytes=10_000)
    with pytest.raises(ValueError, match="a batch of 6 records is over max_outstanding_records"):
        eng.batch(stream, [(b"r", "k")] * 6)
    with pytest.raises(ValueError, match="max_outstanding_bytes"):
        eng.batch(stream, [(b"x" * 4000, "k")] * 3)
    assert len(accept_many(eng, stream, [(b"r", "k")] * 5)) == 5


def test_no_room_for_all_of_it_accepts_none_of_it() -> None:
    eng, shell, stream = engine(max_outstanding_records=10)
    accept_many(eng, stream, [(b"r%d" % i, "k") for i in range(7)])
    opened = len(shell.opened_shards)
    batch = eng.batch(stream, [(b"b%d" % i, "k") for i in range(4)])
    with pytest.raises(NoRoom):
        eng.accept_many(stream, batch, 0.0)
    assert eng._ledger.records == 7 and len(stream.shards[0].members) == 7
    assert len(shell.opened_shards) == opened
    # the same batch, kept while it waited, goes in once there is room for all of it
    [agg] = sealed(eng, stream)
    answer = {"Records": [{"ShardId": agg.shard.shard_id, "SequenceNumber": "1"}]}
    eng.apply_answer(stream, [agg], answer, 0.0, 0.1)
    assert [o.data for o in eng.accept_many(stream, batch, 0.2)] == [b"b%d" % i for i in range(4)]


def test_a_shard_that_admits_nothing_holds_the_whole_batch() -> None:
    """Admission by time: one shard over its allowance holds the batch, though the records
    for the other shards would fit; once admitted, the batch may take a shard past it."""
    eng, _, stream = engine(shards=2, admission_ttl_share=0.3)
    low, high = stream.shards
    allow = low.lane.allow
    with_ehk = [(b"x" * 1000, "k", str(low.start)) for _ in range(int(allow // 1000) + 5)]
    placed = accept_many(eng, stream, with_ehk)  # admitted whole: past the allowance
    assert low.lane.owed + low.sizer.size > allow
    assert low.lane.allow == allow and eng._acc.queue_size == eng._config.shard_queue_size
    both = [(b"a", "k", str(low.start)), (b"b", "k", str(high.start))]
    with pytest.raises(NoRoom):
        accept_many(eng, stream, both)
    assert high.members == [] and high.plain == [] and len(placed) == len(with_ehk)
    assert low.lane.holding  # told it refused one
    assert accept_many(eng, stream, both[1:])[0].data == b"b"


def test_a_full_channel_holds_the_batch() -> None:
    eng, shell, stream = engine(shard_queue_size=1)
    shard = stream.shards[0]
    # a batch admitted whole seals as many aggregates as it fills, past the channel's size
    accept_many(eng, stream, [(b"x" * 300_000, "k")] * 60)
    assert shard.queued > 1
    with pytest.raises(NoRoom):
        accept_many(eng, stream, [(b"r", "k")])
    assert eng._ledger.records == 60 and len(shell.sealed_batches) == shard.queued


def test_per_key_ordering_keeps_a_keys_records_in_order_in_a_batch() -> None:
    one, _, one_stream = engine(ordering="per_key", admission_ttl_share=None)
    many, _, many_stream = engine(ordering="per_key", admission_ttl_share=None)
    records = [(b"%d" % i + b"y" * 200_000, f"k{i % 3}") for i in range(30)]
    for d, k in records:
        one.accept(one_stream, d, k, None, 0.0)
    accept_many(many, many_stream, records)
    assert shape(sealed(many, many_stream)) == shape(sealed(one, one_stream))


def test_a_spool_refusal_or_a_spool_limit_is_the_batchs() -> None:
    eng, _, stream = engine(spool_max_bytes=1_000)
    eng.open_spool(1, 0, 0, False)
    with pytest.raises(ValueError, match=r"^records\[1\]: record too large: .* spool_max_bytes"):
        eng.batch(stream, [(b"a", "k"), (b"x" * 2_000, "k")])
    with pytest.raises(ValueError, match=r"over spool_max_bytes .* as a whole"):
        eng.batch(stream, [(b"x" * 400, "k")] * 3)
    spooled = accept_many(eng, stream, [(b"x" * 400, "k")] * 2)
    assert len(spooled) == 2
    with pytest.raises(NoRoom):  # the spool is full until they leave it
        accept_many(eng, stream, [(b"x" * 400, "k")])
    eng._spool.error = "disk full (test)"  # type: ignore[union-attr]
    with pytest.raises(SpoolWriteError, match="disk full"):
        accept_many(eng, stream, [(b"r", "k")])
    assert eng._ledger.records == 2
