"""Protobuf's base-128 varint, the one piece of its wire format the package writes by hand:
in the KPL's aggregated records (``_core._aggregation``) and before a GSR PROTOBUF payload,
its message index (``gsr._protobuf``)."""

from __future__ import annotations

__all__ = ["varint"]


def varint(value: int) -> bytes:
    """``value`` (non-negative) as a protobuf varint (``CodedOutputStream.writeUInt32NoTag``
    for an index)."""
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)
