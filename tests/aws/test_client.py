"""Tests for the Kinesis client, errors and credentials (httpx.MockTransport, no sockets)."""

from __future__ import annotations

import base64
import datetime
import json
import logging
import pickle
import re
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import anyio
import botocore.auth
import botocore.awsrequest
import botocore.credentials
import botocore.session
import httpx
import pytest

from kinesis_trio._aws._client import KinesisClient
from kinesis_trio._aws._credentials import (
    CredentialProvider,
    StaticCredentials,
    resolve_region,
)
from kinesis_trio._aws._endpoints import configured_endpoint
from kinesis_trio._errors import (
    AccessDeniedError,
    AuthenticationError,
    ConnectError,
    ConnectionLostError,
    CredentialsError,
    ExpiredTokenError,
    KinesisError,
    KinesisTrioError,
    KMSError,
    LimitExceededError,
    ProvisionedThroughputExceededError,
    RequestTimeoutError,
    ResourceInUseError,
    ResourceNotFoundError,
    ServiceError,
    TransportError,
    ValidationError,
    error_from_response,
)
from tests.support.credentials import RefreshProbe, refreshable

pytestmark = pytest.mark.anyio

CREDS = StaticCredentials("AKIDEXAMPLE12345678", "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY")
TOKEN_CREDS = StaticCredentials("ASIAEXAMPLE12345678", "secret/KEY+example", "session-token-xyz")

_ENV_VARS = (
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_PROFILE",
    "AWS_DEFAULT_PROFILE",
    "AWS_ENDPOINT_URL",
    "AWS_ENDPOINT_URL_KINESIS",
    "AWS_IGNORE_CONFIGURED_ENDPOINT_URLS",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AWS_SECURITY_TOKEN",
    "AWS_CA_BUNDLE",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_ROLE_ARN",
)


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> Iterator[Any]:
    """An AWS environment with nothing configured (no ~/.aws, no IMDS)."""
    for name in _ENV_VARS:
        monkeypatch.delenv(name, raising=False)
    config = tmp_path / "config"
    config.write_text("")
    creds = tmp_path / "credentials"
    creds.write_text("")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(creds))
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    yield config


Handler = Callable[[httpx.Request], Any]


def make_client(handler: Handler, **kwargs: Any) -> KinesisClient:
    kwargs.setdefault("region_name", "us-east-1")
    kwargs.setdefault("credentials", CREDS)
    kwargs.setdefault("endpoint_url", "https://kinesis.us-east-1.amazonaws.com")
    return KinesisClient(transport=httpx.MockTransport(handler), **kwargs)


def ok(payload: dict[str, Any] | None = None) -> httpx.Response:
    return httpx.Response(200, json=payload if payload is not None else {})


class Recorder:
    """A MockTransport handler that records requests and replays canned responses."""

    def __init__(self, *responses: httpx.Response) -> None:
        self.requests: list[httpx.Request] = []
        self.responses = list(responses)

    def __call__(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        if self.responses:
            return self.responses.pop(0)
        return ok()

    def bodies(self) -> list[dict[str, Any]]:
        return [json.loads(r.content) for r in self.requests]


_AUTH_RE = re.compile(
    r"AWS4-HMAC-SHA256 Credential=(?P<key>[^/]+)/(?P<scope>\S+), "
    r"SignedHeaders=(?P<signed>[^,]+), Signature=(?P<sig>[0-9a-f]{64})$"
)


def expected_signature(request: httpx.Request, creds: StaticCredentials, region: str) -> str:
    """Recompute the signature with stock botocore from what was actually sent."""
    match = _AUTH_RE.match(request.headers["Authorization"])
    assert match, request.headers["Authorization"]
    signed = match["signed"].split(";")
    aws_request = botocore.awsrequest.AWSRequest(
        method=request.method,
        url=str(request.url),
        data=request.content,
        headers={name: request.headers[name] for name in signed},
    )
    aws_request.context["timestamp"] = request.headers["X-Amz-Date"]
    frozen = botocore.credentials.ReadOnlyCredentials(
        creds.access_key_id, creds.secret_access_key, creds.session_token
    )
    auth = botocore.auth.SigV4Auth(frozen, "kinesis", region)
    canonical = auth.canonical_request(aws_request)
    return str(auth.signature(auth.string_to_sign(aws_request, canonical), aws_request))


# -- wire format and signing --------------------------------------------------------------


async def test_target_header_content_type_and_body() -> None:
    rec = Recorder(ok({"StreamDescriptionSummary": {"StreamName": "s", "StreamStatus": "ACTIVE"}}))
    async with make_client(rec) as client:
        summary = await client.describe_stream_summary("s")
    assert summary == {"StreamName": "s", "StreamStatus": "ACTIVE"}
    (request,) = rec.requests
    assert request.method == "POST"
    assert str(request.url) == "https://kinesis.us-east-1.amazonaws.com/"
    assert request.headers["X-Amz-Target"] == "Kinesis_20131202.DescribeStreamSummary"
    assert request.headers["Content-Type"] == "application/x-amz-json-1.1"
    assert json.loads(request.content) == {"StreamName": "s"}


@pytest.mark.parametrize(
    "endpoint", ["https://kinesis.us-east-1.amazonaws.com", "http://localhost:4567"]
)
async def test_sigv4_authorization_is_valid(endpoint: str) -> None:
    rec = Recorder()
    async with make_client(rec, endpoint_url=endpoint) as client:
        await client.call("ListStreams", {"Limit": 5})
    (request,) = rec.requests
    match = _AUTH_RE.match(request.headers["Authorization"])
    assert match is not None
    assert match["key"] == CREDS.access_key_id
    assert re.fullmatch(r"\d{8}/us-east-1/kinesis/aws4_request", match["scope"])
    signed = match["signed"].split(";")
    assert {"host", "content-type", "x-amz-date", "x-amz-target"} <= set(signed)
    assert "x-amz-security-token" not in signed
    assert "X-Amz-Security-Token" not in request.headers
    assert request.headers["Host"] == endpoint.split("://")[1]
    assert match["sig"] == expected_signature(request, CREDS, "us-east-1")


async def test_session_token_is_sent_and_signed() -> None:
    rec = Recorder()
    async with make_client(rec, credentials=TOKEN_CREDS, region_name="eu-west-1") as client:
        await client.call("ListStreams", {})
    (request,) = rec.requests
    assert request.headers["X-Amz-Security-Token"] == "session-token-xyz"
    match = _AUTH_RE.match(request.headers["Authorization"])
    assert match is not None
    assert match["scope"].endswith("/eu-west-1/kinesis/aws4_request")
    assert "x-amz-security-token" in match["signed"].split(";")
    assert match["sig"] == expected_signature(request, TOKEN_CREDS, "eu-west-1")


async def test_large_body_signature_is_valid() -> None:
    # Bodies of 1 MiB and more are hashed in a worker thread.
    rec = Recorder()
    data = base64.b64encode(b"x" * (2 << 20)).decode()
    async with make_client(rec) as client:
        await client.put_records("s", [{"Data": data, "PartitionKey": "k"}])
    (request,) = rec.requests
    match = _AUTH_RE.match(request.headers["Authorization"])
    assert match is not None
    assert match["sig"] == expected_signature(request, CREDS, "us-east-1")


async def test_every_request_is_signed_afresh() -> None:
    rec = Recorder()
    async with make_client(rec) as client:
        await client.call("ListStreams", {})
        await client.call("ListStreams", {})
    assert len(rec.requests) == 2
    for request in rec.requests:
        assert request.headers["Authorization"].startswith("AWS4-HMAC-SHA256 ")
        match = _AUTH_RE.match(request.headers["Authorization"])
        assert match is not None
        assert match["sig"] == expected_signature(request, CREDS, "us-east-1")


async def test_put_records_body() -> None:
    rec = Recorder(ok({"FailedRecordCount": 0, "Records": [{"ShardId": "shardId-0"}]}))
    records = [{"Data": "aGk=", "PartitionKey": "pk", "ExplicitHashKey": "1"}]
    async with make_client(rec) as client:
        resp = await client.put_records("s", records, stream_arn="arn:aws:kinesis:x")
        with pytest.raises(ValueError):
            await client.put_records(None, records)
    assert resp["FailedRecordCount"] == 0
    assert rec.requests[0].headers["X-Amz-Target"] == "Kinesis_20131202.PutRecords"
    assert rec.bodies() == [
        {"StreamName": "s", "StreamARN": "arn:aws:kinesis:x", "Records": records}
    ]


async def test_call_raw_sends_bytes_verbatim() -> None:
    rec = Recorder()
    body = b'{"StreamName":"s","Records":[]}'
    async with make_client(rec) as client:
        assert await client.call_raw("PutRecords", body) == {}
    assert rec.requests[0].content == body


async def test_call_encodes_bytes_as_base64() -> None:
    rec = Recorder()
    async with make_client(rec) as client:
        await client.call("PutRecord", {"Data": b"\x00\x01", "PartitionKey": "k"})
    assert rec.bodies() == [{"Data": "AAE=", "PartitionKey": "k"}]


# -- errors -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "body", "headers", "cls", "code", "message"),
    [
        (
            400,
            {
                "__type": "com.amazonaws.kinesis.v20131202#ResourceNotFoundException",
                "message": "Stream orders under account 123 not found.",
            },
            {"x-amzn-RequestId": "req-1"},
            ResourceNotFoundError,
            "ResourceNotFoundException",
            "Stream orders under account 123 not found.",
        ),
        (
            400,
            {"__type": "ResourceInUseException", "Message": "busy"},
            {},
            ResourceInUseError,
            "ResourceInUseException",
            "busy",
        ),
        (
            400,
            None,
            {"x-amzn-ErrorType": "AccessDeniedException:http://internal.amazon.com/coral/x/"},
            AccessDeniedError,
            "AccessDeniedException",
            "",
        ),
        (500, None, {}, ServiceError, "500", ""),
        (503, {"__type": "ServiceUnavailable"}, {}, ServiceError, "ServiceUnavailable", ""),
        (502, {"__type": "SomethingNew"}, {}, ServiceError, "SomethingNew", ""),
        (400, {"__type": "SomethingNew"}, {}, KinesisError, "SomethingNew", ""),
        (400, {"__type": "SerializationException"}, {}, ValidationError, None, ""),
        (400, {"__type": "InvalidArgumentException"}, {}, ValidationError, None, ""),
        (400, {"__type": "LimitExceededException"}, {}, LimitExceededError, None, ""),
        (
            400,
            {"__type": "ProvisionedThroughputExceededException"},
            {},
            ProvisionedThroughputExceededError,
            None,
            "",
        ),
        (400, {"__type": "ExpiredTokenException"}, {}, ExpiredTokenError, None, ""),
        (400, {"__type": "KMSThrottlingException"}, {}, KMSError, None, ""),
        (400, {"__type": "KMSNotFoundException"}, {}, KMSError, None, ""),
        (403, {"__type": "InvalidSignatureException"}, {}, AuthenticationError, None, ""),
        (400, {"__type": "UnrecognizedClientException"}, {}, AuthenticationError, None, ""),
        (403, {"__type": "IncompleteSignature"}, {}, AuthenticationError, None, ""),
        (400, {"__type": "MissingAuthenticationToken"}, {}, AuthenticationError, None, ""),
        (403, {"__type": "SignatureDoesNotMatch"}, {}, AuthenticationError, None, ""),
        (413, None, {}, ValidationError, "413", ""),
    ],
)
def test_error_from_response(
    status: int,
    body: dict[str, Any] | None,
    headers: dict[str, str],
    cls: type[KinesisError],
    code: str | None,
    message: str,
) -> None:
    raw = json.dumps(body).encode() if body is not None else b""
    err = error_from_response("PutRecords", status, raw, headers)
    assert type(err) is cls
    assert isinstance(err, KinesisTrioError)
    if code is not None:
        assert err.code == code
    assert err.message == message
    assert err.status_code == status
    assert err.operation == "PutRecords"
    assert "\n" not in str(err)
    assert str(err).endswith(f"(PutRecords, HTTP {status})")


def test_error_str_and_attributes() -> None:
    body = json.dumps(
        {
            "__type": "com.amazonaws.kinesis.v20131202#ResourceNotFoundException",
            "message": "Stream orders under account 123 not found.",
        }
    ).encode()
    err = error_from_response("PutRecords", 400, body, httpx.Headers({"X-Amzn-RequestId": "r1"}))
    assert str(err) == (
        "ResourceNotFoundException: Stream orders under account 123 not found. "
        "(PutRecords, HTTP 400)"
    )
    assert err.request_id == "r1"
    assert not err.retryable
    clone = pickle.loads(pickle.dumps(err))
    assert type(clone) is ResourceNotFoundError
    assert str(clone) == str(err)
    assert clone.request_id == "r1"


def test_retryable_hints() -> None:
    def err(code: str, status: int = 400) -> KinesisError:
        return error_from_response("Op", status, json.dumps({"__type": code}).encode(), {})

    assert err("ProvisionedThroughputExceededException").retryable
    assert err("KMSThrottlingException").retryable
    assert not err("KMSDisabledException").retryable
    assert err("InternalFailure", 500).retryable
    assert not err("ValidationException").retryable
    assert not err("AccessDeniedException").retryable


def test_non_json_error_body_is_one_short_line() -> None:
    body = b"<html>\n<body>Bad Gateway</body>\n</html>" + b"x" * 5000
    err = error_from_response("ListShards", 502, body, {})
    assert isinstance(err, ServiceError)
    assert "\n" not in str(err)
    assert len(err.message) <= 512


async def test_error_response_through_client() -> None:
    rec = Recorder(
        httpx.Response(
            400,
            json={
                "__type": "com.amazonaws.kinesis.v20131202#ResourceNotFoundException",
                "message": "Stream nope under account 000000000000 not found.",
            },
            headers={"x-amzn-RequestId": "abc-123"},
        ),
        httpx.Response(500),
    )
    async with make_client(rec) as client:
        with pytest.raises(ResourceNotFoundError) as info:
            await client.describe_stream_summary("nope")
        assert info.value.operation == "DescribeStreamSummary"
        assert info.value.request_id == "abc-123"
        with pytest.raises(ServiceError) as info5:
            await client.put_records("s", [])
        assert info5.value.status_code == 500


async def test_malformed_success_body() -> None:
    rec = Recorder(httpx.Response(200, content=b"not json"))
    async with make_client(rec) as client:
        with pytest.raises(ServiceError):
            await client.call("ListStreams", {})


# -- transport errors and cancellation ----------------------------------------------------


@pytest.mark.parametrize(
    ("exc_type", "cls", "sent"),
    [
        (httpx.ConnectError, ConnectError, False),
        (httpx.ConnectTimeout, ConnectError, False),
        (httpx.PoolTimeout, ConnectError, False),
        (httpx.ReadTimeout, RequestTimeoutError, True),
        (httpx.WriteTimeout, RequestTimeoutError, True),
        (httpx.RemoteProtocolError, ConnectionLostError, True),
        (httpx.ReadError, ConnectionLostError, True),
        (httpx.WriteError, ConnectionLostError, True),
    ],
)
async def test_transport_errors(
    exc_type: type[httpx.RequestError], cls: type[TransportError], sent: bool
) -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        raise exc_type("boom", request=request)

    async with make_client(handler) as client:
        with pytest.raises(cls) as info:
            await client.put_records("s", [{"Data": "aGk=", "PartitionKey": "k"}])
    err = info.value
    assert isinstance(err, TransportError)
    assert err.sent is sent
    assert err.operation == "PutRecords"
    assert err.retryable
    assert isinstance(err.__cause__, exc_type)
    assert "aGk=" not in str(err)
    assert type(pickle.loads(pickle.dumps(err))) is cls


async def test_cancelled_call_propagates_cancellation() -> None:
    started = anyio.Event()
    scope = anyio.CancelScope()

    async def handler(request: httpx.Request) -> httpx.Response:
        started.set()
        scope.cancel()  # the caller's scope is cancelled while the request is out
        await anyio.sleep(30)
        return ok()

    reached_after = False
    async with make_client(handler) as client:
        with scope:
            await client.call("ListStreams", {})
            reached_after = True
    assert started.is_set()
    assert scope.cancelled_caught
    assert not reached_after


async def test_cancel_from_outside_scope() -> None:
    async def handler(request: httpx.Request) -> httpx.Response:
        await anyio.sleep(30)
        return ok()

    async with make_client(handler) as client:
        with anyio.CancelScope() as scope:
            async with anyio.create_task_group() as tg:
                tg.start_soon(client.call, "ListStreams", {})
                await anyio.sleep(0.05)
                scope.cancel()
        assert scope.cancelled_caught


# -- ListShards and other operations ------------------------------------------------------


async def test_list_shards_pagination() -> None:
    rec = Recorder(
        ok({"Shards": [{"ShardId": "shardId-000000000000"}], "NextToken": "tok-1"}),
        ok({"Shards": [{"ShardId": "shardId-000000000001"}], "NextToken": "tok-2"}),
        ok({"Shards": [{"ShardId": "shardId-000000000002"}]}),
    )
    async with make_client(rec) as client:
        shards = await client.list_shards("orders")
    assert [s["ShardId"] for s in shards] == [f"shardId-00000000000{i}" for i in range(3)]
    assert rec.bodies() == [
        {"StreamName": "orders", "ShardFilter": {"Type": "AT_LATEST"}},
        {"NextToken": "tok-1"},
        {"NextToken": "tok-2"},
    ]
    assert all(r.headers["X-Amz-Target"].endswith(".ListShards") for r in rec.requests)


async def test_list_shards_all_by_arn() -> None:
    rec = Recorder(ok({"Shards": []}))
    async with make_client(rec) as client:
        assert await client.list_shards(stream_arn="arn:s", at_latest=False) == []
    assert rec.bodies() == [{"StreamARN": "arn:s"}]


async def test_create_wait_delete() -> None:
    def summary(status: str) -> httpx.Response:
        return ok({"StreamDescriptionSummary": {"StreamName": "s", "StreamStatus": status}})

    rec = Recorder(
        ok(),
        httpx.Response(400, json={"__type": "ResourceNotFoundException"}),
        summary("CREATING"),
        summary("ACTIVE"),
        ok(),
        httpx.Response(400, json={"__type": "ResourceNotFoundException"}),
    )
    async with make_client(rec) as client:
        await client.create_stream("s", 2)
        assert (await client.wait_for_stream("s", timeout=5))["StreamStatus"] == "ACTIVE"
        await client.delete_stream("s")
        assert await client.wait_for_stream("s", status="DELETED", timeout=5) == {}
    bodies = rec.bodies()
    assert bodies[0] == {"StreamName": "s", "ShardCount": 2}
    assert bodies[4] == {"StreamName": "s", "EnforceConsumerDeletion": True}


async def test_create_on_demand_and_wait_timeout() -> None:
    rec = Recorder(ok())

    def handler(request: httpx.Request) -> httpx.Response:
        if request.headers["X-Amz-Target"].endswith("CreateStream"):
            return rec(request)
        return ok({"StreamDescriptionSummary": {"StreamStatus": "CREATING"}})

    async with make_client(handler) as client:
        await client.create_stream("s", on_demand=True)
        with pytest.raises(TimeoutError, match="CREATING"):
            await client.wait_for_stream("s", timeout=0.3)
    assert rec.bodies() == [{"StreamName": "s", "StreamModeDetails": {"StreamMode": "ON_DEMAND"}}]


async def test_resharding_wrappers() -> None:
    rec = Recorder()
    async with make_client(rec) as client:
        await client.split_shard("s", "shardId-000000000000", 2**127)
        await client.merge_shards("s", "shardId-000000000001", "shardId-000000000002")
        await client.update_shard_count("s", 4)
    assert [r.headers["X-Amz-Target"].split(".")[1] for r in rec.requests] == [
        "SplitShard",
        "MergeShards",
        "UpdateShardCount",
    ]
    assert rec.bodies() == [
        {
            "StreamName": "s",
            "ShardToSplit": "shardId-000000000000",
            "NewStartingHashKey": str(2**127),
        },
        {
            "StreamName": "s",
            "ShardToMerge": "shardId-000000000001",
            "AdjacentShardToMerge": "shardId-000000000002",
        },
        {"StreamName": "s", "TargetShardCount": 4, "ScalingType": "UNIFORM_SCALING"},
    ]


async def test_read_all_reads_every_shard_until_caught_up() -> None:
    def rec_(n: int) -> dict[str, Any]:
        return {
            "Data": base64.b64encode(f"r{n}".encode()).decode(),
            "PartitionKey": "k",
            "SequenceNumber": str(n),
        }

    pages: dict[str, dict[str, Any]] = {
        "it-0": {
            "Records": [rec_(1), rec_(2)],
            "NextShardIterator": "it-0b",
            "MillisBehindLatest": 0,
        },
        "it-0b": {"Records": [], "NextShardIterator": "it-0c", "MillisBehindLatest": 0},
        "it-1": {"Records": [], "NextShardIterator": "it-1b", "MillisBehindLatest": 500},
        "it-1b": {"Records": [rec_(3)]},  # closed shard: no NextShardIterator
    }
    seen: list[dict[str, Any]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        op = request.headers["X-Amz-Target"].split(".")[1]
        body = json.loads(request.content)
        seen.append({"op": op, **body})
        if op == "ListShards":
            return ok({"Shards": [{"ShardId": "shardId-0"}, {"ShardId": "shardId-1"}]})
        if op == "GetShardIterator":
            return ok({"ShardIterator": "it-" + body["ShardId"][-1]})
        return ok(pages[body["ShardIterator"]])

    async with make_client(handler) as client:
        result = await client.read_all("s")
    assert {k: [r["Data"] for r in v] for k, v in result.items()} == {
        "shardId-0": [b"r1", b"r2"],
        "shardId-1": [b"r3"],
    }
    assert seen[0] == {"op": "ListShards", "StreamName": "s"}  # all shards, no filter
    assert seen[1]["ShardIteratorType"] == "TRIM_HORIZON"


# -- client construction, region and endpoint ---------------------------------------------


@pytest.mark.usefixtures("aws_env")
def test_region_precedence(monkeypatch: pytest.MonkeyPatch, aws_env: Any) -> None:
    aws_env.write_text("[default]\nregion = ap-south-1\n[profile other]\nregion = sa-east-1\n")
    assert resolve_region(None, botocore.session.Session()) == "ap-south-1"
    assert resolve_region(None, botocore.session.Session(profile="other")) == "sa-east-1"
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-central-1")
    assert resolve_region(None, botocore.session.Session(profile="other")) == "eu-central-1"
    monkeypatch.setenv("AWS_REGION", "us-west-2")
    assert resolve_region(None, botocore.session.Session(profile="other")) == "us-west-2"
    assert resolve_region("eu-west-3", botocore.session.Session()) == "eu-west-3"


@pytest.mark.usefixtures("aws_env")
def test_no_region_is_a_clear_error() -> None:
    with pytest.raises(ValueError, match=r"region_name=.*AWS_REGION"):
        resolve_region(None, botocore.session.Session())
    with pytest.raises(ValueError, match="no region"):
        KinesisClient(credentials=CREDS)
    with pytest.raises(ValueError, match="invalid region"):
        resolve_region("us-east-1.evil.com/")


@pytest.mark.usefixtures("aws_env")
def test_endpoint_precedence(monkeypatch: pytest.MonkeyPatch) -> None:
    """An explicit endpoint: the argument, AWS_ENDPOINT_URL_KINESIS, AWS_ENDPOINT_URL; None
    leaves it to botocore's rules (tests/aws/test_endpoints.py)."""
    assert configured_endpoint(None, "KINESIS") is None
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://global:1/")
    assert configured_endpoint(None, "KINESIS") == "http://global:1"
    monkeypatch.setenv("AWS_ENDPOINT_URL_KINESIS", "http://kinesis-only:2")
    assert configured_endpoint(None, "KINESIS") == "http://kinesis-only:2"
    assert configured_endpoint(None, "GLUE") == "http://global:1"
    assert configured_endpoint("http://explicit:3/", "KINESIS") == "http://explicit:3"
    monkeypatch.setenv("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS", "true")
    assert configured_endpoint(None, "KINESIS") is None
    with pytest.raises(ValueError):
        configured_endpoint("localhost:4567", "KINESIS")


@pytest.mark.usefixtures("aws_env")
async def test_client_resolves_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_REGION", "eu-north-1")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-2")
    monkeypatch.setenv("AWS_ENDPOINT_URL_KINESIS", "http://127.0.0.1:4567")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "AKIAENVIRONMENT00000")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "env-secret")
    rec = Recorder()
    async with KinesisClient(transport=httpx.MockTransport(rec)) as client:
        assert client.region_name == "eu-north-1"
        assert client.endpoint_url == "http://127.0.0.1:4567"
        await client.call("ListStreams", {})
        assert client.credentials.method == "env"
    request = rec.requests[0]
    assert str(request.url) == "http://127.0.0.1:4567/"
    auth = request.headers["Authorization"]
    assert "Credential=AKIAENVIRONMENT00000/" in auth
    assert "/eu-north-1/kinesis/aws4_request" in auth


@pytest.mark.usefixtures("aws_env")
async def test_no_credentials_is_credentials_error() -> None:
    rec = Recorder()
    async with KinesisClient(region_name="us-east-1", transport=httpx.MockTransport(rec)) as c:
        with pytest.raises(CredentialsError, match="AWS_ACCESS_KEY_ID"):
            await c.call("ListStreams", {})
    assert rec.requests == []


async def test_repr_and_logs_hide_secrets(caplog: pytest.LogCaptureFixture) -> None:
    rec = Recorder(ok(), httpx.Response(400, json={"__type": "ValidationException"}))
    client = make_client(rec, credentials=TOKEN_CREDS)
    text = repr(client)
    assert text == (
        "KinesisClient(endpoint_url='https://kinesis.us-east-1.amazonaws.com', "
        "region_name='us-east-1')"
    )
    with caplog.at_level(logging.DEBUG, logger="kinesis_trio.client"):
        await client.call("ListStreams", {})
        with pytest.raises(ValidationError):
            await client.call("ListStreams", {})
    await client.aclose()
    await client.aclose()  # idempotent
    with pytest.raises(RuntimeError, match="closed"):
        await client.call("ListStreams", {})
    calls = [r for r in caplog.records if "event='kinesis.call'" in r.getMessage()]
    assert len(calls) == 2
    assert all(r.levelno == logging.DEBUG and r.name == "kinesis_trio.client" for r in calls)
    for key in ("operation='ListStreams'", "status=200", "duration="):
        assert key in calls[0].getMessage()
    dump = "\n".join(r.getMessage() for r in caplog.records)
    for secret in (TOKEN_CREDS.secret_access_key, "session-token-xyz", "Signature="):
        assert secret not in dump


def test_static_credentials_repr_hides_secrets() -> None:
    text = repr(TOKEN_CREDS)
    assert "secret/KEY+example" not in text
    assert "session-token-xyz" not in text
    assert "ASIAEXAM" in text
    assert "ASIAEXAMPLE12345678" not in text
    assert "***" in text
    assert str(TOKEN_CREDS) == text
    assert "wJalrXUtnFEMI" not in repr(CREDS)
    assert "session_token=None" in repr(CREDS)
    with pytest.raises(ValueError):
        StaticCredentials("", "x")


# -- refreshable credentials --------------------------------------------------------------


def _iso(dt: datetime.datetime) -> str:
    return dt.isoformat()


async def test_refreshable_far_from_expiry_never_refreshes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    probe = RefreshProbe(threading.get_ident())
    provider = CredentialProvider(refreshable(probe, expires_in=3600))
    hops = 0
    real_run_sync = anyio.to_thread.run_sync

    async def counting_run_sync(*args: Any, **kwargs: Any) -> Any:
        nonlocal hops
        hops += 1
        return await real_run_sync(*args, **kwargs)

    monkeypatch.setattr(anyio.to_thread, "run_sync", counting_run_sync)
    for _ in range(1000):
        creds = await provider.get()
    assert creds.access_key == "ASIAORIGINAL0000000"
    assert probe.calls == 0
    assert hops == 0  # the fast path never leaves the event loop thread


async def test_refresh_in_advisory_window_runs_once_in_worker_thread() -> None:
    probe = RefreshProbe(threading.get_ident())
    # 12 minutes left: inside the 15 min advisory window, outside the 10 min mandatory one.
    provider = CredentialProvider(refreshable(probe, expires_in=12 * 60))
    results: list[Any] = []

    async def getter() -> None:
        results.append(await provider.get())

    async with anyio.create_task_group() as tg:
        for _ in range(50):
            tg.start_soon(getter)
    assert probe.calls == 1
    assert len(probe.threads) == 1
    assert probe.threads[0] != threading.get_ident()
    # Callers that arrived during the refresh got the still-valid old credentials.
    assert {c.access_key for c in results} <= {"ASIAORIGINAL0000000", "ASIAREFRESHED0000001"}
    latest = await provider.get()
    assert latest.access_key == "ASIAREFRESHED0000001"
    assert latest.token == "refreshed-token-1"
    for _ in range(100):
        await provider.get()
    assert probe.calls == 1


async def test_refresh_in_mandatory_window_all_wait_for_one_refresh() -> None:
    probe = RefreshProbe(threading.get_ident())
    provider = CredentialProvider(refreshable(probe, expires_in=60))
    results: list[Any] = []

    async def getter() -> None:
        results.append(await provider.get())

    async with anyio.create_task_group() as tg:
        for _ in range(50):
            tg.start_soon(getter)
    assert probe.calls == 1
    assert probe.threads[0] != threading.get_ident()
    assert {c.access_key for c in results} == {"ASIAREFRESHED0000001"}


async def test_deferred_credentials_resolve_in_thread() -> None:
    probe = RefreshProbe(threading.get_ident())
    creds = botocore.credentials.DeferredRefreshableCredentials(probe, "custom-process")
    provider = CredentialProvider(creds)
    results = []

    async def getter() -> None:
        results.append(await provider.get())

    async with anyio.create_task_group() as tg:
        for _ in range(20):
            tg.start_soon(getter)
    assert probe.calls == 1
    assert {c.access_key for c in results} == {"ASIAREFRESHED0000001"}
    assert provider.method == "custom-process"


async def test_failed_mandatory_refresh_is_credentials_error() -> None:
    def broken() -> dict[str, str]:
        raise RuntimeError("sts unreachable")

    expiry = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=30)
    creds = botocore.credentials.RefreshableCredentials.create_from_metadata(
        metadata={
            "access_key": "ASIAORIGINAL0000000",
            "secret_key": "original-secret",
            "token": "t",
            "expiry_time": _iso(expiry),
        },
        refresh_using=broken,
        method="sts-assume-role",
    )
    provider = CredentialProvider(creds)
    with pytest.raises(CredentialsError, match="sts unreachable") as info:
        await provider.get()
    assert "original-secret" not in str(info.value)


async def test_force_refresh_deduplicates() -> None:
    probe = RefreshProbe(threading.get_ident(), delay=0.01)
    provider = CredentialProvider(refreshable(probe, expires_in=3600))
    old = await provider.get()
    new = await provider.force_refresh(old)
    assert probe.calls == 1
    assert new.access_key == "ASIAREFRESHED0000001"
    # A second caller still holding the old credentials does not refresh again.
    assert await provider.force_refresh(old) == new
    assert probe.calls == 1
    assert await provider.get() == new


async def test_expired_token_refreshes_and_resends_once() -> None:
    probe = RefreshProbe(threading.get_ident(), delay=0.0)
    provider = CredentialProvider(refreshable(probe, expires_in=3600))
    rec = Recorder(
        httpx.Response(400, json={"__type": "ExpiredTokenException", "message": "expired"}),
        ok({"FailedRecordCount": 0, "Records": []}),
    )
    async with make_client(rec, credentials=provider) as client:
        resp = await client.put_records("s", [])
    assert resp["FailedRecordCount"] == 0
    assert probe.calls == 1
    first, second = rec.requests
    assert "Credential=ASIAORIGINAL0000000/" in first.headers["Authorization"]
    assert first.headers["X-Amz-Security-Token"] == "original-token"
    assert "Credential=ASIAREFRESHED0000001/" in second.headers["Authorization"]
    assert second.headers["X-Amz-Security-Token"] == "refreshed-token-1"


async def test_a_call_has_one_deadline_that_covers_getting_credentials() -> None:
    # The producer gives each PutRecords one bound (``within``) and relies on the client
    # to keep it: credentials that never come are a RequestTimeoutError, not a hang.
    rec = Recorder(ok({"FailedRecordCount": 0, "Records": []}))
    async with make_client(rec) as client:

        async def never() -> Any:
            await anyio.sleep_forever()

        client._credentials.get = never  # type: ignore[method-assign]
        start = anyio.current_time()
        with (
            anyio.fail_after(30),
            pytest.raises(RequestTimeoutError, match=r"PutRecords did not complete within 0\.2 s"),
        ):
            await client.call_raw("PutRecords", b"{}", within=0.2)
        assert anyio.current_time() - start < 5
    assert rec.requests == []


async def test_expired_token_with_static_credentials_raises() -> None:
    rec = Recorder(httpx.Response(400, json={"__type": "ExpiredTokenException"}))
    async with make_client(rec) as client:
        with pytest.raises(ExpiredTokenError):
            await client.call("ListStreams", {})
    assert len(rec.requests) == 1


# -- emulator smoke test ------------------------------------------------------------------


@pytest.mark.integration
async def test_kinesalite_roundtrip(local_engine: Any) -> None:
    name = f"client-smoke-{time.time_ns()}"
    async with KinesisClient(
        region_name="us-east-1",
        endpoint_url=local_engine.endpoint_url,
        credentials=StaticCredentials("AKIDTEST", "test-secret"),
    ) as client:
        await client.create_stream(name, 2)
        summary = await client.wait_for_stream(name, timeout=30)
        assert summary["StreamStatus"] == "ACTIVE"
        shards = await client.list_shards(name, at_latest=False)
        assert len(shards) == 2
        payloads = [f"record-{i}".encode() for i in range(20)]
        resp = await client.put_records(
            name,
            [
                {"Data": base64.b64encode(p).decode(), "PartitionKey": f"pk-{i}"}
                for i, p in enumerate(payloads)
            ],
        )
        assert resp["FailedRecordCount"] == 0
        data = await client.read_all(name)
        assert set(data) == {s["ShardId"] for s in shards}
        assert sorted(r["Data"] for rs in data.values() for r in rs) == sorted(payloads)
        await client.delete_stream(name)
