"""What the engine asks the async shell to do: effects, as h11 returns events.

The engine never calls out. Each of its calls that changes what the shell must do leaves
effects in its :class:`Outbox`; the shell takes them right after the call (no checkpoint in
between) and carries them out in order: wake a worker, queue a batch, start or retire a
shard's worker, wake the retrier, reload a shard map, refresh the credentials, send a
request's halves apart, hand failed records to the dead letters. ``Outbox.progress`` says
that records were resolved (whoever waits for room or a flush looks again).

One answer is not an effect but a refusal: :class:`NoRoom`, raised by the engine's
``accept`` before it changes anything (the shell waits for progress, or raises
``anyio.WouldBlock`` from ``put_nowait``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple, TypeAlias

if TYPE_CHECKING:
    from .._dead_letters import FailedRecord
    from ._pipeline_data import KRecord, ShardBuffer, StreamState

__all__ = [
    "DeadLetters",
    "Effect",
    "NoRoom",
    "Outbox",
    "Queue",
    "Refresh",
    "RefreshCredentials",
    "RetireShard",
    "RetryAt",
    "SendApart",
    "StartShard",
    "Wake",
]


class NoRoom(Exception):
    """The engine cannot take the record now (the caps, admission by time, a seal due on a
    shard whose queue is full, the spool): nothing changed; try again after progress."""


class Wake(NamedTuple):
    """The shard's open containers are due at ``at`` (``-inf``: now): wake its worker,
    or the stream's linger timer, by then."""

    stream: StreamState
    shard: ShardBuffer
    at: float


class Queue(NamedTuple):
    """A sealed batch for the shard's worker (put it into the shard's channel; the engine
    counted it in ``shard.queued``)."""

    shard: ShardBuffer
    batch: list[KRecord]


class StartShard(NamedTuple):
    """A shard new to the stream's map: start its worker."""

    stream: StreamState
    shard: ShardBuffer


class RetireShard(NamedTuple):
    """A reshard closed the shard: wake its worker, which passes on what is queued (the
    engine re-routes it) and ends."""

    shard: ShardBuffer


class RetryAt(NamedTuple):
    """Records of the stream wait for a retry due at ``due``: wake its retrier by then."""

    stream: StreamState
    due: float


class Refresh(NamedTuple):
    """Reload the stream's shard map soon (deduplicated and rate-limited by the shell)."""

    stream: StreamState


class RefreshCredentials(NamedTuple):
    """An answer said the credentials expired: refresh them."""


class SendApart(NamedTuple):
    """Send ``krecs`` as a request of their own, at once (a half of a rejected one)."""

    stream: StreamState
    krecs: list[KRecord]


class DeadLetters(NamedTuple):
    """Records that failed now (each once), with their data, at ``at``; ``tickets``: for
    each, the spool's ticket of a dead letter it keeps until the record is taken (0: none;
    ``SpoolBook.release``), or ``None`` for none at all."""

    records: list[FailedRecord]
    at: float
    tickets: list[int] | None = None


Effect: TypeAlias = (
    Wake
    | Queue
    | StartShard
    | RetireShard
    | RetryAt
    | Refresh
    | RefreshCredentials
    | SendApart
    | DeadLetters
)


class Outbox:
    """The engine's effects since the shell last took them, in order."""

    __slots__ = ("effects", "progress")

    def __init__(self) -> None:
        self.effects: list[Effect] = []
        #: records were resolved since the shell last looked
        self.progress = False

    def push(self, effect: Effect) -> None:
        self.effects.append(effect)

    def progressed(self) -> None:
        self.progress = True

    def take(self) -> list[Effect]:
        """The effects left since the last call (and the progress flag cleared)."""
        effects = self.effects
        self.effects = []
        self.progress = False
        return effects
