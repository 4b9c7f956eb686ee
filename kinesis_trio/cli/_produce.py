"""``produce``: records from a file or stdin, keyed, with failed records written out."""

from __future__ import annotations

import argparse
import base64
import binascii
import contextlib
import json
import os
import select
import string
import sys
import threading
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

import anyio
import anyio.abc
import anyio.to_thread

from .._config import ProducerConfig
from .._core import RECOVERED, RecoveryReport
from .._results import ABORTED, CLOSE_TIMEOUT, RecordResult
from .._shell._producer import Producer
from ._gsr import SchemaInput, registry_for, schema_input
from ._options import _READ_CHUNK, _config, _Target, _UsageError, _with_target
from ._output import (
    _exit_code,
    _FailedWriter,
    _Interrupts,
    _latency_rows,
    _print_summary,
    _Progress,
    _tick,
    _Tracker,
)


class _RecordError(Exception):
    """A line that cannot become a record (bad JSON, no key): fails locally."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(code, message)
        self.code = code
        self.message = message


_MISSING: Any = object()


def _lookup(obj: Any, path: str) -> Any:
    """``obj[path]``, else walk a dotted path through objects (and list indexes)."""
    if isinstance(obj, dict) and path in obj:
        return obj[path]
    current = obj
    for part in path.split("."):
        if isinstance(current, dict) and part in current:
            current = current[part]
        elif isinstance(current, list) and part.isdigit() and int(part) < len(current):
            current = current[int(part)]
        else:
            return _MISSING
    return current


def _key_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return json.dumps(value)
    return json.dumps(value, separators=(",", ":"), sort_keys=True, ensure_ascii=False)


class _TemplateFormatter(string.Formatter):
    """str.format over a record's JSON fields (dotted paths), ``{line_no}`` and ``{uuid}``;
    the record's own fields win over the two built-ins."""

    def __init__(self) -> None:
        super().__init__()
        self.obj: Any = None
        self.line_no = 0

    def get_field(self, field_name: str, args: Sequence[Any], kwargs: Mapping[str, Any]) -> Any:
        value = _lookup(self.obj, field_name)
        if value is _MISSING or value is None:
            if field_name == "line_no":
                return self.line_no, field_name
            if field_name == "uuid":
                return str(uuid.uuid4()), field_name
            raise _RecordError(
                "MissingKey", f"--key-template field {{{field_name}}} is not in the record"
            )
        if isinstance(value, (dict, list, bool)):
            value = _key_text(value)
        return value, field_name


class _Keying:
    """Turns a line into (partition key, explicit hash key), or raises _RecordError."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.json = bool(args.json)
        self.records = bool(args.records)
        self.key_field: str | None = args.key_field
        self.template: str | None = args.key_template
        self.ehk_field: str | None = args.explicit_hash_key_field
        if self.records:
            for name, value in (
                ("--json", self.json),
                ("--key-field", self.key_field),
                ("--key-template", self.template),
                ("--explicit-hash-key-field", self.ehk_field),
            ):
                if value:
                    raise _UsageError(
                        f"{name} cannot be used with --records (each record has its own keys)"
                    )
        elif not self.json:
            if self.key_field is not None:
                raise _UsageError("--key-field needs --json (raw lines have no fields)")
            if self.ehk_field is not None:
                raise _UsageError("--explicit-hash-key-field needs --json")
        for name, value in (
            ("--key-field", self.key_field),
            ("--explicit-hash-key-field", self.ehk_field),
        ):
            if value is not None and not value.strip():
                raise _UsageError(f"{name} must not be empty")
        self.formatter = _TemplateFormatter()
        if self.template is not None:
            try:
                fields = [
                    f for _, f, _, _ in string.Formatter().parse(self.template) if f is not None
                ]
            except ValueError as exc:
                raise _UsageError(f"--key-template {self.template!r}: {exc}") from None
            for name in fields:
                if not name or name.isdigit():
                    raise _UsageError(
                        f"--key-template {self.template!r}: use named fields, like {{line_no}}"
                    )
                if not self.json and name not in ("line_no", "uuid"):
                    raise _UsageError(
                        f"--key-template field {{{name}}} needs --json "
                        "(raw lines only have {line_no} and {uuid})"
                    )

    @staticmethod
    def record(line: bytes) -> tuple[bytes, str | None, str | None]:
        """A ``--records`` line (the form ``--failed`` writes) as (data, partition key,
        explicit hash key); its other fields are ignored."""
        try:
            obj = json.loads(line)
        except ValueError as exc:
            raise _RecordError("InvalidJSON", str(exc)) from None
        if not isinstance(obj, dict):
            raise _RecordError("InvalidRecord", "a --records line must be a JSON object")
        if obj.get("data_truncated"):
            raise _RecordError(
                "TruncatedRecord", "the record's data was cut short when it was written"
            )
        text = obj.get("data")
        if not isinstance(text, str):
            raise _RecordError("InvalidRecord", 'no "data" (base64 text) in the record')
        try:
            data = base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise _RecordError("InvalidRecord", f'"data" is not base64: {exc}') from None
        keys: list[str | None] = []
        for name in ("partition_key", "explicit_hash_key"):
            value = obj.get(name)
            if value is not None and not isinstance(value, str):
                raise _RecordError("InvalidKey", f'"{name}" must be a string or null')
            keys.append(value)
        return data, keys[0], keys[1]

    def key(self, line_no: int, line: bytes) -> tuple[str, str | None]:
        obj: Any = None
        if self.json:
            try:
                obj = json.loads(line)
            except ValueError as exc:
                raise _RecordError("InvalidJSON", str(exc)) from None
        if self.key_field is not None:
            value = _lookup(obj, self.key_field)
            if value is _MISSING or value is None:
                raise _RecordError("MissingKey", f"no field {self.key_field!r} in the record")
            key = _key_text(value)
        elif self.template is not None:
            self.formatter.obj = obj
            self.formatter.line_no = line_no
            try:
                key = self.formatter.format(self.template)
            except _RecordError:
                raise
            except (ValueError, TypeError, IndexError, KeyError) as exc:
                raise _RecordError("InvalidKey", f"--key-template: {exc}") from None
        else:
            key = str(uuid.uuid4())
        ehk: str | None = None
        if self.ehk_field is not None:
            value = _lookup(obj, self.ehk_field)
            if value is _MISSING or value is None:
                raise _RecordError("MissingKey", f"no field {self.ehk_field!r} in the record")
            ehk = _key_text(value)
        return key, ehk


class _ChunkReader:
    """Reads a file descriptor in a worker thread without ever blocking for long: the
    thread waits with select() in short steps, so a cancelled read (Ctrl-C while stdin is
    idle) leaves no thread stuck in read()."""

    def __init__(self, fd: int) -> None:
        self.fd = fd
        self.stopped = threading.Event()
        self._select = True

    def _read(self) -> bytes:
        while not self.stopped.is_set():
            if self._select:
                try:
                    ready, _, _ = select.select([self.fd], [], [], 0.2)
                except (OSError, ValueError):  # not selectable here: plain blocking reads
                    self._select = False
                    continue
                if not ready:
                    continue
            return os.read(self.fd, _READ_CHUNK)
        return b""

    async def read(self) -> bytes:
        try:
            return await anyio.to_thread.run_sync(self._read, abandon_on_cancel=True)
        except BaseException:
            self.stopped.set()
            raise


@dataclass
class _LineCounts:
    lines: int = 0
    blank: int = 0


async def _read_and_put(
    producer: Producer,
    reader: _ChunkReader,
    keying: _Keying,
    tracker: _Tracker,
    counts: _LineCounts,
    durable: Callable[[], Awaitable[None]] | None = None,
    schema: SchemaInput | None = None,
) -> None:
    """Put each line read; ``durable``: awaited after the lines of each read (``--spool-sync
    put``: they are in the spool before the next read); ``schema``: each JSON line encoded
    with it (``put_object``; a line that does not match fails locally, ``SchemaMismatch``)."""
    put = producer.put
    now = anyio.current_time
    limit = producer.record_limit()
    records = keying.records
    json_lines = keying.json or records
    # base64 and the fields; a JSON line encoded with a schema may shrink (Avro, Protobuf)
    line_limit = limit * 4 // 3 + 65_536 if records or schema else limit
    mismatch = () if schema is None else schema.mismatch
    buffer = b""
    discarding = False  # inside a line longer than max_record_size: drop up to its newline
    eof = False
    while not eof:
        chunk = await reader.read()
        if not chunk:
            eof = True
            lines = [buffer] if buffer and not discarding else []
            buffer = b""
        else:
            if discarding:
                newline = chunk.find(b"\n")
                if newline < 0:
                    continue
                chunk = chunk[newline + 1 :]
                discarding = False
            buffer += chunk
            lines = buffer.split(b"\n")
            buffer = lines.pop()
        for line in lines:
            counts.lines += 1
            if line.endswith(b"\r"):
                line = line[:-1]
            if not line or (json_lines and not line.strip()):
                counts.blank += 1
                continue
            # context: (line number, the record's data, cut short?, explicit hash key)
            key: str | None
            try:
                if records:
                    data, key, ehk = keying.record(line)
                else:
                    data = line
                    key, ehk = keying.key(counts.lines, line)
            except _RecordError as exc:
                tracker.fail_local(exc.code, exc.message, (counts.lines, line, False, None))
                continue
            context = (counts.lines, data, False, ehk)
            start = now()
            try:
                if schema is None:
                    outcome = await put(data, key, ehk)
                else:
                    obj = schema.value(json.loads(data))
                    outcome = await producer.put_object(obj, key, ehk, schema=schema.schema)
            except mismatch as exc:
                tracker.fail_local("SchemaMismatch", str(exc), context)
                continue
            except (TypeError, ValueError) as exc:
                tracker.fail_local("InvalidRecord", str(exc), context)
                continue
            tracker.add(outcome, start, len(data), context)
        if durable is not None and lines:
            await durable()
        if len(buffer) > line_limit:  # too long to be a record: fail it, skip to its end
            counts.lines += 1
            tracker.fail_local(
                "InvalidRecord",
                f"line longer than max_record_size ({limit} bytes)",
                (counts.lines, buffer[:1024], True, None),
            )
            buffer = b""
            discarding = True


def _spooled(args: argparse.Namespace, config: ProducerConfig) -> ProducerConfig:
    """``config`` with the ``--spool`` options. ``--spool-sync put`` is the CLI's own: the
    producer writes on its interval, and the lines of each read are made durable at once
    (``wait_durable``) before the next read, one commit for them all."""
    if args.spool is None:
        for name, value in (
            ("--spool-sync", args.spool_sync),
            ("--spool-interval", args.spool_interval),
            ("--spool-max-bytes", args.spool_max_bytes),
        ):
            if value is not None:
                raise _UsageError(f"{name} needs --spool DIR")
        return config
    fields: dict[str, Any] = {"spool_dir": args.spool, "spool_sync": "interval"}
    if args.spool_interval is not None:
        fields["spool_interval"] = args.spool_interval
    if args.spool_max_bytes is not None:
        fields["spool_max_bytes"] = args.spool_max_bytes
    try:
        return config.replace(**fields)
    except ValueError as exc:
        raise _UsageError(str(exc)) from None


async def _recovered_failures(producer: Producer, tracker: _Tracker, failed: _FailedWriter) -> None:
    """Count (and write to ``--failed``) the records recovered from the spool that fail:
    ``produce`` tracks its own records' outcomes, these only reach ``failures()``. Ends
    once the producer has closed."""
    async for record in producer.failures():
        result = record.result
        if result.attempts and result.attempts[0].error_code == RECOVERED:
            code = result.error_code or "UnknownError"
            tracker.add_failures(1, {code: 1}, {code: result.error_message or ""})
            failed.add_record(record)


def _recovery_row(report: RecoveryReport) -> tuple[str, str]:
    kept = report.records - report.ok - report.failed
    text = f"{report.records:,} (ok {report.ok:,}, failed {report.failed:,}"
    if kept:
        text += f", left in the spool {kept:,}"
    if report.damaged:
        text += f", damaged {report.damaged:,}"
    return "recovered", text + ")"


def _run_produce(args: argparse.Namespace) -> int:
    config = _spooled(args, _config(args))
    schema = schema_input(args)
    if schema is not None:
        args.json = True  # the lines are JSON: --key-field and the templates' fields work
    keying = _Keying(args)
    with contextlib.ExitStack() as stack:
        if args.input in (None, "-"):
            if sys.stdin is None:
                raise _UsageError("no stdin to read records from: pass a FILE")
            fd = sys.stdin.fileno()
            source = "stdin"
            if sys.stdin.isatty() and not args.quiet:
                print("reading records from the terminal (Ctrl-D to end) ...", file=sys.stderr)
        else:
            try:
                fd = os.open(args.input, os.O_RDONLY)
            except OSError as exc:
                raise _UsageError(f"cannot read {args.input}: {exc.strerror}") from None
            stack.callback(os.close, fd)
            source = args.input
        failed_file: TextIO | None = None
        if args.failed:
            try:
                failed_file = stack.enter_context(open(args.failed, "w", encoding="utf-8"))
            except OSError as exc:
                raise _UsageError(f"cannot write {args.failed}: {exc.strerror}") from None
        failed = _FailedWriter(failed_file, args.stream)

        spooling = args.spool is not None
        kept = 0  # with --spool: records the close left unresolved (the spool keeps them)

        def on_failure(code: str, message: str, result: RecordResult | None, ctx: Any) -> None:
            nonlocal kept
            if spooling and code in (ABORTED, CLOSE_TIMEOUT):
                kept += 1  # not failed for good: the next produce --spool sends it
                return
            failed.add(code, message, result, ctx)

        async def produce(target: _Target) -> int:
            await target.client().aclose()  # validates region and endpoint first
            tracker = _Tracker(on_failure=on_failure)
            counts = _LineCounts()
            progress = _Progress("produce", None, quiet=args.quiet, interval=args.progress_interval)
            interrupts = _Interrupts(progress)
            reader = _ChunkReader(fd)
            registry = None
            if schema is not None:
                registry = registry_for(args, target, auto_register=args.auto_register)
            producer = target.producer(args.stream, config, schema_registry=registry)
            durable = producer.wait_durable if args.spool_sync == "put" else None
            t0 = t1 = 0.0
            try:
                async with interrupts.watching(), anyio.create_task_group() as feed:
                    if spooling:  # ends once the producer has closed
                        feed.start_soon(_recovered_failures, producer, tracker, failed)
                    with interrupts.abort_scope:
                        async with producer, anyio.create_task_group() as tg:
                            tg.start_soon(_tick, tracker, progress, producer, failed)
                            t0 = anyio.current_time()
                            with interrupts.stop_scope:
                                await _read_and_put(
                                    producer, reader, keying, tracker, counts, durable, schema
                                )
                                await producer.recovered()  # the spool's backlog, if any
                            await producer.flush()
                            t1 = anyio.current_time()
                            tg.cancel_scope.cancel()
                if not t1:
                    t1 = anyio.current_time()
                tracker.reap()
                report = producer.recovery
                if report.damaged:
                    tracker.add_failures(
                        report.damaged,
                        {"SpoolRecordDamaged": report.damaged},
                        {
                            "SpoolRecordDamaged": "could not be read back from the spool intact "
                            "(see the spool_record_damaged log lines)"
                        },
                    )
                await failed.flush()
            finally:
                reader.stopped.set()
                progress.close(tracker)
                if registry is not None:
                    with anyio.CancelScope(shield=True):
                        await registry.client.aclose()
            elapsed = max(t1 - t0, 1e-9)
            lines = f"{counts.lines:,}"
            if counts.blank:
                lines += f" ({counts.blank:,} blank skipped)"
            rows = [
                ("lines", lines),
                ("records sent", f"{tracker.accepted:,}"),
                ("ok", f"{tracker.ok:,}"),
                ("failed", f"{tracker.failed:,}"),
                ("elapsed", f"{elapsed:,.2f} s"),
                ("records/s", f"{tracker.accepted / elapsed:,.0f}"),
                ("MB/s", f"{tracker.accepted_bytes / elapsed / 1e6:,.2f}"),
                *_latency_rows(tracker.latencies)[:3],
                (
                    "throttles",
                    f"{tracker.throttled_attempts:,} attempts "
                    f"({tracker.throttled_records:,} records)",
                ),
            ]
            if spooling:
                rows.insert(1, ("spool", f"{args.spool} ({args.spool_sync or 'interval'})"))
                if report.records or report.damaged:
                    rows.insert(2, _recovery_row(report))
            notes = []
            if kept:
                notes.append(
                    f"{kept:,} records not confirmed at the close stay in the spool: "
                    f"produce --spool {args.spool} sends them next time"
                )
            if failed.count:
                notes.append(f"{failed.count:,} failed records written to {args.failed}")
            elif tracker.failed and not args.failed:
                notes.append("(pass --failed FILE to keep the failed records)")
            if interrupts.count:
                notes.append("(interrupted: the rest of the input was not read)")
            _print_summary(f"produce: {source} -> {args.stream}", rows, tracker, notes)
            return _exit_code(tracker, bool(interrupts.count))

        return _with_target(
            args,
            produce,
            embedded=False,
            shard_limit=0,
        )
    raise AssertionError("unreachable")  # pragma: no cover


# -- local: a long-running emulator ---------------------------------------------------------
