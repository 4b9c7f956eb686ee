"""SyncProducer: the Producer on a background thread, driven from plain (blocking) threads.

Against the in-memory fake on both background backends, plus one run against kinesalite.
A "gate" hook holds every PutRecords until a threading.Event is set, to make the backend
hang on demand (the producer's request timeout, 6 s + 6 s, is longer than any gate here).
"""

from __future__ import annotations

import concurrent.futures
import logging
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from typing import Any

import anyio
import pytest

from kinesis_trio import (
    FailedRecord,
    KinesisClient,
    ProducerClosedError,
    RecordResult,
    ResourceNotFoundError,
    StaticCredentials,
    SyncProducer,
    deaggregate,
)
from kinesis_trio.testing import FakeKinesis, Faults
from tests.support.emulators import EmulatorEndpoint
from tests.support.helpers import fake_producer, wait_until
from tests.support.sync_kit import Gate, new_fake, sync_producer


def landed(fake: FakeKinesis, stream: str = "s") -> Counter[bytes]:
    """How many times each user record's data is in the fake stream."""
    found: Counter[bytes] = Counter()
    for record in fake.records(stream):
        for user in deaggregate(
            record.data, record.partition_key, explicit_hash_key=record.explicit_hash_key
        ):
            found[user.data] += 1
    return found


pytestmark = pytest.mark.usefixtures("watchdog")


def test_put_and_result(backend: str) -> None:
    fake = new_fake()
    with sync_producer(fake, backend) as producer:
        assert producer.backend == backend
        future = producer.put(b"hello", "user-1")
        assert isinstance(future, concurrent.futures.Future)
        assert not future.cancel()  # accepted records cannot be withdrawn
        result = future.result(timeout=10)
        assert isinstance(result, RecordResult)
        assert result.ok and result.shard_id and result.sequence_number
        assert (result.stream_name, result.partition_key) == ("s", "user-1")
        assert future.exception() is None
        seen: list[RecordResult] = []
        more = [producer.put(bytearray(b"a"), "k2"), producer.put(memoryview(b"b"), "k3", "7")]
        more[0].add_done_callback(lambda f: seen.append(f.result()))
        done, not_done = concurrent.futures.wait(more, timeout=10)
        assert len(done) == 2 and not not_done
        wait_until(lambda: len(seen) == 1, what="the done callback")
        assert seen[0].ok
        assert producer.outstanding_records == 0
    assert landed(fake) == Counter({b"hello": 1, b"a": 1, b"b": 1})
    with pytest.raises(ProducerClosedError):
        producer.put(b"late", "k")


def test_put_many_and_explicit_stream(backend: str) -> None:
    fake = new_fake()
    fake.create_stream("other", shard_count=2)
    with sync_producer(fake, backend) as producer:
        futures = producer.put_many([(b"m1", "k"), (b"m2", "k", "12345")])
        other = producer.put_many([(b"o1", "k")], stream_name="other")
        missing = producer.put(b"x", "k", stream_name="no-such-stream")
        assert all(f.result(timeout=10).ok for f in futures + other)
        assert other[0].result().stream_name == "other"
        assert isinstance(missing.exception(timeout=10), ResourceNotFoundError)
        with pytest.raises(TypeError, match=r"^records\[1\]: data must be bytes"):
            producer.put_many([(b"ok", "k"), ("text", "k")])  # type: ignore[list-item]
        with pytest.raises(ValueError, match=r"^records\[2\]: .*explicit_hash_key"):
            producer.put_many([(b"ok", "k"), (b"ok", "k"), (b"x", "k", "-1")])
        with pytest.raises(TypeError, match=r"^records\[0\]: a record is a \(data"):
            producer.put_many([(b"ok",)])  # type: ignore[list-item]
    assert landed(fake) == Counter({b"m1": 1, b"m2": 1})
    assert landed(fake, "other") == Counter({b"o1": 1})


def test_many_threads_all_confirmed_once(backend: str) -> None:
    fake = new_fake(shards=4)
    threads, per_thread = 8, 2_000
    results: list[list[concurrent.futures.Future[RecordResult]]] = [[] for _ in range(threads)]
    with sync_producer(fake, backend) as producer:

        def worker(t: int) -> None:
            for i in range(per_thread):
                results[t].append(producer.put(f"{t}-{i}".encode(), f"key-{t}-{i % 50}"))

        workers = [threading.Thread(target=worker, args=(t,)) for t in range(threads)]
        for w in workers:
            w.start()
        for w in workers:
            w.join()
        producer.flush(timeout=30)
        assert all(f.done() for fs in results for f in fs)  # flush: every earlier future
    outcomes = [f.result() for fs in results for f in fs]
    assert len(outcomes) == threads * per_thread
    assert all(r.ok for r in outcomes)
    places = {(r.shard_id, r.sequence_number, r.sub_sequence_number) for r in outcomes}
    assert len(places) == len(outcomes)  # every result names its own place
    expected = Counter(f"{t}-{i}".encode() for t in range(threads) for i in range(per_thread))
    assert landed(fake) == expected  # each exactly once


def test_backpressure_bounds_outstanding_and_resumes(backend: str) -> None:
    gate = Gate()
    fake = new_fake(gate)
    bound, total = 50, 300
    accepted: list[concurrent.futures.Future[RecordResult]] = []
    peak = 0
    with sync_producer(fake, backend, max_outstanding_records=bound) as producer:

        def putter() -> None:
            nonlocal peak
            for i in range(total):
                accepted.append(producer.put(b"r%d" % i, f"k{i % 7}"))
                peak = max(peak, producer.outstanding_records)

        thread = threading.Thread(target=putter)
        thread.start()
        wait_until(
            lambda: len(accepted) == bound and gate.held > 0,
            what="the bound of puts accepted and a request held",
        )
        time.sleep(0.3)
        assert thread.is_alive() and len(accepted) == bound  # put is waiting for room
        assert producer.outstanding_records == bound
        with pytest.raises(TimeoutError, match="not accepted"):
            producer.put(b"extra", "k", timeout=0.05)
        gate.opened.set()
        thread.join(timeout=30)
        assert not thread.is_alive()
        producer.flush(timeout=30)
    assert peak <= bound
    assert all(f.result().ok for f in accepted)
    assert landed(fake) == Counter(b"r%d" % i for i in range(total))


def test_bad_input_raises_in_the_callers_thread_like_async_put(backend: str) -> None:
    cases: list[tuple[tuple[Any, ...], dict[str, Any]]] = [
        (("text", "k"), {}),
        ((None, "k"), {}),
        ((b"x", ""), {}),
        ((b"x", "k" * 257), {}),
        ((b"x", 5), {}),
        ((b"x", "\ud800"), {}),
        ((b"x" * 1024, "k"), {}),
        ((b"x", "k", "-1"), {}),
        ((b"x", "k", "007"), {}),
        ((b"x", "k", str(2**128)), {}),
        ((b"x", "k", 12), {}),
        ((b"x", "k"), {"stream_name": 5}),
        ((b"x", "k"), {"stream_name": ""}),
        ((b"x", "\U0001f600" * 129), {}),  # 258 UTF-16 code units
        ((b"x", "k", "1\u0662"), {}),  # a non-ASCII digit
    ]

    async def async_errors() -> list[tuple[type[BaseException], str]]:
        out: list[tuple[type[BaseException], str]] = []
        async with fake_producer(new_fake(), max_record_size=1000) as producer:
            for args, kwargs in cases:
                with pytest.raises((TypeError, ValueError)) as info:
                    await producer.put(*args, **kwargs)
                out.append((info.type, str(info.value)))
        async with fake_producer(new_fake(), stream=None) as producer:
            with pytest.raises(ValueError) as info:
                await producer.put(b"x", "k")
            out.append((info.type, str(info.value)))
        return out

    expected = anyio.run(async_errors, backend=backend)
    got: list[tuple[type[BaseException], str]] = []
    fake = new_fake()
    with sync_producer(fake, backend, max_record_size=1000) as producer:
        for args, kwargs in cases:
            with pytest.raises((TypeError, ValueError)) as info:
                producer.put(*args, **kwargs)
            got.append((info.type, str(info.value)))
        assert producer.outstanding_records == 0
        assert producer.put(b"fine", "k").result(timeout=10).ok  # still working
    with sync_producer(new_fake(), backend, stream=None) as producer:
        with pytest.raises(ValueError) as info:
            producer.put(b"x", "k")
        got.append((info.type, str(info.value)))
    assert got == expected


def test_a_bytes_subclass_and_a_long_emoji_key_are_accepted(backend: str) -> None:
    class Blob(bytes):
        pass

    fake = new_fake()
    with sync_producer(fake, backend) as producer:
        futures = [producer.put(Blob(b"sub"), "k"), producer.put(b"e", "\U0001f600" * 128)]
        assert all(f.result(timeout=10).ok for f in futures)
    assert landed(fake) == Counter({b"sub": 1, b"e": 1})


def test_open_from_a_thread_running_trio_raises_at_once() -> None:
    import trio

    errors: list[BaseException] = []

    def run() -> None:
        async def main() -> None:
            producer = sync_producer(new_fake(), "trio")
            try:
                producer.open()
            except RuntimeError as exc:
                errors.append(exc)
            else:  # pragma: no cover - the bug: close what opened
                producer.close()

        trio.run(main)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(20)
    assert not thread.is_alive(), "SyncProducer.open() hung on a thread running Trio"
    assert len(errors) == 1 and "running Trio" in str(errors[0])


def test_close_flushes(backend: str) -> None:
    fake = new_fake()
    # a long linger: only the close's flush sends these in time
    producer = sync_producer(fake, backend, record_max_buffered_time=60.0).open()
    futures = [producer.put(b"c%d" % i, f"k{i}") for i in range(500)]
    started = time.monotonic()
    producer.close()
    assert time.monotonic() - started < 30  # not the linger's 60 s (a busy machine is slow)
    assert all(f.done() and f.result().ok for f in futures)
    assert landed(fake) == Counter(b"c%d" % i for i in range(500))
    producer.close()  # idempotent


def test_exception_in_with_block_resolves_every_future(backend: str) -> None:
    gate = Gate()
    fake = new_fake(gate)
    futures: list[concurrent.futures.Future[RecordResult]] = []
    with pytest.raises(RuntimeError, match="boom"), sync_producer(fake, backend) as producer:
        gate.opened.set()
        first = producer.put(b"early", "k")
        assert first.result(timeout=10).ok
        gate.opened.clear()
        futures = [producer.put(b"p%d" % i, f"k{i}") for i in range(200)]
        wait_until(lambda: gate.held > 0, what="a request held at the gate")
        raise RuntimeError("boom")
    assert first.result().ok
    results = [f.result(timeout=0) for f in futures]
    assert all(not r.ok and r.error_code == "ProducerAborted" for r in results)
    assert "RuntimeError: boom" in (results[0].error_message or "")
    assert producer.outstanding_records == 0
    gate.opened.set()


def test_flush_timeout_when_backend_hangs(backend: str) -> None:
    gate = Gate()
    fake = new_fake(gate)
    with sync_producer(fake, backend) as producer:
        futures = [producer.put(b"h%d" % i, "k") for i in range(10)]
        started = time.monotonic()
        with pytest.raises(TimeoutError, match="10 records not resolved"):
            producer.flush(timeout=0.3)
        # at its timeout: not before it, and not held by the hung request (a busy machine
        # adds its own slowness, seconds at worst)
        assert 0.25 < time.monotonic() - started < 30
        assert not any(f.done() for f in futures)
        gate.opened.set()
        producer.flush(timeout=30)
        assert all(f.result().ok for f in futures)


def test_records_handed_over_with_their_flush_wake_the_loop_once(backend: str) -> None:
    # the Lambda helper's last records and its wait: the idle pump is woken once, and
    # finds the records and the flush together; every record is settled at the return
    fake = new_fake()
    with sync_producer(fake, backend) as producer:
        line = producer._line
        wait_until(lambda: line.pump_idle, what="the pump idle")
        call_soon = line.call_soon
        assert call_soon is not None
        wakes: list[object] = []

        def counted(fn: Callable[[], object]) -> object:
            wakes.append(fn)
            return call_soon(fn)

        line.call_soon = counted
        items = [producer._check(b"w%d" % i, "k", None, None) for i in range(10)]
        producer._hand_over_and_flush(items, 30)
        line.call_soon = call_soon
        assert [item.future.result(timeout=0).ok for item in items] == [True] * 10
        assert len(wakes) == 1
        assert producer.outstanding_records == 0
    assert sorted(landed(fake)) == sorted(b"w%d" % i for i in range(10))


def test_records_handed_over_with_their_flush_beyond_the_room_wait_for_it(
    backend: str,
) -> None:
    # more records than the backpressure limit: accepted as room is made, then flushed
    fake = new_fake()
    with sync_producer(fake, backend, max_outstanding_records=3) as producer:
        items = [producer._check(b"r%d" % i, "k", None, None) for i in range(10)]
        producer._hand_over_and_flush(items, 30)
        assert [item.future.result(timeout=0).ok for item in items] == [True] * 10
        assert producer.outstanding_records == 0


def test_records_handed_over_with_their_flush_time_out_or_are_refused(backend: str) -> None:
    gate = Gate()
    fake = new_fake(gate)
    producer = sync_producer(fake, backend).open()
    items = [producer._check(b"t%d" % i, "k", None, None) for i in range(3)]
    with pytest.raises(TimeoutError, match="3 records not resolved"):
        producer._hand_over_and_flush(items, 0.3)
    assert not any(item.future.done() for item in items)  # accepted, still in flight
    gate.opened.set()
    producer.close()
    assert all(item.future.result(timeout=0).ok for item in items)
    late = [producer._check(b"late", "k", None, None)]
    with pytest.raises(ProducerClosedError):
        producer._hand_over_and_flush(late, 1)
    assert not late[0].future.done()  # refused: never accepted


def test_close_timeout_fails_what_is_unconfirmed(backend: str) -> None:
    gate = Gate()
    fake = new_fake(gate)
    producer = sync_producer(fake, backend, close_timeout=0.5).open()
    futures = [producer.put(b"t%d" % i, "k") for i in range(20)]
    wait_until(lambda: gate.held > 0, what="a request held at the gate")
    started = time.monotonic()
    producer.close()
    assert time.monotonic() - started < 30  # at its 0.5 s timeout, not held by the gate
    results = [f.result(timeout=0) for f in futures]
    assert all(r.error_code == "ProducerCloseTimeout" for r in results), results[0]
    gate.opened.set()


def test_open_errors_and_callback_put(backend: str) -> None:
    with pytest.raises(ResourceNotFoundError):
        sync_producer(new_fake(), backend, stream="missing").open()
    producer = sync_producer(new_fake(), backend)
    with pytest.raises(ProducerClosedError, match="not open"):
        producer.put(b"x", "k")
    errors: list[BaseException] = []
    with sync_producer(new_fake(), backend, max_outstanding_records=1) as producer:
        with pytest.raises(RuntimeError, match="only once"):
            producer.open()

        def again(_: concurrent.futures.Future[RecordResult]) -> None:
            try:  # the record is still counted: put would wait on the thread that settles
                producer.put(b"from-callback", "k")
            except RuntimeError as exc:
                errors.append(exc)

        future = producer.put(b"x", "k")
        future.add_done_callback(again)
        future.result(timeout=10)
        wait_until(lambda: bool(errors), what="the callback's error")
    assert "own thread" in str(errors[0])


def test_kinesalite(local_engine: EmulatorEndpoint) -> None:
    name = f"sync-{uuid.uuid4().hex[:10]}"
    creds = StaticCredentials("AKIDLOCAL", "local-secret")

    async def client_call(fn: Callable[[KinesisClient], Any]) -> Any:
        async with KinesisClient(
            region_name="us-east-1", endpoint_url=local_engine.endpoint_url, credentials=creds
        ) as client:
            return await fn(client)

    async def create(client: KinesisClient) -> None:
        await client.create_stream(name, 2)
        await client.wait_for_stream(name)

    anyio.run(client_call, create)
    threads, per_thread = 4, 250
    with SyncProducer(
        name, region_name="us-east-1", endpoint_url=local_engine.endpoint_url, credentials=creds
    ) as producer:
        with concurrent.futures.ThreadPoolExecutor(threads) as pool:
            batches = list(
                pool.map(
                    lambda t: [producer.put(b"%d-%d" % (t, i), f"k{i}") for i in range(per_thread)],
                    range(threads),
                )
            )
        producer.flush(timeout=60)
    assert all(f.result().ok for fs in batches for f in fs)
    stored = anyio.run(client_call, lambda c: c.read_all(name))
    found = Counter(
        user.data
        for records in stored.values()
        for r in records
        for user in deaggregate(r["Data"], r["PartitionKey"])
    )
    assert found == Counter(b"%d-%d" % (t, i) for t in range(threads) for i in range(per_thread))


def failing_producer(
    fake: FakeKinesis, backend: str, on_failure: Callable[[FailedRecord], object], **config: Any
) -> SyncProducer:
    config.setdefault("record_max_buffered_time", 0.01)
    return sync_producer(fake, backend, on_failure=on_failure, **config)


def test_on_failure_gets_each_failed_record_once_in_a_worker_thread(backend: str) -> None:
    fake = new_fake()
    fake.create_stream("bad", 1)
    fake.faults = Faults(fatal={"bad": "AccessDeniedException"})
    got: list[FailedRecord] = []
    threads: set[int] = set()
    busy = [0, 0]  # calls running now, most at once

    def on_failure(record: FailedRecord) -> None:
        busy[0] += 1
        busy[1] = max(busy)
        threads.add(threading.get_ident())
        time.sleep(0.001)
        got.append(record)
        busy[0] -= 1

    with failing_producer(fake, backend, on_failure) as producer:
        ok = [producer.put(b"ok%d" % i, f"k{i}") for i in range(100)]
        bad = [producer.put(b"bad%d" % i, f"k{i}", stream_name="bad") for i in range(100)]
        assert all(f.result(timeout=10).ok for f in ok)
        assert not any(f.result(timeout=10).ok for f in bad)
        loop_thread = producer._line.loop_thread
    # every failure is delivered before close returns, once, with its data and result
    assert sorted(r.data for r in got) == sorted(b"bad%d" % i for i in range(100))
    by_data = {r.data: r for r in got}
    for i, future in enumerate(bad):
        record = by_data[b"bad%d" % i]
        assert (record.partition_key, record.stream_name) == (f"k{i}", "bad")
        assert record.result == future.result()
        assert record.result.error_code == "AccessDeniedException"
    assert threads and threading.get_ident() not in threads and loop_thread not in threads
    assert busy[1] == 1  # one call at a time


def test_on_failure_that_raises_is_logged_and_the_producer_goes_on(
    backend: str, caplog: pytest.LogCaptureFixture
) -> None:
    fake = new_fake()
    fake.create_stream("bad", 1)
    fake.faults = Faults(fatal={"bad": "AccessDeniedException"})
    got: list[bytes] = []

    def on_failure(record: FailedRecord) -> None:
        got.append(record.data)
        raise ValueError("the callback is broken")

    with (
        caplog.at_level(logging.ERROR, logger="kinesis_trio"),
        failing_producer(fake, backend, on_failure) as producer,
    ):
        first = [producer.put(b"a%d" % i, "k", stream_name="bad") for i in range(5)]
        assert not any(f.result(timeout=10).ok for f in first)
        wait_until(lambda: len(got) == 5, what="five failed records")
        then = [producer.put(b"b%d" % i, "k") for i in range(5)]
        again = [producer.put(b"c%d" % i, "k", stream_name="bad") for i in range(5)]
        assert all(f.result(timeout=10).ok for f in then)
        assert not any(f.result(timeout=10).ok for f in again)
    assert sorted(got) == sorted([b"a%d" % i for i in range(5)] + [b"c%d" % i for i in range(5)])
    logged = [r.getMessage() for r in caplog.records if "on_failure_raised" in r.getMessage()]
    assert len(logged) == 10
    assert "the callback is broken" in logged[0] and "stream='bad'" in logged[0]


def test_on_failure_gets_the_records_the_close_fails(backend: str) -> None:
    gate = Gate()
    fake = new_fake(gate)
    got: list[FailedRecord] = []
    producer = failing_producer(fake, backend, got.append, close_timeout=0.5).open()
    futures = [producer.put(b"t%d" % i, f"k{i}") for i in range(30)]
    wait_until(lambda: gate.held > 0, what="a request held at the gate")
    producer.close()
    assert sorted(r.data for r in got) == sorted(b"t%d" % i for i in range(30))
    assert {r.result.error_code for r in got} == {"ProducerCloseTimeout"}
    assert {r.data: r.result for r in got} == {
        b"t%d" % i: f.result() for i, f in enumerate(futures)
    }
    gate.opened.set()


def test_on_failure_must_be_callable() -> None:
    with pytest.raises(TypeError, match="on_failure"):
        SyncProducer("s", region_name="us-east-1", on_failure="print")  # type: ignore[arg-type]
