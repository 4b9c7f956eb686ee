"""The producer pipeline end to end against the in-memory fake (both backends)."""

from __future__ import annotations

import random
import threading
from typing import Any

import anyio
import httpx
import pytest

from kinesis_trio import (
    Outcome,
    ProducerClosedError,
    ResourceNotFoundError,
)
from kinesis_trio._aws._credentials import CredentialProvider
from kinesis_trio.testing import FakeKinesis
from tests.support.credentials import RefreshProbe, refreshable
from tests.support.helpers import (
    check_landed,
    error_response,
    fake_producer,
    fake_rows,
    throttle_response,
)

pytestmark = pytest.mark.anyio


async def test_mixed_records_land_once_where_outcomes_say() -> None:
    fake = FakeKinesis()
    fake.create_stream("s", 4)
    rng = random.Random(7)
    sent: list[tuple[bytes, str, str | None, Outcome]] = []
    async with fake_producer(fake) as producer:
        for i in range(3000):
            size = rng.choice([0, 1, 50, 200, 5000, 60_000])
            data = rng.randbytes(size)
            kind = i % 5
            if kind == 0:
                pk, ehk = f"user-{rng.randrange(300)}", None
            elif kind == 1:
                pk, ehk = "ключ-" + "é" * rng.randrange(1, 200), None
            elif kind == 2:
                pk, ehk = "k" * 256, None
            elif kind == 3:
                pk, ehk = "x", str(rng.randrange(2**128))
            else:
                pk, ehk = "🦀" * rng.randrange(1, 10), None
            sent.append((data, pk, ehk, await producer.put(data, pk, ehk)))
        await producer.flush()
        assert all(o.done() for *_, o in sent)
        assert producer.outstanding_records == 0
        assert producer.outstanding_bytes == 0
    check_landed(fake_rows(fake), sent)
    # aggregation happened (far fewer Kinesis records than user records)
    assert len(fake.records("s")) < len(sent) / 2


async def test_aggregation_off_sends_plain_records() -> None:
    fake = FakeKinesis()
    fake.create_stream("s", 2)
    sent = []
    async with fake_producer(fake, aggregation_enabled=False) as producer:
        for i in range(700):
            data = b"%d" % i
            sent.append((data, f"k{i}", None, await producer.put(data, f"k{i}")))
    assert len(fake.records("s")) == 700
    assert all(o.result().sub_sequence_number is None for *_, o in sent)
    check_landed(fake_rows(fake), sent)
    assert fake.calls.count("PutRecords") >= 2  # at most 500 entries a request


async def test_first_put_from_a_child_task_and_no_task_outlives_the_block() -> None:
    fake = FakeKinesis()
    fake.create_stream("s", 2)
    fake.create_stream("other", 1)
    results = []
    async with fake_producer(fake) as producer:

        async def child(i: int) -> None:
            outcome = await producer.put(b"child", f"k{i}", stream_name="other" if i else None)
            results.append(await outcome.wait())

        async with anyio.create_task_group() as tg:
            for i in range(3):
                tg.start_soon(child, i)
    assert len(results) == 3 and all(r.ok for r in results)
    assert {r.stream_name for r in results} == {"s", "other"}
    with pytest.raises(ProducerClosedError):
        await producer.put(b"late", "k")


async def test_flush_returns_when_earlier_outcomes_are_resolved() -> None:
    fake = FakeKinesis()
    fake.create_stream("s", 3)
    async with fake_producer(fake, record_max_buffered_time=5.0) as producer:
        outcomes = [await producer.put(b"r", f"k{i}") for i in range(100)]
        assert not any(o.done() for o in outcomes)
        await producer.flush()
        assert all(o.done() and o.result().ok for o in outcomes)
        await producer.flush()  # nothing pending: returns


async def test_missing_default_stream_fails_aenter_with_the_aws_error() -> None:
    fake = FakeKinesis()
    with pytest.raises(ResourceNotFoundError, match="nope"):
        async with fake_producer(fake, stream="nope"):
            pytest.fail("entered")


async def test_put_to_missing_other_stream_raises_and_producer_keeps_working() -> None:
    fake = FakeKinesis()
    fake.create_stream("s", 1)
    async with fake_producer(fake) as producer:
        with pytest.raises(ResourceNotFoundError):
            await producer.put(b"x", "k", stream_name="missing")
        with pytest.raises(anyio.WouldBlock):
            producer.put_nowait(b"x", "k", stream_name="missing")
        assert (await (await producer.put(b"x", "k")).wait()).ok


async def test_stream_agnostic_producer_needs_a_stream_name() -> None:
    fake = FakeKinesis()
    fake.create_stream("s", 1)
    async with fake_producer(fake, stream=None) as producer:
        with pytest.raises(ValueError, match="no stream_name"):
            await producer.put(b"x", "k")
        assert (await (await producer.put(b"x", "k", stream_name="s")).wait()).ok


@pytest.mark.parametrize(
    ("args", "error", "match"),
    [
        (("text", "k"), TypeError, "data must be bytes"),
        ((None, "k"), TypeError, "data must be bytes"),
        ((b"x", ""), ValueError, "1 to 256 characters"),
        ((b"x", "k" * 257), ValueError, "1 to 256 characters"),
        ((b"x", 5), TypeError, "partition_key must be a str"),
        ((b"x", ["k"]), TypeError, "partition_key must be a str"),
        ((b"x", "\ud800"), ValueError, "not valid Unicode"),
        ((b"x" * (1024 * 1024), "k"), ValueError, "over max_record_size"),
        ((b"x", "k", "-1"), ValueError, "explicit_hash_key"),
        ((b"x", "k", "007"), ValueError, "explicit_hash_key"),
        ((b"x", "k", str(2**128)), ValueError, "explicit_hash_key"),
        ((b"x", "k", 12), TypeError, "explicit_hash_key"),
    ],
)
async def test_bad_input_raises_at_once_and_loses_nothing(
    args: tuple[Any, ...], error: type[Exception], match: str
) -> None:
    fake = FakeKinesis()
    fake.create_stream("s", 1)
    async with fake_producer(fake) as producer:
        first = await producer.put(b"before", "k")
        with pytest.raises(error, match=match):
            await producer.put(*args)
        with pytest.raises(error, match=match):
            producer.put_nowait(*args)
        assert producer.outstanding_records == 1
        last = await producer.put(b"after", "k")
    assert first.result().ok and last.result().ok
    assert [r.data for r in fake.records("s")] != []


async def test_bytearray_and_memoryview_are_accepted() -> None:
    fake = FakeKinesis()
    fake.create_stream("s", 1)
    async with fake_producer(fake, aggregation_enabled=False) as producer:
        await producer.put(bytearray(b"ba"), "k")
        await producer.put(memoryview(b"mv"), "k")
    assert sorted(r.data for r in fake.records("s")) == [b"ba", b"mv"]


class Gate:
    """A fake hook that holds PutRecords until opened."""

    def __init__(self) -> None:
        self.open = anyio.Event()
        self.entered = 0
        self.first = anyio.Event()  # set when the first PutRecords reaches the gate

    async def __call__(self, operation: str, body: dict[str, Any]) -> httpx.Response | None:
        if operation == "PutRecords":
            self.entered += 1
            self.first.set()
            await self.open.wait()
        return None

    async def reached(self) -> None:
        """Until a request is held at the gate (not a fixed sleep: a loaded machine may take
        longer than the linger to send it)."""
        with anyio.fail_after(30):
            await self.first.wait()


async def test_backpressure_bounds_outstanding_and_cancelled_put_is_not_accepted() -> None:
    gate = Gate()
    fake = FakeKinesis(hook=gate)
    fake.create_stream("s", 2)
    accepted: list[Outcome] = []
    async with fake_producer(
        fake, max_outstanding_records=50, record_max_buffered_time=0.01
    ) as producer:
        for i in range(50):
            accepted.append(producer.put_nowait(b"v", f"k{i}"))
        with pytest.raises(anyio.WouldBlock):
            producer.put_nowait(b"v", "k")
        # a put blocked on backpressure, cancelled: not accepted
        with anyio.move_on_after(0.2) as scope:
            await producer.put(b"cancelled", "k")
        assert scope.cancelled_caught
        assert producer.outstanding_records == 50

        async def more() -> None:
            for i in range(100):
                accepted.append(await producer.put(b"w", f"m{i}"))
                assert producer.outstanding_records <= 50

        async with anyio.create_task_group() as tg:
            tg.start_soon(more)
            await anyio.sleep(0.1)
            assert producer.outstanding_records == 50
            assert len(accepted) == 50
            gate.open.set()
    assert len(accepted) == 150
    assert all(o.result().ok for o in accepted)
    datas = [u.data for r in fake.records("s") for u in _users(r)]
    assert b"cancelled" not in datas
    assert len(datas) == 150


def _users(record: Any) -> list[Any]:
    from kinesis_trio import deaggregate

    return deaggregate(
        record.data, record.partition_key, explicit_hash_key=record.explicit_hash_key
    )


async def test_cancelled_waiter_changes_nothing() -> None:
    gate = Gate()
    fake = FakeKinesis(hook=gate)
    fake.create_stream("s", 1)
    async with fake_producer(fake, record_max_buffered_time=0.01) as producer:
        outcome = await producer.put(b"v", "k")
        with anyio.move_on_after(0.05) as scope:
            await outcome.wait()
        assert scope.cancelled_caught and not outcome.done()
        got = []

        async def waiter() -> None:
            got.append(await outcome.wait())

        async with anyio.create_task_group() as tg:
            tg.start_soon(waiter)
            tg.start_soon(waiter)
            # a third waiter, cancelled while the other two wait on the same event
            async with anyio.create_task_group() as inner:
                inner.start_soon(outcome.wait)
                await anyio.sleep(0.01)
                inner.cancel_scope.cancel()
            assert not outcome.done()
            gate.open.set()
    assert len(got) == 2 and got[0] == got[1] and got[0].ok
    assert outcome.result() == got[0]


async def test_exit_by_exception_fails_pending_outcomes_and_raises_it_unwrapped() -> None:
    gate = Gate()
    fake = FakeKinesis(hook=gate)
    fake.create_stream("s", 2)
    outcomes: list[Outcome] = []
    with pytest.raises(KeyError, match="boom"):
        async with fake_producer(fake, record_max_buffered_time=0.01) as producer:
            for i in range(20):
                outcomes.append(await producer.put(b"v", f"k{i}"))
            await gate.reached()  # some requests are in flight, held by the gate
            assert gate.entered > 0
            raise KeyError("boom")
    for outcome in outcomes:
        result = outcome.result()
        assert not result.ok and result.error_code == "ProducerAborted"
        assert "KeyError" in (result.error_message or "")


async def test_exit_by_cancellation_fails_pending_outcomes() -> None:
    gate = Gate()
    fake = FakeKinesis(hook=gate)
    fake.create_stream("s", 1)
    outcomes: list[Outcome] = []
    with anyio.CancelScope() as outer:
        async with fake_producer(fake, record_max_buffered_time=0.01) as producer:
            for i in range(10):
                outcomes.append(await producer.put(b"v", f"k{i}"))
            await anyio.sleep(0.05)
            outer.cancel()
            await anyio.sleep(1)
            pytest.fail("not cancelled")
    assert outer.cancelled_caught
    assert [o.result().error_code for o in outcomes] == ["ProducerAborted"] * 10
    assert all("cancelled" in (o.result().error_message or "") for o in outcomes)


async def test_throttled_entries_are_retried_and_history_kept() -> None:
    calls = 0

    async def hook(operation: str, body: dict[str, Any]) -> httpx.Response | None:
        nonlocal calls
        if operation == "PutRecords":
            calls += 1
            if calls <= 2:
                return throttle_response(body)
        return None

    fake = FakeKinesis(hook=hook)
    fake.create_stream("s", 1)
    async with fake_producer(fake, record_max_buffered_time=0.01) as producer:
        outcome = await producer.put(b"v", "k")
        result = await outcome.wait()
    assert result.ok
    assert [a.success for a in result.attempts] == [False, False, True]
    assert result.attempts[0].error_code == "ProvisionedThroughputExceededException"
    assert len(fake.records("s")) == 1


@pytest.mark.parametrize("code", ["KMSNotFoundException", "AccessDeniedException"])
async def test_fatal_entry_error_fails_at_once(code: str) -> None:
    async def hook(operation: str, body: dict[str, Any]) -> httpx.Response | None:
        return throttle_response(body, code) if operation == "PutRecords" else None

    fake = FakeKinesis(hook=hook)
    fake.create_stream("s", 1)
    async with fake_producer(fake, record_max_buffered_time=0.01) as producer:
        outcomes = [await producer.put(b"v", f"k{i}") for i in range(5)]
        results = [await o.wait() for o in outcomes]
    assert [r.error_code for r in results] == [code] * 5
    assert all(len(r.attempts) == 1 for r in results)


async def test_request_errors_retry_or_fail_by_class() -> None:
    calls = 0

    async def hook(operation: str, body: dict[str, Any]) -> httpx.Response | None:
        nonlocal calls
        if operation != "PutRecords":
            return None
        calls += 1
        if calls == 1:
            return error_response(500, "InternalFailure")
        if calls == 2:
            return error_response(503, "ServiceUnavailable")
        if body["Records"][0]["PartitionKey"] == "denied":
            return error_response(400, "AccessDeniedException")
        return None

    fake = FakeKinesis(hook=hook)
    fake.create_stream("s", 1)
    async with fake_producer(
        fake, record_max_buffered_time=0.01, aggregation_enabled=False
    ) as producer:
        ok = await (await producer.put(b"v", "k")).wait()
        denied = await (await producer.put(b"v", "denied")).wait()
    assert ok.ok and [a.error_code for a in ok.attempts] == [
        "InternalFailure",
        "ServiceUnavailable",
        None,
    ]
    assert not denied.ok and denied.error_code == "AccessDeniedException"
    assert len(denied.attempts) == 1


# A worker thread refreshes the credentials: real clocks here (MockClock would jump past it).
async def test_expired_token_refreshes_and_the_record_is_written() -> None:
    fake = FakeKinesis()
    fake.create_stream("s", 1)
    fake.fail_next(2, "ExpiredTokenException")  # the client's own resend meets it too
    probe = RefreshProbe(threading.get_ident(), delay=0.0)
    producer = fake_producer(fake, record_max_buffered_time=0.01)
    # refreshable credentials, as the botocore chain gives for roles (not a public argument)
    producer._client_args["credentials"] = CredentialProvider(refreshable(probe, 3600))
    async with producer:
        result = await (await producer.put(b"v", "k")).wait()
    assert result.ok
    assert [a.error_code for a in result.attempts] == ["ExpiredTokenException", None]
    assert probe.calls >= 1
    assert len(fake.records("s")) == 1
