"""The overloaded-endpoint workload against kinesis-local, with default settings but a
third of the records and of ``record_ttl`` (``_SCALED``: the same queue, in ``record_ttl``s).

kinesis-local serves one request at a time: with the KPL's fixed 24 requests in flight,
this workload times out thousands of requests and fails records that landed (the issue's
finding). The test asserts only what a slower machine cannot change:

- nothing is lost: every accepted record is resolved, ok (and then in the stream) or
  failed with a truthful reason;
- every record stored more than once was flagged ``possible_duplicate``, and so was every
  failed record found in the stream (a definite failure that landed would be a lie);
- every failure is an expiry that says so: ``RecordExpired``, its attempts counted right,
  its last error named, and the record really that old;
- with admission by time on (``ProducerConfig.admission_ttl_share``, the default), no
  record expired while waiting in the producer's own queues: ``put`` waited instead.

How many records fail is not asserted. On a fresh 2-core machine kinesis-local confirmed
about 1 MB/s, and without admission by time 315 to 1,050 of the 20,000 expired waiting in
the producer's queue (issue 50): that count is the machine's speed, not the producer's
truthfulness. Nor is the issue's "at most 2 % flagged": inside the whole suite (the emulator
shared with every other test, the machine busy) 1,781 to 8,320 of the 20,000 were flagged in
past CI runs, because the request limit still reaches 5 to 8 there (issue 16).
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Any

import pytest

from benchmarks import overload
from kinesis_trio import Outcome, Producer, ProducerConfig, RecordResult
from kinesis_trio._results import EXPIRED
from tests.support.emulators import EmulatorEndpoint, new_stream

pytestmark = pytest.mark.anyio

#: What a record that expired in the producer's own queues says (Engine.out.batch).
_IN_QUEUE = "it waited in the producer's queues"
#: The issue's workload (20,000 records, the defaults) scaled by about a third: a third of
#: the records and of ``record_ttl``. What it puts still takes kinesis-local about twice
#: ``record_ttl`` to store (about 21 MB at about 1 MB/s), so records expire in the
#: producer's queue unless it admits by time; the rest of the settings are the defaults.
_SCALED: dict[str, Any] = {"record_ttl": 10.0}
_EXPIRED = re.compile(
    r"not written within record_ttl \((?P<ttl>[0-9.]+) s\) after (?P<n>\d+) attempts"
)


class _Kept:
    """What ``overload.run`` saw, kept for the test: each accepted record's outcome (in
    put order) and the copies of each record read back from the stream."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.outcomes: list[Outcome] = []
        self.copies: Counter[int] = Counter()
        kept = self

        class KeepingProducer(Producer):
            async def put(self, *args: Any, **kwargs: Any) -> Outcome:
                outcome = await super().put(*args, **kwargs)
                kept.outcomes.append(outcome)
                return outcome

        read_copies = overload.read_copies

        async def keep_copies(endpoint: str, stream: str) -> Counter[int]:
            self.copies = await read_copies(endpoint, stream)
            return self.copies

        monkeypatch.setattr(overload, "Producer", KeepingProducer)
        monkeypatch.setattr(overload, "read_copies", keep_copies)


def untruthful_failure(r: RecordResult, copies: int, config: ProducerConfig) -> str | None:
    """Why the failed record ``r`` (found ``copies`` times in the stream) was told a lie,
    or ``None``."""
    if r.error_code != EXPIRED:
        return f"failed with {r.error_code}, not an expiry: {r.error_message}"
    found = _EXPIRED.match(r.error_message or "")
    if found is None:
        return f"expired without saying after what: {r.error_message!r}"
    if float(found["ttl"]) != config.record_ttl or int(found["n"]) != len(r.attempts):
        return f"{len(r.attempts)} attempts, {config.record_ttl} s TTL: {r.error_message!r}"
    last = r.attempts[-1] if r.attempts else None
    if last is not None and last.error_code and last.error_code not in (r.error_message or ""):
        return f"its last error {last.error_code} is not named: {r.error_message!r}"
    # A retry whose backoff would end past the TTL expires at once (not later, for nothing).
    if r.resolved_at - r.accepted_at < config.record_ttl - config.retry_backoff_max:
        return f"expired after {r.resolved_at - r.accepted_at:.2f} s: {r.error_message!r}"
    if copies and not r.possible_duplicate:
        return f"in the stream {copies} time(s), yet failed without possible_duplicate"
    return None


async def test_seven_thousand_mixed_records_on_kinesis_local(
    kinesis_local: EmulatorEndpoint, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = ProducerConfig(**_SCALED)  # what overload.run uses
    # admission by time: on unless the default is None (a field that does not exist yet
    # reads as off, and the rest is asserted all the same)
    admission = getattr(config, "admission_ttl_share", None) is not None
    kept = _Kept(monkeypatch)
    stream = await new_stream(kinesis_local, 4)
    data = overload.records(7_000)
    result = await overload.run(kinesis_local.endpoint_url, stream, data, **_SCALED)
    row = result.row()

    # Nothing lost: every record put was accepted and resolved.
    assert len(kept.outcomes) == len(data), row
    assert all(o.done() for o in kept.outcomes), row
    results = [o.result() for o in kept.outcomes]
    copies = [kept.copies[i] for i in range(len(data))]
    assert set(kept.copies) <= set(range(len(data))), row  # no record the test did not put

    # Every ok record is in the stream, where Kinesis said.
    not_there = [i for i, r in enumerate(results) if r.ok and not copies[i]]
    assert not not_there, (len(not_there), not_there[:10], row)
    assert result.missing == 0, row
    no_place = [i for i, r in enumerate(results) if r.ok and not (r.shard_id and r.sequence_number)]
    assert not no_place, (len(no_place), no_place[:10], row)

    # Every record stored more than once was flagged.
    unflagged = [i for i, r in enumerate(results) if copies[i] > 1 and not r.possible_duplicate]
    assert not unflagged, (len(unflagged), unflagged[:10], row)
    assert result.unflagged_copies == 0, row

    # Every failure is truthful.
    failed = [(i, r) for i, r in enumerate(results) if not r.ok]
    assert result.failed == len(failed), row
    lies = [(i, why) for i, r in failed if (why := untruthful_failure(r, copies[i], config))]
    assert not lies, (len(lies), lies[:5], row)

    # With admission by time, no record expired waiting in the producer's own queue.
    in_queue = [r for _, r in failed if _IN_QUEUE in (r.error_message or "")]
    if admission:
        # (by attempts made before: none, or retries after which the record waited again)
        made = Counter(len(r.attempts) for r in in_queue)
        last = Counter(r.attempts[-1].error_code for r in in_queue if r.attempts)
        assert not in_queue, (len(in_queue), made, last, in_queue[0].error_message, row)
