"""The overloaded-endpoint workload against kinesis-local, with default settings.

kinesis-local serves one request at a time: with the KPL's fixed 24 requests in flight,
this workload times out thousands of requests and fails records that landed (the issue's
finding). With the defaults the producer adapts: nothing fails, at most 2 % of the records
are flagged ``possible_duplicate``, and every record stored twice is among them.
"""

from __future__ import annotations

import pytest

from benchmarks import overload

from .emulator_fixtures import EmulatorEndpoint
from .test_integration import new_stream

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
    assert result.flagged <= len(data) * 0.02, result.row()
