"""Pure parts: shard map lookups, hash keys, explicit hash keys, config validation."""

from __future__ import annotations

import dataclasses
import hashlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kinesis_trio import ProducerConfig
from kinesis_trio._core._shards import (
    MAX_HASH_KEY,
    Shard,
    ShardMap,
    hash_key_for,
    parse_explicit_hash_key,
)


def even_map(n: int) -> ShardMap:
    step = (MAX_HASH_KEY + 1) // n
    return ShardMap(
        Shard(f"s{i}", i * step, MAX_HASH_KEY if i == n - 1 else (i + 1) * step - 1)
        for i in range(n)
    )


def test_hash_key_is_big_endian_md5() -> None:
    assert hash_key_for("a") == int(hashlib.md5(b"a").hexdigest(), 16)
    assert hash_key_for("é") == int(hashlib.md5("é".encode()).hexdigest(), 16)


@given(st.integers(1, 64), st.integers(0, MAX_HASH_KEY))
def test_lookup_finds_the_holding_shard(n: int, key: int) -> None:
    shard_map = even_map(n)
    shard = shard_map.shard_for(key)
    assert shard is not None
    assert shard.start <= key <= shard.end
    # and it is the only one
    assert [s for s in shard_map.shards if s.holds(key)] == [shard]


def test_gaps_and_bounds() -> None:
    shard_map = ShardMap([Shard("b", 100, 199), Shard("a", 0, 49)])
    assert [s.shard_id for s in shard_map.shards] == ["a", "b"]
    assert shard_map.index_for(0) == 0
    assert shard_map.index_for(49) == 0
    assert shard_map.index_for(50) == -1
    assert shard_map.index_for(100) == 1
    assert shard_map.index_for(200) == -1
    with pytest.raises(ValueError, match="overlapping"):
        ShardMap([Shard("a", 0, 10), Shard("b", 10, 20)])
    with pytest.raises(ValueError, match="at least one"):
        ShardMap([])


def test_from_api_keeps_open_shards_only() -> None:
    shard_map = ShardMap.from_api(
        [
            {
                "ShardId": "old",
                "HashKeyRange": {"StartingHashKey": "0", "EndingHashKey": str(MAX_HASH_KEY)},
                "SequenceNumberRange": {"StartingSequenceNumber": "1", "EndingSequenceNumber": "2"},
            },
            {
                "ShardId": "new",
                "ParentShardId": "old",
                "HashKeyRange": {"StartingHashKey": "0", "EndingHashKey": str(MAX_HASH_KEY)},
                "SequenceNumberRange": {"StartingSequenceNumber": "3"},
            },
        ]
    )
    assert [s.shard_id for s in shard_map.shards] == ["new"]
    assert shard_map.shards[0].parent_shard_id == "old"


@given(st.integers(0, MAX_HASH_KEY))
def test_explicit_hash_key_round_trip(value: int) -> None:
    assert parse_explicit_hash_key(str(value)) == value


@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("", "decimal integer"),
        ("-1", "decimal integer"),
        ("01", "decimal integer"),
        ("1.5", "decimal integer"),
        (" 1", "decimal integer"),
        (str(MAX_HASH_KEY + 1), "at most 2\\*\\*128 - 1"),
        ("9" * 40, "decimal integer"),
    ],
)
def test_bad_explicit_hash_keys(value: str, problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        parse_explicit_hash_key(value)
    with pytest.raises(TypeError):
        parse_explicit_hash_key(5)  # type: ignore[arg-type]


def test_config_defaults_are_the_kpl_defaults() -> None:
    config = ProducerConfig()
    # None: aggregate wherever the stream's readers can de-aggregate (not on AUTO streams,
    # nor on streams that feed channels): the KPL 1.0.6 also turns it off on AUTO streams.
    assert config.aggregation_enabled is None
    assert config.aggregation_max_count == 4294967295
    assert config.aggregation_max_size == 51200
    assert config.collection_max_count == 500
    assert config.collection_max_size == 5242880
    assert config.record_max_buffered_time == 0.1
    assert config.record_ttl == 30.0
    assert config.max_connections == 24
    assert config.request_timeout == 6.0
    assert config.connect_timeout == 6.0
    assert config.verify is True
    # None: the stream's MaxRecordSizeInKiB (the KPL's 1 MiB where the stream says nothing)
    assert config.max_record_size is None


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("aggregation_max_count", 0),
        ("aggregation_max_size", 10),
        ("collection_max_count", 501),
        ("collection_max_size", 0),
        ("record_max_buffered_time", -1),
        ("record_ttl", 0),
        ("record_ttl", float("inf")),
        ("max_connections", 0),
        ("request_timeout", "6"),
        ("connect_timeout", float("nan")),
        ("max_outstanding_records", 0),
        ("max_outstanding_bytes", 0),
        ("max_record_size", 11 * 1024 * 1024),
        ("close_timeout", -5),
        ("aggregation_enabled", "yes"),
        ("verify", 3),
        ("max_connections", True),
    ],
)
def test_config_rejects_bad_values_naming_the_field(field: str, value: object) -> None:
    with pytest.raises(ValueError, match=field):
        ProducerConfig(**{field: value})  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("field", "value", "must"),
    [
        ("aggregation_max_size", 10, "at least 64 bytes"),
        ("aggregation_max_size", 11 * 1024 * 1024, "at most 10485760"),
        ("linger_window_bytes", 0, "a positive int"),
        ("record_max_buffered_time", False, "a positive, finite number of seconds"),
        ("shard_map_refresh_interval", 0, "a positive, finite number of seconds"),
        ("ordering", "by_key", "'none' or 'per_key'"),
        ("metrics_level", "all", "'none', 'summary' or 'detailed'"),
        ("metrics_namespace", "", "a non-empty str"),
        ("rate_limit", 0, "a positive percentage of the shard limits"),
        ("aggregation_enabled", "yes", "a bool or None"),
        ("check_access", 1, "a bool"),
        ("verify", 3, "a bool, a CA bundle path or an ssl.SSLContext"),
    ],
)
def test_each_rule_says_what_the_setting_must_be(field: str, value: object, must: str) -> None:
    with pytest.raises(ValueError) as info:
        ProducerConfig(**{field: value})  # type: ignore[arg-type]
    assert str(info.value) == f"ProducerConfig.{field} must be {must}, got {value!r}"


def test_every_rule_names_a_setting_and_takes_its_default() -> None:
    from kinesis_trio._config import _RULES

    assert set(_RULES) <= {f.name for f in dataclasses.fields(ProducerConfig)}
    config = ProducerConfig()
    assert all(check(getattr(config, name)) is None for name, check in _RULES.items())
    assert ProducerConfig(record_max_buffered_time=0).record_max_buffered_time == 0
    assert (
        ProducerConfig(max_record_size=None, shard_map_refresh_interval=None).max_record_size
        is None
    )


def test_config_is_frozen() -> None:
    config = ProducerConfig()
    with pytest.raises(AttributeError):
        config.record_ttl = 5.0  # type: ignore[misc]
    assert config.replace(record_ttl=5.0).record_ttl == 5.0
