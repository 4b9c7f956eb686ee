"""KPL aggregation codec: golden bytes, protobuf identity, aws-kinesis-agg interop, bad input."""

from __future__ import annotations

import base64
import datetime
import hashlib
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kinesis_trio._core._aggregation import (
    DIGEST_SIZE,
    MAGIC,
    AggregateBuilder,
    UserRecord,
    deaggregate,
    encode_aggregate,
    hash_key_of,
    partition_hash_key,
)
from kinesis_trio.proto import messages_pb2

pb: Any = messages_pb2

Rec = tuple[bytes, str, "str | None"]
MAX_HASH_KEY = 2**128 - 1


def md5(data: bytes) -> bytes:
    return hashlib.md5(data).digest()


def pb_aggregate(records: list[Rec]) -> Any:
    """The same aggregate built with the generated protobuf module (tables in first-seen order)."""
    message = pb.AggregatedRecord()
    pk_index: dict[str, int] = {}
    ehk_index: dict[str, int] = {}
    for data, pk, ehk in records:
        if pk not in pk_index:
            pk_index[pk] = len(pk_index)
            message.partition_key_table.append(pk)
        record = message.records.add(partition_key_index=pk_index[pk], data=data)
        if ehk is not None:
            if ehk not in ehk_index:
                ehk_index[ehk] = len(ehk_index)
                message.explicit_hash_key_table.append(ehk)
            record.explicit_hash_key_index = ehk_index[ehk]
    return message


def pb_encode(records: list[Rec]) -> bytes:
    body: bytes = pb_aggregate(records).SerializeToString()
    return MAGIC + body + md5(body)


def plain(data: bytes, pk: str = "outer") -> list[UserRecord]:
    return [UserRecord(data, pk, None, 0, False, None)]


# --- golden vectors -------------------------------------------------------------------------

# [(b"x", "a", None), (b"", "b", None)]
#   0a 01 61               partition_key_table[0] = "a"   (field 1, LEN, 1 byte)
#   0a 01 62               partition_key_table[1] = "b"
#   1a 05                  records[0]: field 3, LEN, 5 bytes
#      08 00                 partition_key_index = 0 (required: written although 0)
#      1a 01 78              data = "x"
#   1a 04                  records[1]: 4 bytes
#      08 01                 partition_key_index = 1
#      1a 00                 data = "" (required: written although empty)
GOLDEN_1_RECORDS: list[Rec] = [(b"x", "a", None), (b"", "b", None)]
GOLDEN_1_PROTO = "0a0161 0a0162 1a05 0800 1a0178 1a04 0801 1a00"
GOLDEN_1_MD5 = "bbd2e7a5c20b5d28540bfa7139c37fe5"

# [(b"hi", "pk", EHK_MAX), (b"\0", "pk", None), (b"yo", "q", "0")]
#   0a 02 70 6b            partition_key_table[0] = "pk"
#   0a 01 71               partition_key_table[1] = "q"
#   12 27 33 34 ... 35     explicit_hash_key_table[0] = "3402...455" (field 2, LEN, 39 bytes)
#   12 01 30               explicit_hash_key_table[1] = "0"
#   1a 08 | 08 00 | 10 00 | 1a 02 68 69     records[0]: pk 0, ehk 0, "hi"
#   1a 05 | 08 00 | 1a 01 00                records[1]: pk 0 (repeat), no ehk field, "\0"
#   1a 08 | 08 01 | 10 01 | 1a 02 79 6f     records[2]: pk 1, ehk 1, "yo"
EHK_MAX = str(MAX_HASH_KEY)
GOLDEN_2_RECORDS: list[Rec] = [(b"hi", "pk", EHK_MAX), (b"\0", "pk", None), (b"yo", "q", "0")]
GOLDEN_2_PROTO = (
    "0a02706b 0a0171 1227" + EHK_MAX.encode().hex() + " 120130"
    " 1a08 0800 1000 1a026869"
    " 1a05 0800 1a0100"
    " 1a08 0801 1001 1a02796f"
)
GOLDEN_2_MD5 = "df2998e58682f17a6b90ca3346e328c2"

# Two-byte varints: data of 200 bytes, partition key "é" (utf-8 c3 a9).
#   0a 02 c3 a9            partition_key_table[0] = "é" (2 utf-8 bytes)
#   1a cd 01               records[0]: 205 bytes = 0xcd = 0b1_1001101 -> cd 01
#      08 00
#      1a c8 01 ab*200       data: 200 = 0xc8 -> c8 01
GOLDEN_3_RECORDS: list[Rec] = [(b"\xab" * 200, "é", None)]
GOLDEN_3_PROTO = "0a02c3a9 1acd01 0800 1ac801" + "ab" * 200


@pytest.mark.parametrize(
    ("records", "proto_hex", "md5_hex"),
    [
        (GOLDEN_1_RECORDS, GOLDEN_1_PROTO, GOLDEN_1_MD5),
        (GOLDEN_2_RECORDS, GOLDEN_2_PROTO, GOLDEN_2_MD5),
        (GOLDEN_3_RECORDS, GOLDEN_3_PROTO, None),
    ],
)
def test_golden_vectors(records: list[Rec], proto_hex: str, md5_hex: str | None) -> None:
    proto = bytes.fromhex(proto_hex)
    digest = md5(proto)
    if md5_hex is not None:
        assert digest.hex() == md5_hex
    expected = MAGIC + proto + digest
    assert encode_aggregate(records) == expected
    assert pb_aggregate(records).SerializeToString() == proto  # the library agrees
    builder = AggregateBuilder()
    for record in records:
        builder.add(*record)
    assert builder.encode() == expected
    assert builder.size == len(expected)
    assert builder.count == len(builder) == len(records)
    assert [(r.data, r.partition_key, r.explicit_hash_key) for r in deaggregate(expected, "o")] == (
        records
    )


def test_magic_and_digest_constants() -> None:
    assert bytes.fromhex("f3899ac2") == MAGIC
    assert hashlib.md5().digest_size == DIGEST_SIZE


# --- identity with the protobuf library, sizes, round trips ---------------------------------

partition_keys = st.text(min_size=1, max_size=256)
hash_keys = st.one_of(
    st.sampled_from([0, 1, 127, 128, MAX_HASH_KEY]), st.integers(0, MAX_HASH_KEY)
).map(str)
# Mostly small; sometimes around the 4096-byte end of the precomputed length headers.
datas = st.one_of(st.binary(max_size=300), st.binary(min_size=4080, max_size=4110))


@st.composite
def record_lists(draw: st.DrawFn, min_size: int = 0, max_size: int = 40) -> list[Rec]:
    """Records drawn from small key pools, so keys repeat (pools may hold duplicates too)."""
    pks = draw(st.lists(partition_keys, min_size=1, max_size=12))
    ehks = draw(st.lists(hash_keys, min_size=1, max_size=6))
    record = st.tuples(datas, st.sampled_from(pks), st.one_of(st.none(), st.sampled_from(ehks)))
    return draw(st.lists(record, min_size=min_size, max_size=max_size))


@settings(max_examples=300)
@given(record_lists())
def test_encode_is_protobuf_identical_and_sizes_exact(records: list[Rec]) -> None:
    builder = AggregateBuilder()
    assert builder.size == len(builder.encode()) == len(MAGIC) + DIGEST_SIZE
    for data, pk, ehk in records:
        predicted = builder.size_if_added(len(data), pk, len(pk.encode()), ehk)
        before = builder.encode()
        # max_size one byte short: refused, builder untouched; exactly enough: accepted.
        assert builder.add(data, pk, ehk, max_size=predicted - 1) is False
        assert builder.encode() == before
        assert builder.add(data, pk, ehk, max_size=predicted) is True
        assert builder.size == predicted
    encoded = builder.encode()
    assert encoded == pb_encode(records)
    assert builder.size == len(encoded)
    assert builder.count == len(builder) == len(records)
    assert encode_aggregate(records) == encoded


@settings(max_examples=200)
@given(record_lists(min_size=1), st.one_of(st.none(), st.text(max_size=60)))
def test_round_trip(records: list[Rec], sequence_number: str | None) -> None:
    out = deaggregate(encode_aggregate(records), "outer", sequence_number=sequence_number)
    assert out == [
        UserRecord(data, pk, ehk, index, True, sequence_number)
        for index, (data, pk, ehk) in enumerate(records)
    ]


def test_builder_clear_and_reuse() -> None:
    builder = AggregateBuilder()
    builder.add(b"old", "old-key", "5")
    builder.clear()
    assert builder.count == 0
    assert builder.size == len(MAGIC) + DIGEST_SIZE
    for record in GOLDEN_2_RECORDS:
        builder.add(*record)
    assert builder.encode() == pb_encode(GOLDEN_2_RECORDS)


def test_multibyte_varints_and_table_boundaries() -> None:
    # Key indexes past 127 and 2047 (two-byte varints, beyond the precomputed pieces), data
    # lengths around the one/two/three-byte varint and precomputed-header boundaries.
    lengths = [0, 1, 120, 121, 122, 127, 128, 129, 4086, 4090, 4095, 4096, 16383, 16384, 70000]
    records: list[Rec] = [
        (bytes([i % 256]) * lengths[i % len(lengths)], f"key-{i}", str(i * 7919))
        for i in range(2100)
    ]
    records += [(b"again", "key-5", "35"), (b"", "key-2099", None)]
    builder = AggregateBuilder()
    for data, pk, ehk in records:
        predicted = builder.size_if_added(len(data), pk, len(pk.encode()), ehk)
        builder.add(data, pk, ehk)
        assert builder.size == predicted
    encoded = builder.encode()
    assert encoded == pb_encode(records)
    assert len(encoded) == builder.size
    out = deaggregate(encoded, "outer")
    assert [(r.data, r.partition_key, r.explicit_hash_key) for r in out] == records


def test_oversized_record_refused_even_when_empty() -> None:
    builder = AggregateBuilder()
    assert builder.add(b"x" * 100, "k", None, max_size=50) is False
    assert builder.count == 0
    assert builder.add(b"x" * 10, "k", None, max_size=50) is True


# --- cross-checks with aws-kinesis-agg ------------------------------------------------------


def agg_aggregate(records: list[Rec]) -> tuple[str, str | None, bytes]:
    from aws_kinesis_agg.aggregator import RecordAggregator

    aggregator = RecordAggregator()
    for data, pk, ehk in records:
        assert aggregator.add_user_record(pk, data, ehk) is None  # everything fits in one
    agg_record = aggregator.clear_and_get()
    pk_out, ehk_out, blob = agg_record.get_contents()
    return pk_out, ehk_out, blob


@settings(max_examples=100)
@given(record_lists(min_size=1, max_size=25))
def test_aws_kinesis_agg_aggregates_deaggregate_with_ours(records: list[Rec]) -> None:
    outer_pk, _outer_ehk, blob = agg_aggregate(records)
    assert blob == encode_aggregate(records)  # two independent encoders, same bytes
    out = deaggregate(blob, outer_pk, sequence_number="49590338271490256608559692538361571095")
    assert [(r.data, r.partition_key, r.explicit_hash_key) for r in out] == records
    assert [r.sub_sequence_number for r in out] == list(range(len(records)))
    assert all(r.aggregated for r in out)


def agg_deaggregate(blob: bytes, pk: str) -> list[dict[str, Any]]:
    from aws_kinesis_agg.deaggregator import iter_deaggregate_records

    boto3_record = {
        "Data": blob,
        "PartitionKey": pk,
        "SequenceNumber": "49590338271490256608559692538361571095",
        "ApproximateArrivalTimestamp": datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone.utc),
    }
    return list(iter_deaggregate_records([boto3_record], data_format="Boto3"))


@settings(max_examples=100)
@given(record_lists(min_size=1))
def test_our_aggregates_deaggregate_with_aws_kinesis_agg(records: list[Rec]) -> None:
    out = agg_deaggregate(encode_aggregate(records), "outer")
    assert len(out) == len(records)
    first_ehk = next((ehk for _, _, ehk in records if ehk is not None), None)
    for index, ((data, pk, ehk), user_record) in enumerate(zip(records, out, strict=True)):
        kinesis = user_record["kinesis"]
        assert kinesis["aggregated"] is True
        assert kinesis["subSequenceNumber"] == index
        assert base64.b64decode(kinesis["data"]) == data  # it re-encodes data as base64
        assert kinesis["partitionKey"] == pk
        # aws-kinesis-agg quirk: a record without an explicit hash key gets table entry 0
        # (proto2 default index) whenever the table is non-empty; ours reports None.
        assert kinesis["explicitHashKey"] == (ehk if ehk is not None else first_ehk)


def test_aws_kinesis_agg_leaves_our_plain_records_alone() -> None:
    out = agg_deaggregate(b"plain data", "pk")
    assert len(out) == 1
    assert out[0]["kinesis"]["data"] == b"plain data"


# --- foreign and corrupt input: one plain record, never an exception ------------------------

VALID = encode_aggregate(GOLDEN_2_RECORDS)
VALID_PROTO = VALID[len(MAGIC) : -DIGEST_SIZE]


def with_md5(proto: bytes) -> bytes:
    return MAGIC + proto + md5(proto)


@pytest.mark.parametrize(
    "data",
    [
        pytest.param(b"", id="empty"),
        pytest.param(b"hello, world", id="no-magic"),
        pytest.param(MAGIC, id="magic-only"),
        pytest.param(MAGIC + md5(b""), id="magic-and-md5-of-nothing"),
        pytest.param(MAGIC + b"\x01" * 16, id="too-short"),
        pytest.param(b"\xf3\x89\x9a\xc3" + VALID[4:], id="wrong-magic"),
        pytest.param(MAGIC + b"garbage that is not protobuf at all", id="magic-garbage"),
        pytest.param(with_md5(b"\xff\xff\xff\xff"), id="good-md5-bad-proto"),
        pytest.param(with_md5(VALID_PROTO[:-1]), id="good-md5-truncated-proto"),
        pytest.param(MAGIC + VALID_PROTO + b"\0" * 16, id="wrong-md5"),
        pytest.param(VALID[:-1], id="truncated-1"),
        pytest.param(VALID[: len(VALID) // 2], id="truncated-half"),
        pytest.param(VALID + b"\0", id="trailing-byte"),
        pytest.param(with_md5(bytes.fromhex("0a0161 1a02 0800")), id="missing-data"),
        pytest.param(with_md5(bytes.fromhex("0a0161 1a03 1a0178")), id="missing-pk-index"),
        pytest.param(with_md5(bytes.fromhex("0a0161 1a05 0801 1a0178")), id="pk-index-range"),
        pytest.param(with_md5(bytes.fromhex("0a0161 1a07 0800 1000 1a0178")), id="ehk-index-range"),
    ],
)
def test_foreign_or_corrupt_data_is_one_plain_record(data: bytes) -> None:
    assert deaggregate(data, "outer") == plain(data)


def test_plain_record_keeps_outer_keys_and_sequence_number() -> None:
    out = deaggregate(b"x", "pk", explicit_hash_key="42", sequence_number="7")
    assert out == [UserRecord(b"x", "pk", "42", 0, False, "7")]
    assert deaggregate(memoryview(b"abc"), "pk")[0].data == b"abc"


def test_valid_aggregate_without_records_is_empty() -> None:
    assert deaggregate(with_md5(bytes.fromhex("0a0161")), "outer") == []


def test_invalid_utf8_key_is_replaced_like_java() -> None:
    out = deaggregate(with_md5(bytes.fromhex("0a02ff61 1a05 0800 1a0178")), "outer")
    assert out == [UserRecord(b"x", "\ufffda", None, 0, True, None)]


@settings(max_examples=300)
@given(st.binary(max_size=200), st.booleans())
def test_random_bytes_after_magic_never_raise(body: bytes, good_md5: bool) -> None:
    data = with_md5(body) if good_md5 else MAGIC + body
    out = deaggregate(data, "outer")
    assert out == plain(data) or all(r.aggregated for r in out)


# --- hash keys ------------------------------------------------------------------------------


def test_hash_key_of() -> None:
    # md5("a") = 0cc175b9c0f1b6a831c399e269772661
    assert hash_key_of(UserRecord(b"", "a")) == 0x0CC175B9C0F1B6A831C399E269772661
    assert UserRecord(b"", "a").hash_key == 0x0CC175B9C0F1B6A831C399E269772661
    assert hash_key_of(UserRecord(b"", "a", "0")) == 0
    assert hash_key_of(UserRecord(b"", "a", EHK_MAX)) == MAX_HASH_KEY
    assert partition_hash_key("é") == int.from_bytes(md5("é".encode()), "big")
    for bad in ["", "-1", " 1", "1_0", "\u0661", "0x10", str(MAX_HASH_KEY + 1)]:
        with pytest.raises(ValueError):
            partition_hash_key("a", bad)


@given(record_lists(min_size=1, max_size=10))
def test_sub_record_hash_keys(records: list[Rec]) -> None:
    out = deaggregate(encode_aggregate(records), "outer")
    for (_, pk, ehk), record in zip(records, out, strict=True):
        expected = int(ehk) if ehk is not None else int.from_bytes(md5(pk.encode()), "big")
        assert record.hash_key == hash_key_of(record) == expected


# -- the producer's fast path: AggregateSizer + encode_records ------------------------------

from kinesis_trio._core._aggregation import AggregateSizer, encode_records  # noqa: E402

_fast_records = st.lists(
    st.tuples(
        st.binary(max_size=300) | st.integers(0, 20_000).map(lambda n: b"z" * n),
        st.sampled_from(["a", "b", "ключ", "k" * 256, "🦀"]) | st.text(min_size=1, max_size=40),
        st.none() | st.integers(0, 2**128 - 1).map(str) | st.sampled_from(["0", "7"]),
    ),
    min_size=1,
    max_size=200,
)


@given(_fast_records)
def test_encode_records_equals_the_builder_and_the_sizer_is_exact(
    records: list[tuple[bytes, str, str | None]],
) -> None:
    records = [r for r in records if _encodable(r[1])]
    if not records:
        return
    builder = AggregateBuilder()
    sizer = AggregateSizer()
    for data, pk, ehk in records:
        grow = sizer.grow(len(data), pk, len(pk.encode()), ehk)
        before = builder.size
        builder.add(data, pk, ehk)
        assert builder.size - before == grow
        sizer.add(pk, ehk, grow)
        assert sizer.size == builder.size
    assert sizer.count == builder.count
    datas, pks, ehks = _columns(records)
    assert encode_records(datas, pks, ehks) == builder.encode()
    if all(e is None for e in ehks):
        assert encode_records(datas, pks) == builder.encode()


def _columns(
    records: Sequence[tuple[bytes, str, str | None]],
) -> tuple[list[bytes], list[str], list[str | None]]:
    return [r[0] for r in records], [r[1] for r in records], [r[2] for r in records]


def _encodable(key: str) -> bool:
    try:
        key.encode()
    except UnicodeEncodeError:
        return False
    return True


def test_sizer_crosses_the_varint_boundaries() -> None:
    keys = [f"key-{i}" for i in range(300)]  # key indexes past 127
    records = [(b"x" * n, keys[i % 300], None) for i, n in enumerate([0, 127, 128, 16383, 16384])]
    records += [(b"y", k, None) for k in keys]
    sizer = AggregateSizer()
    for data, pk, ehk in records:
        sizer.add(pk, ehk, sizer.grow(len(data), pk, len(pk.encode()), ehk))
    assert sizer.size == len(encode_records(*_columns(records)))
