"""``tail``: read a stream back (like ``kcat -C``).

The async shell around :mod:`kinesis_trio.cli._tail_rules`: a task per shard being read (GetRecords,
paced by its :class:`ReadPacer`), a coordinator that starts shards as the
:class:`ShardLineage` allows, and one writer that prints the records and stops after ``-n``.
Cancellation (Ctrl-C, ``-n`` reached) can land at any await: nothing is left to undo, and
every line written was written whole.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import contextlib
import datetime
import json
import math
import signal
import sys
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, BinaryIO, Literal, TextIO

import anyio
import anyio.abc
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from .._aws._client import KinesisClient
from .._errors import (
    KinesisError,
    ProvisionedThroughputExceededError,
    ResourceNotFoundError,
    TransportError,
)
from ._gsr import decoded_line, registry_for, secondary_deserializer
from ._options import _PROG, _Failure, _Target, _UsageError, _with_target

if TYPE_CHECKING:
    from ..gsr._decode import Decoder
from ._tail_rules import (
    ReadPacer,
    ShardInfo,
    ShardLineage,
    parse_timestamp,
    read_page,
    split_record,
)

Format = Literal["raw", "json", "base64"]

#: failed GetRecords / GetShardIterator calls in a row (throttles aside) before giving up
_MAX_ERRORS = 10
#: seconds between ListShards while following a stream whose new shards are not listed yet
_RELIST_INTERVAL = 1.0


@dataclass(frozen=True)
class TailOptions:
    """What to read and how to print it (the ``tail`` command's arguments)."""

    stream: str | None = None
    stream_arn: str | None = None
    shard: str | None = None
    iterator_type: str = "TRIM_HORIZON"
    timestamp: float | None = None
    sequence_number: str | None = None
    follow: bool = False
    count: int | None = None
    format: Format = "raw"
    progress: bool = False
    progress_interval: float = 0.5
    idle_interval: float = 1.0

    @property
    def name(self) -> str:
        return self.stream or self.stream_arn or "?"


@dataclass
class TailStats:
    """What a run read: records written, aggregates dropped, shards read."""

    records: int = 0
    dropped_aggregates: int = 0
    shards_started: int = 0
    shards_finished: int = 0
    running: int = 0
    behind: dict[str, int] = field(default_factory=dict)

    def wrote_record(self) -> int:
        """Count one record written; returns the records written so far."""
        self.records += 1
        return self.records


# -- output -------------------------------------------------------------------------------------


def _iso(timestamp: Any) -> str | None:
    if isinstance(timestamp, (int, float)):
        moment = datetime.datetime.fromtimestamp(timestamp, tz=datetime.timezone.utc)
        return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")
    return None if timestamp is None else str(timestamp)


def format_record(
    fmt: Format,
    shard_id: str,
    record: dict[str, Any],
    data: bytes,
    partition_key: str | None,
    explicit_hash_key: str | None,
    sub_sequence_number: int | None,
) -> bytes:
    """One output line (newline included) for one user record."""
    if fmt == "raw":
        return data + b"\n"
    if fmt == "base64":
        return base64.b64encode(data) + b"\n"
    try:
        text: str = data.decode("utf-8")
        encoded = False
    except UnicodeDecodeError:
        text = base64.b64encode(data).decode("ascii")
        encoded = True
    line = {
        "shard_id": shard_id,
        "sequence_number": record.get("SequenceNumber"),
        "sub_sequence_number": sub_sequence_number,
        "partition_key": partition_key,
        "explicit_hash_key": explicit_hash_key,
        "approximate_arrival_timestamp": _iso(record.get("ApproximateArrivalTimestamp")),
        "data": text,
        "data_base64": encoded,
    }
    return json.dumps(line, ensure_ascii=False).encode("utf-8") + b"\n"


# -- the reader ---------------------------------------------------------------------------------


#: a user record: its Kinesis record, data, partition key, explicit hash key, sub-sequence
_User = tuple[dict[str, Any], bytes, str | None, str | None, int | None]


class _Tail:
    def __init__(
        self,
        client: KinesisClient,
        options: TailOptions,
        out: BinaryIO,
        err: TextIO,
        decoder: Decoder | None = None,
    ) -> None:
        self.client = client
        self.decoder = decoder
        self.options = options
        self.out = out
        self.err = err
        self.stats = TailStats()
        self.lineage = ShardLineage(
            begin="open" if options.iterator_type == "LATEST" else "all", only=options.shard
        )
        self._first = True
        self.broken_pipe = False
        self._events_send, self._events = anyio.create_memory_object_stream[tuple[str, bool]](
            math.inf
        )

    def _ref(self) -> dict[str, Any]:
        return {"stream_arn": self.options.stream_arn} if self.options.stream_arn else {}

    async def _list(self) -> None:
        """ListShards (every shard, open and closed) into the lineage; transient errors are
        retried with the throttle backoff, ``_MAX_ERRORS`` in a row at most."""
        backoff = ReadPacer()
        while True:
            try:
                shards = [
                    ShardInfo.from_api(s)
                    for s in await self.client.list_shards(
                        self.options.stream, at_latest=False, **self._ref()
                    )
                ]
            except ResourceNotFoundError as exc:
                raise _Failure(
                    f"stream {self.options.name!r} not found at {self.client.endpoint_url} "
                    f"({exc.message or exc.code})"
                ) from None
            except (KinesisError, TransportError) as exc:
                if not exc.retryable or backoff.throttles >= _MAX_ERRORS:
                    raise
                await anyio.sleep(backoff.throttled(anyio.current_time()))
                continue
            self.lineage.update(shards)
            return

    async def run(self) -> TailStats:
        await self._list()
        only = self.options.shard
        if only is not None and only not in self.lineage.shards:
            known = ", ".join(sorted(self.lineage.shards)) or "none"
            raise _Failure(f"no shard {only!r} in stream {self.options.name!r} (shards: {known})")
        pages_send, pages = anyio.create_memory_object_stream[list[bytes]](4)
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._coordinate, pages_send)
            if self.options.progress:
                tg.start_soon(self._progress)
            await self._write(pages)
            tg.cancel_scope.cancel()
        if self.options.progress:
            self._progress_line(final=True)
        return self.stats

    # -- the writer: one place prints, so lines never interleave and -n is exact

    async def _write(self, pages: MemoryObjectReceiveStream[list[bytes]]) -> None:
        count = self.options.count
        stats = self.stats
        out = self.out
        async with pages:
            try:
                async for page in pages:
                    for line in page:
                        out.write(line)
                        written = stats.wrote_record()
                        if count is not None and written >= count:
                            out.flush()
                            return
                    out.flush()
            except BrokenPipeError:  # the reader went away (| head): a normal end
                self.broken_pipe = True

    # -- the coordinator: starts shards as their parents finish

    async def _coordinate(self, pages: MemoryObjectSendStream[list[bytes]]) -> None:
        async with pages, anyio.create_task_group() as tg:
            while True:
                for shard_id in self.lineage.ready():
                    begin = self._begin()
                    self.stats.shards_started += 1
                    self.stats.running += 1
                    tg.start_soon(self._read_shard, shard_id, begin, pages.clone())
                self._first = False
                if self.stats.running == 0:
                    if not self.options.follow or self.options.shard is not None:
                        return
                    # following, every shard read to its end: their children are not
                    # listed yet
                    await anyio.sleep(_RELIST_INTERVAL)
                    await self._list()
                    continue
                shard_id, closed = await self._events.receive()
                self.stats.running -= 1
                self.stats.behind.pop(shard_id, None)
                if closed:
                    self.stats.shards_finished += 1
                    self.lineage.finish(shard_id)
                    if self.options.shard is None:
                        await self._list()

    def _begin(self) -> str:
        """The iterator type of a shard starting now: the option for the first shards; for
        children started later, TRIM_HORIZON (after LATEST, else the records written after
        the split would be skipped) or AT_TIMESTAMP."""
        kind = self.options.iterator_type
        if self._first:
            return kind
        return "TRIM_HORIZON" if kind == "LATEST" else kind

    async def _iterator(self, shard_id: str, kind: str, after: str | None) -> str:
        options = self.options
        sequence = options.sequence_number if kind == "AT_SEQUENCE_NUMBER" else None
        if after is not None:  # a new iterator after the last record read
            kind, sequence = "AFTER_SEQUENCE_NUMBER", after
        return await self.client.get_shard_iterator(
            options.stream,
            shard_id,
            kind,
            starting_sequence_number=sequence,
            timestamp=options.timestamp if kind == "AT_TIMESTAMP" else None,
            **self._ref(),
        )

    # -- a shard's reader

    async def _read_shard(
        self, shard_id: str, begin: str, pages: MemoryObjectSendStream[list[bytes]]
    ) -> None:
        closed = False
        try:
            async with pages:
                closed = await self._read(shard_id, begin, pages)
        finally:
            self._events_send.send_nowait((shard_id, closed))

    async def _read(
        self, shard_id: str, begin: str, pages: MemoryObjectSendStream[list[bytes]]
    ) -> bool:
        """Read one shard; True when it is closed and was read to its end."""
        options = self.options
        shard = self.lineage.shards[shard_id]
        pacer = ReadPacer(idle_interval=options.idle_interval)
        last: str | None = None  # the sequence number of the last record read
        iterator: str | None = None
        errors = 0
        while True:
            await anyio.sleep(pacer.delay(anyio.current_time()))
            now = anyio.current_time()
            try:
                if iterator is None:
                    iterator = await self._iterator(shard_id, begin, last)
                page = read_page(await self.client.get_records(iterator))
            except ProvisionedThroughputExceededError:
                pacer.throttled(now)
                continue
            except KinesisError as exc:
                if exc.code == "ExpiredIteratorException":
                    iterator = None  # a new one, after the last record read
                    errors += 1
                elif not exc.retryable:
                    raise
                else:
                    errors += 1
                if errors > _MAX_ERRORS:
                    raise
                pacer.throttled(now)
                continue
            except TransportError:
                errors += 1
                if errors > _MAX_ERRORS:
                    raise
                pacer.throttled(now)
                continue
            errors = 0
            records, behind = page.records, page.behind
            if self.decoder is None:
                lines, nbytes = self._lines(shard, records)
            else:
                lines, nbytes = await self._decoded_lines(shard, records)
            if records:
                last = records[-1]["SequenceNumber"]
            if behind is not None:
                self.stats.behind[shard_id] = behind
            caught_up = not records and not behind
            pacer.answered(now, nbytes, idle=caught_up)
            if lines:
                await pages.send(lines)
            iterator = page.next_iterator
            if not iterator:
                return True
            if caught_up and not options.follow:
                return False

    def _users(self, shard: ShardInfo, records: list[dict[str, Any]]) -> tuple[list[_User], int]:
        """The user records of a page (aggregates split as the KCL does) and its bytes."""
        users: list[_User] = []
        nbytes = 0
        for record in records:
            try:
                data = base64.b64decode(record["Data"], validate=True)
            except (KeyError, binascii.Error, TypeError):
                data = b""
            nbytes += len(data)
            key = record.get("PartitionKey")
            seq = record.get("SequenceNumber")
            split = split_record(data, key, seq, shard)
            if split.dropped is not None:
                self.stats.dropped_aggregates += 1
                print(
                    f"{_PROG}: tail: shard {shard.shard_id}, sequence number {seq}: "
                    f"{split.dropped}",
                    file=self.err,
                    flush=True,
                )
            for user in split.records:
                if user.aggregated:
                    users.append(
                        (
                            record,
                            user.data,
                            user.partition_key,
                            user.explicit_hash_key,
                            user.sub_sequence_number,
                        )
                    )
                else:
                    users.append((record, data, key, None, None))
        return users, nbytes

    def _lines(self, shard: ShardInfo, records: list[dict[str, Any]]) -> tuple[list[bytes], int]:
        fmt = self.options.format
        users, nbytes = self._users(shard, records)
        return [format_record(fmt, shard.shard_id, *user) for user in users], nbytes

    async def _decoded_lines(
        self, shard: ShardInfo, records: list[dict[str, Any]]
    ) -> tuple[list[bytes], int]:
        """``--decode gsr``: each user record decoded (its writer schema fetched once)."""
        from ..gsr._types import SchemaError

        decoder = self.decoder
        assert decoder is not None
        users, nbytes = self._users(shard, records)
        lines: list[bytes] = []
        for record, data, key, ehk, sub in users:
            decoded, error = None, None
            try:
                decoded = await decoder.decode(data)
            except SchemaError as exc:  # not a GSR record, or a version the registry lacks
                error = f"{type(exc).__name__}: {exc}"
            arrival = _iso(record.get("ApproximateArrivalTimestamp"))
            lines.append(
                decoded_line(shard.shard_id, record, key, ehk, sub, arrival, decoded, error)
            )
        return lines, nbytes

    # -- progress

    async def _progress(self) -> None:
        """A line every interval (at least 0.25 s) while something changes."""
        interval = max(0.25, self.options.progress_interval)
        last: tuple[int, int, int, int] | None = None
        while True:
            await anyio.sleep(interval)
            stats = self.stats
            state = (
                stats.records,
                stats.running,
                stats.shards_finished,
                max(stats.behind.values(), default=0),
            )
            if state != last:
                last = state
                self._progress_line()

    def _progress_line(self, *, final: bool = False) -> None:
        stats = self.stats
        behind = max(stats.behind.values(), default=0)
        dropped = f", {stats.dropped_aggregates} aggregates dropped"
        if final:
            line = (
                f"done: {stats.records:,} records from {stats.shards_started} shards "
                f"({stats.shards_finished} closed shards read to their end)"
            )
        else:
            line = (
                f"reading: {stats.records:,} records, {stats.running} shards reading, "
                f"{stats.shards_finished} closed shards read, {behind:,} ms behind latest"
            )
        print(
            f"{_PROG}: tail: {line}" + (dropped if stats.dropped_aggregates else ""),
            file=self.err,
            flush=True,
        )


async def tail(
    client: KinesisClient,
    options: TailOptions,
    out: BinaryIO,
    err: TextIO,
    decoder: Decoder | None = None,
) -> TailStats:
    """Read the stream ``options`` names and write its records to ``out`` (decoded as GSR
    records by ``decoder``, if given: one JSON object a line)."""
    return await _Tail(client, options, out, err, decoder).run()


# -- the command --------------------------------------------------------------------------------


def _options(args: argparse.Namespace, out: BinaryIO) -> TailOptions:
    kind, timestamp, sequence = "TRIM_HORIZON", None, None
    if args.from_latest:
        kind = "LATEST"
    elif args.from_timestamp is not None:
        try:
            timestamp = parse_timestamp(args.from_timestamp)
        except ValueError as exc:
            raise _UsageError(f"--from-timestamp: {exc}") from None
        kind = "AT_TIMESTAMP"
    elif args.from_sequence is not None:
        if args.shard is None:
            raise _UsageError(
                "--from-sequence needs --shard ID: a sequence number belongs to one shard"
            )
        if not args.from_sequence.isdigit():
            raise _UsageError(f"--from-sequence: not a sequence number: {args.from_sequence!r}")
        kind, sequence = "AT_SEQUENCE_NUMBER", args.from_sequence
    try:
        tty = out.isatty()
    except (AttributeError, ValueError):
        tty = False
    return TailOptions(
        stream=args.stream,
        stream_arn=args.stream_arn,
        shard=args.shard,
        iterator_type=kind,
        timestamp=timestamp,
        sequence_number=sequence,
        follow=args.follow,
        count=args.count,
        format=args.format,
        progress=not tty and not args.quiet,
        progress_interval=args.progress_interval,
    )


def _run_tail(args: argparse.Namespace) -> int:
    out = sys.stdout.buffer
    options = _options(args, out)

    async def main(target: _Target) -> int:
        interrupted = False
        decoder = None
        async with contextlib.AsyncExitStack() as stack:
            if args.decode == "gsr":
                from ..gsr._decode import Decoder

                secondary = None
                if args.secondary_deserializer is not None:
                    secondary = secondary_deserializer(args.secondary_deserializer)
                registry = await stack.enter_async_context(registry_for(args, target))
                decoder = Decoder(registry, secondary_deserializer=secondary)
            elif args.glue_endpoint_url is not None:
                raise _UsageError("--glue-endpoint-url needs --decode gsr")
            elif args.secondary_deserializer is not None:
                raise _UsageError("--secondary-deserializer needs --decode gsr")
            client = await stack.enter_async_context(target.client())
            tg = await stack.enter_async_context(anyio.create_task_group())

            async def on_ctrl_c() -> None:
                # Ctrl-C as a cancellation of the reader, whatever it is awaiting (the
                # KeyboardInterrupt is raised below, once everything is closed)
                nonlocal interrupted
                with anyio.open_signal_receiver(signal.SIGINT) as signals:
                    async for _ in signals:
                        interrupted = True
                        tg.cancel_scope.cancel()
                        return

            if threading.current_thread() is threading.main_thread():
                tg.start_soon(on_ctrl_c)
            reader = _Tail(client, options, out, sys.stderr, decoder)
            await reader.run()
            if reader.broken_pipe:
                _silence_stdout()
            tg.cancel_scope.cancel()
        if interrupted:
            raise KeyboardInterrupt
        return 0

    return _with_target(args, main, embedded=False, shard_limit=0)


def _silence_stdout() -> None:
    """After a broken pipe: point stdout at /dev/null so the exit flush cannot fail."""
    import os

    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
