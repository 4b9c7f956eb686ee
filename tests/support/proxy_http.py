"""The HTTP/1.1 wire of the fault proxy: reading and writing messages, and its upstream connection.

Holds the parsed :class:`_Message` (head, de-chunked body and the raw bytes as received), the
readers of a request and of an upstream response (Content-Length, chunked or to EOF; interim
1xx responses kept in the raw bytes), the answers the proxy makes itself (a JSON error, a 502),
the abrupt close of a client connection (a TCP RST), the ``Records`` of a PutRecords answer,
and :class:`_Upstream` (one persistent upstream connection, reopened when stale). Used by
``tests/support/fault_proxy.py`` only: its ``FaultProxy`` forwards, answers and resets with them.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
import struct
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

_MAX_HEAD = 1 << 20


_ERROR_TYPES = {500: "InternalFailure", 502: "BadGateway", 503: "ServiceUnavailable"}
_REASONS = {
    200: b"OK",
    400: b"Bad Request",
    500: b"Internal Server Error",
    502: b"Bad Gateway",
    503: b"Service Unavailable",
}


class _BadMessage(Exception):
    """Malformed HTTP."""


class _UpstreamClosed(Exception):
    """The upstream connection closed before any byte of a response arrived."""


@dataclass
class _Message:
    start_line: bytes  # without CRLF
    headers: list[tuple[bytes, bytes]]  # raw names and values, in order
    body: bytes  # decoded (de-chunked)
    raw: bytes  # exactly as received
    chunked: bool = False

    def header(self, name: bytes) -> bytes | None:
        name = name.lower()
        for k, v in self.headers:
            if k.lower() == name:
                return v
        return None

    def wants_close(self) -> bool:
        conn = self.header(b"connection")
        if conn is not None and b"close" in conn.lower():
            return True
        return self.start_line.endswith(b"HTTP/1.0") or self.start_line.startswith(b"HTTP/1.0")

    def with_body(self, body: bytes, **replace: bytes) -> bytes:
        """Serialized with a new Content-Length body (other headers kept, ``replace`` set)."""
        drop = {b"content-length", b"transfer-encoding", *(k.encode() for k in replace)}
        lines = [self.start_line]
        lines += [k + b": " + v for k, v in self.headers if k.lower() not in drop]
        lines += [k.encode() + b": " + v for k, v in replace.items()]
        lines.append(b"Content-Length: " + str(len(body)).encode())
        return b"\r\n".join(lines) + b"\r\n\r\n" + body


def _parse_head(head: bytes) -> tuple[bytes, list[tuple[bytes, bytes]]]:
    lines = head[:-4].split(b"\r\n")
    headers: list[tuple[bytes, bytes]] = []
    for line in lines[1:]:
        name, sep, value = line.partition(b":")
        if not sep or not name or name != name.strip():
            raise _BadMessage(f"bad header line {line!r}")
        headers.append((name, value.strip()))
    return lines[0], headers


async def _read_head(reader: asyncio.StreamReader) -> bytes:
    try:
        return await reader.readuntil(b"\r\n\r\n")
    except asyncio.LimitOverrunError as e:
        raise _BadMessage("header block too large") from e


async def _read_body(
    reader: asyncio.StreamReader, msg: _Message, *, until_eof: bool
) -> tuple[bytes, bytes]:
    """(decoded body, raw body) of ``msg`` by its framing."""
    try:
        return await _read_framed_body(reader, msg, until_eof=until_eof)
    except (ValueError, asyncio.LimitOverrunError) as e:
        raise _BadMessage(f"bad body framing: {e}") from e


async def _read_framed_body(
    reader: asyncio.StreamReader, msg: _Message, *, until_eof: bool
) -> tuple[bytes, bytes]:
    te = msg.header(b"transfer-encoding")
    if te is not None and b"chunked" in te.lower():
        msg.chunked = True
        raw = bytearray()
        body = bytearray()
        while True:
            line = await reader.readuntil(b"\r\n")
            raw += line
            size = int(line.split(b";", 1)[0].strip(), 16)
            if size == 0:
                while True:  # trailers, up to the empty line
                    trailer = await reader.readuntil(b"\r\n")
                    raw += trailer
                    if trailer == b"\r\n":
                        return bytes(body), bytes(raw)
            chunk = await reader.readexactly(size + 2)
            raw += chunk
            body += chunk[:-2]
    length = msg.header(b"content-length")
    if length is not None:
        data = await reader.readexactly(int(length))
        return data, data
    if until_eof:
        data = await reader.read()
        return data, data
    return b"", b""


async def _read_request(reader: asyncio.StreamReader) -> _Message | None:
    """The next request, or ``None`` when the client closed the connection between requests."""
    try:
        head = await _read_head(reader)
    except asyncio.IncompleteReadError as e:
        if not e.partial.strip():
            return None
        raise
    start, headers = _parse_head(head)
    if len(start.split(b" ")) != 3:
        raise _BadMessage(f"bad request line {start!r}")
    msg = _Message(start, headers, b"", head)
    body, raw = await _read_body(reader, msg, until_eof=False)
    msg.body, msg.raw = body, head + raw
    return msg


async def _read_response(reader: asyncio.StreamReader, method: bytes) -> tuple[_Message, bool]:
    """The upstream's response (interim 1xx ones included in ``raw``) and whether the
    connection must be closed after it."""
    raw = b""
    while True:
        try:
            head = await _read_head(reader)
        except asyncio.IncompleteReadError as e:
            if not raw and not e.partial:
                raise _UpstreamClosed from e
            raise
        except ConnectionError as e:
            if not raw:
                raise _UpstreamClosed from e
            raise
        start, headers = _parse_head(head)
        parts = start.split(b" ", 2)
        if len(parts) < 2 or not parts[1].isdigit():
            raise _BadMessage(f"bad status line {start!r}")
        status = int(parts[1])
        msg = _Message(start, headers, b"", raw + head)
        if 100 <= status < 200 and status != 101:
            raw += head
            continue
        no_body = method == b"HEAD" or status in (204, 304) or 100 <= status < 200
        framed = (
            msg.header(b"content-length") is not None
            or msg.header(b"transfer-encoding") is not None
        )
        body, body_raw = (b"", b"") if no_body else await _read_body(reader, msg, until_eof=True)
        msg.body, msg.raw = body, msg.raw + body_raw
        return msg, msg.wants_close() or (not no_body and not framed)


def _status(msg: _Message) -> int:
    return int(msg.start_line.split(b" ", 2)[1])


def _json_response(status: int, payload: dict[str, Any]) -> bytes:
    body = json.dumps(payload, separators=(",", ":")).encode()
    head = [
        b"HTTP/1.1 " + str(status).encode() + b" " + _REASONS.get(status, b"Error"),
        b"x-amzn-RequestId: " + str(uuid.uuid4()).encode(),
        b"Content-Type: application/x-amz-json-1.1",
        b"Content-Length: " + str(len(body)).encode(),
    ]
    if status == 502:
        head.append(b"Connection: close")
    return b"\r\n".join(head) + b"\r\n\r\n" + body


def _error_response(status: int) -> bytes:
    return _json_response(status, {"__type": _ERROR_TYPES[status], "message": "injected"})


#: what a proxy or load balancer in front of the endpoint answers when it refuses a request
#: (nginx's page for an oversized header): HTML, no service error shape
PROXY_PAGE = (
    b"<html><head><title>400 Bad Request</title></head><body><center><h1>400 Bad Request"
    b"</h1></center><center>Request Header Or Cookie Too Large</center></body></html>"
)


def _page_response(status: int) -> bytes:
    """A proxy's refusal: an HTML page, no ``__type``, no ``x-amzn-ErrorType``."""
    head = [
        b"HTTP/1.1 " + str(status).encode() + b" " + _REASONS.get(status, b"Error"),
        b"Content-Type: text/html",
        b"Content-Length: " + str(len(PROXY_PAGE)).encode(),
    ]
    return b"\r\n".join(head) + b"\r\n\r\n" + PROXY_PAGE


def _reset(writer: asyncio.StreamWriter) -> None:
    """Close abruptly: a TCP RST rather than a FIN."""
    sock = writer.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


def _json_records(msg: _Message) -> list[dict[str, Any]] | None:
    """The ``Records`` of a 200 JSON PutRecords answer, else ``None``."""
    if _status(msg) != 200:
        return None
    try:
        doc = json.loads(msg.body)
    except ValueError:
        return None
    records = doc.get("Records") if isinstance(doc, dict) else None
    return records if isinstance(records, list) else None


class _Upstream:
    """One persistent upstream connection, opened lazily and reopened when stale."""

    def __init__(self, host: str, port: int, on_connect: Callable[[], None]) -> None:
        self._host, self._port = host, port
        self._on_connect = on_connect
        self._reader: asyncio.StreamReader | None = None
        self._writer: asyncio.StreamWriter | None = None

    async def exchange(self, request: bytes, method: bytes) -> _Message:
        for attempt in (0, 1):
            if self._reader is not None and self._reader.at_eof():
                self.close()
            reused = self._writer is not None
            if self._reader is None or self._writer is None:
                self._reader, self._writer = await asyncio.open_connection(
                    self._host, self._port, limit=_MAX_HEAD
                )
                self._on_connect()
            reader, writer = self._reader, self._writer
            try:
                try:
                    writer.write(request)
                    await writer.drain()
                except ConnectionError as e:
                    raise _UpstreamClosed from e
                msg, close = await _read_response(reader, method)
            except _UpstreamClosed:
                self.close()
                if reused and attempt == 0:
                    continue  # an idle keep-alive connection the upstream had closed
                raise
            except BaseException:
                self.close()
                raise
            if close:
                self.close()
            return msg
        raise AssertionError("unreachable")

    def close(self) -> None:
        if self._writer is not None:
            self._writer.transport.abort()
        self._reader = self._writer = None
