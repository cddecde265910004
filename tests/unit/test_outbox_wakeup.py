"""The outbox's wakeup flag: a cancel is never lost to a wakeup that comes in the same loop turn.

The relay loops on ``Wakeup.wait`` until its task is cancelled. With Python 3.11's
``asyncio.wait_for`` a cancel that arrived together with a wakeup was swallowed (the result was
returned instead), the loop went on, and ingest's ``stop()`` waited for it forever (seen as a
suite that hung in a fixture's teardown)."""

from __future__ import annotations

import asyncio

import pytest
from knowledge_ingest.events.outbox import Wakeup


async def test_a_cancel_together_with_a_wakeup_stops_the_waiting_loop() -> None:
    wakeup = Wakeup()
    rounds = 0

    async def relay() -> None:
        nonlocal rounds
        while True:
            wakeup.clear()
            await wakeup.wait(30.0)
            rounds += 1

    task = asyncio.create_task(relay())
    await asyncio.sleep(0)  # the loop waits on the flag
    wakeup.set()
    task.cancel()
    done, _ = await asyncio.wait({task}, timeout=2.0)
    assert done == {task} and task.cancelled(), "the cancel was swallowed: the loop is still waiting"
    assert rounds == 0


async def test_wait_says_whether_it_was_woken_or_timed_out() -> None:
    wakeup = Wakeup()
    assert await wakeup.wait(0.01) is False
    wakeup.set()
    assert await wakeup.wait(1.0) is True


async def test_a_plain_cancel_of_a_wait_propagates() -> None:
    wakeup = Wakeup()
    task = asyncio.create_task(wakeup.wait(30.0))
    await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
