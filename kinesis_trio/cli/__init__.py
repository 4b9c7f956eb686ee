"""The ``kinesis-trio`` command.

``kinesis-trio produce --stream S [FILE|-]``
    Write newline-delimited records from a file or stdin (like ``kcat -P``): raw lines, or
    JSON lines (``--json``) keyed by a field (``--key-field user.id``) or a template
    (``--key-template "{tenant}-{line_no}"``); a random uuid4 per record by default. Live
    progress on stderr, a summary on stdout, failed records (line + error) as JSON lines in
    ``--failed FILE``; exit code 1 when any record failed. ``--spool DIR`` keeps the records
    read on disk until written: a run started again on DIR after a crash sends them first.
    ``--schema FILE --schema-format F --schema-name N`` writes JSON lines as Glue Schema
    Registry records.
``kinesis-trio perf [--stream S] [-s SIZE] [-n COUNT] [-r RATE] [--duration S]``
    A load generator like ``rdkafka_performance -P``: throughput, latency percentiles (from
    each record's scheduled time when ``-r`` is given: no coordinated omission), CPU per
    record, throttles and failures. ``--processes N`` runs N producer processes on the
    stream and sums their figures.
``kinesis-trio local [--port P] [--streams a:2,b:1]``
    Run a local emulator (kinesalite or kinesis-local) until Ctrl-C.
``kinesis-trio tail --stream S [-f] [-n N] [--format raw|json|base64]``
    Read a stream back (like ``kcat -C``): every shard or ``--shard ID``, from the start,
    ``--from-latest``, ``--from-timestamp`` or ``--from-sequence``; KPL aggregates split as
    the KCL does; ``-f`` keeps polling and follows resharding; ``--decode gsr`` prints Glue
    Schema Registry records decoded, as JSON lines.
``kinesis-trio demo``
    Write 100,000 records and print a one-row table (the README's first command).

``perf`` and ``demo`` start an embedded emulator when neither an endpoint
(``--endpoint-url``, ``AWS_ENDPOINT_URL_KINESIS``, ``AWS_ENDPOINT_URL``) nor ``--stream`` is
given; with ``--stream NAME`` alone they use the AWS defaults (the real service). Bad arguments and
invalid producer settings exit with status 2 and a one-line message; AWS errors exit 1.
Live progress and tables use ``rich`` when it is installed and the output is a terminal.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from .._errors import KinesisTrioError
from ._commands import _parser
from ._load import _run_demo
from ._local import _run_local
from ._multi import _run_perf_command
from ._options import _PROG, _Failure, _UsageError
from ._output import _sigterm_as_interrupt
from ._produce import _run_produce
from ._tail import _run_tail

if sys.version_info < (3, 11):  # pragma: no cover
    from exceptiongroup import BaseExceptionGroup

__all__ = ["main"]

_COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "produce": _run_produce,
    "perf": _run_perf_command,
    "demo": _run_demo,
    "local": _run_local,
    "tail": _run_tail,
}


def _one_line(text: str, limit: int = 600) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _unwrap(exc: BaseException) -> BaseException:
    """The meaningful exception inside (nested) exception groups."""
    while isinstance(exc, BaseExceptionGroup):
        inner = [
            e for e in exc.exceptions if type(e).__name__ not in ("Cancelled", "CancelledError")
        ]
        exc = (inner or list(exc.exceptions))[0]
    return exc


def _error(message: str) -> None:
    print(f"{_PROG}: error: {message}", file=sys.stderr, flush=True)


def _report(exc: BaseException) -> int | None:
    """Print ``exc`` as one line and return the exit status; None: not ours to handle."""
    if isinstance(exc, _UsageError):
        _error(str(exc))
        return 2
    if isinstance(exc, _Failure):
        _error(_one_line(str(exc)))
        return 1
    if isinstance(exc, KinesisTrioError):
        text, name = str(exc), type(exc).__name__
        if not hasattr(exc, "code") and not text.startswith(name):  # KinesisError names its code
            text = f"{name}: {text}"
        text = text.replace("profile_name=...", "--profile").replace("spool_dir", "--spool")
        _error(_one_line(text.replace("pass credentials=StaticCredentials(...), set", "set")))
        return 1
    if isinstance(exc, (TimeoutError, OSError)):
        _error(_one_line(f"{type(exc).__name__}: {exc}"))
        return 1
    if isinstance(exc, RuntimeError):  # e.g. the emulator could not start (keeps its log tail)
        _error(str(exc))
        return 1
    if isinstance(exc, KeyboardInterrupt):
        print(f"{_PROG}: interrupted", file=sys.stderr, flush=True)
        return 130
    return None


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``kinesis-trio`` console script."""
    args = _parser().parse_args(argv)
    with _sigterm_as_interrupt():
        try:
            return _COMMANDS[args.command](args)
        except BaseException as exc:
            status = _report(_unwrap(exc))
            if status is None:
                raise
            return status


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
