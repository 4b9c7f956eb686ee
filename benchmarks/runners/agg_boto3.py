"""aws-kinesis-agg ``RecordAggregator`` + boto3 ``put_records``: the fire-and-forget ceiling.

As in aiokpl's benchmark: user records are packed into KPL aggregated records (the
library's default 1 MiB cap) and shipped with ``put_records``, up to 500 aggregated records
per call, fire-and-forget: no per-record outcome, no retry, no shard prediction (every
aggregate is routed by its first record's partition key). The only change from "500 per
call" is that a call also stops at 5 MiB of data + keys: kinesalite rejects bodies over
7 MiB (base64 included) with 413, and so would Kinesis past 5 MiB. ``failed`` counts the
user records inside aggregated records that a response reported as failed (they are lost).

Throughput mode: the clock runs from the first ``add_user_record`` to the last
``put_records`` return. Latency mode (``--rate R``): a single-threaded loop; record *i* is
scheduled at ``t0 + i/R`` and added to the aggregator at (or after) that time; the pending
records are sent when the oldest has waited ``--linger`` seconds (or the aggregator filled
up), and each record's latency is the return time of its ``put_records`` call minus its
scheduled time. While a call blocks, later records wait: that counts.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import boto3
import urllib3
from aws_kinesis_agg.aggregator import RecordAggregator

from benchmarks._emulator import ACCESS_KEY, REGION, SECRET_KEY
from benchmarks._runner import (
    Measurement,
    cpu_seconds,
    latency_timeline,
    sleep_until_next,
    sync_runner_main,
    workload,
)

_MAX_CALL_ENTRIES = 500
_MAX_CALL_BYTES = 5 * 1024 * 1024


class Shipper:
    """Sends aggregated records in ``put_records`` calls (≤500 entries, ≤5 MiB)."""

    def __init__(self, client: Any, stream: str) -> None:
        self.client = client
        self.stream = stream
        self.entries: list[dict[str, Any]] = []
        self.counts: list[int] = []  # user records per entry
        self.bytes = 0
        self.calls = 0
        self.failed = 0
        self.codes: dict[str, int] = {}

    def add(self, agg: Any) -> None:
        pk, ehk, blob = agg.get_contents()
        size = len(blob) + len(pk.encode())
        if self.entries and (
            len(self.entries) >= _MAX_CALL_ENTRIES or self.bytes + size > _MAX_CALL_BYTES
        ):
            self.send()
        entry: dict[str, Any] = {"Data": blob, "PartitionKey": pk}
        if ehk:
            entry["ExplicitHashKey"] = ehk
        self.entries.append(entry)
        self.counts.append(agg.get_num_user_records())
        self.bytes += size

    def send(self) -> None:
        if not self.entries:
            return
        response = self.client.put_records(StreamName=self.stream, Records=self.entries)
        self.calls += 1
        if response.get("FailedRecordCount"):
            for slot, count in zip(response["Records"], self.counts, strict=True):
                if "ErrorCode" in slot:
                    self.failed += count
                    self.codes[slot["ErrorCode"]] = self.codes.get(slot["ErrorCode"], 0) + count
        self.entries = []
        self.counts = []
        self.bytes = 0


def _client(endpoint: str) -> Any:
    # an https endpoint is an emulator's, its self-signed certificate not checked: without
    # this, urllib3 warns on every call
    urllib3.disable_warnings(urllib3.exceptions.InsecureRequestWarning)
    return boto3.client(
        "kinesis",
        endpoint_url=endpoint,
        region_name=REGION,
        aws_access_key_id=ACCESS_KEY,
        aws_secret_access_key=SECRET_KEY,
        verify=False,
    )


def _throughput(args: argparse.Namespace, client: Any) -> Measurement:
    data, keys, n = workload(args)
    nkeys = len(keys)
    # warm-up: one call (connection, botocore's lazy loading)
    client.put_records(StreamName=args.stream, Records=[{"Data": data, "PartitionKey": keys[0]}])
    shipper = Shipper(client, args.stream)
    aggregator = RecordAggregator()
    add = aggregator.add_user_record
    cpu0 = cpu_seconds()
    t0 = time.perf_counter()
    for i in range(n):
        full = add(keys[i % nkeys], data)
        if full is not None:
            shipper.add(full)
    rest = aggregator.clear_and_get()
    if rest is not None:
        shipper.add(rest)
    shipper.send()
    elapsed = time.perf_counter() - t0
    cpu = cpu_seconds() - cpu0
    m = Measurement(args, n, elapsed, cpu, shipper.failed, shipper.codes)
    m.extra["put_records_calls"] = shipper.calls
    return m


def _latency(args: argparse.Namespace, client: Any) -> Measurement:
    data, keys, n = workload(args)
    nkeys = len(keys)
    rate = float(args.rate)
    linger = float(args.linger)
    client.put_records(StreamName=args.stream, Records=[{"Data": data, "PartitionKey": keys[0]}])
    shipper = Shipper(client, args.stream)
    aggregator = RecordAggregator()
    now = time.monotonic
    pending: list[float] = []  # scheduled times of records not sent yet
    latencies: list[float] = []
    pairs: list[tuple[float, float]] = []
    max_lag = 0.0
    cpu0 = cpu_seconds()
    t_start = now() + 0.01
    i = 0
    last = t_start

    def ship() -> None:
        nonlocal last
        rest = aggregator.clear_and_get()
        if rest is not None:
            shipper.add(rest)
        shipper.send()
        done = now()
        last = done
        latencies.extend(done - due for due in pending)
        pairs.extend((due, done - due) for due in pending)
        pending.clear()

    while i < n or pending:
        t = now()
        filled = False
        while i < n and t_start + i / rate <= t:  # add every record that is due
            due = t_start + i / rate
            max_lag = max(max_lag, t - due)
            full = aggregator.add_user_record(keys[i % nkeys], data)
            if full is not None:
                shipper.add(full)
                filled = True
            pending.append(due)
            i += 1
        if pending and (filled or i == n or t >= pending[0] + linger):
            ship()
            continue
        sleep_until_next(pending, linger, t_start, i, n, rate, now)
    cpu = cpu_seconds() - cpu0
    m = Measurement(
        args,
        n,
        last - t_start,
        cpu,
        shipper.failed,
        shipper.codes,
        latencies_s=latencies,
        max_put_lag_s=max_lag,
    )
    m.extra["put_records_calls"] = shipper.calls
    m.extra["timeline"] = latency_timeline(pairs, t_start)
    return m


def main() -> None:
    sync_runner_main(
        __doc__ or "",
        aggregation="on",
        variant="aws-kinesis-agg + boto3",
        library="aws-kinesis-agg+boto3",
        make_client=_client,
        throughput=_throughput,
        latency=_latency,
    )


if __name__ == "__main__":
    main()
