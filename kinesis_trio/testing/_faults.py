"""The fake's faults: what to inject, what was injected, and the per-shard statistics."""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field

import anyio

from ._model import AMBIGUOUS_FAULTS, ENTRY_FAULTS, REQUEST_FAULTS


@dataclass
class Faults:
    """Faults to inject, set as ``fake.faults = Faults(...)``.

    Probabilities apply per write request (PutRecords, PutRecord), except the ``*_entries``
    ones, per entry (a PutRecord whose entry fails is answered with the entry's error:
    ``ProvisionedThroughputExceededException`` HTTP 400, ``InternalFailure`` HTTP 500).
    ``DryRun`` requests draw none.
    Request-level kinds exclude each other (one draw per request picks at most one), as do
    the entry-level kinds (one draw per entry); each group's sum must be at most 1.

    - ``throttle_entries``: the entry fails with ``ProvisionedThroughputExceededException``
      whatever the limits (and uses no tokens); not stored.
    - ``internal_failure_entries``: the entry fails with ``InternalFailure``; not stored.
    - ``http_500`` / ``http_503``: the request is answered ``500 InternalFailure`` /
      ``503 ServiceUnavailable``; nothing stored.
    - ``hang_before``: never processed, never answered (only the client's timeout or a
      cancellation ends it); nothing stored.
    - ``hang_after``: processed (entries stored as usual), then never answered: ambiguous.
    - ``reset_before``: raises ``httpx.ReadError("connection reset by peer")``; nothing
      stored.
    - ``reset_after``: processed (stored), then raises ``httpx.ReadError``: ambiguous.
    - ``latency`` seconds, plus up to ``latency_jitter`` more (uniform), before serving
      every request (all operations).
    - ``fatal``: stream name -> error code answering every request to that stream whose
      operation is in ``fatal_operations`` (default: the writes PutRecords and PutRecord,
      DryRun ones too, so a Producer still learns the shards and its records fail fast),
      e.g. ``{"audit":
      "AccessDeniedException"}``; HTTP 400 (500 for ``InternalFailure``, 503 for
      ``ServiceUnavailable``); nothing stored.
    - ``seed``: seeds ``fake.rng`` (a ``random.Random``) when the faults are assigned.
    """

    throttle_entries: float = 0.0
    internal_failure_entries: float = 0.0
    http_500: float = 0.0
    http_503: float = 0.0
    hang_before: float = 0.0
    hang_after: float = 0.0
    reset_before: float = 0.0
    reset_after: float = 0.0
    latency: float = 0.0
    latency_jitter: float = 0.0
    fatal: dict[str, str] = field(default_factory=dict)
    fatal_operations: frozenset[str] = frozenset({"PutRecords", "PutRecord"})
    seed: int | None = None

    def __post_init__(self) -> None:
        for group in (ENTRY_FAULTS, REQUEST_FAULTS):
            for name in group:
                p = getattr(self, name)
                if not 0.0 <= p <= 1.0:
                    raise ValueError(f"Faults.{name} must be a probability, got {p!r}")
            if sum(getattr(self, name) for name in group) > 1.0 + 1e-12:
                raise ValueError(f"Faults: {', '.join(group)} add up to more than 1")
        if self.latency < 0 or self.latency_jitter < 0:
            raise ValueError("Faults.latency and latency_jitter must be >= 0")


@dataclass
class FaultEvent:
    """A request-level fault the fake injected.

    ``kind``: a :data:`REQUEST_FAULTS` name, or the error code of a ``fatal`` stream or of a
    ``fail_next`` code. ``entries``: (shard_id, sequence_number) of the records the request
    stored (only ``hang_after`` and ``reset_after`` store any).
    """

    time: float
    kind: str
    stream: str
    entries: list[tuple[str, str]] = field(default_factory=list)

    @property
    def ambiguous(self) -> bool:
        """The request was processed but the client never got the answer."""
        return self.kind in AMBIGUOUS_FAULTS


@dataclass
class ShardStats:
    """Records and bytes (data + partition key) accepted by one shard, and when."""

    records: int = 0
    bytes: int = 0
    throttled: int = 0
    first_accept: float | None = None
    last_accept: float | None = None

    def _accept(self, size: int, now: float) -> None:
        self.records += 1
        self.bytes += size
        if self.first_accept is None:
            self.first_accept = now
        self.last_accept = now

    def _throttle(self) -> None:
        self.throttled += 1


@dataclass
class FakeStats:
    """Write (PutRecords and PutRecord) counters; requests answered by a ``hook`` are not
    counted.

    ``requests_by_status`` counts answered requests by HTTP status; hangs and resets count in
    ``requests_unanswered``. ``entries`` counts the entries of processed requests, of which
    ``entries_ok`` were stored, ``entries_throttled`` failed with
    ``ProvisionedThroughputExceededException`` (limits or faults) and ``entries_failed`` with
    ``InternalFailure``. ``dry_runs`` counts ``DryRun`` requests (answered, by status, in
    ``requests_by_status``; their entries are not counted). ``faults`` counts injected
    faults by kind (per entry for the entry kinds). ``shards[stream][shard_id]`` is a
    :class:`ShardStats`. Assign a fresh ``FakeStats()`` to ``fake.stats`` to start counting
    again.
    """

    requests: int = 0
    requests_by_status: Counter[int] = field(default_factory=Counter)
    requests_unanswered: int = 0
    entries: int = 0
    entries_ok: int = 0
    entries_throttled: int = 0
    entries_failed: int = 0
    dry_runs: int = 0
    faults: Counter[str] = field(default_factory=Counter)
    shards: dict[str, dict[str, ShardStats]] = field(default_factory=dict)

    def shard(self, stream: str, shard_id: str) -> ShardStats:
        """The stats of one shard (created empty on first use)."""
        return self.shards.setdefault(stream, {}).setdefault(shard_id, ShardStats())

    # The fake counts through these; a test reads the fields.

    def _request(self) -> None:
        self.requests += 1

    def _answered(self, status: int) -> None:
        self.requests_by_status[status] += 1

    def _unanswered(self) -> None:
        self.requests_unanswered += 1

    def _dry_run(self) -> None:
        self.dry_runs += 1

    def _fault(self, kind: str) -> None:
        self.faults[kind] += 1

    def _entry(self) -> None:
        self.entries += 1

    def _throttled(self, stream: str, shard_id: str) -> None:
        self.entries_throttled += 1
        self.shard(stream, shard_id)._throttle()

    def _failed(self) -> None:
        self.entries_failed += 1

    def _stored(self, stream: str, shard_id: str, size: int, now: float) -> None:
        self.entries_ok += 1
        self.shard(stream, shard_id)._accept(size, now)


@dataclass
class _Pending:
    remaining: int
    kind: str
    stream: str | None


class _FaultInjection:
    """Request-level faults: the random draw, the ``fail_next`` queue and the event log."""

    stats: FakeStats
    fault_events: list[FaultEvent]
    rng: random.Random
    _faults: Faults
    _pending: list[_Pending]

    def __init__(self, faults: Faults | None) -> None:
        self.stats = FakeStats()
        #: Request-level faults injected so far, in order.
        self.fault_events = []
        self._pending = []
        self.faults = faults or Faults()

    @property
    def faults(self) -> Faults:
        """The faults in force; assigning new ones reseeds :attr:`rng` with their seed."""
        return self._faults

    @faults.setter
    def faults(self, faults: Faults) -> None:
        self._faults = faults
        self.rng = random.Random(faults.seed)

    @property
    def ambiguous_requests(self) -> list[FaultEvent]:
        """Fault events whose records were stored but whose answer was lost."""
        return [e for e in self.fault_events if e.ambiguous]

    def fail_next(self, n: int, kind: str, *, stream: str | None = None) -> None:
        """Inject ``kind`` into the next ``n`` write requests (to ``stream``, if given).

        ``kind``: a :data:`REQUEST_FAULTS` name; an :data:`ENTRY_FAULTS` name (every entry
        of the request fails that way); or an error code such as ``"ExpiredTokenException"``
        answering the whole request (HTTP 400; 500 for ``InternalFailure``, 503 for
        ``ServiceUnavailable``). Queued after earlier ``fail_next`` calls; while one is
        pending it replaces the random request-level draw.
        """
        if n < 1:
            raise ValueError(f"n must be >= 1, got {n!r}")
        known = kind in ENTRY_FAULTS or kind in REQUEST_FAULTS
        if not known and not kind[:1].isupper():
            raise ValueError(
                f"unknown fault kind {kind!r}: use one of {ENTRY_FAULTS + REQUEST_FAULTS} "
                "or an error code such as 'AccessDeniedException'"
            )
        self._pending.append(_Pending(n, kind, stream))

    def _take_fault(self, stream: str) -> str | None:
        for pending in self._pending:
            if pending.stream is None or pending.stream == stream:
                pending.remaining -= 1
                if pending.remaining == 0:
                    self._pending.remove(pending)
                return pending.kind
        faults = self._faults
        draw = self.rng.random()
        total = 0.0
        for kind in REQUEST_FAULTS:
            total += getattr(faults, kind)
            if draw < total:
                return kind
        return None

    def _event(self, kind: str, stream: str, entries: list[tuple[str, str]] | None = None) -> None:
        self.stats._fault(kind)
        self.fault_events.append(FaultEvent(anyio.current_time(), kind, stream, entries or []))
