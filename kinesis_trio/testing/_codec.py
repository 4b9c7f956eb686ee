"""The saved state's document (format 1): what :func:`._persist.save_state` writes and
:func:`._persist.load_state` reads, and what a SQLite store's rows are checked as::

    {"format": 1,
     "last_sequence": 42,            # the fake's sequence counter (the last one handed out)
     "streams": [
       {"name": "orders", "created": 1767225600.123, "mode": "PROVISIONED",
        "max_record_size": 1048576, "record_distribution_strategy": "USER_PARTITION_KEY",
        "channel_count": 0, "next_shard": 3, "retention_hours": 24,
        "shards": [
          {"shard_id": "shardId-000000000000", "start": "0", "end": "1701...",
           "parent_shard_id": null, "adjacent_parent_shard_id": null, "closed": true,
           "starting_sequence_number": "4900...1", "ending_sequence_number": "4900...7",
           "records": [
             {"data": "<base64>", "partition_key": "k", "explicit_hash_key": null,
              "hash_key": "1234...", "sequence_number": "4900...3", "arrival": 812.5}]}]}]}

(``retention_hours`` may be absent: 24.) In the document and in the store, hash keys are
decimal strings (128-bit) and ``arrival`` is the wall-clock time the record was stored at:
its ``anyio.current_time()`` plus the fake's ``clock_offset`` (the loading fake subtracts
its own). Shard iterators, NextTokens, token buckets, statistics and fault settings are not
kept. A record's sequence number is a 56-digit decimal, as the fake hands them out, so
their string order is their numeric order.
"""

from __future__ import annotations

import base64
import binascii
import itertools
import math
import re
from typing import Any

from ._checks import _MAX_CHANNELS, _STRATEGIES
from ._fake_streams import _Stream
from ._model import _MAX_HASH, FakeRecord, FakeShard, _seq_counter

#: The JSON snapshot format :func:`save_state` writes and :func:`load_state` reads.
FORMAT = 1
_MODES = ("PROVISIONED", "ON_DEMAND")
#: RetentionPeriodHours: 24 to 8760
_RETENTION = (24, 8760)
#: SequenceNumber's pattern allows 129 digits; a hash key has at most 39 (2^128 - 1).
_SEQ_DIGITS, _HASH_DIGITS = 129, 39
#: The fake's sequence numbers: 56 digits (``_seq``), so the counter stays below 10^54.
_RECORD_SEQ = re.compile(r"[1-9][0-9]{55}")
_MAX_COUNTER = 10**54 - 1
#: Shard ids are ``shardId-`` and 12 digits; a larger counter is not a real one.
_MAX_NEXT_SHARD = 10**12
#: A hash key as a store row holds it: decimal, no leading zero.
_HASH_TEXT = re.compile(r"0|[1-9][0-9]{0,38}")

# -- writing ------------------------------------------------------------------------------


def _encode(streams: dict[str, _Stream], last_seq: int, offset: float) -> dict[str, Any]:
    """The document of these streams (by name) and sequence counter; ``offset`` turns
    arrival times into wall-clock times."""
    return {
        "format": FORMAT,
        "last_sequence": last_seq,
        "streams": [_dump_stream(streams[name], offset) for name in sorted(streams)],
    }


def _dump_stream(stream: _Stream, offset: float) -> dict[str, Any]:
    return {
        "name": stream.name,
        "created": stream.created,
        "mode": stream.mode,
        "max_record_size": stream.max_record_size,
        "record_distribution_strategy": stream.record_distribution_strategy,
        "channel_count": stream.channel_count,
        "next_shard": stream.next_shard,
        "retention_hours": stream.retention_hours,
        "shards": [_dump_shard(s, offset) for s in stream.shards],
    }


def _dump_shard(shard: FakeShard, offset: float) -> dict[str, Any]:
    return {
        "shard_id": shard.shard_id,
        "start": str(shard.start),
        "end": str(shard.end),
        "parent_shard_id": shard.parent_shard_id,
        "adjacent_parent_shard_id": shard.adjacent_parent_shard_id,
        "closed": shard.closed,
        "starting_sequence_number": shard.starting_sequence_number,
        "ending_sequence_number": shard.ending_sequence_number,
        "records": [
            {
                "data": base64.b64encode(r.data).decode("ascii"),
                "partition_key": r.partition_key,
                "explicit_hash_key": r.explicit_hash_key,
                "hash_key": str(r.hash_key),
                "sequence_number": r.sequence_number,
                "arrival": r.arrival + offset,
            }
            for r in shard.records
        ],
    }


# -- reading and checking -----------------------------------------------------------------


class _Corrupt(Exception):
    """What is wrong with a snapshot, and where (a JSON path)."""


def _short(value: Any) -> str:
    """``repr(value)``, cut to a length a one-line message can hold."""
    text = repr(value)
    return text if len(text) <= 60 else f"{text[:40]}... ({len(text)} characters)"


class _Node:
    """A JSON value and where it sits in the snapshot, for precise error messages.

    ``named``: list items are named by their ``name`` or ``shard_id`` rather than their
    index (a store's rows have no order of their own).
    """

    def __init__(self, value: Any, where: str, named: bool = False) -> None:
        self.value, self.where, self.named = value, where, named

    def _fail(self, problem: str) -> _Corrupt:
        return _Corrupt(f"{self.where}: {problem}")

    def member(self, name: str) -> _Node:
        if not isinstance(self.value, dict):
            raise self._fail("is not an object")
        if name not in self.value:
            raise _Corrupt(f"{self.where}: missing {name!r}")
        return _Node(self.value[name], self._path(name), self.named)

    def _path(self, name: str) -> str:
        return f"{self.where}.{name}" if self.where else name

    def optional(self, name: str, default: Any) -> _Node:
        if isinstance(self.value, dict) and name not in self.value:
            return _Node(default, self._path(name), self.named)
        return self.member(name)

    def items(self) -> list[_Node]:
        if not isinstance(self.value, list):
            raise self._fail("is not a list")
        out = []
        for i, v in enumerate(self.value):
            label = v.get("name", v.get("shard_id")) if self.named and isinstance(v, dict) else i
            out.append(_Node(v, f"{self.where}[{_short(label)}]", self.named))
        return out

    def text(self, choices: tuple[str, ...] = ()) -> str:
        value = self.value
        if not isinstance(value, str):
            raise self._fail(f"{_short(value)} is not a string")
        if choices and value not in choices:
            raise self._fail(f"{_short(value)} is not one of {', '.join(choices)}")
        return value

    def text_or_null(self) -> str | None:
        return None if self.value is None else self.text()

    def integer(self, low: int = 0, high: int | None = None) -> int:
        value = self.value
        if isinstance(value, bool) or not isinstance(value, int):
            raise self._fail(f"{_short(value)} is not an integer")
        if value < low or (high is not None and value > high):
            raise self._fail(f"{_short(value)} is out of range")
        return value

    def number(self) -> float:
        value = self.value
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self._fail(f"{_short(value)} is not a number")
        number = float(value)
        if not math.isfinite(number):
            raise self._fail(f"{value!r} is not a finite number")
        return number

    def flag(self) -> bool:
        if not isinstance(self.value, bool):
            raise self._fail(f"{_short(self.value)} is not true or false")
        return self.value

    def decimal(self, digits: int = _SEQ_DIGITS) -> str:
        """A string of at most ``digits`` ASCII digits (a sequence number or hash key)."""
        value = self.text()
        if not (value.isascii() and value.isdigit()):
            raise self._fail(f"{_short(value)} is not a decimal number")
        if len(value) > digits:
            raise self._fail(f"{_short(value)} has over {digits} digits")
        return value

    def decimal_or_null(self, digits: int = _SEQ_DIGITS) -> str | None:
        return None if self.value is None else self.decimal(digits)

    def sequence_number(self) -> str:
        """A record's: 56 digits, as the fake hands them out."""
        value = self.decimal()
        if not _RECORD_SEQ.fullmatch(value):
            raise self._fail(f"{_short(value)} is not a sequence number of the fake (56 digits)")
        return value

    def hash_key(self) -> int:
        text = self.text()
        if not (text.isascii() and text.isdigit()):
            raise self._fail(f"{_short(text)} is not a decimal number")
        digits = text.lstrip("0") or "0"
        if len(digits) > _HASH_DIGITS or int(digits) > _MAX_HASH:
            raise self._fail("is over 2^128-1")
        return int(digits)

    def blob(self) -> bytes:
        if not isinstance(self.value, bytes):
            raise self._fail(f"{_short(self.value)} is not a blob")
        return self.value


def _decode(state: Any, named: bool = False) -> tuple[list[_Stream], int]:
    """The streams and sequence counter of a document, checked (:class:`_Corrupt` says
    what is wrong, and where); ``named``: a store's rows, named rather than indexed."""
    top = _Node(state, "" if named else "$", named)  # a store's tables have no top
    if not isinstance(state, dict):
        raise _Corrupt("not a kinesis-trio state file (not a JSON object)")
    version = top.member("format").value
    if version != FORMAT:
        raise _Corrupt(f"unsupported format {_short(version)} (this version reads format {FORMAT})")
    last_seq = top.member("last_sequence").integer(high=_MAX_COUNTER)
    streams: list[_Stream] = []
    names: set[str] = set()
    for node in top.member("streams").items():
        stream = _load_stream(node)
        if stream.name in names:
            raise _Corrupt(f"{node.where}: stream {stream.name!r} appears twice")
        names.add(stream.name)
        streams.append(stream)
        # the counter must stay ahead of every number handed out (records are in order)
        for shard in stream.shards:
            numbers = [shard.starting_sequence_number, shard.ending_sequence_number or "0"]
            if shard.records:
                numbers.append(shard.records[-1].sequence_number)
            last_seq = max(last_seq, *(_seq_counter(n) for n in numbers))
    if last_seq > _MAX_COUNTER:
        raise _Corrupt("a sequence number is beyond what the fake hands out")
    return streams, last_seq


def _load_stream(node: _Node) -> _Stream:
    mode = node.member("mode").text(choices=_MODES)
    strategy = node.member("record_distribution_strategy").text(choices=_STRATEGIES)
    if strategy == "AUTO" and mode != "ON_DEMAND":
        raise _Corrupt(f"{node.where}: AUTO record distribution on a provisioned stream")
    name = node.member("name").text()
    next_shard = node.member("next_shard").integer(high=_MAX_NEXT_SHARD)
    max_record_size = node.member("max_record_size").integer(low=1, high=2**53)
    channel_count = node.member("channel_count").integer(high=_MAX_CHANNELS)
    created = node.member("created").number()
    retention_hours = node.optional("retention_hours", 24).integer(*_RETENTION)
    if not name:
        raise _Corrupt(f"{node.where}.name: is empty")
    shards: list[FakeShard] = []
    ids: set[str] = set()
    for shard_node in node.member("shards").items():
        shard = _load_shard(shard_node)
        if shard.shard_id in ids:
            raise _Corrupt(f"{shard_node.where}: shard {shard.shard_id!r} appears twice")
        ids.add(shard.shard_id)
        shards.append(shard)
        number = shard.shard_id.rpartition("-")[2]
        if number.isascii() and number.isdigit() and len(number) <= 12:
            next_shard = max(next_shard, int(number) + 1)
    for shard in shards:
        for parent in (shard.parent_shard_id, shard.adjacent_parent_shard_id):
            if parent is not None and parent not in ids:
                raise _Corrupt(
                    f"{node.where}: shard {shard.shard_id!r} names parent {parent!r}, "
                    "which is not in the stream"
                )
    return _Stream(
        name,
        shards,
        next_shard,
        mode,
        max_record_size=max_record_size,
        record_distribution_strategy=strategy,
        channel_count=channel_count,
        created=created,
        retention_hours=retention_hours,
    )


def _load_shard(node: _Node) -> FakeShard:
    shard_id = node.member("shard_id").text()
    start = node.member("start").hash_key()
    end = node.member("end").hash_key()
    if start > end:
        raise _Corrupt(f"{node.where}: start {start} is above end {end}")
    closed = node.member("closed").flag()
    ending = node.member("ending_sequence_number").decimal_or_null()
    if closed != (ending is not None):
        raise _Corrupt(f"{node.where}: a closed shard, and only one, has an ending number")
    shard = FakeShard(
        shard_id,
        start,
        end,
        node.member("parent_shard_id").text_or_null(),
        closed=closed,
        adjacent_parent_shard_id=node.member("adjacent_parent_shard_id").text_or_null(),
        starting_sequence_number=node.member("starting_sequence_number").decimal(),
        ending_sequence_number=ending,
    )
    for record_node in node.member("records").items():
        shard.records.append(_load_record(record_node, shard_id))
    numbers = [r.sequence_number for r in shard.records]  # 56 digits: string order
    if any(a >= b for a, b in itertools.pairwise(numbers)):
        raise _Corrupt(f"{node.where}.records: sequence numbers are not increasing")
    return shard


def _load_record(node: _Node, shard_id: str, *, binary: bool = False) -> FakeRecord:
    if binary:
        data = node.member("data").blob()
    else:
        encoded = node.member("data").text()
        try:
            data = base64.b64decode(encoded, validate=True)
        except (binascii.Error, ValueError):
            raise _Corrupt(f"{node.where}.data: not base64") from None
    return FakeRecord(
        data,
        node.member("partition_key").text_or_null(),
        node.member("explicit_hash_key").decimal_or_null(_HASH_DIGITS),
        node.member("hash_key").hash_key(),
        node.member("sequence_number").sequence_number(),
        shard_id,
        node.member("arrival").number(),
    )


def _stored_record(row: tuple[Any, ...], stream: str, shard_id: str) -> FakeRecord:
    """A row of ``records``; checked as a JSON record is, on a fast path."""
    seq, data, key, ehk, hash_text, arrival = row
    if (
        type(seq) is str
        and _RECORD_SEQ.fullmatch(seq)
        and type(data) is bytes
        and (key is None or type(key) is str)
        and (ehk is None or (type(ehk) is str and _HASH_TEXT.fullmatch(ehk)))
        and type(hash_text) is str
        and _HASH_TEXT.fullmatch(hash_text)
        and type(arrival) is float
        and math.isfinite(arrival)
    ):
        hash_key = int(hash_text)
        if hash_key <= _MAX_HASH:
            return FakeRecord(data, key, ehk, hash_key, seq, shard_id, arrival)
    node = _Node(
        {
            "data": data,
            "partition_key": key,
            "explicit_hash_key": ehk,
            "hash_key": hash_text,
            "sequence_number": seq,
            "arrival": arrival,
        },
        f"records[{stream!r}, {shard_id!r}, {_short(seq)}]",
    )
    return _load_record(node, shard_id, binary=True)  # raises what is wrong
