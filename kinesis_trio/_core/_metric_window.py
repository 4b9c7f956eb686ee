"""The open window: the recording calls and the statistic sets they fill, rolled up on read."""

from __future__ import annotations

import math

from .._metric_names import (
    _DEPTH,
    _ERROR_CODE,
    _LEVEL_RANK,
    _SHARD,
    _SPECS,
    _STREAM,
    Dimensions,
    MetricsGranularity,
    MetricsLevel,
)

#: per (metric, dimensions): sample count, sum, minimum, maximum
Stats = dict[tuple[str, Dimensions], list[float]]

#: the metrics ``shard_answer`` records
_ANSWER_NAMES = frozenset(
    {
        "UserRecordsPut",
        "UserRecordsDataPut",
        "BufferingTime",
        "KinesisRecordsPut",
        "KinesisRecordsDataPut",
        "AllErrors",
        "UserRecordsPerKinesisRecord",
        "RetriesPerRecord",
    }
)


def _new_answer_sums() -> list[float]:
    """A shard's open sums: user records, their bytes, the least and most mean bytes of an
    answer's, buffering ms (summed over the records), the least and most mean ms; Kinesis
    records, their bytes, least and most mean; aggregates, the user records in them, the
    fewest and most in one; retries summed over the user records, the fewest and most of
    one."""
    inf = math.inf
    return [0, 0.0, inf, -inf, 0.0, inf, -inf, 0, 0.0, inf, -inf, 0, 0.0, inf, -inf, 0.0, inf, -inf]


class MetricWindow:
    """The recording side of :class:`Metrics`: one window of statistic sets per
    (metric, dimensions), filled by the recording calls.

    Calls for metrics above ``level`` return at once. A sample is kept under its most
    specific dimensions only; :meth:`_open_stats` and :meth:`_closed_stats` roll it up to
    the coarser ones.
    """

    def __init__(self, level: MetricsLevel, granularity: MetricsGranularity) -> None:
        rank = _LEVEL_RANK[level]
        self._enabled = frozenset(
            name for name, spec in _SPECS.items() if _LEVEL_RANK[spec.level] <= rank
        )
        self._active = bool(self._enabled)
        self._depth = _DEPTH[granularity]
        # A sample is kept once, under its most specific dimensions; the coarser ones
        # (``_ancestors``) get it when the window is read (a sum, a least and a most roll up
        # in any order). One dict update per sample instead of one per dimension set: an
        # answer from 32 shards records some 250 samples.
        self._window: Stats = {}
        self._ancestors: dict[Dimensions, tuple[Dimensions, ...]] = {}
        self._totals: dict[str, float] = {}
        self._scopes: dict[tuple[str, str | None], tuple[Dimensions, ...]] = {}
        self._error_scopes: dict[tuple[str, str | None, str], tuple[Dimensions, ...]] = {}
        # stream -> shard -> the open sums of its answers (``shard_answer``), folded into
        # the window when it is read: a few additions per shard and answer, not 7 samples
        self._answers: dict[str, dict[str, list[float]]] = {}
        self._answer_names = _ANSWER_NAMES & self._enabled

    @property
    def enabled(self) -> bool:
        """False at level NONE (every recording call is a no-op)."""
        return self._active

    def is_enabled(self, name: str) -> bool:
        """Whether metric ``name`` (a KPL name, e.g. ``"RequestTime"``) is recorded."""
        return name in self._enabled

    # -- recording --------------------------------------------------------------------------

    def _scope(self, stream: str, shard: str | None, depth: int) -> tuple[Dimensions, ...]:
        key = (stream, shard if depth >= 2 else None)
        scopes = self._scopes.get(key)
        if scopes is None:
            limit = min(depth, self._depth)
            out: list[Dimensions] = [()]
            if limit >= 1 and stream:
                out.append(((_STREAM, stream),))
                if limit >= 2 and key[1]:
                    out.append(((_STREAM, stream), (_SHARD, key[1])))
            scopes = self._scopes[key] = tuple(out)
        return scopes

    def _put(
        self,
        name: str,
        scopes: tuple[Dimensions, ...],
        n: int,
        total: float,
        lo: float,
        hi: float,
    ) -> None:
        dims = scopes[-1]
        key = (name, dims)
        stats = self._window.get(key)
        if stats is None:
            self._window[key] = [n, total, lo, hi]
            if dims not in self._ancestors:
                self._ancestors[dims] = scopes[:-1]
        else:
            stats[0] += n
            stats[1] += total
            if lo < stats[2]:
                stats[2] = lo
            if hi > stats[3]:
                stats[3] = hi
        totals = self._totals
        totals[name] = totals.get(name, 0.0) + total

    def _samples(self, name: str, scopes: tuple[Dimensions, ...], n: int, value: float) -> None:
        if n > 0:
            self._put(name, scopes, n, value * n, value, value)

    def user_records_received(self, stream: str, count: int) -> None:
        """UserRecordsReceived: ``count`` user records accepted by ``put`` (detailed)."""
        if self._active and "UserRecordsReceived" in self._enabled:
            self._samples("UserRecordsReceived", self._scope(stream, None, 1), count, 1.0)

    def user_records_pending(self, count: int) -> None:
        """UserRecordsPending: a sample of the records buffered or in flight (detailed)."""
        self.gauge("UserRecordsPending", count)

    def request_gate(self, limit: int, waiting: int, budget: float) -> None:
        """RequestConcurrencyLimit, RequestsWaitingForSlot, RetryBudgetLevel: a sample of
        the adaptive request concurrency and of the retry budget (detailed, global)."""
        self.gauge("RequestConcurrencyLimit", limit)
        self.gauge("RequestsWaitingForSlot", waiting)
        self.gauge("RetryBudgetLevel", budget)

    def gauge(self, name: str, value: float) -> None:
        """A sample of a global gauge; ``totals()`` keeps its latest value."""
        if self._active and name in self._enabled:
            value = float(value)
            self._put(name, ((),), 1, value, value, value)
            self._totals[name] = value

    def user_records_put(
        self, stream: str, shard: str, count: int, data_bytes: int, *, failed: int = 0
    ) -> None:
        """UserRecordsPut (summary) and UserRecordsDataPut (detailed) for ``count`` successes.

        ``failed`` user records that finally failed add zero samples to UserRecordsPut, as
        in the KPL (its average is then the success rate; count minus sum the failures).
        """
        if not self._active:
            return
        scopes = self._scope(stream, shard, 2)
        if "UserRecordsPut" in self._enabled and count + failed > 0:
            self._put(
                "UserRecordsPut",
                scopes,
                count + failed,
                float(count),
                0.0 if failed > 0 else 1.0,
                1.0 if count > 0 else 0.0,
            )
        if "UserRecordsDataPut" in self._enabled and count > 0:
            mean = data_bytes / count
            self._put("UserRecordsDataPut", scopes, count, float(data_bytes), mean, mean)

    def kinesis_records_put(
        self, stream: str, shard: str, count: int, data_bytes: int, *, failed: int = 0
    ) -> None:
        """KinesisRecordsPut (summary) and KinesisRecordsDataPut (detailed).

        Also adds ``count`` zero samples to AllErrors, as the KPL does for each Kinesis
        record put. ``failed`` Kinesis records (per-record errors) add zero samples to
        KinesisRecordsPut; report their error codes with :meth:`errors`.
        """
        if not self._active:
            return
        scopes = self._scope(stream, shard, 2)
        enabled = self._enabled
        if "KinesisRecordsPut" in enabled and count + failed > 0:
            self._put(
                "KinesisRecordsPut",
                scopes,
                count + failed,
                float(count),
                0.0 if failed > 0 else 1.0,
                1.0 if count > 0 else 0.0,
            )
        if count > 0:
            if "KinesisRecordsDataPut" in enabled:
                mean = data_bytes / count
                self._put("KinesisRecordsDataPut", scopes, count, float(data_bytes), mean, mean)
            if "AllErrors" in enabled:
                self._put("AllErrors", scopes, count, 0.0, 0.0, 0.0)

    def errors(self, stream: str, shard: str | None, code: str, count: int) -> None:
        """ErrorsByCode (with an ``ErrorCode`` dimension) and AllErrors (summary).

        Count once per Kinesis record for per-record errors; ``shard=None`` for errors that
        cannot be traced to a shard (a failed request), recorded per stream and globally.
        """
        if not self._active or count <= 0:
            return
        scopes = self._scope(stream, shard, 2)
        if "ErrorsByCode" in self._enabled:
            key = (stream, shard if self._depth >= 2 else None, code)
            coded = self._error_scopes.get(key)
            if coded is None:
                prefix = ((_ERROR_CODE, code or "Unknown"),)
                coded = self._error_scopes[key] = tuple(prefix + dims for dims in scopes)
            self._samples("ErrorsByCode", coded, count, 1.0)
        if "AllErrors" in self._enabled:
            self._samples("AllErrors", scopes, count, 1.0)

    def retries_per_record(self, stream: str, shard: str, retries: int, count: int) -> None:
        """RetriesPerRecord: ``count`` user records finished after ``retries`` retries."""
        if self._active and "RetriesPerRecord" in self._enabled:
            self._samples("RetriesPerRecord", self._scope(stream, shard, 2), count, float(retries))

    def user_record_expired(self, stream: str, shard: str | None, count: int) -> None:
        """UserRecordExpired: ``count`` user records failed for reaching the record TTL."""
        if self._active and "UserRecordExpired" in self._enabled:
            self._samples("UserRecordExpired", self._scope(stream, shard, 2), count, 1.0)

    def spool_recovery(self, records: int, failed: int, damaged: int) -> None:
        """SpoolRecordsRecovered / SpoolRecordsRecoveredFailed / SpoolRecordsDamaged: what a
        producer found in its spool at start, and how it ended (global counters)."""
        if not self._active:
            return
        for name, count in (
            ("SpoolRecordsRecovered", records),
            ("SpoolRecordsRecoveredFailed", failed),
            ("SpoolRecordsDamaged", damaged),
        ):
            if name in self._enabled:
                self._samples(name, ((),), count, 1.0)

    def failed_records_dropped(self, stream: str, count: int) -> None:
        """FailedRecordsDropped: ``count`` failed records not kept for ``failures()`` (its
        buffer was full)."""
        if self._active and "FailedRecordsDropped" in self._enabled:
            self._samples("FailedRecordsDropped", self._scope(stream, None, 1), count, 1.0)

    def buffering_time(self, stream: str, shard: str, seconds: float, count: int) -> None:
        """BufferingTime (ms): ``count`` user records waited ``seconds`` before a send."""
        if self._active and "BufferingTime" in self._enabled:
            self._samples("BufferingTime", self._scope(stream, shard, 2), count, seconds * 1000.0)

    def stream_sample(self, name: str, stream: str, seconds: float) -> None:
        """A sample in ms, per stream: ``OldestRecordAge`` (of its oldest unresolved
        record), ``ProjectedDelay`` (of a record accepted now, on its slowest shard) or
        ``PutAdmissionWait`` (how long one ``put`` waited for room)."""
        if self._active and name in self._enabled:
            ms = seconds * 1000.0
            self._put(name, self._scope(stream, None, 1), 1, ms, ms, ms)

    def throttled(self, stream: str, answered: int, throttled: int) -> None:
        """KinesisRecordsThrottled: of ``answered`` Kinesis records in one PutRecords
        answer, ``throttled`` were (a sample of 1 or 0 each: its average is the stream's
        share of throttled records)."""
        if self._active and answered and "KinesisRecordsThrottled" in self._enabled:
            self._put(
                "KinesisRecordsThrottled",
                self._scope(stream, None, 1),
                answered,
                float(throttled),
                0.0 if throttled < answered else 1.0,
                1.0 if throttled else 0.0,
            )

    def request_time(self, stream: str, seconds: float) -> None:
        """RequestTime (ms): the duration of one PutRecords request (detailed)."""
        if self._active and "RequestTime" in self._enabled:
            ms = seconds * 1000.0
            self._put("RequestTime", self._scope(stream, None, 1), 1, ms, ms, ms)

    def user_records_per_kinesis_record(self, stream: str, shard: str, value: int) -> None:
        """UserRecordsPerKinesisRecord: user records in one (aggregated) Kinesis record."""
        if self._active and "UserRecordsPerKinesisRecord" in self._enabled:
            v = float(value)
            self._put("UserRecordsPerKinesisRecord", self._scope(stream, shard, 2), 1, v, v, v)

    def user_records_per_kinesis_records(
        self, stream: str, shard: str, count: int, total: int, lo: int, hi: int
    ) -> None:
        """UserRecordsPerKinesisRecord for ``count`` aggregated records of one shard at
        once: ``total`` user records in all, ``lo`` the fewest in one, ``hi`` the most
        (the same samples as ``count`` calls of ``user_records_per_kinesis_record``)."""
        if self._active and count > 0 and "UserRecordsPerKinesisRecord" in self._enabled:
            scopes = self._scope(stream, shard, 2)
            self._put("UserRecordsPerKinesisRecord", scopes, count, float(total), lo, hi)

    def shard_answer(
        self,
        stream: str,
        shard: str,
        users: int,
        user_bytes: int,
        kinesis: int,
        kinesis_bytes: int,
        buffering: float,
        aggregates: int,
        in_aggregates: int,
        lo: int,
        hi: int,
        retries: int = 0,
        least_retries: int = 0,
        most_retries: int = 0,
    ) -> None:
        """One shard's successes in one PutRecords answer, in one call: the samples of
        ``user_records_put``, ``kinesis_records_put``, ``buffering_time`` (``buffering``:
        the seconds waited, summed over the user records),
        ``user_records_per_kinesis_records`` (``aggregates`` of them holding
        ``in_aggregates`` user records, ``lo`` to ``hi`` in one) and
        ``retries_per_record`` (``retries``: summed over the user records,
        ``least_retries`` to ``most_retries`` for one).

        They are summed per shard and become samples of the window when it is read
        (``snapshot``, ``totals``, each upload): the same statistic sets, at a few
        additions per call."""
        values = [users, user_bytes, kinesis, kinesis_bytes, buffering, aggregates]
        values += [in_aggregates, lo, hi, retries, least_retries, most_retries]
        self.shard_answers(stream, {shard: values})

    def shard_answers(self, stream: str, groups: dict[str, list[float]]) -> None:
        """Every shard's successes in one PutRecords answer, in one call: ``groups`` maps a
        shard id to :meth:`shard_answer`'s values, in its order (``lo`` not read when
        ``aggregates`` is 0). On a stream of thousands of shards an answer's records are
        mostly one per shard: a call per shard would be paid per record."""
        if not self._answer_names:
            return
        shards = self._answers.get(stream)
        if shards is None:
            shards = self._answers[stream] = {}
        for shard, group in groups.items():
            sums = shards.get(shard)
            if sums is None:
                sums = shards[shard] = _new_answer_sums()
            # (users, their bytes, Kinesis records, their bytes, seconds waited summed over
            # the users, aggregates, their users, fewest and most in one, retries: their sum
            # over the users, fewest and most of one)
            users, ubytes, kinesis, kbytes, waited, aggs, in_aggs, lo, hi, tries, few, most = group
            if users > 0:
                sums[0] += users
                sums[1] += ubytes
                mean = ubytes / users
                if mean < sums[2]:
                    sums[2] = mean
                if mean > sums[3]:
                    sums[3] = mean
                ms = waited / users * 1000.0
                sums[4] += ms * users
                if ms < sums[5]:
                    sums[5] = ms
                if ms > sums[6]:
                    sums[6] = ms
                sums[15] += tries
                if few < sums[16]:
                    sums[16] = few
                if most > sums[17]:
                    sums[17] = most
            if kinesis > 0:
                sums[7] += kinesis
                sums[8] += kbytes
                mean = kbytes / kinesis
                if mean < sums[9]:
                    sums[9] = mean
                if mean > sums[10]:
                    sums[10] = mean
            if aggs > 0:
                sums[11] += aggs
                sums[12] += in_aggs
                if lo < sums[13]:
                    sums[13] = lo
                if hi > sums[14]:
                    sums[14] = hi

    def _fold_answers(self) -> None:
        """The open sums of ``shard_answer`` into the window, as samples."""
        answers = self._answers
        if not answers:
            return
        self._answers = {}
        enabled = self._answer_names
        put = self._put
        for stream, shards in answers.items():
            for shard, sums in shards.items():
                scopes = self._scope(stream, shard, 2)
                users = int(sums[0])
                if users > 0:
                    if "UserRecordsPut" in enabled:
                        put("UserRecordsPut", scopes, users, float(users), 1.0, 1.0)
                    if "UserRecordsDataPut" in enabled:
                        put("UserRecordsDataPut", scopes, users, sums[1], sums[2], sums[3])
                    if "BufferingTime" in enabled:
                        put("BufferingTime", scopes, users, sums[4], sums[5], sums[6])
                    if "RetriesPerRecord" in enabled:
                        least, most = float(sums[16]), float(sums[17])
                        put("RetriesPerRecord", scopes, users, sums[15], least, most)
                kinesis = int(sums[7])
                if kinesis > 0:
                    if "KinesisRecordsPut" in enabled:
                        put("KinesisRecordsPut", scopes, kinesis, float(kinesis), 1.0, 1.0)
                    if "KinesisRecordsDataPut" in enabled:
                        put("KinesisRecordsDataPut", scopes, kinesis, sums[8], sums[9], sums[10])
                    if "AllErrors" in enabled:
                        put("AllErrors", scopes, kinesis, 0.0, 0.0, 0.0)
                aggregates = int(sums[11])
                if aggregates > 0 and "UserRecordsPerKinesisRecord" in enabled:
                    put(
                        "UserRecordsPerKinesisRecord",
                        scopes,
                        aggregates,
                        sums[12],
                        sums[13],
                        sums[14],
                    )

    def kinesis_records_per_request(self, stream: str, value: int) -> None:
        """KinesisRecordsPerPutRecordsRequest: Kinesis records in one PutRecords request."""
        if self._active and "KinesisRecordsPerPutRecordsRequest" in self._enabled:
            v = float(value)
            scopes = self._scope(stream, None, 1)
            self._put("KinesisRecordsPerPutRecordsRequest", scopes, 1, v, v, v)

    def user_records_per_request(self, stream: str, value: int) -> None:
        """UserRecordsPerPutRecordsRequest: user records in one PutRecords request."""
        if self._active and "UserRecordsPerPutRecordsRequest" in self._enabled:
            v = float(value)
            scopes = self._scope(stream, None, 1)
            self._put("UserRecordsPerPutRecordsRequest", scopes, 1, v, v, v)

    # -- reading ----------------------------------------------------------------------------

    def _rolled_up(self, window: Stats) -> Stats:
        """Every dimension set of the window: each sample added to its coarser sets too."""
        out = {key: list(stats) for key, stats in window.items()}
        ancestors = self._ancestors
        for (name, dims), (n, total, lo, hi) in window.items():
            for parent in ancestors.get(dims, ()):
                stats = out.get((name, parent))
                if stats is None:
                    out[(name, parent)] = [n, total, lo, hi]
                else:
                    stats[0] += n
                    stats[1] += total
                    stats[2] = min(stats[2], lo)
                    stats[3] = max(stats[3], hi)
        return out

    def _open_stats(self) -> Stats:
        """The current window, every dimension set (it stays open)."""
        self._fold_answers()
        return self._rolled_up(self._window)

    def _closed_stats(self) -> Stats:
        """The current window, every dimension set; a new one opens."""
        self._fold_answers()
        window, self._window = self._window, {}
        stats = self._rolled_up(window)
        # Shard ids come and go with resharding: do not let the caches grow forever.
        if len(self._scopes) > 4096:
            self._scopes.clear()
        if len(self._error_scopes) > 4096:
            self._error_scopes.clear()
        if len(self._ancestors) > 4096:
            self._ancestors.clear()
        return stats

    def totals(self) -> dict[str, float]:
        """Lifetime sums per metric name at global granularity (UserRecordsPending: latest)."""
        self._fold_answers()
        return dict(self._totals)
