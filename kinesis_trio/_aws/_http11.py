"""The connection pool every signed request goes through; h11 frames each exchange.

The clients need one thing of HTTP: POST a known body to one endpoint over a kept-alive
connection and read the whole answer. The pool owns the connections (opening them, TLS, at
most ``max_connections`` exchanges at a time, idle ones kept for reuse); every byte of the
request and the answer is framed by ``h11.Connection``, which refuses what RFC 9112
refuses (bad chunk sizes, conflicting lengths, control bytes in header values, a status
outside 100-999, ...). The pool adds what h11 leaves to its caller:

- caps: an answer's head (64 KiB, whether it arrives in pieces, which h11's
  ``max_incomplete_event_size`` refuses, or whole in one read, which the pool measures) and
  its body (:data:`MAX_BODY`);
- the answer is read through the caller's ``read`` function, inside the exchange: a
  connection is put back for reuse only when both sides are done (h11's
  ``start_next_cycle``), no byte follows the answer, and ``read`` accepted it. An error,
  a cancellation, an answer asking to close, bytes after it, or an answer ``read``
  refused (a 2xx the client cannot use) closes the connection;
- the stale-idle check: an idle connection the server has closed or written to is dropped
  when taken.

Errors are httpx's (``ConnectError``, ``ConnectTimeout``, ``PoolTimeout``, ``WriteError``,
``ReadError``, ``RemoteProtocolError``), so the clients read them as they read httpcore's: a
failure before the request could be written (``ConnectError``, ``ConnectTimeout``,
``PoolTimeout``) means nothing was sent; any other may come after the server took it. No
other exception leaves an exchange: whatever h11 or the stream raises on bytes it was
given becomes a ``RemoteProtocolError``.

The caller bounds the whole exchange (the client's deadline). Connections are TCP (TLS for
``https``) unless an ``opener`` is given: :class:`kinesis_trio.testing.FakeKinesis`'s
transport opens in-memory streams whose far end is the fake's own h11 server, so in-process
tests run this same pool and framing.
"""

from __future__ import annotations

import contextlib
import os
import select
import socket
import ssl
from collections.abc import Awaitable, Callable, Mapping
from typing import Protocol, TypeVar, runtime_checkable

import anyio
import anyio.abc
import h11
import httpx

__all__ = [
    "MAX_BODY",
    "Fields",
    "Http11Pool",
    "Origin",
    "StreamOpener",
    "Watch",
    "origin_of",
    "too_long",
]

#: (scheme, host, port)
Origin = tuple[str, str, int]
#: An answer's header fields as h11 gives them (names lowercased).
Fields = list[tuple[bytes, bytes]]

_MAX_HEAD = 64 * 1024  # status line and header fields of one answer (and of an interim one)
#: the largest answer body taken (GetRecords returns at most 10 MiB of data, base64 in JSON)
MAX_BODY = 64 * 1024 * 1024


def too_long(most: int) -> str:
    """What an answer past the most its operation can answer is called."""
    return (
        f"an answer of more than {most:,} bytes, more than its operation can answer: a black "
        "hole that keeps talking"
    )


_RECEIVE = 256 * 1024
_JOIN_MAX = 64 * 1024  # bodies up to this size go out in one write with the head
#: a larger body goes out in pieces of this size, each a sign of life for the deadline: a
#: quarter of ``request_timeout`` on the slowest path a request's bound allows (a MiB per
#: ``request_timeout``), 1.5 s at the default 6 s (pieces of 64 KiB cost 4% more CPU per
#: record in a burst of small requests, one more send each)
_PIECE = 256 * 1024

_T = TypeVar("_T")

#: What the caller makes of a whole answer (status, header fields, body). Raising refuses
#: the answer: the connection is closed and the exception goes to the caller.
Reader = Callable[[int, Fields, bytes], _T]


@runtime_checkable
class StreamOpener(Protocol):
    """Something that opens byte streams to an origin (in place of TCP)."""

    def open_stream(self, origin: Origin) -> Awaitable[anyio.abc.ByteStream]:
        """A new connection to ``origin``."""
        ...


class Watch(Protocol):
    """Who follows an exchange's bytes (the client's deadline, ``_core._deadline``)."""

    def sent(self, nbytes: int, last: bool) -> None:
        """``nbytes`` of the request are being handed to the connection (``last``: the
        rest of it)."""
        ...

    def received(self, nbytes: int) -> None:
        """``nbytes`` of the answer arrived (0: the connection ended)."""
        ...


class _Connection:
    __slots__ = ("h11", "origin", "sock", "stream", "unseen", "watch")

    def __init__(self, stream: anyio.abc.ByteStream, origin: Origin) -> None:
        self.stream = stream
        self.origin = origin
        self.h11 = h11.Connection(h11.CLIENT, max_incomplete_event_size=_MAX_HEAD)
        self.sock: socket.socket | None = stream.extra(anyio.abc.SocketAttribute.raw_socket, None)
        self.watch: Watch | None = None
        #: the size of the last read not yet told to ``watch`` (-1: none)
        self.unseen = -1

    def stale(self) -> bool:
        """True if the server closed this idle connection or wrote to it unasked."""
        sock = self.sock
        if sock is None:
            return False
        try:
            poller = select.poll()
            poller.register(sock, select.POLLIN)
            return bool(poller.poll(0))
        except (OSError, ValueError):
            return True


def _check_head(reason: bytes, fields: Fields) -> None:
    """Refuse a head over :data:`_MAX_HEAD` that arrived whole (h11 refuses one only while
    it is incomplete): its status line and fields as parsed, which the raw head is at least."""
    size = 15 + len(reason)  # "HTTP/1.1 200 " + reason + CRLF, and the blank line
    for name, value in fields:
        size += len(name) + len(value) + 4  # ": " and CRLF
    if size > _MAX_HEAD:
        raise httpx.RemoteProtocolError(
            f"an answer head of more than {_MAX_HEAD} bytes ({size} bytes of status line "
            "and header fields)"
        )


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


class Http11Pool(httpx.AsyncBaseTransport):
    """Kept-alive HTTP/1.1 connections, at most ``max_connections`` exchanges at a time.

    ``verify`` is an ``ssl.SSLContext`` for ``https`` origins, a CA bundle's path (a file or
    a folder), ``True`` for the default verification or ``False`` for none; the context is
    made at the first TLS connection or :meth:`ssl_context` (``http`` origins need none). A
    connection takes at most ``connect_timeout`` seconds to open (TLS included); waiting for
    a free connection, at most ``pool_timeout``.
    ``opener`` opens the connections instead of TCP. The caller bounds the whole exchange.
    """

    def __init__(
        self,
        *,
        verify: bool | str | ssl.SSLContext = True,
        max_connections: int = 24,
        connect_timeout: float = 6.0,
        pool_timeout: float = 6.0,
        opener: StreamOpener | None = None,
        max_body: int = MAX_BODY,
    ) -> None:
        if max_connections < 1:
            raise ValueError("max_connections must be at least 1")
        self._verify = verify
        self._ssl: ssl.SSLContext | None = None
        self._slots = anyio.Semaphore(max_connections)
        #: the idle connections of each origin (a pool per host: the endpoint rules may
        #: send one client's calls to several), at most ``max_connections`` each
        self._idle_at: dict[Origin, list[_Connection]] = {}
        self._max_idle = max_connections
        self._connect_timeout = connect_timeout
        self._pool_timeout = pool_timeout
        self._opener = opener
        self._max_body = max_body
        self._closed = False

    @property
    def _idle(self) -> list[_Connection]:
        """Every idle connection, of every origin."""
        return [conn for conns in self._idle_at.values() for conn in conns]

    def ssl_context(self) -> ssl.SSLContext:
        """The context of this pool's TLS connections, made on first use."""
        context = self._ssl
        if context is None:
            if isinstance(self._verify, ssl.SSLContext):
                context = self._verify
            elif isinstance(self._verify, str):
                folder = os.path.isdir(self._verify)
                context = ssl.create_default_context(
                    cafile=None if folder else self._verify, capath=self._verify if folder else None
                )
            else:
                context = httpx.create_ssl_context(verify=self._verify)
            self._ssl = context
        return context

    async def post(
        self,
        origin: Origin,
        target: str,
        headers: Mapping[str, str],
        body: bytes,
        read: Reader[_T],
        watch: Watch | None = None,
        max_body: int | None = None,
    ) -> _T:
        """POST ``body`` to ``target`` at ``origin``; what ``read`` makes of the answer.
        ``watch`` is told of each piece of the request handed to the connection and each
        read of the answer; ``max_body``: the most bytes of answer body taken (the pool's
        own cap if None or larger)."""
        if self._closed:
            raise RuntimeError("the connection pool is closed")
        fields = [*headers.items(), ("Content-Length", str(len(body)))]
        if "Host" not in headers and not any(name.lower() == "host" for name in headers):
            host = origin[1] if origin[2] in (80, 443) else f"{origin[1]}:{origin[2]}"
            fields.insert(0, ("Host", host))
        try:
            request = h11.Request(method="POST", target=target, headers=fields)
        except h11.LocalProtocolError as exc:  # a header h11 refuses to write: nothing sent
            raise httpx.LocalProtocolError(str(exc)) from None
        try:
            self._slots.acquire_nowait()
        except anyio.WouldBlock:
            try:
                with anyio.fail_after(self._pool_timeout):
                    await self._slots.acquire()
            except TimeoutError:
                raise httpx.PoolTimeout(
                    f"no connection free within {self._pool_timeout:g} s"
                ) from None
        try:
            conn = await self._take(origin)
            conn.watch = watch
            conn.unseen = -1
            try:
                most = self._max_body if max_body is None else min(max_body, self._max_body)
                result = await self._exchange(conn, request, body, read, most)
            except BaseException:
                await anyio.aclose_forcefully(conn.stream)
                raise
            idle = self._idle_at.get(origin)
            if idle is None:
                idle = self._idle_at[origin] = []
            if self._reusable(conn, idle):
                idle.append(conn)
            else:
                await anyio.aclose_forcefully(conn.stream)
            return result
        finally:
            self._slots.release()

    def _reusable(self, conn: _Connection, idle: list[_Connection]) -> bool:
        state = conn.h11
        if self._closed or len(idle) >= self._max_idle:
            return False
        if state.our_state is not h11.DONE or state.their_state is not h11.DONE:
            return False  # an answer that asked to close, or a body read to the close
        state.start_next_cycle()
        # bytes nobody asked for (a 204's body, a second answer): the state is unknown
        return not state.trailing_data[0]

    async def _take(self, origin: Origin) -> _Connection:
        idle = self._idle_at.get(origin)
        while idle:
            # the most recently used first: the likeliest to be warm and alive
            conn = idle.pop()
            if conn.stale():
                await anyio.aclose_forcefully(conn.stream)
                continue
            return conn
        return await self._connect(origin)

    async def _connect(self, origin: Origin) -> _Connection:
        scheme, host, port = origin
        try:
            with anyio.fail_after(self._connect_timeout):
                if self._opener is not None:
                    stream = await self._opener.open_stream(origin)
                elif scheme == "https":
                    stream = await anyio.connect_tcp(
                        host,
                        port,
                        ssl_context=self.ssl_context(),
                        tls_hostname=host,
                        tls_standard_compatible=False,
                    )
                else:
                    stream = await anyio.connect_tcp(host, port)
        except TimeoutError:
            raise httpx.ConnectTimeout(
                f"no connection to {host}:{port} within {self._connect_timeout:g} s"
            ) from None
        except (OSError, ssl.SSLError, anyio.BrokenResourceError) as exc:
            raise httpx.ConnectError(_describe(exc)) from exc
        conn = _Connection(stream, origin)
        if conn.sock is not None:
            with contextlib.suppress(OSError):  # not a TCP socket: nothing to set
                conn.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return conn

    async def _exchange(
        self, conn: _Connection, request: h11.Request, body: bytes, read: Reader[_T], most: int
    ) -> _T:
        state = conn.h11
        stream = conn.stream
        try:
            head = state.send(request)
            pieces = (state.send_with_data_passthrough(h11.Data(data=body)) or []) if body else []
            tail = state.send(h11.EndOfMessage())
        except h11.LocalProtocolError as exc:  # pragma: no cover - a fresh cycle takes any POST
            raise httpx.LocalProtocolError(str(exc)) from None
        watch = conn.watch
        try:
            if len(body) <= _JOIN_MAX:
                data = b"".join([head or b"", *pieces, tail or b""])
                if watch is not None:
                    watch.sent(len(data), True)
                await stream.send(data)
            else:
                # in pieces: each is a sign of life (the deadline follows them); the last
                # is announced before it goes, so a cut in it counts as maybe sent
                out: list[bytes | memoryview] = [head or b""]
                for piece in pieces:
                    view = memoryview(piece)
                    out += [view[i : i + _PIECE] for i in range(0, len(view), _PIECE)]
                if tail:
                    out.append(tail)
                last = len(out) - 1
                for i, part in enumerate(out):
                    if watch is not None:
                        watch.sent(len(part), i == last)
                    await stream.send(part)  # type: ignore[arg-type]
        except (OSError, ssl.SSLError, anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
            raise httpx.WriteError(_describe(exc)) from exc
        status = 0
        fields: Fields = []
        parts: list[bytes] = []
        size = 0
        await self._receive(conn)  # nothing of the answer can be there yet
        while True:
            event = await self._next_event(conn)
            if type(event) is h11.Data:
                size += len(event.data)
                if size > most:
                    raise httpx.RemoteProtocolError(too_long(most))
                parts.append(event.data)
            elif type(event) is h11.Response:
                status, fields = event.status_code, list(event.headers)
                _check_head(event.reason, fields)
                for name, value in fields:
                    # h11 took it as digits; one that cannot fit is refused before its body
                    if name == b"content-length" and (len(value) > 19 or int(value) > most):
                        raise httpx.RemoteProtocolError(
                            f"an answer of {value[:40].decode()} bytes: more than the "
                            f"{most:,} its operation can answer"
                        )
            elif type(event) is h11.EndOfMessage:
                break
            elif type(event) is h11.InformationalResponse:
                # 100 Continue, 103 Early Hints: the final answer follows
                _check_head(event.reason, list(event.headers))
            else:  # ConnectionClosed: h11 raises for a close within an answer
                raise httpx.RemoteProtocolError(  # pragma: no cover
                    "the server closed the connection without an answer"
                )
        content = bytes(parts[0]) if len(parts) == 1 else b"".join(parts)
        return read(status, fields, content)

    async def _next_event(self, conn: _Connection) -> h11.Event:
        """The answer's next event; bytes are received as h11 needs them."""
        state = conn.h11
        while True:
            try:
                event = state.next_event()
            except h11.RemoteProtocolError as exc:
                raise httpx.RemoteProtocolError(f"malformed answer: {exc}") from None
            except Exception as exc:  # anything else h11 raised on the bytes it was given
                raise httpx.RemoteProtocolError(f"malformed answer: {_describe(exc)}") from None
            if event is not h11.NEED_DATA:
                if event is h11.PAUSED:  # pragma: no cover - a client is never paused here
                    raise httpx.RemoteProtocolError("the answer cannot be read on")
                return event  # type: ignore[return-value]
            await self._receive(conn)

    @staticmethod
    async def _receive(conn: _Connection) -> None:
        """Hand h11 the next bytes of the answer (or the end of the stream)."""
        watch = conn.watch
        if watch is not None and conn.unseen >= 0:
            # the last read is told to the deadline only when another is needed (most
            # answers come in one read: no deadline to move)
            watch.received(conn.unseen)
        try:
            chunk = await conn.stream.receive(_RECEIVE)
        except (anyio.EndOfStream, anyio.ClosedResourceError):
            chunk = b""
        except (OSError, ssl.SSLError, anyio.BrokenResourceError) as exc:
            raise httpx.ReadError(_describe(exc)) from exc
        if watch is not None:
            conn.unseen = len(chunk)
        try:
            conn.h11.receive_data(chunk)
        except h11.RemoteProtocolError as exc:
            raise httpx.RemoteProtocolError(f"malformed answer: {exc}") from None

    # -- httpx.AsyncBaseTransport ----------------------------------------------------------

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """Send a POST through the pool (other methods are not supported)."""
        if request.method != "POST":
            raise httpx.UnsupportedProtocol(f"{request.method} is not supported by this pool")
        url = request.url
        if url.scheme not in ("http", "https"):
            raise httpx.UnsupportedProtocol(f"unsupported URL scheme {url.scheme!r}")
        port = url.port or (443 if url.scheme == "https" else 80)
        body = await request.aread()
        skip = ("content-length", "transfer-encoding")
        headers = {k: v for k, v in request.headers.items() if k.lower() not in skip}
        target = url.raw_path.decode("ascii")
        return await self.post(
            (url.scheme, url.host, port),
            target,
            headers,
            body,
            lambda status, fields, content: httpx.Response(status, headers=fields, content=content),
        )

    async def aclose(self) -> None:
        """Close every idle connection; later requests fail."""
        self._closed = True
        idle, self._idle_at = self._idle_at, {}
        for conn in [conn for conns in idle.values() for conn in conns]:
            await anyio.aclose_forcefully(conn.stream)

    def __repr__(self) -> str:
        return f"Http11Pool(idle={len(self._idle)})"


def origin_of(url: str) -> Origin:
    """The (scheme, host, port) of an endpoint URL."""
    parsed = httpx.URL(url)
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    return (parsed.scheme, parsed.host, port)
