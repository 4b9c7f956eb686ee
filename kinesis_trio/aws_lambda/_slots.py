"""A spool per process under one root: what Lambda Managed Instances need (blocking I/O).

Under Managed Instances each concurrent request runs in a Python process of its own, the
processes of one execution environment share ``/tmp``, and a spool has one owner (its
``flock``: a second producer gets ``SpoolLockedError``). So the helper keeps one spool per
process, ``ROOT/process-N``: each process opening takes the lowest ``N`` whose lock is free.
A spool whose process died (killed, or the environment scaled down) has a free lock: the
next process to start takes it as its own and sends its records first, and every process,
after its first invocation, also drains the other free spools it finds (ones no process
runs on any more), so none is left behind when there are fewer processes than before.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from .._errors import SpoolLockedError

__all__ = ["MOST", "claim", "siblings"]

#: the most spools under one root (Managed Instances run at most 64 processes per vCPU)
MOST = 4096
_NAME = re.compile(r"process-(\d+)")
_T = TypeVar("_T")


def claim(root: Path, open_in: Callable[[Path], _T]) -> tuple[_T, Path]:
    """``open_in(ROOT/process-N)`` for the lowest ``N`` whose spool is not locked by a
    living producer (``open_in`` raises ``SpoolLockedError`` for one that is)."""
    root.mkdir(parents=True, exist_ok=True)
    for n in range(MOST):
        slot = root / f"process-{n}"
        try:
            return open_in(slot), slot
        except SpoolLockedError:
            continue
    raise SpoolLockedError(f"every one of the {MOST} spools under {root} is in use")


def siblings(root: Path, own: Path) -> list[Path]:
    """The other spools under ``root`` (locked or not), lowest ``N`` first."""
    if not root.is_dir():
        return []
    found = []
    for path in root.iterdir():
        match = _NAME.fullmatch(path.name)
        if match and path != own and path.is_dir():
            found.append((int(match.group(1)), path))
    return [path for _, path in sorted(found)]
