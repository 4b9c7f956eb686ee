"""Structured logs through the stdlib: quiet unless the application configures logging."""

from __future__ import annotations

import logging
from typing import Any

__all__ = ["get_logger"]


class _Logger:
    """A structlog logger that asks the stdlib logger's level first.

    A call below the level returns at once: no bound logger made, no processors run, no
    ``DropEvent`` raised and caught. The producer logs a debug event per request, which
    otherwise cost about as much as the request's JSON parsing. structlog itself is imported
    at the first event that passes the level (a tenth of a Lambda function's cold start
    otherwise, for a producer that logs nothing).
    """

    __slots__ = ("_enabled", "_log", "_std")

    def __init__(self, std: logging.Logger) -> None:
        self._std = std
        self._enabled = std.isEnabledFor  # cached by logging per level until levels change
        self._log: Any = None

    def _logger(self) -> Any:
        log = self._log
        if log is None:
            import structlog

            self._log = log = structlog.wrap_logger(
                self._std,
                wrapper_class=structlog.stdlib.BoundLogger,
                processors=[
                    structlog.stdlib.filter_by_level,
                    structlog.stdlib.add_log_level,
                    structlog.processors.format_exc_info,
                    structlog.processors.KeyValueRenderer(key_order=["event"], sort_keys=True),
                ],
                cache_logger_on_first_use=True,
            )
        return log

    def _emit(self, level: int, method: str, event: str, kw: dict[str, Any]) -> None:
        try:
            log = self._logger()
        except Exception as exc:  # a log call never fails the caller
            # The first event's import found no file descriptor (a process out of them
            # logs just that), or no structlog: the same line through the stdlib alone;
            # the next event tries the import again.
            fields = " ".join(f"{k}={v!r}" for k, v in sorted(kw.items()))
            self._std.log(
                level,
                "event=%r %s level=%r (structlog not loaded: %s)",
                event,
                fields,
                method if method != "exception" else "error",
                type(exc).__name__,
                exc_info=method == "exception",
            )
            return
        getattr(log, method)(event, **kw)

    def debug(self, event: str, **kw: Any) -> None:
        if self._enabled(logging.DEBUG):
            self._emit(logging.DEBUG, "debug", event, kw)

    def info(self, event: str, **kw: Any) -> None:
        if self._enabled(logging.INFO):
            self._emit(logging.INFO, "info", event, kw)

    def warning(self, event: str, **kw: Any) -> None:
        if self._enabled(logging.WARNING):
            self._emit(logging.WARNING, "warning", event, kw)

    def error(self, event: str, **kw: Any) -> None:
        if self._enabled(logging.ERROR):
            self._emit(logging.ERROR, "error", event, kw)

    def exception(self, event: str, **kw: Any) -> None:
        if self._enabled(logging.ERROR):
            self._emit(logging.ERROR, "exception", event, kw)


def get_logger(name: str) -> Any:
    """A structlog logger over ``logging.getLogger(name)``.

    Events go through stdlib logging, so levels and handlers are the application's; nothing
    below WARNING shows unless the application asks for it. Keys are stable (``stream``,
    ``shard_id``, ``error_code``, ``attempt``, ``records``, ``bytes``); never credentials.
    """
    return _Logger(logging.getLogger(name))
