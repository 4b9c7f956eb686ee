"""Truthful outcomes at the edges (issue 9): what a KCL consumer sees, bad input, bad answers.

Each test here failed on the code before the fix it names.
"""

from __future__ import annotations

import base64
from collections.abc import Sequence
from typing import Any

import anyio
import httpx
import pytest

from kinesis_trio import (
    Outcome,
    Producer,
    ProducerClosedError,
    ProducerConfig,
    StaticCredentials,
    deaggregate,
)
from kinesis_trio.metrics import MetricDatum
from kinesis_trio.testing import FakeKinesis
from tests.support.helpers import (
    CREDS,
    check_landed_kcl,
    error_response,
    fake_producer,
    fake_rows,
    stream_state,
    throttle_response,
)

pytestmark = [pytest.mark.anyio, pytest.mark.virtual_time]


def spread_keys(n: int) -> list[str]:
    """Keys whose hash keys fall in both halves of the hash key space."""
    return [f"key-{i}" for i in range(n)]


def owners(fake: FakeKinesis, stream: str, entry: dict[str, Any]) -> set[str]:
    users = deaggregate(
        base64.b64decode(entry["Data"]),
        entry["PartitionKey"],
        explicit_hash_key=entry.get("ExplicitHashKey"),
    )
    return {
        next(s.shard_id for s in fake.open_shards(stream) if s.start <= u.hash_key <= s.end)
        for u in users
    }


# -- 1. the KCL's rule ------------------------------------------------------------------------


async def test_an_aggregate_that_straddles_new_shards_is_resent_whole() -> None:
    """The KCL drops the whole aggregate: no member may be reported ok for that write."""
    fake = FakeKinesis()
    fake.create_stream("s", 1)
    sent: list[tuple[bytes, str, str | None, Outcome]] = []
    async with fake_producer(fake, record_max_buffered_time=0.05) as producer:
        for i, key in enumerate(spread_keys(40)):
            data = b"r%d" % i
            sent.append((data, key, None, await producer.put(data, key)))
        only = fake.open_shards("s")[0]
        fake.split_shard("s", only.shard_id, 2**127)  # before the aggregate goes out
        await producer.flush()
    summary = check_landed_kcl(fake_rows(fake), sent)
    assert summary["ok"] == 40
    # the first write held all 40 in one aggregate, in a child holding only some of them
    assert summary["strays"] == 40
    for *_, outcome in sent:
        codes = [a.error_code for a in outcome.result().attempts]
        assert codes[0] == "WrittenOutsideShardRange", codes


async def test_aggregates_queued_for_a_retired_shard_are_rebuilt_before_sending() -> None:
    """Aggregates waiting for a connection when a refresh retires their shard are placed
    anew (per new shard), not sent across the new shards."""
    go = anyio.Event()
    calls = 0
    straddling_later = 0
    box: list[Any] = []

    async def hook(operation: str, body: dict[str, Any]) -> httpx.Response | None:
        nonlocal calls, straddling_later
        if operation != "PutRecords":
            return None
        calls += 1
        if calls == 1:
            # the first request is out; the reshard happens now, and the producer learns
            # of it by its periodic refresh while this request is held
            only = fake.open_shards("s")[0]
            fake.split_shard("s", only.shard_id, 2**127)
            await go.wait()
            with anyio.fail_after(30):
                while len(stream_state(box[0], "s").map) != 2:  # noqa: ASYNC110 (a test's probe)
                    await anyio.sleep(0.01)
        else:
            straddling_later += sum(
                1 for entry in body["Records"] if len(owners(fake, "s", entry)) > 1
            )
        return None

    fake = FakeKinesis(hook=hook)
    fake.create_stream("s", 1)
    sent: list[tuple[bytes, str, str | None, Outcome]] = []
    keys = spread_keys(200)
    async with fake_producer(
        fake,
        record_max_buffered_time=0.02,
        max_connections=1,
        shard_map_refresh_interval=0.5,
    ) as producer:
        box.append(producer)
        for i in range(20):
            sent.append((b"a%d" % i, keys[i], None, await producer.put(b"a%d" % i, keys[i])))
        await anyio.sleep(0.1)  # the first request goes out (and is held)
        for i in range(20, 200):
            sent.append((b"b%d" % i, keys[i], None, await producer.put(b"b%d" % i, keys[i])))
        await anyio.sleep(0.1)  # sealed, forwarded, waiting for the connection
        go.set()
        await producer.flush()
    summary = check_landed_kcl(fake_rows(fake), sent)
    assert summary["ok"] == 200
    assert straddling_later == 0
    resent = {
        data
        for data, *_, o in sent
        if any(a.error_code == "WrittenOutsideShardRange" for a in o.result().attempts)
    }
    assert resent == {b"a%d" % i for i in range(20)}  # only the request already out


# -- 2. bad input fails alone, at once ----------------------------------------------------


async def test_bad_input_raises_at_once_and_loses_nothing_accepted() -> None:
    fake = FakeKinesis()
    fake.create_stream("s", 2)
    fake.create_stream("other", 1)
    async with fake_producer(fake) as producer:
        good = [await producer.put(b"good%d" % i, f"k{i}") for i in range(10)]
        with pytest.raises(ValueError, match="decimal integer"):
            await producer.put(b"x", "k", explicit_hash_key="1\u0662")
        with pytest.raises(ValueError, match="UTF-16"):
            await producer.put(b"x", "\U0001f600" * 129)  # 258 UTF-16 units
        with pytest.raises(ValueError, match="stream_name"):
            await producer.put(b"x", "k", stream_name="")
        with pytest.raises(TypeError, match="stream_name"):
            await producer.put(b"x", "k", stream_name=5)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="stream_name"):
            producer.put_nowait(b"x", "k", stream_name="")

        class Blob(bytes):
            pass

        sub = await producer.put(Blob(b"subclass"), "k")
        longest = await producer.put(b"emoji", "\U0001f600" * 128)  # 256 UTF-16 units
        elsewhere = await producer.put(b"other", "k", stream_name="other")
        await producer.flush()
    assert all(o.result().ok for o in [*good, sub, longest, elsewhere])
    stored = {r.data: r.partition_key for r in fake.records("s")}
    for i in range(10):
        assert b"good%d" % i in stored or any(
            u.data == b"good%d" % i for d in stored for u in deaggregate(d, "a")
        )
    assert elsewhere.result().shard_id in {s.shard_id for s in fake.open_shards("other")}


async def test_a_request_rejected_for_one_named_entry_fails_that_entry_alone() -> None:
    answered = 0

    async def hook(operation: str, body: dict[str, Any]) -> httpx.Response | None:
        nonlocal answered
        if operation == "PutRecords" and answered == 0:
            answered += 1
            assert len(body["Records"]) == 5
            return httpx.Response(
                400,
                json={
                    "__type": "ValidationException",
                    "message": "1 validation error detected: Value at "
                    "'records.2.member.partitionKey' failed to satisfy constraint: "
                    "Member must have length less than or equal to 256",
                },
            )
        return None

    fake = FakeKinesis(hook=hook)
    fake.create_stream("s", 1)
    async with fake_producer(
        fake, aggregation_enabled=False, record_max_buffered_time=0.05
    ) as producer:
        outcomes = [await producer.put(b"r%d" % i, f"k{i}") for i in range(5)]
        results = [await o.wait() for o in outcomes]
    assert [r.ok for r in results] == [True, False, True, True, True]
    assert results[1].error_code == "ValidationException"
    assert "records.2.member" in (results[1].error_message or "")
    for r in (results[0], *results[2:]):
        assert [a.error_code for a in r.attempts] == ["ValidationException", None]
    assert len(fake.records("s")) == 4


async def test_a_request_rejected_without_naming_the_entry_is_split_to_find_it() -> None:
    """kinesis-local names no entry: the request is sent again in halves."""
    requests: list[int] = []

    async def hook(operation: str, body: dict[str, Any]) -> httpx.Response | None:
        if operation != "PutRecords":
            return None
        requests.append(len(body["Records"]))
        if any(base64.b64decode(e["Data"]) == b"bad" for e in body["Records"]):
            return error_response(400, "InvalidArgumentException")
        return None

    fake = FakeKinesis(hook=hook)
    fake.create_stream("s", 1)
    async with fake_producer(
        fake, aggregation_enabled=False, record_max_buffered_time=0.05
    ) as producer:
        datas = [b"r0", b"r1", b"r2", b"bad", b"r4", b"r5", b"r6"]
        outcomes = [await producer.put(d, "k") for d in datas]
        results = [await o.wait() for o in outcomes]
    assert [r.ok for r in results] == [d != b"bad" for d in datas]
    assert results[3].error_code == "InvalidArgumentException"
    assert requests[0] == 7 and len(requests) <= 1 + 2 * 3  # halves, then quarters, ...
    assert sorted(r.data for r in fake.records("s")) == sorted(d for d in datas if d != b"bad")


# -- 3. a small rate_limit ---------------------------------------------------------------


@pytest.mark.parametrize(("rate_limit", "records"), [(1.0, 10), (0.05, 3)])
async def test_a_small_rate_limit_shard_sends_again_after_throttling_ends(
    rate_limit: float, records: int
) -> None:
    """Halvings leave the records bucket under one token: it must still send, and recover."""
    throttled = 0

    async def hook(operation: str, body: dict[str, Any]) -> httpx.Response | None:
        nonlocal throttled
        if operation == "PutRecords" and throttled < 6:
            # one request at a time, answered 0.25 s apart: each throttle halves the rate
            throttled += 1
            await anyio.sleep(0.25)
            return throttle_response(body)
        return None

    fake = FakeKinesis(hook=hook)
    fake.create_stream("s", 1)
    async with fake_producer(
        fake,
        rate_limit=rate_limit,
        aggregation_enabled=False,
        max_connections=1,
        record_ttl=10.0,
    ) as producer:
        start = anyio.current_time()
        early = []
        for i in range(records):
            early.append(await producer.put(b"early%d" % i, f"k{i}"))
            await anyio.sleep(0.1)
        await anyio.sleep(max(0.0, start + 3.0 - anyio.current_time()))
        late = [await producer.put(b"late%d" % i, f"k{i}") for i in range(records)]
        results = [await o.wait() for o in early + late]
    # 10 records/s halved 4 times or more holds under one token (at 0.05, it always did)
    assert throttled == 6
    assert [r.error_code for r in results if not r.ok] == []


# -- 4. hangs -----------------------------------------------------------------------------


class HangingSink:
    name = "hanging"

    def __init__(self) -> None:
        self.calls = 0

    async def publish(self, data: Sequence[MetricDatum]) -> None:
        self.calls += 1
        await anyio.sleep_forever()


async def test_a_hanging_metrics_sink_delays_an_abort_by_at_most_a_second() -> None:
    fake = FakeKinesis()
    fake.create_stream("s", 1)
    sink = HangingSink()
    producer = Producer(
        "s",
        region_name="us-east-1",
        endpoint_url="http://fake.local",
        credentials=CREDS,
        config=ProducerConfig(metrics_level="summary"),
        transport=fake.transport(),
        metrics_sinks=[sink],
    )

    class Boom(Exception):
        pass

    with pytest.raises(Boom):
        async with producer:
            await producer.put(b"x", "k")
            await producer.flush()
            started = anyio.current_time()
            raise Boom
    assert sink.calls >= 1
    # The sink gets a second (exact: virtual time on both backends).
    assert anyio.current_time() - started <= 1.0 + 1e-6


async def test_a_put_to_a_stream_loading_at_close_raises_producer_closed() -> None:
    listing = anyio.Event()

    async def hook(operation: str, body: dict[str, Any]) -> httpx.Response | None:
        if operation == "ListShards" and body.get("StreamName") == "other":
            listing.set()
            await anyio.sleep(1)
        return None

    fake = FakeKinesis(hook=hook)
    fake.create_stream("s", 1)
    fake.create_stream("other", 1)
    errors: list[BaseException] = []

    async def putter(producer: Any) -> None:
        try:
            await producer.put(b"x", "k", stream_name="other")
        except Exception as exc:
            errors.append(exc)

    with anyio.fail_after(30):
        async with anyio.create_task_group() as tg, fake_producer(fake) as producer:
            tg.start_soon(putter, producer)
            await listing.wait()
    assert len(errors) == 1
    assert isinstance(errors[0], ProducerClosedError), repr(errors[0])


# -- 5. malformed answers -------------------------------------------------------------------

MALFORMED_ENTRIES: list[Any] = [None, "ok", 7, [], {}, {"SequenceNumber": "1"}, {"ShardId": "x"}]


@pytest.mark.parametrize("bad", MALFORMED_ENTRIES, ids=repr)
async def test_malformed_entries_are_retried_as_ambiguous(bad: Any) -> None:
    answered = 0

    async def hook(operation: str, body: dict[str, Any]) -> httpx.Response | None:
        nonlocal answered
        if operation == "PutRecords" and answered == 0:
            answered += 1
            return httpx.Response(200, json={"FailedRecordCount": 0, "Records": [bad]})
        return None

    fake = FakeKinesis(hook=hook)
    fake.create_stream("s", 1)
    async with fake_producer(fake, record_max_buffered_time=0.01) as producer:
        result = await (await producer.put(b"x", "k")).wait()
    assert result.ok
    assert result.possible_duplicate
    assert [a.error_code for a in result.attempts] == ["MalformedResponse", None]


@pytest.mark.parametrize(
    "body", [b"not json", b"[1, 2]", b"null", b'"text"', b"{"], ids=lambda b: b.decode()
)
async def test_a_success_status_with_an_unreadable_body_is_ambiguous(body: bytes) -> None:
    answered = 0

    async def hook(operation: str, request: dict[str, Any]) -> httpx.Response | None:
        nonlocal answered
        if operation == "PutRecords" and answered == 0:
            answered += 1
            return httpx.Response(200, content=body)
        return None

    fake = FakeKinesis(hook=hook)
    fake.create_stream("s", 1)
    async with fake_producer(fake, record_max_buffered_time=0.01) as producer:
        result = await (await producer.put(b"x", "k")).wait()
    assert result.ok
    assert result.possible_duplicate
    assert result.attempts[0].ambiguous


# -- 6. possible duplicates -------------------------------------------------------------------


@pytest.mark.parametrize("how", ["close_timeout", "exception", "cancel"])
async def test_records_in_flight_at_close_are_flagged_possible_duplicates(how: str) -> None:
    out = anyio.Event()

    async def hook(operation: str, body: dict[str, Any]) -> httpx.Response | None:
        if operation == "PutRecords":
            out.set()
            await anyio.sleep_forever()
        return None

    fake = FakeKinesis(hook=hook)
    fake.create_stream("s", 1)
    producer = fake_producer(
        fake,
        aggregation_enabled=False,
        collection_max_count=2,
        max_connections=1,
        record_max_buffered_time=0.01,
        close_timeout=0.5,
    )

    class Boom(Exception):
        pass

    outcomes: list[Outcome] = []
    with anyio.fail_after(60), anyio.CancelScope() as scope:
        try:
            async with producer:
                outcomes += [await producer.put(b"r%d" % i, "k") for i in range(6)]
                await out.wait()
                if how == "exception":
                    raise Boom
                if how == "cancel":
                    scope.cancel()
                    await anyio.sleep(1)
        except Boom:
            pass
    results = [o.result() for o in outcomes]
    assert not any(r.ok for r in results)
    # the first request (two records) was out; the others never left the producer
    assert [r.possible_duplicate for r in results] == [True, True, False, False, False, False]
    assert results[0].attempts[-1].error_code == "RequestInFlight"


async def test_expired_token_with_static_credentials_fails_at_once() -> None:
    async def hook(operation: str, body: dict[str, Any]) -> httpx.Response | None:
        if operation == "PutRecords":
            return error_response(400, "ExpiredTokenException")
        return None

    fake = FakeKinesis(hook=hook)
    fake.create_stream("s", 1)
    producer = fake_producer(fake, record_max_buffered_time=0.01)
    assert isinstance(producer._client_args["credentials"], StaticCredentials)
    async with producer:
        start = anyio.current_time()
        result = await (await producer.put(b"x", "k")).wait()
        elapsed = anyio.current_time() - start
    assert not result.ok
    assert result.error_code == "ExpiredTokenException"
    assert len(result.attempts) == 1
    # at once: no backoff, no retry (a second's backoff would show on the virtual clock)
    assert elapsed < 0.1
