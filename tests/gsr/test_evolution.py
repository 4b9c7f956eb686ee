"""Evolution on read (issue 64, item 2): records written with each registered version are
read into the consumer's own schema (Avro schema resolution) or generated protobuf class,
the versions registered with the local engine's Glue under BACKWARD, FORWARD and FULL."""

from __future__ import annotations

import json
from typing import Any

import pytest

from kinesis_trio.gsr import (
    AvroSchema,
    DecodeError,
    Decoder,
    GlueSchemaRegistry,
    ProtobufSchema,
    SchemaError,
    SchemaIncompatibleError,
    encode,
)
from kinesis_trio.testing import FakeKinesis
from tests.gsr.conftest import client_of
from tests.support.gsr import InMemorySchemaRegistry, message_class

pytestmark = pytest.mark.anyio


def order(*fields: dict[str, Any], name: str = "Order", **more: Any) -> str:
    return json.dumps(
        {"type": "record", "name": name, "namespace": "shop", "fields": list(fields), **more}
    )


ID_INT = {"name": "id", "type": "int"}
ID_LONG = {"name": "id", "type": "long"}
ID_STRING = {"name": "id", "type": "string"}
NOTE = {"name": "note", "type": "string", "default": ""}
NOTE_REQUIRED = {"name": "note", "type": "string"}
PRICE_FLOAT = {"name": "price", "type": "float"}
PRICE_DOUBLE = {"name": "price", "type": "double"}
TAG = {"name": "tag", "type": "string", "default": "none"}


async def written(
    registry: GlueSchemaRegistry, compatibility: str, versions: list[tuple[str, dict[str, Any]]]
) -> list[bytes]:
    """Each definition registered in turn as a version of one schema (the engine checks
    it against the ones before), and a record written with it."""
    records = []
    for definition, obj in versions:
        schema = AvroSchema("orders", definition, compatibility=compatibility)
        records.append(encode(schema, obj, await registry.version_for(schema.spec)))
    return records


async def test_backward_a_new_reader_reads_the_old_versions_records() -> None:
    v1, v2 = order(ID_INT, PRICE_FLOAT), order(ID_LONG, PRICE_DOUBLE, NOTE)
    async with GlueSchemaRegistry(client_of(FakeKinesis()), auto_register=True) as registry:
        old, new = await written(
            registry,
            "BACKWARD",
            [(v1, {"id": 1, "price": 1.5}), (v2, {"id": 2**40, "price": 0.1, "note": "n"})],
        )
        decoder = Decoder(registry, reader_schemas=[v2])
        # promoted types (int to long, float to double) and the added field's default
        assert (await decoder.decode(old)).value == {"id": 1, "price": 1.5, "note": ""}
        assert (await decoder.decode(new)).value == {"id": 2**40, "price": 0.1, "note": "n"}
        # without a reader schema, each record is read with its writer's
        assert (await Decoder(registry).decode(old)).value == {"id": 1, "price": 1.5}


async def test_forward_an_old_reader_reads_the_new_versions_records() -> None:
    v1, v2 = order(ID_INT, NOTE), order(ID_INT, NOTE, TAG)  # adds tag
    v3 = order(ID_INT, TAG)  # drops note, which the older readers have a default for
    async with GlueSchemaRegistry(client_of(FakeKinesis()), auto_register=True) as registry:
        records = await written(
            registry,
            "FORWARD",
            [
                (v1, {"id": 1, "note": "a"}),
                (v2, {"id": 2, "note": "b", "tag": "t"}),
                (v3, {"id": 3, "tag": "u"}),
            ],
        )
        decoder = Decoder(registry, reader_schemas=[AvroSchema("orders", v1)])
        got = [(await decoder.decode(r)).value for r in records]
        assert got == [{"id": 1, "note": "a"}, {"id": 2, "note": "b"}, {"id": 3, "note": ""}]
        # FORWARD refuses a version the latest's readers cannot read
        with pytest.raises(SchemaIncompatibleError):
            await written(registry, "FORWARD", [(order(ID_STRING, TAG), {"id": "4"})])


async def test_full_readers_of_either_version_read_both() -> None:
    v1, v2 = order(ID_INT, NOTE), order(ID_INT, TAG)
    async with GlueSchemaRegistry(client_of(FakeKinesis()), auto_register=True) as registry:
        old, new = await written(
            registry, "FULL", [(v1, {"id": 1, "note": "a"}), (v2, {"id": 2, "tag": "t"})]
        )
        by_v1, by_v2 = (
            Decoder(registry, reader_schemas=[v1]),
            Decoder(registry, reader_schemas=[v2]),
        )
        assert (await by_v1.decode(new)).value == {"id": 2, "note": ""}
        assert (await by_v2.decode(old)).value == {"id": 1, "tag": "none"}
        with pytest.raises(SchemaIncompatibleError):  # a field without a default: not FULL
            await written(registry, "FULL", [(order(ID_INT, NOTE_REQUIRED), {"id": 3, "note": ""})])


async def test_a_reader_renamed_with_aliases_reads_the_old_name() -> None:
    registry = InMemorySchemaRegistry()
    writer = AvroSchema("orders", order(ID_INT))
    record = encode(writer, {"id": 7}, await registry.version_for(writer.spec))
    reader = json.dumps(
        {
            "type": "record",
            "name": "Purchase",
            "namespace": "sales",
            "aliases": ["shop.Order"],
            "fields": [{"name": "number", "type": "long", "aliases": ["id"]}, TAG],
        }
    )
    decoded = await Decoder(registry, reader_schemas=[reader]).decode(record)
    assert decoded.value == {"number": 7, "tag": "none"}


async def test_a_reader_that_cannot_resolve_the_writer_is_a_decode_error() -> None:
    registry = InMemorySchemaRegistry()
    writer = AvroSchema("orders", order(ID_LONG))
    record = encode(writer, {"id": 7}, await registry.version_for(writer.spec))
    decoder = Decoder(registry, reader_schemas=[order(ID_INT, NOTE_REQUIRED)])
    with pytest.raises(DecodeError, match=r"reader schema does not resolve shop\.Order"):
        await decoder.decode(record)
    # a record of another name is read with its writer's schema
    other = AvroSchema("other", order(ID_INT, name="Other"))
    record = encode(other, {"id": 1}, await registry.version_for(other.spec))
    assert (await decoder.decode(record)).value == {"id": 1}


def test_two_reader_schemas_for_one_name_are_refused() -> None:
    with pytest.raises(SchemaError, match=r"two reader schemas are for shop\.Order"):
        Decoder(InMemorySchemaRegistry(), reader_schemas=[order(ID_INT), order(ID_LONG)])
    with pytest.raises(TypeError, match="not a protobuf message class"):
        Decoder(InMemorySchemaRegistry(), message_classes=[dict])  # type: ignore[list-item]


PROTO_V1 = 'syntax = "proto3";\npackage shop;\nmessage Order { int64 id = 1; }\n'
PROTO_V2 = (
    'syntax = "proto3";\npackage shop;\n'
    "message Order { int64 id = 1; string note = 2; repeated int32 lines = 3; }\n"
)


@pytest.mark.parametrize("compatibility", ["BACKWARD", "FORWARD", "FULL"])
async def test_protobuf_reads_into_the_generated_class_of_either_version(
    compatibility: str,
) -> None:
    v1_class, v2_class = (
        message_class(PROTO_V1, "shop.Order"),
        message_class(PROTO_V2, "shop.Order"),
    )
    async with GlueSchemaRegistry(client_of(FakeKinesis()), auto_register=True) as registry:
        records = []
        for cls, text, value in (
            (v1_class, PROTO_V1, v1_class(id=1)),
            (v2_class, PROTO_V2, v2_class(id=2, note="n", lines=[3])),
        ):
            schema = ProtobufSchema("porders", cls, text, compatibility=compatibility)
            records.append(encode(schema, value, await registry.version_for(schema.spec)))
        as_v2 = [
            (await Decoder(registry, message_classes=[v2_class]).decode(r)).value for r in records
        ]
        assert all(type(m) is v2_class for m in as_v2)
        assert [(m.id, m.note, list(m.lines)) for m in as_v2] == [(1, "", []), (2, "n", [3])]  # type: ignore[attr-defined]
        as_v1 = [
            (await Decoder(registry, message_classes=[v1_class]).decode(r)).value for r in records
        ]
        assert all(type(m) is v1_class for m in as_v1)
        assert [m.id for m in as_v1] == [1, 2]  # type: ignore[attr-defined]
        # the fields v1 does not know are kept: written again, v2 reads them
        again = v2_class.FromString(as_v1[1].SerializeToString())  # type: ignore[attr-defined]
        assert (again.note, list(again.lines)) == ("n", [3])  # type: ignore[attr-defined]
