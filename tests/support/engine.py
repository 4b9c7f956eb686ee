"""Building blocks for the engine's tests: outcomes, shard buffers, a recording shell."""

from __future__ import annotations

from typing import Any

from kinesis_trio._config import ProducerConfig
from kinesis_trio._engine import Engine, metrics_for
from kinesis_trio._limiter import ShardLimiter
from kinesis_trio._outcome import Outcome
from kinesis_trio._shards import Shard, ShardMap, hash_key_for
from kinesis_trio._state import KRecord, ShardBuffer, StreamState
from kinesis_trio._streams import StreamFacts

MAX_HASH = 2**128 - 1


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
    """A Shell that does no I/O: it records what the engine asked for."""

    def __init__(self) -> None:
        self.opened_shards: list[ShardBuffer] = []
        self.sealed_batches: list[tuple[ShardBuffer, list[KRecord]]] = []
        self.retired_shards: list[ShardBuffer] = []
        self.retries: list[float] = []
        self.refreshes = 0
        self.credential_refreshes = 0
        self.apart: list[list[KRecord]] = []
        self.progress_calls = 0

    def opened(self, shard: ShardBuffer) -> None:
        self.opened_shards.append(shard)

    def sealed(self, shard: ShardBuffer, batch: list[KRecord]) -> None:
        self.sealed_batches.append((shard, batch))
        shard.queued += 1  # as the real shell counts the batch it puts into the channel

    def new_shard(
        self, stream: StreamState, shard: Shard, limiter: ShardLimiter | None = None
    ) -> ShardBuffer:
        return ShardBuffer(
            shard.shard_id, shard.start, shard.end, limiter or ShardLimiter(100, 0.0)
        )

    def retired(self, shard: ShardBuffer) -> None:
        self.retired_shards.append(shard)

    def retry_at(self, stream: StreamState, due: float) -> None:
        self.retries.append(due)

    def refresh(self, stream: StreamState) -> None:
        self.refreshes += 1

    def refresh_credentials(self) -> None:
        self.credential_refreshes += 1

    def send_apart(self, stream: StreamState, krecs: list[KRecord]) -> None:
        self.apart.append(krecs)

    def progress(self) -> None:
        self.progress_calls += 1


def stream_of(
    shell: RecordingShell,
    shards: list[Shard],
    name: str = "s",
    *,
    aggregate: bool = True,
    agg_max_size: int = 51_200,
) -> StreamState:
    stream = StreamState(name, ShardMap(shards))
    stream.aggregate = aggregate
    stream.agg_max_size = agg_max_size
    stream.shards = [shell.new_shard(stream, s) for s in shards]
    return stream


def engine(
    facts: StreamFacts | None = None, shards: int = 1, **config: Any
) -> tuple[Engine, RecordingShell, StreamState]:
    """An engine with one stream, loaded as the producer loads one (its policy applied)."""
    cfg = ProducerConfig(**config)
    shell = RecordingShell()
    eng = Engine(cfg, shell, metrics_for(cfg), refreshable=True)
    shard_map = ShardMap(even_shards(shards))
    stream = StreamState("s", shard_map)
    eng.maps.apply_facts(stream, facts or StreamFacts("s"), shard_map, 0.0)
    eng.streams["s"] = stream
    return eng, shell, stream


def sealed(eng: Engine, stream: StreamState) -> list[KRecord]:
    out = [k for _, batch in eng.shell.sealed_batches for k in batch]  # type: ignore[attr-defined]
    for shard in stream.shards:
        out += eng.acc.seal(shard)
    return out
