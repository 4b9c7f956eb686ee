"""A small Kinesis Data Streams client: JSON 1.1 over httpx, signed with botocore's SigV4.

Works under trio and asyncio (httpx runs on anyio). Every request, including every retry a
caller makes, is signed afresh with the current credentials.
"""

from __future__ import annotations

import base64
import datetime
import json
import ssl
from collections.abc import Mapping
from typing import Any

import anyio
import httpx

from .._backoff import backoff_delay
from .._core import BUILT_FIRST, answer_limit
from .._errors import (
    KinesisError,
    ProvisionedThroughputExceededError,
    ResourceNotFoundError,
    ServiceError,
    malformed_answer,
    parse_json,
)
from ._credentials import (
    CredentialProvider,
    StaticCredentials,
)
from ._service import AnswerReader, JsonService, Where, service_error, ssl_verify, user_agent

__all__ = ["KinesisClient", "read_answer"]

#: The operations whose answer has no body: botocore's service model gives them no
#: ``output`` shape (tests/aws/test_answers.py holds this set to the model). Any other
#: operation's 2xx answer must be a JSON object.
NO_OUTPUT = frozenset(
    {
        "AddTagsToStream",
        "CreateStream",
        "DecreaseStreamRetentionPeriod",
        "DeleteChannel",
        "DeleteResourcePolicy",
        "DeleteStream",
        "DeregisterStreamConsumer",
        "IncreaseStreamRetentionPeriod",
        "MergeShards",
        "PutResourcePolicy",
        "RemoveTagsFromStream",
        "SplitShard",
        "StartStreamEncryption",
        "StopStreamEncryption",
        "TagResource",
        "UntagResource",
        "UpdateMaxRecordSize",
        "UpdateStreamMode",
        "UpdateStreamRecordDistributionStrategy",
    }
)


#: The request members that are endpoint context parameters of some Kinesis operation
#: (botocore's service model: ``contextParam``); the rules take those of each operation.
_CONTEXT = ("StreamARN", "ConsumerARN", "ResourceARN", "ChannelARN", "StreamId")


def _json_default(value: Any) -> Any:
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(value).decode("ascii")
    if isinstance(value, datetime.datetime):
        return value.timestamp()
    raise TypeError(f"cannot JSON-encode {type(value).__name__}")


def _encode(body: Mapping[str, Any]) -> bytes:
    return json.dumps(body, separators=(",", ":"), default=_json_default).encode()


def read_answer(
    operation: str, status: int, headers: Mapping[str, str], content: bytes
) -> dict[str, Any] | KinesisError:
    """What a Kinesis answer means: the JSON object of a usable 2xx, or the error the
    service sent (returned). Any other answer is refused with a ``KinesisError`` that is
    not ``from_service`` (raised), so the request counts as possibly processed and its
    connection is closed: a 2xx whose body is empty (for an operation with an output),
    not JSON, nested too deep or not an object; a 1xx or 3xx; an error without the
    service's error shape. Never raises anything else."""
    if 200 <= status < 300:
        if not content and operation in NO_OUTPUT:
            return {}
        data = parse_json(content) if content else None
        if isinstance(data, dict):
            return data
        what = "empty" if not content else "not a JSON object"
        raise ServiceError(
            "MalformedResponse",
            f"the answer's body (HTTP {status}) is {what}",
            status_code=status,
            operation=operation,
            request_id=headers.get("x-amzn-RequestId"),
            from_service=False,
        )
    return service_error(operation, status, headers, content)


def _put_records_reader(count: int) -> AnswerReader[dict[str, Any]]:
    """PutRecords' ``read`` for a request of ``count`` records: an answer whose ``Records``
    is not a list of ``count`` entries is not this request's (refused, ambiguous)."""

    def read(
        status: int, headers: Mapping[str, str], content: bytes
    ) -> dict[str, Any] | KinesisError:
        answer = read_answer("PutRecords", status, headers, content)
        if isinstance(answer, dict):
            entries = answer.get("Records")
            if type(entries) is not list or len(entries) != count:
                raise ServiceError(
                    "MalformedResponse",
                    f"the answer's Records is not a list of the {count} records sent",
                    status_code=status,
                    operation="PutRecords",
                    request_id=headers.get("x-amzn-RequestId"),
                    from_service=False,
                )
        return answer

    return read


def _reader(operation: str) -> AnswerReader[dict[str, Any]]:
    def read(
        status: int, headers: Mapping[str, str], content: bytes
    ) -> dict[str, Any] | KinesisError:
        return read_answer(operation, status, headers, content)

    return read


def _stream_ref(stream_name: str | None, stream_arn: str | None) -> dict[str, Any]:
    if not stream_name and not stream_arn:
        raise ValueError("pass stream_name or stream_arn")
    ref: dict[str, Any] = {}
    if stream_name:
        ref["StreamName"] = stream_name
    if stream_arn:
        ref["StreamARN"] = stream_arn
    return ref


class KinesisClient(JsonService):
    """Kinesis Data Streams client (JSON 1.1, SigV4), for trio or asyncio.

    Region: ``region_name``, else ``AWS_REGION``, ``AWS_DEFAULT_REGION``, the profile's
    region. Endpoint: ``endpoint_url``, else ``AWS_ENDPOINT_URL_KINESIS``,
    ``AWS_ENDPOINT_URL``, else each call's endpoint by botocore's rules (the region,
    ``AWS_USE_FIPS_ENDPOINT``, ``AWS_USE_DUALSTACK_ENDPOINT``, the account id endpoint mode,
    the call's kind and ``StreamARN``: ``docs/endpoints.md``); settings the rules refuse
    raise :class:`EndpointError` at creation or at a call's first use. Credentials:
    ``credentials`` (a :class:`StaticCredentials` or a ready ``CredentialProvider``), else
    botocore's standard chain for ``profile_name``. ``transport`` replaces the network: an
    ``httpx.AsyncBaseTransport`` (``httpx.MockTransport``) is called through httpx's
    interface; ``FakeKinesis.transport()`` is reached through the client's own connection
    pool and HTTP framing, over in-memory connections.

    Errors: :class:`KinesisError` subclasses for error responses, :class:`TransportError`
    subclasses for network failures, :class:`CredentialsError`. One ``ExpiredTokenException``
    is handled here: the credentials are refreshed and the request re-signed and sent once
    more (an auth rejection means nothing was processed).
    """

    region_name: str
    endpoint_url: str
    _target_prefix = "Kinesis_20131202."
    _probe_operation = "DescribeStreamSummary"

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
        super().__init__(
            "kinesis",
            "KINESIS",
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
        #: per operation: its request headers and the ``read`` of its answers
        self._operations: dict[str, tuple[dict[str, str], AnswerReader[dict[str, Any]]]] = {}

    def __repr__(self) -> str:
        return (
            f"KinesisClient(endpoint_url={self.endpoint_url!r}, region_name={self.region_name!r})"
        )

    # -- core -------------------------------------------------------------------------------

    async def call(self, operation: str, body: Mapping[str, Any]) -> dict[str, Any]:
        """Call a Kinesis operation with a JSON body (bytes values are base64-encoded)."""
        where = tuple((key, body[key]) for key in _CONTEXT if type(body.get(key)) is str)
        return await self.call_raw(operation, _encode(body), where=where)

    async def call_raw(
        self,
        operation: str,
        body: bytes,
        *,
        within: float | None = None,
        entries: int | None = None,
        stream_arn: str | None = None,
        where: Where = (),
    ) -> dict[str, Any]:
        """Call a Kinesis operation with an already JSON-encoded body; return the response.

        ``stream_arn``: the body's ``StreamARN`` (or ``where``: its endpoint context
        parameters, ``(("StreamARN", arn),)``), which picks the endpoint with the operation.

        The whole call (hashing the body, getting credentials, the exchange and a retry
        after an expired token) has one deadline: ``within`` seconds, or by default one
        that follows its bytes: ``connect_timeout + request_timeout`` plus
        ``request_timeout`` per MiB of body and answer, and ``request_timeout`` without a
        byte moving while sending or reading is a stall (``_core._deadline``); a
        GetRecords has its answer's largest size (10 MiB) in that bound from the start,
        since the endpoint reads it before it sends a byte. Past it: ``RequestTimeoutError``.
        ``entries`` (PutRecords): the number of records sent; an answer whose ``Records``
        is not a list that long is refused (``ServiceError`` ``MalformedResponse``).

        An answer that is not the service's (a 2xx that cannot be used, a 1xx or 3xx, an
        error without the service's error shape) raises a ``KinesisError`` whose
        ``from_service`` is False; its connection is closed.
        """
        known = self._operations.get(operation)
        if known is None:
            known = self._operations[operation] = (self._headers(operation), _reader(operation))
        headers, read = known
        if entries is not None:
            read = _put_records_reader(entries)
        answer = BUILT_FIRST.get(operation, 0)
        limit = answer_limit(operation, entries or 0)
        if stream_arn is not None:
            where = (("StreamARN", stream_arn),)
        return await self._call(
            operation, body, headers, read, within=within, answer=answer, limit=limit, where=where
        )

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
        return await self.call_raw("PutRecords", _encode(body), stream_arn=stream_arn)

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
                raise malformed_answer(
                    "ListShards", "Shards is not a list, or NextToken is not a string"
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
        iterator = resp.get("ShardIterator")
        if type(iterator) is not str or not iterator:
            raise malformed_answer("GetShardIterator", "ShardIterator is not a string")
        return iterator

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
                    await anyio.sleep(max(0.2, backoff_delay(throttled, base=0.2, cap=2.0)))
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
