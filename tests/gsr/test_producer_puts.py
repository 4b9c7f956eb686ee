"""``Producer.put_object`` and ``SyncProducer.put_object`` against the fake (Kinesis and
Glue on one endpoint): encoded per user record, read back by the decoder, the cached path
making no request, mismatches and refusals raised at ``put`` with nothing else affected."""

from __future__ import annotations

import functools
import json
from typing import Any

import anyio
import pytest

from kinesis_trio import Producer, ProducerConfig, SyncProducer, deaggregate
from kinesis_trio.gsr import (
    AvroSchema,
    Decoder,
    GlueSchemaRegistry,
    JsonSchema,
    SchemaIncompatibleError,
    SchemaMismatchError,
    SchemaNotFoundError,
)
from kinesis_trio.gsr._wire import decode_frame
from kinesis_trio.testing import FakeKinesis
from tests.gsr.conftest import AVRO_BAD, AVRO_V1, client_of
from tests.support.helpers import CREDS

ORDER = AvroSchema("orders", AVRO_V1)
EVENT = JsonSchema(
    "events",
    json.dumps({"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}),
    compress=True,
)
GLUE_CALLS = {
    "GetSchemaByDefinition",
    "CreateSchema",
    "RegisterSchemaVersion",
    "GetSchemaVersion",
    "PutSchemaVersionMetadata",
}


def new_fake() -> FakeKinesis:
    fake = FakeKinesis()
    fake.create_stream("s", shard_count=2)
    return fake


def producer_of(fake: FakeKinesis, registry: GlueSchemaRegistry | None, **config: Any) -> Producer:
    return Producer(
        "s",
        region_name="us-east-1",
        endpoint_url="http://fake.local",
        credentials=CREDS,
        config=ProducerConfig(**config),
        transport=fake.transport(),
        schema_registry=registry,
    )


def user_records(fake: FakeKinesis) -> list[bytes]:
    return [u.data for r in fake.records("s") for u in deaggregate(r.data, r.partition_key or "")]


def glue_calls(fake: FakeKinesis) -> list[str]:
    return [c for c in fake.calls if c in GLUE_CALLS]


@pytest.mark.anyio
async def test_objects_are_encoded_per_user_record_and_decode_back() -> None:
    fake = new_fake()
    registry = GlueSchemaRegistry(client_of(fake), auto_register=True)
    async with registry, producer_of(fake, registry) as producer:
        outcomes = [await producer.put_object({"id": i}, f"k{i}", schema=ORDER) for i in range(50)]
        outcomes.append(await producer.put_object({"n": 7}, "k", schema=EVENT))
        await producer.flush()
        assert all([(await o.wait()).ok for o in outcomes])
        # aggregated: fewer Kinesis records than user records, each user record a GSR one
        assert len(fake.records("s")) < 51
        records = user_records(fake)
        decoder = Decoder(registry)
        decoded = [await decoder.decode(r) for r in records]
    assert sorted(d.value["id"] for d in decoded if d.data_format == "AVRO") == list(range(50))  # type: ignore[index]
    (event,) = [d for d in decoded if d.data_format == "JSON"]
    assert event.value == {"n": 7} and event.compressed
    assert {decode_frame(r).version_id for r in records} == {
        registry.cached_version(ORDER.spec),
        registry.cached_version(EVENT.spec),
    }


@pytest.mark.anyio
async def test_the_cached_put_path_makes_no_request() -> None:
    fake = new_fake()
    registry = GlueSchemaRegistry(client_of(fake), auto_register=True)
    async with registry, producer_of(fake, registry) as producer:
        await producer.put_object({"id": 0}, "k", schema=ORDER)
        await producer.flush()
        assert glue_calls(fake)  # the first use asked the registry
        fake.calls.clear()
        for i in range(200):
            producer.put_object_nowait({"id": i}, f"k{i}", schema=ORDER)
            await producer.put_object({"id": i}, f"k{i}", schema=ORDER)
        await producer.flush()
    assert glue_calls(fake) == []
    assert set(fake.calls) == {"PutRecords"}


@pytest.mark.anyio
async def test_concurrent_first_uses_of_a_schema_make_one_lookup() -> None:
    fake = new_fake()
    registry = GlueSchemaRegistry(client_of(fake), auto_register=True)
    async with registry, producer_of(fake, registry) as producer:
        async with anyio.create_task_group() as tg:
            for i in range(20):
                tg.start_soon(
                    functools.partial(producer.put_object, schema=ORDER), {"id": i}, f"k{i}"
                )
        await producer.flush()
    assert glue_calls(fake).count("GetSchemaByDefinition") == 1
    assert glue_calls(fake).count("CreateSchema") == 1
    assert len(user_records(fake)) == 20


@pytest.mark.anyio
async def test_a_mismatch_raises_at_put_and_nothing_else_is_affected() -> None:
    fake = new_fake()
    registry = GlueSchemaRegistry(client_of(fake), auto_register=True)
    async with registry, producer_of(fake, registry) as producer:
        first = await producer.put_object({"id": 1}, "k", schema=ORDER)
        before = producer.outstanding_records
        with pytest.raises(SchemaMismatchError):
            await producer.put_object({"id": "not an int"}, "k", schema=ORDER)
        with pytest.raises(SchemaMismatchError):
            producer.put_object_nowait({"nope": 1}, "k", schema=ORDER)
        assert producer.outstanding_records == before
        last = await producer.put_object({"id": 2}, "k", schema=ORDER)
        await producer.flush()
        assert (await first.wait()).ok and (await last.wait()).ok
    assert len(user_records(fake)) == 2


@pytest.mark.anyio
async def test_a_first_put_that_does_not_fit_asks_the_registry_nothing() -> None:
    """Checked before the version id is looked up: a wrong object registers no schema, and
    the error is the mismatch (not the registry's answer to a schema never meant)."""
    fake = new_fake()
    registry = GlueSchemaRegistry(client_of(fake), auto_register=True)
    async with registry, producer_of(fake, registry) as producer:
        with pytest.raises(SchemaMismatchError):
            await producer.put_object({"id": "not an int"}, "k", schema=ORDER)
        with pytest.raises(SchemaMismatchError, match=r"^records\[1\]: "):
            await producer.put_objects([({"id": 1}, "k"), ({"nope": 1}, "k")], schema=ORDER)
        assert glue_calls(fake) == []
        assert producer.outstanding_records == 0
        await producer.put_object({"id": 2}, "k", schema=ORDER)
        await producer.flush()
    assert "CreateSchema" in glue_calls(fake)
    assert len(user_records(fake)) == 1


@pytest.mark.parametrize("backend", ["trio", "asyncio"])
def test_a_sync_first_put_that_does_not_fit_asks_the_registry_nothing(backend: str) -> None:
    fake = new_fake()
    registry = GlueSchemaRegistry(client_of(fake), auto_register=True)
    with SyncProducer(
        "s",
        region_name="us-east-1",
        endpoint_url="http://fake.local",
        credentials=CREDS,
        transport=fake.transport(),
        backend=backend,
        schema_registry=registry,
    ) as producer:
        with pytest.raises(SchemaMismatchError):
            producer.put_object({"id": "not an int"}, "k", schema=ORDER)
        assert glue_calls(fake) == []


@pytest.mark.anyio
async def test_the_size_limit_applies_to_the_encoded_record() -> None:
    fake = new_fake()
    registry = GlueSchemaRegistry(client_of(fake), auto_register=True)
    schema = JsonSchema("blobs", '{"type": "string"}')
    limit = 1024
    async with registry, producer_of(fake, registry, max_record_size=limit) as producer:
        # the JSON text plus the key fits; with the 18-byte header it does not
        fits_bare = "x" * (limit - 2 - 1 - 10)
        assert len(json.dumps(fits_bare)) + 1 <= limit
        with pytest.raises(ValueError, match="too large"):
            await producer.put_object(fits_bare, "k", schema=schema)
        ok = await producer.put_object("x" * (limit - 2 - 1 - 18), "k", schema=schema)
        await producer.flush()
        assert (await ok.wait()).ok


@pytest.mark.anyio
async def test_a_refused_schema_fails_fast_with_a_typed_error() -> None:
    fake = new_fake()
    registry = GlueSchemaRegistry(client_of(fake), auto_register=True)
    async with registry, producer_of(fake, registry) as producer:
        await producer.put_object({"id": 1}, "k", schema=ORDER)
        with pytest.raises(SchemaIncompatibleError):
            await producer.put_object({"id": "a"}, "k", schema=AvroSchema("orders", AVRO_BAD))
        assert producer.outstanding_records <= 1
    strict = GlueSchemaRegistry(client_of(fake))  # auto-registration off
    async with strict, producer_of(fake, strict) as producer:
        with pytest.raises(SchemaNotFoundError):
            await producer.put_object({"n": 1}, "k", schema=EVENT)


@pytest.mark.anyio
async def test_put_object_nowait_with_an_uncached_schema_would_block() -> None:
    fake = new_fake()
    registry = GlueSchemaRegistry(client_of(fake), auto_register=True)
    async with registry, producer_of(fake, registry) as producer:
        with pytest.raises(anyio.WouldBlock, match="not known yet"):
            producer.put_object_nowait({"id": 1}, "k", schema=ORDER)
        assert fake.calls.count("GetSchemaByDefinition") == 0
        await producer.put_object({"id": 1}, "k", schema=ORDER)
        outcome = producer.put_object_nowait({"id": 2}, "k", schema=ORDER)
        await producer.flush()
        assert (await outcome.wait()).ok


@pytest.mark.anyio
async def test_put_object_without_a_registry_says_how_to_give_one() -> None:
    fake = new_fake()
    async with producer_of(fake, None) as producer:
        assert producer.schema_registry is None
        with pytest.raises(ValueError, match="schema_registry="):
            await producer.put_object({"id": 1}, "k", schema=ORDER)


@pytest.mark.parametrize("backend", ["trio", "asyncio"])
def test_sync_producer_put_object(backend: str) -> None:
    fake = new_fake()
    registry = GlueSchemaRegistry(client_of(fake), auto_register=True)
    with SyncProducer(
        "s",
        region_name="us-east-1",
        endpoint_url="http://fake.local",
        credentials=CREDS,
        transport=fake.transport(),
        backend=backend,
        schema_registry=registry,
    ) as producer:
        futures = [producer.put_object({"id": i}, f"k{i}", schema=ORDER) for i in range(10)]
        with pytest.raises(SchemaMismatchError):
            producer.put_object({"id": None}, "k", schema=ORDER)
        producer.flush(timeout=30)
        assert all(f.result(timeout=30).ok for f in futures)
    assert glue_calls(fake).count("GetSchemaByDefinition") == 1
    version = registry.cached_version(ORDER.spec)
    assert {decode_frame(r).version_id for r in user_records(fake)} == {version}


@pytest.mark.anyio
async def test_put_objects_encodes_a_batch_and_refuses_it_whole_naming_a_mismatch() -> None:
    fake = new_fake()
    registry = GlueSchemaRegistry(client_of(fake), auto_register=True)
    async with registry, producer_of(fake, registry) as producer:
        with pytest.raises(SchemaMismatchError, match=r"^records\[2\]: "):
            await producer.put_objects(
                [({"id": 0}, "k"), ({"id": 1}, "k"), ({"id": "x"}, "k")], schema=ORDER
            )
        assert producer.outstanding_records == 0
        items: list[tuple[object, str | None]] = [({"id": i}, f"k{i}") for i in range(30)]
        outcomes = await producer.put_objects(items, schema=ORDER)
        await producer.flush()
        assert all([(await o.wait()).ok for o in outcomes])
        decoder = Decoder(registry)
        decoded = [await decoder.decode(r) for r in user_records(fake)]
    assert sorted(d.value["id"] for d in decoded) == list(range(30))  # type: ignore[index]
