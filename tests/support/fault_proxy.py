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
``proxy_400``
    Answer ``400`` with an HTML page and no service error shape, as a proxy or load
    balancer in front of the endpoint refusing the request would, without forwarding:
    nothing is written.
``endless_answer``
    Answer a well-formed ``200`` head (chunked), then 16 KiB of spaces every 10 ms for
    ever, without forwarding: nothing is written; the connection ends when the client
    gives up.
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
kind (see ``fault_spec.KINDS``) plus ``throttled_entries`` (entries dropped), ``connections``
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
import threading
import zlib
from collections import Counter
from types import TracebackType
from typing import Any
from urllib.parse import urlsplit

from tests.support.fault_spec import _REQUEST_FAULTS, Faults, ProxyEvent
from tests.support.proxy_http import (
    _MAX_HEAD,
    _BadMessage,
    _error_response,
    _json_records,
    _json_response,
    _Message,
    _page_response,
    _read_request,
    _reset,
    _Upstream,
    _UpstreamClosed,
)

__all__ = ["FaultProxy"]

PUT_RECORDS_TARGET = b"Kinesis_20131202.PutRecords"
_THROTTLED = {"ErrorCode": "ProvisionedThroughputExceededException", "ErrorMessage": "injected"}


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
        if fault == "proxy_400":
            self._record(fault, n, None)
            writer.write(_page_response(400))
            await writer.drain()
            return not request.wants_close()
        if fault == "endless_answer":
            self._record(fault, n, None)
            writer.write(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/x-amz-json-1.1\r\n"
                b"Transfer-Encoding: chunked\r\n\r\n"
            )
            piece = b"4000\r\n" + b" " * 16384 + b"\r\n"
            with contextlib.suppress(OSError, ConnectionError):
                while not writer.is_closing():
                    writer.write(piece)
                    await writer.drain()
                    await asyncio.sleep(0.010)
            return False
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
