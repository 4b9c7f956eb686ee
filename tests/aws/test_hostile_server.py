"""The producer against a hostile HTTP endpoint: every way a PutRecords answer can lie.

A raw TCP server on loopback reads each request with h11 and answers ListShards and
DescribeStreamSummary well. It keeps every PutRecords' records (the request was processed),
then writes the case's raw bytes (not through h11) and closes the connection, resets it or
leaves it open. The rule each case holds the producer to:

- No exception of any kind escapes ``async with Producer(...)``.
- A record is ok only on a well-formed 2xx whose JSON gives it a SequenceNumber: an ok
  outcome's sequence number is one the server sent in such an answer. The hostile answers
  carry a *trap*: a body that would confirm the records (with sequence numbers of their own)
  to a client that reads past what is wrong with the answer.
- Any other answer the request may have been processed under is ambiguous: the records are
  retried, and if they end failed they end ``possible_duplicate`` (with an error code that
  is not a Python exception's name). Only a well-formed error the service sent fails them
  for good (the ``400-validation`` control case).
- With the hostile answer first and good ones after, every record ends ok with a good
  answer's sequence number, its first attempt marked ambiguous.
- A connection that carried a doubtful answer is never used again (the server counts the
  requests that come on one).

Real sockets mean real time: small timeouts, a short ``record_ttl`` when every answer is
hostile, three records.
"""

from __future__ import annotations

import base64
import builtins
import json
import socket
import struct
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.abc
import h11
import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kinesis_trio
from kinesis_trio import Outcome, Producer, ProducerConfig, RecordResult
from tests.support.helpers import CREDS

pytestmark = pytest.mark.anyio

STREAM = "s"
SHARD = "shardId-000000000000"
#: sequence numbers of the server's well-formed answers, and of the traps in hostile ones
GOOD_PREFIX = "4960"
TRAP_PREFIX = "4999"
JSON_TYPE = (b"Content-Type", b"application/x-amz-json-1.1")
OK_LINE = b"HTTP/1.1 200 OK"
#: what a PutRecords' first answer(s) are: every one, or only the first
ALWAYS, FIRST = "always", "first"


def _exception_names(*modules: Any) -> frozenset[str]:
    return frozenset(
        name
        for module in modules
        for name, value in vars(module).items()
        if isinstance(value, type) and issubclass(value, BaseException)
    )


#: Names an attempt's or a result's error code must not be: a Python exception leaking out
#: of the HTTP layer as a code (``ValueError``, ``RecursionError``, h11's or httpx's errors;
#: kinesis_trio's own exceptions, two of which share httpx's names, are not leaks).
PYTHON_EXCEPTION_NAMES = _exception_names(builtins, h11, httpx, json) - _exception_names(
    kinesis_trio
)


# -- the server ------------------------------------------------------------------------------


class Bodies:
    """JSON bodies of PutRecords answers for ``n`` entries: a well-formed one (its sequence
    numbers are noted as confirmed) and a trap (a well-formed body with trap numbers)."""

    def __init__(self, server: HostileServer) -> None:
        self._server = server

    def good(self, n: int) -> bytes:
        numbers = [self._server.next_number(GOOD_PREFIX) for _ in range(n)]
        self._server.confirmed.update(numbers)
        return records_body(numbers)

    def trap(self, n: int) -> bytes:
        return records_body([self._server.next_number(TRAP_PREFIX) for _ in range(n)])


def records_body(numbers: list[str]) -> bytes:
    entries = [{"SequenceNumber": number, "ShardId": SHARD} for number in numbers]
    return json.dumps({"FailedRecordCount": 0, "Records": entries}).encode()


#: A case's answer to a PutRecords of ``n`` entries.
Builder = Callable[[Bodies, int], bytes]


@dataclass(frozen=True)
class Case:
    """One hostile PutRecords answer.

    ``after``: what the server does once it is written: leave the connection ``open``,
    ``close`` it, or ``reset`` it (RST). ``kind``: ``ambiguous`` (nothing in it can be
    used), ``usable`` (a well-formed answer confirming the records, on a connection that must
    not be used again), or ``definitive`` (a well-formed error of the service).
    """

    answer: Builder
    after: str = "open"
    kind: str = "ambiguous"
    #: a well-framed answer with one entry per record (each entry judged on its own): the
    #: connection may be used again
    reusable: bool = False


@dataclass
class Put:
    """One PutRecords the server received."""

    connection: int
    data: list[bytes]
    hostile: bool


@dataclass(repr=False)
class HostileServer:
    port: int
    case: Case | None = None
    #: how many PutRecords get the case's answer (None: all of them); the others a good one
    hostile_puts: int | None = None
    connections: int = 0
    puts: list[Put] = field(default_factory=list)
    #: sequence numbers the server sent in well-formed answers
    confirmed: set[str] = field(default_factory=set)
    #: connections that got a request after a doubtful answer was written on them
    reused_after_doubt: list[int] = field(default_factory=list)
    #: what went wrong in the server itself (a test bug, not the producer's)
    errors: list[BaseException] = field(default_factory=list)
    _numbers: int = 0

    def __repr__(self) -> str:
        return f"<HostileServer port={self.port} connections={self.connections}>"

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def script(self, case: Case | None, hostile_puts: int | None = None) -> None:
        """Answer PutRecords with ``case`` from now on (the first ``hostile_puts``)."""
        self.case = case
        self.hostile_puts = hostile_puts
        self.puts.clear()
        self.reused_after_doubt.clear()

    def next_number(self, prefix: str) -> str:
        self._numbers += 1
        return f"{prefix}{self._numbers:052d}"

    def received(self) -> list[bytes]:
        return [data for put in self.puts for data in put.data]

    def hostile_now(self) -> bool:
        hostile = sum(1 for p in self.puts if p.hostile)
        return self.case is not None and (self.hostile_puts is None or hostile < self.hostile_puts)


def _well_formed(connection: h11.Connection, status: int, body: dict[str, Any]) -> bytes:
    content = json.dumps(body).encode()
    out = connection.send(
        h11.Response(
            status_code=status,
            headers=[JSON_TYPE, (b"Content-Length", str(len(content)).encode())],
        )
    )
    out = (out or b"") + (connection.send(h11.Data(data=content)) or b"")
    out += connection.send(h11.EndOfMessage()) or b""
    connection.start_next_cycle()
    return out


def _answer_call(connection: h11.Connection, operation: str, request: Any) -> bytes:
    if operation == "DescribeStreamSummary":
        summary = {
            "StreamName": STREAM,
            "StreamARN": f"arn:aws:kinesis:us-east-1:000000000000:stream/{STREAM}",
            "StreamStatus": "ACTIVE",
            "StreamModeDetails": {"StreamMode": "PROVISIONED"},
            "RetentionPeriodHours": 24,
            "StreamCreationTimestamp": 1700000000.0,
            "EncryptionType": "NONE",
            "EnhancedMonitoring": [{"ShardLevelMetrics": []}],
            "OpenShardCount": 1,
            "ConsumerCount": 0,
        }
        return _well_formed(connection, 200, {"StreamDescriptionSummary": summary})
    if operation == "ListShards":
        shard = {
            "ShardId": SHARD,
            "HashKeyRange": {"StartingHashKey": "0", "EndingHashKey": str(2**128 - 1)},
            "SequenceNumberRange": {"StartingSequenceNumber": GOOD_PREFIX + "0" * 52},
        }
        return _well_formed(connection, 200, {"Shards": [shard]})
    return _well_formed(
        connection,
        400,
        {"__type": "UnknownOperationException", "message": f"not here: {operation}"},
    )


async def _next_request(
    stream: anyio.abc.SocketStream, connection: h11.Connection
) -> tuple[h11.Request, bytes] | None:
    """One whole request read with h11; None when the client closed the connection."""
    request: h11.Request | None = None
    body = bytearray()
    while True:
        event = connection.next_event()
        if event is h11.NEED_DATA:
            try:
                data = await stream.receive()
            except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
                data = b""
            connection.receive_data(data)
        elif isinstance(event, h11.Request):
            request = event
        elif isinstance(event, h11.Data):
            body += event.data
        elif isinstance(event, h11.EndOfMessage):
            assert request is not None
            return request, bytes(body)
        else:  # ConnectionClosed
            return None


async def _reset(stream: anyio.abc.SocketStream) -> None:
    """Close with an RST (SO_LINGER 0) rather than a FIN."""
    sock = stream.extra(anyio.abc.SocketAttribute.raw_socket)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    await anyio.aclose_forcefully(stream)


@asynccontextmanager
async def serve() -> AsyncIterator[HostileServer]:
    """A hostile Kinesis endpoint on 127.0.0.1, one task per connection."""
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    server = HostileServer(listener.extra(anyio.abc.SocketAttribute.local_port))
    bodies = Bodies(server)

    async def handle(stream: anyio.abc.SocketStream) -> None:
        index = server.connections
        server.connections += 1
        connection = h11.Connection(h11.SERVER)
        doubtful = False
        try:
            async with stream:
                while True:
                    got = await _next_request(stream, connection)
                    if got is None:
                        return
                    if doubtful:
                        server.reused_after_doubt.append(index)
                    request, content = got
                    target = dict(request.headers).get(b"x-amz-target", b"").decode()
                    operation = target.rpartition(".")[2]
                    body = json.loads(content)
                    if operation != "PutRecords":
                        await stream.send(_answer_call(connection, operation, body))
                        continue
                    data = [base64.b64decode(r["Data"]) for r in body["Records"]]
                    case = server.case if server.hostile_now() else None
                    server.puts.append(Put(index, data, case is not None))
                    if case is None:
                        await stream.send(_well_formed_put(connection, bodies, len(data)))
                        continue
                    await stream.send(case.answer(bodies, len(data)))
                    if case.after == "close":
                        return
                    if case.after == "reset":
                        await anyio.sleep(0.01)  # the answer's start reaches the client
                        await _reset(stream)
                        return
                    # The answer bypassed h11: a fresh parser reads what comes next.
                    leftover, closed = connection.trailing_data
                    connection = h11.Connection(h11.SERVER)
                    if leftover:  # (receive_data(b"") would mean the end of the stream)
                        connection.receive_data(leftover)
                    if closed:
                        connection.receive_data(b"")
                    doubtful = case.kind != "definitive" and not case.reusable
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            pass  # the client went away: what it made of the answer is the test's business
        except Exception as exc:
            server.errors.append(exc)

    async with listener, anyio.create_task_group() as tg:
        tg.start_soon(listener.serve, handle)
        try:
            yield server
        finally:
            tg.cancel_scope.cancel()


def _well_formed_put(connection: h11.Connection, bodies: Bodies, n: int) -> bytes:
    return _well_formed(connection, 200, json.loads(bodies.good(n)))


# -- the cases -------------------------------------------------------------------------------


def head(status_line: bytes, *fields: tuple[bytes, bytes]) -> bytes:
    return status_line + b"\r\n" + b"".join(n + b": " + v + b"\r\n" for n, v in fields) + b"\r\n"


def framed(status_line: bytes, body: bytes, *fields: tuple[bytes, bytes]) -> bytes:
    """An answer with a Content-Length (the fields after the length's)."""
    return head(status_line, JSON_TYPE, (b"Content-Length", b"%d" % len(body)), *fields) + body


def chunked(size_line: bytes, body: bytes, coding: bytes = b"chunked") -> bytes:
    """A 200 whose body is one chunk announced by ``size_line``, then the last chunk."""
    return (
        head(OK_LINE, JSON_TYPE, (b"Transfer-Encoding", coding))
        + size_line
        + b"\r\n"
        + body
        + b"\r\n0\r\n\r\n"
    )


def _hex(n: int) -> bytes:
    return b"%x" % n


def _content_length_5000_digits(b: Bodies, n: int) -> bytes:
    body = b.trap(n)
    digits = str(len(body)).rjust(5000, "0").encode()
    return head(OK_LINE, JSON_TYPE, (b"Content-Length", digits)) + body


def _chunk(size: Callable[[int], bytes], coding: bytes = b"chunked") -> Builder:
    def build(b: Bodies, n: int) -> bytes:
        body = b.trap(n)
        return chunked(size(len(body)), body, coding)

    return build


def _invalid_utf8(b: Bodies, n: int) -> bytes:
    body = b.trap(n)
    return framed(OK_LINE, body[:-1] + b', "Note": "\xff\xfe\xc3("}')


def _truncated(b: Bodies, n: int) -> bytes:
    body = b.trap(n)
    return framed(OK_LINE, body)[: -len(body) // 2]


def _headers_only(b: Bodies, n: int) -> bytes:
    body = b.trap(n)
    return framed(OK_LINE, body)[: -len(body)]


def _no_sequence_numbers(b: Bodies, n: int) -> bytes:
    entries = [{"ShardId": SHARD}] * n
    return framed(OK_LINE, json.dumps({"FailedRecordCount": 0, "Records": entries}).encode())


HTML = b"<html><head><title>502 Bad Gateway</title></head><body>nginx</body></html>"
VALIDATION = json.dumps(
    {
        "__type": "ValidationException",
        "message": "1 validation error detected: Value 's!' at 'streamName' failed to satisfy "
        "constraint: Member must satisfy regular expression pattern: [a-zA-Z0-9_.-]+",
    }
).encode()

CASES = [
    pytest.param(Case(lambda b, n: framed(OK_LINE, b"[" * 1000)), id="200-nested-1000"),
    pytest.param(
        Case(lambda b, n: framed(b"HTTP/1.1 500 Internal Server Error", b"[" * 1000)),
        id="500-nested-1000",
    ),
    pytest.param(Case(_content_length_5000_digits), id="content-length-5000-digits"),
    pytest.param(Case(_chunk(lambda size: b"0x" + _hex(size))), id="chunk-size-0x"),
    pytest.param(
        Case(_chunk(lambda size: b"0_" + b"_".join(bytes([c]) for c in _hex(size)))),
        id="chunk-size-underscores",
    ),
    pytest.param(
        Case(_chunk(lambda size: b"\x0b" + _hex(size) + b"\x0b")), id="chunk-size-vt-padded"
    ),
    pytest.param(Case(_chunk(_hex, b"chunked, chunked")), id="te-chunked-chunked"),
    pytest.param(
        Case(lambda b, n: framed(b"HTTP/1.1 204 No Content", b.trap(n))),
        id="204-content-length-json",
    ),
    pytest.param(
        Case(lambda b, n: head(b"HTTP/1.1 204 No Content") + b.trap(n)), id="204-json-after"
    ),
    pytest.param(
        Case(lambda b, n: framed(OK_LINE, b.trap(n), (b"X-Amzn-RequestId", b"abc\x00def"))),
        id="nul-in-header",
    ),
    pytest.param(
        Case(lambda b, n: framed(OK_LINE, b.trap(n), (b"X-Amzn-RequestId", b"abc\rdef"))),
        id="bare-cr-in-header",
    ),
    pytest.param(
        Case(
            lambda b, n: framed(
                OK_LINE, b.good(n), (b"Connection", b"close"), (b"Connection", b"keep-alive")
            ),
            kind="usable",
        ),
        id="connection-close-then-keep-alive",
    ),
    pytest.param(
        Case(lambda b, n: framed(OK_LINE, b.good(n)) + b"HTTP/1.1 200 OK\r\n", kind="usable"),
        id="bytes-after-answer",
    ),
    pytest.param(
        Case(lambda b, n: head(b"HTTP/1.1 099 Odd") + framed(OK_LINE, b.trap(n))),
        id="status-099",
    ),
    pytest.param(
        Case(
            lambda b, n: framed(
                b"HTTP/1.1 301 Moved Permanently", b.trap(n), (b"Location", b"http://127.0.0.1/")
            )
        ),
        id="301-json",
    ),
    pytest.param(
        Case(lambda b, n: framed(b"HTTP/1.1 302 Found", b.trap(n), (b"Location", b"/elsewhere"))),
        id="302-json",
    ),
    pytest.param(
        Case(lambda b, n: head(b"HTTP/1.1 100 Continue"), after="close"), id="100-then-close"
    ),
    pytest.param(
        Case(
            lambda b, n: (
                head(
                    b"HTTP/1.1 101 Switching Protocols",
                    (b"Connection", b"Upgrade"),
                    (b"Upgrade", b"h2c"),
                )
                + b.trap(n)
            ),
            after="close",
        ),
        id="101-switching-protocols",
    ),
    pytest.param(Case(lambda b, n: framed(OK_LINE, b"")), id="200-empty-body"),
    pytest.param(Case(lambda b, n: framed(OK_LINE, b"not json")), id="200-not-json"),
    pytest.param(Case(_invalid_utf8), id="200-invalid-utf8"),
    pytest.param(Case(lambda b, n: framed(OK_LINE, b"[" + b.trap(n) + b"]")), id="200-json-array"),
    pytest.param(
        Case(lambda b, n: framed(OK_LINE, b'{"FailedRecordCount": 0}')), id="200-records-missing"
    ),
    pytest.param(Case(lambda b, n: framed(OK_LINE, b.trap(n + 1))), id="200-records-too-many"),
    pytest.param(Case(lambda b, n: framed(OK_LINE, b.trap(n - 1))), id="200-records-too-few"),
    pytest.param(
        Case(_no_sequence_numbers, reusable=True), id="200-entries-without-sequence-number"
    ),
    pytest.param(Case(_truncated, after="close"), id="truncated-body-then-close"),
    pytest.param(Case(_headers_only, after="close"), id="headers-only-then-close"),
    pytest.param(
        Case(lambda b, n: framed(b"HTTP/1.1 2OO OK", b.trap(n)), after="close"),
        id="garbage-status-line",
    ),
    pytest.param(Case(_truncated, after="reset"), id="rst-mid-answer"),
    pytest.param(
        Case(
            lambda b, n: (
                head(
                    b"HTTP/1.1 502 Bad Gateway",
                    (b"Content-Type", b"text/html"),
                    (b"Content-Length", b"%d" % len(HTML)),
                )
                + HTML
            )
        ),
        id="502-html",
    ),
    pytest.param(
        Case(lambda b, n: framed(b"HTTP/1.1 400 Bad Request", VALIDATION), kind="definitive"),
        id="400-validation-control",
    ),
]


# -- the producer's side ---------------------------------------------------------------------


def producer_for(server: HostileServer, **config: Any) -> Producer:
    values: dict[str, Any] = {
        "aggregation_enabled": False,  # one entry per record: each gets its own number
        "record_max_buffered_time": 0.005,
        "request_timeout": 0.3,
        "connect_timeout": 2.0,  # a loaded machine may take a while; no case refuses connections
        "retry_backoff_base": 0.01,
        "retry_backoff_max": 0.05,
        "close_timeout": 5.0,
        "metrics_level": "none",
        **config,
    }
    return Producer(
        STREAM,
        region_name="us-east-1",
        endpoint_url=server.url,
        credentials=CREDS,
        config=ProducerConfig(**values),
    )


@dataclass
class Run:
    escaped: BaseException | None
    outcomes: list[Outcome]
    #: the data of the records put, in order (the probe's last, if any)
    data: list[bytes]


async def run_producer(
    server: HostileServer, *, records: int = 3, probe: bool = False, **config: Any
) -> Run:
    """Put ``records`` records and wait for them, then (``probe``) one more; whatever escapes
    the producer's block is caught and returned."""
    outcomes: list[Outcome] = []
    data = [b"record-%d" % i for i in range(records)]
    escaped: BaseException | None = None
    try:
        with anyio.fail_after(20):  # a hang shows as a TimeoutError that escaped
            async with producer_for(server, **config) as producer:
                for i, payload in enumerate(data):
                    outcomes.append(await producer.put(payload, f"key-{i}"))
                for outcome in outcomes:
                    await outcome.wait()
                if probe:
                    data.append(b"probe")
                    outcomes.append(await producer.put(b"probe", "key-probe"))
                    await outcomes[-1].wait()
    except Exception as exc:
        escaped = exc
    return Run(escaped, outcomes, data)


def check_nothing_escaped(run: Run, server: HostileServer) -> list[RecordResult]:
    assert run.escaped is None, f"{type(run.escaped).__name__} escaped: {run.escaped!r}"
    assert not server.errors, (
        f"the test server failed (or h11 refused a request): {server.errors!r}"
    )
    assert all(o.done() for o in run.outcomes)
    return [o.result() for o in run.outcomes]


def leaked_codes(result: RecordResult) -> list[str]:
    """Error codes of the result and its attempts that are a Python exception's name."""
    codes = [result.error_code, *(a.error_code for a in result.attempts)]
    return [c for c in codes if c in PYTHON_EXCEPTION_NAMES]


def show(result: RecordResult, server: HostileServer) -> str:
    """A result in one short line: ok (with whose sequence number) or its code, and its
    attempts (their codes: a run of the same code is said once, with its count)."""
    number = result.sequence_number
    if not result.ok:
        state = f"failed {result.error_code}"
    elif number in server.confirmed:
        state = "ok (a well-formed answer's number)"
    elif number is not None and number.startswith(TRAP_PREFIX):
        state = "ok (a trap's number)"
    else:
        state = f"ok (number {number!r})"
    codes = [
        "success" if a.success else f"{a.error_code}{' ambiguous' if a.ambiguous else ''}"
        for a in result.attempts
    ]
    runs: list[tuple[str, int]] = []
    for code in codes:
        if runs and runs[-1][0] == code:
            runs[-1] = (code, runs[-1][1] + 1)
        else:
            runs.append((code, 1))
    attempts = ", ".join(code if n == 1 else f"{code} x{n}" for code, n in runs)
    return f"{state}, attempts [{attempts}]"


def not_ok_problem(result: RecordResult, server: HostileServer) -> str | None:
    """Why ``result`` is not ok with a sequence number of a well-formed answer (or None)."""
    if not result.ok:
        return f"not ok: {show(result, server)}"
    if result.shard_id != SHARD or result.sequence_number not in server.confirmed:
        return f"ok with a sequence number no well-formed answer gave: {show(result, server)}"
    return None


class Problems:
    """Every rule a case breaks, each said once with the records it touched."""

    def __init__(self) -> None:
        self.seen: dict[str, list[str]] = {}

    def add(self, problem: str | None, key: str = "") -> None:
        if problem is not None:
            self.seen.setdefault(problem, []).append(key)

    def __bool__(self) -> bool:
        return bool(self.seen)

    def __str__(self) -> str:
        return "\n".join(
            f"- {problem}" + (f" [{', '.join(k for k in keys if k)}]" if any(keys) else "")
            for problem, keys in self.seen.items()
        )


# -- the tests -------------------------------------------------------------------------------


async def test_a_well_behaved_server_confirms_every_record_on_one_connection() -> None:
    """The baseline: well-formed answers confirm the records, and the connection is kept
    (so a request on a new connection after a hostile answer means something)."""
    async with serve() as server:
        run = await run_producer(server, probe=True)
    for result in check_nothing_escaped(run, server):
        assert not_ok_problem(result, server) is None, show(result, server)
        assert not result.possible_duplicate, show(result, server)
    assert server.connections == 1
    assert not server.reused_after_doubt


@pytest.mark.parametrize("mode", [ALWAYS, FIRST], ids=["always-hostile", "hostile-then-good"])
@pytest.mark.parametrize("case", CASES)
async def test_a_hostile_put_records_answer(case: Case, mode: str) -> None:
    always = mode == ALWAYS
    # when every answer is hostile the records must end soon; else they wait for the retry
    short = always and case.kind == "ambiguous"
    for ttl in (0.3, 3.0) if short else (3.0,):
        async with serve() as server:
            server.script(case, None if always else 1)
            # no retry follows a usable answer or a refusal: one more record shows the
            # connection
            run = await run_producer(server, probe=case.kind != "ambiguous", record_ttl=ttl)
        results = check_nothing_escaped(run, server)
        if server.puts:
            break
        # a loaded machine kept the records from going out within the short TTL (they
        # expired, failed, unsent): again with the long one, so the case is exercised
    assert server.puts and server.puts[0].hostile, "no PutRecords got the hostile answer"
    received = server.received()
    first = set(server.puts[0].data)  # the records the first hostile answer was for
    problems = Problems()
    if server.reused_after_doubt:
        problems.add(
            f"a connection that carried a doubtful answer was used again "
            f"({len(server.reused_after_doubt)} request(s) came on one; "
            f"{server.connections} connection(s) opened in all)"
        )
    for data, result in zip(run.data, results, strict=True):
        key, shown = data.decode(), show(result, server)
        if data not in received:
            problems.add("the server never got the record", key)
        leaked = leaked_codes(result)
        if leaked:
            problems.add(f"a Python exception's name as an error code {leaked}: {shown}", key)
        if case.kind == "usable":
            problems.add(not_ok_problem(result, server), key)
        elif case.kind == "definitive":
            if data in first or always:
                if result.ok or result.error_code != "ValidationException":
                    problems.add(f"not failed as ValidationException: {shown}", key)
                if result.possible_duplicate:
                    problems.add(f"a well-formed refusal made it ambiguous: {shown}", key)
            else:
                problems.add(not_ok_problem(result, server), key)
        elif always:
            if result.ok:
                problems.add(f"ok on an answer that cannot confirm it: {shown}", key)
            elif not result.possible_duplicate:
                problems.add(f"failed without possible_duplicate: {shown}", key)
        else:
            problems.add(not_ok_problem(result, server), key)
            if data in first:
                if received.count(data) < 2:
                    problems.add("not sent again after the hostile answer", key)
                attempt = result.attempts[0] if result.attempts else None
                if attempt is None or attempt.success or not attempt.ambiguous:
                    problems.add(f"the hostile answer's attempt is not ambiguous: {shown}", key)
    if case.kind == "definitive" and sum(1 for p in server.puts if set(p.data) & first) != 1:
        problems.add("records refused by a well-formed error were sent again")
    assert not problems, f"{len(problems.seen)} rule(s) broken:\n{problems}"


# -- any bytes at all (hypothesis) ------------------------------------------------------------


#: Content-Length values a lenient parser reads as the body's length
HOSTILE_LENGTHS: list[Callable[[int], bytes]] = [
    lambda n: str(n).rjust(5000, "0").encode(),
    lambda n: b"+%d" % n,
    lambda n: b"0x%x" % n,
    lambda n: b"%d, %d" % (n, n),
    lambda n: b"%d\x0b" % n,
]
#: chunk-size lines a lenient parser reads as the chunk's size
HOSTILE_CHUNK_SIZES: list[Callable[[int], bytes]] = [
    lambda n: b"0x" + _hex(n),
    lambda n: b"0_" + b"_".join(bytes([c]) for c in _hex(n)),
    lambda n: b"\x0b" + _hex(n) + b"\x0b",
    lambda n: b"+" + _hex(n),
]


@st.composite
def near_valid_answers(draw: st.DrawFn) -> bytes:
    """A valid status line, random header fields (some that matter), a random body: junk,
    a trap that confirms three records, or JSON that is nearly one; sometimes chunked."""
    status = draw(st.sampled_from([200, 200, 200, 204, 100, 101, 301, 400, 500, 502, 99]))
    trap = records_body([f"{TRAP_PREFIX}{i:052d}" for i in range(3)])
    body = draw(
        st.one_of(
            st.binary(max_size=120),
            st.just(trap),
            st.integers(0, len(trap)).map(lambda i: trap[:i]),
            st.sampled_from([b"", b"{}", b"[]", b"null", b'{"Records": {}}']),
            st.sampled_from([b"[", b"{", b'{"a":']).map(lambda nest: nest * 1000),
        )
    )
    fields = draw(
        st.lists(
            st.one_of(
                st.just((b"Content-Length", b"%d" % len(body))),
                st.binary(max_size=8).map(lambda v: (b"Content-Length", v)),
                st.sampled_from(HOSTILE_LENGTHS).map(lambda f: (b"Content-Length", f(len(body)))),
                st.sampled_from(
                    [
                        (b"Transfer-Encoding", b"chunked"),
                        (b"Transfer-Encoding", b"chunked, chunked"),
                        (b"Connection", b"close"),
                        (b"Connection", b"keep-alive"),
                        JSON_TYPE,
                    ]
                ),
                st.tuples(st.binary(min_size=1, max_size=10), st.binary(max_size=20)),
            ),
            max_size=5,
        )
    )
    if draw(st.booleans()):
        size = draw(
            st.one_of(
                st.just(_hex(len(body))),
                st.sampled_from(HOSTILE_CHUNK_SIZES).map(lambda f: f(len(body))),
                st.binary(max_size=6),
            )
        )
        body = size + b"\r\n" + body + b"\r\n0\r\n\r\n"
    return head(b"HTTP/1.1 %03d Reason" % status, *fields) + body


@pytest.fixture
async def fuzz_server(anyio_backend: Any) -> AsyncIterator[HostileServer]:
    """One server for all of a property test's examples."""
    async with serve() as server:
        yield server


@settings(
    max_examples=50,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(answer=st.one_of(st.binary(max_size=300), near_valid_answers()))
async def test_any_bytes_as_the_put_records_answer(
    fuzz_server: HostileServer, answer: bytes
) -> None:
    """The first PutRecords gets ``answer`` and a closed connection, the next good answers:
    nothing escapes, and an ok record's sequence number is one the server's bytes hold."""
    server = fuzz_server
    server.script(Case(lambda b, n: answer, after="close"), 1)
    run = await run_producer(server, record_ttl=3.0)
    results = check_nothing_escaped(run, server)
    for result in results:
        assert not leaked_codes(result), show(result, server)
        if result.ok:
            number = result.sequence_number
            assert number is not None
            assert number in server.confirmed or number.encode() in answer, show(result, server)
