"""The GSR header: 18 bytes before every payload, as the Java serde writes and reads them.

Byte 0 is the header version (3), byte 1 the compression (0 none, 5 zlib), bytes 2-17 the
schema version id (UUID: most significant long, then least, big-endian: Python's
``UUID.bytes``), then the payload. zlib is one RFC 1950 stream at the default level, which
is what ``java.util.zip.Deflater()`` writes and ``Inflater()`` reads (``zlib.compress``).
Pure functions: no I/O.
"""

from __future__ import annotations

import uuid
import zlib
from dataclasses import dataclass

from ._types import DecodeError

HEADER_VERSION = 3
COMPRESSION_NONE = 0
COMPRESSION_ZLIB = 5
HEADER_SIZE = 18


@dataclass(frozen=True)
class Frame:
    """A GSR record taken apart: its schema version id and its (decompressed) payload."""

    version_id: uuid.UUID
    compressed: bool
    payload: bytes


def encode_frame(payload: bytes, version_id: uuid.UUID, *, compress: bool = False) -> bytes:
    """The GSR record of ``payload`` written with schema version ``version_id``."""
    if compress:
        return bytes((HEADER_VERSION, COMPRESSION_ZLIB)) + version_id.bytes + zlib.compress(payload)
    return bytes((HEADER_VERSION, COMPRESSION_NONE)) + version_id.bytes + payload


def decode_frame(data: bytes) -> Frame:
    """Take a GSR record apart; :class:`DecodeError` names what is wrong with a bad one."""
    if len(data) < HEADER_SIZE:
        raise DecodeError(
            f"not a GSR record: {len(data)} bytes, shorter than the {HEADER_SIZE}-byte header"
        )
    if data[0] != HEADER_VERSION:
        raise DecodeError(
            f"not a GSR record: header version byte {data[0]}, expected {HEADER_VERSION}"
        )
    version_id = uuid.UUID(bytes=bytes(data[2:HEADER_SIZE]))
    body = bytes(data[HEADER_SIZE:])
    if data[1] == COMPRESSION_NONE:
        return Frame(version_id, False, body)
    if data[1] != COMPRESSION_ZLIB:
        raise DecodeError(
            f"unknown compression byte {data[1]} (known: {COMPRESSION_NONE} none, "
            f"{COMPRESSION_ZLIB} zlib)"
        )
    inflater = zlib.decompressobj()
    try:
        payload = inflater.decompress(body)
    except zlib.error as exc:
        raise DecodeError(f"the zlib payload does not inflate: {exc}") from None
    if not inflater.eof:
        raise DecodeError("the zlib payload is truncated (its stream does not end)")
    # Bytes after the stream's end are ignored, as Java's Inflater ignores them.
    return Frame(version_id, True, payload)
