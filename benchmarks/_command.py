"""The benchmark command being run, for every command and the results it writes.

Holds the repository's root (``ROOT``: the children's working directory and ``git``'s), the
words of the command (``COMMAND``, set by ``python -m benchmarks NAME ...`` in ``__main__`` and
by :func:`run_parts`), :func:`command_line` that regenerates the results being written,
:func:`run_parts` for the commands made of parts (``engines``, ``fleet``, ``sizes``,
``steady``), and the progress log on stderr (:func:`log`, :func:`timed`). Used by
``__main__``, the commands, and ``_report``, ``_child`` and ``_runs``.
"""

from __future__ import annotations

import contextlib
import shlex
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


#: The command a result is written by, set by ``python -m benchmarks NAME ...``.
COMMAND: list[str] = []


def command_line() -> str:
    """The command that regenerates the results being written."""
    words = COMMAND or [sys.modules["__main__"].__spec__.name, *sys.argv[1:]]  # type: ignore[union-attr]
    return "uv run python -m " + " ".join(shlex.quote(a) for a in words)


@contextlib.contextmanager
def timed(label: str, log: Callable[[str], None] = print) -> Iterator[None]:
    t0 = time.perf_counter()
    yield
    log(f"{label}: {time.perf_counter() - t0:.1f}s")


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def run_parts(command: str, doc: str, parts: dict[str, str], shared: Sequence[str] = ()) -> None:
    """``python -m benchmarks COMMAND [PART [ARGS...]]``: run one part of a command with its
    arguments, or every part with its defaults. ``parts``: part name -> module; ``shared``:
    options every part takes, given to each when no part is named (``fleet --quick``)."""
    import importlib

    argv = sys.argv[1:]
    if argv and argv[0] in ("-h", "--help"):
        print(doc.strip())
        print(f"\nparts (python -m benchmarks {command} PART --help for its options):")
        width = max(8, *map(len, parts))
        for part, module in parts.items():
            first = (importlib.import_module(module).__doc__ or "").strip().splitlines()
            print(f"  {part:{width}} {first[0] if first else ''}")
        return
    if argv and argv[0] not in parts and not set(argv) <= set(shared):
        raise SystemExit(
            f"benchmarks {command}: {argv[0]!r} is not a part; the parts: {', '.join(parts)}"
            + (f" (every part takes {', '.join(shared)})" if shared else "")
        )
    chosen, rest = ([argv[0]], argv[1:]) if argv and argv[0] in parts else (list(parts), argv)
    for part in chosen:
        COMMAND[:] = ["benchmarks", command, part, *rest]
        sys.argv = [f"python -m benchmarks {command} {part}", *rest]
        importlib.import_module(parts[part]).main()
