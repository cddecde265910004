"""Readiness from a periodic probe of hard dependencies, and one log line per outage, not per poll."""

import asyncio

import pytest
from knowledge_ingest.jobs.workers import Workers
from knowledge_runtime import outages
from knowledge_runtime.errors import Unavailable
from knowledge_runtime.health import Dependency, ReadinessProbe
from knowledge_runtime.outages import Outage
from structlog.testing import capture_logs


@pytest.fixture(autouse=True)
def no_outage_known():
    outages._OUTAGES.clear()  # the process-wide outages start clear in each test
    yield
    outages._OUTAGES.clear()


class Switch:
    """A dependency that fails while ``down``."""

    def __init__(self) -> None:
        self.down = False
        self.checks = 0

    async def check(self) -> None:
        self.checks += 1
        if self.down:
            raise Unavailable("the database is unavailable")


async def test_readiness_goes_down_after_consecutive_failures_and_back_at_once():
    switch, changes = Switch(), []

    async def record(ready: bool) -> None:
        changes.append(ready)

    probe = ReadinessProbe([Dependency("database", switch.check)], record, failures_to_down=2)
    assert await probe.check_once() is True and changes == []
    switch.down = True
    assert await probe.check_once() is True  # one failure may be a blip
    assert await probe.check_once() is False
    assert await probe.check_once() is False
    switch.down = False
    assert await probe.check_once() is True
    assert changes == [False, True]  # told once per change, not per check


async def test_a_check_that_hangs_counts_as_a_failure():
    async def hang() -> None:
        await asyncio.Event().wait()

    probe = ReadinessProbe(
        [Dependency("database", hang)], lambda ready: asyncio.sleep(0), timeout_s=0.01, failures_to_down=1
    )
    assert await probe.check_once() is False


async def test_the_probe_runs_periodically_until_stopped():
    switch, changes = Switch(), []

    async def record(ready: bool) -> None:
        changes.append(ready)

    probe = ReadinessProbe([Dependency("database", switch.check)], record, interval_s=0.01, failures_to_down=2)
    await probe.start()
    try:
        switch.down = True
        for _ in range(200):
            if changes:
                break
            await asyncio.sleep(0.01)
        assert changes == [False]
    finally:
        await probe.stop()
    checks = switch.checks
    await asyncio.sleep(0.05)
    assert switch.checks == checks


def test_an_outage_logs_one_line_when_it_starts_and_one_when_it_ends():
    with capture_logs() as logs:
        outage = Outage("database")
        for _ in range(50):
            outage.failed(Unavailable("the database is unavailable"))
        outage.succeeded()
        outage.succeeded()
    assert [entry["event"] for entry in logs] == ["dependency_unavailable", "dependency_available"]
    assert logs[0]["dependency"] == "database" and logs[0]["error_type"] == "Unavailable"


class DownStore:
    """A database that is away: every call fails as the pool reports it."""

    def __init__(self) -> None:
        self.claims = 0
        self.down = True

    async def claim(self, owner: str, lease_s: float):
        self.claims += 1
        if self.down:
            raise Unavailable("the database is unavailable")

    async def backlog(self) -> int:
        if self.down:
            raise Unavailable("the database is unavailable")
        return 0

    async def reap_cancelled(self) -> int:
        if self.down:
            raise Unavailable("the database is unavailable")
        return 0


async def test_the_ingest_workers_log_a_database_outage_once_not_per_poll():
    store = DownStore()
    workers = Workers(queue=store, pipeline=None, count=2, lease_s=5, poll_s=0.005, backlog_every_s=0.005)
    with capture_logs() as logs:
        await workers.start()
        try:
            for _ in range(400):
                if store.claims >= 40:
                    break
                await asyncio.sleep(0.005)
            store.down = False
            claims = store.claims
            for _ in range(400):
                if store.claims >= claims + 4:
                    break
                await asyncio.sleep(0.005)
        finally:
            await workers.stop()
    assert store.claims >= 40
    events = [entry["event"] for entry in logs]
    assert events == ["dependency_unavailable", "dependency_available"], events
    assert all(entry.get("exc_info") is None for entry in logs)


async def test_the_probe_and_the_workers_share_one_line_per_outage():
    switch = Switch()
    probe = ReadinessProbe([Dependency("database", switch.check)], lambda ready: asyncio.sleep(0), failures_to_down=1)
    worker_view = outages.outage("database")
    with capture_logs() as logs:
        worker_view.failed(Unavailable("the database is unavailable"))  # a worker noticed first
        switch.down = True
        assert await probe.check_once() is False
        switch.down = False
        assert await probe.check_once() is True
        worker_view.succeeded()
    assert [e["event"] for e in logs if e["event"].startswith("dependency_")] == [
        "dependency_unavailable",
        "dependency_available",
    ]


async def test_stop_ends_the_probe_when_its_check_answers_in_the_same_turn_as_the_cancel():
    """asyncio.wait_for in Python 3.11 dropped a cancel that came with the check's answer: the
    probe went on to its next round and stop() waited for it forever."""
    answered = asyncio.Event()
    checking = asyncio.Event()

    async def check() -> None:
        checking.set()
        await answered.wait()

    async def on_change(ready: bool) -> None:
        return None

    probe = ReadinessProbe([Dependency("slow", check)], on_change, interval_s=0.05, timeout_s=30.0)
    await probe.start()
    await checking.wait()  # the probe waits on the check
    assert probe._loop is not None
    task = probe._loop._task
    assert task is not None
    answered.set()  # the check answers...
    stopping = asyncio.ensure_future(probe.stop())  # ...and the probe is cancelled in the same turn
    done, _ = await asyncio.wait({stopping}, timeout=2.0)
    if not done:  # the dropped cancel: end the probe another way, so the failure is reported
        answered.clear()
        await checking.wait()
        task.cancel()
        await asyncio.wait({stopping}, timeout=2.0)
    assert done == {stopping}, "stop() did not end: the cancel was dropped"
