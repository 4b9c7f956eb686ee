"""Typed records through the Glue Schema Registry: ``put_object`` with an Avro schema and a
JSON Schema, a record that does not match refused at ``put``, and the stream read back and
decoded as any GSR reader (the KCL's, Kafka's) would.

Runs offline against the in-memory fake (Kinesis and Glue on one endpoint); with
``AWS_ENDPOINT_URL`` set to ``kinesis-trio local``'s URL (which serves Glue on its Kinesis
port) against that engine::

    uv run python examples/gsr_producer.py
    kinesis-trio local --emulator python &
    AWS_ENDPOINT_URL=http://127.0.0.1:4567 AWS_REGION=us-east-1 \\
        AWS_ACCESS_KEY_ID=x AWS_SECRET_ACCESS_KEY=y uv run python examples/gsr_producer.py

Its last line is a JSON summary.
"""

from __future__ import annotations

import base64
import json
import os
import uuid
from typing import Any

import anyio

from kinesis_trio import KinesisClient, Producer, StaticCredentials, deaggregate
from kinesis_trio.gsr import (
    AvroSchema,
    Decoder,
    GlueSchemaRegistry,
    JsonSchema,
    SchemaMismatchError,
)
from kinesis_trio.testing import FakeKinesis

ORDER = AvroSchema(
    "orders",
    json.dumps(
        {
            "type": "record",
            "name": "Order",
            "namespace": "shop",
            "fields": [
                {"name": "id", "type": "long"},
                {"name": "customer", "type": "string"},
                {"name": "amount", "type": "double"},
            ],
        }
    ),
)
EVENT = JsonSchema(
    "order-events",
    json.dumps(
        {
            "type": "object",
            "properties": {"order": {"type": "integer"}, "event": {"enum": ["paid", "sent"]}},
            "required": ["order", "event"],
        }
    ),
    compress=True,  # zlib (header byte 1 = 5): any GSR reader inflates it
)


async def main() -> None:
    stream = f"gsr-{uuid.uuid4().hex[:8]}"
    endpoint = os.environ.get("AWS_ENDPOINT_URL")
    connection: dict[str, Any] = {}
    if not endpoint:  # offline: the fake serves Kinesis and Glue on one endpoint
        fake = FakeKinesis()
        connection = {
            "region_name": "us-east-1",
            "endpoint_url": "http://fake",
            "credentials": StaticCredentials("x", "y"),
            "transport": fake.transport(),
        }
    async with KinesisClient(**connection) as client:
        await client.create_stream(stream, 2)
        await client.wait_for_stream(stream)

    # Glue is reached as Kinesis is (kinesis-trio local serves both on its port).
    registry = GlueSchemaRegistry.connect(auto_register=True, **connection)
    async with registry, Producer(stream, schema_registry=registry, **connection) as producer:
        for i in range(100):  # the first put registers the schema; the rest make no request
            await producer.put_object(
                {"id": i, "customer": f"c{i % 7}", "amount": i * 1.5}, f"c{i % 7}", schema=ORDER
            )
        await producer.put_object({"order": 7, "event": "paid"}, "c0", schema=EVENT)
        try:
            await producer.put_object({"id": "eight"}, "c1", schema=ORDER)
        except SchemaMismatchError as exc:
            print(f"refused at put: {exc}")
        await producer.flush()

        # Read the stream back: split the KPL aggregates, decode each user record.
        decoder = Decoder(registry)
        values: list[Any] = []
        async with KinesisClient(**connection) as client:
            for shard in await client.list_shards(stream):
                iterator = await client.get_shard_iterator(stream, shard["ShardId"], "TRIM_HORIZON")
                page = await client.get_records(iterator)
                for record in page["Records"]:
                    data = base64.b64decode(record["Data"])
                    for user in deaggregate(data, record["PartitionKey"]):
                        values.append((await decoder.decode(user.data)).jsonable())
    orders = [v for v in values if "id" in v]
    events = [v for v in values if "event" in v]
    print(f"read back {len(orders)} orders and {len(events)} event(s), e.g. {orders[0]}")
    print(json.dumps({"stream": stream, "orders": len(orders), "events": events}))


if __name__ == "__main__":
    anyio.run(main)
