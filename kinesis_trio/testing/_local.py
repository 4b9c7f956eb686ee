"""``kinesis-trio local --emulator python``: the fake served until stopped, kept on disk or not."""

from __future__ import annotations

import dataclasses
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import anyio

from ._faults import Faults
from ._http import LocalEndpoint, self_signed_context, serve
from ._persist import load_state, save_state
from ._server import FakeKinesis

__all__ = ["LocalSettings", "StateFileError", "make_fake", "parse_faults", "run_local"]

#: The file ``--data DIR`` keeps the streams in.
STATE_FILE = "kinesis-state.json"
_FLOAT_FAULTS = tuple(
    f.name for f in dataclasses.fields(Faults) if f.type in ("float", float) and f.name != "seed"
)


@dataclass
class LocalSettings:
    """What ``kinesis-trio local --emulator python`` serves and how."""

    host: str = "127.0.0.1"
    port: int = 4567
    #: ``"aws"``: per-shard write limits of 1,000 records/s and 1 MiB/s (throttled entries
    #: fail with ProvisionedThroughputExceededException); ``"none"``: no limits.
    limits: str = "none"
    faults: Faults | None = None
    #: Keep the streams in ``data_dir/kinesis-state.json``: loaded at start, written within
    #: ``save_interval`` seconds of a change and at a clean stop.
    data_dir: Path | None = None
    save_interval: float = 1.0
    tls: bool = False
    #: Streams to create when absent: (name, shard count).
    streams: list[tuple[str, int]] = field(default_factory=list)


def parse_faults(spec: str) -> Faults:
    """``"http_500=0.01,throttle_entries=0.05,latency=0.02,seed=7,fatal=audit:AccessDeniedException"``.

    Each name is a :class:`Faults` field; ``fatal=STREAM:CODE`` may be repeated.
    """
    values: dict[str, float] = {}
    fatal: dict[str, str] = {}
    seed: int | None = None
    for part in filter(None, (p.strip() for p in spec.split(","))):
        name, sep, value = part.partition("=")
        name, value = name.strip(), value.strip()
        if not sep or not value:
            raise ValueError(f"--faults: {part!r} is not NAME=VALUE")
        if name == "fatal":
            stream, colon, code = value.partition(":")
            if not colon or not stream or not code:
                raise ValueError(f"--faults: fatal={value!r}, expected fatal=STREAM:ERROR_CODE")
            fatal[stream] = code
        elif name == "seed":
            try:
                seed = int(value)
            except ValueError:
                raise ValueError(f"--faults: seed={value!r} is not an integer") from None
        elif name in _FLOAT_FAULTS:
            try:
                number = float(value)
            except ValueError:
                raise ValueError(f"--faults: {name}={value!r} is not a number") from None
            if not math.isfinite(number):
                raise ValueError(f"--faults: {name}={value!r} is not finite")
            values[name] = number
        else:
            known = ", ".join((*_FLOAT_FAULTS, "seed", "fatal"))
            raise ValueError(f"--faults: unknown fault {name!r} (known: {known})")
    return Faults(**values, fatal=fatal, seed=seed)  # type: ignore[arg-type]


class StateFileError(ValueError):
    """``--data DIR`` holds a state file that cannot be loaded (the message names it)."""


def make_fake(settings: LocalSettings) -> FakeKinesis:
    """The fake as ``settings`` describe it (its streams are loaded by :func:`run_local`)."""
    return FakeKinesis(enforce_limits=settings.limits == "aws", faults=settings.faults)


def _prepare(fake: FakeKinesis, settings: LocalSettings) -> None:
    """Wall-clock timestamps, the saved streams, then the streams asked for."""
    fake.clock_offset = time.time() - anyio.current_time()
    if settings.data_dir is not None:
        settings.data_dir.mkdir(parents=True, exist_ok=True)
        try:
            load_state(fake, settings.data_dir / STATE_FILE)
        except ValueError as exc:
            raise StateFileError(str(exc)) from None
    for name, shards in settings.streams:
        if name not in fake.streams:
            fake.create_stream(name, shard_count=shards)


async def run_local(
    settings: LocalSettings,
    ready: Callable[[LocalEndpoint, Path | None], None],
    fake: FakeKinesis | None = None,
) -> None:
    """Serve until cancelled; ``ready(endpoint, certificate)`` is called once listening.

    With ``data_dir``, the state is saved within ``save_interval`` of each change and once
    more when the server stops (also on Ctrl-C and SIGTERM via KeyboardInterrupt).
    """
    fake = fake if fake is not None else make_fake(settings)
    _prepare(fake, settings)
    context, cert = None, None
    if settings.tls:
        where = settings.data_dir or Path.home() / ".cache" / "kinesis-trio" / "tls"
        context, cert = self_signed_context(where)
    if settings.data_dir is None:
        async with serve(fake, host=settings.host, port=settings.port, ssl_context=context) as ep:
            ready(ep, cert)
            await anyio.sleep_forever()
        return
    path = settings.data_dir / STATE_FILE
    save_state(fake, path)  # the streams created at start, and a check that DIR is writable
    saved = fake.changes
    try:
        async with serve(fake, host=settings.host, port=settings.port, ssl_context=context) as ep:
            ready(ep, cert)
            while True:
                await anyio.sleep(settings.save_interval)
                if fake.changes != saved:
                    saved = fake.changes
                    save_state(fake, path)
    finally:
        if fake.changes != saved:
            save_state(fake, path)
