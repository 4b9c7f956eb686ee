"""The local engine's HTTP server against careless and hostile clients (raw sockets).

Refusals in the service's JSON error shape (malformed HTTP, other methods, Content-Length
with Transfer-Encoding, bodies over the cap) on the socket server and on the in-memory
connections alike; ``Expect: 100-continue``.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass

import anyio
import anyio.abc
import pytest

from kinesis_trio.testing import FakeKinesis
from kinesis_trio.testing._http import FakeTransport, LocalEndpoint, serve

pytestmark = pytest.mark.anyio

AUTH = (
    "AWS4-HMAC-SHA256 Credential=k/20260101/us-east-1/kinesis/aws4_request, "
    "SignedHeaders=host, Signature=00"
)
JSON_TYPE = "application/x-amz-json-1.1"
#: FakeKinesis(max_request_size=CAP_SIZE) refuses bodies over this many bytes
CAP_SIZE = 3 * 1024
BODY_CAP = CAP_SIZE * 4 // 3 + 1024 * 1024


def head(operation: str = "ListStreams", length: int | None = 2, extra: str = "") -> bytes:
    """A Kinesis request's head (``length=None``: no Content-Length)."""
    lines = [
        "POST / HTTP/1.1",
        "Host: local",
        f"Content-Type: {JSON_TYPE}",
        f"X-Amz-Target: Kinesis_20131202.{operation}",
        f"Authorization: {AUTH}",
    ]
    if length is not None:
        lines.append(f"Content-Length: {length}")
    return ("\r\n".join(lines) + "\r\n" + extra + "\r\n").encode()


def post(operation: str = "ListStreams", body: bytes = b"{}") -> bytes:
    return head(operation, len(body)) + body


@dataclass
class Answer:
    status: int
    headers: dict[str, str]
    body: bytes

    def error(self) -> tuple[int, str]:
        """Status and ``__type`` of an answer in the service's JSON error shape (checked)."""
        assert self.headers["content-type"] == JSON_TYPE, self
        assert self.headers["x-amzn-requestid"], self
        document = json.loads(self.body)
        assert set(document) == {"__type", "message"} and document["message"], document
        return self.status, str(document["__type"])


def parse(data: bytes) -> tuple[list[Answer], bytes]:
    """The whole answers at the start of ``data``, and what follows them."""
    answers: list[Answer] = []
    while b"\r\n\r\n" in data:
        raw, _, rest = data.partition(b"\r\n\r\n")
        status_line, *lines = raw.decode("latin-1").split("\r\n")
        fields = [line.partition(":") for line in lines]
        headers = {name.strip().lower(): value.strip() for name, _, value in fields}
        length = int(headers.get("content-length", "0"))
        if len(rest) < length:
            break
        answers.append(Answer(int(status_line.split()[1]), headers, rest[:length]))
        data = rest[length:]
    return answers, data


class Client:
    """A raw connection: bytes out, answers in."""

    def __init__(self, stream: anyio.abc.ByteStream) -> None:
        self.stream = stream
        self.pending = b""

    async def send(self, data: bytes) -> None:
        await self.stream.send(data)

    async def answer(self, within: float = 5) -> Answer:
        with anyio.fail_after(within):
            while True:
                answers, _ = parse(self.pending)
                if answers:
                    first = answers[0]
                    size = self.pending.index(b"\r\n\r\n") + 4 + len(first.body)
                    self.pending = self.pending[size:]
                    return first
                self.pending += await self.stream.receive()

    async def until_closed(self, within: float = 5) -> list[Answer]:
        """Every answer until the server closes the connection (nothing else may come)."""
        with anyio.fail_after(within):
            while True:
                try:
                    self.pending += await self.stream.receive()
                except (anyio.EndOfStream, anyio.BrokenResourceError):
                    break
        answers, rest = parse(self.pending)
        assert rest == b"", rest
        return answers


Connect = Callable[[], Awaitable[Client]]


@asynccontextmanager
async def socket_server(fake: FakeKinesis, **options: float) -> AsyncIterator[Connect]:
    async with serve(fake, **options) as local:  # type: ignore[arg-type]

        async def connect() -> Client:
            return Client(await anyio.connect_tcp(local.host, local.port))

        yield connect


@asynccontextmanager
async def memory_server(fake: FakeKinesis) -> AsyncIterator[Connect]:
    transport = FakeTransport(fake)

    async def connect() -> Client:
        return Client(await transport.open_stream(("http", "local", 80)))

    yield connect


SERVERS = {"socket": socket_server, "memory": memory_server}

#: request bytes -> the refusal's status and error code
MALFORMED = {
    "not-http": (b"NOT HTTP AT ALL\r\n\r\n", 400, "SerializationException"),
    "connect": (
        b"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n",
        405,
        "UnknownOperationException",
    ),
    "get": (b"GET / HTTP/1.1\r\nHost: local\r\n\r\n", 405, "UnknownOperationException"),
    "get-with-body": (
        b"GET / HTTP/1.1\r\nHost: local\r\nContent-Length: 2\r\n\r\n{}",
        405,
        "UnknownOperationException",
    ),
    # RFC 9112 6.1: answer, then close; the bytes after the chunked body are no request.
    "smuggling": (
        head(length=5, extra="Transfer-Encoding: chunked\r\n")
        + b"2\r\n{}\r\n0\r\n\r\n"
        + post("DeleteStream", b'{"StreamName": "s"}'),
        400,
        "SerializationException",
    ),
    "declared-over-the-cap": (head(length=BODY_CAP + 1), 413, "ValidationException"),
    "chunked-over-the-cap": (
        head(length=None, extra="Transfer-Encoding: chunked\r\n")
        + b"%x\r\n%s\r\n" % (BODY_CAP + 1, b"A" * (BODY_CAP + 1)),
        413,
        "ValidationException",
    ),
    "bad-host": (
        post().replace(b"Host: local", b"Host: local:port"),
        400,
        "SerializationException",
    ),
    "gzip-coding": (
        head(length=None, extra="Transfer-Encoding: gzip\r\n"),
        501,
        "SerializationException",
    ),
    "conflicting-lengths": (
        head(extra="Content-Length: 3\r\n") + b"{}",
        400,
        "SerializationException",
    ),
}


@pytest.mark.parametrize("server", SERVERS)
@pytest.mark.parametrize("case", MALFORMED)
async def test_a_malformed_request_is_refused_as_json_and_closed(server: str, case: str) -> None:
    data, status, code = MALFORMED[case]
    fake = FakeKinesis(max_request_size=CAP_SIZE)
    fake.create_stream("s")
    async with SERVERS[server](fake) as connect:
        client = await connect()
        await client.send(data)
        [refusal] = await client.until_closed()  # one answer, then the connection closes
        assert refusal.error() == (status, code)
        assert refusal.headers["connection"] == "close"
        if status == 405:
            assert refusal.headers["allow"] == "POST"
        # Nothing reached the fake (the smuggled DeleteStream least of all); the next works.
        assert fake.calls == [] and "s" in fake.streams
        client = await connect()
        await client.send(post())
        assert (await client.answer()).status == 200


@pytest.mark.parametrize("server", SERVERS)
async def test_expect_100_continue_is_answered_before_the_body(server: str) -> None:
    fake = FakeKinesis()
    async with SERVERS[server](fake) as connect:
        client = await connect()
        await client.send(head(length=2, extra="Expect: 100-continue\r\n"))
        interim = await client.answer(within=0.5)  # curl would wait a second for it
        assert (interim.status, interim.body) == (100, b"")
        await client.send(b"{}")
        answer = await client.answer()
        assert answer.status == 200 and json.loads(answer.body)["StreamNames"] == []
        await client.send(post())  # kept alive
        assert (await client.answer()).status == 200


@pytest.mark.parametrize("server", SERVERS)
async def test_expect_100_continue_over_the_cap_gets_413_at_once(server: str) -> None:
    fake = FakeKinesis(max_request_size=CAP_SIZE)
    async with SERVERS[server](fake) as connect:
        client = await connect()
        await client.send(head(length=BODY_CAP + 1, extra="Expect: 100-continue\r\n"))
        [refusal] = await client.until_closed()  # no 100 Continue before it
        assert refusal.error() == (413, "ValidationException")
        assert refusal.headers["connection"] == "close"
    assert fake.calls == []


def test_the_endpoint_url() -> None:
    assert LocalEndpoint("127.0.0.1", 4567, tls=True).endpoint_url == "https://127.0.0.1:4567"
