"""The request builder: Kinesis records into PutRecords requests (pure, no awaits).

:class:`RequestCollector` holds one stream's next request as it fills and decides when it
goes: when it is full, or when its earliest record's deadline has come (or on flush) *and*
a connection is free. While every connection is busy it keeps filling, so a producer that
runs behind sends fewer, fuller requests, not a stream of tiny ones. :func:`body` writes the
JSON of a request.
"""

from __future__ import annotations

import json
import math
from binascii import b2a_base64
from collections import deque
from collections.abc import Iterable
from typing import NamedTuple

from ._pipeline_data import KRecord

__all__ = ["Due", "RequestCollector", "body", "chunks", "dry_run_body"]

_INF = math.inf


class Due(NamedTuple):
    """The collector's verdict: ``send`` now, or wait until ``wake`` (or for more records);
    ``for_connection``: the request is due but waits for a free connection."""

    send: bool
    wake: float
    for_connection: bool = False


class RequestCollector:
    """One stream's request in formation (500 records / 5 MiB by default)."""

    __slots__ = ("_deadline", "_incoming", "_pending", "_size", "max_count", "max_size")

    def __init__(self, max_count: int, max_size: int) -> None:
        self.max_count = max_count
        self.max_size = max_size
        self._incoming: deque[KRecord] = deque()
        self._pending: list[KRecord] = []
        self._size = 0
        self._deadline = _INF

    def offer(self, krecs: Iterable[KRecord]) -> None:
        """Records for the stream's next requests, in order."""
        self._incoming.extend(krecs)

    def pending(self) -> list[KRecord]:
        """The records of the request in formation (not removed)."""
        return self._pending

    def decide(
        self, now: float, flushing: bool, connection_free: bool, max_size: int | None = None
    ) -> Due:
        """Fill the request from what was offered; should it go now? ``max_size``: the
        largest request the path carries now (``ConcurrencyLimit.request_bytes``), when
        it is under the collector's own."""
        pending = self._pending
        incoming = self._incoming
        limit = self.max_size if max_size is None else min(max_size, self.max_size)
        while incoming:
            krec = incoming[0]
            if pending and (len(pending) >= self.max_count or self._size + krec.size > limit):
                break  # full: the rest waits for the next request
            pending.append(incoming.popleft())
            self._size += krec.size
            if krec.send_by < self._deadline:
                self._deadline = krec.send_by
        if not pending:
            return Due(False, _INF)
        full = bool(incoming)
        if full or flushing or now >= self._deadline:
            if full or connection_free:
                return Due(True, now)
            return Due(False, _INF, True)  # keep filling until a connection frees
        return Due(False, self._deadline)

    def take(self) -> list[KRecord]:
        """Remove and return the request in formation."""
        return self.take_sized()[0]

    def take_sized(self) -> tuple[list[KRecord], int]:
        """Remove and return the request in formation, with its records' bytes (summed as
        they came: no second pass over them)."""
        pending, self._pending = self._pending, []
        size, self._size = self._size, 0
        self._deadline = _INF
        return pending, size


def chunks(krecs: list[KRecord], max_count: int, max_size: int) -> list[list[KRecord]]:
    """``krecs`` cut into requests of at most ``max_count`` records and ``max_size`` bytes."""
    if not krecs:
        return []
    if len(krecs) <= max_count and sum(k.size for k in krecs) <= max_size:
        return [krecs]
    out: list[list[KRecord]] = []
    chunk: list[KRecord] = []
    size = 0
    for krec in krecs:
        if chunk and (len(chunk) >= max_count or size + krec.size > max_size):
            out.append(chunk)
            chunk, size = [], 0
        chunk.append(krec)
        size += krec.size
    if chunk:
        out.append(chunk)
    return out


def body(json_head: bytes, krecs: list[KRecord]) -> bytes:
    """The PutRecords JSON body, joined once from pieces (no copy of each record's base64
    text into a per-record string first). ``json_head``: ``{"StreamName":...,"Records":[``."""
    parts = [json_head]
    append = parts.append
    opening = b'{"Data":"'
    tails = _ENTRY_TAILS
    for krec in krecs:
        tail = krec.tail
        if tail is None:
            key = krec.partition_key
            if key is not None and krec.ehk is None:
                # a plain record's tail is its key's (shared, not kept on the record: on a
                # stream of many shards almost every record is plain, sent once)
                tail = tails.get(key) or _entry_tail(key)
            else:
                tail = krec.keep_tail(json_tail(key, krec.ehk))
        append(opening)
        # base64 made for each attempt, not kept: only the raw bytes stay in memory
        append(b2a_base64(krec.data, newline=False))
        append(tail)
        opening = b',{"Data":"'
    append(b"]}")
    return b"".join(parts)


#: ``","PartitionKey":<the key in JSON>`` of recent partition keys (``json.dumps`` costs
#: more than the rest of an entry; keys repeat), at most :data:`_KEY_TAILS_MAX` of them
_KEY_TAILS: dict[str, bytes] = {}
_KEY_TAILS_MAX = 1 << 12


def _key_tail(partition_key: str) -> bytes:
    tail = b'","PartitionKey":' + json.dumps(partition_key).encode()
    if len(_KEY_TAILS) >= _KEY_TAILS_MAX:
        _KEY_TAILS.clear()
    _KEY_TAILS[partition_key] = tail
    return tail


#: a plain entry's whole tail, ``","PartitionKey":<the key in JSON>}``, of recent keys
_ENTRY_TAILS: dict[str, bytes] = {}


def _entry_tail(partition_key: str) -> bytes:
    tail = (_KEY_TAILS.get(partition_key) or _key_tail(partition_key)) + b"}"
    if len(_ENTRY_TAILS) >= _KEY_TAILS_MAX:
        _ENTRY_TAILS.clear()
    _ENTRY_TAILS[partition_key] = tail
    return tail


def json_tail(partition_key: str | None, ehk: str | None) -> bytes:
    """A PutRecords entry after its base64 data: ``","PartitionKey":...}`` (no
    PartitionKey for a record without one: an ``AUTO`` stream's)."""
    if partition_key is None:
        tail = b'"'
    else:
        tail = _KEY_TAILS.get(partition_key) or _key_tail(partition_key)
    if ehk is not None:
        tail += b',"ExplicitHashKey":"' + ehk.encode() + b'"'
    return tail + b"}"


#: The partition key of the access check's probe record.
PROBE_PARTITION_KEY = "kinesis-trio-access-check"


def dry_run_body(name: str, arn: str | None) -> bytes:
    """A PutRecords that only checks access (``DryRun``): one empty record, addressed by
    ARN when there is one (``StreamARN`` alone) and by name otherwise."""
    ref = {"StreamARN": arn} if arn else {"StreamName": name}
    return json.dumps(
        {**ref, "DryRun": True, "Records": [{"Data": "", "PartitionKey": PROBE_PARTITION_KEY}]},
        separators=(",", ":"),
    ).encode()
