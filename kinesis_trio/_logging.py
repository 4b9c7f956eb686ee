"""Structured logs through the stdlib: quiet unless the application configures logging."""

from __future__ import annotations

import logging
from typing import Any

import structlog

__all__ = ["get_logger"]


def get_logger(name: str) -> Any:
    """A structlog logger over ``logging.getLogger(name)``.

    Events go through stdlib logging, so levels and handlers are the application's; nothing
    below WARNING shows unless the application asks for it. Keys are stable (``stream``,
    ``shard_id``, ``error_code``, ``attempt``, ``records``, ``bytes``); never credentials.
    """
    return structlog.wrap_logger(
        logging.getLogger(name),
        wrapper_class=structlog.stdlib.BoundLogger,
        processors=[
            structlog.stdlib.filter_by_level,
            structlog.stdlib.add_log_level,
            structlog.processors.format_exc_info,
            structlog.processors.KeyValueRenderer(key_order=["event"], sort_keys=True),
        ],
    )
