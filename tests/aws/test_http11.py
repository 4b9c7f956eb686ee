"""The connection pool (``_http11``, h11 framing) against scripted servers on loopback sockets.

Each server reads one request head and body per exchange and writes the bytes a test gives
it, so every framing (length, chunked, read to close), every way an answer can be broken and
every reason not to reuse a connection is exercised on a real socket, on trio and asyncio.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import anyio.abc
import httpx
import pytest

from kinesis_trio._aws._http11 import Fields, Http11Pool, Origin
from tests.support.helpers import wait_until_async

pytestmark = pytest.mark.anyio

Answer = tuple[int, Fields, bytes]


def whole(status: int, fields: Fields, content: bytes) -> Answer:
    """The answer as it came (the ``read`` of a caller that takes any answer)."""
    return status, fields, content


async def post(pool: Http11Pool, origin: Origin, headers: dict[str, str], body: bytes) -> Answer:
    return await pool.post(origin, "/", headers, body, whole)


OK = b"HTTP/1.1 200 OK\r\nContent-Type: application/x-amz-json-1.1\r\nContent-Length: 2\r\n\r\n{}"

#: an answer ending with this is written without it, then the server closes the connection
CLOSE = b"\x00CLOSE"


@dataclass
class Server:
    origin: Origin
    connections: int = 0
    requests: list[bytes] = field(default_factory=list)


async def _read_request(stream: anyio.abc.SocketStream, buffer: bytearray) -> bytes | None:
    """One request (head and Content-Length body) from the stream; None at its end."""
    while b"\r\n\r\n" not in buffer:
        try:
            buffer += await stream.receive()
        except (anyio.EndOfStream, anyio.BrokenResourceError):
            return None
    end = buffer.index(b"\r\n\r\n") + 4
    head = bytes(buffer[:end])
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":", 1)[1])
    while len(buffer) < end + length:
        buffer += await stream.receive()
    request = bytes(buffer[: end + length])
    del buffer[: end + length]
    return request


@asynccontextmanager
async def serve(answer: Callable[[int, int], bytes | None]) -> AsyncIterator[Server]:
    """A server that answers request *j* on connection *i* with ``answer(i, j)``.

    ``None`` closes the connection without answering, ``b"hang"`` never answers, and an
    answer ending with ``CLOSE`` is followed by a close."""
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    server = Server(("http", "127.0.0.1", port))

    async def handle(stream: anyio.abc.SocketStream) -> None:
        index = server.connections
        server.connections += 1
        buffer = bytearray()
        async with stream:
            for j in range(1000):
                request = await _read_request(stream, buffer)
                if request is None:
                    return
                server.requests.append(request)
                out = answer(index, j)
                if out is None:
                    return
                if out == b"hang":
                    await anyio.sleep_forever()
                if out.endswith(CLOSE):
                    await stream.send(out[: -len(CLOSE)])
                    return
                await stream.send(out)

    async with anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, handle)
        try:
            yield server
        finally:
            tg.cancel_scope.cancel()


async def test_an_answer_with_a_length_and_the_connection_kept() -> None:
    async with serve(lambda i, j: OK) as server, Http11Pool() as pool:
        for _ in range(3):
            status, fields, content = await post(pool, server.origin, {"A": "b"}, b"xyz")
            assert (status, content) == (200, b"{}")
            assert (b"content-type", b"application/x-amz-json-1.1") in fields
    assert server.connections == 1
    assert server.requests[0].startswith(
        b"POST / HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nA: b\r\nContent-Length: 3\r\n" % server.origin[2]
    )
    assert server.requests[0].endswith(b"\r\n\r\nxyz")


async def test_a_large_body_is_sent_whole() -> None:
    body = bytes(range(256)) * 4096  # 1 MiB, written apart from the head
    async with serve(lambda i, j: OK) as server, Http11Pool() as pool:
        assert (await post(pool, server.origin, {}, body))[0] == 200
    assert server.requests[0].endswith(b"\r\n\r\n" + body)


async def test_a_chunked_answer_with_extensions_and_a_trailer() -> None:
    answer = (
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"3;name=value\r\nabc\r\nA\r\n0123456789\r\n0\r\nX-Trailer: 1\r\n\r\n"
    )
    async with serve(lambda i, j: answer) as server, Http11Pool() as pool:
        for _ in range(2):
            assert (await post(pool, server.origin, {}, b""))[2] == b"abc0123456789"
    assert server.connections == 1


async def test_an_answer_without_a_length_ends_at_close_and_is_not_reused() -> None:
    answer = b"HTTP/1.1 200 OK\r\n\r\nall of it" + CLOSE
    async with serve(lambda i, j: answer) as server, Http11Pool() as pool:
        for _ in range(2):
            assert (await post(pool, server.origin, {}, b""))[2] == b"all of it"
    assert server.connections == 2


async def test_connection_close_is_honoured() -> None:
    answer = b"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 2\r\n\r\n{}"
    async with serve(lambda i, j: answer) as server, Http11Pool() as pool:
        for _ in range(3):
            assert (await post(pool, server.origin, {}, b""))[0] == 200
    assert server.connections == 3


async def test_http_1_0_closes_even_when_kept_alive() -> None:
    """h11 keeps no HTTP/1.0 connection alive (its ``_keep_alive``: below 1.1, close)."""
    closing = b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\n{}"
    kept = b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 2\r\n\r\n{}"
    for answer in (closing, kept):
        async with serve(lambda i, j, a=answer: a) as server, Http11Pool() as pool:  # type: ignore[misc]
            for _ in range(2):
                await post(pool, server.origin, {}, b"")
        assert server.connections == 2


async def test_an_interim_answer_is_skipped() -> None:
    answer = b"HTTP/1.1 100 Continue\r\n\r\n" + OK
    async with serve(lambda i, j: answer) as server, Http11Pool() as pool:
        assert await post(pool, server.origin, {}, b"") == (
            200,
            [(b"content-type", b"application/x-amz-json-1.1"), (b"content-length", b"2")],
            b"{}",
        )


async def test_an_error_status_is_an_answer() -> None:
    answer = b"HTTP/1.1 500 Internal Server Error\r\nContent-Length: 4\r\n\r\noops"
    async with serve(lambda i, j: answer) as server, Http11Pool() as pool:
        assert (await post(pool, server.origin, {}, b""))[::2] == (500, b"oops")


@pytest.mark.parametrize(
    ("answer", "message"),
    [
        (b"HTTP/1.1 2OO OK\r\n\r\n", "malformed answer"),
        (b"SMTP 200 OK\r\n\r\n", "malformed answer"),
        (b"HTTP/1.1 200 OK\r\nno colon\r\n\r\n", "malformed answer"),
        (b"HTTP/1.1 200 OK\r\n folded: x\r\n\r\n", "malformed answer"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", "bad Content-Length"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: " + b"9" * 5000 + b"\r\n\r\n", "Content-Length"),
        (
            b"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab",
            "conflicting Content-Length",
        ),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", "Transfer-Encoding"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, chunked\r\n\r\n0\r\n\r\n", "chunked"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "chunk header"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0x2\r\n{}\r\n0\r\n\r\n", "chunk"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0_2\r\n{}\r\n0\r\n\r\n", "chunk"),
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\x0b2\r\n{}\r\n0\r\n\r\n", "chunk"),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabXY0\r\n\r\n",
            "malformed answer",
        ),
        (b"HTTP/1.1 200 OK\r\nX: a\x00b\r\nContent-Length: 2\r\n\r\n{}", "header"),
        (b"HTTP/1.1 200 OK\r\nX: a\rb\r\nContent-Length: 2\r\n\r\n{}", "header"),
        (b"HTTP/1.1 099 Odd\r\n\r\n" + OK, "status_code"),
        (b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\n\r\n", "malformed answer"),
        (b"HTTP/1.1 200 OK\r\nX: " + b"a" * 600_000 + b"\r\n\r\n", "malformed answer"),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 99999999999\r\n\r\n" + CLOSE, "more than"),
        (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n200000\r\n"
            + b"x" * 1_100_000
            + CLOSE,
            "more than",
        ),
    ],
)
async def test_a_malformed_answer_is_a_protocol_error(answer: bytes, message: str) -> None:
    async with serve(lambda i, j: answer) as server, Http11Pool(max_body=1 << 20) as pool:
        with pytest.raises(httpx.RemoteProtocolError, match=message):
            await post(pool, server.origin, {}, b"")
        # the broken connection is not reused: a good answer next comes on a new one
    assert pool._idle == []


@pytest.mark.parametrize(
    "answer",
    [
        None,
        b"HTTP/1.1 200 OK\r\nContent-Le",
        b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n12345",
        b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab",
        b"HTTP/1.1 100 Continue\r\n\r\n",  # a final 1xx: the server closes after it
    ],
)
async def test_a_truncated_answer_is_a_protocol_error(answer: bytes | None) -> None:
    async def cut(stream: anyio.abc.SocketStream) -> None:
        async with stream:
            buffer = bytearray()
            await _read_request(stream, buffer)
            if answer is not None:
                await stream.send(answer)

    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    async with anyio.create_task_group() as tg, Http11Pool() as pool:
        tg.start_soon(listener.serve, cut)
        with pytest.raises(httpx.RemoteProtocolError, match="malformed answer"):
            await post(pool, ("http", "127.0.0.1", port), {}, b"")
        tg.cancel_scope.cancel()


async def test_close_then_keep_alive_closes() -> None:
    """RFC 9112 §9.6: a ``close`` connection option means the client MUST close, whatever
    else the field lines say."""
    answer = (
        b"HTTP/1.1 200 OK\r\nConnection: close\r\nConnection: keep-alive\r\n"
        b"Content-Length: 2\r\n\r\n{}"
    )
    async with serve(lambda i, j: answer) as server, Http11Pool() as pool:
        for _ in range(2):
            assert (await post(pool, server.origin, {}, b""))[2] == b"{}"
    assert server.connections == 2


async def test_a_204_with_a_body_has_none_and_retires_the_connection() -> None:
    answer = b"HTTP/1.1 204 No Content\r\nContent-Length: 2\r\n\r\n{}"
    async with serve(lambda i, j: answer) as server, Http11Pool() as pool:
        for _ in range(2):
            assert (await post(pool, server.origin, {}, b""))[::2] == (204, b"")
    assert server.connections == 2


async def test_an_answer_the_reader_refuses_closes_the_connection() -> None:
    def refuse(status: int, fields: Fields, content: bytes) -> Answer:
        raise ValueError("not for us")

    async with serve(lambda i, j: OK) as server, Http11Pool() as pool:
        with pytest.raises(ValueError, match="not for us"):
            await pool.post(server.origin, "/", {}, b"", refuse)
        assert pool._idle == []
        assert (await post(pool, server.origin, {}, b""))[0] == 200
    assert server.connections == 2


async def test_bytes_after_the_answer_retire_the_connection() -> None:
    async with serve(lambda i, j: OK + b"HTTP/1.1 200 OK\r\n") as server, Http11Pool() as pool:
        for _ in range(2):
            assert (await post(pool, server.origin, {}, b""))[2] == b"{}"
    assert server.connections == 2


async def test_an_idle_connection_the_server_closed_is_dropped_when_taken() -> None:
    # the server answers with a length (so the client keeps the connection), then hangs up
    async with serve(lambda i, j: OK + CLOSE) as server, Http11Pool() as pool:
        await post(pool, server.origin, {}, b"")
        (conn,) = pool._idle
        await wait_until_async(conn.stale, timeout=5, what="the idle connection to go stale")
        assert (await post(pool, server.origin, {}, b""))[0] == 200
    assert server.connections == 2


async def test_refused_connection_is_a_connect_error() -> None:
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    await listener.aclose()  # nothing listens there now
    async with Http11Pool() as pool:
        with pytest.raises(httpx.ConnectError):
            await post(pool, ("http", "127.0.0.1", port), {}, b"")


async def test_a_full_pool_times_out_as_a_pool_timeout() -> None:
    async with (
        serve(lambda i, j: b"hang") as server,
        Http11Pool(max_connections=1, pool_timeout=0.05) as pool,
        anyio.create_task_group() as tg,
    ):
        tg.start_soon(post, pool, server.origin, {}, b"")
        await wait_until_async(
            lambda: len(server.requests) == 1, timeout=5, what="the first request at the server"
        )
        with pytest.raises(httpx.PoolTimeout):
            await post(pool, server.origin, {}, b"")
        tg.cancel_scope.cancel()


async def test_a_cancelled_exchange_closes_its_connection() -> None:
    answers = iter([b"hang", OK])
    async with serve(lambda i, j: next(answers)) as server, Http11Pool() as pool:
        async with anyio.create_task_group() as tg:
            tg.start_soon(post, pool, server.origin, {}, b"")
            await wait_until_async(  # sent, and hanging
                lambda: len(server.requests) == 1, timeout=5, what="the request at the server"
            )
            tg.cancel_scope.cancel()
        assert pool._idle == []
        assert (await post(pool, server.origin, {}, b""))[0] == 200
    assert server.connections == 2


async def test_a_line_break_in_a_header_is_refused_before_sending() -> None:
    async with serve(lambda i, j: OK) as server, Http11Pool() as pool:
        with pytest.raises(httpx.LocalProtocolError, match="header"):
            await post(pool, server.origin, {"X": "a\r\nInjected: 1"}, b"")
    assert server.requests == []


async def test_the_pool_is_an_httpx_transport() -> None:
    async with serve(lambda i, j: OK) as server, Http11Pool() as pool:
        url = f"http://127.0.0.1:{server.origin[2]}/path?q=1"
        async with httpx.AsyncClient(transport=pool) as client:
            response = await client.post(url, content=b"hi")
            assert (response.status_code, response.text) == (200, "{}")
            assert response.headers["content-type"] == "application/x-amz-json-1.1"
            with pytest.raises(httpx.UnsupportedProtocol):
                await client.get(url)
    assert server.requests[0].startswith(b"POST /path?q=1 HTTP/1.1\r\n")


async def test_the_client_over_tls_reuses_one_verified_connection(tmp_path: Path) -> None:
    from kinesis_trio import KinesisClient, StaticCredentials
    from kinesis_trio._errors import ConnectError
    from kinesis_trio.testing import FakeKinesis
    from kinesis_trio.testing._http import self_signed_context
    from kinesis_trio.testing._http import serve as serve_fake

    fake = FakeKinesis()
    fake.create_stream("s")
    context, cert = self_signed_context(tmp_path)
    creds = StaticCredentials("a", "b")
    async with serve_fake(fake, ssl_context=context) as local:
        url = local.endpoint_url
        async with KinesisClient(
            region_name="us-east-1", endpoint_url=url, credentials=creds, verify=str(cert)
        ) as client:
            for _ in range(3):
                assert len(await client.list_shards("s")) == 1
            assert client._pool is not None and len(client._pool._idle) == 1
        async with KinesisClient(region_name="us-east-1", endpoint_url=url, credentials=creds) as c:
            with pytest.raises(ConnectError, match="CERTIFICATE_VERIFY_FAILED"):
                await c.list_shards("s")  # the default CA bundle does not trust it


async def test_an_answer_read_to_close_is_bounded() -> None:
    answer = b"HTTP/1.1 200 OK\r\n\r\n" + b"x" * 20 + CLOSE
    async with serve(lambda i, j: answer) as server, Http11Pool(max_body=10) as pool:
        with pytest.raises(httpx.RemoteProtocolError, match="more than 10 bytes"):
            await post(pool, server.origin, {}, b"")


async def test_a_ca_bundle_is_not_read_for_an_http_endpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``verify=PATH`` and ``AWS_CA_BUNDLE`` are not read by a client of an ``http`` endpoint
    (a local engine), which never opens a TLS connection (a bundle of the system's CAs costs
    tens of milliseconds of a cold start)."""
    from kinesis_trio import KinesisClient, StaticCredentials
    from kinesis_trio.testing import FakeKinesis
    from kinesis_trio.testing._http import self_signed_context
    from kinesis_trio.testing._http import serve as serve_fake

    fake = FakeKinesis()
    fake.create_stream("s")
    _, cert = self_signed_context(tmp_path)
    creds = StaticCredentials("a", "b")
    async with serve_fake(fake) as local:
        for env in (False, True):
            if env:
                monkeypatch.setenv("AWS_CA_BUNDLE", str(cert))
            verify = True if env else str(cert)
            async with KinesisClient(
                region_name="us-east-1",
                endpoint_url=local.endpoint_url,
                credentials=creds,
                verify=verify,
            ) as client:
                assert len(await client.list_shards("s")) == 1
                assert client._pool is not None and client._pool._ssl is None


def test_a_ca_bundle_that_does_not_exist_is_refused_at_creation(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from kinesis_trio import KinesisClient, StaticCredentials

    missing = str(tmp_path / "missing.pem")
    creds = StaticCredentials("a", "b")
    url = "http://127.0.0.1:9"
    with pytest.raises(FileNotFoundError, match=r"CA bundle .*missing\.pem.* does not exist"):
        KinesisClient(region_name="us-east-1", endpoint_url=url, credentials=creds, verify=missing)
    monkeypatch.setenv("AWS_CA_BUNDLE", missing)
    with pytest.raises(FileNotFoundError, match="AWS_CA_BUNDLE"):
        KinesisClient(region_name="us-east-1", endpoint_url=url, credentials=creds)


def test_a_bad_ca_bundle_is_refused_at_creation_for_calls_over_tls(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A client whose calls go over TLS (an ``https`` endpoint, botocore's rules) reads its
    bundle when it is made, so a file that holds no certificate fails there, not at each
    call; a client of an ``http`` endpoint does not read it."""
    import ssl

    from kinesis_trio import KinesisClient, StaticCredentials

    monkeypatch.delenv("AWS_ENDPOINT_URL", raising=False)
    monkeypatch.delenv("AWS_ENDPOINT_URL_KINESIS", raising=False)
    bad = tmp_path / "bad.pem"
    bad.write_text("not a certificate\n")
    creds = StaticCredentials("a", "b")
    for url in ("https://127.0.0.1:9", None):
        with pytest.raises(ssl.SSLError):
            KinesisClient(
                region_name="us-east-1", endpoint_url=url, credentials=creds, verify=str(bad)
            )
    client = KinesisClient(
        region_name="us-east-1",
        endpoint_url="http://127.0.0.1:9",
        credentials=creds,
        verify=str(bad),
    )
    assert client._pool is not None and client._pool._ssl is None
