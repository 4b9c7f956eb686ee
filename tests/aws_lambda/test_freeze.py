"""A frozen execution environment, in-process: the producer's clock jumps between
invocations, as a monotonic clock does across a Lambda freeze, and every timer fires late.

The jump is made on each backend's own clock (trio's ``MockClock`` at rate 1, asyncio's
loop time plus an offset): the threads never sleep for it. A record waiting through a jump
between invocations is not expired (``record_ttl`` counts running time); one waiting
through the same jump inside an invocation is (the rule's control).
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from trio.testing import MockClock

from kinesis_trio.aws_lambda import Invocation, RecordsFailedError
from kinesis_trio.testing import FakeKinesis
from tests.aws_lambda.support import Context, lambda_producer
from tests.support.helpers import user_data, wait_until
from tests.support.sync_kit import Gate


class _JumpLoop(asyncio.SelectorEventLoop):
    offset = 0.0

    def time(self) -> float:
        return super().time() + self.offset


class Jumps:
    """A backend whose event loop's clock the test moves forward (any thread)."""

    def __init__(self, backend: str) -> None:
        self.backend = backend
        self.loops: list[_JumpLoop] = []
        self.clock = MockClock(rate=1.0)

    def options(self) -> dict[str, Any]:
        if self.backend == "trio":
            return {"clock": self.clock}

        def make() -> asyncio.AbstractEventLoop:
            loop = _JumpLoop()
            self.loops.append(loop)
            return loop

        return {"loop_factory": make}

    def jump(self, seconds: float) -> None:
        if self.backend == "trio":
            self.clock.jump(seconds)
        for loop in self.loops:
            loop.offset += seconds


@pytest.fixture(params=["trio", "asyncio"])
def jumps(request: pytest.FixtureRequest) -> Jumps:
    return Jumps(str(request.param))


def test_a_freeze_longer_than_record_ttl_expires_nothing(jumps: Jumps) -> None:
    gate = Gate()
    fake = FakeKinesis(gate)
    fake.create_stream("s", shard_count=1)
    kinesis = lambda_producer(
        fake, jumps.backend, jumps.options(), unconfirmed="return", margin=0.0, record_ttl=30.0
    )
    futures = []

    @kinesis.handler
    def handler(event: Any, context: Any, records: Invocation) -> str:
        if event.get("put"):
            futures.append(records.put(b"frozen", partition_key="k"))
        return "done"

    try:
        assert handler({"put": True}, Context(seconds=0.5)) == "done"
        wait_until(  # its request is in flight, unanswered
            lambda: gate.held == 1, timeout=30, what="a request held at the gate"
        )
        jumps.jump(600.0)  # ten minutes frozen: the request's deadline and the TTL pass
        wait_until(  # the late timers fired
            lambda: fake.calls.count("PutRecords") >= 2, timeout=30, what="a second PutRecords"
        )
        assert not futures[0].done()  # retried, not expired
        gate.opened.set()
        assert handler({}, Context()) == "done"
        result = futures[0].result(timeout=30)
    finally:
        gate.opened.set()
        kinesis.close()
    assert result.ok, result
    # the request cut off by its deadline may have been stored too: then the copy is flagged
    assert user_data(fake).count(b"frozen") == 1 or result.possible_duplicate


def test_a_record_put_between_invocations_waits_through_a_freeze_unexpired(
    jumps: Jumps,
) -> None:
    # nothing is outstanding as the first invocation returns: its pause begins only once a
    # record arrives, before the loop takes it (no hand-off at the return), so this one,
    # put from another thread after the return, waits through the freeze in the pause
    gate = Gate()
    gate.opened.set()
    fake = FakeKinesis(gate)
    fake.create_stream("s", shard_count=1)
    kinesis = lambda_producer(
        fake, jumps.backend, jumps.options(), unconfirmed="return", margin=0.0, record_ttl=30.0
    )

    @kinesis.handler
    def handler(event: Any, context: Any, records: Invocation) -> str:
        records.put(b"confirmed", partition_key="k")
        return "done"

    try:
        assert handler({}, Context()) == "done"
        gate.opened.clear()
        future = kinesis.producer.put(b"between", partition_key="k")
        wait_until(lambda: gate.held == 1, timeout=30, what="a request held at the gate")
        jumps.jump(600.0)
        wait_until(
            lambda: fake.calls.count("PutRecords") >= 3, timeout=30, what="a retried PutRecords"
        )
        assert not future.done()  # retried, not expired
        gate.opened.set()
        assert handler({}, Context()) == "done"
        result = future.result(timeout=30)
    finally:
        gate.opened.set()
        kinesis.close()
    assert result.ok, result


@pytest.mark.parametrize("warm", ["first", "after-2-without-records", "after-2-confirmed"])
def test_the_same_wait_inside_an_invocation_expires_the_record(jumps: Jumps, warm: str) -> None:
    # ``warm``: invocations that put nothing (a pause is open when this one starts: it
    # must end before the record is accepted, or the wait would not count), or whose
    # records were all confirmed (the pause they left waits for a record: it must not
    # begin with this one's) come first
    gate = Gate()
    fake = FakeKinesis(gate)
    fake.create_stream("s", shard_count=1)
    kinesis = lambda_producer(fake, jumps.backend, jumps.options(), record_ttl=30.0)

    @kinesis.handler
    def handler(event: Any, context: Any, records: Invocation) -> str:
        if event.get("idle"):
            return "idle"
        if event.get("quick"):
            records.put(b"quick", partition_key="k")
            return "quick"
        future = records.put(b"slow", partition_key="k")
        records.send()  # hand it over now: the handler waits for it below
        wait_until(lambda: gate.held == 1, timeout=30, what="a request held at the gate")
        jumps.jump(600.0)  # the function runs all along: slow, not frozen
        future.exception(timeout=30)
        return "done"

    try:
        if warm != "first":
            gate.opened.set()
            kind = "idle" if warm == "after-2-without-records" else "quick"
            for _ in range(2):
                assert handler({kind: True}, Context()) == kind
            gate.opened.clear()
        with pytest.raises(RecordsFailedError) as caught:
            handler({}, Context())
    finally:
        gate.opened.set()
        kinesis.close()
    assert [r.error_code for r in caught.value.report.failed] == ["RecordExpired"]
