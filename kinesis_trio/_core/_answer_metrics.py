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
    # shard -> [user records, user bytes, Kinesis records, Kinesis bytes, buffering sum,
    #           aggregates, their user records, fewest in one, most in one,
    #           retries (summed over the user records), fewest, most]
    groups: dict[str, list[float]] = {}
    errors: dict[tuple[str, str], int] = {}
    users = 0
    for krec, entry in zip(krecs, entries, strict=True):
        members = krec.members
        n = len(members)
        users += n
        # a well-formed success (``entry_error`` is None), tested inline: once per entry
        if (
            type(entry) is not dict
            or type(entry.get("SequenceNumber")) is not str
            or type(shard_id := entry.get("ShardId")) is not str
        ):
            code = entry_error(entry)
            assert code is not None  # (the test above is entry_error's own)
            key = (krec.shard.shard_id, code)
            errors[key] = errors.get(key, 0) + 1
            continue
        tries = len(members[0].attempts)
        group = groups.get(shard_id)
        if group is None:
            # the first of its shard in this answer (on a stream of thousands of shards,
            # mostly the only one): its values at once
            if krec.aggregated:
                groups[shard_id] = [
                    n,
                    sum(o.size for o in members),
                    1,
                    krec.size,
                    (start - krec.since) * n,
                    1,
                    n,
                    n,
                    n,
                    tries * n,
                    tries,
                    tries,
                ]
            else:
                groups[shard_id] = [
                    n,
                    krec.size,
                    1,
                    krec.size,
                    (start - krec.since) * n,
                    0,
                    0,
                    math.inf,
                    0,
                    tries * n,
                    tries,
                    tries,
                ]
            continue
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
        group[9] += tries * n
        if tries < group[10]:
            group[10] = tries
        if tries > group[11]:
            group[11] = tries
    metrics.request_time(stream, end - start)
    metrics.kinesis_records_per_request(stream, len(krecs))
    metrics.user_records_per_request(stream, users)
    if groups:
        metrics.shard_answers(stream, groups)
    throttled = 0
    for (shard_id, code), n in errors.items():
        metrics.errors(stream, shard_id, code, n)
        if code in THROTTLING_CODES:
            throttled += n
    metrics.throttled(stream, len(krecs), throttled)
