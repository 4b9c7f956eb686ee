"""The fake Glue's JSON and PROTOBUF compatibility rules, one case each (``_compat_json``,
``_compat_proto``): the Glue guide's examples, and the protobuf guide's "Updating A Message
Type"; a case marked "was wrong" passed or failed the other way before descriptors and
``$ref``/combinators were compared."""

from __future__ import annotations

import json
from typing import Any

import pytest

from kinesis_trio.testing import FakeKinesis
from kinesis_trio.testing._compat import definition_problem, incompatibility, reads
from tests.gsr.conftest import client_of

I = {"type": "integer"}  # noqa: E741
N = {"type": "number"}
S = {"type": "string"}


def obj(props: dict[str, Any], **more: Any) -> dict[str, Any]:
    return {"type": "object", "properties": props, **more}


TREE_INT = {
    "definitions": {"node": obj({"v": I, "kids": {"type": "array", "items": {"$ref": "#"}}})},
    "$ref": "#/definitions/node",
}
TREE_NUM = json.loads(json.dumps(TREE_INT).replace('"integer"', '"number"'))
LIST_INT = {
    "definitions": {"l": {"anyOf": [{"type": "null"}, obj({"v": I, "next": {"$ref": "#"}})]}},
    "$ref": "#/definitions/l",
}
ID_REF = {"definitions": {"id": I}, **obj({"a": {"$ref": "#/definitions/id"}})}


@pytest.mark.parametrize(
    ("reader", "writer", "ok"),
    [
        # the guide's JSON example: a property added reads a closed writer, not an open one
        (obj({"a": S, "phone": N}), obj({"a": S}, additionalProperties=False), True),
        (obj({"a": S, "phone": N}), obj({"a": S}), False),  # was wrong
        # $ref within the document, recursion included
        (ID_REF, obj({"a": S}, additionalProperties=False), False),  # was wrong
        (ID_REF, obj({"a": I}, additionalProperties=False), True),
        (TREE_NUM, TREE_INT, True),
        (TREE_INT, TREE_NUM, False),  # was wrong
        (LIST_INT, LIST_INT, True),
        (LIST_INT, json.loads(json.dumps(LIST_INT).replace('"integer"', '"string"')), False),
        # combinators: each writer branch read by some reader branch
        ({"type": ["string", "number"]}, {"anyOf": [S, I]}, True),
        (S, {"anyOf": [S, I]}, False),  # was wrong
        ({"oneOf": [S, I]}, I, True),
        ({"oneOf": [S, I]}, {"type": "boolean"}, False),
        ({"allOf": [{"type": "object"}, {"required": ["a"]}]}, obj({}, required=["a"]), True),
        ({"allOf": [{"type": "object"}, {"required": ["a"]}]}, obj({}), False),  # was wrong
        (obj({"a": N}, required=["a"]), {"allOf": [obj({"a": I}), {"required": ["a"]}]}, True),
        # pattern and format: the reader's must be the writer's
        ({"type": "string", "pattern": "^[a-z]+$"}, S, False),  # was wrong
        (
            {"type": "string", "pattern": "^[a-z]+$"},
            {"type": "string", "pattern": "^[a-z]+$"},
            True,
        ),
        (S, {"type": "string", "pattern": "^[a-z]+$"}, True),
        ({"type": "string", "format": "date"}, {"type": "string", "format": "date-time"}, False),
        # const and enum: the writer's values validated against the reader
        ({"const": "x"}, {"const": "x"}, True),
        ({"const": "x"}, {"enum": ["x", "y"]}, False),
        ({"type": "string", "maxLength": 3}, {"enum": ["ab", "abcd"]}, False),
        ({"type": "string", "maxLength": 3}, {"const": "ab"}, True),
        # dependencies (Draft-07) and dependentRequired
        ({"type": "object", "dependencies": {"a": ["b"]}}, {"type": "object"}, False),
        (
            {"type": "object", "dependentRequired": {"a": ["b"]}},
            {"type": "object", "dependencies": {"a": ["b"]}},
            True,
        ),
        # patternProperties
        (
            {"type": "object", "patternProperties": {"^x_": I}},
            {"type": "object", "patternProperties": {"^x_": S}},
            False,
        ),
        ({"type": "object", "patternProperties": {"^x_": I}}, obj({"x_1": S}), False),
        (
            {"type": "object", "patternProperties": {"^x_": I}},
            obj({"x_1": I}, additionalProperties=False),
            True,
        ),
        # an open writer may write "x_2" of any type
        ({"type": "object", "patternProperties": {"^x_": I}}, obj({"x_1": I}), False),
        # multipleOf, tuples
        ({"type": "integer", "multipleOf": 2}, {"type": "integer", "multipleOf": 4}, True),
        ({"type": "integer", "multipleOf": 4}, {"type": "integer", "multipleOf": 2}, False),
        (
            {"type": "array", "items": [I, S]},
            {"type": "array", "items": [I, S], "additionalItems": False},
            True,
        ),
        ({"type": "array", "items": [I, S]}, {"type": "array", "items": [S]}, False),
    ],
)
def test_json_reader_validates_all_the_writer_does(reader: Any, writer: Any, ok: bool) -> None:
    problems = reads("JSON", json.dumps(reader), json.dumps(writer))
    assert (problems == []) is ok, problems


def test_json_forward_follows_the_guides_example() -> None:
    # "removes the optional phone number property, this would successfully register as long
    # as the new schema version does not allow any additional properties"
    old = json.dumps(obj({"a": S, "phone": N}))
    closed = json.dumps(obj({"a": S}, additionalProperties=False))
    assert incompatibility("JSON", "FORWARD", closed, [old]) is None
    problem = incompatibility("JSON", "FORWARD", json.dumps(obj({"a": S})), [old])
    assert problem is not None and "phone" in problem


PROTO = """
syntax = "proto3";
package shop;
import "google/protobuf/wrappers.proto";
message Order {
  int64 id = 1;
  oneof pay { string card = 2; string iban = 3; }
  string note = 6;
  map<string, int32> tags = 4;
  repeated int32 qty = 5;
  Line line = 8;
  message Line { int64 sku = 1; reserved 2; }
  reserved 9;
  reserved "old";
}
service Shop {
  rpc Put(Order) returns (Order);
  rpc Get(Order) returns (Order);
}
"""
ONEOF = "oneof pay { string card = 2; string iban = 3; }"
TAGS = "map<string, int32> tags = 4;"


@pytest.mark.parametrize(
    ("change", "backward", "forward"),
    [
        # "Moving any fields into an existing oneof is not safe" (was wrong)
        ((ONEOF, "oneof pay { string card = 2; string iban = 3; string memo = 7; }"), True, True),
        (("string note = 6;", ""), True, True),
        (
            (
                f"{ONEOF}\n  string note = 6;",
                "oneof pay { string card = 2; string iban = 3; string note = 6; }",
            ),
            False,
            True,
        ),
        # "you can safely move a single field into a new oneof"
        (("string note = 6;", "oneof extra { string note = 6; }"), True, True),
        # a map is a repeated entry message on the wire; its value type is compared (was wrong)
        ((TAGS, "repeated E tags = 4; message E { string key = 1; int32 value = 2; }"), True, True),
        ((TAGS, "map<string, int64> tags = 4;"), True, True),
        ((TAGS, "map<string, string> tags = 4;"), False, False),
        # packed repeated numbers are not read as a singular field (was wrong)
        (("repeated int32 qty = 5;", "int32 qty = 5;"), False, True),
        (("repeated int32 qty = 5;", "repeated int64 qty = 5;"), True, True),
        # nested and imported messages compared field by field (the import was wrong)
        (("int64 sku = 1;", "string sku = 1;"), False, False),
        (("Line line = 8;", "google.protobuf.Int64Value line = 8;"), True, True),
        (("Line line = 8;", "google.protobuf.StringValue line = 8;"), False, False),
        # the Glue guide: removing RPC method Foo fails BACKWARD, adding Baz fails FORWARD
        (("rpc Get(Order) returns (Order);", ""), False, True),
        (
            (
                "rpc Get(Order) returns (Order);",
                "rpc Get(Order) returns (Order); rpc Baz(Order) returns (Order);",
            ),
            True,
            False,
        ),
        # a reserved number or name used again
        (("reserved 9;", "int32 again = 9;"), False, False),
        (('reserved "old";', "int32 old = 10;"), False, False),
        (("reserved 2;", "int32 qty = 2;"), False, False),
    ],
)
def test_proto_follows_updating_a_message_type(
    change: tuple[str, str], backward: bool, forward: bool
) -> None:
    new = PROTO.replace(*change)
    assert new != PROTO
    assert (incompatibility("PROTOBUF", "BACKWARD", new, [PROTO]) is None) is backward
    assert (incompatibility("PROTOBUF", "FORWARD", new, [PROTO]) is None) is forward


def test_a_proto_definition_is_checked_by_protoc() -> None:
    assert definition_problem("PROTOBUF", PROTO) is None
    assert definition_problem("PROTOBUF", 'syntax = "proto3";\nenum E { A = 0; }') is not None
    problem = definition_problem("PROTOBUF", 'syntax = "proto3";\nmessage M { nope x = 1; }')
    assert problem is not None and "does not compile" in problem


@pytest.mark.anyio
async def test_the_fake_fails_a_field_moved_into_an_existing_oneof(fake: FakeKinesis) -> None:
    moved = PROTO.replace(
        f"{ONEOF}\n  string note = 6;", ONEOF.replace(" }", " string note = 6; }")
    )
    single = PROTO.replace("string note = 6;", "oneof extra { string note = 6; }")
    async with client_of(fake) as glue:
        await glue.create_schema("default-registry", "o", "PROTOBUF", PROTO, compatibility="FULL")
        failed = await glue.register_schema_version("default-registry", "o", moved)
        assert failed["Status"] == "FAILURE"
        kept = await glue.register_schema_version("default-registry", "o", single)
        assert kept["Status"] == "AVAILABLE" and kept["VersionNumber"] == 3
