"""A batch of records put in one call (``Producer.put_many``): its rule (pure, no awaits).

- **Validated in one pass, before any is accepted.** Every record is a ``(data,
  partition_key)`` or ``(data, partition_key, explicit_hash_key)`` tuple checked as ``put``
  checks one (its data's type, its partition key, its size against the stream's limit, its
  explicit hash key, the spool's limit); the first bad one raises the error ``put`` would
  raise, of the same type, its message led by ``records[i]:``, and nothing is accepted. A
  batch over ``max_outstanding_records``, ``max_outstanding_bytes`` or (with a spool)
  ``spool_max_bytes`` on its own could never be admitted whole: ``ValueError``.
- **Admitted as a whole, or not at all.** The batch is accepted only when the caps and the
  spool have room for all of it and every shard it goes to admits a record (admission by
  time: its lane, the aggregate in formation counted as for ``put``; its channel below
  ``shard_queue_size``). Otherwise :meth:`Batches.accept` raises ``NoRoom`` having changed
  nothing (the shell waits for room for the whole batch: a wait that is cancelled accepted
  nothing). Once admitted, its records are placed in order without another check
  (``Accumulator.lift``): a shard may then owe more than its allowance, or hold more
  batches in its channel than ``shard_queue_size``, by the batch's own records, as one
  record takes a shard past its allowance by its own size. Each has its row (its Outcome)
  from then on, in the batch's order, placed, counted and spooled as ``Engine.accept``
  does one.
"""

from __future__ import annotations

from bisect import bisect_right
from collections.abc import Callable, Iterable
from typing import Any, Generic, TypeVar

from ._accumulator import Accumulator
from ._effects import NoRoom
from ._ledger import Ledger
from ._ordering import KeyOrder
from ._pipeline_data import ShardBuffer, StreamState
from ._record import Record
from ._shards import parse_explicit_hash_key
from ._spool import SpoolBook
from ._validate import coerce_data

__all__ = ["Batch", "Batches", "at_index", "batch_too_large", "route", "unpack"]

R = TypeVar("R", bound=Record)
_SHAPE = "a record is a (data, partition_key) or (data, partition_key, explicit_hash_key) tuple"


class Batch:
    """A validated batch (:meth:`Batches.prepare`), kept while it waits for room: validated
    once, routed again only if the stream's shards changed meanwhile (validated again if
    the stream's limit did)."""

    __slots__ = ("accept_max", "datas", "keyless", "routing", "rows", "shards", "total")

    def __init__(self, accept_max: int) -> None:
        #: each record's data, and ``(partition key, explicit hash key, hash key, data
        #: length, key length, key-table growth)``
        self.datas: list[bytes] = []
        self.rows: list[tuple[Any, str | None, int, int, int, int]] = []
        #: bytes of data and partition keys, all records
        self.total = 0
        #: a record has no partition key (the stream is told once the batch is accepted)
        self.keyless = False
        #: the limit the records were checked against (``StreamState.accept_max``)
        self.accept_max = accept_max
        #: the stream's shard list the records were routed by (None: not yet)
        self.routing: list[ShardBuffer] | None = None
        #: the shards the records go to
        self.shards: list[ShardBuffer] = []

    def routed(self, shards: list[ShardBuffer], found: list[ShardBuffer], total: int) -> None:
        """Validated: ``total`` bytes, going to ``found`` of the stream's ``shards``."""
        self.total = total
        self.routing = shards
        self.shards = found

    def records(self) -> list[tuple[bytes, Any, str | None]]:
        """The batch's records as they were given (their data as bytes)."""
        return [(data, row[0], row[1]) for data, row in zip(self.datas, self.rows, strict=True)]

    def had_keyless(self) -> None:
        """A record without a partition key is in it."""
        self.keyless = True

    def route(self, stream: StreamState) -> None:
        """Know the shards the records go to by the stream's current shards (unless known)."""
        shards = stream.shards
        if self.routing is shards:
            return
        self.routing = shards
        found = dict.fromkeys(shards[route(stream, row[2])] for row in self.rows)
        self.shards = list(found)


def unpack(record: Any) -> tuple[Any, Any, Any]:
    """A record of a batch as ``(data, partition_key, explicit_hash_key)``, or ``TypeError``."""
    if isinstance(record, (tuple, list)):
        if len(record) == 2:
            return record[0], record[1], None
        if len(record) == 3:
            return record[0], record[1], record[2]
        raise TypeError(f"{_SHAPE}, got one of {len(record)} items")
    raise TypeError(f"{_SHAPE}, got {type(record).__name__}")


def at_index(index: int, exc: Exception) -> Exception:
    """``exc``, an error about one record of a batch, naming the record's index: the same
    type, its message led by ``records[index]:`` (``SyncProducer.put_many`` names them so
    too)."""
    try:
        return type(exc)(f"records[{index}]: {exc}")
    except TypeError:  # an error type made otherwise: its message, named, as its base
        return (TypeError if isinstance(exc, TypeError) else ValueError)(f"records[{index}]: {exc}")


def route(stream: StreamState, hash_key: int) -> int:
    """The index of the stream's shard a record of ``hash_key`` goes to (the first for a gap
    in a stale map, as ``Accumulator.place`` routes it)."""
    shard_map = stream.map
    index = bisect_right(shard_map.starts, hash_key) - 1
    if index < 0 or hash_key > shard_map.ends[index]:
        return 0
    return index


def batch_too_large(
    count: int, size: int, max_records: int, max_bytes: int, spool_bytes: int | None
) -> str | None:
    """Why a batch of ``count`` records of ``size`` bytes can never be admitted as a whole
    (over ``max_outstanding_records``, ``_bytes``, or ``spool_max_bytes`` with a spool, on
    its own), or None."""
    if count > max_records:
        return (
            f"a batch of {count} records is over max_outstanding_records ({max_records}): it "
            "could never be admitted as a whole; split it, or raise max_outstanding_records"
        )
    if size > max_bytes:
        return (
            f"a batch of {size} bytes (data plus partition keys) is over "
            f"max_outstanding_bytes ({max_bytes}): it could never be admitted as a whole; "
            "split it, or raise max_outstanding_bytes"
        )
    if spool_bytes is not None and size > spool_bytes:
        return (
            f"a batch of {size} bytes (data plus partition keys) is over spool_max_bytes "
            f"({spool_bytes}): it could never be spooled as a whole; split it"
        )
    return None


def _spooled_too_large(size: int, spool_max: int) -> str:
    return (
        f"record too large: {size} bytes with its partition key, over spool_max_bytes "
        f"({spool_max}): it could never be spooled"
    )


class Batches(Generic[R]):
    """The engine's part for batches: validation, admission as a whole, placement."""

    __slots__ = (
        "_acc",
        "_check_keyless",
        "_ledger",
        "_make",
        "_order",
        "_place",
        "_refuse",
        "_too_large",
        "spool",
    )

    def __init__(
        self,
        acc: Accumulator,
        ledger: Ledger,
        order: KeyOrder | None,
        make: type[R],
        checks: tuple[
            Callable[[StreamState], None],
            Callable[[StreamState, int, int], str],
            Callable[[str], None],
        ],
    ) -> None:
        self._acc = acc
        self._ledger = ledger
        self._order = order
        #: where a record is placed: ``Accumulator.add``, or per-key ordering's ``accept``
        self._place = acc.add if order is None else order.accept
        self._make = make
        #: the engine's own: a keyless record's check, a too large one's error, what a
        #: spool's refusal raises
        self._check_keyless, self._too_large, self._refuse = checks
        #: the spool's book (``Engine.open_spool``), or None
        self.spool: SpoolBook | None = None

    def use_spool(self, spool: SpoolBook) -> None:
        """The spool opened: every record accepted from now is spooled."""
        self.spool = spool

    def prepare(
        self,
        stream: StreamState,
        records: Iterable[Any],
        key_of: Callable[[Any], tuple[int, int, int] | None],
        key_info: Callable[[str], tuple[int, int, int]],
    ) -> Batch:
        """Validate ``records`` for ``stream`` (``key_of``: the engine's key cache,
        ``key_info`` its check of a new key); raises naming the first bad one's index."""
        accept_max = stream.accept_max
        spool = self.spool
        spool_max = None if spool is None else spool.max_bytes
        batch = Batch(accept_max)
        datas, rows = batch.datas, batch.rows
        add_data, add_row = datas.append, rows.append
        # routed in the same pass (the shards that must admit it)
        shards, shard_map = stream.shards, stream.map
        starts, ends = shard_map.starts, shard_map.ends
        found: dict[ShardBuffer, None] = {}
        total = 0
        i = -1
        try:
            for record in records:
                i += 1
                if type(record) is tuple and len(record) == 2:
                    data, partition_key = record
                    explicit_hash_key = None
                else:
                    data, partition_key, explicit_hash_key = unpack(record)
                if type(data) is not bytes:
                    data = coerce_data(data)
                try:
                    key = key_of(partition_key)
                except TypeError:  # unhashable: key_info names the problem
                    key = None
                if key is None:
                    if partition_key is None:
                        self._check_keyless(stream)
                        batch.had_keyless()
                        key = (0, 0, 0)
                    else:
                        key = key_info(partition_key)
                pk_len, hash_key, pk_grow = key
                n = len(data)
                size = n + pk_len
                if size > accept_max:
                    raise ValueError(self._too_large(stream, n, pk_len))
                if explicit_hash_key is not None:
                    hash_key = parse_explicit_hash_key(explicit_hash_key)
                if spool_max is not None and size > spool_max:
                    raise ValueError(_spooled_too_large(size, spool_max))
                index = bisect_right(starts, hash_key) - 1
                if index < 0 or hash_key > ends[index]:
                    index = 0  # a gap in a stale map: the first shard (``route``)
                found[shards[index]] = None
                add_data(data)
                add_row((partition_key, explicit_hash_key, hash_key, n, pk_len, pk_grow))
                total += size
        except (TypeError, ValueError) as exc:
            raise at_index(i, exc) from exc
        batch.routed(shards, list(found), total)
        if self._order is not None and stream.refusal is not None:
            raise ValueError(stream.refusal)
        ledger = self._ledger
        why = batch_too_large(len(rows), total, ledger.max_records, ledger.max_bytes, spool_max)
        if why is not None:
            raise ValueError(why)
        return batch

    def admits(self, batch: Batch, now: float) -> bool:
        """Is there room for all of ``batch`` (the caps; every shard it goes to: its lane,
        its channel)? A lane that refuses is told (``Lane.refused``). Changes nothing else."""
        ledger = self._ledger
        if (
            ledger.records + len(batch.rows) > ledger.max_records
            or ledger.bytes + batch.total > ledger.max_bytes
        ):
            return False
        queue_size = self._acc.queue_size
        for shard in batch.shards:
            lane = shard.lane
            if lane.owed + shard.sizer.size >= lane.allow:
                lane.refused(now)
                return False
            if shard.queued >= queue_size:
                return False
        return True

    def accept(self, stream: StreamState, batch: Batch, now: float) -> list[R]:
        """Accept all of ``batch`` (validated, routed), or raise changing nothing
        (``NoRoom``; what the engine makes of the spool's refusal). Returns the rows in
        order."""
        if not self.admits(batch, now):
            raise NoRoom
        spool = self.spool
        if spool is not None:
            why = spool.refusal(batch.total)
            if why is not None:
                self._refuse(why)
        if batch.keyless:
            stream.took_keyless()
        make, name, epoch = self._make, stream.name, self._ledger.epoch
        place, counted = self._place, self._ledger.accept
        out: list[R] = []
        append = out.append
        shards = batch.shards
        saved = self._acc.lift(shards)
        try:
            for data, (pk, ehk, hash_key, n, pk_len, pk_grow) in zip(
                batch.datas, batch.rows, strict=True
            ):
                size = n + pk_len
                outcome = make(data, pk, ehk, hash_key, size, now, name, epoch)
                place(stream, outcome, pk_grow, now)
                counted(outcome, size)
                append(outcome)
                if spool is not None:
                    spool.add(outcome, stream.key, data, pk, ehk, size, now)
        finally:
            self._acc.restore(shards, saved)
        return out
