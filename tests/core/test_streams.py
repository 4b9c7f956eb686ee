"""Stream facts and the policy rule (``_stream_policy``), and the engine's use of them.

Sources: botocore's Kinesis model 1.43 (``StreamDescriptionSummary``: ``MaxRecordSizeInKiB``
1024-10240, ``RecordDistributionStrategy`` AUTO / USER_PARTITION_KEY, ``ChannelCount``;
``PutRecordsRequestEntry``: only ``Data`` required, "If the stream uses the AUTO record
distribution strategy, the partition key is optional"; ``StreamARN`` pattern
``arn:aws.*:kinesis:.*:\\d{12}:stream/\\S+``) and the AWS developer guide ("Handle large
records": a stream "can burst up to 10 MiB while averaging 1 MiB per second").
"""

from __future__ import annotations

import pytest

from kinesis_trio import ServiceError
from kinesis_trio._core._limiter import ShardLimiter
from kinesis_trio._core._requests import body
from kinesis_trio._core._shards import ShardMap
from kinesis_trio._core._stream_policy import (
    AUTO,
    AUTO_SHARD_ID,
    StreamFacts,
    parse_stream_arn,
    policy_for,
)
from kinesis_trio._results import RECORD_TOO_LARGE
from tests.support.engine import engine, even_shards, sealed

MIB = 1024 * 1024
ARN = "arn:aws:kinesis:us-east-1:123456789012:stream/orders"


# -- facts -----------------------------------------------------------------------------------


def test_a_summary_without_the_new_fields_is_a_stream_of_before() -> None:
    facts = StreamFacts.from_summary({"StreamName": "s", "OpenShardCount": 2}, "s")
    assert (facts.max_record_size, facts.strategy, facts.channel_count) == (
        MIB,
        "USER_PARTITION_KEY",
        0,
    )


def test_a_summary_of_2026_is_read() -> None:
    facts = StreamFacts.from_summary(
        {
            "StreamName": "s",
            "StreamARN": ARN,
            "StreamModeDetails": {"StreamMode": "ON_DEMAND"},
            "RecordDistributionStrategy": "AUTO",
            "MaxRecordSizeInKiB": 10240,
            "ChannelCount": 2,
            "OpenShardCount": 4,
        },
        "s",
    )
    assert facts == StreamFacts("s", ARN, "ON_DEMAND", AUTO, 10 * MIB, 2, 4)


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("MaxRecordSizeInKiB", 512),
        ("MaxRecordSizeInKiB", 20480),
        ("MaxRecordSizeInKiB", "1024"),
        ("RecordDistributionStrategy", "RANDOM"),
        ("ChannelCount", -1),
        ("OpenShardCount", "4"),
    ],
)
def test_a_malformed_summary_is_a_clear_error(field: str, value: object) -> None:
    with pytest.raises(ServiceError, match=field) as info:
        StreamFacts.from_summary({"StreamName": "s", field: value}, "s")
    assert info.value.code == "MalformedResponse"


# -- the policy ------------------------------------------------------------------------------


def policy(facts: StreamFacts, **settings: object):  # type: ignore[no-untyped-def]
    args: dict[str, object] = {
        "aggregation_enabled": None,
        "channel_aggregation": False,
        "max_record_size": None,
    }
    args.update(settings)
    return policy_for(facts, **args)  # type: ignore[arg-type]


def test_auto_streams_are_not_aggregated_even_when_asked() -> None:
    auto = StreamFacts("s", strategy=AUTO)
    assert not policy(auto).aggregate and policy(auto).auto
    assert "AUTO" in policy(auto).why_not_aggregated and not policy(auto).overridden
    forced = policy(auto, aggregation_enabled=True)
    assert not forced.aggregate and "ignored" in forced.overridden


def test_streams_that_feed_channels_are_not_aggregated_unless_kept() -> None:
    fed = StreamFacts("s", channel_count=1)
    assert not policy(fed).aggregate and "channel" in policy(fed).why_not_aggregated
    assert policy(fed, channel_aggregation=True).aggregate
    assert policy(StreamFacts("s")).aggregate
    assert not policy(StreamFacts("s"), aggregation_enabled=False).aggregate


def test_the_record_limit_is_the_streams_and_a_setting_only_lowers_it() -> None:
    big = StreamFacts("s", max_record_size=10 * MIB)
    assert policy(big).max_record_size == 10 * MIB
    assert policy(big, max_record_size=2 * MIB).max_record_size == 2 * MIB
    assert policy(StreamFacts("s"), max_record_size=4 * MIB).max_record_size == MIB


# -- ARNs ------------------------------------------------------------------------------------


def test_an_arn_is_read_into_its_parts() -> None:
    arn = parse_stream_arn("arn:aws-cn:kinesis:cn-north-1:210987654321:stream/a.b-c_d")
    assert (arn.partition, arn.region, arn.account, arn.name) == (
        "aws-cn",
        "cn-north-1",
        "210987654321",
        "a.b-c_d",
    )


@pytest.mark.parametrize(
    ("arn", "part"),
    [
        ("arn:aws:kinesis:us-east-1:1234:stream/s", "account"),
        ("arn:aws:sqs:us-east-1:123456789012:stream/s", "not a Kinesis ARN"),
        ("arn:aws:kinesis:us-east-1:123456789012:table/s", "does not name a stream"),
        ("arn:aws:kinesis:Mars:123456789012:stream/s", "region"),
        ("arn:foo:kinesis:us-east-1:123456789012:stream/s", "partition"),
        ("orders", "not a stream ARN"),
    ],
)
def test_a_bad_arn_names_what_is_wrong(arn: str, part: str) -> None:
    with pytest.raises(ValueError, match=part):
        parse_stream_arn(arn)


def test_an_arn_of_another_region_is_refused() -> None:
    with pytest.raises(ValueError, match="region eu-west-1, but the producer's client is for"):
        parse_stream_arn(ARN.replace("us-east-1", "eu-west-1"), "us-east-1")


# -- the engine on each kind of stream ---------------------------------------------------------


def test_an_auto_stream_has_one_service_placed_buffer_for_all_its_shards() -> None:
    eng, _shell, stream = engine(StreamFacts("s", strategy=AUTO), shards=4)
    [buffer] = stream.shards
    assert buffer.shard_id == AUTO_SHARD_ID and buffer.anywhere
    assert buffer.limiter.records_rate == pytest.approx(4 * 1000 * 1.5)
    outcomes = [eng.accept(stream, b"x", None, None, 0.0) for _ in range(3)]
    outcomes.append(eng.accept(stream, b"y", "given", None, 0.0))
    krecs = sealed(eng, stream)
    assert not any(k.aggregated for k in krecs) and len(krecs) == 4
    wire = body(stream.json_head, krecs)
    assert wire.count(b'"PartitionKey"') == 1  # the key given is sent, no other
    answer = {
        "Records": [
            {"ShardId": f"shardId-00000000000{i}", "SequenceNumber": str(i)} for i in range(4)
        ]
    }
    eng.apply_answer(stream, krecs, answer, 1.0, 1.1)
    assert all(o.result().ok for o in outcomes)
    assert [o.result().shard_id for o in outcomes] == [f"shardId-00000000000{i}" for i in range(4)]
    assert not stream.stale  # nothing landed "elsewhere": the service places them


def test_a_keyed_stream_refuses_a_record_without_a_key() -> None:
    eng, _shell, stream = engine()
    with pytest.raises(ValueError, match=r"partition_key is required.*USER_PARTITION_KEY"):
        eng.accept(stream, b"x", None, None, 0.0)
    assert eng._ledger.records == 0


def test_a_record_over_the_streams_limit_is_refused_naming_both_figures() -> None:
    eng, _shell, stream = engine(StreamFacts("s", max_record_size=10 * MIB))
    eng.accept(stream, b"x" * (9 * MIB), "k", None, 0.0)  # within the raised limit
    with pytest.raises(ValueError, match=r"10485761 bytes, over max_record_size \(10485760"):
        eng.accept(stream, b"x" * (10 * MIB), "k", None, 0.0)
    eng2, _shell, stream2 = engine()
    with pytest.raises(ValueError, match=r"1572865 bytes.*MaxRecordSizeInKiB 1024"):
        eng2.accept(stream2, b"x" * (3 * MIB // 2), "k", None, 0.0)


def test_a_record_that_could_never_fit_in_memory_is_refused() -> None:
    eng, _shell, stream = engine(
        StreamFacts("s", max_record_size=10 * MIB), max_outstanding_bytes=4 * MIB
    )
    with pytest.raises(ValueError, match=r"over max_outstanding_bytes .* could never"):
        eng.accept(stream, b"x" * (5 * MIB), "k", None, 0.0)
    eng.accept(stream, b"x" * (3 * MIB), "k", None, 0.0)


def test_a_stream_switched_to_auto_places_what_it_buffered_in_its_one_buffer() -> None:
    eng, shell, stream = engine(shards=4)
    outcomes = [eng.accept(stream, b"r%d" % i, f"key{i}", None, 0.0) for i in range(20)]
    assert all(s.members for s in stream.shards)  # aggregates in formation
    eng._maps.apply_facts(stream, StreamFacts("s", strategy=AUTO), ShardMap(even_shards(4)), 1.0)
    assert [s.shard_id for s in stream.shards] == [AUTO_SHARD_ID]
    assert len(shell.retired_shards) == 4
    krecs = eng._acc.seal(stream.shards[0])
    assert sorted(id(o) for k in krecs for o in k.members) == sorted(id(o) for o in outcomes)
    assert not any(k.aggregated for k in krecs)
    assert eng._ledger.records == 20


def test_a_keyless_record_gets_a_key_when_its_stream_leaves_auto() -> None:
    eng, _shell, stream = engine(StreamFacts("s", strategy=AUTO), shards=2)
    outcome = eng.accept(stream, b"x", None, None, 0.0)
    krecs = sealed(eng, stream)
    eng._maps.apply_facts(stream, StreamFacts("s"), ShardMap(even_shards(2)), 1.0)
    sent = eng.out.check(stream, krecs, 1.0)
    assert sent and sent[0].partition_key is not None and len(sent[0].partition_key) == 32
    assert outcome.partition_key == sent[0].partition_key
    assert b'"PartitionKey"' in body(stream.json_head, sent)


def test_a_record_over_a_limit_lowered_after_it_was_accepted_fails_clearly() -> None:
    eng, _shell, stream = engine(
        StreamFacts("s", max_record_size=4 * MIB), admission_ttl_share=None
    )  # two records before any answer, past admission's first allowance (not the subject)
    big = eng.accept(stream, b"x" * (2 * MIB), "k", None, 0.0)
    small = eng.accept(stream, b"y", "k", None, 0.0)
    krecs = sealed(eng, stream)
    eng._maps.apply_facts(stream, StreamFacts("s"), ShardMap(even_shards(1)), 1.0)
    sent = eng.out.check(stream, krecs, 1.0)
    assert big.done() and big.result().error_code == RECORD_TOO_LARGE
    assert "lowered after it was accepted" in (big.result().error_message or "")
    assert not small.done() and [o for k in sent for o in k.members] == [small]


def test_a_raised_limit_takes_effect_at_the_refresh() -> None:
    eng, _shell, stream = engine()
    with pytest.raises(ValueError):
        eng.accept(stream, b"x" * (2 * MIB), "k", None, 0.0)
    eng._maps.apply_facts(
        stream, StreamFacts("s", max_record_size=10 * MIB), ShardMap(even_shards(1)), 1.0
    )
    assert eng.accept(stream, b"x" * (2 * MIB), "k", None, 1.0)
    assert stream.shards[0].limiter.burst_bytes == 10 * MIB


def test_aggregates_stay_within_the_streams_limit() -> None:
    # 2 MB accepted before any answer: past admission's first allowance (not the subject)
    eng, _shell, stream = engine(aggregation_max_size=4 * MIB, admission_ttl_share=None)
    assert stream.agg_max_size == MIB
    for i in range(40):
        eng.accept(stream, b"z" * 50_000, f"k{i}", None, 0.0)
    assert all(k.size <= MIB for k in sealed(eng, stream))


# -- the limiter with large records -------------------------------------------------------------


def test_a_maximum_size_record_passes_and_the_rest_follow_at_the_shards_rate() -> None:
    limiter = ShardLimiter(100, 0.0, burst_bytes=10 * MIB)
    assert limiter.admit([10 * MIB], 0.0) == 1  # a full bucket holds the largest record
    assert limiter.admit([1000], 0.0) == 0  # the bucket is empty now...
    wait = limiter.wait_time([1000], 0.0)
    assert wait < 0.002  # ...and a small record waits only for its own bytes
    assert limiter.admit([1000], wait) == 1


def test_a_large_record_waits_for_its_own_tokens_only() -> None:
    limiter = ShardLimiter(100, 0.0, burst_bytes=10 * MIB)
    assert limiter.admit([1000] * 5, 0.0) == 5
    assert limiter.admit([10 * MIB], 0.0) == 0  # 5,000 bytes short
    wait = limiter.wait_time([10 * MIB], 0.0)
    assert wait == pytest.approx(5000 / MIB, abs=1e-5)
    assert limiter.admit([10 * MIB], wait) == 1
