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
from collections import Counter, deque
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field
from typing import Any

import anyio

from kinesis_trio import Outcome, Producer, ProducerConfig, RecordResult, StaticCredentials
from kinesis_trio._results import EXPIRED
from kinesis_trio.testing import FakeKinesis, ServerModel

MIB = 1024 * 1024
STREAM = "fleet"
ENDPOINT = "http://fleet.kinesis"
CREDS = ("AKIDFLEET", "fleet-secret")
#: AWS's per-shard write limits
SHARD_BYTES = float(MIB)
SHARD_RECORDS = 1000.0
#: capacity used is measured from here (virtual s): the fake's buckets start full (one
#: second's worth), so the first second can pass the limit
WARMUP = 1.0
#: the putters' shortest sleep: each wakes at most this often and puts what is due
TICK = 0.010
#: what the message of a record that expired in the producer's own queues says
IN_QUEUE = "producer's queue"
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
    ``per_byte`` per body byte: a round trip, not a queue. ``full`` is set at the
    ``limit``-th request (0: never)."""

    def __init__(self, per_request: float, per_byte: float, limit: int = 0) -> None:
        super().__init__(workers=1, per_request=per_request, per_byte=per_byte)
        self.limit = limit
        self.full = anyio.Event()

    def admit(self, now: float, nbytes: int) -> float:
        self.served += 1
        if self.served == self.limit:
            self.full.set()
        return self.work_clock(now) + self.per_request + self.per_byte * nbytes


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


@dataclass
class _Tally:
    """One producer's figures."""

    start: float = 0.0
    offered: int = 0
    accepted: int = 0
    ok: int = 0
    ok_bytes: int = 0
    window_bytes: int = 0
    expired: int = 0
    expired_in_queue: int = 0
    failed: Counter[str] = field(default_factory=Counter)
    put_wait: float = 0.0


def _quantile(values: list[float], q: float) -> float:
    if not values:
        return 0.0
    return values[min(len(values) - 1, int(q * len(values)))]


class _Fleet:
    """One run: the fake, the producers' putters and waiters, the ages."""

    def __init__(self, sc: Scenario) -> None:
        self.sc = sc
        kind = FakeKinesis if sc.limit_scale == 1.0 else ScaledFake
        self.round_trip = RoundTrip(sc.rtt, sc.per_byte, sc.max_requests)
        self.fake = kind(
            enforce_limits=True,
            records_per_second=SHARD_RECORDS * sc.limit_scale,
            bytes_per_second=SHARD_BYTES * sc.limit_scale,
            server=self.round_trip,
            request_log=0,
        )
        self.fake.create_stream(STREAM, shard_count=sc.shards)
        self.end = sc.duration
        self.data = b"x" * sc.record_size
        self.tallies = [_Tally() for _ in range(sc.producers)]
        self.from_put: list[float] = []
        self.from_schedule: list[float] = []
        self.from_accept: list[float] = []
        self.config = sc.config()
        self.finished = 0.0
        #: when the run was cut for ``max_requests`` (None: it was not)
        self.cut_at: float | None = None
        self._scopes: list[anyio.CancelScope] = []
        #: the bytes the shards had taken at ``WARMUP`` and at the end of the schedule
        self.stored_at = [0, 0]
        rng = random.Random(f"{sc.seed}/keys")
        self.keys = [f"k{rng.getrandbits(60):x}" for _ in range(sc.key_pool())]

    async def main(self) -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._watch)
            if self.sc.max_requests:
                tg.start_soon(self._cap)
            async with anyio.create_task_group() as fleet:
                for i in range(self.sc.producers):
                    fleet.start_soon(self._producer, i)
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
        for scope in self._scopes:
            scope.cancel()

    async def _producer(self, index: int) -> None:
        sc, tally = self.sc, self.tallies[index]
        tally.start = sc.stagger * index / sc.producers
        await anyio.sleep_until(tally.start)
        pending: deque[tuple[Outcome, float, float]] = deque()
        more = anyio.Event()
        done = False

        async def waiter() -> None:
            nonlocal more
            with anyio.move_on_at(self.end + self.config.record_ttl + DRAIN_GUARD):
                while pending or not done:
                    if not pending:
                        await more.wait()
                        more = anyio.Event()
                        continue
                    outcome, due, put_at = pending[0]
                    self._count(tally, await outcome.wait(), due, put_at)
                    pending.popleft()

        with anyio.CancelScope() as scope:
            self._scopes.append(scope)
            async with (
                Producer(
                    STREAM,
                    region_name="us-east-1",
                    endpoint_url=ENDPOINT,
                    credentials=StaticCredentials(*CREDS),
                    config=self.config,
                    transport=self.fake.transport(),
                ) as producer,
                anyio.create_task_group() as tg,
            ):
                tg.start_soon(waiter)
                await self._put(index, producer, pending, lambda: more.set())
                done = True
                more.set()
        # (past the guard, or cut) resolved by the close: failed or aborted
        for outcome, due, put_at in pending:
            self._count(tally, outcome.result(), due, put_at)

    async def _put(
        self,
        index: int,
        producer: Producer,
        pending: deque[tuple[Outcome, float, float]],
        wake: Callable[[], None],
    ) -> None:
        """The open-loop schedule: record i is due at start + i / rate, until the end; the
        putter wakes at most every ``TICK`` and puts what is due (a put that waits holds back
        the records due behind it)."""
        sc, tally, data, keys = self.sc, self.tallies[index], self.data, self.keys
        rng = random.Random(f"{sc.seed}/putter/{index}")
        pool, rate, start = len(keys), sc.rate, tally.start
        tally.offered = offered = max(0, math.ceil((self.end - start) * rate))
        tick = max(TICK, 1.0 / rate)
        last = start + (offered - 1) / rate  # the last record's due time: before the end
        now = anyio.current_time
        i = 0
        with anyio.CancelScope(deadline=self.end):
            while i < offered:
                due = start + i / rate
                t = now()
                if due > t:
                    await anyio.sleep_until(min(max(due, t + tick), last))
                    continue
                try:
                    outcome = await producer.put(data, keys[rng.randrange(pool)])
                finally:  # a put the end cancelled waited too (its record not accepted)
                    tally.put_wait += now() - t
                tally.accepted += 1
                pending.append((outcome, due, t))
                wake()
                i += 1

    def _count(self, tally: _Tally, result: RecordResult, due: float, put_at: float) -> None:
        if result.ok:
            at = result.resolved_at
            tally.ok += 1
            tally.ok_bytes += self.sc.record_size
            if WARMUP <= at <= self.end and (self.cut_at is None or at <= self.cut_at):
                tally.window_bytes += self.sc.record_size
            self.from_put.append(at - put_at)
            self.from_schedule.append(at - due)
            self.from_accept.append(at - result.accepted_at)
        elif result.error_code == EXPIRED:
            tally.expired += 1
            tally.expired_in_queue += IN_QUEUE in (result.error_message or "")
        else:
            tally.failed[result.error_code or "?"] += 1

    def summary(self) -> dict[str, Any]:
        sc, tallies = self.sc, self.tallies
        stats = self.fake.stats
        end = self.end if self.cut_at is None else min(self.end, self.cut_at)
        window = end - WARMUP
        confirmed = sum(t.window_bytes for t in tallies)
        active = [max(1e-9, self.end - t.start) for t in tallies]
        per_s = [t.ok_bytes / a for t, a in zip(tallies, active, strict=True)]
        for ages in (self.from_put, self.from_schedule, self.from_accept):
            ages.sort()
        failed: Counter[str] = Counter()
        for t in tallies:
            failed.update(t.failed)
        return {
            "scenario": asdict(sc),
            "offered_records": sum(t.offered for t in tallies),
            "accepted": sum(t.accepted for t in tallies),
            "ok": sum(t.ok for t in tallies),
            "expired": sum(t.expired for t in tallies),
            "expired_in_queue": sum(t.expired_in_queue for t in tallies),
            "failed": sum(failed.values()),
            "failed_codes": dict(sorted(failed.items())),
            "capacity_used": confirmed / window / sc.capacity if window > 0 else 0.0,
            "stored_share": (self.stored_at[1] - self.stored_at[0]) / window / sc.capacity
            if window > 0
            else 0.0,
            "virtual_s": self.finished,
            "cut_at_s": self.cut_at,
            "entries": stats.entries,
            "entries_throttled": stats.entries_throttled,
            "throttled_share": stats.entries_throttled / stats.entries if stats.entries else 0.0,
            "requests": stats.requests,
            "fairness": min(per_s) / max(per_s) if max(per_s) > 0 else 0.0,
            "age_from_put_p99_s": _quantile(self.from_put, 0.99),
            "age_from_put_max_s": self.from_put[-1] if self.from_put else 0.0,
            "age_from_schedule_p99_s": _quantile(self.from_schedule, 0.99),
            "age_from_schedule_max_s": self.from_schedule[-1] if self.from_schedule else 0.0,
            "age_from_accept_p99_s": _quantile(self.from_accept, 0.99),
            "put_wait_share": sum(t.put_wait for t in tallies) / sum(active),
            "ok_bytes_per_producer": [t.ok_bytes for t in tallies],
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
