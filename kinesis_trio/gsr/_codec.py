"""What each format's codec does: built once per schema definition (the definition parsed,
a validator compiled); ``encode`` validates an object and returns the payload (no header),
``decode`` reads a payload.
"""

from __future__ import annotations

from typing import Protocol


class PayloadEncoder(Protocol):
    """One schema definition's encoder."""

    def encode(self, obj: object) -> bytes:
        """The payload of ``obj`` (validated; :class:`SchemaMismatchError` when it is not)."""


class FormatCodec(PayloadEncoder, Protocol):
    """One schema definition's encoder and decoder."""

    def decode(self, payload: bytes) -> object:
        """The object a payload holds (:class:`DecodeError` when it does not read)."""
