"""The spool when its writes fail and the producer closes (issue 51), on both backends
against the fake: a failed commit is tried again every ``spool_interval``, not at once, and
an exit through the error leaves ``async with``; ``wait_durable()`` after a close answers at
once.

The store is reached through the spooler's ``SpoolStore`` name (``tests.support.spool``).
"""

from __future__ import annotations

import time
from pathlib import Path

import anyio
import anyio.lowlevel
import pytest

from kinesis_trio import SpoolWriteError
from tests.shell.test_spool import (
    HOLD,
    Gate,
    commit_done,
    frozen_clock,
    new_fake,
    spooled,
)
from tests.support.spool import BIG, FRESH_PAGES, RoomLater, Stores, data_on_disk

pytestmark = [pytest.mark.anyio, pytest.mark.virtual_time]


async def real_pause(seconds: float) -> None:
    """Let ``seconds`` of real time pass without letting virtual time move (bare
    checkpoints: trio's MockClock never jumps while a task is runnable)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        await anyio.lowlevel.checkpoint()


# -- a full disk under spool_sync="put" --------------------------------------------------------


async def test_a_failed_commit_under_put_is_retried_after_the_interval_and_the_error_can_leave(
    tmp_path: Path, stores: Stores
) -> None:
    """Before, after a failed commit under ``"put"`` the writer tried again at once, over
    and over (its only await being the shielded commit): a program that let the
    ``SpoolWriteError`` leave ``async with`` hung until the disk had room."""
    fake = new_fake()
    spool = tmp_path / "spool"
    stores.full_disk = FRESH_PAGES
    with RoomLater(stores) as watchdog, pytest.raises(SpoolWriteError, match="not durable"):
        async with spooled(fake, spool, spool_sync="put", spool_interval=60, **HOLD) as producer:
            store = stores[0]
            async with frozen_clock():
                with pytest.raises(SpoolWriteError) as failed:
                    await producer.put(b"a" * BIG, "k")
                # virtual time stands still: no retry is due
                await real_pause(0.3)
                assert len(store.failed) == 1, len(store.failed)
            # the next try, an interval later
            await anyio.sleep(60)
            await commit_done(store, 1, failed=True)
            assert len(store.failed) == 2
            raise failed.value
    assert not watchdog.hung, "the exit waited for the disk to have room"
    assert store.failed  # the close tried once more


# -- wait_durable after the close ----------------------------------------------------------------


@pytest.mark.parametrize("full", [False, True])
async def test_wait_durable_after_a_close_answers_at_once(
    tmp_path: Path, stores: Stores, full: bool
) -> None:
    """Before, ``wait_durable()`` after a close that left records unwritten (its last
    commit failed) waited for a writer that was gone: for ever."""
    gate = Gate()
    gate.never = True  # the record stays unresolved: the close keeps it
    fake = new_fake(gate)
    spool = tmp_path / "spool"
    if full:
        stores.full_disk = FRESH_PAGES
    async with spooled(fake, spool, spool_interval=60, close_timeout=0.2, **HOLD) as producer:
        await producer.put(b"a" * BIG, "k")
    with anyio.fail_after(10):  # a hang guard
        if full:
            with pytest.raises(SpoolWriteError, match="closed") as info:
                await producer.wait_durable()
            assert info.value.outcome is None
            assert "database or disk is full" in str(info.value)
        else:  # the close's last commit wrote it
            await producer.wait_durable()
    assert data_on_disk(spool) == ([] if full else [b"a" * BIG])


# -- put_many under spool_sync="put" -----------------------------------------------------------


async def test_a_failed_commit_under_put_many_names_every_outcome_of_the_batch(
    tmp_path: Path, stores: Stores
) -> None:
    """The batch was accepted (its records are sent all the same) but is not durable: the
    error carries the batch's outcomes, in order."""
    fake = new_fake()
    spool = tmp_path / "spool"
    stores.full_disk = FRESH_PAGES
    with RoomLater(stores), pytest.raises(SpoolWriteError, match="not durable"):
        async with spooled(fake, spool, spool_sync="put", spool_interval=60, **HOLD) as producer:
            async with frozen_clock():
                with pytest.raises(SpoolWriteError, match="not durable") as failed:
                    await producer.put_many([(b"a" * BIG, "k"), (b"b" * BIG, "k")])
            outcomes = failed.value.outcome
            assert isinstance(outcomes, list) and len(outcomes) == 2
            assert [o.partition_key for o in outcomes] == ["k", "k"]
            assert producer.outstanding_records == 2  # accepted: sent all the same
            raise failed.value
