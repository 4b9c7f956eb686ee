"""A sample of the fit property's accepted cases (``tests/gsr/test_fit_property.py``: generated
Avro schemas and objects that ``put_object`` accepts) read by the AWS Java serde: the object
it decodes is the one put, where Java and Maven are present."""

from __future__ import annotations

import functools
import json
import math
import shutil
import struct
import uuid
from pathlib import Path
from typing import Any

import fastavro
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kinesis_trio.gsr import AvroSchema, SchemaMismatchError, encode
from tests.gsr.test_fit_property import avro_schemas, values
from tests.support.gsr import read_with_java

SAMPLE = 60


@functools.cache
def accepted_sample() -> list[dict[str, Any]]:
    """Generated (schema, object) pairs ``encode`` accepts, as the Java program's input rows
    (the object in ``objects``, by version id)."""
    rows: list[dict[str, Any]] = []

    @settings(
        max_examples=SAMPLE * 3,
        derandomize=True,
        database=None,
        deadline=None,
        suppress_health_check=list(HealthCheck),
    )
    @given(st.data())
    def collect(data: st.DataObject) -> None:
        definition = json.dumps(data.draw(avro_schemas))
        obj = data.draw(values(json.loads(definition)))
        try:
            schema = AvroSchema(f"prop-{len(rows)}", definition)
            version_id = uuid.uuid4()
            record = encode(schema, obj, version_id)
        except SchemaMismatchError:
            return
        if len(rows) >= SAMPLE or not finite(obj):
            return
        OBJECTS[str(version_id)] = obj
        rows.append(
            {
                "format": "AVRO",
                "schema_name": schema.spec.name,
                "version_id": str(version_id),
                "definition": definition,
                "record_hex": record.hex(),
            }
        )

    collect()
    return rows


OBJECTS: dict[str, Any] = {}


def from_avro_json(named: dict[str, Any], schema: Any, value: Any) -> Any:
    """The object a value in Avro's JSON encoding (what the Java program prints) stands for:
    unions unwrapped (``{"long": 5}``), bytes from their ISO-8859-1 text."""
    if isinstance(schema, str) and schema in named:
        schema = named[schema]
    if isinstance(schema, list):
        if value is None:
            return None
        ((branch, inner),) = value.items()
        chosen = next(
            b for b in schema if (b if isinstance(b, str) else b.get("name", b["type"])) == branch
        )
        return from_avro_json(named, chosen, inner)
    kind = schema if isinstance(schema, str) else schema["type"]
    if kind == "bytes":
        return value.encode("iso-8859-1")
    if kind == "array":
        return [from_avro_json(named, schema["items"], v) for v in value]
    if kind == "map":
        return {k: from_avro_json(named, schema["values"], v) for k, v in value.items()}
    if kind == "record":
        return {
            f["name"]: from_avro_json(named, f["type"], value[f["name"]]) for f in schema["fields"]
        }
    return value


def finite(value: Any) -> bool:
    if isinstance(value, float):
        return math.isfinite(value)
    if isinstance(value, dict):
        return all(finite(v) for v in value.values())
    if isinstance(value, list):
        return all(finite(v) for v in value)
    return True


def same(ours: Any, java: Any) -> bool:
    """Equal values, a bool a bool; a number Java printed from a 32-bit float (its shortest
    text as a float, not a double) is compared as a float."""
    if isinstance(ours, bool) or isinstance(java, bool):
        return type(ours) is type(java) and ours == java
    if isinstance(ours, (int, float)) or isinstance(java, (int, float)):
        if not isinstance(ours, (int, float)) or not isinstance(java, (int, float)):
            return False
        return bool(ours == java or as_float32(ours) == as_float32(java))
    if isinstance(ours, dict):
        return (
            isinstance(java, dict)
            and ours.keys() == java.keys()
            and all(same(v, java[k]) for k, v in ours.items())
        )
    if isinstance(ours, list):
        return isinstance(java, list) and len(ours) == len(java) and all(map(same, ours, java))
    return type(ours) is type(java) and ours == java


def as_float32(value: float) -> float:
    try:
        return float(struct.unpack("<f", struct.pack("<f", value))[0])
    except OverflowError:
        return value


def test_the_sample_has_cases_of_each_kind() -> None:
    rows = accepted_sample()
    assert len(rows) == SAMPLE
    text = " ".join(r["definition"] for r in rows)
    for kind in ('"double"', '"float"', '"long"', '"map"', '"array"', '["'):
        assert kind in text


@pytest.mark.integration
@pytest.mark.subprocess
@pytest.mark.skipif(
    not (shutil.which("java") and shutil.which("mvn")), reason="needs Java 17+ and Maven"
)
def test_the_java_serde_reads_the_accepted_objects_as_put(tmp_path: Path) -> None:
    rows = accepted_sample()
    read = read_with_java(rows, tmp_path)
    assert len(read) == len(rows)
    for ours, java in zip(rows, read, strict=True):
        assert java["version_id"] == ours["version_id"]
        parsed: Any = fastavro.parse_schema(json.loads(ours["definition"]))
        named = parsed["__named_schemas"]
        got = from_avro_json(named, parsed, java["value"])
        assert same(OBJECTS[ours["version_id"]], got), (ours, java)
