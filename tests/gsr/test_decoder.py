"""The decoder: header, the writer's schema fetched once per version id, the object."""

from __future__ import annotations

import datetime
import decimal
import json
import uuid

import pytest

from kinesis_trio.gsr import (
    AvroSchema,
    DecodeError,
    Decoder,
    JsonSchema,
    ProtobufSchema,
    SchemaNotFoundError,
    encode,
)
from kinesis_trio.gsr._wire import encode_frame
from tests.support.gsr import InMemorySchemaRegistry, message_class

from .test_codecs import AVRO, JSON_SCHEMA, PROTO

pytestmark = pytest.mark.anyio


async def test_records_of_each_format_decode_through_the_registry() -> None:
    registry = InMemorySchemaRegistry()
    order = message_class(PROTO, "shop.Order")
    msg = order(id=7, customer="ann", tags={"k": "v"})
    cases: list[tuple[AvroSchema | JsonSchema | ProtobufSchema, object]] = [
        (AvroSchema("a", AVRO), {"id": 1, "tags": ["x"], "note": None}),
        (JsonSchema("j", JSON_SCHEMA), {"id": 2, "lines": [1]}),
        (ProtobufSchema("p", order, PROTO), msg),
    ]
    decoder = Decoder(registry)
    for schema, obj in cases:
        vid = await registry.version_for(schema.spec)
        for compress in (False, True):
            decoded = await decoder.decode(encode(schema, obj, vid, compress=compress))
            assert (decoded.version_id, decoded.compressed) == (vid, compress)
            assert decoded.data_format == schema.spec.data_format
            if schema.spec.data_format == "PROTOBUF":
                assert decoded.value.SerializeToString() == msg.SerializeToString()  # type: ignore[attr-defined]
                assert dict(decoded.value.tags) == {"k": "v"}  # type: ignore[attr-defined]
            else:
                assert decoded.value == obj
    # One fetch per version id, whatever the number of records.
    assert registry.calls["schema_of"] == 3


async def test_readers_are_kept_for_at_most_max_schemas_versions() -> None:
    registry = InMemorySchemaRegistry()
    decoder = Decoder(registry, max_schemas=2)
    schemas = [JsonSchema(f"s{i}", JSON_SCHEMA) for i in range(3)]
    records = [encode(s, {"id": 1}, await registry.version_for(s.spec)) for s in schemas]
    for record in (*records, records[2], records[0]):
        await decoder.decode(record)
    # s0, s1, s2 fetched; s2 again cached; s0 evicted when s2 came in, fetched again.
    assert registry.calls["schema_of"] == 4


async def test_an_unknown_version_and_a_bad_header_are_errors() -> None:
    decoder = Decoder(InMemorySchemaRegistry())
    with pytest.raises(SchemaNotFoundError):
        await decoder.decode(encode_frame(b"{}", uuid.uuid4()))
    with pytest.raises(DecodeError, match="header version byte 0"):
        await decoder.decode(b"\x00" * 30)


async def test_a_decoded_record_has_a_json_view_for_tail() -> None:
    registry = InMemorySchemaRegistry()
    avro = json.dumps(
        {
            "type": "record",
            "name": "R",
            "fields": [
                {"name": "b", "type": "bytes"},
                {"name": "d", "type": {"type": "int", "logicalType": "date"}},
                {
                    "name": "m",
                    "type": {"type": "bytes", "logicalType": "decimal", "precision": 5, "scale": 2},
                },
            ],
        }
    )
    schema = AvroSchema("r", avro)
    record = {"b": b"\x00\xff", "d": datetime.date(2026, 1, 2), "m": decimal.Decimal("1.25")}
    decoded = await Decoder(registry).decode(
        encode(schema, record, await registry.version_for(schema.spec))
    )
    assert decoded.jsonable() == {"b": "AP8=", "d": "2026-01-02", "m": "1.25"}
    order = message_class(PROTO, "shop.Order")
    proto = ProtobufSchema("p", order, PROTO)
    msg = order(id=7, tags={"k": "v"})
    decoded = await Decoder(registry).decode(
        encode(proto, msg, await registry.version_for(proto.spec))
    )
    assert json.loads(json.dumps(decoded.jsonable())) == {"id": "7", "tags": {"k": "v"}}


async def test_records_without_the_gsr_header_go_to_the_secondary_deserializer() -> None:
    registry = InMemorySchemaRegistry()
    schema = JsonSchema("j", JSON_SCHEMA)
    record = encode(schema, {"id": 1}, await registry.version_for(schema.spec))
    seen: list[bytes] = []

    def secondary(data: bytes) -> object:
        seen.append(data)
        return json.loads(data)

    decoder = Decoder(registry, secondary_deserializer=secondary)
    plain = await decoder.decode(b'{"legacy": true}')
    assert (plain.version_id, plain.data_format, plain.compressed) == (None, None, False)
    assert plain.secondary and plain.value == {"legacy": True}
    assert plain.jsonable() == {"legacy": True}
    assert seen == [b'{"legacy": true}']  # the record's bytes
    empty = await Decoder(registry, secondary_deserializer=lambda d: d).decode(b"")
    assert empty.value == b""
    # a GSR record is still the registry's, and not given to the secondary deserializer
    gsr = await decoder.decode(record)
    assert gsr.value == {"id": 1} and not gsr.secondary and len(seen) == 1
    # the header version byte decides (as the Java deserializer): a 3 with a bad header is
    # a GSR record that does not read
    with pytest.raises(DecodeError, match="unknown compression byte 9"):
        await decoder.decode(b"\x03\x09" + bytes(16) + b"{}")
    assert len(seen) == 1


async def test_a_failing_secondary_deserializer_is_a_decode_error_and_none_is_one_too() -> None:
    decoder = Decoder(InMemorySchemaRegistry(), secondary_deserializer=json.loads)
    with pytest.raises(DecodeError, match="the secondary deserializer failed: JSONDecodeError"):
        await decoder.decode(b"not json")
    with pytest.raises(DecodeError, match="header version byte 110, expected 3"):
        await Decoder(InMemorySchemaRegistry()).decode(b"not a GSR record, and longer")
