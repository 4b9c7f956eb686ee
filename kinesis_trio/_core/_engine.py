"""The engine: every decision of the producer between ``put`` and an Outcome (no awaits).

It ties the pure pieces together: the :class:`~kinesis_trio._core._accumulator.Accumulator`
(placement, sealing), the :class:`~kinesis_trio._core._ledger.Ledger` (outstanding records,
exactly-once resolution), the response interpreter (``_interpret``), the retry policy
(``_retry_policy``: classification, what a retry costs) and schedule (``_retry_schedule``),
the shard maps (``_shards``, ``_reshard``) and the limiters (``_limiter``). The async shell
(``_shell``, ``_producer``) calls it with the time and with what came back, and asks it
(never its parts) what it needs to know. The engine never calls out: what the shell must do
(wake a worker, queue a batch, start or retire a shard's worker, wake the retrier, reload a
shard map, send request halves apart, hand over dead letters) is left as effects in its
:class:`~kinesis_trio._core._effects.Outbox` (``_effects`` names them), which the shell
takes after each call.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable
from typing import Any, Generic, NamedTuple, TypeVar

from .._config import ProducerConfig
from .._errors import SpoolWriteError
from .._logging import get_logger
from .._results import Attempt, failed
from ._accumulator import Accumulator, track
from ._admission import Admission, delays
from ._aggregation import _vlen
from ._apply import Answers
from ._batch import Batch, Batches
from ._congestion import ConcurrencyLimit
from ._effects import NoRoom, Outbox
from ._endings import Endings
from ._ledger import Ledger
from ._metric_window import MetricWindow
from ._ordering import KeyOrder, refusal
from ._outgoing import Outgoing
from ._pipeline_data import KRecord, StreamState
from ._placing import Parts
from ._record import Record
from ._reshard import ShardMaps
from ._retry_schedule import Retries
from ._shards import Shard, ShardMap, hash_key_for, parse_explicit_hash_key
from ._spool import RecoveryReport, Row, SpoolBook, kept_note, recovered_attempt, unkept_note
from ._spooling import Spooling
from ._stream_policy import StreamFacts
from ._validate import partition_key_length

__all__ = ["Engine"]

_log = get_logger("kinesis_trio.producer")
_INF = math.inf
#: the class of the rows the engine makes (the producer's ``Outcome``)
R = TypeVar("R", bound=Record)
_KEY_CACHE_MAX = 1 << 16
#: seconds between samples of the oldest record's age and the projected delay
_SAMPLE_INTERVAL = 1.0


class Status(NamedTuple):
    """What the producer reports of the engine (``Engine.status``)."""

    records: int
    bytes: int
    unresolved: int
    request_limit: int
    in_flight: int
    retry_budget: float


def too_large(
    config: ProducerConfig, max_bytes: int, stream: StreamState, n: int, pk_len: int
) -> str:
    """The error of a record over the stream's limit or ``max_outstanding_bytes``."""
    size = n + pk_len
    head = (
        f"record too large: data ({n} bytes) plus partition key ({pk_len} bytes) is {size} bytes, "
    )
    if size > stream.max_record_size:
        configured = config.max_record_size
        if configured is not None and configured < stream.facts.max_record_size:
            where = "ProducerConfig.max_record_size"
        else:
            where = f"the stream's limit, MaxRecordSizeInKiB {stream.facts.max_record_size // 1024}"
        return head + f"over max_record_size ({stream.max_record_size} bytes: {where})"
    return head + (
        f"over max_outstanding_bytes ({max_bytes}): it could never be "
        "accepted; raise max_outstanding_bytes"
    )


def refuse(why: str) -> None:
    """Raise what the spool's refusal ``why`` means for a ``put`` (``SpoolBook.refusal``)."""
    if why == "full" or why == "recovering":
        raise NoRoom
    if why.startswith("record too large"):
        raise ValueError(why)
    raise SpoolWriteError(
        f"the spool cannot write ({why}): the record was not accepted; the records accepted "
        "before are kept and written again"
    )


#: The engine's fields: its parts and what it keeps. Slots: an instance dict leaves CPython's
#: shared-key layout once it holds many keys, and every read of an engine attribute would pay
#: for it (measured: 2% more instructions per record).
_FIELDS = (
    "_acc",
    "_admission",
    "_answers",
    "_batches",
    "_config",
    "_endings",
    "_gate",
    "_key_cache",
    "_ledger",
    "_make",
    "_maps",
    "_measure",
    "_metrics",
    "_order",
    "_outbox",
    "_pauses",
    "_place",
    "_rand",
    "_refreshable",
    "_retries",
    "_sampled",
    "_spool",
    "_streams",
    "_ttl",
    "apply_answer",
    "apply_error",
    "out",
    "spooling",
    "stream",
)


class Engine(Generic[R]):
    """The producer's decisions: accept, place, seal, interpret, retry, resolve."""

    __slots__ = _FIELDS

    def __init__(
        self,
        config: ProducerConfig,
        metrics: MetricWindow,
        refreshable: bool,
        dead_letters: bool,
        outbox: Outbox | None,
        make: type[R],
    ) -> None:
        self._config = config
        #: the class of each record's row it makes (the producer's ``Outcome``)
        self._make = make
        self._metrics = metrics
        self._measure = metrics.enabled
        #: ExpiredToken refreshes the credentials (False: static ones, which fail at once)
        self._refreshable = refreshable
        self._ttl = config.record_ttl
        #: what the shell must do, left by every call (the shell gives it, and takes what
        #: is in it after each call)
        self._outbox = outbox = outbox if outbox is not None else Outbox()
        #: outstanding records, exactly-once resolution; with ``dead_letters`` each record
        #: failed, with its data, goes into the outbox (the producer's ``failures()``)
        self._ledger = Ledger(
            config.max_outstanding_records, config.max_outstanding_bytes, outbox, dead_letters
        )
        self._acc = Accumulator(
            agg_max_count=config.aggregation_max_count,
            coll_max_count=config.collection_max_count,
            coll_max_size=config.collection_max_size,
            linger=config.record_max_buffered_time,
            early_size=config.linger_window_bytes,
            queue_size=config.shard_queue_size,
            outbox=outbox,
            outstanding=self._ledger,
        )
        #: per-key ordering (``ordering="per_key"``), or None: records go as they come
        self._order = KeyOrder(self._acc) if config.ordering == "per_key" else None
        #: where records are placed anew: per-key ordering wraps the accumulator
        self._place: Accumulator | KeyOrder = self._order or self._acc
        #: every resolution, failure and expiry goes through it
        self._endings = endings = Endings(self._ledger, metrics, self._ttl, self._order)
        #: the time ``record_ttl`` does not count (``_pauses``; the shell begins and ends one)
        self._pauses = endings.pauses
        #: the producer's streams by name (the shell adds them as they load)
        self._streams: dict[str, StreamState] = {}
        #: the loaded stream users name ``ref`` (its name or ARN), or None: ``stream(ref)``
        #: (the dict's own lookup, handed out: ``put`` pays no call of its own for it)
        self.stream = self._streams.get
        self._rand = random.Random()
        #: how many PutRecords requests may be in flight (the sender asks it for a slot)
        self._gate = ConcurrencyLimit(
            config.max_connections,
            adaptive=config.adaptive_concurrency,
            timeout=config.request_timeout,
        )
        #: retries: backoff, the retry budget, when each is due
        parts = Parts(config, self._acc, self._place, self._endings, outbox)
        self._retries = Retries(parts, self._rand)
        #: admission by time: each shard's lane of it says whether ``put`` may add a record
        self._admission = Admission(config.record_ttl, config.admission_ttl_share)
        #: shard maps, resharding and the KCL rule for aggregates that landed elsewhere
        self._maps = ShardMaps(parts, self._admission)
        #: what answers and failed requests do to their records
        self._answers = answers = Answers(
            config,
            endings=self._endings,
            maps=self._maps,
            retries=self._retries,
            gate=self._gate,
            admission=self._admission,
            metrics=metrics,
            sample=self._answered,
            outbox=outbox,
            rand=self._rand,
            refreshable=refreshable,
        )
        #: apply a PutRecords answer, or a request's failure (no usable answer), to its
        #: records: ``Answers.apply_answer`` and ``apply_error``, handed out as they are
        self.apply_answer = answers.apply_answer
        self.apply_error = answers.apply_error
        #: the door of the shell's shard workers, collectors and senders: what leaves the
        #: shard buffers (a shard's batch, each stream's requests, the gate's slots)
        self.out = Outgoing(
            config, self._acc, self._order, endings, self._maps, self._gate, self._rand
        )
        #: the door of the spooler (``spool_dir``): the spool's book, what it is told of the
        #: commits and the recovery it runs, and what it asks
        self.spooling = Spooling(config, self._ledger, outbox)
        self._key_cache: dict[str, tuple[int, int, int]] = {}
        #: batches (``put_many``): validated in one pass, admitted as a whole
        self._batches = Batches(
            self._acc,
            self._ledger,
            self._order,
            make,
            (self._check_keyless, self._too_large, refuse),
        )
        self._sampled = -_INF  # when delays were last sampled for the metrics
        #: the spool's book (``spool_dir``), or None: records are kept in memory only
        self._spool: SpoolBook | None = None

    def open_spool(self, next_id: int, on_disk: int, lost: int, reading: bool) -> None:
        """The spool opened (``Spooling.open``): every record accepted from now is spooled."""
        self._spool = spool = self.spooling.open(next_id, on_disk, lost, reading)
        self._batches.use_spool(spool)

    def add_stream(
        self,
        key: str,
        stream: StreamState,
        facts: StreamFacts,
        shard_map: ShardMap,
        now: float,
    ) -> None:
        """A stream loaded by the shell, by the name (or ARN) users give it: its policy and
        its shards (``StartShard`` effects)."""
        stream.received = 0  # the engine's own field of the stream (accept counts)
        track(stream)
        self.out.add_stream(stream)
        self._maps.apply_facts(stream, facts, shard_map, now)
        self._streams[key] = stream

    def record_limit(self, ref: str) -> int | None:
        """The largest record (data + partition key) ``put`` takes for the loaded stream
        ``ref``, or None: not loaded. Reads only (a ``SyncProducer`` asks from its caller's
        thread)."""
        stream = self._streams.get(ref)
        return None if stream is None else stream.accept_max

    def check(self, ref: str, n: int, pk_len: int, keyless: bool) -> bool:
        """``ValueError`` if the loaded stream ``ref`` would refuse a record of ``n`` bytes
        of data and a ``pk_len``-byte partition key (``keyless``: none); False: the stream
        is not loaded. Reads only (a ``SyncProducer`` checks from its caller's thread)."""
        stream = self._streams.get(ref)
        if stream is None:
            return False
        if keyless:
            self._check_keyless(stream)
        if n + pk_len > stream.accept_max:
            raise ValueError(self._too_large(stream, n, pk_len))
        return True

    def pause(self, now: float) -> None:
        """The process may stop running from ``now`` (a Lambda environment is frozen
        between invocations): the time until :meth:`resume` does not count toward
        ``record_ttl`` (``_pauses``)."""
        self._pauses.begin(now)

    def resume(self, now: float) -> None:
        """The process runs again at ``now``: the pause, if one began, ends."""
        if self._pauses.paused:
            self._pauses.end(now)

    def refusal(self, facts: StreamFacts) -> str | None:
        """Why the producer cannot take a stream of ``facts`` (per-key ordering cannot hold
        on an ``AUTO`` stream: ``_ordering.refusal``), or None."""
        return None if self._order is None else refusal(facts)

    def reload(
        self, stream: StreamState, facts: StreamFacts, shard_map: ShardMap, now: float
    ) -> None:
        """The stream's facts and open shards, loaded again (a reshard, a policy change).
        Facts not known (DescribeStreamSummary denied this time): those known are kept."""
        if not facts.known:
            facts = stream.facts
        self._maps.apply_facts(stream, facts, shard_map, now)

    def reload_failed(self, stream: StreamState, now: float) -> None:
        """The map could not be reloaded: records waiting for it expire at their TTL."""
        self._maps.expire_unverified(stream, now)

    def needs_history(self, stream: StreamState) -> bool:
        """Must the stream's closed shards be listed too (``ShardMaps.needs_history``)?"""
        return self._maps.needs_history(stream)

    def learn_shards(self, stream: StreamState, shards: list[Shard]) -> None:
        """Hash key ranges of the stream's shards, closed ones included."""
        self._maps.learn_shards(stream, shards)

    def verify_pending(self, stream: StreamState, now: float) -> None:
        """Apply the KCL's rule to the aggregates that waited for the map's reload."""
        self._maps.verify_pending(stream, now)

    # -- accepting --------------------------------------------------------------------------

    def accept(
        self,
        stream: StreamState,
        data: bytes,
        partition_key: str | None,
        explicit_hash_key: str | None,
        now: float,
        recovered: Row | None = None,
    ) -> R:
        """Accept a record into the stream's buffers, or raise (bad input: ``ValueError`` /
        ``TypeError``; no room: ``NoRoom``; a spool that cannot write:
        ``SpoolWriteError``), changing nothing. ``recovered``: the record was read back
        from the spool (it goes before new ones, flagged as a possible duplicate)."""
        try:
            key = self._key_cache.get(partition_key)  # type: ignore[arg-type]
        except TypeError:  # unhashable: key_info names the problem
            key = None
        if key is None:
            key = self._no_key(stream) if partition_key is None else self._key_info(partition_key)
        pk_len, hash_key, pk_grow = key
        n = len(data)
        size = n + pk_len
        if size > stream.accept_max:
            raise ValueError(self._too_large(stream, n, pk_len))
        if explicit_hash_key is not None:
            hash_key = parse_explicit_hash_key(explicit_hash_key)
        ledger = self._ledger
        if ledger.records >= ledger.max_records or ledger.bytes + size > ledger.max_bytes:
            raise NoRoom
        spool = self._spool
        if spool is not None and recovered is None:
            why = spool.refusal(size)
            if why is not None:
                refuse(why)
        outcome = self._make(
            data, partition_key, explicit_hash_key, hash_key, size, now, stream.name, ledger.epoch
        )
        if recovered is not None:
            outcome.attempted(recovered_attempt(now))
        order = self._order
        if order is None:
            self._acc.add(stream, outcome, pk_grow, now)
        else:
            if stream.refusal is not None:
                raise ValueError(stream.refusal)
            order.accept(stream, outcome, pk_grow, now)
        ledger.accept(outcome, size)
        stream.received += 1
        if spool is not None:
            if recovered is None:
                spool.add(outcome, stream.key, data, partition_key, explicit_hash_key, size, now)
            else:
                spool.add_recovered(outcome, recovered.id)
        return outcome

    def batch(self, stream: StreamState, records: Iterable[Any]) -> Batch:
        """Validate a batch of ``(data, partition_key[, explicit_hash_key])`` records for
        :meth:`accept_many`, in one pass (``_batch``): a bad record raises the error
        :meth:`accept` would, naming its index (``records[i]: ...``). Changes nothing."""
        return self._batches.prepare(stream, records, self._key_cache.get, self._key_info)

    def accept_many(self, stream: StreamState, batch: Batch, now: float) -> list[R]:
        """Accept a batch :meth:`batch` validated, as a whole, returning its rows in order;
        or raise, changing nothing: ``NoRoom`` (no room for all of it), what :meth:`accept`
        raises of a spool that cannot write, and, if the stream's limit changed since, what
        :meth:`batch` raises."""
        if batch.accept_max != stream.accept_max:  # the stream's limit changed meanwhile
            batch = self.batch(stream, batch.records())
        batch.route(stream)
        rows = self._batches.accept(stream, batch, now)
        stream.received += len(rows)
        return rows

    def recovery_ended(self, report: RecoveryReport) -> None:
        """The spool's recovery ended: what became of its records (the metrics)."""
        if self._measure:
            self._metrics.spool_recovery(report.records, report.failed, report.damaged)

    def fail_recovered(self, row: Row, size: int, code: str, message: str, now: float) -> None:
        """A record read back from the spool that cannot be sent again (its stream is gone,
        it breaks a limit now): it fails for good (``failures()``) and leaves the spool."""
        outcome = self._make(
            row.data,
            row.partition_key,
            row.explicit_hash_key,
            0,
            size,
            now,
            row.stream,
            self._ledger.epoch,
        )
        outcome.attempted(recovered_attempt(now))
        self._ledger.accept(outcome, size)
        spool = self._spool
        assert spool is not None
        spool.add_recovered(outcome, row.id)
        self._endings.fail((outcome,), failed(code, message, now), "")

    def _no_key(self, stream: StreamState) -> tuple[int, int, int]:
        """A record without a partition key: only an ``AUTO`` stream takes it."""
        self._check_keyless(stream)
        stream.took_keyless()
        return (0, 0, 0)

    @staticmethod
    def _check_keyless(stream: StreamState) -> None:
        """``ValueError`` unless ``stream`` takes records without a partition key (reads
        only: a ``SyncProducer`` checks from its caller's thread)."""
        if not stream.auto:
            raise ValueError(
                f"partition_key is required: stream {stream.name!r} places records by their "
                "partition key (RecordDistributionStrategy USER_PARTITION_KEY); only a stream "
                "whose strategy is AUTO takes records without one"
            )

    def _too_large(self, stream: StreamState, n: int, pk_len: int) -> str:
        """The error of a record over the stream's limit or ``max_outstanding_bytes``."""
        return too_large(self._config, self._ledger.max_bytes, stream, n, pk_len)

    def _key_info(self, partition_key: str) -> tuple[int, int, int]:
        """``(UTF-8 length, hash key, bytes its aggregate key-table entry takes)``."""
        pk_len = partition_key_length(partition_key)
        info = (pk_len, hash_key_for(partition_key), 1 + _vlen(pk_len) + pk_len)
        cache = self._key_cache
        if len(cache) >= _KEY_CACHE_MAX:
            cache.clear()
        cache[partition_key] = info
        return info

    # -- flushes ---------------------------------------------------------------------------

    def flush_started(self) -> int:
        """A flush began: until it ends, everything buffered goes at once. Returns the
        epoch it waits for (:meth:`pending_through`)."""
        self._acc.flush_started()
        return self._ledger.close_epoch()

    def pending_through(self, epoch: int) -> bool:
        """Are records accepted in ``epoch`` or before still unresolved?"""
        return self._ledger.pending_through(epoch)

    def flush_ended(self) -> None:
        """A flush ended (done, failed or cancelled)."""
        self._acc.flush_ended()

    # -- answers --------------------------------------------------------------------------

    def _answered(self, now: float) -> None:
        """An answer was applied (metrics on): the records accepted since are reported, and
        the delays sampled once a second."""
        self.count_received()
        if now - self._sampled >= _SAMPLE_INTERVAL:
            self._sample_delays(now)

    def _sample_delays(self, now: float) -> None:
        """Sample ``OldestRecordAge`` and ``ProjectedDelay`` of every stream."""
        self._sampled = now
        streams = self._streams
        oldest = self._ledger.oldest_arrivals(len(streams))
        names = [stream.name for stream in streams.values()]
        owing = self._admission.owing
        for name, (oldest_age, projected) in delays(oldest, names, owing, now).items():
            self._metrics.stream_sample("OldestRecordAge", name, oldest_age)
            if projected < _INF:
                self._metrics.stream_sample("ProjectedDelay", name, projected)

    def count_received(self) -> None:
        """Report the records accepted since the last report (UserRecordsReceived)."""
        for stream in self._streams.values():
            if stream.received:
                self._metrics.user_records_received(stream.name, stream.received)
                stream.received = 0

    # -- retries and failures ----------------------------------------------------------------

    def mark_in_flight(self, krecs: list[KRecord], attempt: Attempt) -> None:
        """Records whose request was out when the producer stopped: maybe written."""
        for krec in krecs:
            for outcome in krec.live():
                outcome.attempted(attempt)

    def fail_unresolved(self, code: str, message: str, now: float) -> int:
        """Fail every record not resolved yet (close, abort); returns how many. With a spool,
        after its last commit: each message says whether it stays in the spool (on disk)."""
        if not self._ledger.unresolved():
            return 0
        for stream in self._streams.values():
            # Written to a shard whose range was never checked: maybe delivered (ambiguous).
            self._maps.note_unverified(stream, "before the producer closed")
        spool, unkept = self._spool, None
        if spool is not None:
            unkept = failed(code, message + unkept_note(spool.error), now)
            message += kept_note(str(self._config.spool_dir))
        count = self._endings.resolve_all(failed(code, message, now), unkept)
        _log.warning("records_failed_on_close", records=count, error_code=code)
        return count

    # -- what the shell asks (it never reaches into the engine's parts) --------------------

    def status(self) -> Status:
        """The producer's counts: outstanding records, the gate, the retry budget."""
        ledger, gate = self._ledger, self._gate
        return Status(
            ledger.records,
            ledger.bytes,
            ledger.unresolved(),
            gate.allowed,
            gate.in_flight,
            self._retries.budget.level,
        )

    def retry_due(self, stream: StreamState, now: float) -> None:
        """Queue the stream's retries that are due (``Queue`` effects)."""
        self._retries.due(stream, now)

    def next_retry(self, stream: StreamState) -> float:
        """When the stream's next retry is due (``inf``: none waits)."""
        return self._retries.next_due(stream)
