"""A small Kinesis Data Streams client: JSON 1.1 over httpx, signed with botocore's SigV4.

Works under trio and asyncio (httpx runs on anyio). Every request, including every retry a
caller makes, is signed afresh with the current credentials.
"""

from __future__ import annotations

import base64
import datetime
import hashlib
import json
import os
import ssl
import sys
import time
from collections.abc import Mapping
from typing import Any

import anyio
import anyio.to_thread
import httpx

from ._credentials import (
    CredentialProvider,
    StaticCredentials,
)
from ._errors import (
    ConnectError,
    ConnectionLostError,
    ExpiredTokenError,
    ProvisionedThroughputExceededError,
    RequestTimeoutError,
    ResourceNotFoundError,
    ServiceError,
    TransportError,
    error_from_response,
)
from ._http11 import Http11Pool, headers_of, origin_of
from ._logging import get_logger
from ._service import SignedService

__all__ = ["KinesisClient"]

_log = get_logger("kinesis_trio.client")

_TARGET_PREFIX = "Kinesis_20131202."
_CONTENT_TYPE = "application/x-amz-json-1.1"
# Bodies at least this big are hashed for the signature in a worker thread (hashlib releases
# the GIL), so a 5 MB PutRecords does not stall the event loop for ~3 ms.
_HASH_IN_THREAD_MIN = 1 << 20


def _virtual_clock() -> bool:
    """Trio with a ``MockClock`` (tests): a worker thread would let its autojump leap
    ahead while the loop waits for the thread."""
    testing = sys.modules.get("trio.testing")
    if testing is None:
        return False
    try:
        clock = sys.modules["trio"].lowlevel.current_clock()
    except RuntimeError:  # not in a trio run
        return False
    return isinstance(clock, testing.MockClock)


def _user_agent() -> str:
    try:
        from importlib.metadata import version

        return f"kinesis-trio/{version('kinesis-trio')} httpx/{httpx.__version__}"
    except Exception:
        return f"kinesis-trio httpx/{httpx.__version__}"


def _json_default(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, datetime.datetime):
        return value.timestamp()
    raise TypeError(f"cannot JSON-encode {type(value).__name__}")


def _encode(body: Mapping[str, Any]) -> bytes:
    return json.dumps(body, separators=(",", ":"), default=_json_default).encode()


def _sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _map_transport_error(exc: httpx.RequestError, operation: str) -> TransportError:
    text = str(exc)
    message = f"{type(exc).__name__}: {text}" if text else type(exc).__name__
    if isinstance(
        exc, (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout, httpx.ProxyError)
    ):
        return ConnectError(message, operation=operation)
    if isinstance(exc, httpx.UnsupportedProtocol):
        return ConnectError(message, operation=operation)
    if isinstance(exc, httpx.TimeoutException):  # ReadTimeout, WriteTimeout
        return RequestTimeoutError(message, operation=operation)
    if isinstance(exc, (httpx.NetworkError, httpx.ProtocolError, httpx.DecodingError)):
        # ReadError, WriteError, CloseError, RemoteProtocolError, LocalProtocolError, ...
        return ConnectionLostError(message, operation=operation)
    return TransportError(message, operation=operation, sent=True)


def _stream_ref(stream_name: str | None, stream_arn: str | None) -> dict[str, Any]:
    if not stream_name and not stream_arn:
        raise ValueError("pass stream_name or stream_arn")
    ref: dict[str, Any] = {}
    if stream_name:
        ref["StreamName"] = stream_name
    if stream_arn:
        ref["StreamARN"] = stream_arn
    return ref


class KinesisClient(SignedService):
    """Kinesis Data Streams client (JSON 1.1, SigV4), for trio or asyncio.

    Region: ``region_name``, else ``AWS_REGION``, ``AWS_DEFAULT_REGION``, the profile's
    region. Endpoint: ``endpoint_url``, else ``AWS_ENDPOINT_URL_KINESIS``,
    ``AWS_ENDPOINT_URL``, ``https://kinesis.{region}.amazonaws.com``. Credentials:
    ``credentials`` (a :class:`StaticCredentials` or a ready ``CredentialProvider``), else
    botocore's standard chain for ``profile_name``. ``transport`` replaces httpx's network
    transport (tests use ``httpx.MockTransport``).

    Errors: :class:`KinesisError` subclasses for error responses, :class:`TransportError`
    subclasses for network failures, :class:`CredentialsError`. One ``ExpiredTokenException``
    is handled here: the credentials are refreshed and the request re-signed and sent once
    more (an auth rejection means nothing was processed).
    """

    region_name: str
    endpoint_url: str

    def __init__(
        self,
        *,
        region_name: str | None = None,
        endpoint_url: str | None = None,
        credentials: StaticCredentials | CredentialProvider | None = None,
        profile_name: str | None = None,
        max_connections: int = 24,
        request_timeout: float = 6.0,
        connect_timeout: float = 6.0,
        verify: bool | str | ssl.SSLContext = True,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        if max_connections < 1:
            raise ValueError("max_connections must be at least 1")
        super().__init__(
            "kinesis",
            "KINESIS",
            region_name=region_name,
            endpoint_url=endpoint_url,
            credentials=credentials,
            profile_name=profile_name,
        )
        #: a call's default deadline: hashing, credentials and the exchange, answer included
        self._deadline = request_timeout + connect_timeout
        # Requests go to a lean HTTP/1.1 pool (_http11) that only POSTs and reads whole
        # answers: none of httpx's client layer (redirects, cookies, auth flows, event hooks)
        # or general transport machinery is used, and a request costs a fraction of the CPU.
        # A transport passed in (tests: httpx.MockTransport) is called through httpx's
        # interface instead. The client owns the transport's lifetime.
        self._origin = origin_of(self._url)
        self._pool: Http11Pool | None = None
        if transport is None:
            self._pool = Http11Pool(
                verify=_ssl_verify(verify),
                max_connections=max_connections,
                connect_timeout=connect_timeout,
                pool_timeout=request_timeout,
            )
        self._transport: httpx.AsyncBaseTransport = transport or self._pool  # type: ignore[assignment]
        self._http = httpx.AsyncClient(transport=self._transport)
        self._timeouts = {
            "connect": connect_timeout,
            "read": request_timeout,
            "write": request_timeout,
            "pool": request_timeout,
        }
        self._user_agent = _user_agent()

    def __repr__(self) -> str:
        return (
            f"KinesisClient(endpoint_url={self.endpoint_url!r}, region_name={self.region_name!r})"
        )

    # -- core -------------------------------------------------------------------------------

    async def call(self, operation: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """Call a Kinesis operation with a JSON body (bytes values are base64-encoded)."""
        return await self.call_raw(operation, _encode(body))

    async def call_raw(
        self, operation: str, body: bytes, *, within: float | None = None
    ) -> dict[str, Any]:
        """Call a Kinesis operation with an already JSON-encoded body; return the response.

        The whole call (hashing the body, getting credentials, the exchange and a retry
        after an expired token) has one deadline: ``within`` seconds, by default the
        client's ``request_timeout + connect_timeout``. Past it: ``RequestTimeoutError``.
        """
        self._check_open()
        limit = self._deadline if within is None else within
        # Per-read timeouts would let a server trickling its answer a byte at a time pass
        # them all: the call gets one deadline (a bare cancel scope: cheaper than
        # fail_after's context manager, once per request).
        with anyio.CancelScope(deadline=anyio.current_time() + limit) as scope:
            if len(body) >= _HASH_IN_THREAD_MIN and not _virtual_clock():
                digest = await anyio.to_thread.run_sync(_sha256_hex, body)
            else:
                digest = _sha256_hex(body)
            creds = await self._credentials.get()
            try:
                return await self._send(operation, body, digest, creds)
            except ExpiredTokenError:
                fresh = await self._credentials.force_refresh(creds)
                if fresh == creds:
                    raise
                _log.debug("kinesis.expired_token_retry", operation=operation)
                return await self._send(operation, body, digest, fresh)
        assert scope.cancelled_caught
        raise RequestTimeoutError(
            f"{operation} did not complete within {limit:g} s", operation=operation
        )

    async def _send(self, operation: str, body: bytes, digest: str, creds: Any) -> dict[str, Any]:
        headers = self._signer.sign(
            body,
            digest,
            creds,
            {"Content-Type": _CONTENT_TYPE, "X-Amz-Target": _TARGET_PREFIX + operation},
        )
        start = time.perf_counter()
        status = 0
        content = b""
        fields: list[tuple[bytes, bytes]] = []
        answer_headers: httpx.Headers | None = None
        try:
            headers["User-Agent"] = self._user_agent
            pool = self._pool
            if pool is not None:
                status, fields, content = await pool.post(self._origin, "/", headers, body)
            else:
                request = httpx.Request(
                    "POST",
                    self._url,
                    content=body,
                    headers=headers,
                    extensions={"timeout": self._timeouts},
                )
                response = await self._transport.handle_async_request(request)
                try:
                    content = await response.aread()
                finally:
                    await response.aclose()
                status, answer_headers = response.status_code, response.headers
        except httpx.RequestError as exc:
            error = _map_transport_error(exc, operation)
            _log.debug(
                "kinesis.call",
                operation=operation,
                status=None,
                duration=round(time.perf_counter() - start, 6),
                error=type(error).__name__,
                sent=error.sent,
            )
            raise error from exc
        duration = round(time.perf_counter() - start, 6)
        if 200 <= status < 300:
            _log.debug("kinesis.call", operation=operation, status=status, duration=duration)
            if not content:
                return {}
            try:
                data = json.loads(content)
            except ValueError:
                data = None
            if not isinstance(data, dict):
                raise ServiceError(
                    "MalformedResponse",
                    "the response body is not a JSON object",
                    status_code=status,
                    operation=operation,
                    request_id=(answer_headers or headers_of(fields)).get("x-amzn-RequestId"),
                )
            return data
        err = error_from_response(operation, status, content, answer_headers or headers_of(fields))
        _log.debug(
            "kinesis.call",
            operation=operation,
            status=status,
            duration=duration,
            error=err.code,
            request_id=err.request_id,
        )
        raise err

    # -- operations -------------------------------------------------------------------------

    async def put_records(
        self,
        stream_name: str | None,
        records: list[dict[str, str]],
        *,
        stream_arn: str | None = None,
    ) -> dict[str, Any]:
        """PutRecords with entries already in wire form (``Data`` base64)."""
        body = _stream_ref(stream_name, stream_arn)
        body["Records"] = records
        return await self.call_raw("PutRecords", _encode(body))

    async def list_shards(
        self,
        stream_name: str | None = None,
        *,
        stream_arn: str | None = None,
        at_latest: bool = True,
    ) -> list[dict[str, Any]]:
        """All shards of a stream (only the open ones when ``at_latest``), every page."""
        body = _stream_ref(stream_name, stream_arn)
        if at_latest:
            body["ShardFilter"] = {"Type": "AT_LATEST"}
        shards: list[dict[str, Any]] = []
        while True:
            page = await self.call("ListShards", body)
            found = page.get("Shards")
            if found is None:
                found = []
            token = page.get("NextToken")
            if not isinstance(found, list) or not (token is None or isinstance(token, str)):
                raise ServiceError(
                    "MalformedResponse",
                    "ListShards answered with a malformed page (Shards is not a list, or "
                    "NextToken is not a string)",
                    status_code=200,
                    operation="ListShards",
                )
            shards.extend(found)
            if not token:
                return shards
            body = {"NextToken": token}

    async def describe_stream_summary(
        self, stream_name: str | None, *, stream_arn: str | None = None
    ) -> dict[str, Any]:
        """DescribeStreamSummary; returns the ``StreamDescriptionSummary`` dict."""
        resp = await self.call("DescribeStreamSummary", _stream_ref(stream_name, stream_arn))
        summary: dict[str, Any] = resp.get("StreamDescriptionSummary") or {}
        return summary

    async def create_stream(
        self, stream_name: str, shard_count: int | None = 1, *, on_demand: bool = False
    ) -> None:
        """CreateStream (provisioned with ``shard_count`` shards, or on-demand)."""
        body: dict[str, Any] = {"StreamName": stream_name}
        if on_demand:
            body["StreamModeDetails"] = {"StreamMode": "ON_DEMAND"}
        elif shard_count is not None:
            body["ShardCount"] = shard_count
        await self.call("CreateStream", body)

    async def wait_for_stream(
        self,
        stream_name: str,
        *,
        status: str = "ACTIVE",
        timeout: float = 60.0,  # noqa: ASYNC109 -- part of the documented API
    ) -> dict[str, Any]:
        """Poll DescribeStreamSummary until the stream has ``status``; return the summary.

        ``status="DELETED"`` waits until the stream is gone (returns ``{}``). Raises
        ``TimeoutError`` after ``timeout`` seconds.
        """
        last: str | None = None
        delay = 0.05
        with anyio.move_on_after(timeout):
            while True:
                try:
                    summary = await self.describe_stream_summary(stream_name)
                except ResourceNotFoundError:
                    if status == "DELETED":
                        return {}
                    last = "NOT_FOUND"
                else:
                    last = summary.get("StreamStatus")
                    if last == status:
                        return summary
                await anyio.sleep(delay)
                delay = min(delay * 2, 1.0)
        raise TimeoutError(
            f"stream {stream_name!r} not {status} after {timeout:g}s (last status: {last})"
        )

    async def delete_stream(
        self, stream_name: str, *, enforce_consumer_deletion: bool = True
    ) -> None:
        """DeleteStream."""
        await self.call(
            "DeleteStream",
            {"StreamName": stream_name, "EnforceConsumerDeletion": enforce_consumer_deletion},
        )

    async def get_shard_iterator(
        self,
        stream_name: str | None,
        shard_id: str,
        iterator_type: str = "TRIM_HORIZON",
        *,
        starting_sequence_number: str | None = None,
        timestamp: datetime.datetime | float | None = None,
        stream_arn: str | None = None,
    ) -> str:
        """GetShardIterator; returns the iterator string."""
        body = _stream_ref(stream_name, stream_arn)
        body["ShardId"] = shard_id
        body["ShardIteratorType"] = iterator_type
        if starting_sequence_number is not None:
            body["StartingSequenceNumber"] = starting_sequence_number
        if timestamp is not None:
            body["Timestamp"] = timestamp
        resp = await self.call("GetShardIterator", body)
        return str(resp["ShardIterator"])

    async def get_records(self, shard_iterator: str, limit: int | None = None) -> dict[str, Any]:
        """GetRecords; the raw response (``Data`` still base64)."""
        body: dict[str, Any] = {"ShardIterator": shard_iterator}
        if limit is not None:
            body["Limit"] = limit
        return await self.call("GetRecords", body)

    async def split_shard(
        self,
        stream_name: str | None,
        shard_to_split: str,
        new_starting_hash_key: int | str,
        *,
        stream_arn: str | None = None,
    ) -> None:
        """SplitShard."""
        body = _stream_ref(stream_name, stream_arn)
        body["ShardToSplit"] = shard_to_split
        body["NewStartingHashKey"] = str(new_starting_hash_key)
        await self.call("SplitShard", body)

    async def merge_shards(
        self,
        stream_name: str | None,
        shard_to_merge: str,
        adjacent_shard_to_merge: str,
        *,
        stream_arn: str | None = None,
    ) -> None:
        """MergeShards."""
        body = _stream_ref(stream_name, stream_arn)
        body["ShardToMerge"] = shard_to_merge
        body["AdjacentShardToMerge"] = adjacent_shard_to_merge
        await self.call("MergeShards", body)

    async def update_shard_count(
        self,
        stream_name: str | None,
        target_shard_count: int,
        *,
        scaling_type: str = "UNIFORM_SCALING",
        stream_arn: str | None = None,
    ) -> dict[str, Any]:
        """UpdateShardCount; returns the response."""
        body = _stream_ref(stream_name, stream_arn)
        body["TargetShardCount"] = target_shard_count
        body["ScalingType"] = scaling_type
        return await self.call("UpdateShardCount", body)

    async def read_all(self, stream_name: str) -> dict[str, list[dict[str, Any]]]:
        """Read every record of every shard (open and closed) from TRIM_HORIZON.

        For tests and tools. Returns shard id -> records, ``Data`` decoded to bytes.
        """
        result: dict[str, list[dict[str, Any]]] = {}
        for shard in await self.list_shards(stream_name, at_latest=False):
            shard_id = str(shard["ShardId"])
            records: list[dict[str, Any]] = []
            iterator: str | None = await self.get_shard_iterator(stream_name, shard_id)
            throttled = 0
            while iterator:
                try:
                    page = await self.get_records(iterator)
                except ProvisionedThroughputExceededError:
                    throttled += 1
                    if throttled > 20:
                        raise
                    await anyio.sleep(0.2)
                    continue
                batch = page.get("Records") or []
                for record in batch:
                    record = dict(record)
                    record["Data"] = base64.b64decode(record["Data"])
                    records.append(record)
                iterator = page.get("NextShardIterator")
                if not batch and not page.get("MillisBehindLatest"):
                    break  # caught up (a closed shard ends with no NextShardIterator)
            result[shard_id] = records
        return result


def _ssl_verify(verify: bool | str | ssl.SSLContext) -> bool | ssl.SSLContext:
    if isinstance(verify, str):
        if os.path.isdir(verify):
            return ssl.create_default_context(capath=verify)
        return ssl.create_default_context(cafile=verify)
    if verify is True:
        bundle = os.environ.get("AWS_CA_BUNDLE")
        if bundle:
            return ssl.create_default_context(cafile=bundle)
    return verify
