"""Backpressure bounds memory: ``put`` waits at the outstanding limits instead of queueing.

Several putter tasks push ten times the bound into a producer whose backend does not answer
(a gate holding every PutRecords) or answers slowly (the fake's ``latency``). After every
accepted record (the outstanding totals only grow inside ``put``, which returns without a
task switch) the totals are checked against ``max_outstanding_records`` and
``max_outstanding_bytes``. With the gate shut, the putters must all end up waiting in
``put`` at the bound and accept nothing more; once it opens they resume, and every accepted
record resolves ok and is stored exactly once. No timing is asserted.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import tracemalloc
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx
import pytest

from kinesis_trio import Outcome, Producer, deaggregate
from kinesis_trio.testing import FakeKinesis, Faults
from tests.support.helpers import fake_producer, stream_state

pytestmark = pytest.mark.anyio

PUTTERS = 3


class Gate:
    """A FakeKinesis hook holding every PutRecords request until ``open`` is set."""

    def __init__(self) -> None:
        self.open = anyio.Event()
        self.held = 0

    async def __call__(self, operation: str, body: dict[str, Any]) -> httpx.Response | None:
        if operation == "PutRecords":
            self.held += 1
            try:
                await self.open.wait()
            finally:
                self.held -= 1
        return None


@dataclass(frozen=True)
class Case:
    """A bound to hit: which limit binds, the record shape, and the producer settings."""

    name: str
    data_size: int
    max_records: int
    max_bytes: int

    def key(self, i: int) -> str:
        return f"key-{i:05d}"  # 9 bytes for every i < 100_000

    @property
    def record_size(self) -> int:
        return self.data_size + len(self.key(0))

    @property
    def bound_records(self) -> int:
        """How many records fit under both limits at once."""
        return min(self.max_records, self.max_bytes // self.record_size)

    def config(self) -> dict[str, Any]:
        return {
            "max_outstanding_records": self.max_records,
            "max_outstanding_bytes": self.max_bytes,
            "max_record_size": 4096,
            "record_max_buffered_time": 0.01,
        }


# bytes: 1 KiB records, 64 KiB bound (63 records) under a loose count limit;
# records: 100-byte records, 100 records bound under a loose byte limit.
CASES = [
    Case("bytes", data_size=1024, max_records=10_000, max_bytes=64 * 1024),
    Case("records", data_size=100, max_records=100, max_bytes=1 << 20),
]


@dataclass
class Putters:
    """Putter tasks sharing one sequence of ``total`` records; they check the bounds."""

    producer: Producer
    case: Case
    total: int
    outcomes: list[Outcome] = field(default_factory=list)
    in_put: int = 0
    max_in_put: int = 0
    max_records_seen: int = 0
    max_bytes_seen: int = 0
    finished: int = 0
    #: Set when every putter is inside ``put`` at the bound (it waits, if nothing resolves).
    all_waiting: anyio.Event = field(default_factory=anyio.Event)
    _next: Callable[[], int] = field(default_factory=lambda: itertools.count().__next__)

    def check(self) -> None:
        p, c = self.producer, self.case
        self.max_records_seen = max(self.max_records_seen, p.outstanding_records)
        self.max_bytes_seen = max(self.max_bytes_seen, p.outstanding_bytes)
        assert p.outstanding_records <= c.max_records, p.outstanding_records
        assert p.outstanding_bytes <= c.max_bytes, p.outstanding_bytes

    def at_bound(self) -> bool:
        p, c = self.producer, self.case
        return (
            p.outstanding_records >= c.max_records
            or p.outstanding_bytes + c.record_size > c.max_bytes
        )

    async def run(self) -> None:
        data = b"x" * self.case.data_size
        while (i := self._next()) < self.total:
            self.in_put += 1
            self.max_in_put = max(self.max_in_put, self.in_put)
            if self.in_put == PUTTERS and self.at_bound():
                self.all_waiting.set()
            try:
                outcome = await self.producer.put(data, self.case.key(i))
            finally:
                self.in_put -= 1
            self.check()  # no task switch since put accepted the record
            self.outcomes.append(outcome)
        self.finished += 1


def stored_user_records(fake: FakeKinesis) -> list[str]:
    return [
        u.partition_key
        for r in fake.records("s")
        for u in deaggregate(r.data, r.partition_key, explicit_hash_key=r.explicit_hash_key)
    ]


def check_all_landed(fake: FakeKinesis, putters: Putters) -> None:
    assert len(putters.outcomes) == putters.total
    results = [o.result() for o in putters.outcomes]
    assert all(r.ok for r in results), [r for r in results if not r.ok][:3]
    keys = stored_user_records(fake)
    assert sorted(keys) == sorted(putters.case.key(i) for i in range(putters.total))


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
async def test_put_waits_at_the_bound_while_the_backend_holds_every_request(case: Case) -> None:
    gate = Gate()
    fake = FakeKinesis(hook=gate)
    fake.create_stream("s", 2)
    total = 10 * case.bound_records
    async with fake_producer(fake, **case.config()) as producer:
        putters = Putters(producer, case, total)
        async with anyio.create_task_group() as tg:
            for _ in range(PUTTERS):
                tg.start_soon(putters.run)
            with anyio.fail_after(10):  # a hang guard, not a performance bound
                await putters.all_waiting.wait()
            # Every putter waits in put at the bound; nothing resolves behind the gate.
            accepted = len(putters.outcomes)
            assert accepted == case.bound_records
            assert producer.outstanding_records == accepted
            assert producer.outstanding_bytes == accepted * case.record_size
            for _ in range(20):
                await anyio.sleep(0.005)
                assert len(putters.outcomes) == accepted  # waiting, not queueing
                assert putters.in_put == PUTTERS
            assert gate.held > 0  # the accepted records are in requests held by the gate
            gate.open.set()
        # The blocked puts resumed and the putters pushed 10x the bound through.
        assert putters.finished == PUTTERS
        await producer.flush()
        assert producer.outstanding_records == 0 and producer.outstanding_bytes == 0
    assert putters.max_records_seen == case.bound_records
    assert putters.max_bytes_seen == case.bound_records * case.record_size
    check_all_landed(fake, putters)


async def test_bounds_hold_against_a_slow_backend() -> None:
    case = CASES[0]
    fake = FakeKinesis(faults=Faults(latency=0.02, latency_jitter=0.02, seed=4))
    fake.create_stream("s", 1)
    total = 10 * case.bound_records
    async with fake_producer(fake, **case.config()) as producer:
        putters = Putters(producer, case, total)
        async with anyio.create_task_group() as tg:
            for _ in range(PUTTERS):
                tg.start_soon(putters.run)
        await producer.flush()
        assert producer.outstanding_records == 0 and producer.outstanding_bytes == 0
    assert putters.finished == PUTTERS
    assert putters.max_in_put == PUTTERS  # all of them had to wait at some point
    assert putters.max_bytes_seen <= case.max_bytes
    assert putters.max_records_seen == case.bound_records  # the bound was reached
    check_all_landed(fake, putters)


async def test_sealed_records_are_held_once_in_memory() -> None:
    """Once sealed into aggregates, outstanding records cost about their own bytes.

    The aggregate holds the records' bytes and the members let go of theirs: with the backend
    holding the only connection (on a first, one-record request), the memory allocated for
    ~4 MiB of outstanding 4 KiB records queued behind it stays near 4 MiB (before, each
    record was held twice, by its outcome and by its aggregate). Then the gate opens and
    every record lands with its own data.
    """
    gate = Gate()
    fake = FakeKinesis(hook=gate)
    fake.create_stream("s", 1)
    size = 4096
    bound = 4 << 20  # under one request's 5 MiB: everything is sealed into the next request
    async with fake_producer(
        fake,
        max_outstanding_bytes=bound,
        max_outstanding_records=100_000,
        max_connections=1,
        record_max_buffered_time=0.01,
        shard_queue_size=4096,
        rate_limit=1e8,  # no pacing: every aggregate goes straight to the next request
        admission_ttl_share=None,  # the bytes cap holds, not time (nothing is answered)
    ) as producer:
        first = await producer.put(b"first", "first")
        with anyio.fail_after(10):  # a hang guard: the one connection is taken
            while gate.held == 0:  # noqa: ASYNC110 -- polling the gate's counter
                await anyio.sleep(0.005)
        tracemalloc.start()
        try:
            before = tracemalloc.get_traced_memory()[0]
            outcomes: list[Outcome] = []
            sent: dict[str, bytes] = {}
            while True:
                key = f"key-{len(outcomes):05d}"
                data = os.urandom(size)
                try:
                    outcomes.append(producer.put_nowait(data, key))
                except anyio.WouldBlock:
                    break
                sent[key] = hashlib.sha256(data).digest()  # the test keeps no copy either
            del data
            shards = stream_state(producer, "s").shards
            with anyio.fail_after(10):  # a hang guard: wait until every record is sealed
                while any(s.members or s.plain or s.queued for s in shards):  # noqa: ASYNC110
                    await anyio.sleep(0.005)
            # sealed: only a record left alone in the last aggregate went plain, with its data
            assert sum(o.data is not None for o in outcomes) <= 1
            held = tracemalloc.get_traced_memory()[0] - before
        finally:
            tracemalloc.stop()
        outstanding = producer.outstanding_bytes
        assert outstanding > bound - 2 * size
        # the records' bytes once, plus their outcomes and keys (~200 bytes a record)
        assert held < 1.05 * outstanding + (768 << 10), (held, outstanding)
        gate.open.set()
        await producer.flush()
    assert first.result().ok and all(o.result().ok for o in outcomes)
    landed = [
        (u.partition_key, hashlib.sha256(u.data).digest())
        for r in fake.records("s")
        for u in deaggregate(r.data, r.partition_key)
        if u.partition_key != "first"
    ]
    assert sorted(landed) == sorted(sent.items())  # each once, with its own bytes
