"""The command line's parser: each subcommand's options as a table (``_COMMANDS``).

``tail`` and the options several commands share (the producer settings, the connection, the
output) are added by ``_options``'s ``_add_tail`` and ``_add_common``.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass
from typing import Any

from .._version import __version__
from ..testing._emulators import ENGINES
from ._options import (
    _FAILED_HELP,
    _PROG,
    GLUE_ENDPOINT_HELP,
    _add_common,
    _add_tail,
    _non_negative_seconds,
    _Parser,
    _port,
    _positive_int,
    _positive_seconds,
    _positive_size,
    _rate,
    _seconds,
    _size,
)

__all__ = ["_parser"]


@dataclass(frozen=True)
class _Arg:
    """One option of a command: ``add_argument``'s arguments, and where it goes."""

    flags: tuple[str, ...]
    options: dict[str, Any]
    #: the help section it is listed in (``None``: the command's own options)
    group: str | None = None
    #: options with the same tag exclude each other
    exclusive: str | None = None


def _arg(
    *flags: str, group: str | None = None, exclusive: str | None = None, **options: Any
) -> _Arg:
    return _Arg(flags, options, group, exclusive)


@dataclass(frozen=True)
class _Command:
    """A subcommand: its help line, its description, its options, and the progress
    interval of the producer options it shares (``None``: it has none)."""

    help: str
    description: str
    progress_interval: float | None
    args: tuple[_Arg, ...]


_SCHEMA = "schema (Glue Schema Registry)"
#: ``produce --schema``: JSON lines written as schema-registered records
_SCHEMA_ARGS = (
    _arg(
        "--schema",
        metavar="FILE",
        help="write each JSON line as a record of this schema (an Avro schema, a JSON Schema "
        "or a .proto file), GSR header first, as the Java and Python GSR readers read them",
        group=_SCHEMA,
    ),
    _arg(
        "--schema-format",
        choices=("AVRO", "JSON", "PROTOBUF"),
        help="the schema's format",
        group=_SCHEMA,
    ),
    _arg("--schema-name", metavar="NAME", help="the schema's name in the registry", group=_SCHEMA),
    _arg(
        "--schema-message",
        metavar="NAME",
        help="PROTOBUF: the message each line is, in protobuf's JSON form (default: the "
        "file's first message)",
        group=_SCHEMA,
    ),
    _arg("--registry", metavar="NAME", help="the registry (default-registry)", group=_SCHEMA),
    _arg(
        "--auto-register",
        action="store_true",
        help="create the schema (BACKWARD compatibility), or register the file as its new "
        "version, when the registry does not have it",
        group=_SCHEMA,
    ),
    _arg("--compress", action="store_true", help="zlib-compress each payload", group=_SCHEMA),
    _arg("--glue-endpoint-url", metavar="URL", help=GLUE_ENDPOINT_HELP, group=_SCHEMA),
)

#: ``perf``'s and ``demo``'s: the keys records go to, the engine started without an endpoint
_KEYS = _arg(
    "--keys", type=_positive_int, default=256, help="distinct partition keys (default 256)"
)
_EMULATOR = _arg(
    "--emulator",
    choices=ENGINES,
    help="local engine when no endpoint is given: kinesalite or kinesis-local (npm, need "
    "Node.js) or python (this package's; default when Node.js is missing)",
)

#: The subcommands but ``tail`` (``_tail_options``), their options in help order.
_COMMANDS: dict[str, _Command] = {
    "produce": _Command(
        help="write newline-delimited records from a file or stdin (like kcat -P)",
        description="Write each line of FILE (or stdin) as a record. Raw lines by default; "
        "--json parses JSON lines so that --key-field / --key-template can pick the "
        "partition key. The default partition key is a random uuid4 per record. With --spool "
        "DIR, the records read are kept on disk until written, and a run started again on "
        "DIR after a crash sends them first. With --schema FILE, each JSON line is written as "
        "a Glue Schema Registry record of that schema. Exit status 1 when any record failed.",
        progress_interval=5.0,
        args=(
            _arg("input", nargs="?", metavar="FILE", help="input file (default: stdin)"),
            _arg("--stream", required=True, help="stream to write to"),
            _arg("--json", action="store_true", help="input lines are JSON documents"),
            _arg(
                "--records",
                action="store_true",
                help="input lines are records as --failed writes them: JSON objects with data "
                "(base64), partition_key and explicit_hash_key (other fields are ignored), to send "
                "failed records again",
            ),
            _arg(
                "--key-field",
                metavar="F",
                help="partition key from this JSON field (dotted path: a.b)",
                exclusive="keys",
            ),
            _arg(
                "--key-template",
                metavar="T",
                help="partition key from a str.format template over the JSON fields (dotted paths "
                "allowed), {line_no} and {uuid}, e.g. '{tenant}-{line_no}'",
                exclusive="keys",
            ),
            _arg(
                "--explicit-hash-key-field",
                metavar="F",
                help="explicit hash key from this JSON field",
            ),
            _arg("--failed", metavar="FILE", help=_FAILED_HELP),
            _arg(
                "--spool",
                metavar="DIR",
                help="keep every record read in a spool on disk in DIR (spool_dir) until it is "
                "written: a produce killed and started again on DIR sends what it held first",
                group="spool (survives restarts)",
            ),
            _arg(
                "--spool-sync",
                choices=("interval", "put"),
                help="when a line read is on disk: interval (default) within --spool-interval; "
                "put: the lines of each read before the next read (one commit per read)",
                group="spool (survives restarts)",
            ),
            _arg(
                "--spool-interval",
                type=_seconds,
                metavar="SECONDS",
                help="spool_interval: seconds between the spool's writes (0.2)",
                group="spool (survives restarts)",
            ),
            _arg(
                "--spool-max-bytes",
                type=_size,
                metavar="SIZE",
                help="spool_max_bytes: data + keys the spool holds before reading waits (1GiB)",
                group="spool (survives restarts)",
            ),
            *_SCHEMA_ARGS,
        ),
    ),
    "perf": _Command(
        help="load generator: throughput, latency percentiles, CPU, throttles",
        description="Write COUNT records of SIZE bytes (at RATE records/s with -r) and report "
        "records/s, MB/s, p50/p99/p99.9 latency, CPU per record, throttles and failures. "
        "With -r, latency is measured from each record's scheduled time (no coordinated "
        "omission). Without an endpoint and without --stream, an embedded local emulator is "
        "started and a new stream created in it. With --processes N, N producer processes "
        "write to the stream at once (-n and -r are totals, split evenly among them) and the "
        "report sums them, with a row per process.",
        progress_interval=1.0,
        args=(
            _arg(
                "--stream", help="stream to write to (created with --shards if it does not exist)"
            ),
            _arg(
                "-s",
                "--size",
                type=_positive_size,
                default=512,
                help="bytes per record (default 512)",
            ),
            _arg(
                "-n",
                "--count",
                type=_positive_int,
                help="records to write (default 100,000; unlimited with --duration); with "
                "--processes, the total, split evenly among them",
            ),
            _arg(
                "-r",
                "--rate",
                type=_rate,
                help="records/s (default: as fast as possible); with --processes, the total rate, "
                "split evenly among them",
            ),
            _KEYS,
            _arg(
                "--shards",
                type=_positive_int,
                help="shards of a stream to create (default 4 locally)",
            ),
            _arg(
                "--duration",
                type=_positive_seconds,
                help="stop after this long (with --processes: each, from its own start)",
            ),
            _EMULATOR,
            _arg(
                "--processes",
                type=_positive_int,
                default=1,
                metavar="N",
                help="run N producer processes on the stream, each with its own producer, and sum "
                "their figures (default 1: this process alone). -n and -r are totals, split evenly",
                group="processes",
            ),
            _arg(
                "--stagger",
                type=_non_negative_seconds,
                default=0.0,
                metavar="SECONDS",
                help="with --processes: start each process this long after the previous one "
                "(default 0: all at once); --duration counts for each from its own start",
                group="processes",
            ),
            _arg(
                "--json-report",
                metavar="FILE",
                help="also write the figures as JSON to FILE: the sum and each process's, with "
                "records confirmed and throttled attempts per 0.5 s",
                group="processes",
            ),
            _arg("--failed", metavar="FILE", help=_FAILED_HELP + "; not with --processes"),
            _arg("--child", help=argparse.SUPPRESS),
        ),
    ),
    "demo": _Command(
        help="write at a steady rate the stream can take, then optionally a burst; print "
        "throughput, latency, CPU per record and failures",
        description="Write records of --size bytes at a steady rate for --duration seconds "
        "(default: 80 %% of the shards' write limits, 1 MiB/s and 1,000 records/s each), "
        "then, with --burst N, N records as fast as put() allows. Prints one row per phase "
        "(records, records/s, MB/s, p50/p99 latency, CPU per record, failed) and a sentence "
        "on what each figure means. Steady latency counts from each record's scheduled "
        "arrival (no coordinated omission); burst latency from each put() call. Without an "
        "endpoint and without --stream, an embedded local emulator is started.",
        progress_interval=1.0,
        args=(
            _arg(
                "--duration",
                type=_positive_seconds,
                default=5.0,
                metavar="SECONDS",
                help="length of the steady phase (default 5)",
            ),
            _arg(
                "--rate",
                type=_rate,
                metavar="N",
                help="records/s of the steady phase (default: 80 %% of the shards' limits)",
            ),
            _arg(
                "--burst",
                type=_positive_int,
                metavar="N",
                help="after the steady phase, N records as fast as put() allows (latency from each "
                "put() call)",
            ),
            _arg(
                "--count",
                "-n",
                type=_positive_int,
                metavar="N",
                help="at most N records in the steady phase (default: rate x duration)",
            ),
            _arg(
                "--size",
                "-s",
                type=_positive_int,
                default=200,
                help="bytes per record (default 200)",
            ),
            _KEYS,
            _arg(
                "--shards",
                type=_positive_int,
                default=4,
                help="shards of the new stream (default 4)",
            ),
            _arg(
                "--stream",
                help="use this existing stream instead of creating one (its open shards set the "
                "rate)",
            ),
            _EMULATOR,
        ),
    ),
    "local": _Command(
        help="run a local Kinesis until Ctrl-C",
        description="Run a local Kinesis until Ctrl-C (or SIGTERM), then stop it. The python "
        "engine (this package's fake over HTTP) models the service of 2026: on-demand AUTO "
        "streams, records up to 10 MiB, StreamARN, DryRun; it needs no Node.js.",
        progress_interval=None,
        args=(
            _arg("--port", type=_port, default=4567, help="port (0: any free port)"),
            _arg(
                "--emulator",
                choices=ENGINES,
                help="kinesalite or kinesis-local (npm, need Node.js) or python (default when "
                "Node.js is missing)",
            ),
            _arg("--streams", default="", help="name:shards,... to create"),
            _arg(
                "--host",
                default="127.0.0.1",
                help="address to listen on (127.0.0.1)",
                group="python engine",
            ),
            _arg(
                "--limits",
                choices=["none", "aws"],
                default="none",
                help="aws: per-shard write limits of 1,000 records/s and 1 MiB/s (default none)",
                group="python engine",
            ),
            _arg(
                "--faults",
                metavar="SPEC",
                help="faults to inject, e.g. 'http_500=0.01,throttle_entries=0.05,seed=7' or "
                "'fatal=audit:AccessDeniedException' (see the docs' local engine page)",
                group="python engine",
            ),
            _arg(
                "--data",
                metavar="DIR",
                help="keep streams and records in DIR across restarts (DIR/kinesis-state.sqlite, "
                "on disk within about 1 s of their acknowledgement)",
                group="python engine",
            ),
            _arg(
                "--tls",
                action="store_true",
                help="serve HTTPS with a self-signed certificate",
                group="python engine",
            ),
            _arg(
                "--shard-limit",
                type=_positive_int,
                default=20_000,
                metavar="N",
                help="the account's shard quota: open shards over all streams (default 20,000, "
                "AWS's default in us-east-1); past it, LimitExceededException",
                group="python engine",
            ),
            _arg(
                "--idle-timeout",
                type=float,
                default=300.0,
                metavar="SECONDS",
                help="close a connection idle this long between requests (default 300; lower "
                "it to test what a client does with connections the server closed)",
                group="python engine",
            ),
            _arg(
                "-q",
                "--quiet",
                action="store_true",
                help="no per-stream lines",
                group="python engine",
            ),
        ),
    ),
}


def _parser() -> argparse.ArgumentParser:
    parser = _Parser(prog=_PROG, description="Kinesis producer tools (Trio/anyio).")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for name, command in _COMMANDS.items():
        cmd = sub.add_parser(name, help=command.help, description=command.description)
        groups: dict[str, Any] = {}
        exclusive: dict[str, Any] = {}
        for arg in command.args:
            target: Any = cmd
            if arg.group is not None:
                if arg.group not in groups:
                    groups[arg.group] = cmd.add_argument_group(arg.group)
                target = groups[arg.group]
            if arg.exclusive is not None:
                if arg.exclusive not in exclusive:
                    exclusive[arg.exclusive] = target.add_mutually_exclusive_group()
                target = exclusive[arg.exclusive]
            target.add_argument(*arg.flags, **arg.options)
        if command.progress_interval is not None:
            _add_common(cmd, progress_interval=command.progress_interval)
    _add_tail(sub)
    return parser
