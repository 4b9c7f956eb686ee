"""Objects that do not fit their schema: a SchemaMismatchError naming the place, in every
format; no number rounded, no key or value changed on the way (issue 64, item 1)."""

from __future__ import annotations

import json
import struct
from typing import Any

import pytest

from kinesis_trio.gsr import AvroSchema, SchemaMismatchError
from kinesis_trio.gsr._decode import reader_for


def record_of(field_type: Any) -> str:
    return json.dumps(
        {
            "type": "record",
            "name": "R",
            "namespace": "t",
            "fields": [{"name": "f", "type": field_type}],
        }
    )


MAP_OF_LONG = {"type": "map", "values": "long"}
ARRAY_OF_INT = {"type": "array", "items": "int"}
ARRAY_OF_DOUBLE = {"type": "array", "items": "double"}


@pytest.mark.parametrize(
    ("field_type", "value", "says"),
    [
        ("long", 2**63, r"field t\.R\.f: 9223372036854775808 is beyond the range of an Avro long"),
        ("long", -(2**63) - 1, "is beyond the range of an Avro long"),
        ("int", 2**31, r"field t\.R\.f: 2147483648 is beyond the range of an Avro int"),
        (MAP_OF_LONG, {"a": 2**64}, r"field t\.R\.f\['a'\]: 18446744073709551616 is beyond"),
        (MAP_OF_LONG, {1: 2}, r"field t\.R\.f: map key 1 is not a string"),
        (MAP_OF_LONG, {"\ud800": 2}, r"field t\.R\.f: map key: .* cannot be encoded in UTF-8"),
        (ARRAY_OF_INT, [1, 2**40], r"field t\.R\.f\[1\]: 1099511627776 is beyond"),
        (ARRAY_OF_DOUBLE, [1.5, 2**53 + 1], r"field t\.R\.f\[1\]: 9007199254740993 does not fit"),
        ("double", 10**400, r"field t\.R\.f: 1000+\.\.\.0+ \(401 chars\) does not fit a double"),
        ("double", 2**53 + 1, "9007199254740993 does not fit a double exactly"),
        ("float", 1e300, "1e\\+300 is beyond the range of an Avro float"),
        ("float", -3.5e38, "is beyond the range of an Avro float"),
        ("float", 2**24 + 1, "16777217 does not fit a float exactly"),
        (["null", "long", "double"], 2**64 + 1, "no branch of the union holds it exactly"),
        (["null", "float"], 2**24 + 1, "no branch of the union holds it exactly"),
        ("string", "a\ud800", r"field t\.R\.f: 'a\\ud800' cannot be encoded in UTF-8"),
        (["null", "string"], "\udfff", "cannot be encoded in UTF-8"),
        ("long", True, "True is not a valid long"),
    ],
)
def test_an_avro_value_that_does_not_fit_is_a_mismatch_naming_the_field(
    field_type: Any, value: object, says: str
) -> None:
    with pytest.raises(SchemaMismatchError, match=says):
        AvroSchema("s", record_of(field_type)).payload({"f": value})


@pytest.mark.parametrize(
    ("field_type", "value"),
    [
        ("double", 2**53),
        ("double", 2**64),  # a power of two: exact
        ("double", -(2**1000)),
        ("float", 0.5),
        ("float", 2**24),
        ("float", float("inf")),
        ("long", 2**63 - 1),
        ("long", -(2**63)),
        (["null", "long", "double"], 2**63 - 1),
        (["null", "long", "double"], 2**64),  # beyond a long, exact in a double
        (["null", "long", "double"], 0.25),
        (["null", "float", "double"], 0.1),  # the double branch
        (ARRAY_OF_DOUBLE, [1, 2.5, -(2**53)]),
        (MAP_OF_LONG, {"é": -1}),
    ],
)
def test_an_avro_value_that_fits_reads_back_equal(field_type: Any, value: object) -> None:
    definition = record_of(field_type)
    payload = AvroSchema("s", definition).payload({"f": value})
    assert reader_for("AVRO", definition).decode(payload) == {"f": value}


@pytest.mark.parametrize(
    "field_type", ["float", ["null", "float"], {"type": "array", "items": "float"}]
)
def test_a_python_float_is_written_to_a_float_at_the_float_s_precision(field_type: Any) -> None:
    """Python has no 32-bit float: a float field (the precision its schema chose) takes a
    Python float in its range, rounded to that precision, as a Java ``(float)`` cast would."""
    value: Any = [0.1, 1.7e38] if isinstance(field_type, dict) else 0.1
    definition = record_of(field_type)
    got: Any = reader_for("AVRO", definition).decode(
        AvroSchema("s", definition).payload({"f": value})
    )
    as_float = struct.Struct("<f")
    expected = (
        [as_float.unpack(as_float.pack(v))[0] for v in value]
        if isinstance(value, list)
        else as_float.unpack(as_float.pack(value))[0]
    )
    assert got == {"f": expected}
    assert got["f"] != value  # rounded: 0.1 is not a 32-bit float


@pytest.mark.parametrize(
    ("branches", "value", "read"),
    [
        # fastavro alone writes an int to the first branch that validates (the double)
        (["null", "double", "long"], 2**53 + 1, 2**53 + 1),
        (["double", "long"], 7, 7),
        (["float", "double", "int"], 3, 3),
        # a float no float holds goes to the double
        (["float", "double"], 0.1, 0.1),
    ],
)
def test_a_union_writes_the_branch_that_holds_the_value_exactly(
    branches: list[str], value: object, read: object
) -> None:
    definition = record_of(branches)
    payload = AvroSchema("s", definition).payload({"f": value})
    got: Any = reader_for("AVRO", definition).decode(payload)
    assert got == {"f": read}
    assert type(got["f"]) is type(read)


def test_a_union_of_records_checks_the_branch_written_and_copies_nothing_else() -> None:
    point = {"type": "record", "name": "P", "fields": [{"name": "x", "type": "float"}]}
    label = {"type": "record", "name": "L", "fields": [{"name": "text", "type": "string"}]}
    definition = record_of(["null", point, label])
    schema = AvroSchema("s", definition)
    assert reader_for("AVRO", definition).decode(schema.payload({"f": {"text": "a"}})) == {
        "f": {"text": "a"}
    }
    with pytest.raises(SchemaMismatchError, match=r"field t\.R\.f\.x: 1e\+300 is beyond"):
        schema.payload({"f": {"x": 1e300}})


def test_a_recursive_schema_is_checked_all_the_way_down() -> None:
    node = {
        "type": "record",
        "name": "Node",
        "fields": [
            {"name": "weight", "type": "double"},
            {"name": "next", "type": ["null", "Node"], "default": None},
        ],
    }
    schema = AvroSchema("s", json.dumps(node))
    ok = {"weight": 1.5, "next": {"weight": 2, "next": None}}
    assert reader_for("AVRO", json.dumps(node)).decode(schema.payload(ok)) == ok
    with pytest.raises(SchemaMismatchError, match=r"Node\.next\.next\.weight: 9007199254740993"):
        schema.payload({"weight": 1.0, "next": {"weight": 2.0, "next": {"weight": 2**53 + 1}}})


def test_a_record_without_float_or_double_is_not_walked() -> None:
    from fastavro import parse_schema

    from kinesis_trio.gsr._avro_check import exactness

    assert exactness(parse_schema(json.loads(record_of(["null", "long", "string"])))) is None
    assert exactness(parse_schema(json.loads(record_of(ARRAY_OF_DOUBLE)))) is not None


def test_a_union_with_a_logical_type_names_the_number_branch() -> None:
    millis = {"type": "long", "logicalType": "timestamp-millis"}
    definition = record_of(["null", millis, "double"])
    payload = AvroSchema("s", definition).payload({"f": 2.5})
    assert reader_for("AVRO", definition).decode(payload) == {"f": 2.5}
    with pytest.raises(SchemaMismatchError, match="no branch of the union holds it exactly"):
        AvroSchema("s", record_of(["null", "float"])).payload({"f": 2**60 + 1})


def test_mutually_recursive_types_are_checked_wherever_a_double_lies_beneath() -> None:
    a = {
        "type": "record",
        "name": "A",
        "fields": [
            {"name": "b", "type": ["null", {"type": "record", "name": "B", "fields": [
                {"name": "a", "type": ["null", "A"]}]}]},
            {"name": "x", "type": "double"},
        ],
    }  # fmt: skip
    top = {
        "type": "record",
        "name": "Top",
        "fields": [{"name": "a", "type": a}, {"name": "only_b", "type": "B"}],
    }
    schema = AvroSchema("s", json.dumps(top))
    deep = {"a": None}
    ok = {"a": {"b": None, "x": 1.0}, "only_b": {"a": {"b": deep, "x": 2.0}}}
    assert reader_for("AVRO", json.dumps(top)).decode(schema.payload(ok)) == ok
    bad = {"a": {"b": None, "x": 1.0}, "only_b": {"a": {"b": deep, "x": 2**53 + 1}}}
    with pytest.raises(SchemaMismatchError, match=r"field Top\.only_b\.a\.x: 9007199254740993"):
        schema.payload(bad)


def test_a_json_cycle_is_a_mismatch() -> None:
    from kinesis_trio.gsr import JsonSchema

    cycle: list[object] = []
    cycle.append(cycle)
    with pytest.raises(SchemaMismatchError, match=r"at 0/0/.*\.\.\..*nested more than 500 deep"):
        JsonSchema("j", "{}").payload(cycle)
    with pytest.raises(SchemaMismatchError, match="nested more than 500 deep"):
        JsonSchema("j", '{"items": {"$ref": "#"}}').payload(cycle)


@pytest.mark.parametrize(
    ("definition", "value", "misfit"),
    [('"string"', "hi", 5), ('["null", "long"]', 5, 2**63), ('"double"', 1.5, 2**53 + 1)],
)
def test_a_schema_of_a_primitive_or_a_union_writes_and_refuses_as_a_record_does(
    definition: str, value: object, misfit: object
) -> None:
    schema = AvroSchema("s", definition)
    assert reader_for("AVRO", definition).decode(schema.payload(value)) == value
    with pytest.raises(SchemaMismatchError):
        schema.payload(misfit)
