"""The spool's rows as they are read back: a record and its size, a dead letter, or why
it is damaged (its checksum, its fields' types); helpers shared by the store and salvage."""

from __future__ import annotations

import functools
import os
import sqlite3
import urllib.parse
import zlib
from typing import NamedTuple

from .._core import Row

__all__ = ["Damage", "Dead", "checksum"]

#: What reading a damaged file raises: SQLite's errors, and its messages that quote damaged
#: bytes (a garbled name in the schema), which the sqlite3 module cannot decode.
_UNREADABLE = (sqlite3.DatabaseError, UnicodeDecodeError)


class Dead(NamedTuple):
    """A record read back that is a dead letter (failed for good, not taken from
    ``failures()``): never sent again; its error code and message as it failed."""

    row: Row
    size: int
    code: str | None
    message: str | None


class Damage(NamedTuple):
    """A record that could not be read back intact: its id, why, its size if known."""

    id: int
    why: str
    size: int = 0


def checksum(row: Row) -> int:
    """CRC-32 of a record's stream, keys and data (how the spool tells a damaged record)."""
    return zlib.crc32(row.data, _head_crc(row.stream, row.partition_key, row.explicit_hash_key))


@functools.lru_cache(maxsize=4096)
def _head_crc(stream: str, partition_key: str | None, explicit_hash_key: str | None) -> int:
    """The CRC-32 of a record's stream and keys, where its data's CRC starts (cached: a
    stream's records share a few thousand keys at most, mostly)."""
    head = "\x00".join(
        (
            stream,
            "\x01" if partition_key is None else partition_key,
            "" if explicit_hash_key is None else explicit_hash_key,
        )
    )
    return zlib.crc32(head.encode("utf-8", "surrogatepass"))


def _size(row: Row) -> int:
    """A record's bytes as the producer counts them: data + UTF-8 partition key."""
    pk = row.partition_key
    return len(row.data) + (0 if pk is None else len(pk.encode("utf-8", "surrogatepass")))


def _check(values: tuple[object, ...]) -> tuple[Row, int] | Damage:
    """A row read from SQLite: the record and its size, or why it is damaged."""
    row_id, stream, pk, ehk, data, crc = values
    if not isinstance(row_id, int):
        return Damage(-1, "an id that is not an integer")
    if (
        not isinstance(stream, str)
        or not (pk is None or isinstance(pk, str))
        or not (ehk is None or isinstance(ehk, str))
        or not isinstance(data, bytes)
        or not isinstance(crc, int)
    ):
        return Damage(row_id, "a field of the wrong type")
    row = Row(row_id, stream, pk, ehk, data)
    if checksum(row) != crc:
        return Damage(row_id, "checksum mismatch", _size(row))
    return row, _size(row)


def _text(value: bytes) -> str:
    """SQLite text as ``str``, even if damaged bytes are not UTF-8 (its record's checksum
    then fails; quick_check's report of a garbled name still reads)."""
    return value.decode("utf-8", "surrogateescape")


def _read_only(path: str) -> str:
    """The URI that opens the database at ``path`` read-only."""
    return f"file:{urllib.parse.quote(os.path.abspath(path))}?mode=ro"


def _empty(path: str) -> bool:
    """Is the file at ``path`` missing or empty?"""
    try:
        return os.path.getsize(path) == 0
    except OSError:
        return True
