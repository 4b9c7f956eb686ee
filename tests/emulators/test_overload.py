"""The overloaded-endpoint workload against kinesis-local, with default settings.

kinesis-local serves one request at a time: with the KPL's fixed 24 requests in flight,
this workload times out thousands of requests and fails records that landed (the issue's
finding). With the defaults nothing fails, nothing is lost, and every record stored twice
is flagged ``possible_duplicate``.

Not asserted: the issue's "at most 2 % flagged". Run alone on this machine the defaults
flag none; inside the whole suite (the emulator shared with every other test, the machine
busy) 1,781 to 8,320 of the 20,000 were flagged in the last CI runs, because the limit
still reaches 5 to 8 there. That is open work (issue 16), not a property to pretend.
"""

from __future__ import annotations

import pytest

from benchmarks import overload
from tests.support.emulators import EmulatorEndpoint, new_stream

pytestmark = pytest.mark.anyio


async def test_twenty_thousand_mixed_records_on_kinesis_local(
    kinesis_local: EmulatorEndpoint,
) -> None:
    stream = await new_stream(kinesis_local, 4)
    data = overload.records(20_000)
    result = await overload.run(kinesis_local.endpoint_url, stream, data)
    assert result.failed == 0, result.row()
    assert result.missing == 0, result.row()
    assert result.unflagged_copies == 0, result.row()
