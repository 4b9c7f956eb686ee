"""Managed Instances in-process: processes of one environment share ``/tmp``; each takes a
spool of its own under the root, and a spool left by a process that ended is sent by the
next (its own, or drained after its first invocation). Two producers in one process stand
for two processes: a spool's ``flock`` refuses a second opener in the same process too."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kinesis_trio._core._spool import Row
from kinesis_trio.aws_lambda import Invocation, LambdaProducer
from kinesis_trio.testing import FakeKinesis
from tests.aws_lambda.support import Context, lambda_producer
from tests.support.helpers import user_data, wait_until
from tests.support.spool import data_on_disk, dead_on_disk, left_behind
from tests.support.sync_kit import Gate


def _make(
    fake: FakeKinesis, backend: str, root: Path, **options: Any
) -> tuple[LambdaProducer, Any]:
    kinesis = lambda_producer(
        fake,
        backend,
        spool_dir=root,
        unconfirmed="return",
        margin=0.0,
        close_timeout=0.2,
        spool_sync="put",
        **options,
    )

    @kinesis.handler
    def handler(event: Any, context: Any, records: Invocation) -> str:
        for data in event.get("put", []):
            records.put(data, partition_key="k")
        return "done"

    return kinesis, handler


@pytest.mark.parametrize("backend", ["trio", "asyncio"])
def test_each_process_its_spool_and_none_left_behind(tmp_path: Path, backend: str) -> None:
    gate = Gate()
    fake = FakeKinesis(gate)
    fake.create_stream("s", shard_count=1)
    root = tmp_path / "spool"
    a, handle_a = _make(fake, backend, root)
    b, handle_b = _make(fake, backend, root)
    try:
        # two siblings at once: no SpoolLockedError, a spool each
        assert handle_a({"put": [b"a1", b"a2"]}, Context(seconds=0.3)) == "done"
        assert handle_b({"put": [b"b1"]}, Context(seconds=0.3)) == "done"
        assert (a.spool, b.spool) == (root / "process-0", root / "process-1")
    finally:
        a.close()  # both processes end with their records unconfirmed: kept on disk
        b.close()
    assert user_data(fake) == []
    gate.opened.set()
    # the environment comes back with one process: it takes process-0 and sends its
    # records first; after its first invocation it drains process-1, which no one runs
    c, handle_c = _make(fake, backend, root)
    try:
        assert handle_c({"put": [b"c1"]}, Context()) == "done"
        assert c.spool == root / "process-0"
        c.producer.recovered(timeout=60)
        wait_until(  # the drain, in the background
            lambda: b"b1" in user_data(fake), timeout=60, what="the drained record b1"
        )
    finally:
        c.close()
    stored = user_data(fake)
    assert sorted(set(stored)) == [b"a1", b"a2", b"b1", b"c1"]


@pytest.mark.parametrize("backend", ["trio", "asyncio"])
def test_a_close_stops_a_drain_and_leaves_the_rest_for_the_next(
    tmp_path: Path, backend: str
) -> None:
    """A process drains a spool no process runs on; it is closed while that spool's
    records are in flight, unanswered: the close does not wait for the drain (before,
    it waited until the records expired, then left them as dead letters, never sent);
    they stay in that spool, and the next process sends them."""
    gate = Gate()
    fake = FakeKinesis(gate)
    fake.create_stream("s", shard_count=1)
    root = tmp_path / "spool"
    left_behind(root / "process-1", [Row(1, "s", "k", None, b"left")])
    a, handle_a = _make(fake, backend, root, record_ttl=5.0)
    try:
        assert handle_a({}, Context()) == "done"  # takes process-0; drains process-1 after
        wait_until(  # the drain's request, unanswered
            lambda: gate.held == 1, timeout=60, what="the drain's request held at the gate"
        )
    finally:
        a.close()
    assert data_on_disk(root / "process-1") == [b"left"]
    assert dead_on_disk(root / "process-1") == []  # kept, not failed for good
    assert user_data(fake) == []
    gate.opened.set()
    c, handle_c = _make(fake, backend, root)
    try:
        assert handle_c({}, Context()) == "done"
        wait_until(lambda: b"left" in user_data(fake), timeout=60, what="the record left behind")
    finally:
        c.close()
