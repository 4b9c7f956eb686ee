"""A producer's states, and what a put raises in each one but open."""

from __future__ import annotations

from .._errors import ProducerClosedError, ProducerForkedError

__all__ = ["CLOSED", "CLOSING", "FORKED", "OPEN", "closed_error"]

OPEN, CLOSING, CLOSED, FORKED = 0, 1, 2, 3


def closed_error(state: int, entered: bool, forked_message: str) -> Exception:
    """What a put raises on a producer in ``state`` (not ``OPEN``); ``entered``: it was
    opened once (``async with``)."""
    if state == FORKED:
        return ProducerForkedError(forked_message)
    return ProducerClosedError(
        "the producer is closed"
        if entered
        else "the producer is not open: use `async with Producer(...)`"
    )
