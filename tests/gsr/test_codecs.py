"""The AVRO, JSON and PROTOBUF codecs: the payload each writes, and a mismatch named."""

from __future__ import annotations

import importlib
import io
import json
import sys
import uuid
from typing import Any

import fastavro
import pytest
from google.protobuf import json_format

from kinesis_trio._varint import varint
from kinesis_trio.gsr import (
    AvroSchema,
    DecodeError,
    JsonSchema,
    ProtobufSchema,
    SchemaError,
    SchemaMismatchError,
    encode,
)
from kinesis_trio.gsr._decode import reader_for
from kinesis_trio.gsr._optional import require
from kinesis_trio.gsr._protobuf import ProtobufReader, read_varint
from tests.support.gsr import GSR_DIR, message_class

AVRO = json.dumps(
    {
        "type": "record",
        "name": "Order",
        "namespace": "shop",
        "fields": [
            {"name": "id", "type": "long"},
            {"name": "tags", "type": {"type": "array", "items": "string"}},
            {"name": "note", "type": ["null", "string"], "default": None},
        ],
    }
)
JSON_SCHEMA = json.dumps(
    {
        "title": "Order",
        "type": "object",
        "properties": {
            "id": {"type": "integer"},
            "lines": {"type": "array", "items": {"type": "integer", "minimum": 1}},
        },
        "required": ["id"],
    }
)
PROTO = (GSR_DIR / "orders.proto").read_text("utf-8")


def test_avro_payload_is_the_schemaless_datum() -> None:
    record = {"id": 5, "tags": ["a"], "note": "é"}
    payload = AvroSchema("orders", AVRO).payload(record)
    out = io.BytesIO()
    fastavro.schemaless_writer(out, fastavro.parse_schema(json.loads(AVRO)), record)
    assert payload == out.getvalue()
    assert reader_for("AVRO", AVRO).decode(payload) == record


@pytest.mark.parametrize(
    ("record", "says"),
    [
        ({"id": "x", "tags": []}, "field shop.Order.id: 'x' is not a valid long"),
        ({"id": 1.5, "tags": []}, "field shop.Order.id: 1.5 is not a valid long"),
        ({"id": 1, "tags": [3]}, "field shop.Order.tags: 3 is not a valid string"),
        ({"tags": []}, "Field id is specified in the schema but missing from the record"),
        (
            {"id": 1, "tags": [], "note": 5},
            "field shop.Order.note: 5 is not a valid null or string",
        ),
        ({"id": 1, "tags": [], "extra": 1}, "more fields than the schema specifies: extra"),
    ],
)
def test_an_avro_record_that_does_not_match_names_the_field(record: object, says: str) -> None:
    with pytest.raises(SchemaMismatchError, match=says):
        AvroSchema("orders", AVRO).payload(record)


def test_json_payload_is_compact_utf8_json() -> None:
    schema = JsonSchema("orders", JSON_SCHEMA)
    assert schema.payload({"id": 1, "n": "café"}) == '{"id":1,"n":"café"}'.encode()
    assert reader_for("JSON", JSON_SCHEMA).decode(b'{"id":1}') == {"id": 1}


@pytest.mark.parametrize(
    ("record", "says"),
    [
        ({}, "at \\(the document\\): 'id' is a required property"),
        ({"id": 1, "lines": [1, 0]}, "at lines/1: 0 is less than the minimum of 1"),
        ({"id": 1, "x": {1, 2}}, "at x: a set is not a JSON value"),
        ({"id": 1, "x": {"y": (1, 2)}}, "at x/y: a tuple is not a JSON value"),
        ({"id": 1, "x": {3: "a"}}, "at x: key 3 is not a string"),
        ({"id": 1, "x": ["ok", "\ud800"]}, "at x/1: .* cannot be encoded in UTF-8"),
        ({"id": float("nan")}, "is not of type 'integer'"),
    ],
)
def test_a_json_record_that_does_not_match_names_the_path(record: object, says: str) -> None:
    with pytest.raises(SchemaMismatchError, match=says):
        JsonSchema("orders", JSON_SCHEMA).payload(record)


@pytest.mark.parametrize(
    ("message", "index"),
    [("shop.Customer", 0), ("shop.Order", 1), ("shop.Order.Line", 2)],
)
def test_protobuf_payload_is_the_message_index_then_the_message(message: str, index: int) -> None:
    cls = message_class(PROTO, message)
    msg = json_format.ParseDict({}, cls())
    payload = ProtobufSchema("orders", cls, PROTO).payload(msg)
    assert payload == varint(index) + msg.SerializeToString()
    decoded = ProtobufReader(PROTO).decode(payload)
    assert decoded.DESCRIPTOR.full_name == message


def test_protobuf_refuses_another_message_type_and_a_definition_of_other_messages() -> None:
    order, customer = message_class(PROTO, "shop.Order"), message_class(PROTO, "shop.Customer")
    with pytest.raises(SchemaMismatchError, match=r"a shop\.Order message, got shop\.Cust"):
        ProtobufSchema("orders", order, PROTO).payload(customer(name="x"))
    with pytest.raises(SchemaMismatchError, match="got <class 'dict'>"):
        ProtobufSchema("orders", order, PROTO).payload({"id": 1})
    other = 'syntax = "proto3";\npackage shop;\nmessage Order { int64 id = 1; }\n'
    with pytest.raises(SchemaError, match=r"declares messages \['shop\.Order'\]"):
        ProtobufSchema("orders", order, other, check=True)
    ProtobufSchema("orders", order, PROTO, check=True)


def test_varints_read_back() -> None:
    for n in (0, 1, 127, 128, 300, 2**32 - 1):
        assert read_varint(varint(n) + b"rest") == (n, len(varint(n)))
    with pytest.raises(DecodeError, match="message index"):
        read_varint(b"\xff\xff")


@pytest.mark.parametrize(
    ("data_format", "definition", "payload", "says"),
    [
        ("AVRO", AVRO, b"\x02", "does not read"),
        ("JSON", JSON_SCHEMA, b"{not json", "does not parse"),
        ("PROTOBUF", PROTO, b"\x09", "message index 9, but the definition has 4 messages"),
        ("PROTOBUF", PROTO, b"\x01\x0a\xff", "does not parse"),
    ],
)
def test_a_payload_that_does_not_read_is_a_decode_error(
    data_format: str, definition: str, payload: bytes, says: str
) -> None:
    with pytest.raises(DecodeError, match=says):
        reader_for(data_format, definition).decode(payload)


@pytest.mark.parametrize(
    ("cls", "definition", "says"),
    [
        (AvroSchema, '{"type": "record"}', "not an Avro schema"),
        (AvroSchema, "not json", "not an Avro schema"),
        (JsonSchema, '{"type": 12}', "not a JSON Schema"),
    ],
)
def test_a_bad_definition_is_refused_when_the_schema_is_made(
    cls: type[AvroSchema] | type[JsonSchema], definition: str, says: str
) -> None:
    with pytest.raises(SchemaError, match=says):
        cls("orders", definition)


def test_a_protobuf_definition_that_does_not_compile_is_refused() -> None:
    with pytest.raises(SchemaError, match="does not compile"):
        ProtobufReader("message {")


def test_a_missing_optional_dependency_names_its_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "fastavro", None)
    with pytest.raises(SchemaError, match=r"pip install 'kinesis-trio\[gsr\]'"):
        require("fastavro", "gsr")


def test_encode_puts_the_header_before_the_payload() -> None:
    schema, vid = AvroSchema("orders", AVRO), uuid.uuid4()
    record = encode(schema, {"id": 1, "tags": []}, vid)
    assert record == bytes([3, 0]) + vid.bytes + schema.payload({"id": 1, "tags": []})


def test_a_protobuf_definition_may_import_the_well_known_types() -> None:
    proto = (
        'syntax = "proto3";\npackage ev;\nimport "google/protobuf/timestamp.proto";\n'
        "message Event { google.protobuf.Timestamp at = 1; string name = 2; }\n"
    )
    cls = message_class(proto, "ev.Event")
    msg = json_format.ParseDict({"at": "2026-11-29T08:00:00Z", "name": "x"}, cls())
    payload = ProtobufSchema("events", cls, proto, check=True).payload(msg)
    decoded = ProtobufReader(proto).decode(payload)
    assert json_format.MessageToDict(decoded) == {"at": "2026-11-29T08:00:00Z", "name": "x"}


def test_a_protobuf_definition_may_import_google_type_as_the_java_reader_does() -> None:
    # FileDescriptorUtils.baseDependencies() lists DateProto, MoneyProto, ... (google.type)
    proto = (
        'syntax = "proto3";\npackage shop;\nimport "google/type/date.proto";\n'
        'import "google/type/money.proto";\n'
        "message Sale { google.type.Date day = 1; google.type.Money price = 2; }\n"
    )
    date_pb2, money_pb2 = (
        importlib.import_module(f"google.type.{m}") for m in ("date_pb2", "money_pb2")
    )

    cls = message_class(proto, "shop.Sale")
    sale = {"day": {"year": 2026, "month": 11, "day": 29}, "price": {"currencyCode": "EUR"}}
    msg = json_format.ParseDict(sale, cls())
    payload = ProtobufSchema("sales", cls, proto, check=True).payload(msg)
    assert payload == b"\x00" + msg.SerializeToString()
    decoded: Any = ProtobufReader(proto).decode(payload)
    assert json_format.MessageToDict(decoded) == sale
    # the bytes are google.type's own: googleapis-common-protos' classes read them
    assert date_pb2.Date.FromString(decoded.day.SerializeToString()).year == 2026
    assert money_pb2.Money.FromString(decoded.price.SerializeToString()).currency_code == "EUR"
