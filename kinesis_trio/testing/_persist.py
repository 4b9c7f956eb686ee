"""The fake's durable state on disk: a versioned JSON snapshot, written atomically.

Format 1::

    {"format": 1,
     "last_sequence": 42,            # the fake's sequence counter (the last one handed out)
     "streams": [
       {"name": "orders", "created": 1767225600.123, "mode": "PROVISIONED",
        "max_record_size": 1048576, "record_distribution_strategy": "USER_PARTITION_KEY",
        "channel_count": 0, "next_shard": 3,
        "shards": [
          {"shard_id": "shardId-000000000000", "start": "0", "end": "1701...",
           "parent_shard_id": null, "adjacent_parent_shard_id": null, "closed": true,
           "starting_sequence_number": "4900...1", "ending_sequence_number": "4900...7",
           "records": [
             {"data": "<base64>", "partition_key": "k", "explicit_hash_key": null,
              "hash_key": "1234...", "sequence_number": "4900...3", "arrival": 812.5}]}]}]}

Hash keys are decimal strings (128-bit). ``arrival`` is the wall-clock time the record was
stored at: its ``anyio.current_time()`` plus the fake's ``clock_offset`` (the loading fake
subtracts its own). Shard iterators, NextTokens, token buckets, statistics
and fault settings are not kept.
"""

from __future__ import annotations

import base64
import binascii
import contextlib
import json
import os
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ._model import (
    _MAX_CHANNELS,
    _MAX_HASH,
    _STRATEGIES,
    FakeRecord,
    FakeShard,
    _seq_counter,
    _Stream,
)

if TYPE_CHECKING:
    from ._server import FakeKinesis

#: The snapshot format this module writes and reads.
FORMAT = 1
_MODES = ("PROVISIONED", "ON_DEMAND")


def save_state(fake: FakeKinesis, path: str | os.PathLike[str]) -> None:
    """Write the fake's streams, shards, records and sequence counter to ``path`` (JSON).

    Atomic: written to a temporary file in the same directory, flushed to disk, then
    renamed over ``path``; a crash leaves the previous snapshot or the new one, never a
    mix. Synchronous, and it reads the fake without awaiting, so a snapshot taken in the
    event loop is consistent. The directory must exist.
    """
    target = Path(path)
    state = _snapshot(fake)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as out:
            json.dump(state, out, separators=(",", ":"))
            out.flush()
            os.fsync(out.fileno())
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    _fsync_dir(target.parent)


def load_state(fake: FakeKinesis, path: str | os.PathLike[str]) -> bool:
    """Load a snapshot written by :func:`save_state` into ``fake``, which has no streams.

    Returns False, changing nothing, if ``path`` does not exist. A file that is not a valid
    snapshot raises ``ValueError`` naming the file and the problem, and changes nothing;
    so does a fake that already has streams. Once loaded, new sequence numbers follow
    the largest stored one and new shard ids the stream's highest; ``fake.changes``
    counts the load as one change.
    """
    source = Path(path)
    try:
        raw = source.read_bytes()
    except FileNotFoundError:
        return False
    if fake.streams:
        raise ValueError(f"{source}: cannot load into a fake that already has streams")
    try:
        state = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:  # JSONDecodeError is a ValueError
        raise ValueError(f"{source}: not a kinesis-trio state file: invalid JSON ({exc})") from None
    try:
        streams, last_seq = _restore(state)
    except _Corrupt as exc:
        raise ValueError(f"{source}: {exc}") from None
    for stream in streams:
        for shard in stream.shards:
            for record in shard.records:
                record.arrival -= fake.clock_offset
    fake.streams.update((s.name, s) for s in streams)
    fake._last_seq = max(fake._last_seq, last_seq)
    fake.changes += 1
    return True


# -- writing -------------------------------------------------------------------------------


def _snapshot(fake: FakeKinesis) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "last_sequence": fake._last_seq,
        "streams": [
            _dump_stream(fake.streams[name], fake.clock_offset) for name in sorted(fake.streams)
        ],
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


def _fsync_dir(directory: Path) -> None:
    """Make the rename durable (POSIX); best effort where directories cannot be opened."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        with contextlib.suppress(OSError):
            os.fsync(fd)
    finally:
        os.close(fd)


# -- reading -------------------------------------------------------------------------------


class _Corrupt(Exception):
    """What is wrong with a snapshot, and where (a JSON path)."""


class _Node:
    """A JSON value and where it sits in the snapshot, for precise error messages."""

    def __init__(self, value: Any, where: str) -> None:
        self.value, self.where = value, where

    def _fail(self, problem: str) -> _Corrupt:
        return _Corrupt(f"{self.where}: {problem}")

    def member(self, name: str) -> _Node:
        if not isinstance(self.value, dict):
            raise self._fail("is not an object")
        if name not in self.value:
            raise _Corrupt(f"{self.where}: missing {name!r}")
        return _Node(self.value[name], f"{self.where}.{name}")

    def items(self) -> list[_Node]:
        if not isinstance(self.value, list):
            raise self._fail("is not a list")
        return [_Node(v, f"{self.where}[{i}]") for i, v in enumerate(self.value)]

    def text(self, choices: tuple[str, ...] = ()) -> str:
        value = self.value
        if not isinstance(value, str):
            raise self._fail(f"{value!r} is not a string")
        if choices and value not in choices:
            raise self._fail(f"{value!r} is not one of {', '.join(choices)}")
        return value

    def text_or_null(self) -> str | None:
        return None if self.value is None else self.text()

    def integer(self, low: int = 0, high: int | None = None) -> int:
        value = self.value
        if isinstance(value, bool) or not isinstance(value, int):
            raise self._fail(f"{value!r} is not an integer")
        if value < low or (high is not None and value > high):
            raise self._fail(f"{value} is out of range")
        return value

    def number(self) -> float:
        value = self.value
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise self._fail(f"{value!r} is not a number")
        return float(value)

    def flag(self) -> bool:
        if not isinstance(self.value, bool):
            raise self._fail(f"{self.value!r} is not true or false")
        return self.value

    def decimal(self) -> str:
        """A string of ASCII digits (a sequence number or hash key)."""
        value = self.text()
        if not (value.isascii() and value.isdigit()):
            raise self._fail(f"{value!r} is not a decimal number")
        return value

    def decimal_or_null(self) -> str | None:
        return None if self.value is None else self.decimal()

    def hash_key(self) -> int:
        key = int(self.decimal())
        if key > _MAX_HASH:
            raise self._fail("is over 2^128-1")
        return key


def _restore(state: Any) -> tuple[list[_Stream], int]:
    top = _Node(state, "$")
    if not isinstance(state, dict):
        raise _Corrupt("not a kinesis-trio state file (not a JSON object)")
    version = top.member("format").value
    if version != FORMAT:
        raise _Corrupt(f"unsupported format {version!r} (this version reads format {FORMAT})")
    last_seq = top.member("last_sequence").integer()
    streams: list[_Stream] = []
    names: set[str] = set()
    for node in top.member("streams").items():
        stream = _load_stream(node)
        if stream.name in names:
            raise _Corrupt(f"{node.where}: stream {stream.name!r} appears twice")
        names.add(stream.name)
        streams.append(stream)
        # the counter must stay ahead of every number handed out
        for shard in stream.shards:
            numbers = [shard.starting_sequence_number, shard.ending_sequence_number or "0"]
            numbers += [r.sequence_number for r in shard.records]
            last_seq = max(last_seq, *(_seq_counter(n) for n in numbers))
    return streams, last_seq


def _load_stream(node: _Node) -> _Stream:
    mode = node.member("mode").text(choices=_MODES)
    strategy = node.member("record_distribution_strategy").text(choices=_STRATEGIES)
    if strategy == "AUTO" and mode != "ON_DEMAND":
        raise _Corrupt(f"{node.where}: AUTO record distribution on a provisioned stream")
    stream = _Stream(
        node.member("name").text(),
        [],
        node.member("next_shard").integer(),
        mode,
        max_record_size=node.member("max_record_size").integer(low=1),
        record_distribution_strategy=strategy,
        channel_count=node.member("channel_count").integer(high=_MAX_CHANNELS),
        created=node.member("created").number(),
    )
    if not stream.name:
        raise _Corrupt(f"{node.where}.name: is empty")
    ids: set[str] = set()
    for shard_node in node.member("shards").items():
        shard = _load_shard(shard_node)
        if shard.shard_id in ids:
            raise _Corrupt(f"{shard_node.where}: shard {shard.shard_id!r} appears twice")
        ids.add(shard.shard_id)
        stream.shards.append(shard)
        number = shard.shard_id.rpartition("-")[2]
        if number.isascii() and number.isdigit():  # new shard ids must not repeat it
            stream.next_shard = max(stream.next_shard, int(number) + 1)
    for shard in stream.shards:
        for parent in (shard.parent_shard_id, shard.adjacent_parent_shard_id):
            if parent is not None and parent not in ids:
                raise _Corrupt(
                    f"{node.where}: shard {shard.shard_id!r} names parent {parent!r}, "
                    "which is not in the stream"
                )
    return stream


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
    numbers = [int(r.sequence_number) for r in shard.records]
    if numbers != sorted(numbers) or len(set(numbers)) != len(numbers):
        raise _Corrupt(f"{node.where}.records: sequence numbers are not increasing")
    return shard


def _load_record(node: _Node, shard_id: str) -> FakeRecord:
    encoded = node.member("data").text()
    try:
        data = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        raise _Corrupt(f"{node.where}.data: not base64") from None
    return FakeRecord(
        data,
        node.member("partition_key").text_or_null(),
        node.member("explicit_hash_key").decimal_or_null(),
        node.member("hash_key").hash_key(),
        node.member("sequence_number").decimal(),
        shard_id,
        node.member("arrival").number(),
    )
