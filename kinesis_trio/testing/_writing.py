"""The fake's writes: PutRecords and PutRecord checked, faulted, stored and counted."""

from __future__ import annotations

import base64
import binascii
import hashlib
from bisect import bisect_right
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn

import anyio
import httpx

from ._checks import _EHK
from ._fake_streams import _Stream, _Streams
from ._faults import _FaultInjection
from ._model import (
    _MAX_HASH,
    _STATUS,
    ACCOUNT_ID,
    AMBIGUOUS_FAULTS,
    ENTRY_FAULTS,
    FakeRecord,
    _Fail,
)
from ._shapes import check_input

_PTE = "ProvisionedThroughputExceededException"
_DRY_RUN_MESSAGE = "The request was rejected because the DryRun parameter was specified."


@dataclass
class _Entry:
    """A validated write entry; ``hash_key`` is ``None`` on an AUTO stream (the fake picks)."""

    data: bytes
    partition_key: str | None
    explicit_hash_key: str | None
    hash_key: int | None
    size: int  # data + UTF-8 partition key bytes


class _Writing(_Streams, _FaultInjection):
    """PutRecords and PutRecord: a write refused, dry-run, faulted or stored; the stats."""

    #: answer a ``DryRun: true`` write ``DryRunOperationException`` once it passes the checks
    honor_dry_run: bool
    #: the largest PutRecords request, partition keys included (larger ones: HTTP 400)
    max_request_size: int

    if TYPE_CHECKING:  # provided by FakeKinesis
        write_block: str | None

        def _respond(self, status: int, body: dict[str, Any]) -> httpx.Response: ...

        def _error(self, status: int, code: str, message: str) -> httpx.Response: ...

    def __init__(self, *, honor_dry_run: bool, max_request_size: int) -> None:
        """This part's own settings (FakeKinesis sets up the streams and the faults)."""
        self.honor_dry_run = honor_dry_run
        self.max_request_size = max_request_size

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
        now = self._now()
        self._expire(stream, now)
        faults, stats, rng = self._faults, self.stats, self.rng
        # routed by bisection: a linear scan per entry cost the fake more than the producer
        # on streams of thousands of shards
        open_shards, by_start, starts = stream.routing()
        results: list[dict[str, str]] = []
        failed = 0
        for entry in parsed:
            stats._entry()
            if entry.hash_key is None:  # AUTO: an open shard picked uniformly at random
                shard = open_shards[rng.randrange(len(open_shards))]
                hash_key = shard.start
            else:
                hash_key = entry.hash_key
                shard = by_start[bisect_right(starts, hash_key) - 1]
                if not shard.holds(hash_key):  # open shards cover the key space
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


def _astral(text: str) -> int:
    """Characters outside the Basic Multilingual Plane (two UTF-16 code units each)."""
    return 0 if text.isascii() else sum(1 for c in text if ord(c) > 0xFFFF)


def _reset(request: httpx.Request) -> NoReturn:
    raise httpx.ReadError("connection reset by peer", request=request)
