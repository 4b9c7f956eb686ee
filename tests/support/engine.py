"""Building blocks for the engine's tests: outcomes, shard buffers, and a recording shell
that reads the effects the engine leaves in its outbox."""

from __future__ import annotations

from typing import Any

from kinesis_trio import Outcome
from kinesis_trio._config import ProducerConfig
from kinesis_trio._core._accumulator import track
from kinesis_trio._core._effects import (
    DeadLetters,
    Outbox,
    Queue,
    Refresh,
    RefreshCredentials,
    RetireShard,
    RetryAt,
    SendApart,
    StartShard,
    Wake,
)
from kinesis_trio._core._engine import Engine
from kinesis_trio._core._limiter import ShardLimiter
from kinesis_trio._core._pipeline_data import KRecord, ShardBuffer, StreamState
from kinesis_trio._core._shards import Shard, ShardMap, hash_key_for
from kinesis_trio._core._stream_policy import StreamFacts, StreamPolicy
from kinesis_trio.metrics._recorder import metrics_for

MAX_HASH = 2**128 - 1
_SHELLS: dict[int, RecordingShell] = {}


def outcome(data: bytes, key: str, now: float = 0.0, ehk: str | None = None) -> Outcome:
    hash_key = int(ehk) if ehk is not None else hash_key_for(key)
    size = len(data) + len(key.encode())
    return Outcome(data, key, ehk, hash_key, size, now, "s", 0)


def even_shards(count: int) -> list[Shard]:
    step = (MAX_HASH + 1) // count
    return [
        Shard(f"shardId-{i:012d}", i * step, MAX_HASH if i == count - 1 else (i + 1) * step - 1)
        for i in range(count)
    ]


class RecordingShell:
    """The effects an engine (or its parts) left in ``outbox``, read as a shell would take
    them, kept by kind for the tests' assertions (each attribute takes what is new first).
    The list attributes are the tests' own: a test may clear them."""

    def __init__(self, outbox: Outbox | None = None) -> None:
        self.outbox = outbox if outbox is not None else Outbox()
        self._opened: list[ShardBuffer] = []
        self._sealed: list[tuple[ShardBuffer, list[KRecord]]] = []
        self._started: list[ShardBuffer] = []
        self._retired: list[ShardBuffer] = []
        self._retries: list[float] = []
        self._refreshes = 0
        self._credential_refreshes = 0
        self._apart: list[list[KRecord]] = []
        self._dead: list[DeadLetters] = []
        self._progress = 0

    def take(self) -> None:
        """Take the new effects into the lists."""
        if self.outbox.progress:
            self._progress += 1
        for effect in self.outbox.take():
            if isinstance(effect, Wake):
                self._opened.append(effect.shard)
            elif isinstance(effect, Queue):
                self._sealed.append((effect.shard, effect.batch))
            elif isinstance(effect, StartShard):
                self._started.append(effect.shard)
            elif isinstance(effect, RetireShard):
                self._retired.append(effect.shard)
            elif isinstance(effect, RetryAt):
                self._retries.append(effect.due)
            elif isinstance(effect, Refresh):
                self._refreshes += 1
            elif isinstance(effect, RefreshCredentials):
                self._credential_refreshes += 1
            elif isinstance(effect, SendApart):
                self._apart.append(effect.krecs)
            else:
                self._dead.append(effect)

    @property
    def opened_shards(self) -> list[ShardBuffer]:
        """Shards whose containers got a linger deadline (``Wake``)."""
        self.take()
        return self._opened

    @property
    def sealed_batches(self) -> list[tuple[ShardBuffer, list[KRecord]]]:
        """Batches queued for a shard's worker (``Queue``)."""
        self.take()
        return self._sealed

    @property
    def started_shards(self) -> list[ShardBuffer]:
        self.take()
        return self._started

    @property
    def retired_shards(self) -> list[ShardBuffer]:
        self.take()
        return self._retired

    @property
    def retries(self) -> list[float]:
        """When retries are due (``RetryAt``)."""
        self.take()
        return self._retries

    @property
    def refreshes(self) -> int:
        self.take()
        return self._refreshes

    @property
    def credential_refreshes(self) -> int:
        self.take()
        return self._credential_refreshes

    @property
    def apart(self) -> list[list[KRecord]]:
        """Requests to send apart (``SendApart``)."""
        self.take()
        return self._apart

    @property
    def dead_letters(self) -> list[DeadLetters]:
        self.take()
        return self._dead

    @property
    def progress_calls(self) -> int:
        """How many times the shell found records resolved since it last looked."""
        self.take()
        return self._progress


def stream_of(
    shell: RecordingShell,
    shards: list[Shard],
    name: str = "s",
    *,
    aggregate: bool = True,
    agg_max_size: int = 51_200,
) -> StreamState:
    stream = StreamState(name, ShardMap(shards))
    policy = StreamPolicy(False, aggregate, stream.max_record_size)
    stream.adopt(
        stream.facts,
        policy,
        agg_max_size=agg_max_size,
        accept_max=stream.accept_max,
        shard_count=len(shards),
        refusal=None,
        lowered=False,
    )
    stream.use_map(stream.map, [buffer(s, opened=stream.open_shards) for s in shards])
    track(stream)
    return stream


def buffer(
    shard: Shard,
    limiter: ShardLimiter | None = None,
    opened: dict[ShardBuffer, None] | None = None,
) -> ShardBuffer:
    """A shard's buffer, as the engine makes one for a shard new to a map (``opened``: its
    stream's ``open_shards``)."""
    return ShardBuffer(
        shard.shard_id,
        shard.start,
        shard.end,
        limiter or ShardLimiter(100, 0.0),
        opened=opened,
    )


def engine(
    facts: StreamFacts | None = None, shards: int = 1, **config: Any
) -> tuple[Engine[Outcome], RecordingShell, StreamState]:
    """An engine with one stream, loaded as the producer loads one (its policy applied)."""
    cfg = ProducerConfig(**config)
    eng = Engine(cfg, metrics_for(cfg), True, False, None, Outcome)
    shell = shell_of(eng)
    shard_map = ShardMap(even_shards(shards))
    stream = StreamState("s", shard_map)
    eng.add_stream("s", stream, facts or StreamFacts("s"), shard_map, 0.0)
    return eng, shell, stream


def shell_of(eng: Engine[Outcome]) -> RecordingShell:
    """A recording shell over ``eng``'s outbox (made once per engine)."""
    shell = _SHELLS.get(id(eng))
    if shell is None or shell.outbox is not eng._outbox:
        shell = _SHELLS[id(eng)] = RecordingShell(eng._outbox)
    return shell


def sealed(eng: Engine[Outcome], stream: StreamState) -> list[KRecord]:
    out = [k for _, batch in shell_of(eng).sealed_batches for k in batch]
    for shard in stream.shards:
        out += eng._acc.seal(shard)
    return out


def retry_due(
    eng: Engine[Outcome], stream: StreamState, now: float
) -> dict[ShardBuffer, list[KRecord]]:
    """The retries the engine sent now, by shard (taken out of its channels' counts and
    the shard's records that go first, as a shell's workers would take them)."""
    shell = shell_of(eng)
    before = len(shell.sealed_batches)
    eng.retry_due(stream, now)
    queued = shell.sealed_batches[before:]
    del shell.sealed_batches[before:]
    out: dict[ShardBuffer, list[KRecord]] = {}
    for shard, krecs in queued:
        eng.out.taken(shard, 1)
        out.setdefault(shard, []).extend(shard.take_first() + krecs)
    return out


def throttled_answer(eng: Engine[Outcome], stream: StreamState, at: float) -> list[KRecord]:
    """One record put and sent at ``at`` (with the retries due), every one throttled."""
    eng.accept(stream, b"t", "k", None, at)
    krecs = sealed(eng, stream)
    shell_of(eng).sealed_batches.clear()
    entry = {"ErrorCode": "ProvisionedThroughputExceededException", "ErrorMessage": "slow down"}
    eng.apply_answer(stream, krecs, {"Records": [entry] * len(krecs)}, at, at + 0.01)
    return krecs
