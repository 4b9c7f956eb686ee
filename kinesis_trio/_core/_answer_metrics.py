"""KPL metrics of one PutRecords answer, grouped per shard (a few calls per request)."""

from __future__ import annotations

import math
from typing import Any

from .._error_codes import THROTTLING_CODES
from ._interpret import entry_error
from ._metric_window import MetricWindow
from ._pipeline_data import KRecord

__all__ = ["measure_answer"]


def measure_answer(
    metrics: MetricWindow,
    stream: str,
    krecs: list[KRecord],
    entries: list[Any],
    start: float,
    end: float,
) -> None:
    """Record the request time, the records and bytes put per shard, their buffering time,
    retries per record, the errors by code and the share throttled of one answer."""
    metrics.request_time(stream, end - start)
    metrics.kinesis_records_per_request(stream, len(krecs))
    metrics.user_records_per_request(stream, sum(len(k.members) for k in krecs))
    # shard -> [user records, user bytes, Kinesis records, Kinesis bytes, buffering sum,
    #           aggregates, their user records, fewest in one, most in one,
    #           retries (summed over the user records), fewest, most]
    groups: dict[str, list[float]] = {}
    errors: dict[tuple[str, str], int] = {}
    for krec, entry in zip(krecs, entries, strict=True):
        code = entry_error(entry)
        if code is not None:
            key = (krec.shard.shard_id, code)
            errors[key] = errors.get(key, 0) + 1
            continue
        shard_id = entry["ShardId"]
        members = krec.members
        n = len(members)
        group = groups.get(shard_id)
        if group is None:
            group = groups[shard_id] = [0, 0, 0, 0, 0.0, 0, 0, math.inf, 0, 0, math.inf, 0]
        group[0] += n
        group[1] += sum(o.size for o in members) if krec.aggregated else krec.size
        group[2] += 1
        group[3] += krec.size
        group[4] += (start - krec.since) * n
        if krec.aggregated:
            group[5] += 1
            group[6] += n
            if n < group[7]:
                group[7] = n
            if n > group[8]:
                group[8] = n
        tries = len(members[0].attempts)
        group[9] += tries * n
        if tries < group[10]:
            group[10] = tries
        if tries > group[11]:
            group[11] = tries
    shard_answer = metrics.shard_answer
    for shard_id, group in groups.items():
        users, user_bytes, kinesis, kinesis_bytes, buffering, aggs, in_aggs, lo, hi = group[:9]
        shard_answer(
            stream,
            shard_id,
            int(users),
            int(user_bytes),
            int(kinesis),
            int(kinesis_bytes),
            buffering,
            int(aggs),
            int(in_aggs),
            int(lo) if aggs else 0,
            int(hi),
            int(group[9]),
            int(group[10]),
            int(group[11]),
        )
    throttled = 0
    for (shard_id, code), n in errors.items():
        metrics.errors(stream, shard_id, code, n)
        if code in THROTTLING_CODES:
            throttled += n
    metrics.throttled(stream, len(krecs), throttled)
