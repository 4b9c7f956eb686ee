"""Recovery on its own: what a dead producer left in its spool is sent (or failed) by the
next one without a ``put`` or a ``flush`` to wake the pipeline, a network error while
recovery loads a stream is waited out, not fatal to the producer, and a close while it
loads one ends it cleanly."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest

from kinesis_trio import (
    FailedRecord,
    Producer,
    ProducerConfig,
    RecoveryReport,
    StaticCredentials,
)
from kinesis_trio._core._spool import RECOVERED, Row
from kinesis_trio.testing import FakeKinesis
from tests.support.helpers import fake_producer, fake_rows
from tests.support.spool import data_on_disk, left_behind

# Real time on both backends: the spool's reads and commits run in worker threads, and trio's
# MockClock jumps ahead while a task waits on a thread (autojump), expiring deadlines and
# timeouts that real time would not reach.
pytestmark = pytest.mark.anyio


async def test_recovered_records_are_sent_and_failed_without_a_put(tmp_path: Path) -> None:
    rows = [Row(i, "s", f"k{i % 3}", None, b"rec-%d" % i) for i in range(1, 11)]
    rows += [Row(11, "gone", "k", None, b"to-a-deleted-stream")]
    left_behind(tmp_path, rows)
    fake = FakeKinesis()
    fake.create_stream("s", 2)
    failed: list[FailedRecord] = []
    async with fake_producer(fake, spool_dir=tmp_path, aggregation_enabled=False) as producer:
        with anyio.fail_after(60):  # a hang guard (a busy machine is slow, not hung)
            report = await producer.recovered()
            async for record in producer.failures():
                failed.append(record)
                break
    assert report == RecoveryReport(records=11, ok=10, failed=1, damaged=0, done=True)
    assert sorted(r[3] for r in fake_rows(fake)) == sorted(row.data for row in rows[:10])
    (record,) = failed
    assert record.data == b"to-a-deleted-stream"
    assert record.result.error_code == "ResourceNotFoundException"
    assert record.result.attempts[0].error_code == RECOVERED
    assert record.result.possible_duplicate


class RefusesLoads(httpx.AsyncBaseTransport):
    """The fake's transport, refusing the connection for the first ``n`` loads of one stream."""

    def __init__(self, inner: httpx.AsyncBaseTransport, stream: str, n: int) -> None:
        self.inner, self.stream, self.left = inner, stream, n

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        target = request.headers.get("x-amz-target", "")
        loading = target.endswith("DescribeStreamSummary")
        if loading and self.left and f'"{self.stream}"'.encode() in request.content:
            self.left -= 1
            raise httpx.ConnectError("connection refused (test)")
        return await self.inner.handle_async_request(request)


async def test_a_network_error_loading_a_recovered_records_stream_is_waited_out(
    tmp_path: Path,
) -> None:
    left_behind(tmp_path, [Row(1, "other", "k", None, b"for-the-other-stream")])
    fake = FakeKinesis()
    fake.create_stream("s", 1)
    fake.create_stream("other", 1)
    transport = RefusesLoads(fake.transport(), "other", 1)
    producer = Producer(
        "s",
        region_name="us-east-1",
        endpoint_url="http://fake.local",
        credentials=StaticCredentials("a", "b"),
        config=ProducerConfig(spool_dir=tmp_path, aggregation_enabled=False),
        transport=transport,
    )
    async with producer:
        with anyio.fail_after(60):  # a hang guard (a busy machine is slow, not hung)
            report = await producer.recovered()
        new = await producer.put(b"new", "k")
    assert transport.left == 0
    assert report == RecoveryReport(records=1, ok=1, failed=0, damaged=0, done=True)
    assert new.result().ok
    assert [r[3] for r in fake_rows(fake, "other")] == [b"for-the-other-stream"]


# -- a close during recovery ---------------------------------------------------------------------


class HeldLoad:
    """A fake hook holding the load of one stream (its DescribeStreamSummary) until
    ``release``, and every PutRecords until ``send``."""

    def __init__(self, stream: str) -> None:
        self.stream = stream
        self.loading = anyio.Event()
        self.release = anyio.Event()
        self.send = anyio.Event()

    async def __call__(self, operation: str, body: dict[str, Any]) -> httpx.Response | None:
        if operation == "DescribeStreamSummary" and body.get("StreamName") == self.stream:
            self.loading.set()
            await self.release.wait()
        if operation == "PutRecords":
            await self.send.wait()
        return None


async def test_a_clean_exit_while_recovery_loads_a_stream_is_a_clean_close(tmp_path: Path) -> None:
    """Before, the load ending after the exit began raised ``ProducerClosedError`` in the
    recovery task: it left ``async with``, and made the close an abort (the records in
    flight kept, to be sent again by the next producer: two copies)."""
    spool = tmp_path / "spool"
    left_behind(
        spool,
        [
            Row(1, "s", "k", None, b"r1"),
            Row(2, "s", "k", None, b"r2"),
            Row(3, "other", "k", None, b"r3"),  # its stream is loaded as recovery reaches it
        ],
    )
    hook = HeldLoad("other")
    fake = FakeKinesis(hook)
    fake.create_stream("s", 1)
    fake.create_stream("other", 1)

    async def release() -> None:  # runs once the exit is under way: the producer is closing
        hook.release.set()
        await anyio.sleep(0.1)
        hook.send.set()

    producer = fake_producer(fake, spool_dir=spool, aggregation_enabled=False, close_timeout=30)
    with anyio.fail_after(60):  # a hang guard (a busy machine is slow, not hung)
        async with anyio.create_task_group() as tg, producer:
            await hook.loading.wait()
            tg.start_soon(release)
    assert [r[3] for r in fake_rows(fake)] == [b"r1", b"r2"]  # written once
    assert fake_rows(fake, "other") == []
    assert data_on_disk(spool) == [b"r3"]  # never accepted: the next producer sends it
    assert not producer.recovery.done
    assert [f async for f in producer.failures()] == []


async def test_per_key_a_recovered_record_refused_fails_its_keys_later_recovered_ones(
    tmp_path: Path,
) -> None:
    """Before, under ``ordering="per_key"`` a recovered record refused at recovery (over
    the new producer's record limit) left a gap: the key's later recovered records were
    written after it had failed."""
    left_behind(
        tmp_path,
        [
            Row(1, "s", "k", None, b"A" * 2000),  # over max_record_size now: refused
            Row(2, "s", "k", None, b"B"),
            Row(3, "s", "j", None, b"J"),  # another key: not concerned
            Row(4, "s", "k", None, b"C"),
        ],
    )
    fake = FakeKinesis()
    fake.create_stream("s", 1)
    producer = fake_producer(
        fake,
        spool_dir=tmp_path,
        ordering="per_key",
        max_record_size=1000,
        aggregation_enabled=False,
    )
    async with producer:
        with anyio.fail_after(60):  # a hang guard (a busy machine is slow, not hung)
            report = await producer.recovered()
            later = await producer.put(b"D", "k")  # a new record of the key goes as usual
            assert (await later.wait()).ok
    failed = [f async for f in producer.failures()]
    assert report == RecoveryReport(records=4, ok=1, failed=3, damaged=0, done=True)
    assert [r[3] for r in fake_rows(fake)] == [b"J", b"D"]
    assert [(f.data[:1], f.result.error_code) for f in failed] == [
        (b"A", "RecoveryRefused"),
        (b"B", "PrecedingRecordFailed"),
        (b"C", "PrecedingRecordFailed"),
    ]
    for record in failed[1:]:
        message = record.result.error_message or ""
        assert "RecoveryRefused" in message and "'k'" in message, message
        assert record.result.attempts[0].error_code == RECOVERED
    # failed for good, taken after the close: dead letters the next producer hands over again
    assert [d[:1] for d in data_on_disk(tmp_path)] == [b"A", b"B", b"C"]
