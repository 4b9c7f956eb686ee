"""What a PutRecords answer, or a request's failure, does to its records (pure, no awaits).

:class:`Answers` applies what ``_interpret`` makes of an answer or an error (its entries
written, written elsewhere, failed or to retry; a named bad entry, halves, a credentials
refresh): resolutions through ``Endings``, the KCL rule through the shard maps, retries
through the schedule, and what the gate and the retry budget learn. What the shell must do
(send halves apart, reload a map, refresh the credentials) goes into the outbox.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any

from .._config import ProducerConfig
from .._errors import ConnectionLostError, RequestTimeoutError
from .._logging import get_logger
from .._results import failed
from ._admission import Admission
from ._answer_metrics import measure_answer
from ._congestion import ConcurrencyLimit, Signal
from ._effects import Outbox, Refresh, RefreshCredentials, SendApart
from ._endings import Endings
from ._interpret import (
    RequestFailure,
    interpret_answer,
    interpret_error,
    resent_in_halves,
    resent_smaller,
    resent_without,
)
from ._metric_window import MetricWindow
from ._pipeline_data import KRecord, StreamState
from ._reshard import ShardMaps
from ._retry_policy import Action, overload_cost
from ._retry_schedule import Retries

__all__ = ["Answers"]

_log = get_logger("kinesis_trio.producer")


class Answers:
    """Applies requests' answers and failures to their records."""

    __slots__ = (
        "admission",
        "config",
        "endings",
        "gate",
        "maps",
        "measure",
        "metrics",
        "outbox",
        "rand",
        "refreshable",
        "retries",
        "sample",
    )

    def __init__(
        self,
        config: ProducerConfig,
        *,
        endings: Endings,
        maps: ShardMaps,
        retries: Retries,
        gate: ConcurrencyLimit,
        admission: Admission,
        metrics: MetricWindow,
        sample: Callable[[float], None],
        outbox: Outbox,
        rand: random.Random,
        refreshable: bool,
    ) -> None:
        self.config = config
        self.endings = endings
        self.maps = maps
        self.retries = retries
        self.gate = gate
        #: admission by time: learns each answer's round trip, and of the records a request
        #: left unconfirmed
        self.admission = admission
        self.metrics = metrics
        self.measure = metrics.enabled
        #: the engine's metrics after each answer, when measuring (given the answer's time)
        self.sample = sample
        self.outbox = outbox
        self.rand = rand
        #: ExpiredToken refreshes the credentials (False: static ones, which fail at once)
        self.refreshable = refreshable

    def _log_notices(self) -> None:
        """Log what the gate and the budget have to say; sample them for the metrics."""
        if self.measure:
            gate = self.gate
            self.metrics.request_gate(gate.allowed, gate.waiting, self.retries.budget.level)
        for event, value in self.gate.notices:
            _log.info(event, limit=int(value), ceiling=self.gate.ceiling)
        budget = self.retries.budget
        for event, value in budget.notices:
            _log.info(event, level=round(value, 1), capacity=budget.capacity)
        self.gate.notices.clear()
        budget.notices.clear()

    def _answered(self, krecs: list[KRecord], start: float, end: float, nbytes: int) -> None:
        """A request came back with an answer: the gate learns, the budget is refilled."""
        self.gate.observe(end, start, nbytes, Signal.ANSWER)
        self.retries.answered(krecs, end)
        self._log_notices()

    def _unconfirmed(self, krecs: list[KRecord], now: float) -> None:
        """The lanes of records a request did not confirm (throttled, failed) count its
        time as busy time that confirmed nothing; the lines of lanes that started or
        stopped holding ``put`` are logged."""
        lanes = [k.shard.lane for k in krecs if k.members[-1].resolution is None]
        self.admission.unconfirmed(lanes, now)

    def apply_answer(
        self,
        stream: StreamState,
        krecs: list[KRecord],
        response: dict[str, Any],
        start: float,
        end: float,
        nbytes: int = 0,
    ) -> None:
        """Apply a PutRecords answer (to a request of ``nbytes``) to its records."""
        self.admission.answered(end - start, self.gate.work(nbytes))
        entries = response.get("Records")
        if not isinstance(entries, list) or len(entries) != len(krecs):
            error = ConnectionLostError(
                "PutRecords answered with a malformed result", operation="PutRecords"
            )
            self.apply_error(stream, krecs, error, start, end, nbytes)
        else:
            self._apply_entries(stream, krecs, entries, start, end, nbytes)
        if self.measure:
            self.sample(end)

    def _apply_entries(
        self,
        stream: StreamState,
        krecs: list[KRecord],
        entries: list[Any],
        start: float,
        end: float,
        nbytes: int,
    ) -> None:
        """The answer's entries, one per record of ``krecs``, applied to them."""
        self._answered(krecs, start, end, nbytes)
        answer = interpret_answer(
            krecs, entries, start, end, fail_if_throttled=self.config.fail_if_throttled
        )
        endings = self.endings
        resolve = endings.resolver()
        for krec, res in answer.written:
            resolve(krec.members, res)
        if answer.elsewhere:
            self.maps.landed_elsewhere(stream, answer.elsewhere, end)
        for krec, res in answer.failed:
            endings.fail(krec.members, res, krec.shard.shard_id)
        if answer.malformed:
            _log.warning(
                "put_records_malformed_entries", stream=stream.name, records=answer.malformed
            )
        most = stream.agg_max_size
        for shard in answer.throttled:
            shard.limiter.on_throttled(end)
            shard.paced(most)
        for shard in answer.bad:
            shard.wrote(False)
        for shard in answer.ok:  # (once per shard of the answer: only what changes)
            if shard.failures:
                shard.wrote(True)
            limiter = shard.limiter
            if limiter.multiplier < 1.0 and limiter.on_success(end):
                shard.paced(most)
        if self.measure:
            self.metrics.user_records_pending(self.endings.ledger.records)
            measure_answer(self.metrics, stream.name, krecs, entries, start, end)
        if answer.retry:
            self.retries.schedule(stream, answer.retry, end)
        if len(answer.written) == len(krecs):
            # every record written where it was sent: no lane left unconfirmed (no pass over
            # the records to find one)
            self.admission.unconfirmed((), end)
        else:
            self._unconfirmed(krecs, end)

    def apply_error(
        self,
        stream: StreamState,
        krecs: list[KRecord],
        error: BaseException,
        start: float,
        end: float,
        nbytes: int = 0,
    ) -> None:
        """Apply a request's failure (no usable answer) to its records."""
        cost = overload_cost(error)
        gate = self.gate
        gate.observe(end, start, nbytes, Signal.OVERLOAD if cost else Signal.NEUTRAL)
        if type(error) is RequestTimeoutError and not error.stalled:
            gate.too_slow(nbytes)  # it moved, but the path carries less than it needs
        self._log_notices()
        verdict = interpret_error(
            krecs,
            error,
            start,
            end,
            fail_if_throttled=self.config.fail_if_throttled,
            refreshable=self.refreshable,
        )
        attempt = verdict.attempt
        code = attempt.error_code or ""
        if verdict.too_large:
            gate.refused(nbytes)
        _log.info(
            "put_records_failed",
            stream=stream.name,
            error_code=code,
            attempt=1 + max(len(k.members[0].attempts) for k in krecs),
            records=sum(len(k.members) for k in krecs),
            bytes=sum(k.size for k in krecs),
            action=verdict.action.value,
            ambiguous=attempt.ambiguous,
        )
        if self.measure:
            self.metrics.request_time(stream.name, end - start)
            self.metrics.errors(stream.name, None, code, len(krecs))
        self._carry_out(stream, krecs, verdict, end, cost)
        self._unconfirmed(krecs, end)

    def _carry_out(
        self,
        stream: StreamState,
        krecs: list[KRecord],
        verdict: RequestFailure,
        end: float,
        cost: float,
    ) -> None:
        """What the failed request's verdict says to do with its records: the named bad
        entries fail (the rest sent again), halves go apart, they fail, or are retried."""
        attempt = verdict.attempt
        code = attempt.error_code or ""
        if verdict.named is not None:
            rekeyed: set[int] = set()
            for i in verdict.named:
                krec = krecs[i]
                if krec.partition_key is None and code == "ValidationException":
                    # Put without a key while the stream was AUTO; Kinesis wants one now
                    # (switched back before a refresh showed it): a key, and a reload.
                    self.maps.give_key(krec, self.rand)
                    rekeyed.add(i)
                    continue
                self.endings.fail(
                    krec.members,
                    failed(code, attempt.error_message or "", end, attempt, krec.aggregated),
                    krec.shard.shard_id,
                )
            if rekeyed:
                self.outbox.push(Refresh(stream))
            named = set(verdict.named) - rekeyed
            note = resent_without(attempt)
            # a re-keyed record's history shows its own rejection; the others', another's
            again = [
                (k, attempt if i in rekeyed else note)
                for i, k in enumerate(krecs)
                if i not in named
            ]
            if again:
                _log.info(
                    "records_resent_without_invalid_entry",
                    stream=stream.name,
                    error_code=code,
                    failed=len(named),
                    records=len(again),
                )
                self.retries.schedule(stream, again, end)
            return
        if verdict.bisect:
            note = resent_smaller(attempt) if verdict.too_large else resent_in_halves(attempt)
            for krec in krecs:
                for outcome in krec.live():
                    outcome.attempted(note)
            event = "put_records_too_large_split" if verdict.too_large else None
            _log.info(
                event or "put_records_rejected_split",
                stream=stream.name,
                error_code=code,
                records=sum(len(k.members) for k in krecs),
            )
            half = len(krecs) // 2
            self.outbox.push(SendApart(stream, krecs[:half]))
            self.outbox.push(SendApart(stream, krecs[half:]))
            return
        for shard in {k.shard for k in krecs}:
            shard.wrote(False)
            if verdict.throttled:
                shard.limiter.on_throttled(end)
                shard.paced(stream.agg_max_size)
        if verdict.action is Action.FAIL:
            for krec in krecs:
                res = failed(code, attempt.error_message or "", end, attempt, krec.aggregated)
                self.endings.fail(krec.members, res, krec.shard.shard_id)
            return
        if verdict.action is Action.REFRESH_CREDENTIALS:
            self.outbox.push(RefreshCredentials())
        self.retries.schedule(stream, [(k, attempt) for k in krecs], end, cost)
