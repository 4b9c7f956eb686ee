"""The Glue Schema Registry client: register a schema, evolve it, see an incompatible change
refused, read a definition back by its version id.

Runs offline against the in-memory fake; with ``AWS_ENDPOINT_URL_GLUE`` set (for example to
``kinesis-trio local``'s URL, which serves Glue on its Kinesis port) against that endpoint::

    uv run python examples/gsr_registry.py
    AWS_ENDPOINT_URL_GLUE=http://127.0.0.1:4567 AWS_REGION=us-east-1 \\
        AWS_ACCESS_KEY_ID=x AWS_SECRET_ACCESS_KEY=y uv run python examples/gsr_registry.py
"""

from __future__ import annotations

import json
import os
import uuid

import anyio

from kinesis_trio import StaticCredentials
from kinesis_trio.gsr import GlueSchemaRegistry, SchemaIncompatibleError, SchemaSpec
from kinesis_trio.testing import FakeKinesis


def order_schema(*extra: dict[str, object]) -> str:
    fields = [{"name": "id", "type": "long"}, {"name": "amount", "type": "double"}, *extra]
    return json.dumps({"type": "record", "name": "Order", "namespace": "shop", "fields": fields})


async def main() -> None:
    name = f"orders-{uuid.uuid4().hex[:8]}"
    if os.environ.get("AWS_ENDPOINT_URL_GLUE"):
        registry = GlueSchemaRegistry.connect(auto_register=True)
    else:
        fake = FakeKinesis()
        registry = GlueSchemaRegistry.connect(
            region_name="us-east-1",
            endpoint_url="http://fake",
            credentials=StaticCredentials("x", "y"),
            transport=fake.transport(),
            auto_register=True,
        )
    async with registry:
        # The first use creates the schema (compatibility BACKWARD, "default-registry").
        v1 = SchemaSpec(name, order_schema(), "AVRO", metadata={"owner": "payments"})
        first = await registry.version_for(v1)
        print(f"{name} v1: {first}")
        # Known now: the put path gets it without a request.
        assert registry.cached_version(v1) == first

        # A field with a default: new readers read old records, so BACKWARD accepts it.
        note: dict[str, object] = {"name": "note", "type": "string", "default": ""}
        v2 = SchemaSpec(name, order_schema(note), "AVRO")
        print(f"{name} v2: {await registry.version_for(v2)}")

        # A field without a default: a v3 reader cannot read v2's records.
        v3 = SchemaSpec(name, order_schema({"name": "currency", "type": "string"}), "AVRO")
        try:
            await registry.version_for(v3)
        except SchemaIncompatibleError as exc:
            print(f"{name} v3 refused: {exc}")

        # The reader's side: the definition of a version id found in a record's header.
        schema = await registry.schema_of(first)
        print(f"{first} is {schema.data_format}: {schema.definition}")


if __name__ == "__main__":
    anyio.run(main)
