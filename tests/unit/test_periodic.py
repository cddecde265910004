"""The one background-loop helper: rounds, more-at-once, wakeups, jitter, stop, and errors logged
once per outage."""

from __future__ import annotations

import asyncio
from contextlib import contextmanager

import pytest
import structlog
from knowledge_runtime.errors import Unavailable
from knowledge_runtime.outages import outage
from knowledge_runtime.periodic import Periodic


async def _until(predicate, timeout_s: float = 2.0) -> None:
    async with asyncio.timeout(timeout_s):
        while not predicate():
            await asyncio.sleep(0.005)


async def test_runs_each_interval_until_stopped() -> None:
    calls = 0

    async def step() -> None:
        nonlocal calls
        calls += 1

    loop = Periodic("tick", step, 0.02, jitter=0.0)
    await loop.start()
    await _until(lambda: calls >= 3)
    await loop.stop()
    seen = calls
    await asyncio.sleep(0.06)
    assert calls == seen, "no round after stop()"
    assert not loop.running


async def test_more_work_runs_again_without_waiting() -> None:
    calls = 0

    async def step() -> bool:
        nonlocal calls
        calls += 1
        return calls < 50  # a backlog of 50 rounds, then idle

    loop = Periodic("drain", step, 60.0)
    await loop.start()
    await _until(lambda: calls >= 50, timeout_s=1.0)  # far less than one interval
    await loop.stop()
    assert calls == 50


async def test_first_after_interval_waits_before_the_first_round() -> None:
    calls = 0

    async def step() -> None:
        nonlocal calls
        calls += 1

    loop = Periodic("late", step, 0.2, jitter=0.0, first_after_interval=True)
    await loop.start()
    await asyncio.sleep(0.05)
    assert calls == 0
    await _until(lambda: calls == 1)
    await loop.stop()


async def test_a_failing_step_is_logged_once_and_its_recovery_once() -> None:
    calls = 0

    async def step() -> None:
        nonlocal calls
        calls += 1
        if calls <= 5:
            raise RuntimeError("boom")

    loop = Periodic("flaky", step, 0.005, jitter=0.0)
    with structlog.testing.capture_logs() as logs:
        await loop.start()
        await _until(lambda: calls >= 8)
        await loop.stop()
    events = [entry["event"] for entry in logs]
    assert events.count("flaky_failed") == 1
    assert events.count("flaky_recovered") == 1
    failed = next(entry for entry in logs if entry["event"] == "flaky_failed")
    assert failed["error_type"] == "RuntimeError"
    assert "boom" not in str(failed), "the error's text is not logged (it may quote data)"


async def test_the_database_away_is_one_shared_outage() -> None:
    down = True

    async def step() -> None:
        if down:
            raise Unavailable("the database is unavailable")

    outage("database").succeeded()  # whatever an earlier test left
    first = Periodic("one", step, 0.005, jitter=0.0)
    second = Periodic("two", step, 0.005, jitter=0.0)
    with structlog.testing.capture_logs() as logs:
        await first.start()
        await second.start()
        await asyncio.sleep(0.05)
        assert outage("database").down
        down = False
        await _until(lambda: not outage("database").down)
        await first.stop()
        await second.stop()
    events = [entry["event"] for entry in logs]
    assert events.count("dependency_unavailable") == 1
    assert events.count("dependency_available") == 1
    assert not [e for e in events if e.endswith("_failed")], "an outage is not the loop's own failure"


async def test_a_wakeup_ends_the_wait_and_is_cleared_before_each_round() -> None:
    class Signal:
        def __init__(self) -> None:
            self.event = asyncio.Event()
            self.cleared = 0

        def clear(self) -> None:
            self.cleared += 1
            self.event.clear()

        async def wait(self, timeout_s: float) -> bool:
            try:
                async with asyncio.timeout(timeout_s):
                    await self.event.wait()
                return True
            except TimeoutError:
                return False

    signal = Signal()

    @contextmanager
    def subscribe():
        yield signal

    calls = 0

    async def step() -> None:
        nonlocal calls
        calls += 1

    loop = Periodic("woken", step, 60.0, wakeup=subscribe)
    await loop.start()
    await _until(lambda: calls == 1)
    signal.event.set()
    await _until(lambda: calls == 2, timeout_s=1.0)  # long before the 60 s interval
    assert signal.cleared == 2
    await loop.stop()


async def test_stop_abandons_a_step_in_flight() -> None:
    started, finished = asyncio.Event(), False

    async def step() -> None:
        nonlocal finished
        started.set()
        await asyncio.sleep(30)
        finished = True

    loop = Periodic("slow", step, 1.0)
    await loop.start()
    await started.wait()
    async with asyncio.timeout(1.0):
        await loop.stop()
    assert not finished


@pytest.mark.parametrize("swallowed_as", ["an error", "a normal return"])
async def test_stop_ends_the_loop_even_when_the_step_loses_its_cancellation(swallowed_as) -> None:
    # As a transaction on a connection that died does: the rollback's error replaces the
    # CancelledError, and the step (like an ingest worker) takes it as one more failure.
    started, rounds = asyncio.Event(), 0

    async def step() -> bool:
        nonlocal rounds
        rounds += 1
        started.set()
        try:
            try:
                await asyncio.sleep(30)
            except asyncio.CancelledError:
                if rounds > 1:  # only the first is lost: broken, the test fails and does not hang
                    raise
                raise ConnectionResetError("the connection is gone") from None
        except ConnectionResetError:
            if swallowed_as == "a normal return":
                return True  # "a job ran": the loop would look for the next at once
            raise
        return True

    loop = Periodic("lossy", step, 0.01)
    await loop.start()
    await started.wait()
    async with asyncio.timeout(2.0):
        await loop.stop()
    assert rounds == 1


def test_jitter_stays_within_its_share_and_arguments_are_checked() -> None:
    async def step() -> None:
        return None

    loop = Periodic("spread", step, 10.0, jitter=0.2)
    waits = [loop.next_wait() for _ in range(500)]
    assert all(8.0 <= w <= 12.0 for w in waits)
    assert max(waits) - min(waits) > 1.0, "the waits are spread, not all equal"
    with pytest.raises(ValueError, match="interval"):
        Periodic("bad", step, 0.0)
    with pytest.raises(ValueError, match="jitter"):
        Periodic("bad", step, 1.0, jitter=1.0)
