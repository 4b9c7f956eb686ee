"""Shared options: argument types, the parser, producer settings, the target stream."""

from __future__ import annotations

import argparse
import math
import os
import re
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NoReturn

import anyio

from .._aws._client import KinesisClient
from .._aws._credentials import StaticCredentials
from .._config import ProducerConfig
from .._errors import ResourceNotFoundError
from .._shell._producer import Producer
from ..testing._emulators import EmulatorKind, LocalKinesis, default_engine, node_available

if TYPE_CHECKING:
    from ..gsr._types import SchemaRegistry

_PROG = "kinesis-trio"
_LOCAL_CREDENTIALS = StaticCredentials("AKIDLOCALDEMO", "local-demo-secret")
_THROTTLE_CODE = "ProvisionedThroughputExceededException"
_READ_CHUNK = 256 * 1024
_TICK = 0.25  # seconds between progress updates / outcome sweeps


class _UsageError(Exception):
    """A bad argument or setting: one line on stderr, exit status 2."""


class _Failure(Exception):
    """A run that cannot go on (missing stream, dead emulator): one line, exit status 1."""


# -- argument parsing ----------------------------------------------------------------------


class _Parser(argparse.ArgumentParser):
    """argparse with one-line errors: ``kinesis-trio: error: ...`` and exit status 2."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{_PROG}: error: {message}\n")


#: ``produce --failed`` and ``perf --failed``
_FAILED_HELP = (
    "write failed records here as JSON lines (data in base64, keys, error, attempts), "
    "which produce --records sends again"
)


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def _int(text: str) -> int:
    """An integer; its range is checked by ProducerConfig (which names the field)."""
    try:
        return int(text.replace("_", ""))
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a port number: {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"must be 0 (any free port) to 65535, got {value}")
    return value


_SIZE_RE = re.compile(r"(\d+(?:\.\d+)?)\s*([kmg]?)(?:i?b)?", re.IGNORECASE)
_SIZE_UNITS = {"": 1, "k": 1024, "m": 1024**2, "g": 1024**3}


def _size(text: str) -> int:
    """Bytes: ``512``, ``64k``, ``1MiB``, ``2m`` (k/M/G are binary: KiB, MiB, GiB)."""
    match = _SIZE_RE.fullmatch(text.strip())
    if match is None:
        raise argparse.ArgumentTypeError(f"not a size (e.g. 512, 64k, 1MiB): {text!r}")
    return int(float(match[1]) * _SIZE_UNITS[match[2].lower()])


def _positive_size(text: str) -> int:
    value = _size(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1 byte, got {text!r}")
    return value


_SECONDS_RE = re.compile(r"(-?\d+(?:\.\d*)?|-?\.\d+)\s*(ms|s|m|h)?")
_SECONDS_UNITS = {None: 1.0, "s": 1.0, "ms": 0.001, "m": 60.0, "h": 3600.0}


def _seconds(text: str) -> float:
    """Seconds: ``0.1``, ``100ms``, ``30s``, ``5m``. The range is checked by ProducerConfig."""
    match = _SECONDS_RE.fullmatch(text.strip())
    if match is None:
        raise argparse.ArgumentTypeError(f"not a duration (e.g. 0.1, 100ms, 30s): {text!r}")
    return float(match[1]) * _SECONDS_UNITS[match[2]]


def _positive_seconds(text: str) -> float:
    value = _seconds(text)
    if not 0 < value < math.inf:
        raise argparse.ArgumentTypeError(f"must be a positive duration, got {text!r}")
    return value


def _non_negative_seconds(text: str) -> float:
    value = _seconds(text)
    if not 0 <= value < math.inf:
        raise argparse.ArgumentTypeError(f"must be 0 or a positive duration, got {text!r}")
    return value


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None


def _rate(text: str) -> float:
    value = _number(text)
    if not 0 < value < math.inf:
        raise argparse.ArgumentTypeError(f"must be a positive number of records/s, got {text}")
    return value


def _add_tail(sub: Any) -> None:
    tail = sub.add_parser(
        "tail",
        help="read records back from a stream (like kcat -C)",
        description="Read a stream's records (every shard, or --shard ID) and write them to "
        "stdout, one a line, KPL aggregates split into their user records (an aggregate with "
        "a member outside its shard's hash key range is dropped, as the KCL does, and "
        "reported on stderr). Without -f, stop when every shard is read to its current end; "
        "with -f, keep polling and follow resharding into child shards.",
    )
    target = tail.add_mutually_exclusive_group(required=True)
    target.add_argument("--stream", help="stream to read")
    target.add_argument("--stream-arn", metavar="ARN", help="stream to read, by ARN")
    tail.add_argument("--shard", metavar="ID", help="read this shard only")
    start = tail.add_mutually_exclusive_group()
    start.add_argument(
        "--from-start",
        action="store_true",
        help="from the oldest record kept (TRIM_HORIZON; the default)",
    )
    start.add_argument(
        "--from-latest", action="store_true", help="only records written from now on (LATEST)"
    )
    start.add_argument(
        "--from-timestamp",
        metavar="TIME",
        help="from records that arrived at TIME or later: ISO 8601 (no zone: UTC) or epoch "
        "seconds (AT_TIMESTAMP)",
    )
    start.add_argument(
        "--from-sequence",
        metavar="SEQ",
        help="from this sequence number on (AT_SEQUENCE_NUMBER); needs --shard",
    )
    tail.add_argument(
        "-f",
        "--follow",
        action="store_true",
        help="keep polling for new records, into the children of resharded shards",
    )
    tail.add_argument("-n", "--count", type=_positive_int, metavar="N", help="stop after N records")
    tail.add_argument(
        "--format",
        choices=["raw", "json", "base64"],
        default="raw",
        help="raw: the data and a newline; json: one object a line with the record's "
        "fields; base64: the data in base64 (default raw)",
    )
    gsr = tail.add_argument_group("Glue Schema Registry")
    gsr.add_argument(
        "--decode",
        choices=["gsr"],
        help="gsr: decode each record as a Glue Schema Registry record (its writer schema "
        "fetched from the registry, cached) and print one JSON object a line with its "
        "fields, schema version and value (--format is then ignored)",
    )
    gsr.add_argument("--glue-endpoint-url", metavar="URL", help=GLUE_ENDPOINT_HELP)
    gsr.add_argument(
        "--secondary-deserializer",
        metavar="NAME",
        help="with --decode gsr: how records without the GSR header are read (as the Java "
        "serde's secondaryDeserializer): utf8, json, base64 or MODULE:CALLABLE (a function "
        "of the record's bytes); without it they are printed as errors",
    )
    _add_connection(tail)
    _add_output(tail, progress_interval=0.5, unless_terminal="stdout")


#: ``--glue-endpoint-url`` (``produce --schema``, ``tail --decode gsr``)
GLUE_ENDPOINT_HELP = (
    "Glue endpoint of the schema registry (default: AWS_ENDPOINT_URL_GLUE, else the Kinesis "
    "endpoint when one is configured, as kinesis-trio local serves Glue on its port, else "
    "Glue's regional endpoint)"
)


def _add_connection(parser: argparse.ArgumentParser) -> None:
    """Where to connect and as whom (every command that talks to Kinesis)."""
    conn = parser.add_argument_group("connection")
    conn.add_argument("--endpoint-url", help="Kinesis endpoint (default: AWS settings)")
    conn.add_argument("--region", help="AWS region (default: AWS settings, or us-east-1 locally)")
    conn.add_argument("--profile", help="AWS profile for credentials")
    conn.add_argument("--backend", choices=["trio", "asyncio"], default="trio")


def _add_output(
    parser: argparse.ArgumentParser, *, progress_interval: float, unless_terminal: str = "stderr"
) -> None:
    """``-q`` and ``--progress-interval``: the live progress on stderr, in plain lines when
    ``unless_terminal`` (stderr, or stdout for tail) is not a terminal."""
    out = parser.add_argument_group("output")
    out.add_argument("-q", "--quiet", action="store_true", help="no live progress")
    out.add_argument(
        "--progress-interval",
        type=_positive_seconds,
        default=progress_interval,
        metavar="SECONDS",
        help=f"seconds between progress lines when {unless_terminal} is not a terminal "
        f"(default {progress_interval:g})",
    )


def _add_common(parser: argparse.ArgumentParser, *, progress_interval: float) -> None:
    _add_connection(parser)

    cfg = parser.add_argument_group("producer settings (ProducerConfig; times in seconds)")
    cfg.add_argument(
        "--linger", type=_seconds, metavar="SECONDS", help="record_max_buffered_time (0.1)"
    )
    cfg.add_argument("--no-aggregation", action="store_true", help="aggregation_enabled=False")
    cfg.add_argument("--max-connections", type=_int, metavar="N", help="max_connections (24)")
    cfg.add_argument(
        "--rate-limit", type=_number, metavar="PERCENT", help="rate_limit, %% of shard limits (150)"
    )
    cfg.add_argument("--record-ttl", type=_seconds, metavar="SECONDS", help="record_ttl (30)")
    cfg.add_argument(
        "--admission-ttl-share",
        type=_number,
        metavar="SHARE",
        help="admission_ttl_share (1/3): put waits while a shard would not write a record "
        "within this share of record_ttl",
    )
    cfg.add_argument(
        "--no-admission-by-time",
        action="store_true",
        help="admission_ttl_share=None: only the count and byte caps hold (the KPL's way)",
    )
    cfg.add_argument(
        "--max-outstanding-records", type=_int, metavar="N", help="max_outstanding_records (100000)"
    )
    cfg.add_argument(
        "--max-outstanding-bytes",
        type=_size,
        metavar="SIZE",
        help="max_outstanding_bytes (128MiB; k/M/G suffixes)",
    )
    cfg.add_argument(
        "--max-record-size",
        type=_size,
        metavar="SIZE",
        help="max_record_size (default: the stream's limit, 1-10 MiB; a value only lowers it)",
    )
    cfg.add_argument(
        "--check-access",
        action="store_true",
        help="check_access=True: check write access with a DryRun PutRecords first",
    )
    cfg.add_argument(
        "--fail-if-throttled",
        action="store_true",
        help="fail_if_throttled=True: fail throttled records instead of retrying them",
    )
    cfg.add_argument(
        "--ordering",
        choices=("none", "per_key"),
        help="ordering (none): per_key writes each partition key's records in the order put",
    )

    _add_output(parser, progress_interval=progress_interval)


def _config(args: argparse.Namespace) -> ProducerConfig:
    try:
        return ProducerConfig(**_config_fields(args))
    except ValueError as exc:
        raise _UsageError(str(exc)) from None


#: the value of the option itself (not a flag's)
_GIVEN = object()
#: (option, the ProducerConfig field it sets, the value a flag sets or ``_GIVEN``), in the
#: order ``load --json-report`` writes them in (a later one may set a field again)
_FIELDS: tuple[tuple[str, str, object], ...] = (
    ("linger", "record_max_buffered_time", _GIVEN),
    ("no_aggregation", "aggregation_enabled", False),
    ("max_connections", "max_connections", _GIVEN),
    ("rate_limit", "rate_limit", _GIVEN),
    ("record_ttl", "record_ttl", _GIVEN),
    ("admission_ttl_share", "admission_ttl_share", _GIVEN),
    ("no_admission_by_time", "admission_ttl_share", None),
    ("max_outstanding_records", "max_outstanding_records", _GIVEN),
    ("max_outstanding_bytes", "max_outstanding_bytes", _GIVEN),
    ("max_record_size", "max_record_size", _GIVEN),
    ("check_access", "check_access", True),
    ("fail_if_throttled", "fail_if_throttled", True),
    ("ordering", "ordering", _GIVEN),
)


def _config_fields(args: argparse.Namespace) -> dict[str, Any]:
    """The ProducerConfig fields the options set (the others keep their defaults)."""
    fields: dict[str, Any] = {}
    for option, field, value in _FIELDS:
        got = getattr(args, option)
        if value is _GIVEN:
            if got is not None:
                fields[field] = got
        elif got:
            fields[field] = value
    return fields


# -- where to connect ----------------------------------------------------------------------


def _configured_endpoint(args: argparse.Namespace) -> str | None:
    endpoint: str | None = (
        args.endpoint_url
        or os.environ.get("AWS_ENDPOINT_URL_KINESIS")
        or os.environ.get("AWS_ENDPOINT_URL")
    )
    return endpoint


@dataclass(frozen=True)
class _Target:
    """Where to connect and as whom; ``local`` for an embedded emulator."""

    endpoint_url: str | None
    region: str | None
    profile: str | None
    credentials: StaticCredentials | None
    local: bool

    def client(self) -> KinesisClient:
        try:
            return KinesisClient(
                region_name=self.region,
                endpoint_url=self.endpoint_url,
                credentials=self.credentials,
                profile_name=self.profile,
            )
        except ValueError as exc:  # no region, malformed endpoint URL
            raise _UsageError(str(exc).replace("region_name=...", "--region")) from None

    def producer(
        self, stream: str, config: ProducerConfig, schema_registry: SchemaRegistry | None = None
    ) -> Producer:
        return Producer(
            stream,
            region_name=self.region,
            endpoint_url=self.endpoint_url,
            credentials=self.credentials,
            config=config,
            profile_name=self.profile,
            schema_registry=schema_registry,
        )


def _with_target(
    args: argparse.Namespace,
    main: Callable[[_Target], Awaitable[int]],
    *,
    embedded: bool,
    shard_limit: int,
) -> int:
    """Run ``main`` on ``--backend`` against the endpoint, or (``embedded``) a local emulator."""

    def run(target: _Target) -> int:
        return anyio.run(main, target, backend=args.backend)

    endpoint = _configured_endpoint(args)
    if endpoint is not None or not embedded:
        return run(_Target(endpoint, args.region, args.profile, None, False))
    kind = _engine(args)
    print(f"no endpoint configured: starting an embedded {kind} emulator ...", flush=True)
    with LocalKinesis(kind, shard_limit=shard_limit) as emulator:
        print(f"emulator at {emulator.endpoint_url}", flush=True)
        region = args.region or (
            None
            if os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION")
            else "us-east-1"
        )
        return run(_Target(emulator.endpoint_url, region, args.profile, _LOCAL_CREDENTIALS, True))


def _engine(args: argparse.Namespace) -> EmulatorKind:
    """``--emulator``, or kinesalite when Node.js is installed, else python (said in one line)."""
    if args.emulator is not None:
        chosen: EmulatorKind = args.emulator
        return chosen
    kind = default_engine()
    if kind == "python" and not node_available():
        print(
            "Node.js not found: using the Python local engine (kinesis-trio local --emulator "
            "python; install Node.js 18+ for kinesalite and kinesis-local)",
            flush=True,
        )
    return kind


async def _ensure_stream(
    client: KinesisClient, name: str | None, shards: int | None, *, prefix: str
) -> tuple[str, bool]:
    """Return (stream name, created): use ``name`` if it exists, else create it."""
    if name is not None:
        try:
            summary = await client.describe_stream_summary(name)
        except ResourceNotFoundError:
            if shards is None:
                raise _Failure(
                    f"stream {name!r} does not exist at {client.endpoint_url} "
                    "(pass --shards N to create it)"
                ) from None
        else:
            if summary.get("StreamStatus") != "ACTIVE":
                await client.wait_for_stream(name)
            if shards is not None:
                print(f"stream {name} exists: --shards {shards} ignored", flush=True)
            return name, False
    else:
        name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    assert shards is not None
    await client.create_stream(name, shards)
    await client.wait_for_stream(name)
    print(f"created stream {name} with {shards} shards", flush=True)
    return name, True


# -- bookkeeping ---------------------------------------------------------------------------
