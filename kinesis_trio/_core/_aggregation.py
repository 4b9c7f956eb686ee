"""KPL aggregated record codec.

An aggregated Kinesis record's data is ``MAGIC || AggregatedRecord || MD5(AggregatedRecord)``,
where ``AggregatedRecord`` is the protobuf message of ``proto/messages.proto`` (the KPL's
schema). The encoder writes the protobuf wire format by hand from precomputed byte pieces
(it never builds message objects; the tests prove it byte-identical to the protobuf library);
the decoder parses with the generated protobuf module.
"""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from kinesis_trio._core._shards import hash_key_for

from .._varint import varint as _varint

__all__ = [
    "DIGEST_SIZE",
    "MAGIC",
    "AggregateBuilder",
    "UserRecord",
    "deaggregate",
    "encode_aggregate",
    "hash_key_of",
    "partition_hash_key",
]

MAGIC = b"\xf3\x89\x9a\xc2"
"""First four bytes of every aggregated record."""
DIGEST_SIZE = 16
"""Length of the trailing MD5 digest."""
_OVERHEAD = len(MAGIC) + DIGEST_SIZE
_MAX_HASH_KEY = (1 << 128) - 1


def _messages() -> Any:
    """The generated protobuf module (untyped for mypy's purposes), imported on first use.

    Only reading aggregates (``deaggregate``) needs it; the producer encodes them itself. A
    producer alone so never loads protobuf's runtime (about 6,700 objects more for every
    full garbage collection, and 0.15-0.3 s of import).
    """
    from kinesis_trio.proto import messages_pb2

    return messages_pb2


# Wire-format tag bytes: (field_number << 3) | wire_type.
#   AggregatedRecord: 1 partition_key_table (LEN) = 0x0A, 2 explicit_hash_key_table (LEN) = 0x12,
#                     3 records (LEN) = 0x1A
#   Record: 1 partition_key_index (VARINT) = 0x08, 2 explicit_hash_key_index (VARINT) = 0x10,
#           3 data (LEN) = 0x1A
_TAG_PK_TABLE = 0x0A
_TAG_EHK_TABLE = 0x12
_TAG_LEN3 = 0x1A
_TAG_PK_INDEX = 0x08
_TAG_EHK_INDEX = 0x10


def _varint_len(value: int) -> int:
    """Length in bytes of ``_varint(value)``."""
    if value < 0x80:
        return 1
    if value < 0x4000:
        return 2
    return (value.bit_length() + 6) // 7


def _varints(count: int) -> list[bytes]:
    """``[_varint(n) for n in range(count)]`` for ``count`` up to 2**14 (one or two bytes
    each), built from 256 one-byte pieces instead of ``count`` calls: the tables below are
    made at import, in every cold start."""
    if count > 0x4000:
        raise ValueError(f"two-byte varints end at {0x4000}, not {count}")
    one = [bytes((n,)) for n in range(0x100)]
    # n >= 0x80: its low 7 bits with the continuation bit, then the rest
    return one[: min(count, 0x80)] + [
        one[0x80 | (n & 0x7F)] + one[n >> 7] for n in range(0x80, count)
    ]


_VARINTS = _varints(4096)


def _tagged_varints(tag: int, count: int) -> list[bytes]:
    """``[bytes([tag]) + _varint(n) for n in range(count)]``."""
    prefix = bytes((tag,))
    return [prefix + v for v in _VARINTS[:count]]


# Precomputed "tag + varint(n)" pieces, so the hot path indexes a list instead of encoding
# varints. Beyond the tables (rare: such records cost far more in MD5 anyway) pieces are
# computed. `records` in AggregatedRecord and `data` in Record share the tag byte 0x1A, so
# one table of length headers serves both.
_LEN3_HEADERS = _tagged_varints(_TAG_LEN3, 4096)  # record / data length headers
_PK_ENTRY_HEADERS = _tagged_varints(_TAG_PK_TABLE, 1025)  # any valid key: <= 1024 bytes
_EHK_ENTRY_HEADERS = _tagged_varints(_TAG_EHK_TABLE, 40)  # any valid key: <= 39 digits
_PK_INDEX_PIECES = _tagged_varints(_TAG_PK_INDEX, 2048)
_EHK_INDEX_PIECES = _tagged_varints(_TAG_EHK_INDEX, 2048)


class AggregateBuilder:
    """Accumulates user records for one aggregated Kinesis record.

    The sizing of :class:`AggregateSizer` plus the records as columns; ``encode`` is
    :func:`encode_records` (the producer's own encoder). Create a new one per aggregate (or
    ``clear()`` one to reuse it). Not thread-safe.
    """

    __slots__ = ("_datas", "_ehks", "_pks", "_sizer")

    def __init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        """Drop every record, as if newly constructed."""
        self._sizer = AggregateSizer()
        self._datas: list[bytes] = []
        self._pks: list[str] = []
        self._ehks: list[str | None] = []

    @property
    def count(self) -> int:
        """Number of user records added."""
        return self._sizer.count

    def __len__(self) -> int:
        return self._sizer.count

    @property
    def size(self) -> int:
        """Exact current encoded size, ``len(self.encode())`` (MAGIC + protobuf + MD5)."""
        return self._sizer.size

    def add(
        self,
        data: bytes,
        partition_key: str,
        explicit_hash_key: str | None,
        max_size: int | None = None,
    ) -> bool:
        """Append one user record; keys are stored verbatim (validate them beforehand).

        With ``max_size``, a record that would make ``size`` exceed it is not added and
        ``False`` is returned: one call instead of ``size_if_added`` then ``add``.
        """
        sizer = self._sizer
        grow = sizer.grow(len(data), partition_key, len(partition_key.encode()), explicit_hash_key)
        if max_size is not None and sizer.size + grow > max_size:
            return False
        sizer.add(partition_key, explicit_hash_key, grow)
        self._datas.append(data)
        self._pks.append(partition_key)
        self._ehks.append(explicit_hash_key)
        return True

    def size_if_added(
        self, data_len: int, partition_key: str, pk_utf8_len: int, explicit_hash_key: str | None
    ) -> int:
        """Exact ``size`` after ``add``-ing such a record, without adding it.

        ``pk_utf8_len`` is ``len(partition_key.encode())``, which callers already have.
        """
        sizer = self._sizer
        return sizer.size + sizer.grow(data_len, partition_key, pk_utf8_len, explicit_hash_key)

    def encode(self) -> bytes:
        """``MAGIC + AggregatedRecord + MD5(AggregatedRecord)``, fields in field-number order."""
        ehks = self._ehks if self._sizer.ehks else None
        return encode_records(self._datas, self._pks, ehks)


def _vlen(value: int) -> int:
    """Bytes of a varint (inlined arithmetic for the common small values)."""
    if value < 0x80:
        return 1
    if value < 0x4000:
        return 2
    if value < 0x200000:
        return 3
    return _varint_len(value)


class AggregateSizer:
    """The exact encoded size of an aggregate as records are added, without encoding.

    The producer's hot path adds records here (a dict lookup and some arithmetic) and
    encodes each aggregate once, when it is sealed, with :func:`encode_records`; the result
    is byte-identical to :class:`AggregateBuilder` and ``size`` equals its length.
    """

    __slots__ = ("count", "ehks", "pks", "size")

    def __init__(self) -> None:
        self.pks: dict[str, int] = {}
        self.ehks: dict[str, int] = {}
        self.size = _OVERHEAD
        self.count = 0

    def grow(self, data_len: int, partition_key: str, pk_len: int, ehk: str | None) -> int:
        """How many bytes adding such a record would add (``pk_len``: UTF-8 length)."""
        index = self.pks.get(partition_key)
        if index is None:
            index = len(self.pks)
            grow = 1 + _vlen(pk_len) + pk_len
        else:
            grow = 0
        inner = 2 + _vlen(index) + _vlen(data_len) + data_len
        if ehk is not None:
            e_index = self.ehks.get(ehk)
            if e_index is None:
                e_index = len(self.ehks)
                grow += 2 + len(ehk)  # decimal keys are at most 39 bytes: 1-byte length
            inner += 1 + _vlen(e_index)
        return grow + 1 + _vlen(inner) + inner

    def add(self, partition_key: str, ehk: str | None, grow: int) -> None:
        """Record an addition whose size ``grow`` came from :meth:`grow`."""
        pks = self.pks
        if partition_key not in pks:
            pks[partition_key] = len(pks)
        if ehk is not None and ehk not in self.ehks:
            self.ehks[ehk] = len(self.ehks)
        self.took(grow)

    def took(self, grow: int) -> None:
        """One record more, of ``grow`` bytes (its keys already in the tables)."""
        self.size += grow
        self.count += 1

    def clear(self) -> None:
        """Empty, as if newly made: a shard keeps one sizer, cleared at each seal once the
        aggregate is encoded (a new one per seal is paid per record on a stream of
        thousands of shards, where most aggregates hold one record)."""
        self.pks.clear()
        if self.ehks:
            self.ehks.clear()
        self.size = _OVERHEAD
        self.count = 0


#: Key-table entries (tag, length, UTF-8 key) of recent partition keys: with many keys, most
#: records bring their key into their aggregate's table.
_PK_ENTRIES: dict[str, bytes] = {}
_PK_ENTRIES_MAX = 1 << 16


def _pk_entry(partition_key: str) -> bytes:
    encoded = partition_key.encode()
    try:
        entry = _PK_ENTRY_HEADERS[len(encoded)] + encoded
    except IndexError:
        entry = bytes((_TAG_PK_TABLE,)) + _varint(len(encoded)) + encoded
    if len(_PK_ENTRIES) >= _PK_ENTRIES_MAX:
        _PK_ENTRIES.clear()
    _PK_ENTRIES[partition_key] = entry
    return entry


def encode_records(
    datas: Sequence[bytes],
    partition_keys: Sequence[str],
    explicit_hash_keys: Sequence[str | None] | None = None,
) -> bytes:
    """Encode user records, given as parallel columns, as one aggregated record.

    Byte-identical to :class:`AggregateBuilder` (and so to the protobuf library), in one
    tight loop: the producer calls it once per aggregate. Columns rather than per-record
    tuples: a tuple per record is an allocation (and garbage-collector work) per record.
    ``explicit_hash_keys`` is ``None`` when no record has one.
    """
    pk_index: dict[str, bytes] = {}
    pk_table: list[bytes] = []
    ehk_index: dict[str, bytes] = {}
    ehk_table: list[bytes] = []
    parts: list[bytes] = []
    append = parts.append
    len3 = _LEN3_HEADERS
    entries = _PK_ENTRIES
    if len(partition_keys) != len(datas) or (
        explicit_hash_keys is not None and len(explicit_hash_keys) != len(datas)
    ):
        raise ValueError("encode_records: the columns differ in length")
    ehks: Iterable[str | None] = (
        itertools.repeat(None) if explicit_hash_keys is None else explicit_hash_keys
    )
    for data, partition_key, ehk in zip(datas, partition_keys, ehks, strict=False):
        piece = pk_index.get(partition_key)
        if piece is None:
            entry = entries.get(partition_key)
            if entry is None:
                entry = _pk_entry(partition_key)
            pk_table.append(entry)
            index = len(pk_index)
            try:
                piece = _PK_INDEX_PIECES[index]
            except IndexError:
                piece = bytes((_TAG_PK_INDEX,)) + _varint(index)
            pk_index[partition_key] = piece
        if ehk is not None:
            e_piece = ehk_index.get(ehk)
            if e_piece is None:
                encoded = ehk.encode()
                try:
                    ehk_table.append(_EHK_ENTRY_HEADERS[len(encoded)] + encoded)
                except IndexError:
                    ehk_table.append(bytes((_TAG_EHK_TABLE,)) + _varint(len(encoded)) + encoded)
                index = len(ehk_index)
                try:
                    e_piece = _EHK_INDEX_PIECES[index]
                except IndexError:
                    e_piece = bytes((_TAG_EHK_INDEX,)) + _varint(index)
                ehk_index[ehk] = e_piece
            piece = piece + e_piece
        n = len(data)
        try:
            data_header = len3[n]
        except IndexError:
            data_header = bytes((_TAG_LEN3,)) + _varint(n)
        inner = len(piece) + len(data_header) + n
        try:
            record_header = len3[inner]
        except IndexError:
            record_header = bytes((_TAG_LEN3,)) + _varint(inner)
        append(record_header + piece + data_header)
        append(data)
    return _framed(b"".join(pk_table + ehk_table + parts))


def encode_parts(partition_keys: Iterable[str], parts: list[bytes]) -> bytes:
    """An aggregated record from its records already encoded: ``parts`` holds, for each
    record in order, its header (:func:`record_header`) and then its data; the records use
    no explicit hash key, and their key indexes follow ``partition_keys`` (the table, in
    order). Byte-identical to :func:`encode_records` of the same records: the accumulator
    writes each record's pieces as it places it, and the seal only joins them."""
    entries = _PK_ENTRIES
    table = [entries.get(key) or _pk_entry(key) for key in partition_keys]
    return _framed(b"".join(table + parts))


def record_header(key_index: int, n: int, inner: int) -> bytes:
    """The bytes before a record's data in an aggregate (no explicit hash key): its own
    length header (``inner``: its length after that header), its key index, and the data's
    length header (``n`` bytes of data)."""
    return (
        (_LEN3_HEADERS[inner] if inner < 4096 else bytes((_TAG_LEN3,)) + _varint(inner))
        + (
            _PK_INDEX_PIECES[key_index]
            if key_index < 2048
            else bytes((_TAG_PK_INDEX,)) + _varint(key_index)
        )
        + (_LEN3_HEADERS[n] if n < 4096 else bytes((_TAG_LEN3,)) + _varint(n))
    )


def _framed(proto: bytes) -> bytes:
    """The aggregated record: magic, the protobuf message, its MD5."""
    return b"".join((MAGIC, proto, hashlib.md5(proto, usedforsecurity=False).digest()))


def encode_aggregate(records: Iterable[tuple[bytes, str, str | None]]) -> bytes:
    """Encode ``(data, partition_key, explicit_hash_key)`` tuples as one aggregated record."""
    builder = AggregateBuilder()
    for data, partition_key, explicit_hash_key in records:
        builder.add(data, partition_key, explicit_hash_key)
    return builder.encode()


def partition_hash_key(partition_key: str, explicit_hash_key: str | None = None) -> int:
    """The 128-bit hash key Kinesis routes by.

    ``int(explicit_hash_key)`` if given (a decimal string in ``0..2**128-1``, else
    ``ValueError``), otherwise MD5 of the utf-8 partition key as a big-endian integer.
    """
    if explicit_hash_key is None:
        return hash_key_for(partition_key)
    if not (explicit_hash_key.isascii() and explicit_hash_key.isdigit()):
        raise ValueError(f"explicit hash key is not a decimal integer: {explicit_hash_key!r}")
    value = int(explicit_hash_key)
    if value > _MAX_HASH_KEY:
        raise ValueError(f"explicit hash key exceeds 2**128-1: {explicit_hash_key!r}")
    return value


@dataclass(frozen=True, slots=True)
class UserRecord:
    """One user record recovered from a Kinesis record.

    ``aggregated`` is False for a record that was not a (valid) KPL aggregate; its data is
    then the Kinesis record's data unchanged. ``sub_sequence_number`` is the position inside
    the aggregate (0 for plain records); ``sequence_number`` is the Kinesis record's, if given.
    """

    data: bytes
    partition_key: str
    explicit_hash_key: str | None = None
    sub_sequence_number: int = 0
    aggregated: bool = False
    sequence_number: str | None = None

    @property
    def hash_key(self) -> int:
        """The 128-bit hash key (see ``partition_hash_key``)."""
        return partition_hash_key(self.partition_key, self.explicit_hash_key)


def hash_key_of(record: UserRecord) -> int:
    """``record.hash_key``: explicit hash key if present, else MD5 of the partition key."""
    return partition_hash_key(record.partition_key, record.explicit_hash_key)


def _text(value: str | bytes) -> str:
    # upb hands back proto2 strings holding invalid UTF-8 as bytes; decode them the way Java
    # protobuf (and so the KCL) does, with U+FFFD replacement.
    return value if isinstance(value, str) else value.decode("utf-8", "replace")


def deaggregate(
    data: bytes | bytearray | memoryview,
    partition_key: str | None,
    *,
    explicit_hash_key: str | None = None,
    sequence_number: str | None = None,
) -> list[UserRecord]:
    """Split one Kinesis record (as from GetRecords, data already base64-decoded) into
    its user records.

    A KPL aggregate yields its records in order, ``sub_sequence_number`` = index. Anything
    else (no magic, too short, MD5 mismatch, unparsable protobuf, missing required fields,
    out-of-range key index) yields the record itself as one plain ``UserRecord``: like the
    KCL, this never raises on foreign data. A valid aggregate holding no records yields ``[]``.
    A record written without a partition key (to an ``AUTO`` stream: GetRecords then has no
    ``PartitionKey``) gives ``partition_key=""``.
    """
    size = len(data)
    if size > _OVERHEAD and data[:4] == MAGIC:
        view = memoryview(data)
        proto = view[4 : size - DIGEST_SIZE]
        if hashlib.md5(proto, usedforsecurity=False).digest() == view[size - DIGEST_SIZE :]:
            try:
                message = _messages().AggregatedRecord()
                message.ParseFromString(proto)
                if message.IsInitialized():
                    pks = [_text(k) for k in message.partition_key_table]
                    ehks = [_text(k) for k in message.explicit_hash_key_table]
                    return [
                        UserRecord(
                            record.data,
                            pks[record.partition_key_index],
                            ehks[record.explicit_hash_key_index]
                            if record.HasField("explicit_hash_key_index")
                            else None,
                            index,
                            True,
                            sequence_number,
                        )
                        for index, record in enumerate(message.records)
                    ]
            except Exception:  # DecodeError, IndexError: not a KPL aggregate after all
                pass
    return [
        UserRecord(bytes(data), partition_key or "", explicit_hash_key, 0, False, sequence_number)
    ]
