"""The producer's KPL metrics: what a run records, levels, and sinks that fail."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import anyio
import httpx
import pytest

from kinesis_trio.metrics import InMemorySink, MetricDatum
from kinesis_trio.testing import FakeKinesis
from tests.support.helpers import CREDS, throttle_response

pytestmark = pytest.mark.anyio


def producer_with(fake: FakeKinesis, sinks: Sequence[Any] = (), **config: Any) -> Any:
    from kinesis_trio import Producer, ProducerConfig

    return Producer(
        "s",
        region_name="us-east-1",
        endpoint_url="http://fake.local",
        credentials=CREDS,
        config=ProducerConfig(record_max_buffered_time=0.01, **config),
        transport=fake.transport(),
        metrics_sinks=sinks,
    )


async def test_a_run_records_the_kpl_metrics() -> None:
    calls = 0

    async def hook(operation: str, body: dict[str, Any]) -> httpx.Response | None:
        nonlocal calls
        if operation == "PutRecords":
            calls += 1
            if calls == 1:
                return throttle_response(body)
        return None

    fake = FakeKinesis(hook=hook)
    fake.create_stream("s", 2)
    sink = InMemorySink()
    async with producer_with(fake, [sink]) as producer:
        outcomes = [await producer.put(b"x" * 100, f"k{i}") for i in range(300)]
        await producer.flush()
        totals = producer.metrics.totals()
    assert all(o.result().ok for o in outcomes)
    assert totals["UserRecordsReceived"] == 300
    assert totals["UserRecordsPut"] == 300
    assert totals["KinesisRecordsPut"] == len(fake.records("s"))
    assert totals["ErrorsByCode"] >= 1
    assert totals["RetriesPerRecord"] > 0
    # closing flushed the window to the sink, with shard-level dimensions
    published: list[MetricDatum] = [d for window in sink.all() for d in window]
    names = {d.name for d in published}
    assert {"UserRecordsPut", "KinesisRecordsPut", "BufferingTime", "RequestTime"} <= names
    shard_level = [d for d in published if d.name == "UserRecordsPut" and d.dimension("ShardId")]
    assert {d.dimension("ShardId") for d in shard_level} <= {
        s.shard_id for s in fake.open_shards("s")
    }
    assert sum(d.sum for d in shard_level) == 300
    # each record written is one RetriesPerRecord sample: its failed tries before
    retries = [d for d in published if d.name == "RetriesPerRecord" and d.dimensions == ()]
    tries = [len(o.result().attempts) - 1 for o in outcomes]
    assert sum(d.count for d in retries) == 300
    assert sum(d.sum for d in retries) == sum(tries) > 0
    assert min(d.minimum for d in retries) == min(tries)
    assert max(d.maximum for d in retries) == max(tries)
    throttled = [d for d in published if d.name == "ErrorsByCode"]
    assert any(
        d.dimension("ErrorCode") == "ProvisionedThroughputExceededException" for d in throttled
    )


async def test_level_none_records_nothing() -> None:
    fake = FakeKinesis()
    fake.create_stream("s", 1)
    sink = InMemorySink()
    async with producer_with(fake, [sink], metrics_level="none") as producer:
        await (await producer.put(b"x", "k")).wait()
        assert producer.metrics.totals() == {}
    assert sink.all() == []


class BrokenSink:
    async def publish(self, data: Sequence[MetricDatum]) -> None:
        raise RuntimeError("sink down")


class HangingSink:
    async def publish(self, data: Sequence[MetricDatum]) -> None:
        await anyio.sleep_forever()


async def test_failing_sinks_never_block_or_fail_delivery() -> None:
    fake = FakeKinesis()
    fake.create_stream("s", 1)
    good = InMemorySink()
    async with producer_with(
        fake, [BrokenSink(), HangingSink(), good], metrics_upload_delay=0.05
    ) as producer:
        outcomes = [await producer.put(b"x", f"k{i}") for i in range(50)]
        await anyio.sleep(0.2)  # a few windows go to the sinks meanwhile
        results = [await o.wait() for o in outcomes]
    assert all(r.ok for r in results)
    assert producer.metrics.sink_failures >= 1
    assert good.all()  # the healthy sink still got its windows


def test_invalid_metrics_settings_name_the_field() -> None:
    from kinesis_trio import ProducerConfig

    with pytest.raises(ValueError, match="metrics_level"):
        ProducerConfig(metrics_level="verbose")
    with pytest.raises(ValueError, match="metrics_granularity"):
        ProducerConfig(metrics_granularity="partition")
    with pytest.raises(ValueError, match="metrics_upload_delay"):
        ProducerConfig(metrics_upload_delay=0)
