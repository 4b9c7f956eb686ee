"""The fake Glue's compatibility checks (pure): the modes botocore's Glue model documents,
and for each format the rules ``testing/_compat.py`` says it covers."""

from __future__ import annotations

import json
from collections.abc import Mapping

import pytest

from kinesis_trio.testing._compat import COMPATIBILITIES, incompatibility, reads


def avro(*fields: Mapping[str, object]) -> str:
    return json.dumps({"type": "record", "name": "Order", "fields": list(fields)})


ID_INT = {"name": "id", "type": "int"}
ID_LONG = {"name": "id", "type": "long"}
NOTE = {"name": "note", "type": "string", "default": ""}
NOTE_REQUIRED = {"name": "note", "type": "string"}


@pytest.mark.parametrize(
    ("old", "new", "backward", "forward"),
    [
        # "Schema Resolution": a reader's field missing from the writer takes its default
        (avro(ID_INT), avro(ID_INT, NOTE), True, True),
        # ... and without a default the reader cannot fill it: an error
        (avro(ID_INT), avro(ID_INT, NOTE_REQUIRED), False, True),
        # the writer's field the reader does not have is ignored
        (avro(ID_INT, NOTE_REQUIRED), avro(ID_INT), True, False),
        # "int is promotable to long, float, or double"; not the other way
        (avro(ID_INT), avro(ID_LONG), True, False),
    ],
    ids=["add-with-default", "add-without-default", "remove-without-default", "int-to-long"],
)
def test_avro_follows_schema_resolution(old: str, new: str, backward: bool, forward: bool) -> None:
    assert (incompatibility("AVRO", "BACKWARD", new, [old]) is None) is backward
    assert (incompatibility("AVRO", "FORWARD", new, [old]) is None) is forward
    assert (incompatibility("AVRO", "FULL", new, [old]) is None) is (backward and forward)
    assert incompatibility("AVRO", "NONE", new, [old]) is None


def test_the_all_modes_compare_every_version_the_others_only_the_latest() -> None:
    first = avro(ID_INT, NOTE_REQUIRED)
    second = avro(ID_INT, NOTE)
    third = avro(ID_INT, NOTE_REQUIRED)  # reads the second (which writes note) ...
    history = [avro(ID_INT), second]  # ... but not the first, which has no note
    assert incompatibility("AVRO", "BACKWARD", third, history) is None
    problem = incompatibility("AVRO", "BACKWARD_ALL", third, history)
    assert problem is not None and "note" in problem
    # forward: the old versions read the new one; the first reads nothing without its note
    assert incompatibility("AVRO", "FORWARD", avro(ID_INT), [first, second]) is None
    assert incompatibility("AVRO", "FORWARD_ALL", avro(ID_INT), [first, second]) is not None
    assert incompatibility("AVRO", "FULL_ALL", avro(ID_INT), [first, second]) is not None


def test_every_mode_passes_a_first_version_and_an_identical_one() -> None:
    for mode in COMPATIBILITIES:
        assert incompatibility("AVRO", mode, avro(ID_INT), []) is None
        assert incompatibility("AVRO", mode, avro(ID_INT), [avro(ID_INT)]) is None


def obj(properties: Mapping[str, object], required: list[str] | None = None, **more: object) -> str:
    schema: dict[str, object] = {"type": "object", "properties": properties, **more}
    if required:
        schema["required"] = required
    return json.dumps(schema)


S = {"type": "string"}
N = {"type": "number"}
I = {"type": "integer"}  # noqa: E741


@pytest.mark.parametrize(
    ("reader", "writer", "ok"),
    [
        # the guide: an optional property added reads a closed writer ...
        (obj({"a": S, "b": N}), obj({"a": S}, additionalProperties=False), True),
        # ... not an open one, whose "b" may be of another type
        (obj({"a": S, "b": N}), obj({"a": S}), False),
        (obj({"a": S, "b": N}, ["b"]), obj({"a": S}), False),  # a required one added
        (obj({"a": N}), obj({"a": I}), True),  # an integer is a number
        (obj({"a": I}), obj({"a": N}), False),
        (obj({"a": I}), obj({"a": S}), False),
        (obj({"a": S}, additionalProperties=False), obj({"a": S}), False),  # open writer
        (
            obj({"a": S}, additionalProperties=False),
            obj({"a": S, "b": S}, additionalProperties=False),
            False,
        ),
        (
            obj({"a": S, "b": S}, additionalProperties=False),
            obj({"a": S}, additionalProperties=False),
            True,
        ),
        (obj({"e": {"enum": ["x", "y"]}}), obj({"e": {"enum": ["x"]}}), True),
        (obj({"e": {"enum": ["x"]}}), obj({"e": {"enum": ["x", "y"]}}), False),
        (obj({"s": {"type": "string", "maxLength": 5}}), obj({"s": S}), False),
        (
            obj({"s": {"type": "string", "maxLength": 9}}),
            obj({"s": {"type": "string", "maxLength": 5}}),
            True,
        ),
        (
            json.dumps({"type": "array", "items": I}),
            json.dumps({"type": "array", "items": S}),
            False,
        ),
    ],
)
def test_json_schema_subset(reader: str, writer: str, ok: bool) -> None:
    assert (reads("JSON", reader, writer) == []) is ok


PROTO_V1 = """
syntax = "proto2";
package shop;
// an order
message Order {
  required int32 id = 1;
  optional string note = 2;
  message Line { optional int64 sku = 1; }
  repeated Line lines = 3;
  map<string, string> tags = 4;
  enum Kind { A = 0; B = 1; }
  optional Kind kind = 5;
}
"""


@pytest.mark.parametrize(
    ("change", "ok"),
    [
        (("optional string note = 2;", "optional string note = 2; optional bool gift = 6;"), True),
        (("optional string note = 2;", ""), True),  # an optional field removed
        (("optional string note = 2;", "optional int64 note = 2;"), False),
        (("optional string note = 2;", "optional bytes note = 2;"), True),
        (("required int32 id = 1;", "required uint64 id = 1;"), True),
        (("required int32 id = 1;", "required sint32 id = 1;"), False),
        (("optional Kind kind = 5;", "optional int32 kind = 5;"), True),
        (("optional string note = 2;", "required string note = 2;"), False),
        (("optional string note = 2;", "optional string note = 2; required bool x = 7;"), False),
    ],
)
def test_proto_subset_backward(change: tuple[str, str], ok: bool) -> None:
    new = PROTO_V1.replace(*change)
    assert new != PROTO_V1 or change[0] == change[1]
    assert (incompatibility("PROTOBUF", "BACKWARD", new, [PROTO_V1]) is None) is ok
