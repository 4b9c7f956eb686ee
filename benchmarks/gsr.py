"""The Glue Schema Registry's cost: CPU per record of ``put_object`` with each format against
``put`` of plain bytes, on one workload, side by side in one run (printed, no result file).

In process, on trio, against the in-memory fake (Kinesis and Glue on one endpoint, no
sockets): the fake's CPU is in every figure, the same work for every case but for the bytes
it stores. Each round runs every case once, in a rotating order, on a fresh fake; the table
gives medians over the rounds. The workload: ``--count`` orders (an id, a customer, an
amount, three line items), built before the clock starts, in each case's native form (a
dict; a protobuf message), over 256 partition keys.

- ``bytes``: ``put`` of each order's JSON text, encoded beforehand (the producer's own cost);
- ``bytes + json.dumps``: ``put(json.dumps(order).encode())`` (JSON without a schema);
- ``AVRO``, ``AVRO + zlib``, ``JSON`` (validated by jsonschema), ``PROTOBUF``:
  ``put_object`` with the schema, its version cached after the first record.

Columns: CPU per record (µs) of the whole run (put, aggregate, send, the fake), of the
encoding alone (``schema.encode`` in a loop, no producer), the bytes per record, and the
Glue requests made while the records were put (the cached path: 0).

    uv run python -m benchmarks gsr --count 20000 --rounds 3
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from collections.abc import Callable
from typing import Any

import anyio
from google.protobuf import message_factory

from kinesis_trio import Producer, ProducerConfig, StaticCredentials
from kinesis_trio._aws._glue import GlueClient
from kinesis_trio.gsr import AvroSchema, GlueSchemaRegistry, JsonSchema, ProtobufSchema, Schema
from kinesis_trio.gsr._protobuf import compile_definition
from kinesis_trio.testing import FakeKinesis

from ._report import markdown_table

CREDS = StaticCredentials("AKIDBENCH", "bench-secret")
GLUE_OPS = ("GetSchemaByDefinition", "CreateSchema", "RegisterSchemaVersion", "GetSchemaVersion")

AVRO = json.dumps(
    {
        "type": "record",
        "name": "Order",
        "namespace": "shop",
        "fields": [
            {"name": "id", "type": "long"},
            {"name": "customer", "type": "string"},
            {"name": "amount", "type": "double"},
            {
                "name": "lines",
                "type": {
                    "type": "array",
                    "items": {
                        "type": "record",
                        "name": "Line",
                        "fields": [
                            {"name": "sku", "type": "string"},
                            {"name": "quantity", "type": "int"},
                        ],
                    },
                },
            },
        ],
    }
)
JSON = json.dumps(
    {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "properties": {
            "id": {"type": "integer"},
            "customer": {"type": "string"},
            "amount": {"type": "number"},
            "lines": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "sku": {"type": "string"},
                        "quantity": {"type": "integer", "minimum": 1},
                    },
                    "required": ["sku", "quantity"],
                },
            },
        },
        "required": ["id", "customer", "amount", "lines"],
    }
)
PROTO = """syntax = "proto3";
package shop;
message Order {
  message Line { string sku = 1; int32 quantity = 2; }
  int64 id = 1;
  string customer = 2;
  double amount = 3;
  repeated Line lines = 4;
}
"""


def orders(count: int) -> list[dict[str, Any]]:
    return [
        {
            "id": i,
            "customer": f"customer-{i % 997}",
            "amount": round(i * 0.37, 2),
            "lines": [{"sku": f"sku-{(i + j) % 101}", "quantity": 1 + j} for j in range(3)],
        }
        for i in range(count)
    ]


class Case:
    """One way of putting the workload: its schema (None: bytes) and its records."""

    def __init__(self, name: str, schema: Schema | None, records: list[Any]) -> None:
        self.name = name
        self.schema = schema
        self.records = records


def cases(count: int) -> list[Case]:
    docs = orders(count)
    order_class: Any = message_factory.GetMessageClass(
        compile_definition(PROTO).message_types_by_name["Order"]
    )
    messages = [order_class(**doc) for doc in docs]
    texts = [json.dumps(doc).encode() for doc in docs]
    return [
        Case("bytes", None, texts),
        Case("bytes + json.dumps", None, docs),
        Case("AVRO", AvroSchema("bench-avro", AVRO), docs),
        Case("AVRO + zlib", AvroSchema("bench-avro", AVRO, compress=True), docs),
        Case("JSON", JsonSchema("bench-json", JSON), docs),
        Case("PROTOBUF", ProtobufSchema("bench-proto", order_class, PROTO), messages),
    ]


async def run_case(case: Case, keys: list[str]) -> dict[str, float]:
    fake = FakeKinesis()
    fake.create_stream("bench", shard_count=4)
    glue = GlueClient(
        region_name="us-east-1", endpoint_url="http://fake", credentials=CREDS,
        transport=fake.transport(),
    )  # fmt: skip
    registry = GlueSchemaRegistry(glue, auto_register=True)
    config = ProducerConfig(max_outstanding_records=100_000)
    async with registry, Producer(
        "bench", region_name="us-east-1", endpoint_url="http://fake", credentials=CREDS,
        config=config, transport=fake.transport(), schema_registry=registry,
    ) as producer:  # fmt: skip
        schema = case.schema
        if schema is not None:  # the first use looks the schema up (not measured)
            await producer.put_object(case.records[0], "warm", schema=schema)
            await producer.flush()
        glue_before = sum(fake.calls.count(op) for op in GLUE_OPS)
        n, nkeys = len(case.records), len(keys)
        cpu0, wall0 = time.process_time(), time.perf_counter()
        if schema is None and case.name == "bytes":
            for i, data in enumerate(case.records):
                await producer.put(data, keys[i % nkeys])
        elif schema is None:
            for i, doc in enumerate(case.records):
                await producer.put(json.dumps(doc).encode(), keys[i % nkeys])
        else:
            for i, obj in enumerate(case.records):
                await producer.put_object(obj, keys[i % nkeys], schema=schema)
        await producer.flush()
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
        glue_requests = sum(fake.calls.count(op) for op in GLUE_OPS) - glue_before
        size = encode_size(case, registry)
    return {
        "cpu_us": cpu / n * 1e6,
        "records_per_s": n / wall,
        "encode_us": encode_cpu(case, registry),
        "bytes": size,
        "glue_requests": glue_requests,
    }


def encode_size(case: Case, registry: GlueSchemaRegistry) -> float:
    sample = case.records[:1000]
    if case.schema is None:
        encode: Callable[[Any], bytes] = (
            (lambda d: d) if case.name == "bytes" else (lambda d: json.dumps(d).encode())
        )
        return statistics.fmean(len(encode(r)) for r in sample)
    version = registry.cached_version(case.schema.spec)
    assert version is not None
    return statistics.fmean(len(case.schema.encode(r, version)) for r in sample)


def encode_cpu(case: Case, registry: GlueSchemaRegistry) -> float:
    """CPU per record of the encoding alone (µs)."""
    records = case.records
    cpu0 = time.process_time()
    if case.schema is None:
        if case.name != "bytes":
            for doc in records:
                json.dumps(doc).encode()
    else:
        version = registry.cached_version(case.schema.spec)
        assert version is not None
        encode = case.schema.encode
        for obj in records:
            encode(obj, version)
    return (time.process_time() - cpu0) / len(records) * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m benchmarks gsr", description=__doc__)
    parser.add_argument("--count", type=int, default=20_000, help="records per case")
    parser.add_argument("--rounds", type=int, default=3, help="rounds (medians over them)")
    args = parser.parse_args()
    all_cases = cases(args.count)
    keys = [f"key-{i}" for i in range(256)]
    runs: dict[str, list[dict[str, float]]] = {c.name: [] for c in all_cases}
    for r in range(args.rounds):
        order = all_cases[r % len(all_cases) :] + all_cases[: r % len(all_cases)]
        for case in order:
            runs[case.name].append(anyio.run(run_case, case, keys, backend="trio"))
        print(f"round {r + 1}/{args.rounds} done", flush=True)
    base = statistics.median(x["cpu_us"] for x in runs["bytes"])
    rows = []
    for case in all_cases:
        got = runs[case.name]

        def med(key: str, got: list[dict[str, float]] = got) -> float:
            return statistics.median(x[key] for x in got)

        rows.append(
            [
                case.name,
                f"{med('cpu_us'):.1f}",
                f"{med('cpu_us') / base:.2f}x",
                f"{med('encode_us'):.1f}",
                f"{med('bytes'):.0f}",
                f"{med('records_per_s'):,.0f}",
                f"{max(x['glue_requests'] for x in got):.0f}",
            ]
        )
    headers = [
        "case",
        "CPU µs/record",
        "vs bytes",
        "encode µs/record",
        "bytes/record",
        "records/s",
        "Glue requests",
    ]
    print(
        f"\n{args.count:,} records per case, {args.rounds} rounds (medians), trio, "
        "in process against FakeKinesis\n"
    )
    print(markdown_table(headers, rows, "lrrrrrr"))


if __name__ == "__main__":
    main()
