"""Per-shard rate limiting: token buckets with an adaptive (AIMD) rate. Pure: time is passed in.

Each shard gets a bucket for records/s and one for bytes/s, refilled at ``rate_limit`` percent
of the shard limits (1000 records/s, 1 MiB/s), holding at most one second's worth. Kinesis
records are *admitted* in order while there are tokens for them; the rest wait for the
refill, so a large batch goes out spread over time instead of in one burst beyond the
shard's budget. Whatever the rate, a full bucket lets one Kinesis record through: a record
larger than the bytes bucket goes when the bytes bucket is full (and empties it), and a
shard whose records bucket holds less than one token (a small ``rate_limit``, halved by
throttling) sends one record each time that bucket is full. So every shard sends at least
one record, of any size up to the maximum, per refill period (one second), and its
successes let the rate recover.

Streams whose records may reach 10 MiB burst: "to accommodate large records, a Kinesis data
stream can burst up to 10 MiB while averaging 1 MiB per second" (AWS developer guide,
"Handle large records"). So the bytes bucket holds at least ``burst_bytes`` (the stream's
largest record) while it refills at the shard's rate: a maximum-size record waits only for
its own tokens, and the records behind it go as soon as it is admitted and tokens are back.

When Kinesis throttles the shard anyway (other producers share it, or ``rate_limit`` > 100),
the rate multiplier is halved (at most once per ``decrease_interval``); every second without
throttling adds ``increase_per_second`` back, up to 1.0. Several producers sharing a stream
so converge on their fair share instead of spinning on retries.

An aggregate shrinks with the multiplier (:func:`paced_size`): ``aggregation_max_size``
at the full rate, that times the multiplier below it, never under :data:`PACED_FLOOR`
bytes. Kinesis throttles an entry whole, so when producers share a shard each entry is a
draw for the shard's bucket: entries of 50 KB at a sixth of a shard's bytes per second are
few and coarse draws, and one producer's luck becomes its share. Entries of 8 KB make the
draws many and the shares even (``benchmarks fleet sim``, 6 producers on one shard at
2.25x, 60 s: the slowest producer's bytes confirmed over the fastest's rose from 0.55-0.75
to 0.87-0.95; docs/scaling.md). Unthrottled, nothing changes.
"""

from __future__ import annotations

__all__ = ["PACED_FLOOR", "ShardLimiter", "TokenBucket", "paced_size"]

SHARD_RECORDS_PER_SECOND = 1000.0
SHARD_BYTES_PER_SECOND = 1024.0 * 1024.0
#: a throttled shard's aggregates are not made smaller than this by :func:`paced_size`
PACED_FLOOR = 4096


def paced_size(most: int, multiplier: float) -> int:
    """The bytes a shard's aggregate may hold when its limiter runs at ``multiplier`` of its
    rate and ``most`` is the stream's ``aggregation_max_size``."""
    if multiplier >= 1.0:
        return most
    return max(min(PACED_FLOOR, most), int(most * multiplier))


class TokenBucket:
    """Tokens refilled at ``rate`` per second up to ``capacity``; reservations may go negative."""

    __slots__ = ("capacity", "rate", "tokens", "updated")

    def __init__(self, rate: float, capacity: float, now: float) -> None:
        if rate <= 0 or capacity <= 0:
            raise ValueError("rate and capacity must be positive")
        self.rate = rate
        self.capacity = capacity
        self.tokens = capacity
        self.updated = now

    def refill(self, now: float) -> None:
        elapsed = now - self.updated
        if elapsed > 0:
            self.tokens = min(self.capacity, self.tokens + elapsed * self.rate)
            self.updated = now

    def wait_time(self, amount: float, now: float) -> float:
        """Seconds until ``amount`` tokens are there (0 if they are now). Changes nothing
        but the refill."""
        self.refill(now)
        missing = amount - self.tokens
        return 0.0 if missing <= 0 else missing / self.rate

    def take(self, amount: float, now: float) -> None:
        """Take ``amount`` tokens now (the balance may go negative)."""
        self.refill(now)
        self.tokens -= amount


class ShardLimiter:
    """Records and bytes buckets of one shard, with an AIMD multiplier on their rates."""

    __slots__ = (
        "_base_bytes",
        "_base_records",
        "_burst",
        "_bytes",
        "_last_decrease",
        "_last_increase",
        "_records",
        "_share",
        "decrease_factor",
        "decrease_interval",
        "increase_per_second",
        "min_multiplier",
        "multiplier",
        "throttles",
    )

    def __init__(
        self,
        rate_limit_percent: float,
        now: float,
        *,
        records_per_second: float = SHARD_RECORDS_PER_SECOND,
        bytes_per_second: float = SHARD_BYTES_PER_SECOND,
        decrease_factor: float = 0.5,
        decrease_interval: float = 0.2,
        increase_per_second: float = 0.1,
        min_multiplier: float = 0.05,
        burst_bytes: float = 0.0,
    ) -> None:
        self._share = rate_limit_percent / 100.0
        self._base_records = records_per_second * self._share
        self._base_bytes = bytes_per_second * self._share
        self._burst = float(burst_bytes)
        self._records = TokenBucket(self._base_records, self._base_records, now)
        self._bytes = TokenBucket(self._base_bytes, max(self._base_bytes, self._burst), now)
        self.multiplier = 1.0
        self.decrease_factor = decrease_factor
        self.decrease_interval = decrease_interval
        self.increase_per_second = increase_per_second
        self.min_multiplier = min_multiplier
        self._last_decrease = -1e18
        self._last_increase = now
        self.throttles = 0

    @property
    def records_rate(self) -> float:
        return self._records.rate

    @property
    def bytes_rate(self) -> float:
        return self._bytes.rate

    def admit(self, sizes: list[int], now: float) -> int:
        """How many of these Kinesis records (by size) may go now; takes their tokens.

        Records are admitted in order while a record token and their bytes are there. The
        first record also goes when a bucket too small for it is full (into debt): a record
        larger than the bytes bucket, or any record when the records bucket holds less than
        one token. So nothing waits forever.
        """
        records, size_bucket = self._records, self._bytes
        records.refill(now)
        size_bucket.refill(now)
        tokens, room = records.tokens, size_bucket.tokens
        n = 0
        for size in sizes:
            if (tokens >= 1.0 or (n == 0 and tokens >= records.capacity)) and (
                room >= size or (n == 0 and room >= size_bucket.capacity)
            ):
                # A record bigger than a full bucket empties it (no debt beyond it): the
                # next one can go a refill period later, whatever the sizes and the rate.
                tokens = max(0.0, tokens - 1.0) if tokens < 1.0 else tokens - 1.0
                room = max(0.0, room - size) if size > room else room - size
                n += 1
            else:
                break
        records.tokens = tokens
        size_bucket.tokens = room
        return n

    def admit_one(self, size: int, now: float) -> int:
        """:meth:`admit` of one record of ``size`` bytes (1: it may go now, its tokens
        taken; 0: it waits, nothing changed but the refill), without a list of sizes, and
        with both buckets' ``refill`` inline (each bucket's tokens and the debt rule as in
        :meth:`admit`, by comparisons rather than ``min``/``max`` calls)."""
        records, size_bucket = self._records, self._bytes
        tokens = records.tokens
        elapsed = now - records.updated
        if elapsed > 0:
            tokens += elapsed * records.rate
            if tokens > records.capacity:
                tokens = records.capacity
            records.tokens = tokens
            records.updated = now
        room = size_bucket.tokens
        elapsed = now - size_bucket.updated
        if elapsed > 0:
            room += elapsed * size_bucket.rate
            if room > size_bucket.capacity:
                room = size_bucket.capacity
            size_bucket.tokens = room
            size_bucket.updated = now
        if (tokens >= 1.0 or tokens >= records.capacity) and (
            room >= size or room >= size_bucket.capacity
        ):
            # a bucket too small for the record goes empty, not into debt
            records.tokens = 0.0 if tokens < 1.0 else tokens - 1.0
            size_bucket.tokens = 0.0 if size > room else room - size
            return 1
        return 0

    def wait_time(
        self, sizes: list[int], now: float, quantum: float = 0.1, spread: float = 0.0
    ) -> float:
        """Seconds until the next records are worth sending: as many of ``sizes`` (in order)
        as ``quantum`` seconds of refill pay for, at least the first.

        Waiting for a quantum, not for each token, keeps requests few and full when a shard
        is at its limit. Rounded up by a microsecond so that after sleeping this long the
        refill has surely happened (float rounding must not leave it a hair short).

        While throttling holds the limiter below its full rate, the wait grows by
        ``spread`` (a uniform draw in [0, 1)) of a quantum: producers whose limiters run at
        the same pace send at the same period, and without a random part each keeps its
        place in the shard's second for good, the one just after another's entry throttled
        every time (the synchronization of periodic timers: Floyd and Jacobson, 1994). The
        rate is the same (the bucket keeps refilling while it waits).
        """
        records, size_bucket = self._records, self._bytes
        max_count = max(1.0, records.rate * quantum)
        max_bytes = size_bucket.rate * quantum
        count = 0
        total = 0.0
        for size in sizes:
            if count and (count + 1 > max_count or total + size > max_bytes):
                break
            count += 1
            total += size
        need = min(total, size_bucket.capacity)
        wait = max(
            # a records bucket of under one token lets a record go when it is full
            records.wait_time(min(float(count), records.capacity), now),
            size_bucket.wait_time(need, now),
        )
        if self.multiplier < 1.0:
            wait += spread * quantum
        return wait + 1e-6

    def reserve(self, records: int, size: int, now: float) -> float:
        """Reserve tokens for a batch; returns how long to wait before sending it."""
        wait = max(
            self._records.wait_time(min(records, self._records.capacity), now),
            self._bytes.wait_time(min(size, self._bytes.capacity), now),
        )
        self._records.take(records, now)
        self._bytes.take(size, now)
        return wait

    def on_throttled(self, now: float) -> None:
        """Kinesis throttled this shard: back off (multiplicative decrease)."""
        self.throttles += 1
        if now - self._last_decrease < self.decrease_interval:
            return
        self._last_decrease = now
        self._last_increase = now
        self._set(max(self.min_multiplier, self.multiplier * self.decrease_factor), now)

    def at_floor(self) -> bool:
        """Has throttling slowed it as far as it goes (``min_multiplier``)?"""
        return self.multiplier <= self.min_multiplier

    def on_success(self, now: float) -> bool:
        """A write to this shard went through: recover (additive increase). Returns
        whether the multiplier changed. At the full rate it changes nothing that is read
        (the time of the last increase counts only below it, and going below it sets it):
        callers may skip it then."""
        if self.multiplier >= 1.0:
            self._last_increase = now
            return False
        elapsed = now - self._last_increase
        if elapsed <= 0:
            return False
        self._last_increase = now
        self._set(min(1.0, self.multiplier + elapsed * self.increase_per_second), now)
        return True

    @property
    def burst_bytes(self) -> float:
        """The bytes bucket's floor: the largest record it must let through."""
        return self._burst

    def resize(
        self, records_per_second: float, bytes_per_second: float, burst_bytes: float, now: float
    ) -> None:
        """New shard limits (an ``AUTO`` stream's shard count changed) or a new largest
        record (the stream's ``MaxRecordSizeInKiB`` changed); keeps the multiplier."""
        self._base_records = records_per_second * self._share
        self._base_bytes = bytes_per_second * self._share
        self._burst = float(burst_bytes)
        self._set(self.multiplier, now)

    def _set(self, multiplier: float, now: float) -> None:
        self.multiplier = multiplier
        for bucket, base, floor in (
            (self._records, self._base_records, 0.0),
            (self._bytes, self._base_bytes, self._burst),
        ):
            bucket.refill(now)
            bucket.rate = base * multiplier
            bucket.capacity = max(base * multiplier, floor)
            bucket.tokens = min(bucket.tokens, bucket.capacity)
