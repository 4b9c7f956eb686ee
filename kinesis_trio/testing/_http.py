"""The fake over real HTTP: a local Kinesis any client can use (h11 on anyio sockets).

Each connection is served by one task: h11 parses the requests (HTTP/1.1, keep-alive), each
request body is handed to :meth:`FakeKinesis._handle` as an ``httpx.Request`` and its answer is
written back. While a request is served, the task watches the connection: a client that hangs
up cancels its request (a request the fake leaves unanswered, ``hang_*``, ends that way, as
on a real endpoint). A ``reset_*`` fault closes the connection with a TCP reset.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import struct
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import anyio
import anyio.abc
import anyio.lowlevel
import h11
import httpx
from anyio.streams.tls import TLSListener

from .._logging import get_logger
from ._server import FakeKinesis

__all__ = ["FakeTransport", "LocalEndpoint", "serve"]

_log = get_logger("kinesis_trio.local")
_MAX_HEADERS = 64 * 1024
_READ = 64 * 1024
#: Response headers beside the fake's own (``x-amzn-RequestId``).
_CONTENT_TYPE = "application/x-amz-json-1.1"
_CBOR_HINT = (
    "send JSON (AWS SDK for Java 2.x: -Daws.cborEnabled=false or CBOR_ENABLED=false; "
    "1.x: -Dcom.amazonaws.sdk.disableCbor=true or AWS_CBOR_DISABLE=true)"
)


@dataclass(frozen=True)
class LocalEndpoint:
    """Where a served fake listens: ``endpoint_url`` is what clients are given."""

    host: str
    port: int
    tls: bool

    @property
    def endpoint_url(self) -> str:
        """``http://host:port`` (``https://`` with TLS)."""
        scheme = "https" if self.tls else "http"
        return f"{scheme}://{self.host}:{self.port}"


class _Hangup(Exception):
    """The client closed the connection."""


class _Connection:
    """One client connection: requests in, the fake's answers out, until either side closes."""

    def __init__(self, fake: FakeKinesis, stream: anyio.abc.ByteStream, max_body: int) -> None:
        self.fake = fake
        self.stream = stream
        self.max_body = max_body
        self.h11 = h11.Connection(h11.SERVER, max_incomplete_event_size=_MAX_HEADERS)

    async def _event(self) -> h11.Event | type[h11.PAUSED] | type[h11.NEED_DATA]:
        while True:
            event = self.h11.next_event()
            if event is not h11.NEED_DATA:
                return event
            try:
                data = await self.stream.receive(_READ)
            except (anyio.EndOfStream, anyio.BrokenResourceError, ssl.SSLError, OSError):
                data = b""
            self.h11.receive_data(data)

    async def _send(self, *events: h11.Event) -> None:
        for event in events:
            data = self.h11.send(event)
            if data:
                await self.stream.send(data)

    async def serve(self) -> None:
        try:
            while True:
                event = await self._event()
                if isinstance(event, h11.ConnectionClosed) or event is h11.PAUSED:
                    return
                if not isinstance(event, h11.Request):
                    return
                response = await self._request(event)
                if response is None:  # reset, hung up, or a body too large: connection gone
                    return
                await self._send(*response)
                if self.h11.our_state is h11.MUST_CLOSE:
                    return
                self.h11.start_next_cycle()
        except h11.RemoteProtocolError as exc:
            with contextlib.suppress(h11.LocalProtocolError, anyio.BrokenResourceError, OSError):
                await self._send(*_plain(exc.error_status_hint, f"bad HTTP request: {exc}"))
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, ssl.SSLError, OSError):
            return

    async def _request(self, head: h11.Request) -> list[h11.Event] | None:
        chunks: list[bytes] = []
        size = 0
        while True:
            event = await self._event()
            if isinstance(event, h11.Data):
                size += len(event.data)
                if size > self.max_body:
                    return _plain(413, f"request body over {self.max_body:,} bytes")
                chunks.append(event.data)
            elif isinstance(event, h11.EndOfMessage):
                break
            else:  # the client went away mid-request
                return None
        request = _to_request(head, b"".join(chunks))
        if isinstance(request, list):
            return request
        try:
            response = await self._answer(request)
        except _Hangup:
            return None
        except httpx.ReadError:  # the fake's reset_* faults: drop the connection with a RST
            self._reset()
            return None
        return _events(response)

    async def _answer(self, request: httpx.Request) -> httpx.Response:
        """The fake's answer; a client that hangs up meanwhile cancels it (``_Hangup``)."""
        answer: list[httpx.Response] = []
        failure: list[BaseException] = []
        hung_up = False

        async def handle(scope: anyio.CancelScope) -> None:
            try:
                answer.append(await self.fake._handle(request))
            except Exception as exc:  # reported to the caller below
                failure.append(exc)
            scope.cancel()

        async with anyio.create_task_group() as tg:
            tg.start_soon(handle, tg.cancel_scope)
            # Watch for a hang-up; bytes a client pipelines meanwhile are kept for h11.
            while True:
                try:
                    data = await self.stream.receive(_READ)
                except (anyio.EndOfStream, anyio.BrokenResourceError, ssl.SSLError, OSError):
                    hung_up = True
                    tg.cancel_scope.cancel()
                    break
                self.h11.receive_data(data)
        if failure:
            raise failure[0]
        if hung_up and not answer:
            raise _Hangup
        if hung_up:
            self.h11.receive_data(b"")
        return answer[0]

    def _reset(self) -> None:
        raw = self.stream.extra(anyio.abc.SocketAttribute.raw_socket, None)
        if raw is not None:
            with contextlib.suppress(OSError):
                raw.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


def _to_request(head: h11.Request, content: bytes) -> httpx.Request | list[h11.Event]:
    """The request h11 read, as the fake's handler takes it (or the answer refusing it)."""
    headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in head.headers]
    if any(k.lower() == "content-type" and "cbor" in v.lower() for k, v in headers):
        # The Java SDKs send CBOR to Kinesis by default; this engine speaks JSON 1.1 only.
        _log.warning("local_kinesis_cbor_refused", hint=_CBOR_HINT)
        return _plain(400, f"CBOR is not supported: {_CBOR_HINT}")
    host = next((v for k, v in headers if k.lower() == "host"), "localhost")
    return httpx.Request(
        head.method.decode("ascii"),
        f"http://{host}{head.target.decode('latin-1')}",
        headers=headers,
        content=content,
    )


def _events(response: httpx.Response) -> list[h11.Event]:
    body = response.content
    headers = [
        (k, v)
        for k, v in response.headers.items()
        if k.lower() not in ("content-length", "content-type", "transfer-encoding")
    ]
    headers += [("Content-Type", _CONTENT_TYPE), ("Content-Length", str(len(body)))]
    return [
        h11.Response(status_code=response.status_code, headers=headers),
        h11.Data(data=body),
        h11.EndOfMessage(),
    ]


def _plain(status: int, text: str) -> list[h11.Event]:
    body = text.encode() + b"\n"
    return [
        h11.Response(
            status_code=status,
            headers=[
                ("Content-Type", "text/plain"),
                ("Content-Length", str(len(body))),
                ("Connection", "close"),
            ],
        ),
        h11.Data(data=body),
        h11.EndOfMessage(),
    ]


@contextlib.asynccontextmanager
async def serve(
    fake: FakeKinesis,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    ssl_context: ssl.SSLContext | None = None,
) -> AsyncIterator[LocalEndpoint]:
    """Serve ``fake`` over HTTP (HTTPS with ``ssl_context``) until the block exits.

    ``port=0`` picks a free port; the :class:`LocalEndpoint` yielded says which. Runs on trio
    and on asyncio, in the caller's event loop::

        fake = FakeKinesis()
        fake.create_stream("orders", shard_count=2)
        async with serve(fake) as local:
            ...  # any Kinesis client at local.endpoint_url (boto3, the AWS CLI, a Producer)
    """
    listener: anyio.abc.Listener[anyio.abc.ByteStream]
    tcp = await anyio.create_tcp_listener(local_host=host, local_port=port)
    bound = tcp.extra(anyio.abc.SocketAttribute.local_port)
    listener = (
        tcp if ssl_context is None else TLSListener(tcp, ssl_context, standard_compatible=False)
    )
    # A whole PutRecords request of the fake's largest size, base64 and JSON around it.
    max_body = fake.max_request_size * 4 // 3 + 1024 * 1024

    async def handle(stream: anyio.abc.ByteStream) -> None:
        async with stream:
            try:
                await _Connection(fake, stream, max_body).serve()
            except Exception:  # one connection's bug must not stop the server
                _log.exception("local_kinesis_connection_failed")

    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(_serve_forever, listener, handle)
        try:
            yield LocalEndpoint(host, bound, ssl_context is not None)
        finally:
            tg.cancel_scope.cancel()


async def _serve_forever(
    listener: anyio.abc.Listener[anyio.abc.ByteStream],
    handle: Callable[[anyio.abc.ByteStream], Awaitable[None]],
) -> None:
    await listener.serve(handle)


class FakeTransport(httpx.AsyncBaseTransport):
    """The fake as a transport (``FakeKinesis.transport()``).

    The package's clients open in-memory connections with it (:meth:`open_stream`): their
    own pool and h11 framing write each request as bytes, and the fake's h11 server at the
    far end reads it and writes its answer as bytes, as over a socket, so in-process tests
    run the same HTTP path as a real endpoint. Any other httpx client calls the fake
    directly (:meth:`handle_async_request`, as ``httpx.MockTransport`` would).
    """

    def __init__(self, fake: FakeKinesis) -> None:
        self._fake = fake
        #: connections opened (tests count them)
        self.opened = 0

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """The fake's answer to ``request``; a ``reset_*`` fault raises ``httpx.ReadError``."""
        await request.aread()
        return await self._fake._handle(request)

    async def open_stream(self, origin: tuple[str, str, int]) -> anyio.abc.ByteStream:
        """A new in-memory connection to the fake."""
        await anyio.lowlevel.checkpoint()
        self.opened += 1
        max_body = self._fake.max_request_size * 4 // 3 + 1024 * 1024
        return _MemoryConnection(self._fake, max_body)


class _MemoryConnection(anyio.abc.ByteStream):
    """One in-memory connection: the bytes the client sends go into the fake's h11 server;
    the client's ``receive`` runs the server (in the client's task) until it has answer
    bytes. A request the client has not finished sending, or a ``hang_*`` fault, waits
    until the client gives up (its deadline), as a real endpoint would."""

    def __init__(self, fake: FakeKinesis, max_body: int) -> None:
        self._fake = fake
        self._max_body = max_body
        self._server = h11.Connection(h11.SERVER, max_incomplete_event_size=_MAX_HEADERS)
        self._out = bytearray()
        self._eof = False  # the server closed its side (after what is in ``_out``)
        self._reset = False  # the server reset the connection
        self._closed = False  # the client closed it

    async def send(self, item: bytes) -> None:
        await anyio.lowlevel.checkpoint()
        if self._closed:
            raise anyio.ClosedResourceError
        if self._reset or self._eof:
            raise anyio.BrokenResourceError
        self._server.receive_data(bytes(item))

    async def receive(self, max_bytes: int = 65536) -> bytes:
        await anyio.lowlevel.checkpoint()
        while not self._out:
            if self._closed:
                raise anyio.ClosedResourceError
            if self._reset:
                raise anyio.BrokenResourceError("connection reset by the fake")
            if self._eof:
                raise anyio.EndOfStream
            await self._serve()
        chunk = bytes(self._out[:max_bytes])
        del self._out[:max_bytes]
        return chunk

    async def send_eof(self) -> None:
        self._server.receive_data(b"")

    async def aclose(self) -> None:
        self._closed = True

    async def _serve(self) -> None:
        """Read one request and write its answer (or close, or reset)."""
        server = self._server
        try:
            if server.our_state is h11.DONE and server.their_state is h11.DONE:
                server.start_next_cycle()
            head = self._next(server)
            if head is None:
                await anyio.sleep_forever()  # the client waits on a request it never ended
            if isinstance(head, h11.ConnectionClosed) or not isinstance(head, h11.Request):
                self._eof = True
                return
            chunks: list[bytes] = []
            size = 0
            while True:
                event = self._next(server)
                if event is None:
                    await anyio.sleep_forever()
                if isinstance(event, h11.Data):
                    size += len(event.data)
                    if size > self._max_body:
                        self._write(_plain(413, f"request body over {self._max_body:,} bytes"))
                        return
                    chunks.append(event.data)
                elif isinstance(event, h11.EndOfMessage):
                    break
                else:
                    self._eof = True
                    return
            request = _to_request(head, b"".join(chunks))
            if isinstance(request, list):
                self._write(request)
                return
            try:
                response = await self._fake._handle(request)
            except httpx.ReadError:  # a reset_* fault
                self._reset = True
                return
            self._write(_events(response))
        except h11.RemoteProtocolError as exc:
            self._write(_plain(exc.error_status_hint, f"bad HTTP request: {exc}"))
        except h11.LocalProtocolError:  # an answer h11 refuses to write: hang up
            self._eof = True

    @staticmethod
    def _next(server: h11.Connection) -> h11.Event | None:
        event = server.next_event()
        if event is h11.NEED_DATA or event is h11.PAUSED:
            return None
        return event  # type: ignore[return-value]

    def _write(self, events: list[h11.Event]) -> None:
        server = self._server
        for event in events:
            self._out += server.send(event) or b""
        if server.our_state is h11.MUST_CLOSE:
            self._eof = True


def self_signed_context(directory: Path, host: str = "localhost") -> tuple[ssl.SSLContext, Path]:
    """A server TLS context with a self-signed certificate for ``host``, 127.0.0.1 and ::1.

    The certificate and key are written to ``directory`` (reused when present); the
    certificate's path is returned for clients to trust (``AWS_CA_BUNDLE``, ``verify=``).
    """
    cert, key = directory / "local-kinesis-cert.pem", directory / "local-kinesis-key.pem"
    if not (cert.exists() and key.exists()):
        directory.mkdir(parents=True, exist_ok=True)
        _write_certificate(cert, key, host)
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    return context, cert


def _write_certificate(cert: Path, key: Path, host: str) -> None:
    try:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID
    except ImportError as exc:
        raise RuntimeError(
            "--tls needs the 'cryptography' package to make a self-signed certificate: "
            "pip install 'kinesis-trio[local-tls]'"
        ) from exc
    import datetime
    import ipaddress

    private = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host)])
    now = datetime.datetime.now(datetime.timezone.utc)
    alt = x509.SubjectAlternativeName(
        [
            x509.DNSName(host),
            x509.DNSName("localhost"),
            x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
            x509.IPAddress(ipaddress.ip_address("::1")),
        ]
    )
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(private.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=825))
        .add_extension(alt, critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(private, hashes.SHA256())
    )
    key.write_bytes(
        private.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    key.chmod(0o600)
    cert.write_bytes(certificate.public_bytes(serialization.Encoding.PEM))
