"""What the path between the producer and the endpoint does to records: an intermediary
that refuses a request as too large (413) or for any other reason (a 4xx), a slow endpoint
storing a large record, a slow uplink. Each on the in-memory fake, on virtual time on both
backends."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import anyio
import httpx
import pytest

from kinesis_trio.testing import FakeKinesis, ServerModel
from tests.support.helpers import fake_producer

pytestmark = [pytest.mark.anyio, pytest.mark.virtual_time]


def _proxy(limit: int, refused: list[int]) -> Any:
    """A hook answering a PutRecords whose records' base64 passes ``limit`` characters as a
    proxy in front of the endpoint would: 413 with no body (``refused`` counts them)."""

    async def hook(operation: str, body: dict[str, Any]) -> httpx.Response | None:
        if operation != "PutRecords":
            return None
        size = sum(len(r["Data"]) for r in body["Records"])
        if size > limit:
            refused.append(len(body["Records"]))
            return httpx.Response(413, content=b"")
        return None

    return hook


async def test_an_intermediary_413_splits_the_request_until_its_halves_pass() -> None:
    """A 413 without the service's error shape: nothing was written, so the request is sent
    again in halves at once (not retried whole, not ambiguous), and every record is written
    once, none flagged as a possible duplicate."""
    refused: list[int] = []
    fake = FakeKinesis(hook=_proxy(700_000, refused))
    fake.create_stream("s", 1)
    async with fake_producer(fake, aggregation_enabled=False, record_ttl=30.0) as producer:
        outcomes = [await producer.put(bytes([65 + i]) * 300_000, f"k{i}") for i in range(4)]
        await producer.flush()
    results = [await o.wait() for o in outcomes]
    assert all(r.ok for r in results), [r.error_code for r in results]
    assert not any(r.possible_duplicate for r in results)
    assert refused and all(n > 1 for n in refused)  # only requests of several were refused
    split = [a for r in results for a in r.attempts if a.error_code == "413"]
    assert split and not any(a.ambiguous for a in split)
    assert sorted(r.data[0] for r in fake.records("s")) == [65, 66, 67, 68]


async def test_an_intermediary_413_fails_a_lone_record_for_good_at_once() -> None:
    """A record the intermediary refuses alone fails on its first attempt, with the status
    as its code and a message saying what happened: not retried until ``record_ttl``, and
    not a possible duplicate (nothing was written)."""
    refused: list[int] = []
    fake = FakeKinesis(hook=_proxy(100_000, refused))
    fake.create_stream("s", 1)
    async with fake_producer(fake, record_ttl=30.0) as producer:
        outcome = await producer.put(b"x" * 300_000, "k")
        await producer.flush()
        small = await producer.put(b"small", "k2")
        await producer.flush()
    result = await outcome.wait()
    assert not result.ok
    assert result.error_code == "413"
    assert "too large" in (result.error_message or "")
    assert len(result.attempts) == 1 and not result.attempts[0].ambiguous
    assert not result.possible_duplicate
    assert (await small.wait()).ok
    assert [r.data for r in fake.records("s")] == [b"small"]


def _refusing(status: int, body: bytes, times: int, seen: list[int]) -> Any:
    """A hook answering the first ``times`` PutRecords as something in front of the endpoint
    would: ``status`` with ``body`` and no service error shape (``seen`` counts them)."""

    async def hook(operation: str, _body: dict[str, Any]) -> httpx.Response | None:
        if operation != "PutRecords" or len(seen) >= times:
            return None
        seen.append(status)
        return httpx.Response(status, content=body, headers={"Content-Type": "text/html"})

    return hook


_PAGE = (
    b"<html><head><title>400 Bad Request</title></head>"
    b"<body>Request Header Or Cookie Too Large</body></html>"
)


@pytest.mark.parametrize(("status", "body"), [(400, _PAGE), (403, b""), (404, b"not here")])
async def test_a_4xx_not_of_the_service_fails_its_records_at_once(status: int, body: bytes) -> None:
    """Issue 62: a proxy's or load balancer's 4xx (no ``__type``) was retried as ambiguous
    until ``record_ttl`` (22-24 attempts in 2.8 s with ``record_ttl=3``). Nothing was
    processed and the same request would be refused again: its records fail on the first
    attempt, definitely, quoting the status and the body's first bytes."""
    seen: list[int] = []
    fake = FakeKinesis(hook=_refusing(status, body, 10**9, seen))
    fake.create_stream("s", 1)
    async with fake_producer(fake, record_ttl=30.0) as producer:
        outcomes = [await producer.put(b"r%d" % i, f"k{i}") for i in range(3)]
        await producer.flush()
    results = [await o.wait() for o in outcomes]
    assert len(seen) == 1  # one request, refused once, not sent again
    for result in results:
        assert not result.ok and result.error_code == str(status)
        assert len(result.attempts) == 1 and not result.attempts[0].ambiguous
        assert not result.possible_duplicate
        message = result.error_message or ""
        assert f"HTTP {status}" in message and "nothing was written" in message
        if body:
            assert body[:20].decode() in message
    assert fake.records("s") == []


@pytest.mark.parametrize("status", [408, 429])
async def test_a_408_or_429_not_of_the_service_is_still_retried(status: int) -> None:
    """408 (the request came too slowly) and 429 (too many requests) say nothing was wrong
    with the request: retried (as ambiguous: who answered may have passed it on)."""
    seen: list[int] = []
    fake = FakeKinesis(hook=_refusing(status, b"", 2, seen))
    fake.create_stream("s", 1)
    async with fake_producer(fake, record_ttl=30.0) as producer:
        outcome = await producer.put(b"r", "k")
        await producer.flush()
    result = await outcome.wait()
    assert result.ok and seen == [status, status]
    assert [a.error_code for a in result.attempts[:2]] == [str(status)] * 2
    assert [r.data for r in fake.records("s")] == [b"r"]


MIB = 1024 * 1024


async def test_a_large_record_on_a_slow_endpoint_is_written_once() -> None:
    """Issue 50: a 9.9 MiB record on an endpoint that takes tens of seconds to store it
    (kinesis-local on a 2-core machine) timed out twice at 12 s and expired as a possible
    duplicate, though it had landed. Its deadline now grows with its size: it is written on
    the first attempt, once."""
    timeout = 6.0
    storing = 30.0  # the endpoint's time for the request: > 2 timeouts
    body = 10 * MIB * 4 // 3
    fake = FakeKinesis(server=ServerModel(per_request=0.0, per_byte=storing / body))
    fake.create_stream("s", 1, max_record_size_kib=10240)
    async with fake_producer(
        fake, request_timeout=timeout, connect_timeout=timeout, record_ttl=60.0
    ) as producer:
        outcome = await producer.put(b"r" * int(9.9 * MIB), "big")
        result = await outcome.wait()
    assert result.ok, result.attempts
    assert len(result.attempts) == 1 and not result.possible_duplicate
    assert len(fake.records("s")) == 1
    assert result.attempts[0].duration > 2 * timeout  # past the old fixed deadline


async def test_a_request_still_going_up_a_slow_link_is_not_a_black_hole() -> None:
    """Issue 50: behind a slow uplink a request of several MiB needs longer than one fixed
    deadline (12 s) to go up, and each retry sent it all again. While its bytes move it is
    not given up: four 1 MB records, 5.3 MB of body at 400 kB/s (13 s), each written on the
    first attempt."""
    timeout = 6.0
    rate = 400_000  # the body takes 13 s
    fake = FakeKinesis(upload_rate=rate)
    fake.create_stream("s", 8)
    step = 2**128 // 8
    async with fake_producer(
        fake,
        aggregation_enabled=False,
        request_timeout=timeout,
        connect_timeout=timeout,
        record_ttl=60.0,
    ) as producer:
        outcomes = [
            await producer.put(bytes([65 + i]) * 1_000_000, "k", str(i * step + 1))
            for i in range(4)
        ]
        results = [await o.wait() for o in outcomes]
    assert all(r.ok for r in results), [r.attempts for r in results]
    assert all(len(r.attempts) == 1 for r in results)
    assert len(fake.records("s")) == 4
    assert max(r.attempts[0].duration for r in results) > 2 * timeout


async def test_requests_up_a_slow_link_shrink_to_what_it_carries() -> None:
    """Issue 50, item 6: behind a 400 kB/s uplink, a burst sent in full 5 MiB requests
    needed 17 s per request (the default deadline was 12 s), each sent again and again.
    Once an answer shows that a size takes longer than half the timeout, requests are made
    of what the link carries in that time (3 s, 1.2 MB), each completes well within its
    deadline, and every record is written once, on its first attempt."""
    timeout = 6.0
    rate = 400_000 * 6.0 / timeout
    sizes: list[int] = []

    async def hook(operation: str, body: dict[str, Any]) -> httpx.Response | None:
        if operation == "PutRecords":
            sizes.append(sum(len(r["Data"]) for r in body["Records"]))
        return None

    fake = FakeKinesis(hook=hook, upload_rate=rate)
    fake.create_stream("s", 4)
    async with fake_producer(
        fake, request_timeout=timeout, connect_timeout=timeout, record_ttl=300.0
    ) as producer:
        outcomes = [await producer.put(b"%05d" % i * 2000, f"k{i}") for i in range(1200)]
        results = [await o.wait() for o in outcomes]
    assert all(r.ok for r in results)
    assert not any(a.error_code for r in results for a in r.attempts)
    # one request may be larger (full, before any answer showed what the link carries);
    # every one after it is what the link carries in half the timeout
    over = [i for i, size in enumerate(sizes) if size > rate * timeout / 2]
    assert len(over) <= 1, sizes
    durations = sorted({r.attempts[0].duration for r in results})
    assert durations[-2] <= timeout  # all but the first request: well within it


async def _endless(piece: bytes, every: float) -> AsyncIterator[bytes]:
    """An answer's body that never ends: ``piece`` every ``every`` seconds."""
    while True:
        yield piece
        await anyio.sleep(every)


async def test_an_answer_that_never_ends_is_given_up_past_what_it_can_hold() -> None:
    """Issue 62: a well-formed head, then 16 KiB of spaces every 10 ms for ever. The bytes
    kept the request alive (each moved its deadline), so its records waited for
    ``record_ttl``. A PutRecords answer holds at most its entries' results
    (``_core._deadline.answer_limit``): past that the request is a black hole, given up
    (ambiguous: its upload was done) and sent again."""
    answered: list[float] = []

    async def hook(operation: str, body: dict[str, Any]) -> httpx.Response | None:
        if operation != "PutRecords" or answered:
            return None
        answered.append(anyio.current_time())
        return httpx.Response(200, content=_endless(b" " * 16384, 0.010))

    fake = FakeKinesis(hook=hook)
    fake.create_stream("s", 1)
    async with fake_producer(fake, record_ttl=60.0, aggregation_enabled=False) as producer:
        outcomes = [await producer.put(b"r%d" % i, f"k{i}") for i in range(3)]
        await producer.flush()
    results = [await o.wait() for o in outcomes]
    assert all(r.ok for r in results), [r.error_code for r in results]
    first = results[0].attempts[0]
    assert not first.success and first.ambiguous and results[0].possible_duplicate
    assert "more than its operation can answer" in (first.error_message or "")
    # 3 entries: at most 70 KiB, so five pieces; not record_ttl, not the 12 s bound
    assert first.duration < 1.0
    assert sorted(r.data for r in fake.records("s")) == [b"r0", b"r1", b"r2"]
