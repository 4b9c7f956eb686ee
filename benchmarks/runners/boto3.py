"""Plain boto3 ``put_records``, 500 user records per call, no aggregation, no retries.

The naive baseline of aiokpl's table: a single-threaded loop that fills a list of 500
entries and calls ``put_records``. ``failed`` counts the entries a response reported as
failed (nothing retries them). Throughput mode: the clock runs from the first entry to the
last call's return. Latency mode (``--rate R``): like ``run_agg_boto3`` without the
aggregator: pending records go out when the oldest has waited ``--linger`` seconds or 500
are pending; latency = the call's return time minus the record's scheduled time.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from benchmarks._runner import (
    Measurement,
    cpu_seconds,
    latency_timeline,
    sleep_until_next,
    sync_runner_main,
    workload,
)
from benchmarks.runners.agg_boto3 import _client

_BATCH = 500


def _send(client: Any, stream: str, entries: list[dict[str, Any]], tally: dict[str, int]) -> None:
    response = client.put_records(StreamName=stream, Records=entries)
    if response.get("FailedRecordCount"):
        for slot in response["Records"]:
            if "ErrorCode" in slot:
                tally[slot["ErrorCode"]] = tally.get(slot["ErrorCode"], 0) + 1


def _throughput(args: argparse.Namespace, client: Any) -> Measurement:
    data, keys, n = workload(args)
    nkeys = len(keys)
    stream = args.stream
    client.put_records(StreamName=stream, Records=[{"Data": data, "PartitionKey": keys[0]}])
    codes: dict[str, int] = {}
    calls = 0
    cpu0 = cpu_seconds()
    t0 = time.perf_counter()
    entries: list[dict[str, Any]] = []
    for i in range(n):
        entries.append({"Data": data, "PartitionKey": keys[i % nkeys]})
        if len(entries) == _BATCH:
            _send(client, stream, entries, codes)
            calls += 1
            entries = []
    if entries:
        _send(client, stream, entries, codes)
        calls += 1
    elapsed = time.perf_counter() - t0
    cpu = cpu_seconds() - cpu0
    m = Measurement(args, n, elapsed, cpu, sum(codes.values()), codes)
    m.extra["put_records_calls"] = calls
    return m


def _latency(args: argparse.Namespace, client: Any) -> Measurement:
    data, keys, n = workload(args)
    nkeys = len(keys)
    rate = float(args.rate)
    linger = float(args.linger)
    stream = args.stream
    client.put_records(StreamName=stream, Records=[{"Data": data, "PartitionKey": keys[0]}])
    now = time.monotonic
    codes: dict[str, int] = {}
    entries: list[dict[str, Any]] = []
    pending: list[float] = []
    latencies: list[float] = []
    pairs: list[tuple[float, float]] = []
    max_lag = 0.0
    calls = 0
    cpu0 = cpu_seconds()
    t_start = now() + 0.01
    last = t_start
    i = 0
    while i < n or pending:
        t = now()
        while i < n and len(pending) < _BATCH and t_start + i / rate <= t:
            due = t_start + i / rate
            max_lag = max(max_lag, t - due)
            entries.append({"Data": data, "PartitionKey": keys[i % nkeys]})
            pending.append(due)
            i += 1
        if pending and (len(pending) >= _BATCH or i == n or t >= pending[0] + linger):
            _send(client, stream, entries, codes)
            calls += 1
            last = now()
            latencies.extend(last - due for due in pending)
            pairs.extend((due, last - due) for due in pending)
            entries, pending = [], []
            continue
        sleep_until_next(pending, linger, t_start, i, n, rate, now)
    cpu = cpu_seconds() - cpu0
    failed = sum(codes.values())
    m = Measurement(
        args, n, last - t_start, cpu, failed, codes, latencies_s=latencies, max_put_lag_s=max_lag
    )
    m.extra["put_records_calls"] = calls
    m.extra["timeline"] = latency_timeline(pairs, t_start)
    return m


def main() -> None:
    sync_runner_main(
        __doc__ or "",
        aggregation="off",
        variant="boto3.put_records (batched 500)",
        library="boto3",
        make_client=_client,
        throughput=_throughput,
        latency=_latency,
    )


if __name__ == "__main__":
    main()
