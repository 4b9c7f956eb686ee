"""Time-dependent behaviour: linger, TTL, close timeout, request timeouts.

On virtual time on both backends (trio's ``MockClock(autojump_threshold=0)``, an asyncio
loop whose clock leaps to its next timer) with the KPL's real defaults (a 30 s TTL takes
milliseconds), and the timings are asserted exactly.
"""

from __future__ import annotations

import math
from typing import Any

import anyio
import httpx
import pytest

from kinesis_trio import Outcome, deaggregate
from kinesis_trio.testing import FakeKinesis
from tests.support.helpers import error_response, fake_producer, throttle_response

pytestmark = [pytest.mark.anyio, pytest.mark.virtual_time]


#: the linger window of the tests that need one of the default size
WINDOW = 0.1


#: How much earlier than its deadline a timer may fire (asyncio runs the callbacks due
#: within the clock's resolution).
_EARLY = 1e-3


async def window_start(linger: float) -> None:
    """Sleep until just after a linger window opens (linger deadlines fall on the clock's
    multiples of the linger): a record put now lingers ~0.99 of it."""
    now = anyio.current_time()
    await anyio.sleep((math.floor(now / linger) + 1) * linger - now + linger * 0.01)


async def test_linger_sends_a_lone_record_at_its_deadline() -> None:
    """A record waits at most the linger: until the end of its linger window (deadlines fall
    on the clock's multiples of the linger, so every shard's containers seal together)."""
    linger = WINDOW
    fake = FakeKinesis()
    fake.create_stream("s", 2)
    async with fake_producer(fake, record_max_buffered_time=linger) as producer:
        await window_start(linger)
        start = anyio.current_time()
        window_end = (math.floor(start / linger) + 1) * linger
        outcome = await producer.put(b"v", "k")
        await anyio.sleep(linger * 0.5)
        assert not outcome.done()  # still lingering
        result = await outcome.wait()
        elapsed = anyio.current_time() - start
    assert result.ok
    assert result.attempts[0].start >= window_end - _EARLY  # not sent before its deadline
    assert window_end - start <= elapsed
    assert elapsed < linger + 0.01  # sent at its deadline, not after it
    assert result.attempts[0].delay >= (window_end - start) * 0.99


async def test_a_window_that_fills_early_goes_before_its_end() -> None:
    """``linger_window_bytes``: records that fill a window's byte budget go at once,
    without waiting for the window's end; a record after them waits for it."""
    linger = 10.0
    fake = FakeKinesis()
    fake.create_stream("s", 4)
    async with fake_producer(
        fake, record_max_buffered_time=linger, linger_window_bytes=20_000
    ) as producer:
        await window_start(linger)
        start = anyio.current_time()
        window_end = (math.floor(start / linger) + 1) * linger
        first = [await producer.put(b"x" * 1000, f"k{i}") for i in range(25)]
        results = [await o.wait() for o in first]
        early = anyio.current_time() - start
        late = await producer.put(b"y", "late")
        late_end = (math.floor(anyio.current_time() / linger) + 1) * linger
        await anyio.sleep(linger * 0.5)
        assert not late.done()  # below the budget: it lingers
        late_result = await late.wait()
    assert all(r.ok for r in results)
    # the window's budget filled: its records went before the window's end
    assert max(r.attempts[0].start for r in results) < window_end
    assert early < linger * 0.2
    # below the budget: the late record lingered to its window's end
    assert late_result.ok and late_result.attempts[0].start >= late_end - _EARLY


async def test_a_windows_shards_are_sealed_by_the_timer_in_order_past_a_limiter(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """At a window's end the timer seals every due shard and hands the batches to the
    collector itself: no shard worker is woken, and the shards go in one request. A batch
    its shard's limiter will not take whole is split as the worker would split it: the part
    admitted goes now, the rest after it (the worker paces it), in put order."""
    from kinesis_trio._shell import _pipeline as _shell

    nudges: list[object] = []
    nudge = _shell._Worker.nudge

    def counted(self: _shell._Worker) -> None:
        nudges.append(self)
        nudge(self)

    monkeypatch.setattr(_shell._Worker, "nudge", counted)
    linger = WINDOW
    fake = FakeKinesis()
    fake.create_stream("s", 4)
    # 2 % of a shard's 1,000 records/s: a bucket of 20 records
    async with fake_producer(
        fake, record_max_buffered_time=linger, aggregation_enabled=False, rate_limit=2
    ) as producer:
        await window_start(linger)
        others = [await producer.put(b"o", f"other-{i}") for i in range(12)]
        hot = [await producer.put(b"h%d" % i, "hot") for i in range(30)]
        results = [await o.wait() for o in others + hot]
        woken = len(nudges)  # (closing wakes every worker: a flush)
    assert all(r.ok for r in results)
    assert woken == 0
    hot_shard = results[len(others)].shard_id
    in_hot = [r for r in results[: len(others)] if r.shard_id == hot_shard]
    entries = [body["Records"] for op, body in fake.requests if op == "PutRecords"]
    # the first request: every other shard's records and the 20 the hot shard's bucket held
    assert entries[0] == len(others) + 20 - len(in_hot) and sum(entries) == 42
    seqs = [int(r.sequence_number or "0") for r in results[len(others) :]]
    assert seqs == sorted(seqs)  # the hot key's records were written in put order


def _collector_stream(producer: Any) -> Any:
    """The shell's state of stream "s" (its collector channel)."""
    return producer._pipeline._tasks[producer._engine._streams["s"]]


def _collector_messages(producer: Any, monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    """Every message into the stream's collector channel: ("timer" or "worker", records)."""
    stream = _collector_stream(producer)
    sent: list[tuple[str, int]] = []
    send_nowait, send = stream.coll_send.send_nowait, stream.coll_send.send
    from_workers: list[object] = []  # the lists sent by workers (anyio's send calls
    # send_nowait with the same list)

    def timer(item: Any) -> None:
        if not any(item is sent_by_worker for sent_by_worker in from_workers):
            sent.append(("timer", len(item)))
        send_nowait(item)

    async def worker(item: Any) -> None:
        sent.append(("worker", len(item)))
        from_workers.append(item)
        await send(item)

    monkeypatch.setattr(stream.coll_send, "send_nowait", timer)
    monkeypatch.setattr(stream.coll_send, "send", worker)
    return sent


async def test_the_timer_hands_a_windows_shards_to_the_collector_in_one_message(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The batches the timer seals in one pass go to the collector as one message (one
    channel send, one wake-up of the collector), in the order of the shards."""
    linger = WINDOW
    fake = FakeKinesis()
    fake.create_stream("s", 4)
    async with fake_producer(
        fake, record_max_buffered_time=linger, aggregation_enabled=False
    ) as producer:
        sent = _collector_messages(producer, monkeypatch)
        await window_start(linger)
        # put_nowait: no await between the records, so the window's timer cannot run among
        # them however slow the machine (a put per await let a busy one split them 11 + 1)
        outcomes = [producer.put_nowait(b"v", f"key-{i}") for i in range(12)]
        results = [await o.wait() for o in outcomes]
        window = list(sent)
    assert all(r.ok for r in results)
    assert len({r.shard_id for r in results}) >= 3  # several shards in the window
    assert window == [("timer", 12)]
    entries = [body["Records"] for op, body in fake.requests if op == "PutRecords"]
    assert entries == [12]


async def test_with_the_collectors_channel_full_the_timer_leaves_the_batches_to_the_workers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """When the collector's channel has no room, the timer's pass seals each due shard and
    queues its batch for the shard's worker, which sends it when the channel has room;
    every record is written, each key's in put order."""
    linger = WINDOW
    fake = FakeKinesis()
    fake.create_stream("s", 4)
    async with fake_producer(
        fake, record_max_buffered_time=linger, aggregation_enabled=False
    ) as producer:
        sent = _collector_messages(producer, monkeypatch)
        coll: Any = _collector_stream(producer).coll_send
        statistics = coll.statistics
        full = [1]  # the first pass finds the channel full

        def seen_full() -> Any:
            room = statistics()
            if full:
                full.pop()
                return room._replace(current_buffer_used=room.max_buffer_size)
            return room

        monkeypatch.setattr(coll, "statistics", seen_full)
        await window_start(linger)
        outcomes = [await producer.put(b"%d" % i, f"key-{i % 3}") for i in range(12)]
        results = [await o.wait() for o in outcomes]
        window = list(sent)
    assert all(r.ok for r in results)
    assert not full  # the timer did look
    assert [who for who, _ in window] == ["worker"] * len(window), window
    assert sum(n for _, n in window) == 12
    for key in range(3):
        seqs = [int(r.sequence_number or "0") for r in results[key::3]]
        assert seqs == sorted(seqs)


async def test_always_throttled_records_expire_after_the_ttl() -> None:
    ttl = 30.0

    async def hook(operation: str, body: dict[str, Any]) -> httpx.Response | None:
        return throttle_response(body) if operation == "PutRecords" else None

    fake = FakeKinesis(hook=hook)
    fake.create_stream("s", 2)
    async with fake_producer(
        fake,
        record_ttl=ttl,
        record_max_buffered_time=0.01,
        retry_backoff_base=0.1,
        retry_backoff_max=5.0,
    ) as producer:
        start = anyio.current_time()
        outcomes = [await producer.put(b"v", f"k{i}") for i in range(20)]
        results = [await o.wait() for o in outcomes]
        elapsed = anyio.current_time() - start
    assert all(not r.ok and r.error_code == "RecordExpired" for r in results)
    assert all(len(r.attempts) >= 3 for r in results)
    assert all(
        a.error_code == "ProvisionedThroughputExceededException"
        for r in results
        for a in r.attempts
    )
    assert "record_ttl" in (results[0].error_message or "")
    # A record fails when its next retry would come after its TTL: within one maximal
    # backoff step before the TTL, and never after it.
    assert all(r.resolved_at - r.accepted_at >= ttl - 5.0 for r in results)
    assert ttl - 5.0 <= elapsed
    assert elapsed <= ttl + 0.25


async def test_close_timeout_fails_what_is_left() -> None:
    async def hook(operation: str, body: dict[str, Any]) -> httpx.Response | None:
        if operation == "PutRecords":
            await anyio.sleep_forever()
        return None

    fake = FakeKinesis(hook=hook)
    fake.create_stream("s", 1)
    outcomes: list[Outcome] = []
    close_timeout = 10.0
    async with fake_producer(
        fake, close_timeout=close_timeout, request_timeout=1000.0, record_ttl=1000.0
    ) as producer:
        outcomes.append(await producer.put(b"v", "k"))
        start = anyio.current_time()
    elapsed = anyio.current_time() - start
    result = outcomes[0].result()
    assert not result.ok and result.error_code == "ProducerCloseTimeout"
    # at the close timeout, not at the request's (1,000 s): exactly so
    assert close_timeout * 0.999 <= elapsed < close_timeout + 1.0


async def test_timed_out_request_is_retried_never_reported_ok() -> None:
    calls = 0

    async def hook(operation: str, body: dict[str, Any]) -> httpx.Response | None:
        nonlocal calls
        if operation == "PutRecords":
            calls += 1
            if calls == 1:
                await anyio.sleep_forever()  # the first request never answers
        return None

    fake = FakeKinesis(hook=hook)
    fake.create_stream("s", 1)
    # (on asyncio 1 s: the second request must be answered within it on a busy machine)
    timeout = 6.0
    async with fake_producer(
        fake, request_timeout=timeout, connect_timeout=timeout, record_max_buffered_time=0.01
    ) as producer:
        outcome = await producer.put(b"v", "k")
        result = await outcome.wait()
    assert result.ok
    assert len(result.attempts) == 2
    first = result.attempts[0]
    assert not first.success and first.ambiguous
    assert first.duration >= 2 * timeout * 0.99
    assert len(fake.records("s")) == 1


async def test_request_timeout_until_ttl_fails_with_history() -> None:
    async def hook(operation: str, body: dict[str, Any]) -> httpx.Response | None:
        if operation == "PutRecords":
            await anyio.sleep_forever()
        return None

    fake = FakeKinesis(hook=hook)
    fake.create_stream("s", 1)
    async with fake_producer(
        fake,
        request_timeout=2.0,
        connect_timeout=1.0,
        record_ttl=30.0,
        record_max_buffered_time=0.01,
    ) as producer:
        result = await (await producer.put(b"v", "k")).wait()
    assert not result.ok and result.error_code == "RecordExpired"
    assert len(result.attempts) >= 2
    assert all(a.ambiguous and not a.success for a in result.attempts)


# -- aggregates whose members are of different ages --------------------------------------------
# Sealing hands a record's bytes to its aggregate; when only some members expire, the others
# get their bytes back from the aggregate and go on alone.


def _stored(fake: FakeKinesis) -> dict[str, bytes]:
    return {
        u.partition_key: u.data
        for r in fake.records("s")
        for u in deaggregate(r.data, r.partition_key, explicit_hash_key=r.explicit_hash_key)
    }


async def test_a_member_that_expired_while_lingering_leaves_its_aggregate() -> None:
    fake = FakeKinesis()
    fake.create_stream("s", 1)
    old_data, young_data = b"old" * 50, b"young" * 50
    async with fake_producer(
        fake, record_max_buffered_time=8, record_ttl=5, rate_limit=1e6
    ) as producer:
        await window_start(8)
        old = await producer.put(old_data, "old")  # expires at 5, sealed at 8
        await anyio.sleep(6)
        young = await producer.put(young_data, "young")  # expires at 11
        old_result, young_result = await old.wait(), await young.wait()
    assert not old_result.ok and old_result.error_code == "RecordExpired"
    assert old_result.attempts == ()
    assert young_result.ok and young_result.sub_sequence_number is None  # sent alone
    assert _stored(fake) == {"young": young_data}


async def test_a_failed_aggregate_whose_oldest_member_expired_resends_the_others() -> None:
    calls = 0

    async def hook(operation: str, body: dict[str, Any]) -> httpx.Response | None:
        nonlocal calls
        if operation != "PutRecords":
            return None
        calls += 1
        if calls == 1:  # answered after the oldest member's TTL: it expires, not the other
            await anyio.sleep(2)
            return error_response(500, "InternalFailure")
        return None

    fake = FakeKinesis(hook=hook)
    fake.create_stream("s", 1)
    old_data, young_data = b"old" * 50, b"young" * 50
    async with fake_producer(
        fake,
        record_max_buffered_time=8,
        record_ttl=9,
        retry_backoff_base=0.01,
        rate_limit=1e6,
    ) as producer:
        await window_start(8)
        old = await producer.put(old_data, "old")  # sent at 8, answered at 10, expires at 9
        await anyio.sleep(6)
        young = await producer.put(young_data, "young")  # expires at 15
        old_result, young_result = await old.wait(), await young.wait()
    assert not old_result.ok and old_result.error_code == "RecordExpired"
    assert [a.error_code for a in old_result.attempts] == ["InternalFailure"]
    assert young_result.ok and young_result.sub_sequence_number is None
    assert [a.error_code for a in young_result.attempts] == ["InternalFailure", None]
    assert _stored(fake) == {"young": young_data}
