"""The Python local engine: the fake served over real HTTP (``kinesis_trio.testing.serve``).

In-process, on both event loops: a Producer round trip through a socket, the service's JSON
error shapes, SigV4 presence, faults as a client on the wire sees them (a hung request ends
with the client's timeout and frees the server's task; a reset is a reset), bodies over the
limit, malformed HTTP, TLS with the self-signed certificate, and ``--faults`` parsing.
"""

from __future__ import annotations

import json
import socket
import ssl
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from kinesis_trio import Producer, ProducerConfig, StaticCredentials
from kinesis_trio.testing import FakeKinesis, Faults
from kinesis_trio.testing._http import self_signed_context, serve
from kinesis_trio.testing._local_server import parse_faults

pytestmark = pytest.mark.anyio

AUTH = (
    "AWS4-HMAC-SHA256 Credential=k/20260101/us-east-1/kinesis/aws4_request, "
    "SignedHeaders=host, Signature=00"
)


def call(operation: str, body: dict[str, Any], *, auth: bool = True) -> dict[str, Any]:
    """Keyword arguments of an httpx request for a Kinesis JSON 1.1 call."""
    headers = {
        "Content-Type": "application/x-amz-json-1.1",
        "X-Amz-Target": f"Kinesis_20131202.{operation}",
    }
    if auth:
        headers["Authorization"] = AUTH
    return {"content": json.dumps(body).encode(), "headers": headers}


async def test_a_producer_writes_through_the_socket() -> None:
    fake = FakeKinesis()
    fake.create_stream("s", shard_count=4)
    async with serve(fake) as local:
        assert local.endpoint_url.startswith("http://127.0.0.1:") and local.port > 0
        async with Producer(
            "s",
            region_name="us-east-1",
            endpoint_url=local.endpoint_url,
            credentials=StaticCredentials("k", "s"),
            config=ProducerConfig(aggregation_enabled=False),
        ) as producer:
            outcomes = [await producer.put(f"r{i}".encode(), f"k{i}") for i in range(300)]
            results = [await o.wait() for o in outcomes]
    assert all(r.ok for r in results)
    stored = {(r.shard_id, r.sequence_number): r.data for r in fake.records("s")}
    assert all(r.shard_id and r.sequence_number for r in results)
    assert len(stored) == 300
    assert {stored[(str(r.shard_id), str(r.sequence_number))] for r in results} == {
        f"r{i}".encode() for i in range(300)
    }


async def test_errors_have_the_service_json_shape() -> None:
    fake = FakeKinesis()
    async with serve(fake) as local, httpx.AsyncClient(base_url=local.endpoint_url) as http:
        missing = await http.post("/", **call("DescribeStreamSummary", {"StreamName": "nope"}))
        assert missing.status_code == 400
        assert missing.headers["content-type"] == "application/x-amz-json-1.1"
        assert missing.json()["__type"] == "ResourceNotFoundException"
        assert missing.headers["x-amzn-requestid"]
        unsigned = await http.post("/", **call("ListShards", {"StreamName": "s"}, auth=False))
        assert unsigned.status_code == 400
        assert unsigned.json()["__type"] == "MissingAuthenticationTokenException"
        unknown = await http.post("/", **call("FlyToTheMoon", {}))
        assert unknown.json()["__type"] == "UnknownOperationException"
        garbage = await http.post(
            "/", content=b"{not json", headers=call("ListShards", {})["headers"]
        )
        assert garbage.status_code == 400
        assert garbage.json()["__type"] == "SerializationException"


async def test_a_cbor_request_is_refused_with_a_hint() -> None:
    fake = FakeKinesis()
    async with serve(fake) as local, httpx.AsyncClient(base_url=local.endpoint_url) as http:
        headers = call("ListStreams", {})["headers"]
        headers["Content-Type"] = "application/x-amz-cbor-1.1"
        answer = await http.post("/", content=b"\xa0", headers=headers)
    assert answer.status_code == 400 and "aws.cborEnabled=false" in answer.text
    assert fake.calls == []


async def test_a_hung_request_ends_with_the_client_and_frees_the_server() -> None:
    fake = FakeKinesis()
    fake.create_stream("s")
    entry = {"StreamName": "s", "Records": [{"Data": "aGk=", "PartitionKey": "k"}]}
    async with serve(fake) as local:
        fake.fail_next(1, "hang_before")
        async with httpx.AsyncClient(base_url=local.endpoint_url, timeout=0.5) as http:
            with pytest.raises(httpx.ReadTimeout):
                await http.post("/", **call("PutRecords", entry))
        # The client hung up: the server's task for that connection ends; the next works.
        async with httpx.AsyncClient(base_url=local.endpoint_url, timeout=5) as http:
            answer = await http.post("/", **call("PutRecords", entry))
        assert answer.status_code == 200 and answer.json()["FailedRecordCount"] == 0
    assert len(fake.records("s")) == 1
    assert [e.kind for e in fake.fault_events] == ["hang_before"]


async def test_a_reset_after_fault_stores_then_resets_the_connection() -> None:
    fake = FakeKinesis()
    fake.create_stream("s")
    entry = {"StreamName": "s", "Records": [{"Data": "aGk=", "PartitionKey": "k"}]}
    async with serve(fake) as local:
        fake.fail_next(1, "reset_after")
        async with httpx.AsyncClient(base_url=local.endpoint_url, timeout=5) as http:
            with pytest.raises((httpx.ReadError, httpx.RemoteProtocolError)):
                await http.post("/", **call("PutRecords", entry))
    assert len(fake.records("s")) == 1  # stored, answer lost: ambiguous, as documented
    assert [e.kind for e in fake.ambiguous_requests] == ["reset_after"]


async def test_a_body_over_the_limit_is_refused_with_413() -> None:
    fake = FakeKinesis(max_request_size=1024)
    async with serve(fake) as local, httpx.AsyncClient(base_url=local.endpoint_url) as http:
        big = {"StreamName": "s", "Records": [{"Data": "A" * 2_000_000, "PartitionKey": "k"}]}
        answer = await http.post("/", **call("PutRecords", big))
    assert answer.status_code == 413
    assert fake.calls == []


async def test_malformed_http_gets_a_400_and_the_server_goes_on() -> None:
    fake = FakeKinesis()
    async with serve(fake) as local:
        stream = await anyio.connect_tcp(local.host, local.port)
        async with stream:
            await stream.send(b"NOT HTTP AT ALL\r\n\r\n")
            reply = b""
            with anyio.move_on_after(5):
                while True:
                    try:
                        reply += await stream.receive()
                    except anyio.EndOfStream:
                        break
        assert reply.startswith(b"HTTP/1.1 400")
        async with httpx.AsyncClient(base_url=local.endpoint_url) as http:
            answer = await http.post("/", **call("ListStreams", {}))
        assert answer.status_code == 200


async def test_tls_with_the_self_signed_certificate(tmp_path: Path) -> None:
    fake = FakeKinesis()
    fake.create_stream("s")
    context, cert = self_signed_context(tmp_path)
    assert cert.exists() and (tmp_path / "local-kinesis-key.pem").stat().st_mode & 0o077 == 0
    async with serve(fake, ssl_context=context) as local:
        assert local.endpoint_url.startswith("https://")
        trusted = ssl.create_default_context(cafile=str(cert))
        async with httpx.AsyncClient(base_url=local.endpoint_url, verify=trusted) as http:
            answer = await http.post("/", **call("ListShards", {"StreamName": "s"}))
        assert answer.status_code == 200 and len(answer.json()["Shards"]) == 1
        async with httpx.AsyncClient(base_url=local.endpoint_url) as http:
            with pytest.raises(httpx.ConnectError):  # not trusted without the certificate
                await http.post("/", **call("ListShards", {"StreamName": "s"}))
    again, cert_again = self_signed_context(tmp_path)  # reused, not regenerated
    assert cert_again.read_bytes() == cert.read_bytes() and again is not context


async def test_a_port_in_use_is_an_error_naming_it() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(OSError, match="in use"):
            async with serve(FakeKinesis(), port=port):
                pass


def test_faults_are_parsed_from_the_command_line() -> None:
    faults = parse_faults(
        "http_500=0.01, throttle_entries=0.05,latency=0.02,seed=7,"
        "fatal=audit:AccessDeniedException,fatal=logs:KMSDisabledException"
    )
    assert faults == Faults(
        http_500=0.01,
        throttle_entries=0.05,
        latency=0.02,
        seed=7,
        fatal={"audit": "AccessDeniedException", "logs": "KMSDisabledException"},
    )
    assert parse_faults("") == Faults()
    for bad, message in [
        ("http_500", "not NAME=VALUE"),
        ("http_500=lots", "not a number"),
        ("http_500=2", "must be a probability"),
        ("boom=0.1", "unknown fault 'boom'"),
        ("seed=1.5", "not an integer"),
        ("fatal=audit", "fatal=STREAM:ERROR_CODE"),
        ("latency=inf", "not finite"),
    ]:
        with pytest.raises(ValueError, match=message):
            parse_faults(bad)
