"""Local Kinesis engines (kinesalite, kinesis-local, python) for tests and the CLI.

kinesalite and kinesis-local are npm packages: :func:`ensure_installed` installs a pinned
version into a per-user cache. ``python`` is this package's own fake served over HTTP
(``kinesis-trio local --emulator python``; no Node needed). :class:`LocalKinesis` runs any of
them as a child process on a free port.

Notes on the emulators (measured with kinesalite 3.3.3 and kinesis-local 0.6.2):

* Both answer a request without an ``Authorization`` header with 400
  ``MissingAuthenticationTokenException``; any SigV4-shaped header passes.
* Both listen on all interfaces; neither takes a bind address on its command line.
* kinesis-local reads its settings from environment variables; durations need a unit
  (``0ms``; a bare ``0`` makes it exit with a ``ciris.ConfigException``). It takes about
  1.5 s to exit on SIGTERM when idle and, when busy, may close its ports and keep running,
  so :meth:`LocalKinesis.stop` always escalates to SIGKILL.
"""

from __future__ import annotations

import atexit
import contextlib
import fcntl
import http.client
import json
import os
import re
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Literal

__all__ = [
    "EMULATORS",
    "ENGINES",
    "EmulatorKind",
    "LocalKinesis",
    "cache_dir",
    "default_engine",
    "ensure_installed",
    "node_available",
]

EmulatorKind = Literal["kinesalite", "kinesis-local", "python"]

EMULATORS: dict[str, str] = {"kinesalite": "3.3.3", "kinesis-local": "0.6.2"}
"""npm package name -> pinned version."""

ENGINES: tuple[EmulatorKind, ...] = ("kinesalite", "kinesis-local", "python")
"""Every local engine: the two npm emulators and the Python one."""


def node_available() -> bool:
    """True when ``node`` and ``npm`` are on PATH (the npm emulators can run)."""
    return shutil.which("node") is not None and shutil.which("npm") is not None


def default_engine() -> EmulatorKind:
    """kinesalite when Node.js is installed, else the Python engine."""
    return "kinesalite" if node_available() else "python"


# kinesis-local's state-transition delays (all default to 500ms).
_KINESIS_LOCAL_DURATIONS = (
    "CREATE_STREAM_DURATION",
    "DELETE_STREAM_DURATION",
    "REGISTER_STREAM_CONSUMER_DURATION",
    "DEREGISTER_STREAM_CONSUMER_DURATION",
    "START_STREAM_ENCRYPTION_DURATION",
    "STOP_STREAM_ENCRYPTION_DURATION",
    "MERGE_SHARDS_DURATION",
    "SPLIT_SHARD_DURATION",
    "UPDATE_SHARD_COUNT_DURATION",
    "UPDATE_STREAM_MODE_DURATION",
)

_NPM_TIMEOUT = 600.0
_STOP_GRACE = 5.0
_DUMMY_AUTHORIZATION = (
    "AWS4-HMAC-SHA256 Credential=test/20200101/us-east-1/kinesis/aws4_request, "
    "SignedHeaders=host, Signature=00"
)


def cache_dir() -> Path:
    """Return the per-user cache folder (``$KINESIS_TRIO_CACHE`` or the XDG cache)."""
    explicit = os.environ.get("KINESIS_TRIO_CACHE")
    if explicit:
        return Path(explicit).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "kinesis-trio"


def _require_tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        raise RuntimeError(
            f"`{name}` was not found on PATH: the local Kinesis emulators are npm packages "
            "and need Node.js (node and npm) installed"
        )
    return path


def _tail(text: str, lines: int = 40) -> str:
    return "\n".join(text.strip().splitlines()[-lines:])


def _installed_version(pkg_dir: Path) -> str | None:
    try:
        meta = json.loads((pkg_dir / "package.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    version = meta.get("version") if isinstance(meta, dict) else None
    return version if isinstance(version, str) else None


def ensure_installed(kind: str, *, quiet: bool = True) -> Path:
    """Install the pinned npm package ``kind`` into the cache if needed; return its folder.

    Concurrent callers (pytest-xdist workers, two CLI runs) serialise on a file lock; the
    install goes to a scratch folder that is renamed into place only once it succeeded.
    """
    if kind not in EMULATORS:
        raise ValueError(f"unknown emulator {kind!r}; expected one of {sorted(EMULATORS)}")
    version = EMULATORS[kind]
    root = cache_dir() / "npm"
    prefix = root / f"{kind}-{version}"
    pkg_dir = prefix / "node_modules" / kind
    if _installed_version(pkg_dir) == version:
        return pkg_dir

    root.mkdir(parents=True, exist_ok=True)
    with open(root / f"{kind}-{version}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if _installed_version(pkg_dir) == version:  # another process won the race
                return pkg_dir
            _npm_install(kind, version, prefix, quiet=quiet)
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)
    if _installed_version(pkg_dir) != version:
        raise RuntimeError(f"npm install of {kind}@{version} did not produce {pkg_dir}")
    return pkg_dir


def _npm_install(kind: str, version: str, prefix: Path, *, quiet: bool) -> None:
    npm = _require_tool("npm")
    _require_tool("node")
    scratch = prefix.with_name(f"{prefix.name}.tmp-{os.getpid()}")
    shutil.rmtree(scratch, ignore_errors=True)
    scratch.mkdir(parents=True)
    cmd = [npm, "install", "--no-audit", "--no-fund", "--prefix", str(scratch), f"{kind}@{version}"]
    try:
        try:
            result = subprocess.run(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE if quiet else None,
                stderr=subprocess.PIPE,
                text=True,
                timeout=_NPM_TIMEOUT,
                check=False,
            )
        except subprocess.TimeoutExpired as exc:
            raise RuntimeError(
                f"`npm install {kind}@{version}` did not finish in {_NPM_TIMEOUT:.0f}s"
            ) from exc
        if result.returncode != 0:
            raise RuntimeError(
                f"`npm install {kind}@{version}` failed with exit code {result.returncode}:\n"
                + _tail(result.stderr or "")
            )
        if not quiet and result.stderr:
            print(result.stderr, end="", file=sys.stderr)
        shutil.rmtree(prefix, ignore_errors=True)
        os.replace(scratch, prefix)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _free_ports(host: str, count: int) -> list[int]:
    """Return ``count`` distinct ports that were free on ``host`` a moment ago."""
    socks: list[socket.socket] = []
    try:
        for _ in range(count):
            s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            s.bind((host, 0))
            socks.append(s)
        return [s.getsockname()[1] for s in socks]
    finally:
        for s in socks:
            s.close()


_RUNNING: set[LocalKinesis] = set()


@atexit.register
def _stop_all() -> None:
    for emulator in list(_RUNNING):
        with contextlib.suppress(Exception):
            emulator.stop()


class LocalKinesis:
    """A local Kinesis emulator child process; use as a context manager or start()/stop()."""

    def __init__(
        self,
        kind: EmulatorKind = "kinesalite",
        *,
        port: int | None = None,
        shard_limit: int = 1000,
        host: str = "127.0.0.1",
        log_file: Path | None = None,
        startup_timeout: float = 60.0,
        initialize_streams: str | None = None,
        extra_env: Mapping[str, str] | None = None,
        args: Sequence[str] = (),
    ) -> None:
        """Describe an engine; nothing runs until :meth:`start`.

        ``port=None`` picks a free port. ``initialize_streams`` (kinesis-local only) is its
        ``INITIALIZE_STREAMS`` value, e.g. ``"a:2,b:1"``. ``extra_env`` overrides the
        child's environment (kinesis-local reads its settings from there). ``args``
        (python only): more options of ``kinesis-trio local``, e.g. ``["--limits", "aws"]``.
        """
        if kind not in ENGINES:
            raise ValueError(f"unknown emulator {kind!r}; expected one of {list(ENGINES)}")
        if initialize_streams is not None and kind != "kinesis-local":
            raise ValueError("initialize_streams is only supported by kinesis-local")
        if args and kind != "python":
            raise ValueError("args are only supported by the python engine")
        self.args: list[str] = list(args)
        self._kind: EmulatorKind = kind
        self._requested_port = port
        self._port: int | None = port
        self.shard_limit = shard_limit
        self.host = host
        self.startup_timeout = startup_timeout
        self.initialize_streams = initialize_streams
        self.extra_env: dict[str, str] = dict(extra_env or {})
        self._log_file = log_file
        self._log_path: Path | None = None
        self._owns_log = False
        self._proc: subprocess.Popen[bytes] | None = None

    # -- properties ---------------------------------------------------------------------

    @property
    def kind(self) -> EmulatorKind:
        """``"kinesalite"``, ``"kinesis-local"`` or ``"python"``."""
        return self._kind

    @property
    def port(self) -> int:
        """The plain-HTTP port (known once started, or when given)."""
        if self._port is None:
            raise RuntimeError("emulator not started: its port is not chosen yet")
        return self._port

    @property
    def tls(self) -> bool:
        """True when the engine serves HTTPS (the python engine with ``--tls``)."""
        return "--tls" in self.args

    @property
    def certificate(self) -> Path | None:
        """The self-signed certificate of a running python engine with ``--tls`` (to trust)."""
        found = re.search(r"self-signed certificate: (\S+)", self.output_tail(10))
        return Path(found[1]) if self.tls and found else None

    @property
    def endpoint_url(self) -> str:
        """``http://<host>:<port>`` (``https://`` with ``--tls``)."""
        return f"{'https' if self.tls else 'http'}://{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        """PID of the emulator process while it runs (also its process group id)."""
        return self._proc.pid if self._proc is not None else None

    @property
    def log_path(self) -> Path | None:
        """Where the emulator's stdout/stderr go."""
        return self._log_path or self._log_file

    def output_tail(self, lines: int = 40) -> str:
        """The last ``lines`` lines of the emulator's output."""
        path = self.log_path
        if path is None:
            return ""
        try:
            return _tail(path.read_text(encoding="utf-8", errors="replace"), lines)
        except OSError:
            return ""

    # -- lifecycle ----------------------------------------------------------------------

    def __enter__(self) -> LocalKinesis:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def start(self) -> None:
        """Install if needed, launch, and wait until the emulator answers API calls."""
        if self._proc is not None:
            raise RuntimeError(f"{self._kind} emulator already started (pid {self._proc.pid})")
        if self._kind == "python":
            pkg_dir, node = Path.cwd(), sys.executable
        else:
            pkg_dir = ensure_installed(self._kind)
            node = _require_tool("node")
        attempts = 3  # retried only when a port we picked was taken before node bound it
        for attempt in range(1, attempts + 1):
            try:
                self._launch(node, pkg_dir)
                self._wait_ready()
                return
            except _PortTaken:
                tail = self.output_tail()
                self.stop()
                if attempt == attempts:
                    raise RuntimeError(f"{self._kind} could not bind a port:\n{tail}") from None
            except BaseException:
                self.stop(keep_log=True)
                raise

    def _launch(self, node: str, pkg_dir: Path) -> None:
        wanted = (self._requested_port is None) + (self._kind == "kinesis-local")
        picked = _free_ports(self.host, wanted)
        self._port = self._requested_port if self._requested_port is not None else picked.pop(0)
        env = dict(os.environ)
        if self._kind == "python":
            cmd = [
                node,  # this interpreter
                "-m", "kinesis_trio", "local", "--emulator", "python",
                "--host", self.host,
                "--port", str(self._port),
                "--quiet",
                *self.args,
            ]  # fmt: skip
        elif self._kind == "kinesalite":
            cmd = [
                node,
                str(pkg_dir / "cli.js"),
                "--port", str(self._port),
                "--createStreamMs", "0",
                "--deleteStreamMs", "0",
                "--updateStreamMs", "0",
                "--shardLimit", str(self.shard_limit),
            ]  # fmt: skip
        else:
            cmd = [node, str(pkg_dir / "main.js")]
            env.pop("INITIALIZE_STREAMS", None)
            env.update(
                KINESIS_MOCK_PLAIN_PORT=str(self._port),
                KINESIS_MOCK_TLS_PORT=str(picked.pop(0)),
                SHARD_LIMIT=str(self.shard_limit),
                LOG_LEVEL="WARN",
            )
            env.update(dict.fromkeys(_KINESIS_LOCAL_DURATIONS, "0ms"))
            if self.initialize_streams is not None:
                env["INITIALIZE_STREAMS"] = self.initialize_streams
        env.update(self.extra_env)

        log: IO[bytes]
        if self._log_file is not None:
            self._log_file.parent.mkdir(parents=True, exist_ok=True)
            log = open(self._log_file, "ab")  # noqa: SIM115 - closed below, child keeps its fd
            self._log_path, self._owns_log = self._log_file, False
        else:
            log = tempfile.NamedTemporaryFile(  # noqa: SIM115
                prefix=f"kinesis-trio-{self._kind}-", suffix=".log", delete=False
            )
            self._log_path, self._owns_log = Path(log.name), True
        with log:
            self._proc = subprocess.Popen(
                cmd,
                cwd=pkg_dir,  # kinesis-local reads server.json from its working directory
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        _RUNNING.add(self)

    def _wait_ready(self) -> None:
        assert self._proc is not None
        deadline = time.monotonic() + self.startup_timeout
        while True:
            code = self._proc.poll()
            if code is not None:
                out = self.output_tail()
                taken = {int(p) for p in re.findall(r"EADDRINUSE\D*?:(\d+)", out)}
                if "Address already in use" in out and self._kind == "python":
                    taken.add(self.port)
                if taken and self._requested_port not in taken:  # a port we picked
                    raise _PortTaken
                raise RuntimeError(f"{self._kind} exited during startup (code {code}):\n{out}")
            if self._answers() and self._bound():
                return
            if time.monotonic() > deadline:
                raise RuntimeError(
                    f"{self._kind} did not answer on {self.endpoint_url} within "
                    f"{self.startup_timeout:.0f}s:\n{self.output_tail()}"
                )
            time.sleep(0.05)

    def _bound(self) -> bool:
        """The python engine says it listens on our port (what answers there may be another
        process's, bound to a port we picked after it was found free: ours then fails to
        bind and exits). The npm emulators say nothing reliable: their exit shows it."""
        if self._kind != "python":
            return True
        return f"running at {self.endpoint_url} " in self.output_tail(400)

    def _answers(self) -> bool:
        """True once a ListStreams call gets any HTTP response (even 4xx)."""
        conn: http.client.HTTPConnection
        if self.tls:  # the engine's own self-signed certificate: only "does it answer"
            context = ssl._create_unverified_context()
            conn = http.client.HTTPSConnection(self.host, self.port, timeout=1.0, context=context)
        else:
            conn = http.client.HTTPConnection(self.host, self.port, timeout=1.0)
        try:
            conn.request(
                "POST",
                "/",
                body=b"{}",
                headers={
                    "Content-Type": "application/x-amz-json-1.1",
                    "X-Amz-Target": "Kinesis_20131202.ListStreams",
                    "X-Amz-Date": time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()),
                    "Authorization": _DUMMY_AUTHORIZATION,
                },
            )
            conn.getresponse().read()
        except (OSError, http.client.HTTPException):
            return False
        finally:
            conn.close()
        return True

    def stop(self, *, keep_log: bool = False) -> None:
        """SIGTERM the process group, SIGKILL it after 5 s; idempotent.

        A temporary log file is removed unless ``keep_log`` is true.
        """
        proc, self._proc = self._proc, None
        _RUNNING.discard(self)
        if proc is not None:
            pgid = proc.pid  # start_new_session: the child leads its own group
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, signal.SIGTERM)
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=_STOP_GRACE)
            # Also kill whatever else is left in the group (or a child that ignored SIGTERM).
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, signal.SIGKILL)
            proc.wait()
        if self._owns_log and not keep_log and self._log_path is not None:
            with contextlib.suppress(OSError):
                self._log_path.unlink()
            self._log_path, self._owns_log = None, False

    def __repr__(self) -> str:
        state = f"pid={self.pid}" if self._proc is not None else "stopped"
        return f"LocalKinesis({self._kind!r}, port={self._port}, {state})"


class _PortTaken(Exception):
    """The auto-picked port was grabbed by someone else before the emulator bound it."""
