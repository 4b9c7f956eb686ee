"""The cached registry against the fake's Glue: each branch of the Java client's flow, the
errors, the cache's bound and time to live (virtual time), single flight and cancellation."""

from __future__ import annotations

import uuid
from typing import Any

import anyio
import httpx
import pytest

from kinesis_trio.gsr._registry import (
    AUTO_REGISTRATION_IS_DISABLED_MSG,
    MAX_POLLS,
    GlueSchemaRegistry,
)
from kinesis_trio.gsr._types import (
    SchemaIncompatibleError,
    SchemaNotFoundError,
    SchemaRegistryError,
    SchemaSpec,
)
from kinesis_trio.testing import FakeKinesis
from tests.gsr.conftest import AVRO_BAD, AVRO_V1, AVRO_V2, client_of

pytestmark = [pytest.mark.anyio, pytest.mark.virtual_time]

V1 = SchemaSpec("orders", AVRO_V1, "AVRO", metadata={"team": "payments", "tier": "gold"})
V2 = SchemaSpec("orders", AVRO_V2, "AVRO")
BAD = SchemaSpec("orders", AVRO_BAD, "AVRO")


def glue_calls(fake: FakeKinesis) -> list[str]:
    return list(fake.calls)


def error(code: str, message: str, status: int = 400) -> httpx.Response:
    return httpx.Response(status, json={"__type": code, "message": message})


async def test_a_new_schema_is_created_with_its_metadata(fake: FakeKinesis) -> None:
    async with client_of(fake) as glue:
        registry = GlueSchemaRegistry(glue, auto_register=True)
        version = await registry.version_for(V1)
    assert glue_calls(fake) == [
        "GetSchemaByDefinition",
        "CreateSchema",
        "PutSchemaVersionMetadata",
        "PutSchemaVersionMetadata",
    ]
    (stored,) = fake.glue.versions("orders")
    assert uuid.UUID(stored.version_id) == version
    assert stored.metadata == {"team": ["payments"], "tier": ["gold"]}
    _, create = fake.requests[1]
    assert create["Compatibility"] == "BACKWARD"
    assert create["RegistryId"] == {"RegistryName": "default-registry"}


async def test_a_new_definition_of_a_known_schema_is_registered(fake: FakeKinesis) -> None:
    async with client_of(fake) as glue:
        registry = GlueSchemaRegistry(glue, auto_register=True)
        first = await registry.version_for(V1)
        fake.calls.clear()
        second = await registry.version_for(V2)
    assert glue_calls(fake) == ["GetSchemaByDefinition", "RegisterSchemaVersion"]
    assert first != second
    assert [v.number for v in fake.glue.versions("orders")] == [1, 2]


async def test_a_known_version_is_looked_up_once_then_cached(fake: FakeKinesis) -> None:
    async with client_of(fake) as glue:
        await GlueSchemaRegistry(glue, auto_register=True).version_for(V1)
        registry = GlueSchemaRegistry(glue)  # another producer, auto-registration off
        fake.calls.clear()
        assert registry.cached_version(V1) is None
        version = await registry.version_for(V1)
        for _ in range(3):
            assert registry.cached_version(V1) == version
            assert await registry.version_for(V1) == version
    assert glue_calls(fake) == ["GetSchemaByDefinition"]


@pytest.mark.parametrize("existing", [False, True], ids=["no-schema", "no-version"])
async def test_without_auto_registration_nothing_is_registered(
    fake: FakeKinesis, existing: bool
) -> None:
    async with client_of(fake) as glue:
        if existing:
            await GlueSchemaRegistry(glue, auto_register=True).version_for(V1)
            fake.calls.clear()
        registry = GlueSchemaRegistry(glue)
        with pytest.raises(SchemaNotFoundError) as caught:
            await registry.version_for(V2)
    assert AUTO_REGISTRATION_IS_DISABLED_MSG in str(caught.value)
    assert ("Schema version is not found." in str(caught.value)) is existing
    assert caught.value.code == "EntityNotFoundException"
    assert glue_calls(fake) == ["GetSchemaByDefinition"]
    assert len(fake.glue.versions("orders")) == (1 if existing else 0)


async def test_an_incompatible_version_is_refused_and_not_cached(fake: FakeKinesis) -> None:
    async with client_of(fake) as glue:
        registry = GlueSchemaRegistry(glue, auto_register=True)
        await registry.version_for(V1)
        with pytest.raises(SchemaIncompatibleError) as caught:
            await registry.version_for(BAD)
        assert "FAILURE" in str(caught.value)
        assert registry.cached_version(BAD) is None
        fake.calls.clear()
        # the failed version exists: the lookup finds it, FAILURE, and says so again
        with pytest.raises(SchemaIncompatibleError, match="status is FAILURE"):
            await registry.version_for(BAD)
    assert glue_calls(fake) == ["GetSchemaByDefinition"]
    assert [v.status for v in fake.glue.versions("orders")] == ["AVAILABLE", "FAILURE"]


async def test_a_pending_version_is_polled_until_available(fake: FakeKinesis) -> None:
    fake.glue.pending_reads = 3
    async with client_of(fake) as glue:
        registry = GlueSchemaRegistry(glue, auto_register=True, poll_interval=0.02)
        await registry.version_for(V1)
        fake.calls.clear()
        start = anyio.current_time()
        version = await registry.version_for(V2)
        waited = anyio.current_time() - start
    # RegisterSchemaVersion answers PENDING (1 of 3), then two PENDING reads and AVAILABLE
    assert (
        glue_calls(fake)
        == ["GetSchemaByDefinition", "RegisterSchemaVersion"] + ["GetSchemaVersion"] * 3
    )
    assert version == uuid.UUID(fake.glue.versions("orders")[1].version_id)
    assert waited >= 0.06


async def test_a_version_pending_for_ever_fails_after_the_last_poll(fake: FakeKinesis) -> None:
    fake.glue.pending_reads = 1000
    async with client_of(fake) as glue:
        registry = GlueSchemaRegistry(glue, auto_register=True, poll_interval=0.01)
        await registry.version_for(V1)
        fake.calls.clear()
        with pytest.raises(SchemaRegistryError, match="still PENDING") as caught:
            await registry.version_for(V2)
    assert not isinstance(caught.value, SchemaIncompatibleError)
    assert glue_calls(fake).count("GetSchemaVersion") == MAX_POLLS


async def test_a_schema_created_meanwhile_gets_a_version(fake: FakeKinesis) -> None:
    """Another producer created the schema between our lookup and our CreateSchema."""

    async def hook(operation: str, body: dict[str, Any]) -> httpx.Response | None:
        if operation == "GetSchemaByDefinition":
            return error("EntityNotFoundException", "Schema is not found. RegistryName: x")
        return None

    async with client_of(fake) as glue:
        await GlueSchemaRegistry(glue, auto_register=True).version_for(V1)
        fake.hook = hook
        fake.calls.clear()
        version = await GlueSchemaRegistry(glue, auto_register=True).version_for(V2)
    assert glue_calls(fake) == ["GetSchemaByDefinition", "CreateSchema", "RegisterSchemaVersion"]
    assert version == uuid.UUID(fake.glue.versions("orders")[1].version_id)


async def test_a_disabled_schema_refuses_versions(fake: FakeKinesis) -> None:
    async with client_of(fake) as glue:
        registry = GlueSchemaRegistry(glue, auto_register=True)
        disabled = SchemaSpec("frozen", AVRO_V1, "AVRO", compatibility="DISABLED")
        await registry.version_for(disabled)
        with pytest.raises(SchemaIncompatibleError, match="DISABLED") as caught:
            await registry.version_for(SchemaSpec("frozen", AVRO_V2, "AVRO"))
    assert caught.value.code == "InvalidInputException"


async def test_the_format_must_match_the_registry(fake: FakeKinesis) -> None:
    async with client_of(fake) as glue:
        registry = GlueSchemaRegistry(glue, auto_register=True)
        await registry.version_for(SchemaSpec("doc", '{"type": "object"}', "JSON"))
        with pytest.raises(SchemaRegistryError, match="JSON in the registry, not AVRO"):
            await registry.version_for(SchemaSpec("doc", '{"type": "object"}', "AVRO"))


async def test_access_denied_fails_at_once(fake: FakeKinesis) -> None:
    async def hook(operation: str, body: dict[str, Any]) -> httpx.Response | None:
        return error("AccessDeniedException", "User is not authorized to perform glue:*")

    fake.hook = hook
    async with client_of(fake) as glue:
        with pytest.raises(SchemaRegistryError, match="not authorized") as caught:
            await GlueSchemaRegistry(glue, auto_register=True).version_for(V1)
    assert caught.value.code == "AccessDeniedException"
    assert type(caught.value) is SchemaRegistryError
    assert glue_calls(fake) == ["GetSchemaByDefinition"]


async def test_throttling_is_tried_again(fake: FakeKinesis) -> None:
    answers = [error("ThrottlingException", "Rate exceeded"), error("x", "busy", status=503)]

    async def hook(operation: str, body: dict[str, Any]) -> httpx.Response | None:
        return answers.pop(0) if answers else None

    fake.hook = hook
    async with client_of(fake) as glue:
        await GlueSchemaRegistry(glue, auto_register=True).version_for(V1)
    assert glue_calls(fake)[:4] == ["GetSchemaByDefinition"] * 3 + ["CreateSchema"]


async def test_internal_failures_give_up_after_the_last_attempt(fake: FakeKinesis) -> None:
    async def hook(operation: str, body: dict[str, Any]) -> httpx.Response | None:
        return error("InternalServiceException", "oops", status=500)

    fake.hook = hook
    async with client_of(fake, max_attempts=3) as glue:
        with pytest.raises(SchemaRegistryError) as caught:
            await GlueSchemaRegistry(glue).version_for(V1)
    assert caught.value.code == "InternalServiceException"
    assert glue_calls(fake) == ["GetSchemaByDefinition"] * 3


async def test_the_cache_keeps_the_latest_used_entries(fake: FakeKinesis) -> None:
    specs = [SchemaSpec(f"s{i}", AVRO_V1, "AVRO") for i in range(3)]
    async with client_of(fake) as glue:
        registry = GlueSchemaRegistry(glue, auto_register=True, cache_size=2)
        for spec in specs:
            await registry.version_for(spec)
    assert registry.cached_version(specs[0]) is None
    assert registry.cached_version(specs[1]) is not None
    assert registry.cached_version(specs[2]) is not None


async def test_an_entry_is_looked_up_again_after_its_time_to_live(fake: FakeKinesis) -> None:
    refuse = False

    async def hook(operation: str, body: dict[str, Any]) -> httpx.Response | None:
        return error("AccessDeniedException", "no") if refuse else None

    fake.hook = hook
    async with client_of(fake) as glue:
        registry = GlueSchemaRegistry(glue, auto_register=True, time_to_live=0.5)
        version = await registry.version_for(V2)
        stored = anyio.current_time()
        await anyio.sleep(0.2)
        assert anyio.current_time() - stored == pytest.approx(0.2)
        assert registry.cached_version(V2) == version
        await anyio.sleep(0.35)
        assert registry.cached_version(V2) is None
        fake.calls.clear()
        assert await registry.version_for(V2) == version
        assert glue_calls(fake) == ["GetSchemaByDefinition"]
        # a refresh that fails keeps the old value (Guava's refreshAfterWrite)
        await anyio.sleep(0.55)
        refuse = True
        assert await registry.version_for(V2) == version
        assert registry.cached_version(V2) == version


async def test_concurrent_first_uses_make_one_set_of_requests(fake: FakeKinesis) -> None:
    async def slow(operation: str, body: dict[str, Any]) -> None:
        await anyio.sleep(0.05)

    fake.hook = slow
    found: list[uuid.UUID] = []
    async with client_of(fake) as glue:
        registry = GlueSchemaRegistry(glue, auto_register=True)

        async def use() -> None:
            found.append(await registry.version_for(V1))

        async with anyio.create_task_group() as tg:
            for _ in range(8):
                tg.start_soon(use)
    assert len(set(found)) == 1 and len(found) == 8
    assert glue_calls(fake).count("GetSchemaByDefinition") == 1
    assert glue_calls(fake).count("CreateSchema") == 1


async def test_an_error_is_given_to_every_caller_of_its_flight(fake: FakeKinesis) -> None:
    async def hook(operation: str, body: dict[str, Any]) -> httpx.Response | None:
        await anyio.sleep(0.05)
        return error("AccessDeniedException", "no")

    fake.hook = hook
    failures: list[str] = []
    async with client_of(fake) as glue:
        registry = GlueSchemaRegistry(glue, auto_register=True)

        async def use() -> None:
            try:
                await registry.version_for(V1)
            except SchemaRegistryError as exc:
                failures.append(exc.code or "")

        async with anyio.create_task_group() as tg:
            for _ in range(4):
                tg.start_soon(use)
    assert failures == ["AccessDeniedException"] * 4
    assert glue_calls(fake) == ["GetSchemaByDefinition"]


async def test_a_cancelled_first_caller_leaves_the_others_a_clean_flight(
    fake: FakeKinesis,
) -> None:
    lookups: list[float] = []

    async def slow(operation: str, body: dict[str, Any]) -> None:
        if operation == "GetSchemaByDefinition":
            lookups.append(anyio.current_time())
        await anyio.sleep(0.5)

    fake.hook = slow
    async with client_of(fake) as glue:
        registry = GlueSchemaRegistry(glue, auto_register=True)
        got: list[uuid.UUID] = []

        async def waiter() -> None:
            got.append(await registry.version_for(V1))

        leader = anyio.CancelScope()

        async def first() -> None:
            with leader:
                await registry.version_for(V1)

        async with anyio.create_task_group() as tg:
            tg.start_soon(first)
            await anyio.sleep(0.05)
            tg.start_soon(waiter)
            await anyio.sleep(0.05)
            cancelled_at = anyio.current_time()
            leader.cancel()
        assert leader.cancelled_caught
    # the waiter joined the first flight: its own lookup began only once that was cancelled
    assert len(lookups) == 2 and lookups[1] >= cancelled_at
    assert len(got) == 1
    assert registry.cached_version(V1) == got[0]
    assert len(registry._version_flights) == 0
    assert glue_calls(fake).count("CreateSchema") == 1


async def test_schema_of_reads_a_version_once(fake: FakeKinesis) -> None:
    async with client_of(fake) as glue:
        registry = GlueSchemaRegistry(glue, auto_register=True)
        version = await registry.version_for(V1)
        fake.calls.clear()
        reader = GlueSchemaRegistry(glue)
        results = []

        async def read() -> None:
            results.append(await reader.schema_of(version))

        async with anyio.create_task_group() as tg:
            for _ in range(3):
                tg.start_soon(read)
        assert await reader.schema_of(version) == results[0]
        with pytest.raises(SchemaNotFoundError, match="Schema version is not found"):
            await reader.schema_of(uuid.UUID(int=7))
    assert results[0].definition == AVRO_V1 and results[0].data_format == "AVRO"
    assert glue_calls(fake) == ["GetSchemaVersion", "GetSchemaVersion"]


@pytest.mark.parametrize("anyio_backend", ["trio", "asyncio"])
def test_a_known_version_is_given_outside_the_event_loop(anyio_backend: str) -> None:
    """A thread of the caller's (a SyncProducer's) has no loop clock: the id is given."""
    fake = FakeKinesis()

    async def learn() -> GlueSchemaRegistry:
        async with client_of(fake) as glue:
            registry = GlueSchemaRegistry(glue, auto_register=True, time_to_live=1e-9)
            await registry.version_for(V1)
            assert registry.cached_version(V1) is None  # stale by the loop's clock
            return registry

    registry = anyio.run(learn, backend=anyio_backend)
    assert registry.cached_version(V1) == uuid.UUID(fake.glue.versions("orders")[0].version_id)
    assert registry.cached_version(V2) is None


async def test_a_registration_left_pending_is_waited_for(fake: FakeKinesis) -> None:
    """The first caller is cancelled while its new version is being checked: the next one
    finds the version PENDING by its definition and waits for it, registering nothing."""
    fake.glue.pending_reads = 4
    first = anyio.CancelScope()

    async def hook(operation: str, body: dict[str, Any]) -> None:
        if operation == "GetSchemaVersion":  # the first poll: RegisterSchemaVersion answered
            first.cancel()

    async with client_of(fake) as glue:
        registry = GlueSchemaRegistry(glue, auto_register=True, poll_interval=0.02)
        await registry.version_for(V1)
        fake.hook = hook
        with first:
            await registry.version_for(V2)
        assert first.cancelled_caught
        assert registry.cached_version(V2) is None
        fake.calls.clear()
        version = await registry.version_for(V2)
    assert glue_calls(fake)[0] == "GetSchemaByDefinition"
    assert "RegisterSchemaVersion" not in glue_calls(fake)
    assert glue_calls(fake)[1:] and set(glue_calls(fake)[1:]) == {"GetSchemaVersion"}
    (_, second) = fake.glue.versions("orders")
    assert version == uuid.UUID(second.version_id) and second.status == "AVAILABLE"
