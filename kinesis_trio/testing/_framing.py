"""The fake's HTTP framing, sans IO, and the fake as an in-memory httpx transport.

The framing rules (which requests are refused and how, the body cap, ``Expect:
100-continue``, the answers' bytes) live in one class, :class:`_Exchange`, which both the
socket server (``_http``) and the in-memory connections of :class:`FakeTransport` drive.
Every request refused at the HTTP level gets an answer in the service's JSON error shape
(status, ``Content-Type: application/x-amz-json-1.1``, ``{"__type": ..., "message": ...}``,
``x-amzn-RequestId``) with ``Connection: close``, and the connection is then closed:

- HTTP that h11 cannot parse: h11's status (400; 431 for a head over 64 KiB; 501 for a
  transfer coding other than chunked), ``SerializationException``;
- both ``Content-Length`` and ``Transfer-Encoding`` (RFC 9112 §6.1, request smuggling): 400
  ``SerializationException``;
- a method other than POST (GET, CONNECT, ...): 405 ``UnknownOperationException`` with
  ``Allow: POST``;
- a body over the cap (declared or counted): 413 ``ValidationException``.

A CBOR request (the Java SDKs' default) is answered 400 ``SerializationException`` with a
hint, and the connection kept: its framing was fine.

It knows the fake only as :class:`Served` (what it calls), so the fake's module can build
its transport from here without the two importing each other.
"""

from __future__ import annotations

import http
from collections.abc import AsyncIterator, Sequence
from typing import Protocol

import anyio
import anyio.abc
import anyio.lowlevel
import h11
import httpx

from .._logging import get_logger

__all__ = ["FakeTransport", "Served"]

_log = get_logger("kinesis_trio.local")
#: Request heads (the request line and headers) larger than this are refused (431).
_MAX_HEADERS = 64 * 1024
#: Response headers beside the fake's own (``x-amzn-RequestId``).
_CONTENT_TYPE = "application/x-amz-json-1.1"
_CBOR_HINT = (
    "send JSON (AWS SDK for Java 2.x: -Daws.cborEnabled=false or CBOR_ENABLED=false; "
    "1.x: -Dcom.amazonaws.sdk.disableCbor=true or AWS_CBOR_DISABLE=true)"
)


class Served(Protocol):
    """What the framing asks of the fake it serves (``FakeKinesis``)."""

    @property
    def max_request_size(self) -> int:
        """The largest PutRecords request the fake takes, in bytes of records."""
        ...

    async def _handle(self, request: httpx.Request) -> httpx.Response: ...

    def _upload_delay(self, nbytes: int) -> float:
        """How long ``nbytes`` sent now take to reach the fake (a slow uplink)."""
        ...

    def _error(self, status: int, code: str, message: str) -> httpx.Response: ...


def _max_body(fake: Served) -> int:
    """The body cap: a whole PutRecords request of the fake's largest size, base64 and JSON
    around it."""
    return fake.max_request_size * 4 // 3 + 1024 * 1024


class _Exchange:
    """One connection's HTTP framing, sans IO: bytes in (:meth:`receive_data`), steps out.

    :meth:`next` says what to do next:

    - ``h11.NEED_DATA``: more bytes are needed (``b""`` for the client's end of stream);
    - ``bytes``: write them, then ask again, unless :attr:`closing` (a refusal: write it,
      then close the connection);
    - an ``httpx.Request``: a whole request for the fake; write :meth:`answer`'s bytes;
    - ``None``: the connection is over (the client closed it or left mid-request).
    """

    def __init__(self, fake: Served, max_body: int) -> None:
        self.fake = fake
        self.max_body = max_body
        self.h11 = h11.Connection(h11.SERVER, max_incomplete_event_size=_MAX_HEADERS)
        #: the answer written closes the connection (a refusal, or the client asked)
        self.closing = False
        self._head: h11.Request | None = None
        self._chunks: list[bytes] = []
        self._size = 0
        self._eof = False

    def receive_data(self, data: bytes) -> None:
        if not data:
            self._eof = True
        self.h11.receive_data(data)

    @property
    def reading_body(self) -> bool:
        """A request's head was read (and accepted), its body not yet whole."""
        return self._head is not None

    @property
    def mid_request(self) -> bool:
        """Some of a request arrived and it is not whole yet."""
        if self._head is not None:
            return True
        return self.h11.their_state is h11.IDLE and self._buffered

    @property
    def _buffered(self) -> bool:
        """Bytes received and not parsed yet."""
        return bool(self.h11.trailing_data[0])

    def next(self) -> httpx.Request | bytes | type[h11.NEED_DATA] | None:
        try:
            while True:
                event = self.h11.next_event()
                if event is h11.NEED_DATA:
                    return h11.NEED_DATA
                if isinstance(event, h11.Request):
                    refused = self._check(event)
                    if refused is not None:
                        return refused
                    self._head, self._chunks, self._size = event, [], 0
                    if self.h11.they_are_waiting_for_100_continue and not self._buffered:
                        return self._write([h11.InformationalResponse(status_code=100, headers=[])])
                elif isinstance(event, h11.Data) and self._head is not None:
                    self._size += len(event.data)
                    if self._size > self.max_body:
                        return self._too_large()
                    self._chunks.append(bytes(event.data))
                elif isinstance(event, h11.EndOfMessage) and self._head is not None:
                    head, body = self._head, b"".join(self._chunks)
                    self._head, self._chunks = None, []
                    return self._to_request(head, body)
                else:  # closed, or the client went away mid-request (PAUSED: not ours)
                    return None
        except h11.RemoteProtocolError as exc:
            if self._eof:  # the client hung up mid-request: nobody to answer
                return None
            status = exc.error_status_hint
            return self.refuse(status, "SerializationException", f"bad HTTP request: {exc}")

    def _check(self, head: h11.Request) -> bytes | None:
        """The refusal of a request's head, if it is refused."""
        names = {name for name, _ in head.headers}
        if b"content-length" in names and b"transfer-encoding" in names:
            return self.refuse(
                400,
                "SerializationException",
                "a request with both Content-Length and Transfer-Encoding is refused",
            )
        if head.method != b"POST":
            method = head.method.decode("latin-1")
            return self.refuse(
                405,
                "UnknownOperationException",
                f"{method} is not supported: Kinesis operations are POSTed",
                [("Allow", "POST")],
            )
        length = next((v for k, v in head.headers if k == b"content-length"), None)
        if length is not None and int(length) > self.max_body:
            return self._too_large()
        return None

    def _too_large(self) -> bytes:
        message = f"request body over {self.max_body:,} bytes"
        return self.refuse(413, "ValidationException", message)

    def _to_request(self, head: h11.Request, content: bytes) -> httpx.Request | bytes:
        """The request h11 read, as the fake's handler takes it (or the answer refusing it)."""
        headers = [(k.decode("latin-1"), v.decode("latin-1")) for k, v in head.headers]
        if any(k.lower() == "content-type" and "cbor" in v.lower() for k, v in headers):
            # The Java SDKs send CBOR to Kinesis by default; this engine speaks JSON 1.1 only.
            _log.warning("local_kinesis_cbor_refused", hint=_CBOR_HINT)
            message = f"CBOR is not supported: {_CBOR_HINT}"
            return self.answer(self.fake._error(400, "SerializationException", message))
        host = next((v for k, v in headers if k.lower() == "host"), "localhost")
        try:
            return httpx.Request(
                head.method.decode("ascii"),
                f"http://{host}{head.target.decode('latin-1')}",
                headers=headers,
                content=content,
            )
        except httpx.InvalidURL as exc:  # a Host (or target) no URL can have
            return self.refuse(400, "SerializationException", f"bad HTTP request: {exc}")

    def answer(self, response: httpx.Response) -> bytes:
        """The bytes of the fake's ``response`` to the request :meth:`next` gave."""
        data = self._write(_events(response))
        if not self.closing:
            self.h11.start_next_cycle()
        return data

    def answer_head(self, response: httpx.Response) -> bytes:
        """The head of a streamed ``response`` (a hook's whose body is an async iterator):
        chunked, its body to follow in :meth:`answer_part`, its end in :meth:`answer_end`."""
        headers = [
            (k, v)
            for k, v in response.headers.items()
            if k.lower() not in ("content-length", "transfer-encoding")
        ]
        head = h11.Response(
            status_code=response.status_code, headers=headers, reason=_reason(response)
        )
        return self._write([head])

    def answer_part(self, data: bytes) -> bytes:
        """A piece of a streamed answer's body."""
        return self._write([h11.Data(data=data)]) if data else b""

    def answer_end(self) -> bytes:
        """The end of a streamed answer."""
        data = self._write([h11.EndOfMessage()])
        if not self.closing:
            self.h11.start_next_cycle()
        return data

    def refuse(
        self,
        status: int,
        code: str,
        message: str,
        headers: Sequence[tuple[str, str]] = (),
    ) -> bytes:
        """A JSON error answer closing the connection (:attr:`closing` is then set)."""
        _log.debug("local_kinesis_request_refused", status=status, error_code=code)
        self.closing = True
        response = self.fake._error(status, code, message)
        events = _events(response, [*headers, ("Connection", "close")])
        try:
            return self._write(events)
        except h11.LocalProtocolError:  # h11 cannot answer here: just close
            return b""

    def timed_out(self) -> bytes:
        """What to write when the client stalled: a 408 mid-request, else nothing."""
        if not self.mid_request:
            self.closing = True
            return b""
        message = "the request was not received in time"
        return self.refuse(408, "RequestTimeoutException", message)

    def _write(self, events: list[h11.Event]) -> bytes:
        data = b"".join(self.h11.send(event) or b"" for event in events)
        if self.h11.our_state is h11.MUST_CLOSE:
            self.closing = True
        return data


def _events(response: httpx.Response, extra: Sequence[tuple[str, str]] = ()) -> list[h11.Event]:
    body = response.content
    headers = [
        (k, v)
        for k, v in response.headers.items()
        if k.lower() not in ("content-length", "content-type", "transfer-encoding")
    ]
    headers += [("Content-Type", _CONTENT_TYPE), ("Content-Length", str(len(body))), *extra]
    return [
        h11.Response(status_code=response.status_code, headers=headers, reason=_reason(response)),
        h11.Data(data=body),
        h11.EndOfMessage(),
    ]


def _reason(response: httpx.Response) -> bytes:
    try:
        return http.HTTPStatus(response.status_code).phrase.encode("ascii")
    except ValueError:
        return b""


class FakeTransport(httpx.AsyncBaseTransport):
    """The fake as a transport (``FakeKinesis.transport()``).

    The package's clients open in-memory connections with it (:meth:`open_stream`): their
    own pool and h11 framing write each request as bytes, and the fake's h11 server at the
    far end reads it and writes its answer as bytes, as over a socket, so in-process tests
    run the same HTTP path as a real endpoint. Any other httpx client calls the fake
    directly (:meth:`handle_async_request`, as ``httpx.MockTransport`` would).
    """

    def __init__(self, fake: Served) -> None:
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
        return _MemoryConnection(self._fake, _max_body(self._fake))


class _MemoryConnection(anyio.abc.ByteStream):
    """One in-memory connection: the bytes the client sends go into the fake's h11 server;
    the client's ``receive`` runs the server (in the client's task) until it has answer
    bytes. A request the client has not finished sending, or a ``hang_*`` fault, waits
    until the client gives up (its deadline), as a real endpoint would. The framing rules
    are the socket server's (:class:`_Exchange`); there are no server-side timeouts."""

    def __init__(self, fake: Served, max_body: int) -> None:
        self._fake = fake
        self._exchange = _Exchange(fake, max_body)
        self._out = bytearray()
        self._eof = False  # the server closed its side (after what is in ``_out``)
        self._reset = False  # the server reset the connection
        self._closed = False  # the client closed it
        #: the body of a streamed answer still to come (a hook's ``httpx.Response`` whose
        #: content is an async iterator: a trickle, an answer that never ends)
        self._body: AsyncIterator[bytes] | None = None

    async def send(self, item: bytes) -> None:
        delay = self._fake._upload_delay(len(item))
        if delay > 0:
            await anyio.sleep(delay)  # the uplink carries it (returns as a socket would)
        else:
            await anyio.lowlevel.checkpoint()
        if self._closed:
            raise anyio.ClosedResourceError
        if self._reset or self._eof:
            raise anyio.BrokenResourceError
        self._exchange.receive_data(bytes(item))

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
        self._exchange.receive_data(b"")

    async def aclose(self) -> None:
        self._closed = True

    async def _serve(self) -> None:
        """One step of the server: answer bytes (an answer, a refusal, a 100 Continue), or
        the end of the connection (closed or reset)."""
        exchange = self._exchange
        if self._body is not None:
            try:
                piece = await self._body.__anext__()
            except StopAsyncIteration:
                self._body = None
                self._out += exchange.answer_end()
            else:
                self._out += exchange.answer_part(piece)
            if exchange.closing:
                self._eof = True
            return
        try:
            step = exchange.next()
            if step is h11.NEED_DATA:
                await anyio.sleep_forever()  # the client waits on a request it never ended
            if step is None:
                self._eof = True
                return
            if not isinstance(step, bytes):
                assert isinstance(step, httpx.Request)
                try:
                    response = await self._fake._handle(step)
                except httpx.ReadError:  # a reset_* fault
                    self._reset = True
                    return
                try:
                    response.content  # noqa: B018 - a streamed answer has none yet
                except httpx.ResponseNotRead:
                    self._body = response.aiter_raw()
                    step = exchange.answer_head(response)
                else:
                    step = exchange.answer(response)
        except h11.LocalProtocolError:  # an answer h11 refuses to write: hang up
            self._eof = True
            return
        self._out += step
        if exchange.closing:
            self._eof = True
