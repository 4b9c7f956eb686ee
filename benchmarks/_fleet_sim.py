"""The simulation of ``fleet``: N real producers on one fake stream, on virtual time.

Holds :class:`Scenario` (a fleet, its stream, its offered load, its settings), :func:`run`
(one scenario in one ``trio.run`` on ``MockClock(autojump_threshold=0)``, deterministic:
its summary, and its cost in real seconds and CPU) and :func:`deterministic` (the seeds).
Every producer is a ``kinesis_trio.Producer`` talking to one ``FakeKinesis(enforce_limits=
True)`` through ``fake.transport()`` (its pool, h11 framing and SigV4, in memory); each
request takes ``rtt`` plus ``per_byte`` per body byte of virtual time (:class:`RoundTrip`).
Used by ``fleet`` (the command) and ``tests/benchmarks/test_fleet.py``.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import math
import random
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from typing import Any

import anyio

from kinesis_trio import Producer, ProducerConfig, StaticCredentials
from kinesis_trio.testing import FakeKinesis, ServerModel

from ._fleet_member import IN_QUEUE, TICK, WARMUP, Member, figures, fleet_keys

MIB = 1024 * 1024
STREAM = "fleet"
ENDPOINT = "http://fleet.kinesis"
CREDS = ("AKIDFLEET", "fleet-secret")
#: AWS's per-shard write limits
SHARD_BYTES = float(MIB)
SHARD_RECORDS = 1000.0
__all__ = ["IN_QUEUE", "TICK", "WARMUP", "Scenario", "deterministic", "run", "scaled"]
#: virtual seconds past the schedule's end plus ``record_ttl`` after which a producer stops
#: waiting for its outcomes and closes (its close fails what is left): a guard, never reached
#: while every record resolves within its ``record_ttl``
DRAIN_GUARD = 120.0
#: a stream of more capacity (bytes/s) than this gets every shard's limits scaled down to
#: fit it: each byte a simulated producer sends costs real CPU (base64, JSON, SigV4's hash,
#: h11 on both ends, the fake's decoding), about 10 ms per MB here
CAPACITY_BUDGET = 64 * MIB
#: records offered per virtual second (the whole fleet) above which records get larger
RECORDS_BUDGET = 5_000


@dataclass(frozen=True)
class Scenario:
    """A fleet of ``producers`` on one stream of ``shards``, offered ``offered`` times the
    stream's capacity (split evenly), for ``duration`` virtual seconds."""

    producers: int
    shards: int
    offered: float
    duration: float
    record_size: int = 200
    #: admission by time (``admission_ttl_share``): on (the default share) or off (None)
    admission: bool = True
    #: producer i starts at ``stagger * i / producers`` (virtual s)
    stagger: float = 0.0
    #: every request's round trip: ``rtt`` plus ``per_byte`` per request body byte
    rtt: float = 0.020
    per_byte: float = 8e-9
    #: each round trip times ``1 - jitter`` plus a seeded exponential draw of mean
    #: ``jitter`` (0: every request the same; :class:`RoundTrip`)
    jitter: float = 0.5
    #: keys drawn at random per record from a pool of this many (0: 16 per shard, at least
    #: 4,096 and at most 65,536, the engine's key cache)
    keys: int = 0
    seed: int = 1
    #: other ProducerConfig settings, as (name, value) pairs
    settings: tuple[tuple[str, Any], ...] = ()
    #: every shard's limits (the fake's, and the producer's ``rate_limit``) times this
    limit_scale: float = 1.0
    #: the run is cut (every producer cancelled: its unresolved records fail as
    #: ``ProducerAborted``) at the fake's this-many-th request (0: never)
    max_requests: int = 0

    def __post_init__(self) -> None:
        if min(self.producers, self.shards, self.record_size) < 1 or not self.offered > 0:
            raise ValueError("a fleet needs producers, shards, records and an offered load")
        if not self.duration > WARMUP:
            raise ValueError(f"the schedule must last more than {WARMUP:g} s (the warm-up)")

    @property
    def capacity(self) -> float:
        """The stream's bytes per second."""
        return self.shards * SHARD_BYTES * self.limit_scale

    @property
    def rate(self) -> float:
        """Records per second each producer is offered."""
        return self.offered * self.capacity / self.producers / self.record_size

    def key_pool(self) -> int:
        return self.keys or min(1 << 16, max(4096, 16 * self.shards))

    def config(self) -> ProducerConfig:
        # the transport is in memory: no TLS context (with AWS_CA_BUNDLE set, each client
        # would load the bundle: 25 ms a producer)
        kwargs: dict[str, Any] = {"verify": False, **dict(self.settings)}
        if self.limit_scale != 1.0:
            kwargs["rate_limit"] = kwargs.get("rate_limit", 150.0) * self.limit_scale
        if not self.admission:
            kwargs["admission_ttl_share"] = None
        return ProducerConfig(**kwargs)

    def label(self) -> str:
        return (
            f"N={self.producers} S={self.shards} {self.offered:g}x {self.record_size} B "
            f"admission {'on' if self.admission else 'off'}"
        )


def scaled(
    producers: int,
    shards: int,
    offered: float,
    duration: float,
    record_size: int = 200,
    *,
    capacity_budget: float = CAPACITY_BUDGET,
    records_budget: float = RECORDS_BUDGET,
    **options: Any,
) -> Scenario:
    """A scenario whose bytes and records per virtual second stay within the budgets: a
    stream over ``capacity_budget`` bytes/s gets every shard's limits times
    ``capacity_budget / (shards * 1 MiB/s)``; records get larger than ``record_size`` when
    the fleet would be offered more than ``records_budget`` a second, but no larger than one
    shard's bytes per second."""
    scale = min(1.0, capacity_budget / (shards * SHARD_BYTES))
    capacity = shards * SHARD_BYTES * scale
    size = max(record_size, math.ceil(offered * capacity / records_budget))
    size = max(record_size, min(size, int(SHARD_BYTES * scale)))
    return Scenario(producers, shards, offered, duration, size, limit_scale=scale, **options)


class ScaledFake(FakeKinesis):
    """The fake with every shard's buckets holding one second's worth of its (scaled)
    rates, at least the entry written, instead of the stream's max record size (1 MiB):
    at a small scale a 1 MiB bucket would be minutes' worth."""

    def _take_tokens(self, stream: Any, shard: Any, size: int, now: float) -> bool:
        from kinesis_trio.testing._fake_streams import _Bucket

        rps, bps = float(self.records_per_second), float(self.bytes_per_second)
        cap = max(bps, float(size))
        bucket = self._buckets.get((stream.name, shard.shard_id))
        if bucket is None:
            bucket = self._buckets[stream.name, shard.shard_id] = _Bucket(rps, cap, now)
        return bucket.take(rps, bps, cap, size, now)


class RoundTrip(ServerModel):
    """Every request served at once, by a worker of its own, in ``per_request`` plus
    ``per_byte`` per body byte (the base), times ``1 - jitter`` plus an exponential draw
    from ``rng`` of mean ``jitter``: a round trip, not a queue, never under ``1 - jitter``
    of the base, the base on average, with a tail (p99 ``1 + 3.6 jitter``), as a network
    path and a server's service times have. The whole round trip passes before the fake
    takes the shard's tokens, so the jitter decides the order in which requests sent at
    one instant reach a shard; without it that order follows the order they were sent in,
    the same at every step. ``full`` is set at the ``limit``-th request (0: never)."""

    def __init__(
        self,
        per_request: float,
        per_byte: float,
        limit: int = 0,
        jitter: float = 0.0,
        rng: random.Random | None = None,
    ) -> None:
        super().__init__(workers=1, per_request=per_request, per_byte=per_byte)
        if not 0.0 <= jitter <= 1.0:
            raise ValueError(f"jitter must be from 0 to 1, not {jitter!r}")
        self.limit = limit
        self.full = anyio.Event()
        self.jitter = jitter
        self.rng = rng or random.Random(0)

    def admit(self, now: float, nbytes: int) -> float:
        self.served += 1
        if self.served == self.limit:
            self.full.set()
        took = self.per_request + self.per_byte * nbytes
        if self.jitter:
            took *= 1.0 - self.jitter + self.rng.expovariate(1.0 / self.jitter)
        return self.work_clock(now) + took


@contextlib.contextmanager
def deterministic(seed: int) -> Iterator[None]:
    """Seed trio's scheduler (and make its batches independent of the order tasks were
    woken in, as under Hypothesis), the module-level ``random``, and every
    ``random.Random()`` made without a seed (the engine's, the pipeline's, the fake's)."""
    import trio._core._run as trio_run

    saved = (trio_run._r.getstate(), trio_run._ALLOW_DETERMINISTIC_SCHEDULING)
    saved_global = random.getstate()
    original = random.Random
    counter = itertools.count()

    class Seeded(original):  # type: ignore[misc,valid-type]
        def __init__(self, x: Any = None) -> None:
            super().__init__(f"{seed}/{next(counter)}" if x is None else x)

    trio_run._r.seed(seed)
    trio_run._ALLOW_DETERMINISTIC_SCHEDULING = True  # type: ignore[misc]
    random.seed(seed)
    random.Random = Seeded  # type: ignore[misc]
    try:
        yield
    finally:
        random.Random = original  # type: ignore[misc]
        random.setstate(saved_global)
        trio_run._r.setstate(saved[0])
        trio_run._ALLOW_DETERMINISTIC_SCHEDULING = saved[1]  # type: ignore[misc]


class _Fleet:
    """One run: the fake, the members (each a producer's putter and waiter), the cut."""

    def __init__(self, sc: Scenario) -> None:
        self.sc = sc
        kind = FakeKinesis if sc.limit_scale == 1.0 else ScaledFake
        self.round_trip = RoundTrip(
            sc.rtt, sc.per_byte, sc.max_requests, sc.jitter, random.Random(f"{sc.seed}/rtt")
        )
        self.fake = kind(
            enforce_limits=True,
            records_per_second=SHARD_RECORDS * sc.limit_scale,
            bytes_per_second=SHARD_BYTES * sc.limit_scale,
            server=self.round_trip,
            request_log=0,
        )
        self.fake.create_stream(STREAM, shard_count=sc.shards)
        self.end = sc.duration
        self.config = sc.config()
        keys = fleet_keys(sc.seed, sc.key_pool())
        drain = self.end + self.config.record_ttl + DRAIN_GUARD
        self.members = [
            Member(
                rate=sc.rate,
                start=sc.stagger * i / sc.producers,
                end=self.end,
                record_size=sc.record_size,
                keys=keys,
                seed=f"{sc.seed}/putter/{i}",
                window=(WARMUP, self.end),
                drain_until=drain,
            )
            for i in range(sc.producers)
        ]
        self.finished = 0.0
        #: when the run was cut for ``max_requests`` (None: it was not)
        self.cut_at: float | None = None
        self._scopes: list[anyio.CancelScope] = []
        #: the bytes the shards had taken at ``WARMUP`` and at the end of the schedule
        self.stored_at = [0, 0]

    async def main(self) -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._watch)
            if self.sc.max_requests:
                tg.start_soon(self._cap)
            async with anyio.create_task_group() as fleet:
                for member in self.members:
                    fleet.start_soon(self._producer, member)
            self.finished = anyio.current_time()
            tg.cancel_scope.cancel()

    def _stored_bytes(self) -> int:
        return sum(s.bytes for s in self.fake.stats.shards.get(STREAM, {}).values())

    async def _watch(self) -> None:
        """Read the bytes the shards took at the window's start and end; drop what the
        fake stored once a second (it keeps every record otherwise)."""
        stream = self.fake.streams[STREAM]
        marks = [WARMUP, self.end]
        while True:
            await anyio.sleep_until(min(math.floor(anyio.current_time()) + 1.0, *marks))
            for shard in stream.shards:
                shard.records.clear()
            now = anyio.current_time()
            for i, mark in enumerate(marks):
                if now >= mark and self.cut_at is None:
                    self.stored_at[i] = self._stored_bytes()
                    marks[i] = math.inf

    async def _cap(self) -> None:
        """Cut the run at the fake's ``max_requests``-th request (a bound on its real time,
        which follows the requests: a fleet in a retry storm would run for hours)."""
        await self.round_trip.full.wait()
        self.cut_at = anyio.current_time()
        if self.cut_at < self.end:
            self.stored_at[1] = self._stored_bytes()
        for member in self.members:
            member.cut_at = self.cut_at
        for scope in self._scopes:
            scope.cancel()

    async def _producer(self, member: Member) -> None:
        await anyio.sleep_until(member.tally.start)
        with anyio.CancelScope() as scope:
            self._scopes.append(scope)
            async with Producer(
                STREAM,
                region_name="us-east-1",
                endpoint_url=ENDPOINT,
                credentials=StaticCredentials(*CREDS),
                config=self.config,
                transport=self.fake.transport(),
            ) as producer:
                await member.run(producer)
        member.settle()  # (past the guard, or cut) resolved by the close: failed or aborted

    def summary(self) -> dict[str, Any]:
        sc, stats = self.sc, self.fake.stats
        end = self.end if self.cut_at is None else min(self.end, self.cut_at)
        window = end - WARMUP
        return {
            "scenario": asdict(sc),
            **figures([m.report() for m in self.members], sc.capacity, window),
            "stored_share": (self.stored_at[1] - self.stored_at[0]) / window / sc.capacity
            if window > 0
            else 0.0,
            "virtual_s": self.finished,
            "cut_at_s": self.cut_at,
            "entries": stats.entries,
            "entries_throttled": stats.entries_throttled,
            "throttled_share": stats.entries_throttled / stats.entries if stats.entries else 0.0,
            "requests": stats.requests,
        }


def run(sc: Scenario) -> tuple[dict[str, Any], dict[str, float | None]]:
    """One scenario: its summary (the same for the same scenario) and its cost (real
    seconds, process CPU over the whole run, the fake's included)."""
    import trio
    from trio.testing import MockClock

    quiet = logging.getLogger("kinesis_trio")
    level = quiet.level
    quiet.setLevel(logging.ERROR)  # 256 producers' warnings (a cut run's aborts, say)
    try:
        with deterministic(sc.seed):
            fleet = _Fleet(sc)
            cpu0, t0 = time.process_time(), time.perf_counter()
            trio.run(fleet.main, clock=MockClock(autojump_threshold=0))
            cpu, real = time.process_time() - cpu0, time.perf_counter() - t0
    finally:
        quiet.setLevel(level)
    summary = fleet.summary()
    ok = summary["ok"]
    return summary, {
        "real_s": real,
        "cpu_s": cpu,
        "cpu_us_per_record": cpu / ok * 1e6 if ok else None,
    }
