"""The property of issue 64, item 1: ``put_object`` either refuses an object with a
SchemaMismatchError (nothing accepted) or the record reads back as exactly the object put,
over generated Avro schemas and objects, JSON values and protobuf messages."""

from __future__ import annotations

import itertools
import json
import math
import struct
from typing import Any

import pytest
from google.protobuf import json_format
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kinesis_trio.gsr import (
    AvroSchema,
    Decoder,
    GlueSchemaRegistry,
    JsonSchema,
    ProtobufSchema,
    SchemaMismatchError,
)
from kinesis_trio.gsr._decode import reader_for
from tests.gsr.conftest import client_of
from tests.gsr.test_producer_puts import new_fake, producer_of, user_records
from tests.support.gsr import message_class

_names = itertools.count()
FLOAT32 = struct.Struct("<f")
PRIMITIVES = ["null", "boolean", "int", "long", "float", "double", "string", "bytes"]

# -- schemas


def records(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    return st.lists(children, min_size=1, max_size=4).map(
        lambda types: {
            "type": "record",
            "name": f"R{next(_names)}",
            "fields": [{"name": f"f{i}", "type": t} for i, t in enumerate(types)],
        }
    )


def unions(children: st.SearchStrategy[Any]) -> st.SearchStrategy[Any]:
    # a union holds each unnamed type once, and no union
    branch = st.one_of(
        st.sampled_from(PRIMITIVES),
        children.filter(lambda t: isinstance(t, dict) and t["type"] == "record"),
    )
    return st.lists(
        branch, min_size=1, max_size=4, unique_by=lambda t: t if isinstance(t, str) else t["name"]
    )


avro_types = st.recursive(
    st.sampled_from(PRIMITIVES),
    lambda children: st.one_of(
        records(children),
        children.filter(lambda t: not isinstance(t, list)).map(
            lambda t: {"type": "array", "items": t}
        ),
        children.filter(lambda t: not isinstance(t, list)).map(
            lambda t: {"type": "map", "values": t}
        ),
        unions(children),
    ),
    max_leaves=6,
)
avro_schemas = st.one_of(records(avro_types))

# -- objects: mostly of the schema's types, with the values that do not fit mixed in

BIG_INTS = st.one_of(
    st.integers(-(2**31) - 2, 2**31 + 2),
    st.integers(-(2**70), 2**70),
    st.sampled_from([2**53 + 1, 2**63, -(2**63) - 1, 2**64 + 1, 2**24 + 1, 10**400]),
)
FLOATS = st.one_of(st.floats(allow_nan=False), st.floats(width=32, allow_nan=False), st.just(0.1))
TEXT = st.one_of(st.text(max_size=5), st.text(st.sampled_from("a\u00e9\ud800\udfff"), max_size=3))
KEYS = st.one_of(TEXT, st.integers(0, 3))


def values(schema: Any) -> st.SearchStrategy[Any]:
    if isinstance(schema, list):
        return st.one_of([values(b) for b in schema])
    kind = schema if isinstance(schema, str) else schema["type"]
    if kind == "null":
        return st.none()
    if kind == "boolean":
        return st.booleans()
    if kind in ("int", "long"):
        return BIG_INTS
    if kind in ("float", "double"):
        return st.one_of(FLOATS, BIG_INTS)
    if kind == "string":
        return TEXT
    if kind == "bytes":
        return st.binary(max_size=4)
    if kind == "array":
        return st.lists(values(schema["items"]), max_size=3)
    if kind == "map":
        return st.dictionaries(KEYS, values(schema["values"]), max_size=3)
    return st.fixed_dictionaries({f["name"]: values(f["type"]) for f in schema["fields"]})


def same(schema: Any, put: Any, read: Any) -> bool:
    """Read back exactly (``schema`` None: compared without one): equal values, a bool
    stays a bool, a list stays a list; a Python float put in a ``float`` reads back at the
    float's precision (32 bits), nothing else changes."""
    if isinstance(schema, list):
        return any(same(branch, put, read) for branch in schema)
    kind = schema if schema is None or isinstance(schema, str) else schema["type"]
    if isinstance(put, bool) or isinstance(read, bool):
        return type(put) is type(read) and put == read
    if kind == "float" and type(put) is float and math.isfinite(put):
        return type(read) is float and read == FLOAT32.unpack(FLOAT32.pack(put))[0]
    if isinstance(put, (int, float)):
        return isinstance(read, (int, float)) and put == read
    if isinstance(put, dict) and isinstance(read, dict):
        if kind is None:  # no schema (JSON): the same all the way down
            children = dict.fromkeys(put)
        elif kind == "map":
            children = dict.fromkeys(put, schema["values"])
        elif kind == "record":
            children = {f["name"]: f["type"] for f in schema["fields"]}
        else:
            return False
        return put.keys() == read.keys() and all(
            same(children[k], v, read[k]) for k, v in put.items()
        )
    if isinstance(put, list):
        return (
            kind in (None, "array")
            and isinstance(read, list)
            and len(put) == len(read)
            and all(same(schema and schema["items"], p, r) for p, r in zip(put, read, strict=True))
        )
    return type(put) is type(read) and put == read


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_an_avro_object_is_refused_or_reads_back_exactly(data: st.DataObject) -> None:
    definition = json.dumps(data.draw(avro_schemas, label="schema"))
    obj = data.draw(values(json.loads(definition)), label="object")
    try:
        payload = AvroSchema("s", definition).payload(obj)
    except SchemaMismatchError:
        return
    assert same(json.loads(definition), obj, reader_for("AVRO", definition).decode(payload))


JSON_VALUES = st.recursive(
    st.one_of(st.none(), st.booleans(), BIG_INTS, st.floats(), TEXT),
    lambda children: st.one_of(
        st.lists(children, max_size=3),
        st.lists(children, max_size=3).map(tuple),
        st.dictionaries(KEYS, children, max_size=3),
    ),
    max_leaves=8,
)


@settings(max_examples=300, deadline=None)
@given(JSON_VALUES)
def test_a_json_value_is_refused_or_reads_back_exactly(obj: Any) -> None:
    definition = "{}"  # any value: what is checked is that JSON carries it unchanged
    try:
        payload = JsonSchema("s", definition).payload(obj)
    except SchemaMismatchError:
        return
    assert same(None, obj, reader_for("JSON", definition).decode(payload))


MISFITS: list[tuple[str, object]] = [
    ('{"type":"record","name":"R","fields":[{"name":"f","type":"long"}]}', {"f": 2**63}),
    ('{"type":"record","name":"R","fields":[{"name":"f","type":"double"}]}', {"f": 10**400}),
    ('{"type":"record","name":"R","fields":[{"name":"f","type":"double"}]}', {"f": 2**53 + 1}),
    (
        '{"type":"record","name":"R","fields":[{"name":"f","type":["null","long","double"]}]}',
        {"f": 2**64 + 1},
    ),
    ('{"type":"record","name":"R","fields":[{"name":"f","type":"string"}]}', {"f": "\ud800"}),
]


@pytest.mark.anyio
async def test_put_object_accepts_nothing_of_an_object_that_does_not_fit() -> None:
    fake = new_fake()
    registry = GlueSchemaRegistry(client_of(fake), auto_register=True)
    json_schema = JsonSchema("j", '{"type": "object"}')
    async with registry, producer_of(fake, registry) as producer:
        for i, (definition, obj) in enumerate(MISFITS):
            schema = AvroSchema(f"a{i}", definition)
            with pytest.raises(SchemaMismatchError, match=r"field R\.f"):
                await producer.put_object(obj, "k", schema=schema)
            with pytest.raises(SchemaMismatchError, match=r"field R\.f"):
                producer.put_object_nowait(obj, "k", schema=schema)
        for obj in ({"a": "\ud800"}, {1: "x"}, {"a": (1, 2)}):
            with pytest.raises(SchemaMismatchError):
                await producer.put_object(obj, "k", schema=json_schema)
        assert producer.outstanding_records == 0
        ok = await producer.put_object({"f": 2**53}, "k", schema=AvroSchema("a1", MISFITS[1][0]))
        await producer.flush()
        assert (await ok.wait()).ok
        records = user_records(fake)
        assert len(records) == 1
        decoded = await Decoder(registry).decode(records[0])
        assert decoded.value == {"f": 2**53}


PROTO = """syntax = "proto3";
package prop;
message Item {
  int32 small = 1;
  int64 big = 2;
  uint32 count = 3;
  double amount = 4;
  float ratio = 5;
  string text = 6;
  bytes blob = 7;
  repeated sint64 values = 8;
  map<string, int32> attrs = 9;
  optional string maybe = 10;
}
"""
ITEM_FIELDS = st.fixed_dictionaries(
    {},
    optional={
        "small": BIG_INTS,
        "big": BIG_INTS,
        "count": BIG_INTS,
        "amount": st.one_of(FLOATS, BIG_INTS),
        "ratio": FLOATS,
        "text": TEXT,
        "blob": st.binary(max_size=4),
        "values": st.lists(BIG_INTS, max_size=3),
        "attrs": st.dictionaries(TEXT, BIG_INTS, max_size=2),
        "maybe": TEXT,
    },
)


@settings(max_examples=200, deadline=None)
@given(ITEM_FIELDS)
def test_a_protobuf_message_reads_back_as_the_message_put(fields: dict[str, Any]) -> None:
    item = message_class(PROTO, "prop.Item")
    try:  # protobuf refuses what its fields cannot hold when the message is built
        msg = item(**fields)
    except (ValueError, TypeError):
        return
    schema = ProtobufSchema("p", item, PROTO)
    read: Any = reader_for("PROTOBUF", PROTO).decode(schema.payload(msg))
    assert read.SerializeToString(deterministic=True) == msg.SerializeToString(deterministic=True)
    assert json_format.MessageToDict(read) == json_format.MessageToDict(msg)
