"""The public surface of ``kinesis_trio.gsr`` is a decision: this pins it."""

from __future__ import annotations

import json
import types
import uuid

from hypothesis import given, settings
from hypothesis import strategies as st

import kinesis_trio.gsr as gsr
from kinesis_trio.gsr._decode import reader_for
from kinesis_trio.gsr._wire import decode_frame


def test_exported_names() -> None:
    typing_helpers = {"annotations", "TYPE_CHECKING", "Any"}
    public = {
        name
        for name, value in vars(gsr).items()
        if not name.startswith("_")
        and not isinstance(value, types.ModuleType)
        and name not in typing_helpers
    }
    public.add("GlueClient")  # imported when first asked for (see the package's __getattr__)
    assert isinstance(gsr.GlueClient, type)
    assert public == {
        "AvroSchema",
        "BY_RECORD_TYPE",
        "BY_STREAM",
        "BY_STREAM_AND_RECORD_TYPE",
        "DecodeError",
        "Decoded",
        "Decoder",
        "GlueClient",
        "GlueSchemaRegistry",
        "JsonSchema",
        "ProtobufSchema",
        "RegisteredSchema",
        "Schema",
        "SchemaError",
        "SchemaIncompatibleError",
        "SchemaMismatchError",
        "SchemaNaming",
        "SchemaNotFoundError",
        "SchemaRegistry",
        "SchemaRegistryError",
        "SchemaSpec",
        "encode",
    }


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)


@settings(max_examples=50)
@given(value=JSON_VALUES, compress=st.booleans())
def test_any_json_value_reads_back_as_written(value: object, compress: bool) -> None:
    schema = gsr.JsonSchema("any", "{}")
    record = gsr.encode(schema, value, uuid.uuid4(), compress=compress)
    assert reader_for("JSON", "{}").decode(decode_frame(record).payload) == value
    assert json.loads(decode_frame(record).payload) == value
