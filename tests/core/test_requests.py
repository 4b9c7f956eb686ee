"""The request builder: when a request goes, its limits, its body (no event loop)."""

from __future__ import annotations

import base64
import json
import math

from hypothesis import given
from hypothesis import strategies as st

from kinesis_trio._core import _requests
from kinesis_trio._core._limiter import ShardLimiter
from kinesis_trio._core._pipeline_data import KRecord, ShardBuffer
from kinesis_trio._core._requests import RequestCollector, body, chunks, json_tail
from tests.support.engine import outcome

SHARD = ShardBuffer("shardId-000000000000", 0, 2**128 - 1, ShardLimiter(100, 0.0))


def krec(size: int, deadline: float = math.inf, key: str = "k") -> KRecord:
    o = outcome(b"x" * size, key)
    return KRecord([o], b"x" * size, key, None, size, SHARD, deadline, False)


@given(
    st.lists(st.integers(0, 2000), max_size=60),
    st.integers(1, 20),
    st.integers(2000, 10_000),
)
def test_requests_keep_their_limits_and_the_order(
    sizes: list[int], max_count: int, max_size: int
) -> None:
    collector = RequestCollector(max_count, max_size)
    records = [krec(s) for s in sizes]
    collector.offer(records)
    sent: list[list[KRecord]] = []
    while True:
        due = collector.decide(0.0, flushing=True, connection_free=True)
        if not due.send:
            assert due.wake == math.inf
            break
        sent.append(collector.take())
    assert [k for request in sent for k in request] == records
    for request in sent:
        assert 1 <= len(request) <= max_count
        assert sum(k.size for k in request) <= max_size
    assert chunks(records, max_count, max_size) == sent


def test_a_request_waits_for_its_deadline_then_for_a_connection() -> None:
    collector = RequestCollector(500, 5 << 20)
    collector.offer([krec(10, deadline=5.0), krec(10, deadline=3.0)])
    assert collector.decide(1.0, flushing=False, connection_free=True) == (False, 3.0, False)
    assert collector.decide(1.0, flushing=True, connection_free=True).send
    assert collector.decide(3.0, flushing=False, connection_free=False) == (False, math.inf, True)
    assert collector.decide(3.0, flushing=False, connection_free=True).send
    assert len(collector.take()) == 2
    assert collector.decide(3.0, flushing=False, connection_free=True) == (False, math.inf, False)


def test_a_full_request_goes_even_while_every_connection_is_busy() -> None:
    collector = RequestCollector(2, 5 << 20)
    collector.offer([krec(1), krec(1), krec(1)])
    assert collector.decide(0.0, flushing=False, connection_free=False).send
    assert len(collector.take()) == 2
    assert not collector.decide(0.0, flushing=False, connection_free=False).send


def test_the_body_is_the_put_records_json() -> None:
    records = [krec(3, key='ключ "q"'), krec(0, key="k")]
    records[1].ehk = "42"
    doc = json.loads(body(b'{"StreamName":"s","Records":[', records))
    assert doc == {
        "StreamName": "s",
        "Records": [
            {"Data": base64.b64encode(b"xxx").decode(), "PartitionKey": 'ключ "q"'},
            {"Data": "", "PartitionKey": "k", "ExplicitHashKey": "42"},
        ],
    }
    assert chunks([], 500, 100) == []


@given(
    st.lists(st.text(min_size=1, max_size=20), min_size=1, max_size=40),
    st.one_of(st.none(), st.integers(0, 2**128 - 1).map(str)),
)
def test_an_entrys_tail_is_its_keys_in_json_whether_remembered_or_not(
    keys: list[str], ehk: str | None
) -> None:
    """``json_tail`` remembers a key's JSON (``_KEY_TAILS``, emptied when full): the same
    bytes the first time, again, and after the memory was emptied."""
    _requests._KEY_TAILS_MAX, saved = 7, _requests._KEY_TAILS_MAX
    try:
        for key in keys + keys:
            entry = json.loads(b'{"Data":"' + json_tail(key, ehk))
            assert entry == {"Data": "", "PartitionKey": key} | (
                {} if ehk is None else {"ExplicitHashKey": ehk}
            )
            assert len(_requests._KEY_TAILS) <= 7
    finally:
        _requests._KEY_TAILS_MAX = saved


@given(
    st.lists(st.tuples(st.text(min_size=1, max_size=12), st.booleans()), min_size=1, max_size=30)
)
def test_a_bodys_entries_are_their_keys_whether_their_tails_are_shared_or_kept(
    entries: list[tuple[str, bool]],
) -> None:
    """A plain record's tail is its key's, shared (``_ENTRY_TAILS``, emptied when full) and
    not kept on the record; one with an explicit hash key keeps its own: the same JSON the
    first time, again, and after the memory was emptied."""
    _requests._KEY_TAILS_MAX, saved = 5, _requests._KEY_TAILS_MAX
    try:
        records = [krec(2, key=key) for key, _ in entries]
        for record, (_, with_ehk) in zip(records, entries, strict=True):
            record.ehk = "7" if with_ehk else None
        expected = [
            {"Data": "eHg=", "PartitionKey": key} | ({"ExplicitHashKey": "7"} if ehk else {})
            for key, ehk in entries
        ]
        for _ in range(2):
            doc = json.loads(body(b'{"StreamName":"s","Records":[', records))
            assert doc == {"StreamName": "s", "Records": expected}
            assert len(_requests._ENTRY_TAILS) <= 5
        assert [r.tail is not None for r in records] == [ehk for _, ehk in entries]
    finally:
        _requests._KEY_TAILS_MAX = saved


def test_a_taken_request_comes_with_its_bytes() -> None:
    collector = RequestCollector(2, 5 << 20)
    collector.offer([krec(3), krec(4), krec(5)])
    assert collector.decide(0.0, flushing=True, connection_free=True).send
    taken, size = collector.take_sized()
    assert (len(taken), size) == (2, 7)
    assert collector.decide(0.0, flushing=True, connection_free=True).send
    assert [k.size for k in collector.take()] == [5]
