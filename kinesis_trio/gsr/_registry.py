"""The cached Glue Schema Registry client: the Java client's lookup and auto-registration
flow (``SchemaByDefinitionFetcher``, ``AWSSchemaRegistryClient``) over :class:`GlueClient`.

The put path asks :meth:`GlueSchemaRegistry.cached_version` (no I/O, no await); only a
schema not yet known (or older than the time to live) costs requests, and concurrent first
uses of one schema share one flight of them. A cancelled caller leaves nothing behind: the
callers waiting on its flight wake up and one of them flies again.
"""

from __future__ import annotations

import uuid
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable, Mapping
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import anyio

from .._logging import get_logger
from ._options import check_compatibility, check_description, check_tags
from ._types import (
    DATA_FORMATS,
    DataFormat,
    RegisteredSchema,
    SchemaIncompatibleError,
    SchemaNotFoundError,
    SchemaRegistryError,
    SchemaSpec,
)

if TYPE_CHECKING:  # the client's module imports this package's types
    import httpx

    from .._aws._credentials import CredentialProvider, StaticCredentials
    from .._aws._glue import GlueClient

__all__ = ["GlueSchemaRegistry"]

_log = get_logger("kinesis_trio.gsr")
_K = TypeVar("_K", bound=Hashable)
_V = TypeVar("_V")

#: The Java client's defaults (``GlueSchemaRegistryConfiguration``):
#: ``private long timeToLiveMillis = 24 * 60 * 60 * 1000L;`` and ``private int cacheSize = 200;``
DEFAULT_CACHE_SIZE = 200
DEFAULT_TIME_TO_LIVE = 24 * 60 * 60.0
#: ``AWSSchemaRegistryConstants``: the messages the Java client branches on.
SCHEMA_VERSION_NOT_FOUND_MSG = "Schema version is not found."
SCHEMA_NOT_FOUND_MSG = "Schema is not found."
AUTO_REGISTRATION_IS_DISABLED_MSG = (
    "Failed to auto-register schema. Auto registration of schema is not enabled."
)
#: ``AWSSchemaRegistryClient``: ``MAX_ATTEMPTS = 10`` reads of a version's status.
MAX_POLLS = 10


class _Entry(Generic[_V]):
    __slots__ = ("stored_at", "value")

    def __init__(self, value: _V, stored_at: float) -> None:
        self.value = value
        self.stored_at = stored_at


class BoundedCache(Generic[_K, _V]):
    """At most ``size`` entries, the least recently used dropped first; an entry older than
    ``ttl`` seconds is stale (still there: a failed refresh keeps it, as Guava's
    ``refreshAfterWrite`` does). Reads take ``now``; no clock, no I/O."""

    def __init__(self, size: int, ttl: float) -> None:
        if size < 1:
            raise ValueError("cache_size must be at least 1")
        if ttl <= 0:
            raise ValueError("time_to_live must be positive")
        self.size = size
        self.ttl = ttl
        self._entries: OrderedDict[_K, _Entry[_V]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def fresh(self, key: _K, now: float | None) -> _V | None:
        """The value, if present and not stale (marks it recently used); ``now`` ``None``
        (no clock to tell): whatever its age."""
        entry = self._entries.get(key)
        if entry is None or (now is not None and now - entry.stored_at >= self.ttl):
            return None
        self._entries.move_to_end(key)
        return entry.value

    def any(self, key: _K) -> _V | None:
        """The value, stale or not."""
        entry = self._entries.get(key)
        return None if entry is None else entry.value

    def put(self, key: _K, value: _V, now: float) -> None:
        self._entries[key] = _Entry(value, now)
        self._entries.move_to_end(key)
        while len(self._entries) > self.size:
            self._entries.popitem(last=False)


class _Flight(Generic[_V]):
    """One lookup several callers wait for."""

    __slots__ = ("done", "error", "landed", "value")

    def __init__(self) -> None:
        self.done = anyio.Event()
        self.landed = False
        self.value: _V | None = None
        self.error: BaseException | None = None

    def land(self, value: _V) -> None:
        self.value, self.landed = value, True

    def fail(self, error: BaseException) -> None:
        self.error = error


class SingleFlight(Generic[_K, _V]):
    """Concurrent calls for one key make one call of ``fetch``; the others wait for it.

    When the caller doing the work is cancelled, the flight is abandoned: the waiters wake
    up and one of them fetches anew (a cancellation is nobody else's error). An error is
    given to every caller of that flight; the next call tries again."""

    def __init__(self) -> None:
        self._flights: dict[_K, _Flight[_V]] = {}

    def __len__(self) -> int:
        return len(self._flights)

    async def run(self, key: _K, fetch: Callable[[], Awaitable[_V]]) -> _V:
        while True:
            flight = self._flights.get(key)
            if flight is None:
                return await self._lead(key, fetch)
            await flight.done.wait()
            if flight.landed:
                return flight.value  # type: ignore[return-value]
            if flight.error is not None:
                raise flight.error
            # abandoned (its leader was cancelled): go again

    async def _lead(self, key: _K, fetch: Callable[[], Awaitable[_V]]) -> _V:
        flight: _Flight[_V] = _Flight()
        self._flights[key] = flight
        try:
            value = await fetch()
        except Exception as exc:
            flight.fail(exc)
            raise
        else:
            flight.land(value)
            return value
        finally:  # cancelled: neither landed nor failed, the waiters go again
            if self._flights.get(key) is flight:
                del self._flights[key]
            flight.done.set()


def _loop_time() -> float | None:
    try:
        return anyio.current_time()
    except RuntimeError:  # no event loop in this thread (sniffio's error is a RuntimeError)
        return None


def _key(spec: SchemaSpec) -> tuple[str, str, str, str]:
    return (spec.registry, spec.name, spec.data_format, spec.definition)


class GlueSchemaRegistry:
    """A :class:`SchemaRegistry` on Glue: version ids by definition, definitions by id,
    both cached (``cache_size`` entries each, least recently used out first; an entry is
    looked up again after ``time_to_live`` seconds, keeping the old one if that fails).

    ``auto_register`` (the Java client's ``schemaAutoRegistrationEnabled``, off by default
    there too): on "Schema version is not found." register the definition as a new version
    (RegisterSchemaVersion, then GetSchemaVersion every ``poll_interval`` seconds, at most
    10 times, until it is AVAILABLE; FAILURE: :class:`SchemaIncompatibleError`); on "Schema
    is not found." create the schema (CreateSchema in the spec's registry,
    ``default-registry`` by default; a schema created meanwhile by another producer: register
    a version instead); then put the spec's metadata on the version
    (PutSchemaVersionMetadata; a failure is logged, not raised, as in the Java client). Off:
    :class:`SchemaNotFoundError`.

    What CreateSchema sends, as the Java serde's ``compatibility``, ``description`` and
    ``tags`` settings: ``compatibility`` (BACKWARD by default) unless the spec has its own,
    ``description`` unless the spec has its own, ``tags`` and the spec's (the spec's win
    on a shared key). Each is checked here against Glue's model (:class:`SchemaError`).

    ``async with registry`` closes ``client`` at its end; else close the client yourself.
    """

    def __init__(
        self,
        client: GlueClient,
        *,
        auto_register: bool = False,
        cache_size: int = DEFAULT_CACHE_SIZE,
        time_to_live: float = DEFAULT_TIME_TO_LIVE,
        poll_interval: float = 1.0,
        compatibility: str = "BACKWARD",
        description: str | None = None,
        tags: Mapping[str, str] | None = None,
    ) -> None:
        self.client = client
        self.auto_register = auto_register
        #: CreateSchema's ``Compatibility`` for a spec without its own
        self.compatibility: str = check_compatibility(compatibility)
        #: CreateSchema's ``Description`` for a spec without its own
        self.description: str | None = (
            None if description is None else check_description(description)
        )
        #: CreateSchema's ``Tags``, the spec's added
        self.tags: dict[str, str] = check_tags(tags or {})
        self.poll_interval = poll_interval
        self._versions: BoundedCache[tuple[str, str, str, str], uuid.UUID] = BoundedCache(
            cache_size, time_to_live
        )
        self._schemas: BoundedCache[uuid.UUID, RegisteredSchema] = BoundedCache(
            cache_size, time_to_live
        )
        self._version_flights: SingleFlight[tuple[str, str, str, str], uuid.UUID] = SingleFlight()
        self._schema_flights: SingleFlight[uuid.UUID, RegisteredSchema] = SingleFlight()

    @classmethod
    def connect(
        cls,
        *,
        region_name: str | None = None,
        endpoint_url: str | None = None,
        credentials: StaticCredentials | CredentialProvider | None = None,
        profile_name: str | None = None,
        transport: httpx.AsyncBaseTransport | None = None,
        auto_register: bool = False,
        cache_size: int = DEFAULT_CACHE_SIZE,
        time_to_live: float = DEFAULT_TIME_TO_LIVE,
        compatibility: str = "BACKWARD",
        description: str | None = None,
        tags: Mapping[str, str] | None = None,
    ) -> GlueSchemaRegistry:
        """A registry with a :class:`GlueClient` of its own (closed by ``async with``).

        Region, endpoint (``AWS_ENDPOINT_URL_GLUE``; ``kinesis-trio local``'s URL serves
        Glue too) and credentials resolve as for :class:`KinesisClient`; pass
        ``credentials=producer_client.credentials`` to share a provider."""
        from .._aws._glue import GlueClient

        client = GlueClient(
            region_name=region_name,
            endpoint_url=endpoint_url,
            credentials=credentials,
            profile_name=profile_name,
            transport=transport,
        )
        return cls(
            client,
            auto_register=auto_register,
            cache_size=cache_size,
            time_to_live=time_to_live,
            compatibility=compatibility,
            description=description,
            tags=tags,
        )

    async def __aenter__(self) -> GlueSchemaRegistry:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.client.aclose()

    # -- the SchemaRegistry protocol --------------------------------------------------------

    def cached_version(self, spec: SchemaSpec) -> uuid.UUID | None:
        """The version id of ``spec`` when known and fresh: no I/O, no await. Outside an
        event loop (a thread of the caller's) a known id is returned whatever its age: the
        loop's clock, which the ages are on, cannot be read there."""
        return self._versions.fresh(_key(spec), _loop_time())

    async def version_for(self, spec: SchemaSpec) -> uuid.UUID:
        """The version id of ``spec``'s definition: cached, else looked up (and registered
        when ``auto_register``). Concurrent calls for one spec make one set of requests.
        Cancel-safe: a cancelled call leaves no flight behind (a waiting call makes the
        requests again; a version it registered is found by its definition)."""
        key = _key(spec)
        found = self._versions.fresh(key, anyio.current_time())
        if found is not None:
            return found

        async def fetch() -> uuid.UUID:
            try:
                version = await self._resolve(spec)
            except SchemaRegistryError as exc:
                stale = self._versions.any(key)
                if stale is None:
                    raise
                _log.warning("gsr.refresh_failed", schema=spec.name, error=exc.code)
                version = stale  # Guava's refresh keeps the old value
            self._versions.put(key, version, anyio.current_time())
            return version

        return await self._version_flights.run(key, fetch)

    async def schema_of(self, version_id: uuid.UUID) -> RegisteredSchema:
        """The definition and format of ``version_id`` (GetSchemaVersion), cached."""
        found = self._schemas.fresh(version_id, anyio.current_time())
        if found is not None:
            return found

        async def fetch() -> RegisteredSchema:
            answer = await self.client.get_schema_version(str(version_id))
            data_format = answer.get("DataFormat")
            definition = answer.get("SchemaDefinition")
            if data_format not in DATA_FORMATS or not isinstance(definition, str):
                raise SchemaRegistryError(
                    f"GetSchemaVersion {version_id}: the answer has no usable DataFormat "
                    f"and SchemaDefinition (DataFormat={data_format!r})",
                    code="MalformedResponse",
                )
            schema = RegisteredSchema(version_id, data_format, definition)
            self._schemas.put(version_id, schema, anyio.current_time())
            return schema

        return await self._schema_flights.run(version_id, fetch)

    # -- the Java client's flow -------------------------------------------------------------

    async def _resolve(self, spec: SchemaSpec) -> uuid.UUID:
        try:
            answer = await self.client.get_schema_by_definition(
                spec.registry, spec.name, spec.definition
            )
        except SchemaNotFoundError as exc:
            text = str(exc)
            # SchemaByDefinitionFetcher: version first (its message is not the schema's)
            if SCHEMA_VERSION_NOT_FOUND_MSG in text:
                create = False
            elif SCHEMA_NOT_FOUND_MSG in text:
                create = True
            else:
                raise
            if not self.auto_register:
                raise SchemaNotFoundError(
                    f"{AUTO_REGISTRATION_IS_DISABLED_MSG} ({spec.registry}/{spec.name}: {text})",
                    code=exc.code,
                ) from exc
            if create:
                version = await self._create(spec)
            else:
                version = await self._register(spec)
            await self._put_metadata(spec, version)
            return version
        _check_format(spec, answer)
        status = answer.get("Status")
        if status == "PENDING":
            # a registration still being checked (ours, whose caller was cancelled, or
            # another producer's): wait for it (the Java client fails here instead)
            version = _version_id(answer, "GetSchemaByDefinition")
            return await self._until_available(spec, version, status)
        if status != "AVAILABLE":
            # returnSchemaVersionIdIfAvailable: "Schema Found but status is %s"
            error = SchemaIncompatibleError if status == "FAILURE" else SchemaRegistryError
            raise error(
                f"{spec.registry}/{spec.name}: Schema Found but status is {status}",
                code=f"Status{status}",
            )
        return _version_id(answer, "GetSchemaByDefinition")

    async def _create(self, spec: SchemaSpec) -> uuid.UUID:
        try:
            answer = await self.client.create_schema(
                spec.registry,
                spec.name,
                spec.data_format,
                spec.definition,
                compatibility=spec.compatibility or self.compatibility,
                description=self.description if spec.description is None else spec.description,
                tags={**self.tags, **spec.tags},
            )
        except SchemaRegistryError as exc:
            if exc.code != "AlreadyExistsException":
                raise
            # "Schema is already created, this could be caused by multiple producers racing
            # to auto-create schema." (AWSSchemaRegistryClient.createSchema)
            return await self._register(spec)
        _log.info("gsr.schema_created", registry=spec.registry, schema=spec.name)
        return _version_id(answer, "CreateSchema")

    async def _register(self, spec: SchemaSpec) -> uuid.UUID:
        answer = await self.client.register_schema_version(
            spec.registry, spec.name, spec.definition
        )
        version = _version_id(answer, "RegisterSchemaVersion")
        return await self._until_available(spec, version, answer.get("Status"))

    async def _until_available(
        self, spec: SchemaSpec, version: uuid.UUID, status: Any
    ) -> uuid.UUID:
        """Read ``version``'s status until it is AVAILABLE (at most ``MAX_POLLS`` reads)."""
        polls = 0
        while status != "AVAILABLE":
            if status not in (None, "PENDING"):
                break
            if polls >= MAX_POLLS:
                raise SchemaRegistryError(
                    f"{spec.registry}/{spec.name}: version {version} still {status} after "
                    f"{MAX_POLLS} reads (Retries exhausted for schema evolution check)",
                    code="StatusPENDING",
                )
            await anyio.sleep(self.poll_interval)
            polls += 1
            status = (await self.client.get_schema_version(str(version))).get("Status")
        if status != "AVAILABLE":
            error = SchemaIncompatibleError if status == "FAILURE" else SchemaRegistryError
            raise error(
                f"{spec.registry}/{spec.name}: Schema evolution check failed. "
                f"schemaVersionId {version} is in {status} status.",
                code=f"Status{status}",
            )
        _log.info("gsr.version_registered", registry=spec.registry, schema=spec.name)
        return version

    async def _put_metadata(self, spec: SchemaSpec, version: uuid.UUID) -> None:
        for key, value in spec.metadata.items():
            try:
                await self.client.put_schema_version_metadata(str(version), key, value)
            except SchemaRegistryError as exc:
                if exc.code != "AlreadyExistsException":
                    _log.warning("gsr.metadata_failed", schema=spec.name, key=key, error=exc.code)


def _version_id(answer: dict[str, Any], operation: str) -> uuid.UUID:
    raw = answer.get("SchemaVersionId")
    if isinstance(raw, str):
        try:
            return uuid.UUID(raw)
        except ValueError:
            pass
    raise SchemaRegistryError(
        f"{operation}: the answer's SchemaVersionId is not a UUID: {raw!r}",
        code="MalformedResponse",
    )


def _check_format(spec: SchemaSpec, answer: dict[str, Any]) -> None:
    found: DataFormat | None = answer.get("DataFormat")
    if found is not None and found != spec.data_format:
        raise SchemaRegistryError(
            f"{spec.registry}/{spec.name} is {found} in the registry, not {spec.data_format}",
            code="DataFormatMismatch",
        )
