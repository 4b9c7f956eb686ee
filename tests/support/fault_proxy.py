"""A fault-injecting HTTP/1.1 reverse proxy for running a producer against a real emulator.

:class:`FaultProxy` listens on ``127.0.0.1:<free port>`` and forwards every request to an
upstream base URL (a local emulator's ``http://127.0.0.1:P``). It runs its own asyncio
event loop in a background thread, so tests on trio and on asyncio can use it alike::

    with FaultProxy(emulator.endpoint_url, seed=1) as proxy:
        proxy.set_faults(http_503=0.1, throttle_entries=0.05, reset_after=0.02)
        ...  # point the client at proxy.url
        proxy.events, proxy.stats

Each client connection gets its own persistent upstream connection (reopened when the
upstream closes an idle one), so keep-alive and concurrency on the client side map one to
one onto the upstream. Requests are forwarded byte for byte (the ``Host`` header included)
and responses come back byte for byte unless a fault applies.

Faults apply to PutRecords requests only (``X-Amz-Target: Kinesis_20131202.PutRecords``);
every other operation passes through untouched. Per PutRecords request, after the optional
``delay``, one uniform draw picks at most one request-level fault, in this order:

``http_500`` / ``http_503``
    Answer ``500 {"__type":"InternalFailure",...}`` / ``503 {"__type":"ServiceUnavailable",
    ...}`` without forwarding: nothing is written. The connection stays usable.
``reset_before``
    Reset the client connection (``SO_LINGER`` 0, then close: a TCP RST) without
    forwarding: nothing is written.
``reset_after``
    Forward (the records are written), read the upstream answer, then reset the client
    connection instead of answering: the outcome is ambiguous to the client.
``hang_after``
    Forward (written), then never answer; the connection is held open until the client
    closes it (or the proxy is closed). Ambiguous to the client.

Their probabilities must sum to at most 1. When none of them was drawn, ``throttle_entries``
applies per entry: each entry is dropped from the request with that probability (the JSON
body is rewritten and ``Content-Length`` fixed), the rest is forwarded, and the client gets
the response it expects: the forwarded entries' upstream results in their original slots,
``{"ErrorCode":"ProvisionedThroughputExceededException","ErrorMessage":"injected"}`` in the
dropped ones and ``FailedRecordCount`` adjusted. A throttled entry is really not written. If
every entry is dropped nothing is forwarded.

``proxy.events`` lists one :class:`ProxyEvent` ``(kind, n_entries, records)`` per PutRecords
request. ``records`` is the list of per-slot results in the client's request order when the
upstream answered 200 with parseable JSON, else ``None``: for ``forward``, ``reset_after`` and
``hang_after`` the upstream's own ``Records`` (``ShardId`` + ``SequenceNumber`` for written
entries; for the latter two these are the written records whose answer was lost, the only
ones a retrying producer may legitimately duplicate); for ``throttle_entries`` the records as
sent to the client (injected errors in the dropped slots). ``proxy.stats`` counts requests by
kind (see :data:`KINDS`) plus ``throttled_entries`` (entries dropped), ``connections``
(client connections accepted) and ``upstream_connects`` (upstream connections opened).
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import dataclasses
import json
import random
import socket
import struct
import threading
import uuid
import zlib
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Any, NamedTuple
from urllib.parse import urlsplit

__all__ = ["KINDS", "FaultProxy", "Faults", "ProxyEvent"]

PUT_RECORDS_TARGET = b"Kinesis_20131202.PutRecords"

KINDS = (
    "passthrough",  # not a PutRecords request: forwarded untouched, no event
    "forward",  # PutRecords forwarded untouched (no fault drawn)
    "http_500",
    "http_503",
    "throttle_entries",  # some (maybe all) entries dropped and answered as throttled
    "reset_before",
    "reset_after",
    "hang_after",
    "upstream_error",  # the upstream failed (connect error, reset, bad HTTP): 502 + close
)
"""Request kinds counted in :attr:`FaultProxy.stats` (``events`` omits ``passthrough``)."""

_REQUEST_FAULTS = ("http_500", "http_503", "reset_before", "reset_after", "hang_after")
_MAX_HEAD = 1 << 20
_THROTTLED = {"ErrorCode": "ProvisionedThroughputExceededException", "ErrorMessage": "injected"}
_ERROR_TYPES = {500: "InternalFailure", 502: "BadGateway", 503: "ServiceUnavailable"}
_REASONS = {
    200: b"OK",
    500: b"Internal Server Error",
    502: b"Bad Gateway",
    503: b"Service Unavailable",
}


@dataclass(frozen=True)
class Faults:
    """Fault settings; probabilities are per PutRecords request (per entry for throttling)."""

    http_500: float = 0.0
    http_503: float = 0.0
    throttle_entries: float = 0.0
    reset_before: float = 0.0
    reset_after: float = 0.0
    hang_after: float = 0.0
    delay: float = 0.0
    """Seconds to wait before acting on each PutRecords request."""
    delay_jitter: float = 0.0
    """Extra uniform random wait in ``[0, delay_jitter]`` seconds."""

    def __post_init__(self) -> None:
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if not isinstance(value, (int, float)) or value < 0:
                raise ValueError(f"{f.name} must be a number >= 0, got {value!r}")
            if f.name not in ("delay", "delay_jitter") and value > 1:
                raise ValueError(f"{f.name} is a probability, got {value!r}")
        total = sum(getattr(self, name) for name in _REQUEST_FAULTS)
        if total > 1 + 1e-9:
            raise ValueError(f"request-level fault probabilities sum to {total} > 1")


class ProxyEvent(NamedTuple):
    """One PutRecords request seen by the proxy."""

    kind: str
    n_entries: int
    records: list[dict[str, Any]] | None


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


class FaultProxy:
    """A fault-injecting reverse HTTP/1.1 proxy running in a background thread.

    ``upstream_url`` is an ``http://host:port`` base URL. ``seed`` seeds the
    :class:`random.Random` behind every fault decision. ``faults`` are initial
    :class:`Faults` settings. Use as a context manager, or call :meth:`start` /
    :meth:`close`.
    """

    def __init__(
        self,
        upstream_url: str,
        *,
        seed: int | None = 0,
        host: str = "127.0.0.1",
        port: int = 0,
        **faults: float,
    ) -> None:
        parts = urlsplit(upstream_url)
        if parts.scheme != "http" or not parts.hostname:
            raise ValueError(f"upstream must be an http:// URL, got {upstream_url!r}")
        self.upstream_url = upstream_url.rstrip("/")
        self._up_host = parts.hostname
        self._up_port = parts.port or 80
        self._bind = (host, port)
        self._rng = random.Random(seed)
        self._lock = threading.Lock()
        self._faults = Faults(**faults)
        self._forced: collections.deque[str] = collections.deque()
        self._events: list[ProxyEvent] = []
        self._stats: Counter[str] = Counter()
        self._errors: list[BaseException] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stop: asyncio.Event | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._address: tuple[str, int] | None = None

    # -- lifecycle ------------------------------------------------------------------------

    def start(self) -> FaultProxy:
        """Start the proxy thread; returns once the listening socket is bound."""
        if self._thread is not None:
            raise RuntimeError("FaultProxy already started")
        ready: concurrent.futures.Future[tuple[str, int]] = concurrent.futures.Future()
        self._thread = threading.Thread(
            target=self._run, args=(ready,), name=f"FaultProxy->{self.upstream_url}", daemon=True
        )
        self._thread.start()
        self._address = ready.result(timeout=10)
        return self

    def close(self) -> None:
        """Stop serving, reset every open connection and join the thread. Idempotent."""
        loop, stop, thread = self._loop, self._stop, self._thread
        if thread is None:
            return
        if loop is not None and stop is not None:
            with contextlib.suppress(RuntimeError):  # loop already closed
                loop.call_soon_threadsafe(stop.set)
        thread.join(timeout=10)
        if thread.is_alive():
            raise RuntimeError("FaultProxy thread did not stop")

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    @property
    def address(self) -> tuple[str, int]:
        if self._address is None:
            raise RuntimeError("FaultProxy not started")
        return self._address

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``: the endpoint URL to give the client."""
        host, port = self.address
        return f"http://{host}:{port}"

    # -- configuration and records ----------------------------------------------------------

    @property
    def faults(self) -> Faults:
        with self._lock:
            return self._faults

    @faults.setter
    def faults(self, faults: Faults) -> None:
        with self._lock:
            self._faults = faults

    def set_faults(self, **changes: float) -> Faults:
        """Change some fault settings (the others are kept); thread-safe, any time."""
        with self._lock:
            self._faults = dataclasses.replace(self._faults, **changes)
            return self._faults

    def force_next(self, *kinds: str) -> None:
        """The next PutRecords requests get these faults, one each, in order (before any
        random draw): a way to make sure each kind happens, whatever the timing."""
        for kind in kinds:
            if kind not in _REQUEST_FAULTS and kind != "throttle_entries":
                raise ValueError(f"unknown fault kind {kind!r}")
        with self._lock:
            self._forced.extend(kinds)

    def clear_faults(self) -> None:
        """No faults from now on: every request passes through."""
        self.faults = Faults()

    @property
    def events(self) -> list[ProxyEvent]:
        """A copy of the PutRecords event log, oldest first."""
        with self._lock:
            return list(self._events)

    @property
    def stats(self) -> Counter[str]:
        """A copy of the request counts by kind, plus ``throttled_entries``,
        ``connections`` and ``upstream_connects``."""
        with self._lock:
            return Counter(self._stats)

    @property
    def errors(self) -> list[BaseException]:
        """Unexpected exceptions raised while serving a connection (should stay empty)."""
        with self._lock:
            return list(self._errors)

    def ambiguous_records(self) -> list[dict[str, Any]]:
        """Upstream results (ShardId, SequenceNumber) of entries written by ``reset_after``
        or ``hang_after`` requests: written, but the client never got the answer."""
        return [
            rec
            for ev in self.events
            if ev.kind in ("reset_after", "hang_after") and ev.records is not None
            for rec in ev.records
            if rec.get("SequenceNumber")
        ]

    def reset_log(self) -> None:
        """Clear ``events``, ``stats`` and ``errors``."""
        with self._lock:
            self._events.clear()
            self._stats.clear()
            self._errors.clear()

    def _count_upstream_connect(self) -> None:
        with self._lock:
            self._stats["upstream_connects"] += 1

    def _record(self, kind: str, n_entries: int, records: list[dict[str, Any]] | None) -> None:
        with self._lock:
            self._stats[kind] += 1
            self._events.append(ProxyEvent(kind, n_entries, records))

    # -- the proxy thread ---------------------------------------------------------------------

    def _run(self, ready: concurrent.futures.Future[tuple[str, int]]) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            loop.run_until_complete(self._main(ready))
        except BaseException as e:
            if not ready.done():
                ready.set_exception(e)
            raise
        finally:
            with contextlib.suppress(Exception):
                loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    async def _main(self, ready: concurrent.futures.Future[tuple[str, int]]) -> None:
        self._stop = asyncio.Event()
        server = await asyncio.start_server(
            self._on_connect, self._bind[0], self._bind[1], limit=_MAX_HEAD, backlog=256
        )
        try:
            sockname = server.sockets[0].getsockname()
            ready.set_result((str(sockname[0]), int(sockname[1])))
            await self._stop.wait()
        finally:
            server.close()
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
            await server.wait_closed()

    async def _on_connect(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        with self._lock:
            self._stats["connections"] += 1
        upstream = _Upstream(self._up_host, self._up_port, self._count_upstream_connect)
        try:
            while True:
                request = await _read_request(reader)
                if request is None or not await self._serve(request, reader, writer, upstream):
                    break
            with contextlib.suppress(ConnectionError):
                await writer.drain()
        except (ConnectionError, asyncio.IncompleteReadError, _BadMessage):
            pass  # the client went away or spoke nonsense: drop the connection
        except asyncio.CancelledError:
            pass  # proxy closing
        except Exception as e:
            with self._lock:
                self._errors.append(e)
        finally:
            upstream.close()
            writer.transport.abort()
            self._tasks.discard(task)

    async def _serve(
        self,
        request: _Message,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        upstream: _Upstream,
    ) -> bool:
        """Handle one request; ``False`` when the client connection must end."""
        method = request.start_line.split(b" ", 1)[0]
        target = request.header(b"x-amz-target")
        if method != b"POST" or target is None or target.strip() != PUT_RECORDS_TARGET:
            with self._lock:
                self._stats["passthrough"] += 1
            return await self._forward(request, request.raw, method, writer, upstream, None)

        faults = self.faults
        try:
            doc = json.loads(request.body)
            entries = doc.get("Records") if isinstance(doc, dict) else None
        except ValueError:
            doc, entries = None, None
        n = len(entries) if isinstance(entries, list) else 0

        if faults.delay or faults.delay_jitter:
            await asyncio.sleep(faults.delay + self._rng.uniform(0, faults.delay_jitter))

        with self._lock:
            forced = self._forced.popleft() if self._forced else None
        fault = None
        if forced is not None:
            fault = forced if forced in _REQUEST_FAULTS else None
        else:
            u = self._rng.random()
            for name in _REQUEST_FAULTS:
                p = float(getattr(faults, name))
                if u < p:
                    fault = name
                    break
                u -= p

        if fault in ("http_500", "http_503"):
            self._record(fault, n, None)
            writer.write(_error_response(int(fault[-3:])))
            await writer.drain()
            return not request.wants_close()
        if fault == "reset_before":
            self._record(fault, n, None)
            _reset(writer)
            return False
        if fault in ("reset_after", "hang_after"):
            try:
                response = await upstream.exchange(request.raw, method)
            except (OSError, asyncio.IncompleteReadError, _BadMessage, _UpstreamClosed):
                return await self._upstream_failed(n, writer)
            self._record(fault, n, _json_records(response))
            if fault == "reset_after":
                _reset(writer)
                return False
            upstream.close()
            while await reader.read(65536):  # hang: answer nothing until the client leaves
                pass
            return False

        keep = list(range(n))
        if forced == "throttle_entries":
            keep = list(range(1, n))  # the first entry is throttled
        elif isinstance(doc, dict) and isinstance(entries, list) and faults.throttle_entries > 0:
            keep = [i for i in range(n) if self._rng.random() >= faults.throttle_entries]
        if not isinstance(entries, list) or len(keep) == n or not isinstance(doc, dict):
            return await self._forward(request, request.raw, method, writer, upstream, n)
        return await self._throttle(request, doc, entries, keep, method, writer, upstream)

    async def _throttle(
        self,
        request: _Message,
        doc: dict[str, Any],
        entries: list[Any],
        keep: list[int],
        method: bytes,
        writer: asyncio.StreamWriter,
        upstream: _Upstream,
    ) -> bool:
        n = len(entries)
        with self._lock:
            self._stats["throttled_entries"] += n - len(keep)
        if not keep:
            all_failed = [dict(_THROTTLED) for _ in range(n)]
            self._record("throttle_entries", n, all_failed)
            writer.write(_json_response(200, {"FailedRecordCount": n, "Records": all_failed}))
            await writer.drain()
            return not request.wants_close()
        body = json.dumps({**doc, "Records": [entries[i] for i in keep]}).encode()
        try:
            response = await upstream.exchange(request.with_body(body), method)
        except (OSError, asyncio.IncompleteReadError, _BadMessage, _UpstreamClosed):
            return await self._upstream_failed(n, writer)
        got = _json_records(response)
        if got is None or len(got) != len(keep):
            # The upstream refused the request as a whole: hand that back unchanged.
            self._record("throttle_entries", n, None)
            writer.write(response.raw)
            await writer.drain()
            return not (request.wants_close() or response.wants_close())
        records: list[dict[str, Any]] = [dict(_THROTTLED) for _ in range(n)]
        for slot, rec in zip(keep, got, strict=True):
            records[slot] = rec
        answer = json.loads(response.body)
        answer["FailedRecordCount"] = sum(1 for r in records if r.get("ErrorCode"))
        answer["Records"] = records
        payload = json.dumps(answer, separators=(",", ":")).encode()
        replace: dict[str, bytes] = {}
        if response.header(b"x-amz-crc32") is not None:
            replace["x-amz-crc32"] = str(zlib.crc32(payload)).encode()
        self._record("throttle_entries", n, records)
        writer.write(response.with_body(payload, **replace))
        await writer.drain()
        return not (request.wants_close() or response.wants_close())

    async def _forward(
        self,
        request: _Message,
        raw: bytes,
        method: bytes,
        writer: asyncio.StreamWriter,
        upstream: _Upstream,
        n_entries: int | None,
    ) -> bool:
        """Forward ``raw`` and relay the answer unchanged; logs a ``forward`` event when
        ``n_entries`` is given (a PutRecords request)."""
        try:
            response = await upstream.exchange(raw, method)
        except (OSError, asyncio.IncompleteReadError, _BadMessage, _UpstreamClosed):
            return await self._upstream_failed(n_entries, writer)
        if n_entries is not None:
            self._record("forward", n_entries, _json_records(response))
        writer.write(response.raw)
        await writer.drain()
        return not (request.wants_close() or response.wants_close())

    async def _upstream_failed(self, n_entries: int | None, writer: asyncio.StreamWriter) -> bool:
        """Answer 502 and close: the upstream could not be reached or broke mid-answer."""
        if n_entries is None:
            with self._lock:
                self._stats["upstream_error"] += 1
        else:
            self._record("upstream_error", n_entries, None)
        writer.write(_error_response(502))
        await writer.drain()
        return False
