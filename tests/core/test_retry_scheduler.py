"""Retries: backoff, the retry budget and its waits, driven through the engine (no loop)."""

from __future__ import annotations

import logging
from typing import Any

import pytest

from kinesis_trio import Outcome
from kinesis_trio._core._aggregation import deaggregate
from kinesis_trio._core._congestion import RetryBudget
from kinesis_trio._core._engine import Engine
from kinesis_trio._core._pipeline_data import KRecord, StreamState
from kinesis_trio._errors import KinesisError, RequestTimeoutError
from tests.support.engine import engine, retry_due, sealed, shell_of, throttled_answer


def failed_request(
    eng: Engine[Outcome], stream: StreamState, error: BaseException, at: float, n: int = 2
) -> tuple[list[Outcome], list[KRecord]]:
    outcomes = [eng.accept(stream, b"r%d" % i, f"k{i}", None, at) for i in range(n)]
    krecs = sealed(eng, stream)
    shell_of(eng).sealed_batches.clear()
    eng.apply_error(stream, krecs, error, at, at + 0.5)
    return outcomes, krecs


def answer_ok(eng: Engine[Outcome], stream: StreamState, krecs: list[KRecord], at: float) -> None:
    records = [{"ShardId": k.shard.shard_id, "SequenceNumber": "1"} for k in krecs]
    eng.apply_answer(stream, krecs, {"Records": records}, at, at + 0.01)


def timeout() -> RequestTimeoutError:
    return RequestTimeoutError("PutRecords did not complete", operation="PutRecords")


def test_a_timeout_retry_pays_ten_a_5xx_five_throttling_nothing() -> None:
    eng, _shell, stream = engine(aggregation_enabled=False)
    budget = eng._retries.budget
    failed_request(eng, stream, timeout(), 0.0)
    failed_request(eng, stream, KinesisError("InternalFailure", "x", status_code=500), 0.0)
    failed_request(eng, stream, KinesisError("ThrottlingException", "x", status_code=400), 0.0)
    retry_due(eng, stream, 100.0)  # every backoff is over: each retry pays as it goes
    assert budget.level == pytest.approx(500.0 - 10 - 5)


def test_an_empty_budget_holds_retries_and_a_success_lets_them_go() -> None:
    eng, shell, stream = engine(aggregation_enabled=False, record_ttl=60.0)
    budget = eng._retries.budget
    budget.refill_per_s = 0.1  # mostly successes refill it, in this test
    budget.level = 12.0
    first, _ = failed_request(eng, stream, timeout(), 0.0)
    second, _ = failed_request(eng, stream, timeout(), 0.0)
    due = retry_due(eng, stream, 10.0)
    paid = [k for ks in due.values() for k in ks]
    assert len(paid) == 2  # one request's worth of retries: paid (the earliest two)
    assert budget.level < RetryBudget.TIMEOUT_COST
    # The retry cost is split over the request's records: the other two are held.
    assert len(eng._retries.waiting(stream)) == 2 and all(
        e[0] > 10.0 for e in eng._retries.waiting(stream)
    )
    held = [o for e in eng._retries.waiting(stream) for k in e[2] for o in k.members]
    assert not any(o.done() for o in first + second)
    # A success (here, the paid retries) gives back what it cost: the held ones go.
    answer_ok(eng, stream, paid, 12.0)
    assert all(isinstance(o, Outcome) and o.result().ok for k in paid for o in k.members)
    assert shell.retries[-1] == pytest.approx(12.01)  # the retrier is woken at once
    again = retry_due(eng, stream, 12.01)
    assert sorted((k.members[0] for ks in again.values() for k in ks), key=id) == sorted(
        held, key=id
    )
    note = held[0].attempts[-1]
    assert note.error_code == "RequestTimeoutError"
    assert "its retry waited 2.01 s for the retry budget" in (note.error_message or "")


def test_the_budget_alone_never_fails_a_record_its_ttl_does() -> None:
    eng, _shell, stream = engine(aggregation_enabled=False, record_ttl=30.0)
    budget = eng._retries.budget
    budget.level = 0.0
    budget.refill_per_s = 0.1  # a timeout retry affordable after 100 s: past the TTL
    outcomes, _ = failed_request(eng, stream, timeout(), 0.0)
    retry_due(eng, stream, 10.0)  # held: the budget cannot pay before their TTL
    assert not any(o.done() for o in outcomes)
    assert eng._retries.waiting(stream)[0][0] == pytest.approx(30.0)  # their TTL, not before
    retry_due(eng, stream, 30.0)
    assert all(o.done() for o in outcomes)
    for o in outcomes:
        result = o.result()
        assert result.error_code == "RecordExpired"
        assert "waited for the retry budget" in (result.error_message or "")


def test_held_retries_wait_no_longer_than_time_refills_the_budget() -> None:
    eng, shell, stream = engine(aggregation_enabled=False, record_ttl=60.0)
    budget = eng._retries.budget
    outcomes, _ = failed_request(eng, stream, timeout(), 0.0, n=1)
    assert budget.withdraw(budget.capacity, 20.0)  # empty at 20 s
    retry_due(eng, stream, 20.0)  # past any backoff: held
    ready = budget.ready_at(RetryBudget.TIMEOUT_COST, 20.0)
    assert shell.retries[-1] == pytest.approx(ready) and ready <= 21.0  # 10 tokens/s
    assert retry_due(eng, stream, ready - 0.01) == {}
    due = retry_due(eng, stream, ready)
    assert sum(len(v) for v in due.values()) == 1
    assert not any(o.done() for o in outcomes)


def logged(caplog: pytest.LogCaptureFixture, prefix: str) -> list[str]:
    out = []
    for record in caplog.records:
        message = record.getMessage()
        if record.name.startswith("kinesis_trio") and prefix in message:
            assert record.levelno == logging.INFO
            out.append(message)
    return out


def test_the_budget_running_dry_is_logged_once_not_per_request(
    caplog: pytest.LogCaptureFixture,
) -> None:
    eng, _shell, stream = engine(aggregation_enabled=False, record_ttl=600.0)
    eng._retries.budget.refill_per_s = 0.001
    with caplog.at_level(logging.INFO, logger="kinesis_trio"):
        for i in range(80):  # 80 timeouts: 800 tokens wanted, 500 there
            failed_request(eng, stream, timeout(), float(i), n=1)
            retry_due(eng, stream, float(i) + 10.0)
            eng._answers._log_notices()
    lines = logged(caplog, "retry_budget")
    assert len(lines) == 1 and "retry_budget_empty" in lines[0]


def test_the_gate_falls_to_its_floor_on_timeouts_and_says_so_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    eng, _shell, stream = engine(aggregation_enabled=False, record_ttl=600.0)
    eng._gate.limit = 24.0
    with caplog.at_level(logging.INFO, logger="kinesis_trio"):
        for i in range(10):
            assert eng._gate.try_acquire()
            failed_request(eng, stream, timeout(), float(i) * 13, n=1)
            eng._gate.release()
    assert eng._gate.allowed == 1
    lines = logged(caplog, "request_concurrency")
    assert len(lines) == 1 and "request_concurrency_at_floor" in lines[0]
    assert "ceiling" in lines[0] and "24" in lines[0]


def test_metrics_sample_the_gate_and_the_budget() -> None:
    eng, _shell, stream = engine(aggregation_enabled=False)
    failed_request(eng, stream, timeout(), 0.0)
    totals = eng._metrics.totals()
    assert totals["RequestConcurrencyLimit"] == 4.0  # 8 to start, halved by the timeout
    assert totals["RetryBudgetLevel"] == 500.0
    assert totals["RequestsWaitingForSlot"] == 0.0


def test_a_throttled_record_waits_one_step_while_its_limiter_can_slow_down() -> None:
    # Its shard's limiter paces it (each throttle halved it): a backoff that grew with the
    # shard's throttles kept it out while newer records took the shard (issue 61).
    eng, shell, stream = engine(aggregation_enabled=False, retry_backoff_base=0.1)
    for i in range(4):  # each throttle halves the limiter: 1/16 after 4, over its floor
        throttled_answer(eng, stream, 10.0 * i)
        due = shell.retries[-1] - (10.0 * i + 0.01)
        assert 0.0 <= due <= 0.1  # one step, whatever the shard's failures in a row
        retry_due(eng, stream, 10.0 * i + 1.0)
    assert stream.shards[0].failures == 4 and not stream.shards[0].limiter.at_floor()


def test_at_its_limiters_floor_a_throttled_shard_backs_off_again() -> None:
    # Its limiter cannot slow down more (a fleet whose floors add up to more than the
    # shard): the shard's backoff grows, or the fleet's retries storm the shard.
    eng, shell, stream = engine(aggregation_enabled=False, retry_backoff_base=0.1)
    limiter = stream.shards[0].limiter
    waits = []
    for i in range(40):
        throttled_answer(eng, stream, 10.0 * i)
        waits.append(shell.retries[-1] - (10.0 * i + 0.01))
        retry_due(eng, stream, 10.0 * i + 6.0)
    assert limiter.at_floor()
    assert max(waits[-10:]) > 0.5  # the shard's backoff, grown with its failures


def throttle_all(
    eng: Engine[Outcome], stream: StreamState, krecs: list[KRecord], at: float
) -> None:
    entry = {"ErrorCode": "ProvisionedThroughputExceededException", "ErrorMessage": "slow down"}
    eng.apply_answer(stream, krecs, {"Records": [entry] * len(krecs)}, at, at + 0.01)


def payload(i: int, size: int) -> bytes:
    return b"%04d" % i + b"x" * (size - 4)


def one_aggregate(
    size: int = 1000, count: int = 40, **config: Any
) -> tuple[Engine[Outcome], StreamState, list[Outcome], KRecord]:
    """``count`` records of ``size`` bytes on one shard, sealed into one aggregate."""
    config = {"record_ttl": 30.0, "retry_backoff_base": 0.1, **config}
    eng, _shell, stream = engine(**config)
    outcomes = [eng.accept(stream, payload(i, size), f"k{i:02d}", None, 0.0) for i in range(count)]
    krecs = sealed(eng, stream)
    shell_of(eng).sealed_batches.clear()
    assert len(krecs) == 1 and krecs[0].aggregated and krecs[0].size > size * count
    return eng, stream, outcomes, krecs[0]


def retried(eng: Engine[Outcome], stream: StreamState, now: float) -> list[KRecord]:
    return [k for ks in retry_due(eng, stream, now).values() for k in ks]


def test_a_throttled_aggregate_larger_than_its_shard_sends_now_goes_back_in_parts() -> None:
    # Kinesis takes an entry only when the shard's bucket holds its size: while a fleet
    # draws small entries from it, a 40 kB aggregate made before the shard was shared was
    # throttled at every retry until it expired (24 producers on 4 shards at 4x: issue 61).
    eng, stream, outcomes, krec = one_aggregate()
    throttle_all(eng, stream, [krec], 0.0)
    shard = stream.shards[0]
    assert shard.limiter.multiplier == 0.5 and shard.agg_max == 25_600  # halved, and so
    parts = retried(eng, stream, 1.0)
    assert len(parts) == 2 and all(k.aggregated for k in parts)
    assert all(sum(o.size for o in k.members) <= shard.agg_max for k in parts)
    # every record once, in the order put, each part an aggregate that decodes to them
    assert [o for k in parts for o in k.members] == outcomes
    data = [r.data for k in parts for r in deaggregate(k.data, k.partition_key)]
    assert data == [payload(i, 1000) for i in range(40)]
    # the lane still owes their bytes once; the parts' answer resolves every record
    assert shard.lane.owed == sum(o.size for o in outcomes)
    answer_ok(eng, stream, parts, 1.5)
    assert all(o.result().ok for o in outcomes) and shard.lane.owed == 0
    # parts within the size are not split again
    eng2, stream2, _, krec2 = one_aggregate()
    throttle_all(eng2, stream2, [krec2], 0.0)
    parts2 = retried(eng2, stream2, 1.0)
    throttle_all(eng2, stream2, parts2, 1.0)  # a quarter: 12,800 bytes
    again = retried(eng2, stream2, 2.0)
    # 25 and 15 records of about 1,004 bytes: halves over 12,800 bytes are that size,
    # 12 records (each part its own draw of the backoff)
    assert sorted(len(k.members) for k in again) == [1, 3, 12, 12, 12]
    assert all(sum(o.size for o in k.members) <= 12_800 for k in again)


def test_at_the_limiters_floor_too_halved_at_each_throttle_down_to_plain_records() -> None:
    eng, stream, outcomes, krec = one_aggregate(size=3000, count=16, record_ttl=120.0)
    shard = stream.shards[0]
    for t in range(6):  # other producers' throttles took it to its floor
        shard.limiter.on_throttled(float(t))
    order = {id(o): i for i, o in enumerate(outcomes)}
    parts = [krec]
    sizes = []
    for i in range(4):  # (the shard's backoff, grown at the floor: 10 s apart is past it)
        throttle_all(eng, stream, parts, 10.0 * (i + 1))
        assert shard.limiter.at_floor() and shard.agg_max == 4096
        parts = retried(eng, stream, 10.0 * (i + 1) + 9.0)
        parts.sort(key=lambda k: order[id(k.members[0])])
        sizes.append([len(k.members) for k in parts])
    # halves of 48 kB, down to the floor's 4 kB: two records of 3 kB are more than that
    assert sizes == [[8] * 2, [4] * 4, [2] * 8, [1] * 16]
    assert [k.aggregated for k in parts] == [False] * 16
    assert [k.data for k in parts] == [payload(i, 3000) for i in range(16)]
    answer_ok(eng, stream, parts, 50.5)
    assert all(o.result().ok for o in outcomes) and shard.lane.owed == 0


def test_per_key_ordering_keeps_a_throttled_aggregate_whole() -> None:
    # a key's records stay in one Kinesis record: parts could be written out of order
    eng, stream, outcomes, krec = one_aggregate(ordering="per_key")
    throttle_all(eng, stream, [krec], 0.0)
    parts = retried(eng, stream, 1.0)
    assert len(parts) == 1 and parts[0].members == outcomes


def test_an_aggregate_that_failed_otherwise_goes_back_whole() -> None:
    eng, stream, _outcomes, krec = one_aggregate()
    entry = {"ErrorCode": "InternalFailure", "ErrorMessage": "try again"}
    eng.apply_answer(stream, [krec], {"Records": [entry]}, 0.0, 0.01)
    assert retried(eng, stream, 10.0) == [krec]
