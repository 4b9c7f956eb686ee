"""``kinesis-trio local --emulator python``: the fake served until stopped, kept on disk or not."""

from __future__ import annotations

import dataclasses
import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import anyio.to_thread

from .._logging import get_logger
from ._faults import Faults
from ._http import LocalEndpoint, self_signed_context, serve
from ._persist import StateStore, load_state
from ._server import FakeKinesis

__all__ = [
    "LocalSettings",
    "SettingsError",
    "StateFileError",
    "make_fake",
    "parse_faults",
    "run_local",
]

#: The file ``--data DIR`` keeps the streams in (a SQLite database, see ``_persist``).
STATE_FILE = "kinesis-state.sqlite"
#: The JSON snapshot older versions kept; converted into ``STATE_FILE`` once, then renamed
#: to ``MIGRATED_FILE``.
LEGACY_STATE_FILE = "kinesis-state.json"
MIGRATED_FILE = "kinesis-state.json.migrated"
_log = get_logger("kinesis_trio.local")
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
    #: Keep the streams in ``data_dir/kinesis-state.sqlite``: loaded at start, what changed
    #: written every ``save_interval`` seconds (a record is on disk within about
    #: ``save_interval`` plus one save's time of its acknowledgement) and at a clean stop.
    data_dir: Path | None = None
    save_interval: float = 1.0
    tls: bool = False
    #: Streams to create when absent: (name, shard count).
    streams: list[tuple[str, int]] = field(default_factory=list)
    #: The account's shard quota (open shards over all streams): LimitExceededException past it.
    shard_limit: int = 20_000
    #: Seconds a connection may stay idle between requests before the server closes it.
    idle_timeout: float = 300.0


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


class SettingsError(ValueError):
    """The engine cannot start as asked (the message says which setting and why)."""


class StateFileError(SettingsError):
    """``--data DIR`` holds a state file that cannot be loaded, or DIR cannot be written at
    start (the message names the file and the problem)."""


#: Descriptors kept for everything but client connections (the listener, the state
#: store and its journal, the certificate files, the interpreter's own).
_RESERVED_DESCRIPTORS = 64


def connection_cap(most: int = 1024) -> int:
    """How many client connections to serve at once: ``most``, or fewer when the process's
    open-file limit (``ulimit -n``: 256 on macOS by default) would run out first, so the
    engine stops accepting (clients wait in the listen backlog) before ``accept()`` fails."""
    try:
        import resource

        soft, _hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    except (ImportError, OSError, ValueError):  # no such limit here (Windows)
        return most
    if soft == resource.RLIM_INFINITY:
        return most
    return max(8, min(most, soft - _RESERVED_DESCRIPTORS))


def make_fake(settings: LocalSettings) -> FakeKinesis:
    """The fake as ``settings`` describe it (its streams are loaded by :func:`run_local`)."""
    return FakeKinesis(
        enforce_limits=settings.limits == "aws",
        faults=settings.faults,
        shard_limit=settings.shard_limit,
        request_log=0,  # nobody reads it; a long run must not grow it
    )


def _prepare(fake: FakeKinesis, settings: LocalSettings) -> StateStore | None:
    """Wall-clock timestamps, the saved streams, then the streams asked for; the store
    the streams are kept in (``None`` without ``data_dir``), saved once."""
    fake.use_wall_clock()
    data_dir = settings.data_dir
    store = _open_store(fake, data_dir) if data_dir is not None else None
    try:
        for name, shards in settings.streams:
            if name not in fake.streams:
                try:
                    fake.create_stream(name, shard_count=shards)
                except ValueError as exc:  # past the shard quota
                    raise SettingsError(f"--streams {name}:{shards}: {exc}") from None
        if store is not None and data_dir is not None:
            try:  # the streams created at start, and a check that DIR is writable
                store.save(fake)
            except Exception as exc:
                raise StateFileError(f"{store.path}: cannot save ({_error(exc)})") from None
            _finish_migration(data_dir, store)
    except BaseException:
        if store is not None:
            store.close()
        raise
    return store


def _open_store(fake: FakeKinesis, data_dir: Path) -> StateStore:
    """Open and load ``data_dir``'s store; an old JSON snapshot is loaded to be saved in it."""
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StateFileError(f"{data_dir}: cannot create the data directory ({exc})") from None
    _remove_stale_temporaries(data_dir)
    legacy = data_dir / LEGACY_STATE_FILE
    try:
        store = StateStore(data_dir / STATE_FILE)
    except ValueError as exc:
        raise StateFileError(str(exc)) from None
    try:
        if store.load(fake):
            if legacy.exists() and store.meta.get("migrated_from") != _fingerprint(legacy):
                _log.warning(
                    "local_kinesis_legacy_state_ignored",
                    file=str(legacy),
                    store=str(store.path),
                    reason="the store exists; move it away to load the JSON file instead",
                )
        elif legacy.exists():
            load_state(fake, legacy)
            store.note("migrated_from", _fingerprint(legacy))
    except ValueError as exc:
        store.close()
        raise StateFileError(str(exc)) from None
    except BaseException:
        store.close()
        raise
    return store


def _fingerprint(path: Path) -> str:
    """Which JSON snapshot a store was made from (its size and modification time)."""
    try:
        info = path.stat()
    except OSError:
        return ""
    return f"{path.name}:{info.st_size}:{info.st_mtime_ns}"


def _finish_migration(data_dir: Path, store: StateStore) -> None:
    """If the store holds the JSON snapshot beside it, rename the snapshot (at the start
    after the conversion, or after a start that could not rename it)."""
    legacy = data_dir / LEGACY_STATE_FILE
    if not legacy.exists() or store.meta.get("migrated_from") != _fingerprint(legacy):
        return
    try:
        os.replace(legacy, data_dir / MIGRATED_FILE)
    except OSError as exc:
        _log.warning("local_kinesis_migration_rename_failed", file=str(legacy), error=str(exc))
        return
    _log.warning(
        "local_kinesis_state_migrated",
        file=str(legacy),
        store=str(store.path),
        renamed_to=str(data_dir / MIGRATED_FILE),
    )


def _remove_stale_temporaries(data_dir: Path) -> None:
    """Temporary files older versions left when killed while saving their JSON snapshot."""
    for stale in data_dir.glob(f".{LEGACY_STATE_FILE}.*.tmp"):
        try:
            stale.unlink()
        except OSError as exc:
            _log.warning("local_kinesis_stale_temp_not_removed", file=str(stale), error=str(exc))
        else:
            _log.warning("local_kinesis_stale_temp_removed", file=str(stale))


def _error(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


async def _keep_saving(fake: FakeKinesis, store: StateStore, interval: float) -> None:
    """Every ``interval``, save what changed: gathered in the event loop, written in a
    worker thread, one save at a time. A save that fails is logged and retried at the next
    interval; until one succeeds, the fake refuses writes (``fake.write_block``)."""
    failing: str | None = None
    saved: int | None = None  # fake.changes when the last save written was planned
    due = anyio.current_time()
    while True:
        due += interval
        await anyio.sleep_until(due)
        changes = fake.changes
        if changes == saved:  # nothing changed: no plan (its cost grows with the shards)
            continue
        plan = store.plan(fake)
        if plan is None:
            saved = changes
            continue
        try:
            await anyio.to_thread.run_sync(store.write, plan)
        except Exception as exc:  # disk full, file size limit, I/O error: kept in memory
            error = _error(exc)
            if error != failing:
                _log.error(
                    "local_kinesis_save_failed",
                    file=str(store.path),
                    error=error,
                    retry_in=interval,
                    writes="refused until a save succeeds",
                )
            failing = error
            fake.refuse_writes(
                f"kinesis-trio local cannot save its state to {store.path} ({error}); "
                "writes are refused until a save succeeds"
            )
        else:
            if failing is not None:
                _log.warning("local_kinesis_save_recovered", file=str(store.path))
            failing = None
            fake.refuse_writes(None)
            saved = changes
        # a save longer than the interval: the next one starts at once, not in a burst
        due = max(due, anyio.current_time() - interval)


def _final_save(fake: FakeKinesis, store: StateStore) -> None:
    """At a stop: save what is left (in this thread) and close the store."""
    try:
        store.save(fake)
    except Exception as exc:
        _log.error("local_kinesis_save_failed", file=str(store.path), error=_error(exc), final=True)
    finally:
        try:
            store.close()
        except Exception as exc:
            _log.error("local_kinesis_close_failed", file=str(store.path), error=_error(exc))


async def run_local(
    settings: LocalSettings,
    ready: Callable[[LocalEndpoint, Path | None], None],
    fake: FakeKinesis | None = None,
) -> None:
    """Serve until cancelled; ``ready(endpoint, certificate)`` is called once listening.

    With ``data_dir``, what changed is saved every ``save_interval`` (in a worker thread)
    and once more when the server stops (also on Ctrl-C and SIGTERM via KeyboardInterrupt).
    A save that fails does not stop the server: writes are refused (503) until one succeeds.
    """
    fake = fake if fake is not None else make_fake(settings)
    store = _prepare(fake, settings)
    try:
        context, cert = None, None
        if settings.tls:
            where = settings.data_dir or Path.home() / ".cache" / "kinesis-trio" / "tls"
            context, cert = self_signed_context(where)
        async with serve(
            fake,
            host=settings.host,
            port=settings.port,
            ssl_context=context,
            max_connections=connection_cap(),
            idle_timeout=settings.idle_timeout,
        ) as ep:
            ready(ep, cert)
            if store is None:
                await anyio.sleep_forever()
            else:
                await _keep_saving(fake, store, settings.save_interval)
    finally:
        if store is not None:
            _final_save(fake, store)
