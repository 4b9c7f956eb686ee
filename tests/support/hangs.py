"""Pytest plugin: a hung test's stacks reach the log, from an xdist worker too.

pytest-timeout's thread method (``timeout_method = "thread"``) writes its report, every
thread's stack, to the terminal and ends the process. In an xdist worker the terminal is
file descriptor 1, which execnet points at ``/dev/null`` (its channel took the worker's
stdout): the log said only ``worker 'gw1' crashed while running ...``, with or without
``-q``. Here the same timer writes the report to stderr, which a worker shares with the
controller (and so with the CI log), then ends the process as pytest-timeout does.

The report holds the test's captured output, every thread's stack, and the await stack of
every trio and asyncio task not yet finished: a hung async test's threads only show its
runner waiting for the event loop (anyio's pytest runner drives trio as a guest of the
main thread), its tasks show where they wait.
"""

from __future__ import annotations

import asyncio
import gc
import os
import sys
import threading
import traceback
from collections.abc import Iterator
from types import FrameType
from typing import Any

import pytest
import pytest_timeout  # type: ignore[import-untyped]
import trio.lowlevel

#: the report's width
WIDTH = 88


@pytest.hookimpl(tryfirst=True, optionalhook=True)
def pytest_timeout_set_timer(item: pytest.Item, settings: Any) -> bool | None:
    """pytest-timeout's thread method, reporting to stderr (the signal method is left to
    pytest-timeout: its report is the test's failure, which reaches the log)."""
    if settings.method != "thread":
        return None
    timer = threading.Timer(settings.timeout, _expire, (item, settings))
    timer.name = f"timeout {item.nodeid}"

    def cancel() -> None:
        timer.cancel()
        timer.join()

    # pytest-timeout's pytest_timeout_cancel_timer calls it when the test ends
    item.cancel_timeout = cancel  # type: ignore[attr-defined]
    timer.start()
    return True


def _expire(item: pytest.Item, settings: Any) -> None:
    """In the timer's thread: the report on stderr, then the process ends (a hung test
    cannot be stopped: its thread may never come back)."""
    if not settings.disable_debugger_detection and pytest_timeout.is_debugging():
        return
    try:
        out = err = ""
        capture = item.config.pluginmanager.getplugin("capturemanager")
        if capture is not None:  # stdout and stderr are the process's again
            capture.suspend_global_capture(item)
            out, err = capture.read_global_capture()
        sys.stderr.write(report(item.nodeid, settings.timeout, out, err))
    except Exception:
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(1)


def report(nodeid: str, timeout: float, out: str = "", err: str = "") -> str:
    """What a hung test leaves in the log: its output, every other thread's stack, every
    unfinished task's await stack."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    where = f" in worker {worker}" if worker else ""
    parts = ["\n", _line("+", f"Timeout ({timeout:g} s){where}: {nodeid}")]
    if out:
        parts += [_line("~", "Captured stdout"), out]
    if err:
        parts += [_line("~", "Captured stderr"), err]
    names = {thread.ident: thread.name for thread in threading.enumerate()}
    current = threading.get_ident()
    for ident, frame in sys._current_frames().items():
        if ident != current:
            parts += [
                _line("~", f"Stack of thread {names.get(ident, '<unknown>')} ({ident})"),
                "".join(traceback.format_stack(frame)),
            ]
    for kind, name, coro in _tasks():
        frames = list(_awaiting(coro))
        if frames:
            stack = traceback.StackSummary.extract(iter(frames))
            parts += [_line("~", f"Await stack of {kind} task {name}"), "".join(stack.format())]
    parts.append(_line("+", "Timeout"))
    return "".join(part if part.endswith("\n") else part + "\n" for part in parts)


def _line(char: str, title: str) -> str:
    return f"{char * 4} {title} {char * 4}".center(WIDTH, char) + "\n"


def _tasks() -> Iterator[tuple[str, str, Any]]:
    """Every trio and asyncio task in the process not yet finished: (kind, name, its
    coroutine). Found among the objects the garbage collector tracks: another thread's
    trio run cannot be asked for its tasks."""
    for obj in gc.get_objects():
        try:
            if isinstance(obj, trio.lowlevel.Task):
                yield "trio", obj.name, obj.coro
            elif isinstance(obj, asyncio.Task) and not obj.done():
                yield "asyncio", obj.get_name(), obj.get_coro()
        except Exception:  # a task of a loop being torn down meanwhile
            continue


def _awaiting(coro: Any) -> Iterator[tuple[FrameType, int]]:
    """The frames a coroutine waits in, outermost first (down its ``await`` chain)."""
    while coro is not None:
        frame = _first(coro, _FRAMES)
        if frame is None:  # finished, or not a coroutine (a future, trio's own yield)
            return
        yield frame, frame.f_lineno
        coro = _first(coro, _AWAITS)


def _first(obj: Any, names: tuple[str, ...]) -> Any:
    return next((value for name in names if (value := getattr(obj, name, None)) is not None), None)


#: where a coroutine, a generator and an async generator keep their frame, and what each
#: waits on
_FRAMES = ("cr_frame", "gi_frame", "ag_frame")
_AWAITS = ("cr_await", "gi_yieldfrom", "ag_await")
