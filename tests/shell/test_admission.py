"""Admission by time through the producer: a slow but working endpoint slows ``put``, and no
record expires in the producer's own queue; with it off, records do (the KPL's behaviour).

On virtual time on both backends (trio's ``MockClock``, an asyncio loop whose clock leaps to
its next timer) with the real ``record_ttl`` (30 s): what it proves does not depend on the
machine's speed, and 40 s of puts take a fraction of a second.
"""

from __future__ import annotations

import anyio
import pytest

from kinesis_trio import Outcome, Producer, ProducerConfig, RecordResult
from kinesis_trio.metrics import InMemorySink
from kinesis_trio.testing import FakeKinesis, ServerModel
from tests.support.helpers import CREDS

pytestmark = [pytest.mark.anyio, pytest.mark.virtual_time]

QUEUE = "waited in the producer's queues"


async def put_all(
    share: float | None, *, shards: int = 2, hot: bool = False
) -> tuple[list[RecordResult], InMemorySink, float]:
    """Records of 1,000 B put as fast as ``put`` takes them, for 40 seconds, to an endpoint
    serving 100 kB/s; with ``hot`` every record goes to one shard."""
    server = ServerModel(1, per_request=0.005, per_byte=1e-5)
    fake = FakeKinesis(server=server)
    fake.create_stream("s", shard_count=shards)
    sink = InMemorySink()
    outcomes: list[Outcome] = []
    waits: list[float] = []
    config = ProducerConfig(
        record_ttl=30.0,
        admission_ttl_share=share,
        max_outstanding_bytes=16 * 1024 * 1024,  # minutes of this endpoint's work
        metrics_upload_delay=1.0,
    )
    async with Producer(
        "s",
        region_name="us-east-1",
        endpoint_url="http://fake.local",
        credentials=CREDS,
        config=config,
        transport=fake.transport(),
        metrics_sinks=[sink],
    ) as producer:
        start = anyio.current_time()
        i = 0
        while anyio.current_time() - start < 40.0:
            before = anyio.current_time()
            outcomes.append(await producer.put(b"%07d:" % i + b"x" * 992, "k" if hot else f"k{i}"))
            waits.append(anyio.current_time() - before)
            i += 1
        results = [await o.wait() for o in outcomes]
    return results, sink, max(waits)


async def test_a_slow_endpoint_slows_put_and_no_record_expires_in_the_queue() -> None:
    results, sink, longest_wait = await put_all(0.5)
    assert all(r.ok for r in results), {r.error_code for r in results if not r.ok}
    assert longest_wait > 1.0  # put waited for the endpoint
    names = {d.name for window in sink.all() for d in window}
    assert {"PutAdmissionWait", "ProjectedDelay", "OldestRecordAge"} <= names
    # the oldest record never got near its TTL
    oldest = max(d.maximum for window in sink.all() for d in window if d.name == "OldestRecordAge")
    assert oldest < 30_000


async def test_without_admission_by_time_records_expire_in_the_queue() -> None:
    results, _, _ = await put_all(None)
    expired = [r for r in results if not r.ok]
    assert expired, "the caps alone took more than the endpoint could write in time"
    assert all(r.error_code == "RecordExpired" for r in expired)
    assert any(QUEUE in (r.error_message or "") for r in expired)


async def test_one_hot_shard_holds_its_own_puts_and_expires_nothing() -> None:
    results, _, _ = await put_all(0.5, shards=4, hot=True)
    assert all(r.ok for r in results), {r.error_code for r in results if not r.ok}
