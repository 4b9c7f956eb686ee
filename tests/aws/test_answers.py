"""What an answer is (``_client.read_answer``, ``_errors.error_from_response``) and what the
retry policy makes of it: a record is failed for good only on a well-formed error the
service sent; every other answer is ambiguous. Pure functions, plus the one HTTP stack
checked end to end (the fake's in-memory wire, the CloudWatch sink, the one backoff)."""

from __future__ import annotations

import gzip
import json
import os
from typing import Any

import botocore
import botocore.credentials
import httpx
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from kinesis_trio import KinesisClient, ServiceError, StaticCredentials
from kinesis_trio._aws._client import NO_OUTPUT, read_answer
from kinesis_trio._core._retry_policy import Action, classify_exception
from kinesis_trio._errors import (
    KinesisError,
    LimitExceededError,
    ValidationError,
    error_from_response,
    parse_json,
    refused_on_the_way,
)
from kinesis_trio.metrics._cloudwatch import CloudWatchError, CloudWatchSink
from kinesis_trio.testing import FakeKinesis

NESTED = b"[" * 100_000
JSON_TYPE = {"content-type": "application/x-amz-json-1.1"}


def test_the_operations_without_output_are_botocores() -> None:
    """An empty 2xx body is usable only for an operation botocore's model gives no
    ``output`` shape (service-2.json: e.g. ``"CreateStream":{... "input":{...}, "errors"``
    with no ``"output"``)."""
    path = os.path.join(os.path.dirname(botocore.__file__), "data", "kinesis", "2013-12-02")
    with gzip.open(os.path.join(path, "service-2.json.gz")) as f:
        model = json.load(f)
    assert {name for name, op in model["operations"].items() if "output" not in op} == NO_OUTPUT


@pytest.mark.parametrize(
    "body", [NESTED, b"[" * 1000, b'{"a": "\xff\xfe"}', b"\xef\xbb", b"1e999999", b"nul\x00"]
)
def test_parse_json_never_raises(body: bytes) -> None:
    assert parse_json(body) is None or isinstance(parse_json(body), (dict, list, float))


@pytest.mark.parametrize("status", [200, 201, 204, 299])
@pytest.mark.parametrize(
    "content", [b"", b"not json", NESTED, b"[1, 2]", b'"text"', b"\xff\xfe{}", b"null"]
)
def test_an_unusable_2xx_is_refused_as_not_from_the_service(status: int, content: bytes) -> None:
    with pytest.raises(ServiceError) as caught:
        read_answer("PutRecords", status, JSON_TYPE, content)
    assert caught.value.code == "MalformedResponse"
    assert caught.value.from_service is False
    assert classify_exception(caught.value).ambiguous


def test_an_empty_2xx_is_usable_only_without_output() -> None:
    assert read_answer("CreateStream", 200, {}, b"") == {}
    with pytest.raises(ServiceError, match="empty"):
        read_answer("ListShards", 200, {}, b"")
    assert read_answer("ListShards", 200, {}, b'{"Shards": []}') == {"Shards": []}


@pytest.mark.parametrize("status", [100, 101, 199, 300, 301, 302, 304, 307, 399])
def test_a_1xx_or_3xx_is_ambiguous_even_with_an_error_body(status: int) -> None:
    body = json.dumps({"__type": "ValidationException", "message": "x"}).encode()
    with pytest.raises(KinesisError) as caught:
        read_answer("PutRecords", status, JSON_TYPE, body)
    error = caught.value
    assert not error.from_service and error.retryable
    decision = classify_exception(error)
    assert decision.action is Action.RETRY and decision.ambiguous


@pytest.mark.parametrize(
    ("status", "body", "headers"),
    [
        (502, b"<html>Bad Gateway</html>", {}),
        (500, NESTED, {}),
        (500, b'{"__type": ["not", "a", "string"]}', {}),
    ],
)
def test_a_5xx_without_the_service_shape_is_ambiguous(
    status: int, body: bytes, headers: dict[str, str]
) -> None:
    with pytest.raises(KinesisError) as caught:
        read_answer("PutRecords", status, headers, body)
    assert caught.value.from_service is False and caught.value.retryable
    assert caught.value.code == str(status)
    assert classify_exception(caught.value).ambiguous


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (400, b"<html>nope</html>"),
        (403, b'{"message": "no type"}'),
        (400, b'{"message": ' + b"[" * 5000 + b"}"),
        (401, b""),
        (404, b"Not Found"),
        (499, b""),
    ],
)
def test_a_4xx_without_the_service_shape_fails_definitely(status: int, body: bytes) -> None:
    # something in front of the endpoint refused the request unprocessed (issue 62)
    with pytest.raises(KinesisError) as caught:
        read_answer("PutRecords", status, {}, body)
    error = caught.value
    assert error.from_service is False and not error.retryable
    assert error.code == str(status) and refused_on_the_way(status)
    decision = classify_exception(error)
    assert decision.action is Action.FAIL and not decision.ambiguous


@pytest.mark.parametrize("status", [408, 429])
def test_a_408_or_429_without_the_service_shape_stays_retryable(status: int) -> None:
    error = error_from_response("PutRecords", status, b"", {})
    assert not error.from_service and error.retryable and not refused_on_the_way(status)
    decision = classify_exception(error)
    assert decision.action is Action.RETRY and decision.ambiguous


def test_a_429_without_the_service_shape_is_throttling_and_ambiguous() -> None:
    error = error_from_response("PutRecords", 429, b"slow down", {})
    assert isinstance(error, LimitExceededError) and not error.from_service
    decision = classify_exception(error)
    assert decision.throttled and decision.ambiguous and decision.action is Action.RETRY


def test_a_well_formed_service_error_is_returned_and_decides() -> None:
    body = json.dumps({"__type": "ValidationException", "message": "bad"}).encode()
    error = read_answer("PutRecords", 400, JSON_TYPE, body)
    assert isinstance(error, ValidationError) and error.from_service
    assert classify_exception(error).action is Action.FAIL
    header = read_answer("PutRecords", 400, {"x-amzn-ErrorType": "AccessDeniedException:x"}, b"")
    assert isinstance(header, KinesisError) and header.from_service


def test_from_service_survives_pickling() -> None:
    import pickle

    error = error_from_response("PutRecords", 302, b"", {})
    assert pickle.loads(pickle.dumps(error)).from_service is False


@given(st.integers(min_value=0, max_value=999), st.binary(max_size=300))
@example(413, b"")  # not the service's error shape: refused for its size
def test_any_answer_is_read_without_an_unexpected_exception(status: int, body: bytes) -> None:
    try:
        answer = read_answer("PutRecords", status, {}, body)
    except KinesisError as exc:
        assert not exc.from_service
        decision = classify_exception(exc)
        # not the service's answer: the request may have been processed, so a retry is
        # ambiguous; but a 4xx (not 408, 429) was refused on its way, nothing written: a
        # 413 for its size (RFC 9110, 15.5.14) is split, any other fails definitely
        if exc.status_code == 413:
            assert decision.too_large
        elif refused_on_the_way(exc.status_code):
            assert decision.action is Action.FAIL and not decision.ambiguous
        else:
            assert decision.ambiguous
        return
    if isinstance(answer, KinesisError):
        assert 400 <= status < 600 and answer.from_service
    else:
        assert 200 <= status < 300 and isinstance(answer, dict)


# -- the one HTTP stack -------------------------------------------------------------------


def _client_on(transport: httpx.AsyncBaseTransport) -> KinesisClient:
    return KinesisClient(
        region_name="us-east-1",
        endpoint_url="http://localhost:4567",
        credentials=StaticCredentials("a", "b"),
        transport=transport,
    )


@pytest.mark.anyio
async def test_the_fakes_transport_runs_the_clients_pool_and_framing() -> None:
    fake = FakeKinesis()
    fake.create_stream("s", shard_count=2)
    transport = fake.transport()
    async with _client_on(transport) as client:
        assert client._pool is not None  # not httpx's interface: the pool itself
        for _ in range(3):
            assert len(await client.list_shards("s")) == 2
        assert len(client._pool._idle) == 1
    assert getattr(transport, "opened", None) == 1  # one kept-alive connection for all


@pytest.mark.anyio
async def test_a_hook_answer_the_client_cannot_use_closes_the_fakes_connection() -> None:
    answers = iter([httpx.Response(204), None, None])

    async def hook(operation: str, body: dict[str, Any]) -> httpx.Response | None:
        return next(answers)

    fake = FakeKinesis(hook=hook)
    fake.create_stream("s")
    transport = fake.transport()
    async with _client_on(transport) as client:
        with pytest.raises(ServiceError, match="empty"):
            await client.list_shards("s")
        assert len(await client.list_shards("s")) == 1
        assert len(await client.list_shards("s")) == 1
    assert getattr(transport, "opened", None) == 2


@pytest.mark.anyio
async def test_the_cloudwatch_sink_retries_an_expired_token_once_through_the_one_stack() -> None:
    from kinesis_trio._aws._credentials import CredentialProvider
    from kinesis_trio.metrics import MetricDatum

    seen: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers["authorization"].split("Credential=")[1][:4])
        if len(seen) == 1:
            return httpx.Response(
                403,
                content=b"<ErrorResponse><Error><Code>ExpiredToken</Code>"
                b"<Message>expired</Message></Error></ErrorResponse>",
            )
        return httpx.Response(200, content=b"<PutMetricDataResponse/>")

    class Rotating(CredentialProvider):
        """Credentials that change at each forced refresh: AKI1, then AKI2."""

        def __init__(self) -> None:
            super().__init__(StaticCredentials("AKI1", "s"))
            self.n = 1

        async def get(self) -> Any:
            return botocore.credentials.ReadOnlyCredentials(f"AKI{self.n}", "s", None)

        async def force_refresh(self, stale: Any = None) -> Any:
            self.n += 1
            return await self.get()

    provider = Rotating()
    sink = CloudWatchSink(
        region_name="us-east-1",
        credentials=provider,
        transport=httpx.MockTransport(handler),
        max_attempts=1,
    )
    datum = MetricDatum("UserRecordsPut", (), "Count", 1, 1.0, 1.0, 1.0, 0.0)
    try:
        await sink.publish([datum])
    except CloudWatchError as exc:  # pragma: no cover - shown if the refresh did not happen
        pytest.fail(f"the expired token was not retried: {exc}")
    finally:
        await sink.aclose()
    assert seen == ["AKI1", "AKI2"]


@pytest.mark.anyio
async def test_the_cloudwatch_sink_refuses_an_unreadable_error_without_raising_it_raw() -> None:
    from kinesis_trio.metrics import MetricDatum

    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(500, content=b'{"__type": ' + b"[" * 5000 + b"}")

    sink = CloudWatchSink(
        region_name="us-east-1",
        credentials=StaticCredentials("a", "b"),
        transport=httpx.MockTransport(handler),
        max_attempts=2,
        retry_backoff=0.0,
    )
    datum = MetricDatum("UserRecordsPut", (), "Count", 1, 1.0, 1.0, 1.0, 0.0)
    with pytest.raises(CloudWatchError) as caught:
        await sink.publish([datum])
    await sink.aclose()
    assert caught.value.code == "HTTP500" and caught.value.status_code == 500
