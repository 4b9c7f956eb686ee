"""The local engine's HTTP server against careless and hostile clients (raw sockets).

Refusals in the service's JSON error shape (malformed HTTP, other methods, Content-Length
with Transfer-Encoding, bodies over the cap) on the socket server and on the in-memory
connections alike; ``Expect: 100-continue``; stalled and idle connections (timeouts of a
fraction of a second); the connection cap; running out of file descriptors.
"""

from __future__ import annotations

import errno
import gc
import itertools
import json
import logging
import os
import socket
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

import anyio
import anyio.abc
import anyio.lowlevel
import pytest
from trio.testing import MockClock

from kinesis_trio.testing import FakeKinesis, _http
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


@pytest.mark.parametrize(
    "stalled", [head(length=2)[:40], head(length=100) + b"{}"], ids=["mid-head", "mid-body"]
)
async def test_a_stalled_request_gets_408_and_is_closed(stalled: bytes) -> None:
    fake = FakeKinesis()
    async with socket_server(fake, request_timeout=0.2) as connect:
        client = await connect()
        start = anyio.current_time()
        await client.send(stalled)
        # refused at its timeout: not before it (a machine's slowness can only add to that)
        [refusal] = await client.until_closed(within=10)
        assert anyio.current_time() - start > 0.15
    assert refusal.error() == (408, "RequestTimeoutException")
    assert refusal.headers["connection"] == "close"
    assert fake.calls == []


async def test_trickling_bytes_does_not_extend_the_request_timeout() -> None:
    fake = FakeKinesis()
    async with socket_server(fake, request_timeout=0.25) as connect:
        client = await connect()

        async def trickle() -> None:
            for byte in post():  # about 300 bytes: 12 s at this pace
                await client.send(bytes([byte]))
                await anyio.sleep(0.04)

        start = anyio.current_time()
        async with anyio.create_task_group() as tg:
            tg.start_soon(trickle)
            refusal = await client.answer(within=6)
            tg.cancel_scope.cancel()
        # well before the trickle's end (12 s), with room for a busy machine's slowness
        assert anyio.current_time() - start < 6.0
    assert refusal.error() == (408, "RequestTimeoutException")


async def test_each_request_on_a_kept_connection_gets_the_whole_request_timeout() -> None:
    fake = FakeKinesis()
    # (seconds, not tenths: a busy machine's late wake-up must not end the second request)
    async with socket_server(fake, request_timeout=2.0) as connect:
        client = await connect()
        cbor = post().replace(JSON_TYPE.encode(), b"application/x-amz-cbor-1.1")
        await client.send(cbor)  # refused with a hint, the connection kept
        refusal = await client.answer()
        assert refusal.error() == (400, "SerializationException")
        assert b"aws.cborEnabled=false" in refusal.body and "connection" not in refusal.headers
        await anyio.sleep(1.5)
        request = post()
        await client.send(request[:20])  # its clock starts here, not at the first request
        await anyio.sleep(1.0)
        await client.send(request[20:])
        assert (await client.answer()).status == 200


async def test_an_idle_connection_is_closed_without_an_answer() -> None:
    fake = FakeKinesis()
    async with socket_server(fake, idle_timeout=0.2) as connect:
        fresh = await connect()  # never sends a byte
        used = await connect()
        await used.send(post())
        assert (await used.answer()).status == 200
        start = anyio.current_time()
        assert await used.until_closed(within=10) == []
        assert await fresh.until_closed(within=10) == []
        assert anyio.current_time() - start > 0.15  # closed at its timeout, not before


async def test_the_timeouts_do_not_cut_a_request_being_served() -> None:
    fake = FakeKinesis()
    fake.create_stream("s")
    async with socket_server(fake, request_timeout=0.05, idle_timeout=0.05) as connect:
        fake.fail_next(1, "hang_before")
        client = await connect()
        entry = {"StreamName": "s", "Records": [{"Data": "aGk=", "PartitionKey": "k"}]}
        await client.send(post("PutRecords", json.dumps(entry).encode()))
        with anyio.move_on_after(0.3) as waited:
            await client.until_closed()  # the hung request holds the connection open
        assert waited.cancelled_caught and client.pending == b""
    assert [e.kind for e in fake.fault_events] == ["hang_before"]


async def test_at_the_connection_cap_an_idle_connection_makes_room() -> None:
    """Finding 1's other half: idle connections must not starve new clients. At the cap, a
    new client closes the connection idle the longest (as a busy web server drops idle
    keep-alive connections) and is served at once."""
    fake = FakeKinesis()
    async with socket_server(fake, max_connections=2) as connect:
        first, second = await connect(), await connect()
        for client in (first, second):  # both served, both kept open, now idle
            await client.send(post())
            assert (await client.answer()).status == 200
        await anyio.sleep(0.01)
        third = await connect()
        await third.send(post())
        assert (await third.answer()).status == 200  # served, not queued
        assert await first.until_closed() == []  # the oldest idle one was closed for it
        await second.send(post())  # the other goes on
        assert (await second.answer()).status == 200


async def test_at_the_connection_cap_without_idle_ones_new_clients_wait() -> None:
    """Connections in the middle of a request are not closed for a newcomer: it waits in
    the listen backlog until one ends, then is served."""
    fake = FakeKinesis()
    async with socket_server(fake, max_connections=2) as connect:
        first, second = await connect(), await connect()
        for client in (first, second):
            await client.send(b"POST / HTTP/1.1\r\n")  # half a head: mid-request
        await anyio.sleep(0.01)
        third = await connect()  # the kernel queues it; its request waits
        await third.send(post())
        with anyio.move_on_after(0.1) as waited:
            await third.answer()
        assert waited.cancelled_caught
        await first.stream.aclose()
        assert (await third.answer()).status == 200
        await second.send(post()[len(b"POST / HTTP/1.1\r\n") :])  # the rest of its request
        assert (await second.answer()).status == 200


def _limit_leaving(free: int) -> int:
    """The RLIMIT_NOFILE under which exactly ``free`` file descriptors can still be opened."""
    listed = (int(name) for name in os.listdir("/proc/self/fd"))
    taken = set()
    for fd in listed:  # less the directory's own descriptor, closed by now
        try:
            os.fstat(fd)
        except OSError:
            continue
        taken.add(fd)
    fd = count = 0
    while True:
        if fd not in taken:
            count += 1
            if count == free:
                return fd + 1
        fd += 1


async def _answer_on(sock: socket.socket) -> bytes:
    """The answer to a request sent on a plain (pre-made) socket."""
    sock.setblocking(False)
    received = b""
    with anyio.fail_after(5):
        while not parse(received)[0]:
            try:
                received += sock.recv(65536)
            except BlockingIOError:
                await anyio.wait_readable(sock)
    return received


class Watch(logging.Handler):
    """Sets an event when a log record naming ``event`` comes."""

    def __init__(self, event: str) -> None:
        super().__init__()
        self.event = event
        self.seen = anyio.Event()

    def emit(self, record: logging.LogRecord) -> None:
        if self.event in record.getMessage():
            self.seen.set()


@asynccontextmanager
async def watching(event: str) -> AsyncIterator[Watch]:
    watch = Watch(event)
    logger = logging.getLogger("kinesis_trio.local")
    logger.addHandler(watch)
    try:
        yield watch
    finally:
        logger.removeHandler(watch)


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="counts descriptors in /proc")
async def test_running_out_of_file_descriptors_does_not_stop_the_server(
    caplog: pytest.LogCaptureFixture,
) -> None:
    resource = pytest.importorskip("resource")
    fake = FakeKinesis()
    async with serve(fake) as local:
        # The clients' sockets exist before the limit drops: only the server's accept()s
        # need new descriptors, and four are left for them.
        clients = [socket.socket() for _ in range(10)]
        gc.collect()  # sockets earlier tests left to the collector close now, not mid-test
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        with caplog.at_level(logging.WARNING, logger="kinesis_trio.local"):
            try:
                resource.setrlimit(resource.RLIMIT_NOFILE, (_limit_leaving(4), hard))
                async with watching("local_kinesis_accept_failed") as failed:
                    for client in clients:  # the kernel completes each; the server takes 4
                        client.connect((local.host, local.port))
                    with anyio.fail_after(5):
                        await failed.seen.wait()
                async with watching("local_kinesis_accept_resumed") as resumed:
                    for client in clients[:4]:  # four served connections close...
                        client.close()
                    clients[6].sendall(post())  # ...and a client queued meanwhile is served
                    assert parse(await _answer_on(clients[6]))[0][0].status == 200
                    with anyio.fail_after(5):
                        await resumed.seen.wait()
            finally:
                resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))
                for client in clients:
                    client.close()
        failures = [r for r in caplog.records if "local_kinesis_accept_failed" in r.getMessage()]
        assert failures[0].levelno == logging.WARNING and "EMFILE" in failures[0].getMessage()
        assert len(failures) <= 2  # not once per retry
        # The server still serves new clients.
        fresh = Client(await anyio.connect_tcp(local.host, local.port))
        await fresh.send(post())
        assert (await fresh.answer()).status == 200


async def test_tls_a_stalled_handshake_is_dropped_and_refusals_are_answered(
    tmp_path: Path,
) -> None:
    fake = FakeKinesis()
    context, cert = _http.self_signed_context(tmp_path)
    trusted = ssl.create_default_context(cafile=str(cert))
    # A request timeout (3 s) that makes the refused client's lingering (up to 2 s) tell
    # from "closed at once" on a busy machine (at 0.4 s, 0.3 s was the margin).
    async with serve(fake, ssl_context=context, request_timeout=3.0) as local:
        # (the clock read before the connection: the server's own clock starts at its
        # accept, which a busy loop may run well before this task goes on)
        start = anyio.current_time()
        silent = Client(await anyio.connect_tcp(local.host, local.port))  # no handshake

        async def connect() -> Client:
            stream = await anyio.connect_tcp(
                local.host, local.port, tls=True, ssl_context=trusted, tls_hostname="localhost"
            )
            return Client(stream)

        client = await connect()
        await client.send(post())
        assert (await client.answer()).status == 200
        client = await connect()
        refused = anyio.current_time()
        await client.send(b"GET / HTTP/1.1\r\nHost: local\r\n\r\n")
        [refusal] = await client.until_closed(within=10)  # closed at once, not after lingering
        assert refusal.error() == (405, "UnknownOperationException")
        assert anyio.current_time() - refused < 1.5
        assert await silent.until_closed(within=10) == []
        assert anyio.current_time() - start >= 2.95


class FloodedListener:
    """A listener whose ``accept()`` fails as a server out of file descriptors does."""

    def __init__(self, failures: int) -> None:
        self.failures = failures
        self.attempts: list[float] = []

    async def accept(self) -> object:
        await anyio.lowlevel.checkpoint()
        self.attempts.append(anyio.current_time())
        if len(self.attempts) == 1:  # one client gone before it was accepted: no matter
            raise OSError(errno.ECONNABORTED, os.strerror(errno.ECONNABORTED))
        if len(self.attempts) <= self.failures + 1:
            # asyncio raises the OSError; anyio on trio wraps it
            if len(self.attempts) % 2:
                raise OSError(errno.EMFILE, os.strerror(errno.EMFILE))
            raise anyio.BrokenResourceError from OSError(errno.ENFILE, os.strerror(errno.ENFILE))
        if len(self.attempts) == self.failures + 2:
            return object()
        await anyio.sleep_forever()
        raise AssertionError


@pytest.mark.parametrize(
    "anyio_backend",
    [("trio", {"clock": MockClock(autojump_threshold=0)}), "asyncio"],
    ids=["trio", "asyncio"],
)
async def test_accept_failures_back_off_and_are_logged_sparingly(
    anyio_backend: Any, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Virtual time on trio (the real pacing); on asyncio a thousandth of it, in real time."""
    unit = 1.0 if anyio_backend != "asyncio" else 0.001
    monkeypatch.setattr(_http, "_ACCEPT_BACKOFF", 0.1 * unit)
    monkeypatch.setattr(_http, "_ACCEPT_BACKOFF_MAX", 1.0 * unit)
    monkeypatch.setattr(_http, "_ACCEPT_LOG_EVERY", 10.0 * unit)
    listener = FloodedListener(failures=50)
    slots = anyio.Semaphore(4)
    accepted = anyio.Event()

    async def handle(stream: anyio.abc.ByteStream) -> None:
        slots.release()
        accepted.set()

    with caplog.at_level(logging.WARNING, logger="kinesis_trio.local"):
        async with anyio.create_task_group() as tg:
            accept = cast(Any, _http)._accept_forever
            flooded = cast(anyio.abc.SocketListener, listener)
            tg.start_soon(accept, flooded, slots, {}, tg, handle)
            with anyio.fail_after(1000 * unit):
                await accepted.wait()
            tg.cancel_scope.cancel()
    attempts = listener.attempts
    gaps = [b - a for a, b in itertools.pairwise(attempts[1:52])]  # failures, success
    if unit == 1.0:  # virtual time: the aborted connection is followed at once
        assert attempts[1] == attempts[0]
    for gap, backoff in zip(gaps, [0.1, 0.2, 0.4, 0.8, *[1.0] * 46], strict=True):
        assert gap >= 0.99 * backoff * unit
    elapsed = attempts[51] - attempts[1]
    assert elapsed >= 47 * unit
    messages = [r.getMessage() for r in caplog.records]
    failed = [m for m in messages if "local_kinesis_accept_failed" in m]
    assert "Too many open files" in failed[0] and "failures=1" in failed[0]
    assert not any("ECONNABORTED" in m for m in messages)
    # The first failure, then at most one every 10 s (with the count): not one per retry.
    assert 2 <= len(failed) <= 1 + elapsed / (10 * unit)
    assert [m for m in messages if "local_kinesis_accept_resumed" in m] == [
        next(m for m in messages if "failures=50" in m and "resumed" in m)
    ]
    assert slots.value == 4  # every slot back


async def test_serve_rejects_nonsense_limits() -> None:
    for options in ({"max_connections": 0}, {"request_timeout": 0}, {"idle_timeout": -1}):
        with pytest.raises(ValueError):
            async with serve(FakeKinesis(), **options):  # type: ignore[arg-type]
                pass


def test_the_endpoint_url() -> None:
    assert LocalEndpoint("127.0.0.1", 4567, tls=True).endpoint_url == "https://127.0.0.1:4567"


@pytest.mark.subprocess
@pytest.mark.integration
@pytest.mark.skipif(not hasattr(__import__("resource"), "prlimit"), reason="Linux prlimit")
def test_the_engine_with_256_descriptors_keeps_serving_300_careless_clients() -> None:
    """Finding 1 as a user meets it: ``kinesis-trio local`` under macOS's default
    ``ulimit -n`` of 256 (set on the running engine with prlimit), 300 clients that each
    make a request and stay connected. The engine used to exit with ``OSError: [Errno 24]
    Too many open files``; now every client is answered (idle ones are closed to make
    room), the engine logs it and goes on serving."""
    import resource

    from kinesis_trio.testing._emulators import LocalKinesis

    with LocalKinesis("python", args=["--streams", "s:1"]) as engine:
        assert engine.pid is not None
        _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        resource.prlimit(engine.pid, resource.RLIMIT_NOFILE, (256, hard))
        host, port = engine.endpoint_url.rsplit("/", 1)[1].split(":")
        clients: list[socket.socket] = []
        try:
            answered = 0
            for _ in range(300):
                sock = socket.create_connection((host, int(port)), timeout=10)
                clients.append(sock)
                sock.sendall(post())
                answer = b""
                while b"\r\n\r\n" not in answer:
                    chunk = sock.recv(65536)
                    assert chunk, "closed without an answer"
                    answer += chunk
                assert answer.startswith(b"HTTP/1.1 200 "), answer[:100]
                answered += 1
            assert answered == 300
            fresh = socket.create_connection((host, int(port)), timeout=10)
            clients.append(fresh)
            fresh.sendall(post("ListShards", b'{"StreamName": "s"}'))
            assert fresh.recv(65536).startswith(b"HTTP/1.1 200 ")
            assert engine._proc is not None and engine._proc.poll() is None  # still running
        finally:
            for sock in clients:
                sock.close()
        log = engine.output_tail(200)
        assert "local_kinesis_accept_failed" in log and "Too many open files" in log
