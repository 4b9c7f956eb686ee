"""The fake's server: Kinesis' JSON 1.1 protocol over an ``httpx.MockTransport``."""

from __future__ import annotations

import base64
import binascii
import contextlib
import hashlib
import json
import math
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, NoReturn

import anyio
import httpx

from ._busy import ServerModel
from ._checks import (
    _EHK,
    _PAGE_CAP,
    _check_limit,
    _check_name,
    _check_record_kib,
    _check_strategy,
    _check_stream_id,
    _stream_ref,
)
from ._faults import Faults, _FaultInjection
from ._framing import FakeTransport
from ._model import (
    _MAX_HASH,
    _MIB,
    _PTE,
    _STATUS,
    _TOKEN_TTL,
    ACCOUNT_ID,
    AMBIGUOUS_FAULTS,
    ENTRY_FAULTS,
    FakeRecord,
    _astral,
    _describe_shard,
    _Fail,
)
from ._reading import _Reading
from ._shapes import check_input
from ._streams import _Stream, _Streams

Handler = Callable[[str, dict[str, Any]], Awaitable[httpx.Response | None]]

#: How many requests ``FakeKinesis.calls`` and ``requests`` keep by default (the latest).
REQUEST_LOG = 10_000
#: The write operations: faults, ``fatal`` streams, DryRun and the stats apply to them.
_WRITES = frozenset({"PutRecords", "PutRecord"})
_DRY_RUN_MESSAGE = "The request was rejected because the DryRun parameter was specified."


@dataclass
class _Entry:
    """A validated write entry; ``hash_key`` is ``None`` on an AUTO stream (the fake picks)."""

    data: bytes
    partition_key: str | None
    explicit_hash_key: str | None
    hash_key: int | None
    size: int  # data + UTF-8 partition key bytes


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


class FakeKinesis(_FaultInjection, _Streams, _Reading):
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
        self.hook = hook
        self._request_log = request_log
        #: The operation of each request received, in order (the latest ``request_log``).
        self.calls: list[str] = _Log(request_log)
        #: (operation, body) of each request received, in order (the latest
        #: ``request_log``); a PutRecords body's ``Records`` is replaced by its entry count
        #: and a PutRecord body's ``Data`` by its length.
        self.requests: list[tuple[str, dict[str, Any]]] = _Log(request_log)
        self.honor_dry_run = honor_dry_run
        self.max_request_size = max_request_size
        #: a busy server's queue and service times (``None``: every request served at once)
        self.server = server
        self._speed_changed: anyio.Event | None = None
        if server is not None:
            server._attach(anyio.current_time, self._wake_queue)
        self._request_ids = 0
        #: Seconds added to ``anyio.current_time()`` for the timestamps clients see
        #: (GetRecords' ``ApproximateArrivalTimestamp``, ``AT_TIMESTAMP`` iterators, saved
        #: state): 0 by default (virtual time); the served engine sets wall-clock time.
        self.clock_offset: float = 0.0
        #: While set, PutRecords and PutRecord are answered ``503 ServiceUnavailable`` with
        #: this message, nothing stored (reads are served): the served engine sets it while
        #: it cannot save its state.
        self.write_block: str | None = None

    def use_wall_clock(self) -> None:
        """Give clients wall-clock timestamps from now on (sets ``clock_offset``)."""
        self.clock_offset = time.time() - anyio.current_time()

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
        done_at = server.admit(anyio.current_time(), nbytes)
        try:
            # Until the work clock reaches it; a change of speed wakes the wait to recompute.
            while (wait := server.remaining(done_at, anyio.current_time())) > 0:
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

    def _dry_run(self, body: dict[str, Any]) -> bool:
        return self.honor_dry_run and body.get("DryRun") is True

    async def _serve_write(
        self, request: httpx.Request, operation: str, body: dict[str, Any], name: str
    ) -> httpx.Response:
        stats = self.stats
        if self.write_block is not None:
            stats._answered(503)
            return self._error(503, "ServiceUnavailable", self.write_block)
        if self._dry_run(body):
            # Checked like a real write; nothing stored, no tokens taken, no fault drawn.
            stats._dry_run()
            try:
                self._check_write(operation, body)
                response = self._error(400, "DryRunOperationException", _DRY_RUN_MESSAGE)
            except _Fail as fail:
                response = self._error(fail.status, fail.code, fail.message)
            stats._answered(response.status_code)
            return response
        kind = self._take_fault(name)
        if kind is not None and kind not in ENTRY_FAULTS and kind not in AMBIGUOUS_FAULTS:
            self._event(kind, name)
            if kind == "hang_before":
                stats._unanswered()
                await anyio.sleep_forever()
            if kind == "reset_before":
                stats._unanswered()
                _reset(request)
            code = {"http_500": "InternalFailure", "http_503": "ServiceUnavailable"}.get(kind, kind)
            status = _STATUS.get(code, 400)
            stats._answered(status)
            message = "Internal service failure." if status == 500 else f"{code} (injected)"
            return self._error(status, code, message)
        stored: list[tuple[str, str]] = []
        try:
            result = self._write(operation, body, kind if kind in ENTRY_FAULTS else None, stored)
            response = self._answer(operation, result)
        except _Fail as fail:
            response = self._error(fail.status, fail.code, fail.message)
        if kind in AMBIGUOUS_FAULTS:
            assert kind is not None
            self._event(kind, name, stored)
            stats._unanswered()
            if kind == "hang_after":
                await anyio.sleep_forever()
            _reset(request)
        stats._answered(response.status_code)
        return response

    def _answer(self, operation: str, result: dict[str, Any]) -> httpx.Response:
        """A PutRecords result as is; PutRecord's one slot as its answer or its error."""
        if operation == "PutRecords":
            return self._respond(200, result)
        [slot] = result["Records"]
        if "ErrorCode" in slot:
            code = slot["ErrorCode"]
            return self._error(_STATUS.get(code, 400), code, slot["ErrorMessage"])
        return self._respond(
            200, {"ShardId": slot["ShardId"], "SequenceNumber": slot["SequenceNumber"]}
        )

    def _check_write(self, operation: str, body: dict[str, Any]) -> tuple[_Stream, list[_Entry]]:
        """Validate a PutRecords or PutRecord request as Kinesis does; store nothing."""
        check_input(operation, body)
        stream = self._stream(body)
        if operation == "PutRecord":
            parsed = [self._parse_entry("", 0, body, stream)]
        else:
            entries = body.get("Records")
            if not isinstance(entries, list) or not 1 <= len(entries) <= 500:
                raise _Fail(
                    400,
                    "ValidationException",
                    "1 validation error detected: Value at 'records' failed to satisfy "
                    "constraint: Member must have length between 1 and 500",
                )
            parsed = [
                self._parse_entry(f"records.{i + 1}.member.", i, entry, stream)
                for i, entry in enumerate(entries)
            ]
        total = sum(e.size for e in parsed)
        if total > self.max_request_size:
            raise _Fail(
                400,
                "InvalidArgumentException",
                f"Records size {total} exceeds the limit of {self.max_request_size} bytes",
            )
        return stream, parsed

    def _write(
        self,
        operation: str,
        body: dict[str, Any],
        forced: str | None,
        stored: list[tuple[str, str]],
    ) -> dict[str, Any]:
        """Serve a write (as PutRecords, one slot per entry); ``stored`` gets its records."""
        stream, parsed = self._check_write(operation, body)
        now = anyio.current_time()
        self._expire(stream, now)
        faults, stats, rng = self._faults, self.stats, self.rng
        open_shards = stream.open_shards()
        results: list[dict[str, str]] = []
        failed = 0
        for entry in parsed:
            stats._entry()
            if entry.hash_key is None:  # AUTO: an open shard picked uniformly at random
                shard = open_shards[rng.randrange(len(open_shards))]
                hash_key = shard.start
            else:
                hash_key = entry.hash_key
                shard = next(s for s in open_shards if s.holds(hash_key))
            size = entry.size
            code = forced
            draw = rng.random()
            if code is None:
                if draw < faults.throttle_entries:
                    code = "throttle_entries"
                elif draw < faults.throttle_entries + faults.internal_failure_entries:
                    code = "internal_failure_entries"
            if code is not None:
                stats._fault(code)
            elif self.enforce_limits and not self._take_tokens(stream, shard, size, now):
                code = "throttle_entries"
            if code == "throttle_entries":
                failed += 1
                stats._throttled(stream.name, shard.shard_id)
                results.append(
                    {
                        "ErrorCode": _PTE,
                        "ErrorMessage": f"Rate exceeded for shard {shard.shard_id} in stream "
                        f"{stream.name} under account {ACCOUNT_ID}.",
                    }
                )
                continue
            if code is not None:
                failed += 1
                stats._failed()
                results.append(
                    {"ErrorCode": "InternalFailure", "ErrorMessage": "Internal service failure."}
                )
                continue
            seq = self._next_seq()
            self._store(
                shard,
                FakeRecord(
                    entry.data,
                    entry.partition_key,
                    entry.explicit_hash_key,
                    hash_key,
                    seq,
                    shard.shard_id,
                    now,
                ),
            )
            stored.append((shard.shard_id, seq))
            stats._stored(stream.name, shard.shard_id, size, now)
            results.append({"ShardId": shard.shard_id, "SequenceNumber": seq})
        return {"FailedRecordCount": failed, "Records": results}

    def _parse_entry(self, where: str, i: int, entry: Any, stream: _Stream) -> _Entry:
        """One entry (``where``: its path in messages, ``records.N.member.`` or empty).

        PutRecordsRequestEntry: PartitionKey is required on a USER_PARTITION_KEY stream and
        optional on an AUTO one, where it and ExplicitHashKey are ignored for placement
        (both still validated as the shapes say; the hash key range is not checked).
        """
        if not isinstance(entry, dict):
            raise _Fail(400, "SerializationException", f"'{where[:-1]}' is not an object")
        pk = entry.get("PartitionKey")
        if pk is None:
            if not stream.auto:
                raise _Fail(
                    400,
                    "ValidationException",
                    f"1 validation error detected: Value null at '{where}partitionKey' "
                    "failed to satisfy constraint: Member must not be null",
                )
            pk_bytes = b""
        else:
            # 256 UTF-16 code units, as Kinesis and both emulators count: an emoji counts
            # as two
            if not isinstance(pk, str) or not 1 <= len(pk) + _astral(pk) <= 256:
                raise _Fail(
                    400,
                    "ValidationException",
                    f"1 validation error detected: Value at '{where}partitionKey' failed to "
                    "satisfy constraint: Member must have length between 1 and 256",
                )
            try:
                pk_bytes = pk.encode("utf-8")
            except UnicodeEncodeError:
                raise _Fail(
                    400, "ValidationException", f"'{where}partitionKey' is not valid Unicode"
                ) from None
        raw = entry.get("Data")
        if raw is None:
            raise _Fail(
                400,
                "ValidationException",
                f"1 validation error detected: Value null at '{where}data' failed to satisfy "
                "constraint: Member must not be null",
            )
        try:
            data = base64.b64decode(raw, validate=True) if isinstance(raw, str) else None
        except (binascii.Error, ValueError):
            data = None
        if data is None:
            raise _Fail(400, "SerializationException", f"'{where}data' is not base64")
        size = len(data) + len(pk_bytes)
        if size > stream.max_record_size:
            raise _Fail(
                400,
                "InvalidArgumentException",
                f"Record {i} has a size (data + partition key) of {size} bytes, over the "
                f"limit of {stream.max_record_size} of stream {stream.name}",
            )
        ehk = entry.get("ExplicitHashKey")
        if ehk is not None and (not isinstance(ehk, str) or not _EHK.fullmatch(ehk)):
            raise _Fail(
                400,
                "ValidationException",
                f"1 validation error detected: Value at '{where}explicitHashKey' failed "
                "to satisfy constraint: Member must satisfy regular expression pattern: "
                "0|([1-9]\\d{0,38})",
            )
        hash_key: int | None
        if stream.auto:
            hash_key = None
        elif ehk is None:
            hash_key = int.from_bytes(hashlib.md5(pk_bytes).digest(), "big")
        else:
            hash_key = int(ehk)
            if hash_key > _MAX_HASH:
                raise _Fail(
                    400,
                    "InvalidArgumentException",
                    f"Invalid ExplicitHashKey. ExplicitHashKey must be in the range: "
                    f"[0, 2^128-1]. Specified value was {ehk}",
                )
        return _Entry(data, pk, ehk, hash_key, size)

    def _stream(self, body: dict[str, Any]) -> _Stream:
        name = _stream_ref(body)
        if name is None:
            raise _Fail(400, "ValidationException", "StreamName or StreamARN is required")
        return self._get(name)

    # -- operations -------------------------------------------------------------------------

    def _op_CreateStream(self, body: dict[str, Any]) -> dict[str, Any]:
        _required(body, "StreamName")
        name = _check_name(body, "StreamName")
        assert name is not None
        mode = (body.get("StreamModeDetails") or {}).get("StreamMode", "PROVISIONED")
        on_demand = mode == "ON_DEMAND"
        shards = body.get("ShardCount")
        if shards is not None and (type(shards) is not int or shards < 1):
            raise _Fail(
                400,
                "ValidationException",
                f"1 validation error detected: Value '{shards}' at 'shardCount' failed to "
                "satisfy constraint: Member must have value greater than or equal to 1",
            )
        count = 4 if on_demand else (shards or 1)
        self.create_stream(
            name,
            count,
            on_demand=on_demand,
            max_record_size_kib=body.get("MaxRecordSizeInKiB"),
            record_distribution_strategy=body.get("RecordDistributionStrategy"),
        )
        return {}

    def _op_UpdateMaxRecordSize(self, body: dict[str, Any]) -> dict[str, Any]:
        kib = _check_record_kib(_required(body, "MaxRecordSizeInKiB"))
        self.update_max_record_size(self._stream(body).name, kib)
        return {}

    def _op_UpdateStreamRecordDistributionStrategy(self, body: dict[str, Any]) -> dict[str, Any]:
        strategy = _check_strategy(_required(body, "RecordDistributionStrategy"))
        self.update_record_distribution_strategy(self._stream(body).name, strategy)
        return {}

    def _op_IncreaseStreamRetentionPeriod(self, body: dict[str, Any]) -> dict[str, Any]:
        self.set_retention(self._stream(body).name, body["RetentionPeriodHours"], increase=True)
        return {}

    def _op_DecreaseStreamRetentionPeriod(self, body: dict[str, Any]) -> dict[str, Any]:
        self.set_retention(self._stream(body).name, body["RetentionPeriodHours"], increase=False)
        return {}

    def _op_DeleteStream(self, body: dict[str, Any]) -> dict[str, Any]:
        self._drop_stream(self._stream(body).name)
        return {}

    def _op_DescribeStreamSummary(self, body: dict[str, Any]) -> dict[str, Any]:
        stream = self._stream(body)
        summary: dict[str, Any] = {
            "StreamName": stream.name,
            "StreamARN": stream.arn,
            "StreamStatus": "ACTIVE",
            "StreamModeDetails": {"StreamMode": stream.mode},
            "RetentionPeriodHours": stream.retention_hours,
            "StreamCreationTimestamp": stream.created,
            "EncryptionType": "NONE",
            "EnhancedMonitoring": [{"ShardLevelMetrics": []}],
            "OpenShardCount": len(stream.open_shards()),
            "ConsumerCount": 0,
            "MaxRecordSizeInKiB": stream.max_record_size // 1024,
            "ChannelCount": stream.channel_count,
        }
        if stream.on_demand:  # "only present for streams that use the on-demand capacity mode"
            summary["RecordDistributionStrategy"] = stream.record_distribution_strategy
        return {"StreamDescriptionSummary": summary}

    def _op_DescribeStream(self, body: dict[str, Any]) -> dict[str, Any]:
        """DescribeStreamInput (StreamName/StreamARN, Limit, ExclusiveStartShardId, StreamId)
        and StreamDescription: shards in ListShards' shape, at most 100 a page, after
        ``ExclusiveStartShardId``; ``HasMoreShards`` when more follow."""
        limit = min(_check_limit(body, "Limit", _PAGE_CAP), _PAGE_CAP)
        after = _check_name(body, "ExclusiveStartShardId")
        _check_stream_id(body)
        stream = self._stream(body)
        shards = [s for s in stream.shards if after is None or s.shard_id > after]
        page = shards[:limit]
        description: dict[str, Any] = {
            "StreamName": stream.name,
            "StreamARN": stream.arn,
            "StreamStatus": "ACTIVE",
            "StreamModeDetails": {"StreamMode": stream.mode},
            "Shards": [_describe_shard(s) for s in page],
            "HasMoreShards": len(page) < len(shards),
            "RetentionPeriodHours": stream.retention_hours,
            "StreamCreationTimestamp": stream.created,
            "EnhancedMonitoring": [{"ShardLevelMetrics": []}],
            "EncryptionType": "NONE",
        }
        return {"StreamDescription": description}

    def _op_ListStreams(self, body: dict[str, Any]) -> dict[str, Any]:
        """ListStreamsInput (Limit, ExclusiveStartStreamName, NextToken): stream names in
        order, at most 100 a page. A ``NextToken`` (valid 300 s) continues where its page
        ended and takes precedence over ``ExclusiveStartStreamName`` (a paginator resends
        the first request's members with it)."""
        limit = min(_check_limit(body, "Limit", _PAGE_CAP), _PAGE_CAP)
        after = _check_name(body, "ExclusiveStartStreamName")
        now = anyio.current_time()
        token = body.get("NextToken")
        if token is not None:
            try:
                after, issued = json.loads(base64.b64decode(token))
                if not isinstance(after, str) or not isinstance(issued, (int, float)):
                    raise TypeError(token)
            except (ValueError, TypeError, RecursionError, binascii.Error):
                raise _Fail(400, "InvalidArgumentException", "Invalid NextToken.") from None
            if now - issued > _TOKEN_TTL:
                raise _Fail(400, "ExpiredNextTokenException", "The NextToken has expired.")
        names = sorted(n for n in self.streams if after is None or n > after)
        page = names[:limit]
        result: dict[str, Any] = {
            "StreamNames": page,
            "HasMoreStreams": len(page) < len(names),
            "StreamSummaries": [
                {
                    "StreamName": stream.name,
                    "StreamARN": stream.arn,
                    "StreamStatus": "ACTIVE",
                    "StreamModeDetails": {"StreamMode": stream.mode},
                    "StreamCreationTimestamp": stream.created,
                }
                for stream in (self.streams[n] for n in page)
            ],
        }
        if result["HasMoreStreams"]:
            result["NextToken"] = base64.b64encode(json.dumps([page[-1], now]).encode()).decode()
        return result

    def _op_ListShards(self, body: dict[str, Any]) -> dict[str, Any]:
        max_results = body.get("MaxResults", 1000)
        if not isinstance(max_results, int) or not 1 <= max_results <= 10_000:
            raise _Fail(400, "ValidationException", "MaxResults must be from 1 to 10000")
        now = anyio.current_time()
        token = body.get("NextToken")
        if token is not None:
            if _stream_name(body) is not None or "ExclusiveStartShardId" in body:
                raise _Fail(
                    400,
                    "InvalidArgumentException",
                    "NextToken and StreamName/StreamARN/ExclusiveStartShardId cannot be "
                    "provided together.",
                )
            name, after, at_latest, offset, issued = _list_shards_token(token)
            if now - issued > _TOKEN_TTL:
                raise _Fail(400, "ExpiredNextTokenException", "The NextToken has expired.")
            stream = self._get(name)
        else:
            stream = self._stream(body)
            shard_filter = body.get("ShardFilter") or {}
            kind = shard_filter.get("Type")
            at_latest = kind == "AT_LATEST"
            after = body.get("ExclusiveStartShardId")
            if kind == "AFTER_SHARD_ID":
                after = shard_filter.get("ShardId") or after
            offset = 0
        shards = [
            s
            for s in stream.shards
            if not (at_latest and s.closed) and (after is None or s.shard_id > after)
        ]
        page = shards[offset : offset + max_results]
        result: dict[str, Any] = {"Shards": [_describe_shard(s) for s in page]}
        if offset + max_results < len(shards):
            state = [stream.name, after, at_latest, offset + max_results, now]
            result["NextToken"] = base64.b64encode(json.dumps(state).encode()).decode()
        return result

    def _op_SplitShard(self, body: dict[str, Any]) -> dict[str, Any]:
        stream = self._stream(body)
        key = str(body.get("NewStartingHashKey", ""))
        if not _EHK.fullmatch(key):
            raise _Fail(400, "ValidationException", "NewStartingHashKey must be a decimal number")
        self.split_shard(stream.name, str(body.get("ShardToSplit")), int(key))
        return {}

    def _op_MergeShards(self, body: dict[str, Any]) -> dict[str, Any]:
        stream = self._stream(body)
        self.merge_shards(
            stream.name, str(body.get("ShardToMerge")), str(body.get("AdjacentShardToMerge"))
        )
        return {}

    def _op_UpdateShardCount(self, body: dict[str, Any]) -> dict[str, Any]:
        stream = self._stream(body)
        if body.get("ScalingType", "UNIFORM_SCALING") != "UNIFORM_SCALING":
            raise _Fail(400, "ValidationException", "ScalingType must be UNIFORM_SCALING")
        target = body.get("TargetShardCount")
        if not isinstance(target, int):
            raise _Fail(400, "ValidationException", "TargetShardCount is required")
        current = len(stream.open_shards())
        self.update_shard_count(stream.name, target)
        return {
            "StreamName": stream.name,
            "StreamARN": stream.arn,
            "CurrentShardCount": current,
            "TargetShardCount": target,
        }


def _list_shards_token(token: str) -> tuple[str, str | None, bool, int, float]:
    """A ListShards NextToken this fake handed out, or ``InvalidArgumentException``."""
    try:
        name, after, at_latest, offset, issued = json.loads(base64.b64decode(token))
    except (ValueError, TypeError, RecursionError, binascii.Error):
        name = None
    if not (
        isinstance(name, str)
        and (after is None or isinstance(after, str))
        and isinstance(at_latest, bool)
        and type(offset) is int
        and offset >= 0
        and isinstance(issued, (int, float))
        and not isinstance(issued, bool)
        and math.isfinite(issued)
    ):
        raise _Fail(400, "InvalidArgumentException", "Invalid NextToken.")
    return name, after, at_latest, offset, float(issued)


def _logged(body: dict[str, Any]) -> dict[str, Any]:
    """A request body as the request log keeps it: no record data."""
    logged = dict(body)
    if isinstance(logged.get("Records"), list):
        logged["Records"] = len(logged["Records"])
    if isinstance(logged.get("Data"), str):
        logged["Data"] = len(logged["Data"])
    return logged


def _reset(request: httpx.Request) -> NoReturn:
    raise httpx.ReadError("connection reset by peer", request=request)


def _required(body: dict[str, Any], member: str) -> Any:
    value = body.get(member)
    if value is None:
        where = member[0].lower() + member[1:]
        raise _Fail(
            400,
            "ValidationException",
            f"1 validation error detected: Value null at '{where}' failed to satisfy "
            "constraint: Member must not be null",
        )
    return value


def _stream_name(body: dict[str, Any]) -> str | None:
    """The stream a request names, leniently (for ``fatal`` and ``fail_next`` targeting)."""
    name = body.get("StreamName")
    if isinstance(name, str) and name:
        return name
    arn = body.get("StreamARN")
    if isinstance(arn, str) and arn:
        return arn.rpartition("/")[2]
    return None
