"""The ledger: outstanding counts, flush epochs and exactly-once resolution (no event loop)."""

from __future__ import annotations

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from kinesis_trio import Outcome
from kinesis_trio._core._aggregation import encode_records
from kinesis_trio._core._effects import DeadLetters, Outbox
from kinesis_trio._core._ledger import Ledger
from kinesis_trio._core._pipeline_data import KRecord
from kinesis_trio._dead_letters import FailedRecord
from kinesis_trio._results import failed, written
from tests.support.engine import outcome


def test_room_counts_records_and_bytes() -> None:
    ledger = Ledger(2, 100, Outbox())
    assert ledger.has_room(100)
    assert not ledger.has_room(101)
    first = outcome(b"x" * 40, "k")
    ledger.accept(first, first.size)
    assert ledger.has_room(59) and not ledger.has_room(60)
    second = outcome(b"y", "k")
    ledger.accept(second, second.size)
    assert not ledger.has_room(1)  # two records: the count limit
    assert ledger.resolve([first], written("s-0", "1", False, 1.0, 0.0, 0.0, 1.0)) == (1, 41)
    assert ledger.has_room(59)


def test_a_second_resolution_changes_nothing() -> None:
    outbox = Outbox()
    ledger = Ledger(10, 1000, outbox)
    o = outcome(b"x", "k")
    ledger.accept(o, o.size)
    assert ledger.resolve([o], failed("E", "m", 1.0)) == (1, 2)
    assert outbox.progress  # the resolution is progress
    outbox.take()
    assert ledger.resolve([o], written("s-0", "1", False, 2.0, 0.0, 0.0, 1.0)) == (0, 0)
    assert ledger.records == 0 and ledger.bytes == 0
    assert not o.result().ok  # the first resolution stands
    assert not outbox.progress  # the second was none
    assert ledger.resolve_all(failed("X", "m", 3.0)) == 0


def test_members_get_their_sub_record_index() -> None:
    ledger = Ledger(10, 1000, Outbox())
    members = [outcome(b"%d" % i, f"k{i}") for i in range(3)]
    for o in members:
        ledger.accept(o, o.size)
    ledger.resolve(members, written("s-0", "9", True, 1.0, 0.0, 0.0, 1.0))
    assert [o.result().sub_sequence_number for o in members] == [0, 1, 2]


def test_the_oldest_unresolved_record_of_each_stream_is_the_first_left_of_it() -> None:
    """``OldestRecordAge`` reads it once a second: the walk stops at each stream's first
    unresolved record in order of acceptance, and every later record is younger."""
    ledger = Ledger(100, 10_000, Outbox())
    made = []
    for i, stream in enumerate(["a", "a", "b", "a", "b"]):
        o = Outcome(b"x", "k", None, 0, 2, float(i), stream, 0)
        ledger.accept(o, o.size)
        made.append(o)
    assert ledger.oldest_arrivals(2) == {"a": 0.0, "b": 2.0}
    assert ledger.oldest_arrivals(1) == {"a": 0.0}  # one stream: the first record
    ledger.resolve([made[0], made[2]], written("s-0", "1", False, 5.0, 0.0, 0.0, 1.0))
    assert ledger.oldest_arrivals(2) == {"a": 1.0, "b": 4.0}
    ledger.resolve([made[1], made[3], made[4]], failed("E", "m", 6.0))
    assert ledger.oldest_arrivals(2) == {}  # nothing unresolved: no age


def dead_letters(outbox: Outbox) -> list[tuple[list[FailedRecord], float]]:
    """The dead letters the ledger left in the outbox since the last call."""
    return [(e.records, e.at) for e in outbox.take() if isinstance(e, DeadLetters)]


class Letters:
    """Every dead letter left in ``outbox``, gathered as it is read."""

    def __init__(self, outbox: Outbox) -> None:
        self.outbox = outbox
        self.got: list[tuple[list[FailedRecord], float]] = []

    def __call__(self) -> list[tuple[list[FailedRecord], float]]:
        self.got += dead_letters(self.outbox)
        return self.got


def test_failures_go_to_the_dead_letters_with_their_data_ok_ones_do_not() -> None:
    outbox = Outbox()
    ledger = Ledger(10, 1000, outbox, dead_letters=True)
    letters = Letters(outbox)
    a, b, c = (outcome(b"%d" % i, f"k{i}", ehk="7" if i == 1 else None) for i in range(3))
    for o in (a, b, c):
        ledger.accept(o, o.size)
    ledger.resolve([a], written("s-0", "1", False, 1.0, 0.0, 0.0, 1.0))
    assert letters() == []
    ledger.resolve([b, a], failed("E", "m", 2.0))  # a: resolved before, left as it is
    assert letters() == [([FailedRecord(b"1", "k1", "7", "s", b.result())], 2.0)]
    ledger.resolve([b], failed("E", "again", 2.5))
    assert len(letters()) == 1  # once
    ledger.resolve_all(failed("Closed", "m", 3.0))
    assert letters()[1] == ([FailedRecord(b"2", "k2", None, "s", c.result())], 3.0)
    assert c.data is None  # the data went with the FailedRecord


def test_a_failed_aggregate_gives_each_member_its_data_back() -> None:
    outbox = Outbox()
    ledger = Ledger(10, 1000, outbox, dead_letters=True)
    members = [outcome(b"data-%d" % i, f"k{i}", now=i) for i in range(4)]
    blob = encode_records([o.data for o in members], [f"k{i}" for i in range(4)], None)  # type: ignore[misc]
    krec = KRecord(members, blob, "a", "1", len(blob) + 1, None, 0.0, True)  # type: ignore[arg-type]
    for o in members:
        ledger.accept(o, o.size)
        o.sealed(krec)  # sealed: the aggregate holds the bytes
    ledger.resolve(members[:1], written("s-0", "1", False, 1.0, 0.0, 0.0, 1.0))
    ledger.resolve_all(failed("Closed", "m", 2.0))
    got = [r for records, _ in dead_letters(outbox) for r in records]
    assert [r.data for r in got] == [b"data-1", b"data-2", b"data-3"]
    assert all(o.data is None and o.agg is None for o in members)


class LedgerMachine(RuleBasedStateMachine):
    """Random accepts, resolutions (some repeated), flushes and a final close; every
    failure goes to the dead letters once, with its data."""

    @initialize()
    def start(self) -> None:
        self.outbox = Outbox()
        self.letters = Letters(self.outbox)
        self.ledger = Ledger(10**9, 10**12, self.outbox, dead_letters=True)
        self.accepted: list[tuple[Outcome, int]] = []  # (outcome, epoch)
        self.targets: list[int] = []

    @rule(size=st.integers(0, 1000))
    def accept(self, size: int) -> None:
        o = outcome(b"%d:" % len(self.accepted) + b"x" * size, "k")
        o.epoch = self.ledger.epoch
        self.ledger.accept(o, o.size)
        self.accepted.append((o, self.ledger.epoch))

    @rule(data=st.data(), ok=st.booleans())
    def resolve_some(self, data: st.DataObject, ok: bool) -> None:
        if not self.accepted:
            return
        picks = data.draw(st.lists(st.sampled_from(self.accepted), max_size=5))
        res = written("s-0", "1", False, 1.0, 0.0, 0.0, 1.0) if ok else failed("E", "m", 1.0)
        self.ledger.resolve([o for o, _ in picks], res)

    @property
    def failures(self) -> list[FailedRecord]:
        return [r for records, _ in self.letters() for r in records]

    @invariant()
    def each_failure_once(self) -> None:
        if not hasattr(self, "ledger"):
            return
        failed_ids = [i for i, (o, _) in enumerate(self.accepted) if o.done() and not o.result().ok]
        assert sorted(int(r.data.split(b":")[0]) for r in self.failures) == failed_ids
        for record in self.failures:
            o = self.accepted[int(record.data.split(b":")[0])][0]
            assert record.result == o.result() and len(record.data) + 1 == o.size

    @rule()
    def flush(self) -> None:
        self.targets.append(self.ledger.close_epoch())

    @invariant()
    def counts_match(self) -> None:
        if not hasattr(self, "ledger"):
            return
        live = [(o, e) for o, e in self.accepted if not o.done()]
        assert self.ledger.records == len(live)
        assert self.ledger.bytes == sum(o.size for o, _ in live)
        assert self.ledger.unresolved() == len(live)
        for target in self.targets:
            assert self.ledger.pending_through(target) == any(e <= target for _, e in live)

    def teardown(self) -> None:
        if not hasattr(self, "ledger"):
            return
        live = sum(1 for o, _ in self.accepted if not o.done())
        assert self.ledger.resolve_all(failed("Closed", "m", 2.0)) == live
        assert all(o.done() for o, _ in self.accepted)
        assert self.ledger.records == 0 and self.ledger.bytes == 0
        self.each_failure_once()  # the close's failures too


TestLedgerMachine = LedgerMachine.TestCase
