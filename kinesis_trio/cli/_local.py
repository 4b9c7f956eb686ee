"""``local``: a local Kinesis until Ctrl-C (the Python engine in this process, or an npm one)."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import anyio
import anyio.abc
import anyio.to_thread

from .._aws._client import KinesisClient
from ..testing._emulators import LocalKinesis
from ._options import _LOCAL_CREDENTIALS, _engine, _Failure, _UsageError
from ._output import _signals_ignored

#: boto3 reads AWS_DEFAULT_REGION (not AWS_REGION); the AWS CLI v2 and other SDKs AWS_REGION.
_REGION_ENV = "AWS_REGION=us-east-1 AWS_DEFAULT_REGION=us-east-1"


def _streams(spec: str) -> list[tuple[str, int]]:
    streams: list[tuple[str, int]] = []
    for part in filter(None, (p.strip() for p in spec.split(","))):
        name, _, shards = part.partition(":")
        try:
            count = int(shards or "1")
        except ValueError:
            count = 0
        if not name or count < 1:
            raise _UsageError(f"--streams: bad entry {part!r}, expected name:shards")
        streams.append((name, count))
    return streams


def _run_local(args: argparse.Namespace) -> int:
    streams = _streams(args.streams)
    kind = _engine(args)
    if kind == "python":
        return _run_python(args, streams)
    python_only = [
        flag
        for flag, given in (
            ("--limits", args.limits != "none"),
            ("--faults", args.faults is not None),
            ("--data", args.data is not None),
            ("--tls", args.tls),
            ("--host", args.host != "127.0.0.1"),
            ("--shard-limit", args.shard_limit != 20_000),
            ("--idle-timeout", args.idle_timeout != 300.0),
        )
        if given
    ]
    if python_only:
        raise _UsageError(f"{', '.join(python_only)}: only with --emulator python")

    async def create(endpoint: str) -> None:
        async with KinesisClient(
            region_name="us-east-1", endpoint_url=endpoint, credentials=_LOCAL_CREDENTIALS
        ) as client:
            for name, shards in streams:
                await client.create_stream(name, shards)
                await client.wait_for_stream(name)
                print(f"  created stream {name} with {shards} shards", flush=True)

    emulator = LocalKinesis(kind, port=args.port or None)
    try:
        print(f"starting {kind} ...", flush=True)
        emulator.start()
        if streams:
            anyio.run(create, emulator.endpoint_url)
        print(f"{kind} running at {emulator.endpoint_url} (Ctrl-C to stop)", flush=True)
        print(
            f"  export AWS_ENDPOINT_URL_KINESIS={emulator.endpoint_url} {_REGION_ENV}",
            flush=True,
        )
        while True:
            time.sleep(0.5)
            proc = getattr(emulator, "_proc", None)
            code = proc.poll() if proc is not None else None
            if code is not None:
                tail = emulator.output_tail(5).replace("\n", " | ")
                raise _Failure(f"{kind} exited unexpectedly (code {code}): {tail}")
    except KeyboardInterrupt:
        print(f"stopping {kind} ...", flush=True)
    finally:
        with _signals_ignored():
            emulator.stop()
    print("stopped", flush=True)
    return 0


def _run_python(args: argparse.Namespace, streams: list[tuple[str, int]]) -> int:
    from ..testing._http import LocalEndpoint
    from ..testing._local_server import (
        STATE_FILE,
        LocalSettings,
        SettingsError,
        make_fake,
        parse_faults,
        run_local,
    )

    try:
        faults = parse_faults(args.faults) if args.faults else None
    except ValueError as exc:
        raise _UsageError(str(exc)) from None
    data = Path(args.data).expanduser() if args.data else None
    settings = LocalSettings(
        host=args.host,
        port=args.port,
        limits=args.limits,
        faults=faults,
        data_dir=data,
        tls=args.tls,
        streams=streams,
        shard_limit=args.shard_limit,
        idle_timeout=args.idle_timeout,
    )
    fake = make_fake(settings)

    def ready(endpoint: LocalEndpoint, cert: Path | None) -> None:
        say = print
        url = endpoint.endpoint_url
        say(f"python engine running at {url} (Ctrl-C to stop)", flush=True)
        if cert is not None:
            say(f"  self-signed certificate: {cert} (AWS_CA_BUNDLE={cert})", flush=True)
        if not args.quiet:
            for name in sorted(fake.streams):
                n = len(fake.streams[name].open_shards())
                say(f"  stream {name}: {n} open shard{'s' if n != 1 else ''}", flush=True)
            limits = "AWS per-shard write limits" if settings.limits == "aws" else "no limits"
            say(f"  {limits}; faults: {args.faults or 'none'}", flush=True)
            if data is not None:
                kept = data / STATE_FILE
                say(f"  data kept in {kept} (saved within about 1 s)", flush=True)
            else:
                say("  data in memory only (--data DIR keeps it across restarts)", flush=True)
            say(
                f"  export AWS_ENDPOINT_URL_KINESIS={url} {_REGION_ENV}",
                flush=True,
            )
            say(f"  Glue Schema Registry too: export AWS_ENDPOINT_URL_GLUE={url}", flush=True)

    try:
        anyio.run(run_local, settings, ready, fake)
    except KeyboardInterrupt:
        print("stopped", flush=True)
    except SettingsError as exc:  # a state file that cannot be loaded, --streams past the quota
        raise _Failure(str(exc)) from None
    return 0
