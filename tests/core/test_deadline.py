"""When a request is a black hole (``_core._deadline.RequestClock``): the arithmetic, with
the time passed in."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kinesis_trio._core._deadline import MIB, RequestClock, answer_limit

T = 6.0  # request_timeout
C = 6.0  # connect_timeout


def test_before_the_first_byte_a_request_has_connect_and_request_timeout() -> None:
    clock = RequestClock(100.0, 1000, T, C)
    assert clock.deadline() == 100.0 + C + T
    assert clock.stalled() and not clock.out


def test_the_bound_grows_by_request_timeout_per_mib() -> None:
    clock = RequestClock(0.0, 10 * MIB, T, C)
    assert clock.bound == C + T + 10 * T


def test_bytes_moving_keep_a_request_alive_up_to_its_bound() -> None:
    """A 5 MiB request going up at 400 kB/s (13 s) is not a black hole: each piece moves
    the deadline; it would have been cut at 12 s by one fixed deadline."""
    size = 5 * MIB
    clock = RequestClock(0.0, size, T, C)
    now, piece = 0.0, 64 * 1024
    for sent in range(0, size, piece):
        last = sent + piece >= size
        deadline = clock.sent(now, piece, last)
        assert deadline > now + 1.0 or deadline == clock.bound
        now += piece / 400_000
    assert now > C + T  # past the old fixed deadline
    assert clock.out and clock.deadline() == clock.bound > now


def test_a_stall_while_sending_is_a_black_hole() -> None:
    clock = RequestClock(0.0, 5 * MIB, T, C)
    clock.sent(1.0, 64 * 1024, False)
    assert clock.deadline() == 1.0 + T
    assert clock.stalled()
    assert not clock.out  # its last byte never went: nothing was processed
    assert "nothing moved" in clock.describe("PutRecords")


def test_waiting_for_the_answer_has_the_bound_alone() -> None:
    """A 9.9 MiB record sent at once, stored by the endpoint in tens of seconds."""
    size = int(9.9 * MIB * 4 / 3)  # its base64 body
    clock = RequestClock(0.0, size, T, C)
    assert clock.sent(0.1, size, True) == clock.bound
    assert clock.bound > 80.0
    assert not clock.stalled() and clock.out
    assert "did not complete within" in clock.describe("PutRecords")


def test_a_trickled_answer_is_cut_at_the_bound() -> None:
    """One byte every 5 s passes the stall rule each time, never the bound."""
    clock = RequestClock(0.0, 1000, T, C)
    clock.sent(0.0, 1000, True)
    now = 0.0
    while True:
        now += 5.0
        if now >= clock.deadline():
            break
        clock.received(now, 1)
    assert now < C + T + T * 1.01  # a few bytes buy microseconds
    assert not clock.stalled()


def test_an_answer_that_stops_is_a_stall() -> None:
    clock = RequestClock(0.0, 1000, T, C)
    clock.sent(0.0, 1000, True)
    assert clock.received(1.0, 500) == 1.0 + T


def test_the_retry_after_an_expired_token_begins_again() -> None:
    clock = RequestClock(0.0, 1000, T, C)
    clock.sent(0.0, 1000, True)
    clock.received(0.5, 300)
    assert clock.begin(1.0) == min(1.0 + C + T, clock.bound)
    assert not clock.out


@given(
    size=st.integers(0, 20 * MIB),
    steps=st.lists(
        st.tuples(st.floats(0.0, 10.0), st.sampled_from(["sent", "last", "received"])),
        max_size=40,
    ),
)
def test_no_request_outlives_its_bound(size: int, steps: list[tuple[float, str]]) -> None:
    """Whatever moves and when, the deadline never passes the bound, and the bound grows
    only with the answer's bytes."""
    clock = RequestClock(0.0, size, T, C)
    bound = clock.bound
    now = 0.0
    for gap, kind in steps:
        now += gap
        if now >= clock.deadline():
            break
        if kind == "received":
            clock.received(now, 100)
            bound += T * 100 / MIB
        else:
            clock.sent(now, 100, kind == "last")
        assert clock.deadline() <= clock.bound == pytest.approx(bound)


def test_an_answer_built_before_its_first_byte_has_its_size_in_the_bound_from_the_start() -> None:
    """GetRecords may answer 10 MiB, which the endpoint reads before it sends a byte: its
    bound while waiting is 12 s + 60 s at the defaults; the bytes as they arrive add only
    what goes past those 10 MiB."""
    clock = RequestClock(0.0, 200, timeout=6.0, connect=6.0, answer=10 * MIB)
    clock.sent(0.1, 200, last=True)
    assert clock.deadline() == pytest.approx(12.0 + 6.0 * (200 + 10 * MIB) / MIB)
    assert clock.deadline() > 70.0
    bound = clock.bound
    clock.received(30.0, 4 * MIB)  # within what the bound had
    assert clock.bound == pytest.approx(bound)
    clock.received(31.0, 7 * MIB)  # 1 MiB past it
    assert clock.bound == pytest.approx(bound + 6.0)
    plain = RequestClock(0.0, 200, timeout=6.0, connect=6.0)
    plain.sent(0.1, 200, last=True)
    assert plain.deadline() == pytest.approx(12.0 + 6.0 * 200 / MIB)


def _widest_put_records_answer(entries: int) -> bytes:
    # botocore's model: ShardId at most 128 characters, SequenceNumber 0|([1-9]\d{0,128})
    entry = {"ShardId": "s" * 128, "SequenceNumber": "9" * 129, "EncryptionType": "NONE"}
    failed = {
        "ErrorCode": "ProvisionedThroughputExceededException",
        "ErrorMessage": "Rate exceeded for shard shardId-000000000000 in stream s under "
        "account 123456789012." * 4,
    }
    records = [entry if i % 2 else failed for i in range(entries)]
    return json.dumps({"FailedRecordCount": entries, "Records": records}, indent=1).encode()


def _widest_list_shards_page() -> bytes:
    shard = {
        "ShardId": "s" * 128,
        "ParentShardId": "p" * 128,
        "AdjacentParentShardId": "a" * 128,
        "HashKeyRange": {"StartingHashKey": "9" * 39, "EndingHashKey": "9" * 39},
        "SequenceNumberRange": {
            "StartingSequenceNumber": "9" * 129,
            "EndingSequenceNumber": "9" * 129,
        },
    }
    page = {"Shards": [shard] * 10_000, "NextToken": "t" * (1024 * 1024)}
    return json.dumps(page, indent=1).encode()


@pytest.mark.parametrize("entries", [1, 2, 500])
def test_the_widest_answer_a_put_records_can_give_fits_its_limit(entries: int) -> None:
    assert len(_widest_put_records_answer(entries)) <= answer_limit("PutRecords", entries)


def test_the_widest_list_shards_page_fits_its_limit() -> None:
    assert len(_widest_list_shards_page()) <= answer_limit("ListShards")
