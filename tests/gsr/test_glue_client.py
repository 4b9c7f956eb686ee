"""The Glue client on the signed stack: its requests, endpoint, retries and errors
(``httpx.MockTransport``: what goes on the wire is seen as sent)."""

from __future__ import annotations

import json

import httpx
import pytest

from kinesis_trio._aws._glue import GlueClient
from kinesis_trio._errors import ConnectError
from kinesis_trio.gsr._types import SchemaNotFoundError, SchemaRegistryError
from tests.gsr.conftest import CREDS

pytestmark = [pytest.mark.anyio, pytest.mark.virtual_time]


def client(handler: httpx.MockTransport, **options: object) -> GlueClient:
    return GlueClient(
        region_name="eu-west-1",
        credentials=CREDS,
        transport=handler,
        retry_backoff=0.01,
        **options,  # type: ignore[arg-type]
    )


async def test_a_request_is_glues_json_signed_for_glue() -> None:
    seen: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json={"RegistryName": "r"})

    async with client(httpx.MockTransport(handler)) as glue:
        assert glue.endpoint_url == "https://glue.eu-west-1.amazonaws.com"
        assert (await glue.get_registry("r"))["RegistryName"] == "r"
    (request,) = seen
    assert request.headers["X-Amz-Target"] == "AWSGlue.GetRegistry"
    assert request.headers["Content-Type"] == "application/x-amz-json-1.1"
    assert "/eu-west-1/glue/aws4_request" in request.headers["Authorization"]
    assert json.loads(request.content) == {"RegistryId": {"RegistryName": "r"}}


def test_the_endpoint_follows_the_glue_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL_GLUE", "http://localhost:4567")
    monkeypatch.setenv("AWS_ENDPOINT_URL_KINESIS", "http://elsewhere:1")
    glue = GlueClient(region_name="us-east-1", credentials=CREDS)
    assert glue.endpoint_url == "http://localhost:4567"


async def test_a_network_failure_is_tried_again_then_typed() -> None:
    tries = 0

    def handler(request: httpx.Request) -> httpx.Response:
        nonlocal tries
        tries += 1
        raise httpx.ConnectError("refused", request=request)

    async with client(httpx.MockTransport(handler), max_attempts=3) as glue:
        with pytest.raises(SchemaRegistryError) as caught:
            await glue.get_schema_version("00000000-0000-0000-0000-000000000001")
    assert tries == 3
    assert caught.value.code == "ConnectError"
    assert isinstance(caught.value.__cause__, ConnectError)


async def test_an_answer_that_is_not_glues_is_refused() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, content=b"<html>proxy</html>")

    async with client(httpx.MockTransport(handler), max_attempts=2) as glue:
        with pytest.raises(SchemaRegistryError) as caught:
            await glue.get_registry("r")
    assert caught.value.code == "MalformedResponse"


@pytest.mark.parametrize(
    ("code", "kind", "tries"),
    [
        ("EntityNotFoundException", SchemaNotFoundError, 1),
        ("AccessDeniedException", SchemaRegistryError, 1),
        ("InvalidInputException", SchemaRegistryError, 1),
        ("ResourceNumberLimitExceededException", SchemaRegistryError, 1),
        ("ConcurrentModificationException", SchemaRegistryError, 4),
        ("ThrottlingException", SchemaRegistryError, 4),
    ],
)
async def test_glue_error_codes(code: str, kind: type[Exception], tries: int) -> None:
    count = 0

    def handler(request: httpx.Request) -> httpx.Response:
        nonlocal count
        count += 1
        return httpx.Response(400, json={"__type": f"com.amazonaws#{code}", "message": "said"})

    async with client(httpx.MockTransport(handler)) as glue:
        with pytest.raises(kind) as caught:
            await glue.get_registry("r")
    assert type(caught.value) is kind
    assert isinstance(caught.value, SchemaRegistryError) and caught.value.code == code
    assert "GetRegistry: " in str(caught.value) and "said" in str(caught.value)
    assert count == tries


@pytest.mark.parametrize(("status", "tries"), [(403, 1), (400, 1), (429, 4), (502, 4)])
async def test_an_answer_not_of_glues_is_retried_unless_a_4xx_refused_it(
    status: int, tries: int
) -> None:
    # a proxy's 4xx (not 408, 429): nothing was processed, the same call would be refused
    # again (issue 62); its 5xx or 429 may pass another time
    count = 0

    def handler(request: httpx.Request) -> httpx.Response:
        nonlocal count
        count += 1
        return httpx.Response(status, content=b"<html>refused</html>")

    async with client(httpx.MockTransport(handler)) as glue:
        with pytest.raises(SchemaRegistryError) as caught:
            await glue.get_registry("r")
    assert caught.value.code == str(status) and "refused" in str(caught.value)
    assert count == tries
