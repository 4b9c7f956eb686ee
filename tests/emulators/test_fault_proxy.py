"""The fault-injecting proxy (tests/support/fault_proxy.py) in front of the real emulators."""

from __future__ import annotations

import base64
import contextlib
import json
import socket
import threading
import time
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import anyio
import anyio.to_thread
import httpx
import pytest

from kinesis_trio import Producer, ProducerConfig, StaticCredentials
from tests.support.emulators import EmulatorEndpoint
from tests.support.fault_proxy import FaultProxy
from tests.support.fault_spec import Faults, ProxyEvent
from tests.support.helpers import wait_until

_AUTH = (
    "AWS4-HMAC-SHA256 Credential=test/20200101/us-east-1/kinesis/aws4_request, "
    "SignedHeaders=host, Signature=00"
)
_CONNECTION_ERRORS = (httpx.ReadError, httpx.RemoteProtocolError, httpx.WriteError)
PTE = "ProvisionedThroughputExceededException"


def _headers(op: str) -> dict[str, str]:
    return {
        "Content-Type": "application/x-amz-json-1.1",
        "Authorization": _AUTH,
        "X-Amz-Date": time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()),
        "X-Amz-Target": f"Kinesis_20131202.{op}",
    }


def _call(client: httpx.Client, url: str, op: str, body: dict[str, Any]) -> httpx.Response:
    return client.post(url + "/", headers=_headers(op), content=json.dumps(body))


def _ok(client: httpx.Client, url: str, op: str, body: dict[str, Any]) -> dict[str, Any]:
    r = _call(client, url, op, body)
    assert r.status_code == 200, r.text
    doc: dict[str, Any] = r.json() if r.content else {}
    return doc


def _create_stream(url: str, shards: int = 1) -> str:
    name = f"test-proxy-{uuid.uuid4().hex[:12]}"
    with httpx.Client(timeout=30) as client:
        _ok(client, url, "CreateStream", {"StreamName": name, "ShardCount": shards})

        def active() -> bool:
            doc = _ok(client, url, "DescribeStreamSummary", {"StreamName": name})
            return bool(doc["StreamDescriptionSummary"]["StreamStatus"] == "ACTIVE")

        wait_until(active, timeout=30, interval=0.05, what=f"the stream {name} ACTIVE")
        return name


def _entries(prefix: str, n: int) -> list[dict[str, str]]:
    return [
        {"Data": base64.b64encode(f"{prefix}-{i}".encode()).decode(), "PartitionKey": f"k{i}"}
        for i in range(n)
    ]


def _put_body(name: str, entries: list[dict[str, str]]) -> dict[str, Any]:
    return {"StreamName": name, "Records": entries}


def _read_all(url: str, name: str) -> dict[str, bytes]:
    """Every record in the stream: sequence number -> data (read straight from ``url``)."""
    out: dict[str, bytes] = {}
    with httpx.Client(timeout=30) as client:
        shards = _ok(client, url, "ListShards", {"StreamName": name})["Shards"]
        for shard in shards:
            it = _ok(
                client,
                url,
                "GetShardIterator",
                {
                    "StreamName": name,
                    "ShardId": shard["ShardId"],
                    "ShardIteratorType": "TRIM_HORIZON",
                },
            )["ShardIterator"]
            while it:
                doc = _ok(client, url, "GetRecords", {"ShardIterator": it, "Limit": 10000})
                for rec in doc["Records"]:
                    assert rec["SequenceNumber"] not in out
                    out[rec["SequenceNumber"]] = base64.b64decode(rec["Data"])
                if not doc["Records"]:
                    break
                it = doc.get("NextShardIterator")
    return out


def _written(results: list[dict[str, Any]], entries: list[dict[str, str]]) -> dict[str, bytes]:
    """sequence number -> data for the successful slots of a PutRecords answer."""
    return {
        r["SequenceNumber"]: base64.b64decode(e["Data"])
        for r, e in zip(results, entries, strict=True)
        if r.get("SequenceNumber") and not r.get("ErrorCode")
    }


@pytest.fixture
def proxy(local_engine: EmulatorEndpoint) -> Iterator[FaultProxy]:
    with FaultProxy(local_engine.endpoint_url, seed=1) as p:
        yield p
        assert p.errors == []


# -- pass-through --------------------------------------------------------------------------


def test_passthrough_unchanged(proxy: FaultProxy, local_engine: EmulatorEndpoint) -> None:
    name = _create_stream(proxy.url, shards=2)  # CreateStream etc. through the proxy
    entries = _entries("plain", 10)
    with httpx.Client(timeout=10) as client:
        r = _call(client, proxy.url, "PutRecords", _put_body(name, entries))
        assert r.status_code == 200
        assert r.headers["x-amzn-requestid"]  # upstream headers relayed
        doc = r.json()
        assert doc["FailedRecordCount"] == 0
        # A non-PutRecords error passes through untouched.
        bad = _call(client, proxy.url, "DescribeStreamSummary", {"StreamName": "missing"})
        assert bad.status_code == 400
        assert bad.json()["__type"] == "ResourceNotFoundException"
    assert _read_all(local_engine.endpoint_url, name) == _written(doc["Records"], entries)
    assert proxy.events == [ProxyEvent("forward", 10, doc["Records"])]
    stats = proxy.stats
    assert stats["forward"] == 1 and stats["passthrough"] >= 3


def test_faults_validation(proxy: FaultProxy) -> None:
    with pytest.raises(ValueError, match="sum to"):
        proxy.set_faults(http_500=0.6, reset_after=0.6)
    with pytest.raises(ValueError, match="probability"):
        Faults(throttle_entries=1.5)
    with pytest.raises(TypeError):
        proxy.set_faults(nonsense=0.1)
    assert proxy.faults == Faults()
    assert proxy.set_faults(delay=0.01, http_503=0.5) == Faults(delay=0.01, http_503=0.5)


# -- faults --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("status", "error_type"), [(500, "InternalFailure"), (503, "ServiceUnavailable")]
)
def test_http_error_writes_nothing(
    proxy: FaultProxy, local_engine: EmulatorEndpoint, status: int, error_type: str
) -> None:
    name = _create_stream(proxy.url)
    proxy.set_faults(**{f"http_{status}": 1.0})
    with httpx.Client(timeout=10) as client:
        for _ in range(3):
            r = _call(client, proxy.url, "PutRecords", _put_body(name, _entries("err", 5)))
            assert r.status_code == status
            assert r.json() == {"__type": error_type, "message": "injected"}
            assert r.headers["content-type"] == "application/x-amz-json-1.1"
        # Other operations are never faulted.
        _ok(client, proxy.url, "ListShards", {"StreamName": name})
        assert _read_all(local_engine.endpoint_url, name) == {}
        # The connection survived the injected errors.
        proxy.clear_faults()
        entries = _entries("after", 2)
        doc = _ok(client, proxy.url, "PutRecords", _put_body(name, entries))
    assert _read_all(local_engine.endpoint_url, name) == _written(doc["Records"], entries)
    assert [e.kind for e in proxy.events] == [f"http_{status}"] * 3 + ["forward"]
    assert proxy.stats["connections"] == 2  # _create_stream's and this client's


def test_throttle_entries(proxy: FaultProxy, local_engine: EmulatorEndpoint) -> None:
    name = _create_stream(proxy.url, shards=2)
    proxy.set_faults(throttle_entries=0.4)
    entries = _entries("thr", 60)
    with httpx.Client(timeout=10) as client:
        r = _call(client, proxy.url, "PutRecords", _put_body(name, entries))
    assert r.status_code == 200
    assert int(r.headers["content-length"]) == len(r.content)
    doc = r.json()
    records = doc["Records"]
    assert len(records) == 60
    throttled = [i for i, rec in enumerate(records) if rec.get("ErrorCode")]
    assert 0 < len(throttled) < 60
    assert doc["FailedRecordCount"] == len(throttled)
    for i in throttled:
        assert records[i] == {"ErrorCode": PTE, "ErrorMessage": "injected"}
    # Exactly the non-throttled entries were written, at the places their slots name.
    stored = _read_all(local_engine.endpoint_url, name)
    assert stored == _written(records, entries)
    assert len(stored) == 60 - len(throttled)
    [event] = proxy.events
    assert event == ProxyEvent("throttle_entries", 60, records)
    assert proxy.stats["throttled_entries"] == len(throttled)


def test_throttle_every_entry_forwards_nothing(
    proxy: FaultProxy, local_engine: EmulatorEndpoint
) -> None:
    name = _create_stream(proxy.url)
    proxy.set_faults(throttle_entries=1.0)
    with httpx.Client(timeout=10) as client:
        doc = _ok(client, proxy.url, "PutRecords", _put_body(name, _entries("all", 7)))
    assert doc["FailedRecordCount"] == 7
    assert {rec["ErrorCode"] for rec in doc["Records"]} == {PTE}
    assert _read_all(local_engine.endpoint_url, name) == {}


def test_chunked_request_bodies(proxy: FaultProxy, local_engine: EmulatorEndpoint) -> None:
    """A generator body makes httpx send ``Transfer-Encoding: chunked``: relayed as is, or
    re-framed with Content-Length when entries are dropped."""
    name = _create_stream(proxy.url)
    written: dict[str, bytes] = {}
    with httpx.Client(timeout=10) as client:
        for throttle in (0.0, 0.5):
            proxy.set_faults(throttle_entries=throttle)
            entries = _entries(f"chunk{throttle}", 20)
            raw = json.dumps(_put_body(name, entries)).encode()
            r = client.post(
                proxy.url + "/",
                headers=_headers("PutRecords"),
                content=iter([raw[:50], raw[50:]]),
            )
            assert r.status_code == 200, r.text
            written.update(_written(r.json()["Records"], entries))
    assert [e.kind for e in proxy.events] == ["forward", "throttle_entries"]
    assert _read_all(local_engine.endpoint_url, name) == written
    assert 20 < len(written) < 40


def test_reset_before_writes_nothing(proxy: FaultProxy, local_engine: EmulatorEndpoint) -> None:
    name = _create_stream(proxy.url)
    proxy.set_faults(reset_before=1.0)
    with httpx.Client(timeout=10) as client:
        with pytest.raises(_CONNECTION_ERRORS) as info:
            _call(client, proxy.url, "PutRecords", _put_body(name, _entries("rb", 5)))
        print("reset_before ->", type(info.value).__name__, info.value)
        # The client recovers on a new connection.
        proxy.clear_faults()
        _ok(client, proxy.url, "ListShards", {"StreamName": name})
    assert _read_all(local_engine.endpoint_url, name) == {}
    assert proxy.events == [ProxyEvent("reset_before", 5, None)]
    assert proxy.stats["connections"] == 3  # _create_stream's, the reset one, its successor


def test_reset_after_writes_and_logs(proxy: FaultProxy, local_engine: EmulatorEndpoint) -> None:
    name = _create_stream(proxy.url, shards=2)
    proxy.set_faults(reset_after=1.0)
    entries = _entries("ra", 8)
    with httpx.Client(timeout=10) as client:
        with pytest.raises(_CONNECTION_ERRORS) as info:
            _call(client, proxy.url, "PutRecords", _put_body(name, entries))
        print("reset_after ->", type(info.value).__name__, info.value)
    [event] = proxy.events
    assert event.kind == "reset_after" and event.n_entries == 8 and event.records is not None
    # The records ARE written, and the event names every one of them.
    stored = _read_all(local_engine.endpoint_url, name)
    assert stored == _written(event.records, entries)
    assert len(stored) == 8
    assert {r["SequenceNumber"] for r in proxy.ambiguous_records()} == set(stored)


def test_hang_after_times_out_with_records_written(
    proxy: FaultProxy, local_engine: EmulatorEndpoint
) -> None:
    name = _create_stream(proxy.url)
    proxy.set_faults(hang_after=1.0)
    entries = _entries("hang", 4)
    errors: list[BaseException] = []

    # The hanging call's read timeout is long enough that a loaded machine serves the other
    # call well within it (1 s was not: a busy machine can take that long to serve it).
    read = 4.0

    def hang() -> None:
        with httpx.Client(timeout=httpx.Timeout(10, read=read)) as client:
            try:
                _call(client, proxy.url, "PutRecords", _put_body(name, entries))
            except BaseException as e:
                errors.append(e)

    t0 = time.monotonic()
    thread = threading.Thread(target=hang)
    thread.start()
    # While that connection hangs, another one is served: before the hang ends.
    wait_until(lambda: proxy.events, timeout=30, interval=0.01, what="the proxy's first event")
    with httpx.Client(timeout=10) as other:
        _ok(other, proxy.url, "ListShards", {"StreamName": name})
    assert thread.is_alive() and not errors, errors
    thread.join(30)
    elapsed = time.monotonic() - t0
    assert len(errors) == 1 and isinstance(errors[0], httpx.ReadTimeout), errors
    assert elapsed >= read  # it hung until the client gave up, not answered
    [event] = proxy.events
    assert event.kind == "hang_after" and event.records is not None
    assert _read_all(local_engine.endpoint_url, name) == _written(event.records, entries)
    assert len(proxy.ambiguous_records()) == 4


def test_delay(proxy: FaultProxy) -> None:
    name = _create_stream(proxy.url)
    # A delay a loaded machine's own slowness cannot pass for (0.3 s could: a busy machine
    # took that long to serve a call that was not delayed).
    proxy.set_faults(delay=2.0, delay_jitter=0.1)
    with httpx.Client(timeout=30) as client:
        t0 = time.monotonic()
        _ok(client, proxy.url, "ListShards", {"StreamName": name})  # not delayed
        t1 = time.monotonic()
        _ok(client, proxy.url, "PutRecords", _put_body(name, _entries("d", 1)))
        t2 = time.monotonic()
    assert t1 - t0 < 2.0
    assert t2 - t1 >= 2.0


# -- connection handling -------------------------------------------------------------------


def test_keep_alive_many_requests_one_connection(
    proxy: FaultProxy, local_engine: EmulatorEndpoint
) -> None:
    name = _create_stream(local_engine.endpoint_url)
    proxy.set_faults(http_503=0.2, throttle_entries=0.2)
    written: dict[str, bytes] = {}
    with httpx.Client(timeout=10) as client:
        for i in range(150):
            if i % 3 == 0:
                _ok(client, proxy.url, "ListShards", {"StreamName": name})
                continue
            entries = _entries(f"ka{i}", 5)
            r = _call(client, proxy.url, "PutRecords", _put_body(name, entries))
            assert r.status_code in (200, 503)
            if r.status_code == 200:
                written.update(_written(r.json()["Records"], entries))
    stats = proxy.stats
    assert stats["connections"] == 1
    assert stats["http_503"] > 0 and stats["throttle_entries"] > 0 and stats["forward"] > 0
    assert _read_all(local_engine.endpoint_url, name) == written


class _ClosingUpstream:
    """A tiny HTTP server that answers (keep-alive) and then closes the connection anyway:
    after the first answer (``"fin"``), or on reading the second request (``"drop"``), like
    an upstream timing out an idle keep-alive connection just as it gets reused."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.connections = 0
        self.requests = 0
        self._sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self._sock.getsockname()[1]}"
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        with contextlib.suppress(OSError):
            while True:
                conn, _ = self._sock.accept()
                self.connections += 1
                threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    @staticmethod
    def _read_request(f: Any) -> bool:
        length = 0
        line = f.readline()
        if not line:
            return False
        while line not in (b"\r\n", b""):
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
            line = f.readline()
        f.read(length)
        return True

    def _handle(self, conn: socket.socket) -> None:
        with conn, conn.makefile("rb") as f:
            if not self._read_request(f):
                return
            self.requests += 1
            body = json.dumps({"n": self.requests}).encode()
            conn.sendall(
                b"HTTP/1.1 200 OK\r\nConnection: keep-alive\r\n"
                b"Content-Type: application/x-amz-json-1.1\r\n"
                b"Content-Length: %d\r\n\r\n%s" % (len(body), body)
            )
            if self.mode == "drop" and self._read_request(f):
                self.requests += 1  # read, never answered
            conn.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)  # wakes the blocked accept()
        self._sock.close()
        self._thread.join(5)
        assert not self._thread.is_alive()


@pytest.mark.parametrize("mode", ["fin", "drop"])
def test_upstream_closing_keep_alive_connections(mode: str) -> None:
    """The proxy reopens an upstream connection the upstream closed (kinesalite closes idle
    keep-alive connections after about 6 s) and keeps the client's connection intact."""
    upstream = _ClosingUpstream(mode)
    try:
        with FaultProxy(upstream.url) as proxy, httpx.Client(timeout=5) as client:
            answers = [_ok(client, proxy.url, "ListStreams", {})["n"] for _ in range(10)]
            stats = proxy.stats
        assert stats["connections"] == 1
        assert stats["upstream_connects"] == upstream.connections >= 10
        assert len(answers) == 10 and answers == sorted(answers)
        if mode == "drop":
            assert upstream.requests >= 19  # each dropped request was sent again
        assert proxy.errors == []
    finally:
        upstream.close()


def test_twenty_concurrent_clients(proxy: FaultProxy, local_engine: EmulatorEndpoint) -> None:
    name = _create_stream(local_engine.endpoint_url, shards=4)
    proxy.set_faults(http_500=0.1, throttle_entries=0.2, delay=0.005, delay_jitter=0.01)
    barrier = threading.Barrier(20)

    def worker(w: int) -> dict[str, bytes]:
        out: dict[str, bytes] = {}
        with httpx.Client(timeout=10) as client:
            barrier.wait()
            for i in range(10):
                entries = _entries(f"c{w}-{i}", 20)
                r = _call(client, proxy.url, "PutRecords", _put_body(name, entries))
                assert r.status_code in (200, 500), r.text
                if r.status_code == 200:
                    out.update(_written(r.json()["Records"], entries))
        return out

    written: dict[str, bytes] = {}
    with ThreadPoolExecutor(20) as pool:
        for part in pool.map(worker, range(20)):
            written.update(part)
    stats = proxy.stats
    assert stats["connections"] == 20
    assert sum(stats[k] for k in ("forward", "http_500", "throttle_entries")) == 200
    assert _read_all(local_engine.endpoint_url, name) == written


# -- async clients (trio and asyncio) ------------------------------------------------------


@pytest.mark.anyio
async def test_async_client_through_proxy(
    proxy: FaultProxy, local_engine: EmulatorEndpoint
) -> None:
    """24 concurrent connections from an AsyncClient, retrying every entry until accepted.

    Without ambiguous faults every record must land exactly once.
    """
    name = await anyio.to_thread.run_sync(_create_stream, local_engine.endpoint_url, 4)
    proxy.set_faults(http_503=0.1, reset_before=0.05, throttle_entries=0.2, delay_jitter=0.01)
    written: dict[str, bytes] = {}
    failures: list[str] = []
    limits = httpx.Limits(max_connections=24, max_keepalive_connections=24)

    async def producer(client: httpx.AsyncClient, w: int) -> None:
        pending = _entries(f"a{w}", 30)
        for _ in range(50):
            if not pending:
                return
            batch, pending = pending[:10], pending[10:]
            try:
                r = await client.post(
                    proxy.url + "/",
                    headers=_headers("PutRecords"),
                    content=json.dumps(_put_body(name, batch)),
                )
            except _CONNECTION_ERRORS as e:
                failures.append(type(e).__name__)
                pending = batch + pending
                continue
            if r.status_code != 200:
                failures.append(str(r.status_code))
                pending = batch + pending
                continue
            results = r.json()["Records"]
            written.update(_written(results, batch))
            pending = [
                e for e, res in zip(batch, results, strict=True) if res.get("ErrorCode")
            ] + pending
        raise AssertionError(f"producer {w} never finished")

    async with (
        httpx.AsyncClient(timeout=10, limits=limits) as client,
        anyio.create_task_group() as tg,
    ):
        for w in range(24):
            tg.start_soon(producer, client, w)
    assert len(written) == 24 * 30
    assert failures  # some faults were hit
    stored = await anyio.to_thread.run_sync(_read_all, local_engine.endpoint_url, name)
    assert stored == written
    assert sorted(stored.values()) == sorted(
        f"a{w}-{i}".encode() for w in range(24) for i in range(30)
    )


@pytest.mark.anyio
async def test_async_ambiguous_faults_only_duplicate_logged_records(
    proxy: FaultProxy, local_engine: EmulatorEndpoint
) -> None:
    """reset_after / hang_after: retried entries may land twice, but every extra copy is one
    the proxy logged as written-but-unanswered."""
    name = await anyio.to_thread.run_sync(_create_stream, local_engine.endpoint_url, 2)
    proxy.set_faults(reset_after=0.15, hang_after=0.15, throttle_entries=0.1)
    confirmed: dict[str, bytes] = {}
    seen: set[str] = set()
    # A read timeout only the proxy's hangs reach: at 0.5 s a busy machine's slow answers
    # timed out too, and their copies (written, not logged: the proxy did answer) were extra.
    timeout = httpx.Timeout(10, read=5.0)
    limits = httpx.Limits(max_connections=8)

    async def producer(client: httpx.AsyncClient, w: int) -> None:
        pending = _entries(f"amb{w}", 40)
        for _ in range(100):
            if not pending:
                return
            batch, pending = pending[:5], pending[5:]
            try:
                r = await client.post(
                    proxy.url + "/",
                    headers=_headers("PutRecords"),
                    content=json.dumps(_put_body(name, batch)),
                )
            except (*_CONNECTION_ERRORS, httpx.ReadTimeout) as e:
                seen.add(type(e).__name__)
                pending = batch + pending
                continue
            assert r.status_code == 200, r.text
            results = r.json()["Records"]
            confirmed.update(_written(results, batch))
            failed = [e for e, res in zip(batch, results, strict=True) if res.get("ErrorCode")]
            pending = failed + pending
        raise AssertionError(f"producer {w} never finished")

    async with (
        httpx.AsyncClient(timeout=timeout, limits=limits) as client,
        anyio.create_task_group() as tg,
    ):
        for w in range(8):
            tg.start_soon(producer, client, w)
    assert seen == {"ReadError", "ReadTimeout"}  # at least 64 requests: each fault came up
    stored = await anyio.to_thread.run_sync(_read_all, local_engine.endpoint_url, name)
    ambiguous = {r["SequenceNumber"] for r in proxy.ambiguous_records()}
    assert ambiguous and not ambiguous & set(confirmed)
    # Each entry confirmed exactly once; anything else in the stream is a logged ambiguous write.
    assert sorted(confirmed.values()) == sorted(
        f"amb{w}-{i}".encode() for w in range(8) for i in range(40)
    )
    assert set(stored) == set(confirmed) | ambiguous
    assert all(stored[seq] == data for seq, data in confirmed.items())


def test_upstream_down_answers_502() -> None:
    with FaultProxy("http://127.0.0.1:9", seed=0) as proxy, httpx.Client(timeout=5) as client:
        r = _call(client, proxy.url, "ListStreams", {})
        assert r.status_code == 502
        assert r.json()["__type"] == "BadGateway"
        r = _call(client, proxy.url, "PutRecords", _put_body("s", _entries("x", 2)))
        assert r.status_code == 502
        assert proxy.events == [ProxyEvent("upstream_error", 2, None)]
        assert proxy.stats["upstream_error"] == 2


def test_close_with_a_hanging_connection(local_engine: EmulatorEndpoint) -> None:
    proxy = FaultProxy(local_engine.endpoint_url, seed=0, hang_after=1.0).start()
    name = _create_stream(proxy.url)
    errors: list[BaseException] = []

    def hang() -> None:
        with httpx.Client(timeout=30) as client:
            try:
                _call(client, proxy.url, "PutRecords", _put_body(name, _entries("h", 1)))
            except BaseException as e:
                errors.append(e)

    thread = threading.Thread(target=hang)
    thread.start()
    wait_until(lambda: proxy.events, timeout=5, interval=0.01, what="the proxy's first event")
    t0 = time.monotonic()
    proxy.close()
    thread.join(15)
    assert time.monotonic() - t0 < 15  # the held call ends with the proxy, not at its 30 s
    assert len(errors) == 1 and isinstance(errors[0], _CONNECTION_ERRORS), errors
    proxy.close()  # idempotent
    with pytest.raises(httpx.ConnectError):
        httpx.get(proxy.url, timeout=2)


# -- kinesis-local -------------------------------------------------------------------------


def test_kinesis_local_throttle_and_reset_after(kinesis_local: EmulatorEndpoint) -> None:
    url = kinesis_local.endpoint_url
    with FaultProxy(url, seed=3) as proxy:
        name = _create_stream(proxy.url, shards=2)
        entries = _entries("kl", 20)
        with httpx.Client(timeout=30) as client:
            proxy.set_faults(throttle_entries=0.5)
            doc = _ok(client, proxy.url, "PutRecords", _put_body(name, entries))
            assert 0 < doc["FailedRecordCount"] < 20
            assert doc["EncryptionType"] == "NONE"  # other upstream fields kept
            written = _written(doc["Records"], entries)
            proxy.set_faults(throttle_entries=0, reset_after=1.0)
            more = _entries("kl-ra", 5)
            with pytest.raises(_CONNECTION_ERRORS):
                _call(client, proxy.url, "PutRecords", _put_body(name, more))
        event = proxy.events[-1]
        assert event.kind == "reset_after" and event.records is not None
        written.update(_written(event.records, more))
        assert _read_all(url, name) == written
        assert len(written) == 25 - doc["FailedRecordCount"]
        assert proxy.errors == []


async def _through(
    proxy: FaultProxy, local_engine: EmulatorEndpoint, fault: str
) -> tuple[Producer, str]:
    """A new one-shard stream, ``fault`` forced on the next PutRecords, and a producer (not
    entered) writing to it through ``proxy``, one Kinesis record per record; its stream."""
    name = await anyio.to_thread.run_sync(_create_stream, local_engine.endpoint_url, 1)
    proxy.force_next(fault)
    producer = Producer(
        name,
        region_name="us-east-1",
        endpoint_url=proxy.url,
        credentials=StaticCredentials("AKIDLOCAL", "local-secret"),
        config=ProducerConfig(record_ttl=120.0, aggregation_enabled=False),
    )
    return producer, name


@pytest.mark.anyio
async def test_a_proxys_400_fails_the_producers_records_at_once(
    proxy: FaultProxy, local_engine: EmulatorEndpoint
) -> None:
    """Issue 62: a 400 page from something in front of the endpoint (no ``__type``) was
    retried as ambiguous until ``record_ttl``. Nothing was processed: the refused request's
    records fail on their first attempt, definitely, quoting the page; the next go."""
    producer, name = await _through(proxy, local_engine, "proxy_400")
    async with producer:
        refused = [await producer.put(b"refused-%d" % i, f"k{i}") for i in range(3)]
        await producer.flush()
        later = await producer.put(b"later", "k")
        await producer.flush()
    for outcome in refused:
        result = await outcome.wait()
        assert not result.ok and result.error_code == "400"
        assert len(result.attempts) == 1 and not result.possible_duplicate
        assert "Request Header Or Cookie Too Large" in (result.error_message or "")
    assert (await later.wait()).ok
    assert [e.kind for e in proxy.events] == ["proxy_400", "forward"]
    stored = await anyio.to_thread.run_sync(_read_all, local_engine.endpoint_url, name)
    assert sorted(stored.values()) == [b"later"]


@pytest.mark.anyio
async def test_an_answer_that_never_ends_is_given_up_and_sent_again(
    proxy: FaultProxy, local_engine: EmulatorEndpoint
) -> None:
    """Issue 62: a well-formed head, then 16 KiB of spaces every 10 ms for ever, over a
    socket. Past what a PutRecords answer can hold the request is a black hole: given up
    (ambiguous) and sent again, not kept alive by its bytes until ``record_ttl``."""
    producer, name = await _through(proxy, local_engine, "endless_answer")
    async with producer:
        outcomes = [await producer.put(b"e-%d" % i, f"k{i}") for i in range(3)]
        await producer.flush()
    results = [await o.wait() for o in outcomes]
    assert all(r.ok for r in results), [r.error_code for r in results]
    first = results[0].attempts[0]
    assert first.ambiguous and "more than its operation can answer" in (first.error_message or "")
    assert first.duration < 30.0  # the 12 s bound of before would have grown for ever
    assert [e.kind for e in proxy.events][:1] == ["endless_answer"]
    stored = await anyio.to_thread.run_sync(_read_all, local_engine.endpoint_url, name)
    assert sorted(stored.values()) == [b"e-0", b"e-1", b"e-2"]
