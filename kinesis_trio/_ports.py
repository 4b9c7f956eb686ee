"""What the engine asks of the async shell: the :class:`Shell` interface.

The engine and its pure modules (``_accumulator``, ``_reshard``, ``_retries``) ask for I/O
only through it; the shell (``_shell.Pipeline``) implements it, and so does the tests'
recording shell. Every call returns at once: the shell wakes a task or starts one.
"""

from __future__ import annotations

from typing import Protocol

from ._limiter import ShardLimiter
from ._shards import Shard
from ._state import KRecord, ShardBuffer, StreamState

__all__ = ["Shell"]


class Shell(Protocol):
    """What the engine asks of the async shell (each call returns at once)."""

    def opened(self, shard: ShardBuffer) -> None:
        """The shard's containers got a linger deadline: its worker must wake by then."""

    def sealed(self, shard: ShardBuffer, batch: list[KRecord]) -> None:
        """Put a sealed batch into the shard's channel (it has room), counting it in
        ``shard.queued``."""

    def new_shard(self, stream: StreamState, shard: Shard, limiter: ShardLimiter) -> ShardBuffer:
        """A buffer, with its worker, for a shard new to the stream's map."""

    def retired(self, shard: ShardBuffer) -> None:
        """A reshard closed the shard: its worker re-routes what is queued, then exits."""

    def retry_at(self, stream: StreamState, due: float) -> None:
        """Records of the stream wait for a retry due at ``due``."""

    def refresh(self, stream: StreamState) -> None:
        """Reload the stream's shard map soon."""

    def refresh_credentials(self) -> None:
        """Refresh the credentials (an ExpiredToken answer)."""

    def send_apart(self, stream: StreamState, krecs: list[KRecord]) -> None:
        """Send ``krecs`` as a request of their own, at once (halves of a rejected one)."""

    def progress(self) -> None:
        """Outstanding records were resolved: wake whoever waits for room or a flush."""
