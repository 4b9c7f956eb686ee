"""The fake's server: Kinesis' JSON 1.1 protocol over an ``httpx.MockTransport``."""

from __future__ import annotations

import contextlib
import json
import math
import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import httpx

from ._busy import ServerModel
from ._checks import _stream_name
from ._control import _Control
from ._fake_streams import _Streams
from ._faults import Faults, _FaultInjection
from ._framing import FakeTransport
from ._glue import FakeGlue
from ._model import _MIB, _STATUS, _Fail
from ._reading import _Reading
from ._shapes import check_input
from ._writing import _Writing

Handler = Callable[[str, dict[str, Any]], Awaitable[httpx.Response | None]]

#: How many requests ``FakeKinesis.calls`` and ``requests`` keep by default (the latest).
REQUEST_LOG = 10_000
#: The write operations: faults, ``fatal`` streams, DryRun and the stats apply to them.
_WRITES = frozenset({"PutRecords", "PutRecord"})


class _Log(list):  # type: ignore[type-arg]
    """A list that keeps its latest ``limit`` items (0: keeps none); trimmed in halves so an
    append stays O(1) on average."""

    def __init__(self, limit: int) -> None:
        super().__init__()
        self.limit = limit

    def append(self, item: Any) -> None:
        if self.limit <= 0:
            return
        super().append(item)
        if len(self) >= 2 * self.limit:
            del self[: len(self) - self.limit]


class FakeKinesis(_Writing, _Control, _Reading):
    """An in-memory Kinesis: streams, shards, records; use :meth:`transport` with a Producer.

    ``hook`` (optional) is an async callable ``(operation, body) -> httpx.Response | None``
    called before each request is served: return a response to answer in its place (to
    inject an error), or ``None`` to serve it normally. It may sleep to add latency.

    ``enforce_limits``: apply per-shard write limits of ``records_per_second`` and
    ``bytes_per_second`` (token buckets holding one second's worth; the bytes bucket at
    least the stream's max record size). ``faults``: see :class:`Faults`.
    ``max_record_size`` (data + partition key, bytes) is the max record size of streams
    created without one of their own; ``max_request_size`` bounds a whole PutRecords
    request (larger ones: HTTP 400). ``server`` (a :class:`ServerModel`): requests queue
    for a number of workers and take a service time each, as in a busy server.
    ``upload_rate`` (bytes per second, ``None``: no limit): a slow uplink in front of the
    fake, shared by every in-memory connection of :meth:`transport`: the request bytes
    reach the fake at that pace, first come first served (answers are not slowed).
    ``honor_dry_run`` (default True): answer a write with ``DryRun: true`` with
    ``DryRunOperationException`` once it passes every check; False serves it as a normal
    write, like endpoints that ignore DryRun.
    ``shard_limit``: the account's shard quota, open shards over all streams (20,000 by
    default, AWS's default in us-east-1); a CreateStream, UpdateShardCount or SplitShard
    that would pass it is answered ``LimitExceededException`` before anything is built.
    ``request_log``: how many of the latest requests :attr:`calls` and :attr:`requests`
    keep (0: none; the served engine keeps none).
    All of these are attributes that may be changed at any time.
    """

    def __init__(
        self,
        hook: Handler | None = None,
        *,
        enforce_limits: bool = False,
        records_per_second: float = 1000,
        bytes_per_second: float = _MIB,
        faults: Faults | None = None,
        max_record_size: int = _MIB,
        max_request_size: int = 10 * _MIB,
        server: ServerModel | None = None,
        upload_rate: float | None = None,
        honor_dry_run: bool = True,
        shard_limit: int = 20_000,
        request_log: int = REQUEST_LOG,
    ) -> None:
        _Streams.__init__(
            self,
            enforce_limits=enforce_limits,
            records_per_second=records_per_second,
            bytes_per_second=bytes_per_second,
            max_record_size=max_record_size,
            shard_limit=shard_limit,
        )
        _FaultInjection.__init__(self, faults)
        _Writing.__init__(self, honor_dry_run=honor_dry_run, max_request_size=max_request_size)
        self.hook = hook
        self._request_log = request_log
        #: The operation of each request received, in order (the latest ``request_log``).
        self.calls: list[str] = _Log(request_log)
        #: (operation, body) of each request received, in order (the latest
        #: ``request_log``); a PutRecords body's ``Records`` is replaced by its entry count
        #: and a PutRecord body's ``Data`` by its length.
        self.requests: list[tuple[str, dict[str, Any]]] = _Log(request_log)
        #: a busy server's queue and service times (``None``: every request served at once)
        self.server = server
        #: the uplink's pace in bytes per second (``None``: no limit)
        self.upload_rate = upload_rate
        self._uplink_free = -math.inf  # when the uplink has carried what it was given
        self._speed_changed: anyio.Event | None = None
        if server is not None:
            server._attach(self._now, self._wake_queue)
        self._request_ids = 0
        #: Seconds added to the fake's clock (``anyio.current_time()``, see ``_now``) for
        #: the timestamps clients see (GetRecords' ``ApproximateArrivalTimestamp``,
        #: ``AT_TIMESTAMP`` iterators, saved state): 0 by default (virtual time); the
        #: served engine sets wall-clock time.
        self.clock_offset: float = 0.0
        #: While set, PutRecords and PutRecord are answered ``503 ServiceUnavailable`` with
        #: this message, nothing stored (reads are served): the served engine sets it while
        #: it cannot save its state.
        self.write_block: str | None = None
        #: The Glue Schema Registry served on the same endpoint (``X-Amz-Target: AWSGlue.*``).
        self.glue: FakeGlue = FakeGlue()

    def _upload_delay(self, nbytes: int) -> float:
        """How long ``nbytes`` handed to the uplink now take to reach the fake."""
        rate = self.upload_rate
        if not rate:
            return 0.0
        now = self._now()
        self._uplink_free = max(now, self._uplink_free) + nbytes / rate
        return self._uplink_free - now

    def use_wall_clock(self) -> None:
        """Give clients wall-clock timestamps from now on (sets ``clock_offset``)."""
        self.clock_offset = time.time() - self._now()

    def refuse_writes(self, reason: str | None) -> None:
        """Answer writes ``503 ServiceUnavailable`` with ``reason`` (``write_block``) until
        called with ``None``."""
        self.write_block = reason

    def transport(self) -> httpx.AsyncBaseTransport:
        """An httpx transport serving this fake (pass it as ``Producer(transport=...)``).

        The package's clients talk to it over in-memory connections through their own
        connection pool and HTTP framing, the fake's h11 server at the far end."""
        return FakeTransport(self)

    def _respond(self, status: int, body: dict[str, Any]) -> httpx.Response:
        self._request_ids += 1
        return httpx.Response(
            status,
            json=body,
            headers={"x-amzn-RequestId": f"fake-{self._request_ids:08d}"},
        )

    def _error(self, status: int, code: str, message: str) -> httpx.Response:
        return self._respond(status, {"__type": code, "message": message})

    # -- serving --------------------------------------------------------------------------

    async def _handle(self, request: httpx.Request) -> httpx.Response:
        target = request.headers.get("x-amz-target", "")
        operation = target.rpartition(".")[2]
        if "authorization" not in request.headers:
            return self._error(
                400, "MissingAuthenticationTokenException", "no Authorization header"
            )
        raw = await request.aread()
        try:
            body: Any = json.loads(raw or b"{}")
        except (ValueError, RecursionError):  # not JSON, not UTF-8, nested too deep
            return self._error(400, "SerializationException", "the body is not JSON")
        if not isinstance(body, dict):
            return self._error(400, "SerializationException", "the body is not a JSON object")
        self.calls.append(operation)
        if self._request_log > 0:
            self.requests.append((operation, _logged(body)))
        if self.hook is not None:
            injected = await self.hook(operation, body)
            if injected is not None:
                return injected
        if target.startswith("AWSGlue."):
            try:
                return self._respond(200, self.glue.answer(operation, body))
            except _Fail as fail:
                return self._error(fail.status, fail.code, fail.message)
        if self.server is not None:
            await self._queue(operation, body, len(raw))
        faults = self._faults
        if faults.latency or faults.latency_jitter:
            jitter = self.rng.uniform(0.0, faults.latency_jitter) if faults.latency_jitter else 0
            await anyio.sleep(faults.latency + jitter)
        write = operation in _WRITES
        method = getattr(self, f"_op_{operation}", None)
        if method is None and not write:
            return self._error(400, "UnknownOperationException", operation)
        name = _stream_name(body)
        if write:
            self.stats._request()
        code = self._fatal(operation, name)
        if code is not None:
            status = _STATUS.get(code, 400)
            if write:
                self._event(code, name or "")
                self.stats._answered(status)
            return self._error(status, code, f"{code} (injected)")
        if write or method is None:
            return await self._serve_write(request, operation, body, name or "")
        try:
            check_input(operation, body)
            result: dict[str, Any] = method(body)
        except _Fail as fail:
            return self._error(fail.status, fail.code, fail.message)
        return self._respond(200, result)

    def _wake_queue(self) -> None:
        """The server model changed speed: requests waiting for their turn recompute it."""
        changed, self._speed_changed = self._speed_changed, None
        if changed is not None:
            changed.set()

    async def _queue(self, operation: str, body: dict[str, Any], nbytes: int) -> None:
        """Wait for a worker of the server model and for the request's service time."""
        server = self.server
        assert server is not None
        done_at = server.admit(self._now(), nbytes)
        try:
            # Until the work clock reaches it; a change of speed wakes the wait to recompute.
            while (wait := server.remaining(done_at, self._now())) > 0:
                changed = self._speed_changed
                if changed is None:
                    changed = self._speed_changed = anyio.Event()
                with anyio.move_on_after(wait):
                    await changed.wait()
        except anyio.get_cancelled_exc_class():
            # The client gave up (its timeout); the server serves the request anyway.
            server._abandon()
            if operation in _WRITES:
                self.stats._request()
                self.stats._unanswered()
                fatal = self._fatal(operation, _stream_name(body))
                if fatal is None and not self._dry_run(body):
                    with contextlib.suppress(_Fail):
                        self._write(operation, body, None, [])
            raise

    def _fatal(self, operation: str, name: str | None) -> str | None:
        """The ``Faults.fatal`` error code answering this request, if any."""
        faults = self._faults
        if name is None or operation not in faults.fatal_operations:
            return None
        return faults.fatal.get(name)


def _logged(body: dict[str, Any]) -> dict[str, Any]:
    """A request body as the request log keeps it: no record data."""
    logged = dict(body)
    if isinstance(logged.get("Records"), list):
        logged["Records"] = len(logged["Records"])
    if isinstance(logged.get("Data"), str):
        logged["Data"] = len(logged["Data"])
    return logged
