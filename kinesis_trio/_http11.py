"""A lean HTTP/1.1 connection pool for the client's signed POSTs.

The client needs one thing of HTTP: send a POST with a known body to one endpoint over a
kept-alive connection and read the whole answer. httpx's transport (httpcore, h11) does that
through several layers of general machinery that cost more CPU than the rest of a request
together (``benchmarks/bench_request.py``). This pool does only that: it writes the request
head itself, reads the answer with a small strict parser (status line, header fields,
``Content-Length``, chunked or read-to-close bodies; anything else is a protocol error) and
keeps idle connections for reuse.

Errors are httpx's (``ConnectError``, ``ConnectTimeout``, ``PoolTimeout``, ``WriteError``,
``ReadError``, ``RemoteProtocolError``), so the client reads them as it reads httpcore's: a
failure before the request could be written (``ConnectError``, ``ConnectTimeout``,
``PoolTimeout``) means nothing was sent. A connection whose exchange did not end cleanly
(an error, a cancellation, an answer that asks to close, bytes after the answer) is closed,
never reused; an idle connection the server has closed or written to is dropped when taken.

It is also an ``httpx.AsyncBaseTransport``, so ``httpx.AsyncClient(transport=pool)`` works,
but the client calls :meth:`Http11Pool.post` directly.
"""

from __future__ import annotations

import contextlib
import select
import socket
import ssl

import anyio
import anyio.abc
import httpx

__all__ = ["Http11Pool", "Origin"]

#: (scheme, host, port)
Origin = tuple[str, str, int]

_MAX_HEAD = 64 * 1024  # status line and header fields of one answer
_MAX_LINE = 8 * 1024  # one chunk-size line or trailer field
#: the largest answer body taken (GetRecords returns at most 10 MiB of data, base64 in JSON)
MAX_BODY = 64 * 1024 * 1024
_RECEIVE = 256 * 1024
_JOIN_MAX = 64 * 1024  # bodies up to this size go out in one write with the head


class _Connection:
    __slots__ = ("buffer", "origin", "sock", "stream")

    def __init__(self, stream: anyio.abc.ByteStream, origin: Origin) -> None:
        self.stream = stream
        self.origin = origin
        self.buffer = bytearray()
        sock: socket.socket | None = None
        try:
            sock = stream.extra(anyio.abc.SocketAttribute.raw_socket)
        except anyio.TypedAttributeLookupError:  # pragma: no cover - always a socket here
            sock = None
        self.sock = sock

    def stale(self) -> bool:
        """True if the server closed this idle connection or wrote to it unasked."""
        sock = self.sock
        if sock is None:  # pragma: no cover
            return False
        try:
            poller = select.poll()
            poller.register(sock, select.POLLIN)
            return bool(poller.poll(0))
        except (OSError, ValueError):
            return True

    async def fill(self) -> bool:
        """Receive more bytes into the buffer; False at the end of the stream."""
        try:
            chunk = await self.stream.receive(_RECEIVE)
        except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
            return False
        except (OSError, ssl.SSLError) as exc:
            raise httpx.ReadError(_describe(exc)) from exc
        self.buffer += chunk
        return True

    async def line(self, what: str) -> bytes:
        """One CRLF-terminated line (without the CRLF) from the buffer."""
        start = 0
        while True:
            end = self.buffer.find(b"\r\n", start)
            if end >= 0:
                out = bytes(self.buffer[:end])
                del self.buffer[: end + 2]
                return out
            if len(self.buffer) > _MAX_LINE:
                raise httpx.RemoteProtocolError(f"{what} longer than {_MAX_LINE} bytes")
            start = max(0, len(self.buffer) - 1)
            if not await self.fill():
                raise httpx.RemoteProtocolError(f"the server closed the connection within {what}")

    async def exact(self, size: int, what: str) -> bytes:
        while len(self.buffer) < size:
            if not await self.fill():
                raise httpx.RemoteProtocolError(
                    f"the server closed the connection within {what}"
                    f" ({len(self.buffer)} of {size} bytes)"
                )
        out = bytes(self.buffer[:size])
        del self.buffer[:size]
        return out


def _describe(exc: BaseException) -> str:
    text = str(exc)
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _parse_head(head: bytes) -> tuple[int, bool, list[tuple[bytes, bytes]]]:
    """Status, HTTP/1.1 or later, and the header fields of one answer's head."""
    lines = head.split(b"\r\n")
    status_line = lines[0]
    parts = status_line.split(b" ", 2)
    if (
        len(parts) < 2
        or not parts[0].startswith(b"HTTP/1.")
        or len(parts[1]) != 3
        or not parts[1].isdigit()
    ):
        raise httpx.RemoteProtocolError(f"malformed status line {status_line[:100]!r}")
    fields: list[tuple[bytes, bytes]] = []
    for raw in lines[1:]:
        name, sep, value = raw.partition(b":")
        if not sep or not name or name != name.strip() or raw[:1] in (b" ", b"\t"):
            raise httpx.RemoteProtocolError(f"malformed header field {raw[:100]!r}")
        fields.append((name, value.strip(b" \t")))
    return int(parts[1]), parts[0] != b"HTTP/1.0", fields


class Http11Pool(httpx.AsyncBaseTransport):
    """Kept-alive HTTP/1.1 connections, at most ``max_connections`` exchanges at a time.

    ``verify`` is an ``ssl.SSLContext`` for ``https`` origins, ``True`` for the default
    verification or ``False`` for none. A connection takes at most ``connect_timeout``
    seconds to open (TLS included); waiting for a free connection, at most ``pool_timeout``.
    The caller bounds the whole exchange (the client's deadline).
    """

    def __init__(
        self,
        *,
        verify: bool | ssl.SSLContext = True,
        max_connections: int = 24,
        connect_timeout: float = 6.0,
        pool_timeout: float = 6.0,
    ) -> None:
        if max_connections < 1:
            raise ValueError("max_connections must be at least 1")
        self._verify = verify
        self._ssl: ssl.SSLContext | None = None
        self._slots = anyio.Semaphore(max_connections)
        self._idle: list[_Connection] = []
        self._max_idle = max_connections
        self._connect_timeout = connect_timeout
        self._pool_timeout = pool_timeout
        self._closed = False

    def _ssl_context(self) -> ssl.SSLContext:
        context = self._ssl
        if context is None:
            if isinstance(self._verify, ssl.SSLContext):
                context = self._verify
            else:
                context = httpx.create_ssl_context(verify=self._verify)
            self._ssl = context
        return context

    async def post(
        self, origin: Origin, target: str, headers: dict[str, str], body: bytes
    ) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
        """POST ``body`` to ``target`` at ``origin``; the status, header fields and body."""
        if self._closed:
            raise RuntimeError("the connection pool is closed")
        lines = [f"POST {target} HTTP/1.1\r\n"]
        for name, value in headers.items():
            if "\r" in value or "\n" in value or "\r" in name or "\n" in name:
                raise httpx.LocalProtocolError(f"header {name!r} holds a line break")
            lines.append(f"{name}: {value}\r\n")
        lines.append(f"Content-Length: {len(body)}\r\n\r\n")
        head = "".join(lines).encode("latin-1")
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
            try:
                status, fields, content, keep = await self._exchange(conn, head, body)
            except BaseException:
                await anyio.aclose_forcefully(conn.stream)
                raise
            if keep and not self._closed and len(self._idle) < self._max_idle:
                self._idle.append(conn)
            else:
                await anyio.aclose_forcefully(conn.stream)
            return status, fields, content
        finally:
            self._slots.release()

    async def _take(self, origin: Origin) -> _Connection:
        idle = self._idle
        while idle:
            # the most recently used first: the likeliest to be warm and alive
            for index in range(len(idle) - 1, -1, -1):
                if idle[index].origin == origin:
                    conn = idle.pop(index)
                    break
            else:
                break
            if conn.stale():
                await anyio.aclose_forcefully(conn.stream)
                continue
            return conn
        return await self._connect(origin)

    async def _connect(self, origin: Origin) -> _Connection:
        scheme, host, port = origin
        try:
            with anyio.fail_after(self._connect_timeout):
                if scheme == "https":
                    stream: anyio.abc.ByteStream = await anyio.connect_tcp(
                        host,
                        port,
                        ssl_context=self._ssl_context(),
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
        self, conn: _Connection, head: bytes, body: bytes
    ) -> tuple[int, list[tuple[bytes, bytes]], bytes, bool]:
        stream = conn.stream
        try:
            if len(body) <= _JOIN_MAX:
                await stream.send(head + body)
            else:
                await stream.send(head)
                await stream.send(body)
        except (OSError, ssl.SSLError, anyio.BrokenResourceError, anyio.ClosedResourceError) as exc:
            raise httpx.WriteError(_describe(exc)) from exc
        while True:
            status, keep, fields = await self._read_head(conn)
            if status >= 200 or status == 101:
                break
            # an interim answer (100 Continue, 103 Early Hints): the real one follows
        length: int | None = None
        chunked = False
        for name, value in fields:
            lower = name.lower()
            if lower == b"content-length":
                if not value.isdigit():
                    raise httpx.RemoteProtocolError(f"malformed Content-Length {value[:40]!r}")
                if length is not None and length != int(value):
                    raise httpx.RemoteProtocolError("conflicting Content-Length fields")
                length = int(value)
                if length > MAX_BODY:
                    raise httpx.RemoteProtocolError(
                        f"an answer of {length} bytes: more than the {MAX_BODY} taken"
                    )
            elif lower == b"transfer-encoding":
                codings = [c.strip().lower() for c in value.split(b",")]
                if codings[-1:] != [b"chunked"] or len(codings) != 1:
                    raise httpx.RemoteProtocolError(f"unsupported Transfer-Encoding {value!r}")
                chunked = True
            elif lower == b"connection":
                tokens = {t.strip().lower() for t in value.split(b",")}
                if b"close" in tokens:
                    keep = False
                elif b"keep-alive" in tokens:
                    keep = True
        if chunked:
            content = await self._read_chunked(conn)
        elif length is not None:
            content = await conn.exact(length, "the answer's body")
        elif status in (204, 304):
            content = b""
        else:
            # no length given: the body ends when the server closes the connection
            while True:
                if len(conn.buffer) > MAX_BODY:
                    raise httpx.RemoteProtocolError(f"an answer of more than {MAX_BODY} bytes")
                if not await conn.fill():
                    break
            content = bytes(conn.buffer)
            conn.buffer.clear()
            keep = False
        if conn.buffer:  # bytes nobody asked for: the connection's state is unknown
            keep = False
        return status, fields, content, keep

    async def _read_head(self, conn: _Connection) -> tuple[int, bool, list[tuple[bytes, bytes]]]:
        start = 0
        while True:
            end = conn.buffer.find(b"\r\n\r\n", start)
            if end >= 0 and end <= _MAX_HEAD:
                break
            if len(conn.buffer) > _MAX_HEAD:
                raise httpx.RemoteProtocolError(f"the answer's head is over {_MAX_HEAD} bytes")
            start = max(0, len(conn.buffer) - 3)
            if not await conn.fill():
                if conn.buffer:
                    raise httpx.RemoteProtocolError(
                        "the server closed the connection within the answer's head"
                    )
                raise httpx.RemoteProtocolError("Server disconnected without sending a response.")
        head = bytes(conn.buffer[:end])
        del conn.buffer[: end + 4]
        return _parse_head(head)

    async def _read_chunked(self, conn: _Connection) -> bytes:
        parts: list[bytes] = []
        total = 0
        while True:
            size_line = await conn.line("a chunk-size line")
            digits = size_line.split(b";", 1)[0].strip()
            try:
                size = int(digits, 16)
            except ValueError:
                raise httpx.RemoteProtocolError(
                    f"malformed chunk size {size_line[:40]!r}"
                ) from None
            if size < 0 or not digits or digits[:1] in (b"+", b"-"):
                raise httpx.RemoteProtocolError(f"malformed chunk size {size_line[:40]!r}")
            if size == 0:
                while await conn.line("the trailer"):
                    pass  # trailer fields: not used
                return b"".join(parts)
            total += size
            if total > MAX_BODY:
                raise httpx.RemoteProtocolError(f"an answer of more than {MAX_BODY} bytes")
            parts.append(await conn.exact(size, "a chunk"))
            if await conn.exact(2, "a chunk's end") != b"\r\n":
                raise httpx.RemoteProtocolError("a chunk does not end with CRLF")

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
        headers = {k: v for k, v in request.headers.items() if k.lower() not in ("content-length",)}
        target = url.raw_path.decode("ascii")
        status, fields, content = await self.post(
            (url.scheme, url.host, port), target, headers, body
        )
        return httpx.Response(status, headers=fields, content=content)

    async def aclose(self) -> None:
        """Close every idle connection; later requests fail."""
        self._closed = True
        idle, self._idle = self._idle, []
        for conn in idle:
            await anyio.aclose_forcefully(conn.stream)

    def __repr__(self) -> str:
        return f"Http11Pool(idle={len(self._idle)})"


def origin_of(url: str) -> Origin:
    """The (scheme, host, port) of an endpoint URL."""
    parsed = httpx.URL(url)
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    return (parsed.scheme, parsed.host, port)


def headers_of(fields: list[tuple[bytes, bytes]]) -> httpx.Headers:
    """The answer's header fields as ``httpx.Headers`` (case-insensitive lookups)."""
    return httpx.Headers(fields)
