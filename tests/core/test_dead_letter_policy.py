"""The dead-letter buffer's policy (pure: no event loop)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kinesis_trio._dead_letters import FailedRecord, FailureBuffer
from kinesis_trio._results import RecordResult


def record(n: int, size: int = 1, stream: str = "s") -> FailedRecord:
    result = RecordResult(False, stream, f"k{n}", None, None, None, (), "InternalFailure", "x")
    return FailedRecord(bytes(size), f"k{n}", None, stream, result)


def test_keeps_in_order_and_takes_oldest_first() -> None:
    buffer = FailureBuffer(10, 100)
    for n in range(3):
        assert buffer.offer(record(n, 5))
    assert len(buffer) == 3 and buffer.bytes == 15
    assert [buffer.take().partition_key for _ in range(3)] == ["k0", "k1", "k2"]  # type: ignore[union-attr]
    assert buffer.take() is None
    assert buffer.bytes == 0 and buffer.dropped == 0


def test_full_by_count_drops_the_newest_and_counts_it() -> None:
    buffer = FailureBuffer(2, 1000)
    assert buffer.offer(record(0)) and buffer.offer(record(1))
    assert not buffer.offer(record(2))
    assert not buffer.offer(record(3))
    assert buffer.dropped == 2
    # what was kept is what is delivered: the oldest two
    assert buffer.take() == record(0)
    assert buffer.offer(record(4))  # room again
    assert [buffer.take(), buffer.take(), buffer.take()] == [record(1), record(4), None]


def test_full_by_bytes_drops_the_newest() -> None:
    buffer = FailureBuffer(100, 10)
    assert buffer.offer(record(0, 6))
    assert not buffer.offer(record(1, 5))  # 11 > 10
    assert buffer.offer(record(2, 4))  # exactly 10
    assert buffer.dropped == 1 and buffer.bytes == 10


def test_a_record_over_the_byte_bound_is_kept_when_the_buffer_is_empty() -> None:
    buffer = FailureBuffer(100, 10)
    assert buffer.offer(record(0, 50))
    assert not buffer.offer(record(1, 1))
    assert buffer.take() == record(0, 50)
    assert buffer.bytes == 0


def test_bounds_must_leave_room() -> None:
    with pytest.raises(ValueError):
        FailureBuffer(0, 10)
    with pytest.raises(ValueError):
        FailureBuffer(10, 0)


def test_notices_are_rate_limited_and_name_the_streams() -> None:
    buffer = FailureBuffer(1, 100, notice_interval=10.0)
    buffer.offer(record(0))
    assert buffer.notice(0.0) == {}  # nothing dropped: nothing to say
    buffer.offer(record(1, stream="a"))
    assert buffer.notice(1.0) == {"a": 1}  # the first drop is logged at once
    for n in range(5):
        buffer.offer(record(n, stream="a" if n % 2 else "b"))
    assert buffer.notice(5.0) == {}  # within the interval: held back
    assert buffer.notice(10.9) == {}
    assert buffer.notice(11.0) == {"a": 2, "b": 3}
    buffer.offer(record(9, stream="b"))
    assert buffer.notice(12.0) == {}
    assert buffer.notice(12.0, final=True) == {"b": 1}  # at close: whatever is left
    assert buffer.notice(100.0, final=True) == {}
    assert buffer.dropped == 7


@given(
    st.integers(1, 8),
    st.integers(1, 40),
    st.lists(st.one_of(st.integers(0, 12), st.none()), max_size=60),
)
def test_matches_a_tail_drop_model(max_records: int, max_bytes: int, ops: list[int | None]) -> None:
    """Offers (a size) and takes (None) against a plain list: kept records come out in
    order, the bounds hold (one oversized record alone excepted), every offer is either
    kept or counted as dropped."""
    buffer = FailureBuffer(max_records, max_bytes)
    model: list[FailedRecord] = []
    offered = taken = 0
    for i, op in enumerate(ops):
        if op is None:
            got = buffer.take()
            assert got == (model.pop(0) if model else None)
            taken += got is not None
            continue
        rec = record(i, op)
        offered += 1
        size = sum(len(r.data) for r in model)
        fits = not model or (len(model) < max_records and size + op <= max_bytes)
        assert buffer.offer(rec) is fits
        if fits:
            model.append(rec)
        assert len(buffer) == len(model) <= max_records
        assert buffer.bytes == sum(len(r.data) for r in model)
        assert buffer.bytes <= max_bytes or len(model) == 1
    assert offered == taken + len(buffer) + buffer.dropped
