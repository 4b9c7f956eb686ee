"""Shared helpers for tests: a Producer pointed at the in-memory fake, read-back checks, and
waiting for a condition (:func:`wait_until`, :func:`wait_until_async`)."""

from __future__ import annotations

import random
import time
from collections import Counter
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx

from kinesis_trio import (
    KinesisClient,
    Outcome,
    Producer,
    ProducerConfig,
    StaticCredentials,
    deaggregate,
)
from kinesis_trio._core._aggregation import partition_hash_key
from kinesis_trio._core._pipeline_data import StreamState
from kinesis_trio.testing import FakeKinesis

CREDS = StaticCredentials("AKIDTEST", "secret-test-key")


@asynccontextmanager
async def connect(fake: FakeKinesis) -> AsyncIterator[KinesisClient]:
    """A KinesisClient on the fake's transport."""
    async with KinesisClient(
        region_name="us-east-1",
        endpoint_url="http://fake.local",
        credentials=StaticCredentials("k", "s"),
        transport=fake.transport(),
    ) as client:
        yield client


def entry(data: bytes, pk: str | None = "k", ehk: int | str | None = None) -> dict[str, Any]:
    """A PutRecords entry (``Data`` raw bytes; keys left out when None)."""
    out: dict[str, Any] = {"Data": data}
    if pk is not None:
        out["PartitionKey"] = pk
    if ehk is not None:
        out["ExplicitHashKey"] = str(ehk)
    return out


def fake_producer(fake: FakeKinesis, stream: str | None = "s", **config: Any) -> Producer:
    return Producer(
        stream,
        region_name="us-east-1",
        endpoint_url="http://fake.local",
        credentials=CREDS,
        config=ProducerConfig(**config),
        transport=fake.transport(),
    )


def throttle_response(
    body: dict[str, Any], code: str = "ProvisionedThroughputExceededException"
) -> httpx.Response:
    """A 200 PutRecords answer failing every entry with ``code``."""
    n = len(body["Records"])
    return httpx.Response(
        200,
        json={
            "FailedRecordCount": n,
            "Records": [{"ErrorCode": code, "ErrorMessage": f"{code} (injected)"}] * n,
        },
    )


def error_response(status: int, code: str) -> httpx.Response:
    return httpx.Response(status, json={"__type": code, "message": f"{code} (injected)"})


def check_landed(
    stored: Iterable[tuple[str, int, int, bytes, str | None, str | None, str]],
    sent: Sequence[tuple[bytes, str, str | None, Outcome]],
) -> int:
    """Every sent record is stored exactly once, where its outcome says, inside its shard.

    ``stored`` yields (shard_id, shard_start, shard_end, data, partition_key,
    explicit_hash_key, sequence_number) for each Kinesis record read back. GetRecords does
    not return a plain record's ExplicitHashKey, so its range is checked with the one sent.
    The one exception is Kinesis's at-least-once rule: a record whose outcome says
    ``possible_duplicate`` (an attempt timed out or lost its connection after sending) may
    also have landed where no outcome names it. Returns how many such extra copies landed.
    """
    expected: dict[tuple[str, str, int | None], tuple[bytes, str, str | None]] = {}
    maybe_twice: Counter[tuple[bytes, str]] = Counter()
    for data, pk, ehk, outcome in sent:
        result = outcome.result()
        assert result.ok, result
        assert result.shard_id is not None and result.sequence_number is not None
        where = (result.shard_id, result.sequence_number, result.sub_sequence_number)
        assert where not in expected, f"two outcomes name the same place {where}"
        expected[where] = (data, pk, ehk)
        if result.possible_duplicate:
            maybe_twice[data, pk] += sum(a.ambiguous for a in result.attempts)
    landed: Counter[tuple[str, str, int | None]] = Counter()
    extra = 0
    for shard_id, start, end, data, stored_pk, ehk, seq in stored:
        for user in deaggregate(data, stored_pk, explicit_hash_key=ehk, sequence_number=seq):
            where = (shard_id, seq, user.sub_sequence_number if user.aggregated else None)
            if where not in expected and maybe_twice[user.data, user.partition_key] > 0:
                # an ambiguous attempt's copy: the retry's copy is the one its outcome names
                maybe_twice[user.data, user.partition_key] -= 1
                extra += 1
                continue
            landed[where] += 1
            assert where in expected, (
                f"a record no outcome names landed at {where} "
                f"({sum(maybe_twice.values())} ambiguous attempts left unmatched)"
            )
            sent_data, sent_pk, sent_ehk = expected[where]
            assert (user.data, user.partition_key) == (sent_data, sent_pk), where
            if user.aggregated:
                assert user.explicit_hash_key == sent_ehk, where
            hk = partition_hash_key(sent_pk, sent_ehk)
            assert start <= hk <= end, f"record at {where} lies outside its shard's range"
    duplicates = {w: n for w, n in landed.items() if n > 1}
    assert not duplicates, f"duplicated: {list(duplicates)[:5]}"
    missing = set(expected) - set(landed)
    assert not missing, f"{len(missing)} confirmed records not in the stream: {list(missing)[:5]}"
    return extra


def check_landed_kcl(
    stored: Iterable[tuple[str, int, int, bytes, str | None, str | None, str]],
    sent: Sequence[tuple[bytes, str, str | None, Outcome]],
) -> dict[str, int]:
    """Like :func:`check_landed`, for runs with resharding and ambiguous failures.

    Reads the stream as the KCL does (``AggregatorUtil.deaggregate``): when any sub-record
    of an aggregate hashes outside the range of the shard holding it, the *whole* aggregate
    is dropped. Its records are counted as ``strays``; each must belong to a record whose
    history says it was written outside its shard and sent again, or that had an ambiguous
    attempt. Every ok outcome names a place where a KCL reader sees its record; every
    record whose outcome is not ok is not seen (unless an attempt was ambiguous); a record
    seen twice had an ambiguous attempt. Records need unique ``data``.
    """
    by_data = {data: (pk, ehk, outcome) for data, pk, ehk, outcome in sent}
    assert len(by_data) == len(sent), "records need unique data for this check"
    visible: dict[tuple[str, str, int | None], bytes] = {}
    found: Counter[bytes] = Counter()
    strays = 0
    for shard_id, start, end, data, pk, ehk, seq in stored:
        users = deaggregate(data, pk, explicit_hash_key=ehk, sequence_number=seq)
        inside = []
        for user in users:
            assert user.data in by_data, "a record nobody sent is in the stream"
            sent_pk, sent_ehk, _outcome = by_data[user.data]
            assert user.partition_key == sent_pk
            inside.append(start <= partition_hash_key(sent_pk, sent_ehk) <= end)
        if not all(inside):
            # The KCL drops the whole record. The producer must have known and sent every
            # member again, or the write's answer was lost (an ambiguous attempt).
            for user in users:
                strays += 1
                attempts = by_data[user.data][2].result().attempts
                codes = [a.error_code for a in attempts]
                assert "WrittenOutsideShardRange" in codes or any(a.ambiguous for a in attempts), (
                    codes
                )
            continue
        for user in users:
            found[user.data] += 1
            where = (shard_id, seq, user.sub_sequence_number if user.aggregated else None)
            visible[where] = user.data
    for data, _pk, _ehk, outcome in sent:
        result = outcome.result()
        if result.ok:
            assert result.shard_id is not None and result.sequence_number is not None
            where = (result.shard_id, result.sequence_number, result.sub_sequence_number)
            assert visible.get(where) == data, (
                f"confirmed record not seen by a KCL reader there: {result}"
            )
            if found[data] > 1:
                assert any(a.ambiguous for a in result.attempts), result
        else:
            assert found[data] == 0 or any(a.ambiguous for a in result.attempts), result
    return {
        "records": len(sent),
        "ok": sum(1 for *_, o in sent if o.result().ok),
        "strays": strays,
        "duplicates": sum(n - 1 for n in found.values() if n > 1),
    }


async def read_stream(client: Any, name: str) -> list[tuple[Any, ...]]:
    """Every record of every shard (closed ones too), as rows for the ``check_*`` helpers.

    GetRecords does not return ExplicitHashKey: rows carry ``None`` there.
    """
    shards = {s["ShardId"]: s for s in await client.list_shards(name, at_latest=False)}
    rows = []
    for shard_id, records in (await client.read_all(name)).items():
        rng = shards[shard_id]["HashKeyRange"]
        for r in records:
            rows.append(
                (
                    shard_id,
                    int(rng["StartingHashKey"]),
                    int(rng["EndingHashKey"]),
                    r["Data"],
                    r["PartitionKey"],
                    r.get("ExplicitHashKey"),
                    r["SequenceNumber"],
                )
            )
    return rows


def fake_rows(fake: FakeKinesis, stream: str = "s") -> list[tuple[Any, ...]]:
    """Every record the fake stored (closed shards too), as rows for the ``check_*`` helpers."""
    return [
        (
            s.shard_id,
            s.start,
            s.end,
            r.data,
            r.partition_key,
            r.explicit_hash_key,
            r.sequence_number,
        )
        for s in fake.streams[stream].shards
        for r in s.records
    ]


def user_data(fake: FakeKinesis, stream: str = "s") -> list[bytes]:
    """The user records the fake stored (KPL aggregates taken apart), sorted."""
    return sorted(
        u.data for r in fake.records(stream) for u in deaggregate(r.data, r.partition_key or "")
    )


def stream_state(producer: Producer, name: str) -> StreamState:
    """The engine's state of a loaded stream (its shard map and buffers): the one place
    where tests look inside a running producer, for what no public call shows."""
    engine = producer._engine
    assert engine is not None, "the producer is not open"
    return engine._streams[name]


def records(n: int, seed: int) -> list[tuple[bytes, str]]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        size = rng.choice([8, 60, 200, 200, 200, 900, 3000])
        head = b"%d:" % i
        out.append((head + rng.randbytes(max(0, size - len(head))), f"key-{rng.randrange(2000)}"))
    return out


def wait_until(
    predicate: Callable[[], object], *, timeout: float = 10.0, what: str, interval: float = 0.005
) -> None:
    """Poll ``predicate`` (state another thread or process changes) every ``interval`` real
    seconds until it is true; fail naming ``what`` after ``timeout`` real seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


async def wait_until_async(
    predicate: Callable[[], object],
    *,
    timeout: float = 10.0,  # noqa: ASYNC109 -- a bound on polling, as wait_until's
    what: str,
    interval: float = 0.001,
) -> None:
    """Poll ``predicate`` (state background tasks or a socket change: nothing to wait on but
    time) every ``interval`` seconds of the event loop's clock (virtual under trio's
    ``MockClock``) until it is true; fail naming ``what`` after ``timeout`` of them."""
    with anyio.move_on_after(timeout):
        while not predicate():  # noqa: ASYNC110 -- polling state nothing signals
            await anyio.sleep(interval)
        return
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")
