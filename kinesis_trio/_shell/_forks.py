"""Producers in a forked child process.

A process that forks (gunicorn ``--preload``, Celery's prefork pool, ``multiprocessing``
with the fork start method) copies every object of the parent into the child, but not its
threads: a ``SyncProducer``'s event loop thread does not exist there, and a ``Producer``'s
loop, connections and records in flight are the parent's. ``os.register_at_fork`` marks each
producer open at the fork as forked, in the child only, so that its first call there raises
:class:`~kinesis_trio.ProducerForkedError` naming the fix instead of hanging or accepting
records nobody will send. The parent's producers are untouched, and so is what the child's
copy holds of theirs: leaving a ``Producer``'s ``async with`` in the child (:func:`leave`)
does nothing of the close.
"""

from __future__ import annotations

import os
import sys
import weakref
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    import anyio.abc

__all__ = ["forked_message", "leave", "unwatch", "watch"]


class Forkable(Protocol):
    def _forked(self, message: str) -> None:
        """In the child: refuse every call from now with ``message``."""


_open: weakref.WeakSet[Forkable] = weakref.WeakSet()


def watch(producer: Forkable) -> None:
    """``producer`` is open in this process."""
    _open.add(producer)


def unwatch(producer: Forkable) -> None:
    """``producer`` is closed."""
    _open.discard(producer)


def forked_message(kind: str, parent: int) -> str:
    """The error of a producer of ``kind`` opened in process ``parent``, used in this one."""
    return (
        f"this {kind} was opened in process {parent} and is used in process {os.getpid()}, "
        "a child forked from it: its event loop, connections and records in flight stay in "
        "the parent, so nothing put here would be sent. Open one producer per process, "
        "after the fork: in gunicorn's post_fork hook, in Celery's worker_process_init "
        "signal, in a multiprocessing child's target (or use the spawn start method)"
    )


async def leave(tg: anyio.abc.TaskGroup) -> None:
    """A forked child leaves the ``async with`` of a ``Producer`` (``tg``: its task group).
    Nothing of the close is the child's: the records, the spool and its commits, the
    connections and the metrics are the parent's, which goes on with them. So nothing is
    flushed, written, failed or closed, and the records' outcomes stay as the fork left them
    (unresolved). On trio the child's copies of the producer's tasks are cancelled (their
    nursery must end); asyncio runs no event loop in a forked child: nothing to await."""
    trio = sys.modules.get("trio")
    if trio is not None and trio.lowlevel.in_trio_run():
        tg.cancel_scope.cancel()
        await tg.__aexit__(None, None, None)


def _after_fork_in_child() -> None:
    parent = os.getppid()
    producers = list(_open)
    _open.clear()
    for producer in producers:
        producer._forked(forked_message(type(producer).__name__, parent))


if hasattr(os, "register_at_fork"):  # not on Windows, which has no fork
    os.register_at_fork(after_in_child=_after_fork_in_child)
