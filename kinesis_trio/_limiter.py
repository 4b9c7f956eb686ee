"""Per-shard rate limiting: token buckets with an adaptive (AIMD) rate. Pure: time is passed in.

Each shard gets a bucket for records/s and one for bytes/s, refilled at ``rate_limit`` percent
of the shard limits (1000 records/s, 1 MiB/s), holding at most one second's worth. A batch
*reserves* its tokens and is told how long to wait; buckets may go into debt, so a batch
larger than the bucket still goes, just later, and nothing starves.

When Kinesis throttles the shard anyway (other producers share it, or ``rate_limit`` > 100),
the rate multiplier is halved (at most once per ``decrease_interval``); every second without
throttling adds ``increase_per_second`` back, up to 1.0. Several producers sharing a stream
so converge on their fair share instead of spinning on retries.
"""

from __future__ import annotations

__all__ = ["ShardLimiter", "TokenBucket"]

SHARD_RECORDS_PER_SECOND = 1000.0
SHARD_BYTES_PER_SECOND = 1024.0 * 1024.0


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
        "_bytes",
        "_last_decrease",
        "_last_increase",
        "_records",
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
    ) -> None:
        share = rate_limit_percent / 100.0
        self._base_records = records_per_second * share
        self._base_bytes = bytes_per_second * share
        self._records = TokenBucket(self._base_records, self._base_records, now)
        self._bytes = TokenBucket(self._base_bytes, self._base_bytes, now)
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

    def reserve(self, records: int, size: int, now: float) -> float:
        """Reserve tokens for a batch; returns how long to wait before sending it."""
        wait = max(self._records.wait_time(records, now), self._bytes.wait_time(size, now))
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

    def on_success(self, now: float) -> None:
        """A write to this shard went through: recover (additive increase)."""
        if self.multiplier >= 1.0:
            self._last_increase = now
            return
        elapsed = now - self._last_increase
        if elapsed <= 0:
            return
        self._last_increase = now
        self._set(min(1.0, self.multiplier + elapsed * self.increase_per_second), now)

    def _set(self, multiplier: float, now: float) -> None:
        self.multiplier = multiplier
        for bucket, base in ((self._records, self._base_records), (self._bytes, self._base_bytes)):
            bucket.refill(now)
            bucket.rate = base * multiplier
            bucket.capacity = base * multiplier
            bucket.tokens = min(bucket.tokens, bucket.capacity)
