"""Recovery sends what it reads back without waiting for a put.

Found by the kill tests (``tests/emulators/test_spool_kills.py``): a producer that only
recovered (no new ``put``) never sent the records it read back, and ``recovered()`` hung:
their batches and linger timers were left in the engine's outbox until a put carried them
out.
"""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from kinesis_trio import deaggregate
from kinesis_trio._core._spool import Row
from kinesis_trio.testing import FakeKinesis
from tests.support.helpers import fake_producer, fake_rows
from tests.support.spool import left_behind

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize("n", [3, 2500])  # 2500: past max_outstanding_records, it waits
async def test_a_producer_that_only_recovers_sends_the_records(tmp_path: Path, n: int) -> None:
    fake = FakeKinesis()
    fake.create_stream("s", 2)
    rows = [Row(i, "s", f"k{i % 7}", None, b"left-%d" % i) for i in range(1, n + 1)]
    left_behind(tmp_path, rows)
    async with fake_producer(fake, spool_dir=tmp_path, max_outstanding_records=1000) as producer:
        with anyio.fail_after(60):  # a hang guard (a busy machine is slow, not hung)
            report = await producer.recovered()
    assert (report.records, report.ok, report.failed, report.done) == (n, n, 0, True)
    landed = [
        user.data
        for *_, data, pk, ehk, seq in fake_rows(fake)
        for user in deaggregate(data, pk, explicit_hash_key=ehk, sequence_number=seq)
    ]
    assert sorted(landed) == sorted(row.data for row in rows)
