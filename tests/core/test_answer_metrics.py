"""An answer's metrics (``_answer_metrics.measure_answer``): the same statistic sets as one
``shard_answer`` call per shard, the way they were recorded before ``shard_answers``."""

from __future__ import annotations

import math
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from kinesis_trio._core._answer_metrics import measure_answer
from kinesis_trio._core._interpret import entry_error
from kinesis_trio._core._metric_window import MetricWindow
from kinesis_trio._core._pipeline_data import KRecord
from kinesis_trio._core._record import Record
from kinesis_trio._error_codes import THROTTLING_CODES
from kinesis_trio._results import Attempt
from kinesis_trio.metrics import Metrics
from tests.support.engine import buffer, even_shards, outcome


def _reference(
    metrics: MetricWindow,
    stream: str,
    krecs: list[KRecord],
    entries: list[Any],
    start: float,
    end: float,
) -> None:
    """``measure_answer`` as it was: a list per shard, then a ``shard_answer`` call each."""
    metrics.request_time(stream, end - start)
    metrics.kinesis_records_per_request(stream, len(krecs))
    metrics.user_records_per_request(stream, sum(len(k.members) for k in krecs))
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
    for shard_id, g in groups.items():
        users, user_bytes, kinesis, kinesis_bytes, buffering, aggs, in_aggs, lo, hi = g[:9]
        metrics.shard_answer(
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
            int(g[9]),
            int(g[10]),
            int(g[11]),
        )
    throttled = 0
    for (shard_id, code), n in errors.items():
        metrics.errors(stream, shard_id, code, n)
        if code in THROTTLING_CODES:
            throttled += n
    metrics.throttled(stream, len(krecs), throttled)


_SHARDS = [buffer(s) for s in even_shards(3)]
_ENTRY = st.sampled_from(["ok", "ok", "ok", "elsewhere", "throttled", "failed", "malformed"])


@given(
    st.lists(
        st.tuples(
            st.integers(0, 2),  # its shard
            st.integers(1, 4),  # user records in it (more than one: an aggregate)
            st.integers(1, 300),  # bytes of each
            st.floats(min_value=0.0, max_value=2.0),  # waited before the request
            st.integers(0, 3),  # attempts before
            _ENTRY,
        ),
        min_size=1,
        max_size=12,
    ),
    st.sampled_from(["none", "summary", "detailed"]),
    st.sampled_from(["global", "stream", "shard"]),
)
def test_an_answers_metrics_are_those_of_a_shard_answer_per_shard(
    krecs_spec: list[tuple[Any, ...]], level: str, granularity: str
) -> None:
    start, end = 10.0, 10.25
    krecs: list[KRecord] = []
    entries: list[Any] = []
    for index, (shard_no, count, size, waited, tries, kind) in enumerate(krecs_spec):
        shard = _SHARDS[shard_no]
        members: list[Record] = [
            outcome(b"x" * size, f"k{index}-{i}", start - waited) for i in range(count)
        ]
        for member in members:
            for t in range(tries):
                member.attempted(Attempt(float(t), 0.0, 0.1, False, "InternalFailure", "x"))
        agg = count > 1
        data = b"x" * (size * count)
        krecs.append(KRecord(members, data, "a", None, len(data) + 1, shard, 0.0, agg))
        if kind == "ok":
            entries.append({"ShardId": shard.shard_id, "SequenceNumber": f"4{index:05d}"})
        elif kind == "elsewhere":
            entries.append({"ShardId": "shardId-000000000009", "SequenceNumber": f"5{index}"})
        elif kind == "malformed":
            entries.append({"ShardId": shard.shard_id})
        else:
            code = "ProvisionedThroughputExceededException" if kind == "throttled" else "X"
            entries.append({"ErrorCode": code, "ErrorMessage": "no"})
    new, old = (
        Metrics(level=level, granularity=granularity),
        Metrics(level=level, granularity=granularity),
    )
    measure_answer(new, "s", krecs, entries, start, end)
    _reference(old, "s", krecs, entries, start, end)
    assert new._answers == old._answers
    assert new._window == old._window
    assert list(new._totals.items()) == list(old._totals.items())
    assert new.totals() == old.totals()
    assert [
        (d.name, d.dimensions, d.count, d.sum, d.minimum, d.maximum) for d in new.snapshot()
    ] == [(d.name, d.dimensions, d.count, d.sum, d.minimum, d.maximum) for d in old.snapshot()]
