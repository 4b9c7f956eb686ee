"""The Glue Schema Registry calls: Glue's JSON 1.1 API (``X-Amz-Target: AWSGlue.<Op>``,
SigV4 service ``glue``) on the package's one signed HTTP stack (:class:`SignedService`).

Credentials, region and endpoint resolve as for :class:`KinesisClient` (``endpoint_url``,
else ``AWS_ENDPOINT_URL_GLUE``, ``AWS_ENDPOINT_URL``, else botocore's rules for Glue:
``https://glue.{region}.amazonaws.com`` in the commercial partition, FIPS and dual-stack
as the settings ask).
Throttling, internal failures, 5xx and network failures are tried again
(``max_attempts``, full-jitter backoff); an expired token once after a refresh
(``SignedService``). What Glue refuses is raised as the registry's typed errors
(``gsr._types``); their ``code`` is Glue's error code, their message Glue's message (the
registry client branches on it, as the Java client does).
"""

from __future__ import annotations

import json
import ssl
from collections.abc import Mapping
from typing import Any

import anyio
import httpx

from .._backoff import backoff_delay
from .._core import answer_limit
from .._errors import (
    CredentialsError,
    KinesisError,
    SchemaIncompatibleError,
    SchemaNotFoundError,
    SchemaRegistryError,
    TransportError,
    malformed_answer,
    parse_json,
)
from .._logging import get_logger
from ._credentials import CredentialProvider, StaticCredentials
from ._service import AnswerReader, JsonService, service_error, ssl_verify, user_agent

__all__ = ["GlueClient", "glue_error"]

_BACKOFF_CAP = 5.0
_log = get_logger("kinesis_trio.gsr")

#: Glue's codes worth another try: its internal failure (botocore's glue model names
#: ``InternalServiceException`` for every schema call), a concurrent change (another
#: registration of the same schema at that moment), and the shared throttling codes.
RETRY_CODES = frozenset(
    {
        "InternalServiceException",
        "ConcurrentModificationException",
        "ThrottlingException",
        "Throttling",
        "TooManyRequestsException",
        "RequestLimitExceeded",
        "ServiceUnavailable",
        "ServiceUnavailableException",
        "InternalFailure",
        "RequestTimeout",
        "RequestTimeoutException",
    }
)
#: Glue's answer to a RegisterSchemaVersion on a schema whose compatibility is DISABLED
#: (moto's ``DisabledCompatibilityVersioningException``: an ``InvalidInputException``).
DISABLED_VERSIONING = "Compatibility DISABLED does not allow versioning"


def glue_error(error: KinesisError) -> SchemaRegistryError:
    """The registry's typed error for an error answer Glue sent."""
    message = error.message or error.code
    text = f"{error.operation}: {error.code}: {message}"
    if error.code == "EntityNotFoundException":
        found: SchemaRegistryError = SchemaNotFoundError(text, code=error.code)
    elif error.code == "InvalidInputException" and DISABLED_VERSIONING in message:
        found = SchemaIncompatibleError(text, code=error.code)
    else:
        found = SchemaRegistryError(text, code=error.code)
    return found


def _reader(operation: str) -> AnswerReader[dict[str, Any]]:
    def read(status: int, headers: Mapping[str, str], content: bytes) -> Any:
        if 200 <= status < 300:
            data = parse_json(content) if content else None
            if isinstance(data, dict):
                return data
            raise malformed_answer(operation, f"the answer's body (HTTP {status}) is not an object")
        return service_error(operation, status, headers, content)

    return read


def _retryable(error: KinesisError) -> bool:
    return error.status_code >= 500 or error.status_code == 429 or error.code in RETRY_CODES


class GlueClient(JsonService):
    """The Glue Schema Registry operations the GSR serializers use (JSON 1.1, SigV4).

    ``max_attempts``: tries of one call when Glue throttles, fails inside (5xx) or the
    network fails, ``retry_backoff`` seconds apart at first (full jitter, doubling, at most
    5 s). Errors: :class:`SchemaNotFoundError` (``EntityNotFoundException``),
    :class:`SchemaIncompatibleError` (a new version of a DISABLED schema),
    :class:`SchemaRegistryError` for any other refusal, its ``code`` Glue's (for example
    ``AccessDeniedException``, ``AlreadyExistsException``, ``InvalidInputException``,
    ``ResourceNumberLimitExceededException``), or after the last try, the transport's
    error class name (the :class:`TransportError` chained as its cause).
    """

    _probe_operation = "GetRegistry"

    _target_prefix = "AWSGlue."

    def __init__(
        self,
        *,
        region_name: str | None = None,
        endpoint_url: str | None = None,
        credentials: StaticCredentials | CredentialProvider | None = None,
        profile_name: str | None = None,
        max_connections: int = 4,
        request_timeout: float = 6.0,
        connect_timeout: float = 6.0,
        verify: bool | str | ssl.SSLContext = True,
        transport: httpx.AsyncBaseTransport | None = None,
        max_attempts: int = 4,
        retry_backoff: float = 0.2,
    ) -> None:
        if max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        super().__init__(
            "glue",
            "GLUE",
            region_name=region_name,
            endpoint_url=endpoint_url,
            credentials=credentials,
            profile_name=profile_name,
            transport=transport,
            max_connections=max_connections,
            request_timeout=request_timeout,
            connect_timeout=connect_timeout,
            verify=ssl_verify(verify),
            user_agent=user_agent(),
        )
        self._max_attempts = max_attempts
        self._backoff = max(0.0, retry_backoff)

    def __repr__(self) -> str:
        return f"GlueClient(endpoint_url={self.endpoint_url!r}, region_name={self.region_name!r})"

    async def call(self, operation: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """Call a Glue operation with a JSON body; its answer, tried again while that may help."""
        headers = self._headers(operation)
        payload = json.dumps(body, separators=(",", ":")).encode()
        read = _reader(operation)
        for attempt in range(1, self._max_attempts + 1):
            try:
                answer: dict[str, Any] = await self._call(
                    operation, payload, headers, read, limit=answer_limit(operation)
                )
            except KinesisError as exc:
                if exc.from_service and not _retryable(exc):
                    raise glue_error(exc) from None
                if not (exc.from_service or exc.retryable):  # a 4xx from something in front
                    raise SchemaRegistryError(f"{operation}: {exc}", code=exc.code) from exc
                error: Exception = exc
            except TransportError as exc:
                error = exc
            except CredentialsError as exc:
                raise SchemaRegistryError(f"{operation}: {exc}", code="CredentialsError") from exc
            else:
                return answer
            last = attempt >= self._max_attempts
            _log.debug(
                "glue.retry" if not last else "glue.failed",
                operation=operation,
                error=getattr(error, "code", None) or type(error).__name__,
                attempt=attempt,
            )
            if last:
                if isinstance(error, KinesisError) and error.from_service:
                    raise glue_error(error) from None
                code = getattr(error, "code", None) or type(error).__name__
                raise SchemaRegistryError(f"{operation}: {error}", code=code) from error
            await anyio.sleep(backoff_delay(attempt, base=self._backoff, cap=_BACKOFF_CAP))
        raise AssertionError("unreachable")  # pragma: no cover

    # -- the operations the GSR client uses --------------------------------------------------

    async def get_schema_by_definition(
        self, registry: str, schema: str, definition: str
    ) -> dict[str, Any]:
        """GetSchemaByDefinition: the version of ``schema`` holding ``definition``."""
        return await self.call(
            "GetSchemaByDefinition",
            {"SchemaId": _schema_id(registry, schema), "SchemaDefinition": definition},
        )

    async def create_schema(
        self,
        registry: str,
        schema: str,
        data_format: str,
        definition: str,
        *,
        compatibility: str = "BACKWARD",
        description: str | None = None,
        tags: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        """CreateSchema with its first version (``Description`` and ``Tags`` when given)."""
        body: dict[str, Any] = {
            "RegistryId": {"RegistryName": registry},
            "SchemaName": schema,
            "DataFormat": data_format,
            "Compatibility": compatibility,
            "SchemaDefinition": definition,
        }
        if description:
            body["Description"] = description
        if tags:
            body["Tags"] = dict(tags)
        return await self.call("CreateSchema", body)

    async def register_schema_version(
        self, registry: str, schema: str, definition: str
    ) -> dict[str, Any]:
        """RegisterSchemaVersion: ``SchemaVersionId``, ``VersionNumber``, ``Status``."""
        return await self.call(
            "RegisterSchemaVersion",
            {"SchemaId": _schema_id(registry, schema), "SchemaDefinition": definition},
        )

    async def get_schema_version(self, version_id: str) -> dict[str, Any]:
        """GetSchemaVersion by id: ``SchemaDefinition``, ``DataFormat``, ``Status``, ..."""
        return await self.call("GetSchemaVersion", {"SchemaVersionId": version_id})

    async def put_schema_version_metadata(self, version_id: str, key: str, value: str) -> None:
        """PutSchemaVersionMetadata: one key and value on a version."""
        await self.call(
            "PutSchemaVersionMetadata",
            {
                "SchemaVersionId": version_id,
                "MetadataKeyValue": {"MetadataKey": key, "MetadataValue": value},
            },
        )

    async def create_registry(self, registry: str, *, description: str | None = None) -> None:
        """CreateRegistry."""
        body: dict[str, Any] = {"RegistryName": registry}
        if description:
            body["Description"] = description
        await self.call("CreateRegistry", body)

    async def get_registry(self, registry: str) -> dict[str, Any]:
        """GetRegistry."""
        return await self.call("GetRegistry", {"RegistryId": {"RegistryName": registry}})


def _schema_id(registry: str, schema: str) -> dict[str, str]:
    return {"RegistryName": registry, "SchemaName": schema}
