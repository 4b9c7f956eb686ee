"""The pool's caps on an answer, whatever the reads it arrives in (in-memory streams: each
test decides how the bytes are cut)."""

from __future__ import annotations

import anyio
import anyio.abc
import httpx
import pytest

from kinesis_trio._aws._http11 import Fields, Http11Pool, Origin

pytestmark = pytest.mark.anyio

ORIGIN: Origin = ("http", "endpoint", 80)


class _Scripted(anyio.abc.ByteStream):
    """A connection whose far end answers with ``pieces``, one per read, once the request
    is in; it records whether it was closed."""

    def __init__(self, pieces: list[bytes]) -> None:
        self.pieces = list(pieces)
        self.closed = False

    async def send(self, item: bytes) -> None:
        await anyio.lowlevel.checkpoint()

    async def send_eof(self) -> None:
        await anyio.lowlevel.checkpoint()

    async def receive(self, max_bytes: int = 65536) -> bytes:
        await anyio.lowlevel.checkpoint()
        if self.closed:
            raise anyio.ClosedResourceError
        if not self.pieces:
            raise anyio.EndOfStream
        piece = self.pieces.pop(0)
        assert len(piece) <= max_bytes, "the test cuts its pieces within one read"
        return piece

    async def aclose(self) -> None:
        self.closed = True


class _Opener:
    def __init__(self, pieces: list[bytes]) -> None:
        self.pieces = pieces
        self.streams: list[_Scripted] = []

    async def open_stream(self, origin: Origin) -> anyio.abc.ByteStream:
        stream = _Scripted(self.pieces)
        self.streams.append(stream)
        return stream


def _whole(status: int, fields: Fields, content: bytes) -> tuple[int, bytes]:
    return status, content


def _answer(header_bytes: int) -> bytes:
    filler = b"X-Filler: " + b"a" * header_bytes + b"\r\n"
    return b"HTTP/1.1 200 OK\r\n" + filler + b"Content-Length: 2\r\n\r\n{}"


@pytest.mark.parametrize("cut", ["one read", "pieces"])
async def test_a_head_over_64_kib_is_refused_however_it_arrives(cut: str) -> None:
    """docs/architecture.md: a head over 64 KiB is a ``ConnectionLostError`` (the pool's
    ``RemoteProtocolError``) and its connection is closed, whether the head came in one
    read (h11 alone takes any complete head) or in pieces (h11's own cap)."""
    answer = _answer(100 * 1024)
    pieces = [answer] if cut == "one read" else [answer[:70_000], answer[70_000:]]
    opener = _Opener(pieces)
    async with Http11Pool(opener=opener) as pool:
        with pytest.raises(httpx.RemoteProtocolError, match=r"head|too long"):
            await pool.post(ORIGIN, "/", {}, b"{}", _whole)
        assert pool._idle == []
    assert opener.streams[0].closed


async def test_a_head_under_64_kib_in_one_read_is_taken() -> None:
    opener = _Opener([_answer(60 * 1024)])
    async with Http11Pool(opener=opener) as pool:
        assert await pool.post(ORIGIN, "/", {}, b"{}", _whole) == (200, b"{}")


async def test_an_interim_head_over_64_kib_is_refused() -> None:
    interim = b"HTTP/1.1 103 Early Hints\r\nLink: " + b"a" * (70 * 1024) + b"\r\n\r\n"
    opener = _Opener([interim + _answer(10)])
    async with Http11Pool(opener=opener) as pool:
        with pytest.raises(httpx.RemoteProtocolError, match="head"):
            await pool.post(ORIGIN, "/", {}, b"{}", _whole)
