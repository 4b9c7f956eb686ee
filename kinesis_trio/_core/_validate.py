"""Input checks shared by ``Producer.put`` and ``SyncProducer.put`` (pure, no I/O).

Each raises ``TypeError``/``ValueError`` naming the problem, before anything is accepted:
what Kinesis would reject for the whole request must never reach a request.
"""

from __future__ import annotations

__all__ = ["check_stream_name", "coerce_data", "partition_key_length"]

#: Kinesis's limit on a partition key, in UTF-16 code units (see ``partition_key_length``).
MAX_PARTITION_KEY_UNITS = 256


def partition_key_length(partition_key: object) -> int:
    """The UTF-8 length of a valid partition key.

    Kinesis (and both emulators) count the 256-character limit in UTF-16 code units: a
    character outside the Basic Multilingual Plane (an emoji) counts as two.
    """
    if not isinstance(partition_key, str):
        raise TypeError(f"partition_key must be a str, got {type(partition_key).__name__}")
    units = len(partition_key)
    if not partition_key.isascii():
        units += sum(1 for c in partition_key if ord(c) > 0xFFFF)
    if not 1 <= units <= MAX_PARTITION_KEY_UNITS:
        raise ValueError(
            "partition_key must be 1 to 256 characters (counted in UTF-16 code units, as "
            f"Kinesis counts them), got {units}"
        )
    try:
        return len(partition_key.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise ValueError(f"partition_key is not valid Unicode text: {exc}") from None


def check_stream_name(name: object) -> None:
    """A stream name given to ``put``: a non-empty ``str``."""
    if not isinstance(name, str):
        raise TypeError(f"stream_name must be a str, got {type(name).__name__}")
    if not name:
        raise ValueError("stream_name must not be empty (omit it to use the default stream)")


def coerce_data(data: object) -> bytes:
    """Record data as ``bytes``: bytes subclasses (numpy's ``bytes_``), ``bytearray`` and
    ``memoryview`` are copied once; anything else is a ``TypeError``."""
    if isinstance(data, (bytes, bytearray, memoryview)):
        return bytes(data)
    raise TypeError(
        f"data must be bytes (or bytearray/memoryview), got {type(data).__name__}"
        + ("; encode text first, e.g. data.encode()" if isinstance(data, str) else "")
    )
