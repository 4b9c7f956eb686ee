"""The GSR header: the layout the Java serde writes, and what a bad record is told."""

from __future__ import annotations

import uuid
import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kinesis_trio.gsr import DecodeError
from kinesis_trio.gsr._wire import decode_frame, encode_frame


def test_the_header_is_version_compression_then_the_uuid_as_two_big_endian_longs() -> None:
    vid = uuid.UUID("864a4a77-bdd4-3f5a-869a-5d0120062103")
    record = encode_frame(b"payload", vid)
    assert record[:2] == bytes([3, 0])
    # Java: buffer.putLong(getMostSignificantBits()); buffer.putLong(getLeastSignificantBits())
    most = int.from_bytes(record[2:10], "big", signed=True)
    least = int.from_bytes(record[10:18], "big", signed=True)
    assert most == 0x864A4A77BDD43F5A - (1 << 64)  # Java's signed long
    assert least == 0x869A5D0120062103 - (1 << 64)
    assert record[18:] == b"payload"


def test_zlib_is_one_zlib_stream_as_javas_deflater_writes() -> None:
    vid = uuid.uuid4()
    record = encode_frame(b"x" * 100, vid, compress=True)
    assert record[1] == 5
    assert zlib.decompress(record[18:]) == b"x" * 100
    assert record[18] == 0x78  # the zlib (RFC 1950) header Deflater() writes, not raw deflate


@given(payload=st.binary(max_size=300), compress=st.booleans(), vid=st.uuids())
def test_a_record_reads_back(payload: bytes, compress: bool, vid: uuid.UUID) -> None:
    frame = decode_frame(encode_frame(payload, vid, compress=compress))
    assert (frame.version_id, frame.compressed, frame.payload) == (vid, compress, payload)


@pytest.mark.parametrize(
    ("data", "says"),
    [
        (b"\x03\x00" + b"\x01" * 15, "17 bytes, shorter than the 18-byte header"),
        (b"\x00" + b"\x01" * 20, "header version byte 0, expected 3"),
        (b"\x03\x01" + b"\x01" * 16 + b"x", "unknown compression byte 1"),
        (b"\x03\x05" + b"\x01" * 16 + b"not zlib", "does not inflate"),
        (b"\x03\x05" + b"\x01" * 16 + zlib.compress(b"abc" * 50)[:-6], "truncated"),
    ],
)
def test_a_bad_record_is_refused_with_its_fault_named(data: bytes, says: str) -> None:
    with pytest.raises(DecodeError, match=says):
        decode_frame(data)


def test_bytes_after_the_zlib_stream_are_ignored_as_javas_inflater_does() -> None:
    record = encode_frame(b"abc", uuid.uuid4(), compress=True) + b"trailing"
    assert decode_frame(record).payload == b"abc"
