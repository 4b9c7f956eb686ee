"""The fake over real HTTP: a local Kinesis any client can use (h11 on anyio sockets).

Each connection is served by one task: h11 parses the requests (HTTP/1.1, keep-alive), each
request body is handed to :meth:`FakeKinesis._handle` as an ``httpx.Request`` and its answer is
written back. While a request is served, the task watches the connection: a client that hangs
up cancels its request (a request the fake leaves unanswered, ``hang_*``, ends that way, as
on a real endpoint). A ``reset_*`` fault closes the connection with a TCP reset.

The framing rules (which requests are refused and how, in the service's JSON error shape)
are the sans-IO :class:`~kinesis_trio.testing._framing._Exchange`, which the in-memory
:class:`FakeTransport` drives too. Sockets add one: a request not received whole within
``request_timeout`` gets 408 ``RequestTimeoutException`` and the connection is closed.
"""

from __future__ import annotations

import contextlib
import errno
import math
import os
import socket
import ssl
import struct
from collections.abc import AsyncIterator, Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import anyio.abc
import anyio.lowlevel
import h11
import httpx
from anyio.streams.tls import TLSStream

from .._logging import get_logger
from ._framing import FakeTransport, _Exchange, _max_body
from ._server import FakeKinesis

__all__ = ["FakeTransport", "LocalEndpoint", "serve"]

_log = get_logger("kinesis_trio.local")
_READ = 64 * 1024
#: After a refusal, how long the server reads (and drops) what the client still sends before
#: closing: closing with unread bytes would reset the connection, and a client still writing
#: its body could lose the answer. At most this, or ``request_timeout`` if shorter.
_LINGER = 2.0
#: ``accept()`` out of a resource (file descriptors, kernel memory): retry after this,
#: doubling up to ``_ACCEPT_BACKOFF_MAX``, and log again at most every ``_ACCEPT_LOG_EVERY``.
_ACCEPT_BACKOFF = 0.1
#: the retry after closing an idle connection to free a descriptor (time for it to close)
_ACCEPT_RETRY_FREED = 0.005
_ACCEPT_BACKOFF_MAX = 1.0
_ACCEPT_LOG_EVERY = 10.0
_ACCEPT_RESOURCE_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM})
#: ``accept()`` errors about one connection (it went away before it was accepted): next.
_ACCEPT_IGNORED_ERRNOS = frozenset({errno.ECONNABORTED, errno.EPROTO})


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

    def __init__(
        self,
        fake: FakeKinesis,
        stream: anyio.abc.ByteStream,
        max_body: int,
        *,
        request_timeout: float = math.inf,
        idle_timeout: float = math.inf,
        idle: dict[_Connection, anyio.CancelScope] | None = None,
    ) -> None:
        self.fake = fake
        #: the server's connections waiting between requests (oldest first), each with the
        #: scope of its wait: cancelling it closes the connection
        self.idle = idle if idle is not None else {}
        self.stream = stream
        self.exchange = _Exchange(fake, max_body)
        self.request_timeout = request_timeout
        self.idle_timeout = idle_timeout
        self._started: float | None = None  # when the request being read began to arrive

    async def serve(self) -> None:
        exchange = self.exchange
        try:
            while True:
                step = exchange.next()
                if step is None:
                    return
                if step is h11.NEED_DATA:
                    if not await self._receive():  # stalled (408) or idle (closed)
                        refusal = exchange.timed_out()
                        if refusal:
                            await self._send(refusal)
                            await self._linger()
                        return
                    continue
                if isinstance(step, bytes):
                    await self._send(step)
                    if exchange.closing:
                        await self._linger()
                        return
                    if not exchange.reading_body:  # an answer (not a 100 Continue)
                        self._started = None
                    continue
                assert isinstance(step, httpx.Request)
                self._started = None
                try:
                    response = await self._answer(step)
                except _Hangup:
                    return
                except httpx.ReadError:  # the fake's reset_* faults: drop with a RST
                    self._reset()
                    return
                await self._send(exchange.answer(response))
                if exchange.closing:
                    return
        except (
            anyio.BrokenResourceError,
            anyio.ClosedResourceError,
            ssl.SSLError,
            TimeoutError,  # an answer the client did not read in time
            OSError,
        ):
            return

    async def _receive(self) -> bool:
        """Feed the exchange the next bytes (``b""`` at the client's end); False: timed out."""
        now = anyio.current_time()
        if self.exchange.mid_request:
            if self._started is None:  # a pipelined request, already partly here
                self._started = now
            deadline = self._started + self.request_timeout
        else:
            self._started = None
            deadline = now + self.idle_timeout
        with anyio.move_on_after(deadline - now) as scope:
            waiting = not self.exchange.mid_request
            if waiting:
                self.idle[self] = scope
            try:
                data = await self.stream.receive(_READ)
            except (anyio.EndOfStream, anyio.BrokenResourceError, ssl.SSLError, OSError):
                data = b""
            finally:
                if waiting:
                    self.idle.pop(self, None)
            if self._started is None:
                self._started = anyio.current_time()
            self.exchange.receive_data(data)
            return True
        return False

    async def _send(self, data: bytes) -> None:
        """Write ``data``; a client that does not read it within ``request_timeout`` is
        dropped."""
        if not data:
            return
        with anyio.fail_after(self.request_timeout):
            await self.stream.send(data)

    async def _linger(self) -> None:
        """After a refusal: end our side, then drop what the client still sends (briefly)."""
        transport = self.stream.transport_stream if isinstance(self.stream, TLSStream) else None
        with contextlib.suppress(Exception):
            await (transport or self.stream).send_eof()
        with anyio.move_on_after(min(_LINGER, self.request_timeout)):
            with contextlib.suppress(
                anyio.EndOfStream, anyio.BrokenResourceError, ssl.SSLError, OSError
            ):
                while await self.stream.receive(_READ):
                    pass

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
                if self._started is None:
                    self._started = anyio.current_time()
                self.exchange.receive_data(data)
        if failure:
            raise failure[0]
        if hung_up and not answer:
            raise _Hangup
        if hung_up:
            self.exchange.receive_data(b"")
        return answer[0]

    def _reset(self) -> None:
        raw = self.stream.extra(anyio.abc.SocketAttribute.raw_socket, None)
        if raw is not None:
            with contextlib.suppress(OSError):
                raw.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))


@contextlib.asynccontextmanager
async def serve(
    fake: FakeKinesis,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    ssl_context: ssl.SSLContext | None = None,
    max_connections: int = 1024,
    request_timeout: float = 30.0,
    idle_timeout: float = 300.0,
) -> AsyncIterator[LocalEndpoint]:
    """Serve ``fake`` over HTTP (HTTPS with ``ssl_context``) until the block exits.

    ``port=0`` picks a free port; the :class:`LocalEndpoint` yielded says which. Runs on trio
    and on asyncio, in the caller's event loop::

        fake = FakeKinesis()
        fake.create_stream("orders", shard_count=2)
        async with serve(fake) as local:
            ...  # any Kinesis client at local.endpoint_url (boto3, the AWS CLI, a Producer)

    ``max_connections`` bounds the connections served at once. At the cap, a new client
    makes the server close the connection idle the longest (one waiting between requests,
    as a busy web server drops idle keep-alive connections); when none is idle, new clients
    wait in the kernel's listen backlog until a connection ends (served late, not
    refused). ``accept()`` failing for want of a resource (``EMFILE``/``ENFILE``: too many
    open files; ``ENOBUFS``, ``ENOMEM``) is logged as a warning
    (``local_kinesis_accept_failed``: the first failure, then at most every 10 s with the
    count; ``local_kinesis_accept_resumed`` when accepting works again, as often) and
    retried after 0.1 s, doubling up to 1 s, while the connections already open are served;
    out of descriptors, the connection idle the longest is closed first to free one.

    ``request_timeout`` (seconds) is the time a client has to send a whole request once its
    first byte arrived (the TLS handshake and each answer's writing get as long): a request
    still incomplete then is answered 408 ``RequestTimeoutException`` and its connection
    closed. A client trickling bytes does not extend it. ``idle_timeout`` (seconds) is how
    long a connection may wait for its next request (or its first) before the server closes
    it, without an answer. A request being served (a ``hang_*`` fault) has no time limit.
    """
    if max_connections < 1:
        raise ValueError(f"max_connections must be at least 1, not {max_connections}")
    if not (request_timeout > 0 and idle_timeout > 0):
        raise ValueError("request_timeout and idle_timeout must be positive")
    tcp = await anyio.create_tcp_listener(local_host=host, local_port=port)
    bound = tcp.extra(anyio.abc.SocketAttribute.local_port)
    max_body = _max_body(fake)
    slots = anyio.Semaphore(max_connections)
    idle: dict[_Connection, anyio.CancelScope] = {}

    async def handle(stream: anyio.abc.ByteStream) -> None:
        try:
            async with stream:
                if ssl_context is not None:
                    try:
                        with anyio.fail_after(request_timeout):
                            stream = await TLSStream.wrap(
                                stream,
                                server_side=True,
                                ssl_context=ssl_context,
                                standard_compatible=False,
                            )
                    except (
                        TimeoutError,
                        ssl.SSLError,
                        OSError,
                        anyio.EndOfStream,
                        anyio.BrokenResourceError,
                    ) as exc:
                        _log.debug("local_kinesis_tls_handshake_failed", error=repr(exc))
                        return
                connection = _Connection(
                    fake,
                    stream,
                    max_body,
                    request_timeout=request_timeout,
                    idle_timeout=idle_timeout,
                    idle=idle,
                )
                await connection.serve()
        except Exception:  # one connection's bug must not stop the server
            _log.exception("local_kinesis_connection_failed")
        finally:
            slots.release()

    async with tcp, anyio.create_task_group() as tg:
        for listener in tcp.listeners:
            assert isinstance(listener, anyio.abc.SocketListener)
            tg.start_soon(_accept_forever, listener, slots, idle, tg, handle)
        try:
            yield LocalEndpoint(host, bound, ssl_context is not None)
        finally:
            tg.cancel_scope.cancel()


async def _accept_forever(
    listener: anyio.abc.SocketListener,
    slots: anyio.Semaphore,
    idle: dict[_Connection, anyio.CancelScope],
    tg: anyio.abc.TaskGroup,
    handle: Callable[[anyio.abc.ByteStream], Coroutine[Any, Any, None]],
) -> None:
    """Accept connections for ``handle`` (which releases its slot) while a slot is free.

    At the cap, a client waiting to connect makes room: the connection idle the longest
    (between requests) is closed, as a busy web server drops its idle keep-alive
    connections; without idle ones the client waits for a connection to end. Out of file
    descriptors (``EMFILE``), the same: the longest idle connection is closed before the
    next try."""
    failures = 0
    delay = 0.0
    logged = resumed_logged = -math.inf
    while True:
        if slots.value == 0:
            # a client waiting to connect
            await _wait_readable(listener.extra(anyio.abc.SocketAttribute.raw_socket))
            if slots.value == 0 and idle:
                oldest = next(iter(idle))
                idle.pop(oldest).cancel()
                _log.debug("local_kinesis_idle_connection_closed", open_idle=len(idle))
        await slots.acquire()
        try:
            stream = await listener.accept()
        except anyio.ClosedResourceError:
            slots.release()
            return
        except (anyio.BrokenResourceError, OSError) as exc:
            slots.release()
            cause = exc if isinstance(exc, OSError) else exc.__cause__
            code = cause.errno if isinstance(cause, OSError) else None
            if code in _ACCEPT_IGNORED_ERRNOS:
                continue
            failures += 1
            delay = min(_ACCEPT_BACKOFF_MAX, delay * 2 if delay else _ACCEPT_BACKOFF)
            if code in (errno.EMFILE, errno.ENFILE) and idle:
                # out of descriptors: an idle connection gives its own back
                idle.pop(next(iter(idle))).cancel()
                delay = _ACCEPT_RETRY_FREED
            now = anyio.current_time()
            if now - logged >= _ACCEPT_LOG_EVERY:  # the first, then one each interval
                logged = now
                _log.warning(
                    "local_kinesis_accept_failed",
                    error=os.strerror(code) if code is not None else repr(exc),
                    errno=errno.errorcode.get(code, str(code)) if code is not None else None,
                    failures=failures,
                    retry_in=delay,
                )
            await anyio.sleep(delay)
            continue
        except BaseException:
            slots.release()
            raise
        if failures:
            now = anyio.current_time()
            if now - resumed_logged >= _ACCEPT_LOG_EVERY:
                resumed_logged = now
                _log.warning("local_kinesis_accept_resumed", failures=failures)
            failures, delay = 0, 0.0
        tg.start_soon(handle, stream)


async def _wait_readable(sock: socket.socket) -> None:
    wait = getattr(anyio, "wait_readable", None) or anyio.wait_socket_readable
    await wait(sock)


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
