"""The worker loop: a job whose outcome cannot even be recorded does not take its worker down; an
idle worker claims a queued job when notified, and still polls for what nobody announces."""

import asyncio
import time
import uuid
from contextlib import contextmanager
from datetime import UTC, datetime

from knowledge_ingest.domain.documents import Job, State
from knowledge_ingest.domain.ports import Lease
from knowledge_ingest.events.outbox import Wakeup
from knowledge_ingest.jobs.workers import Workers


def job() -> Job:
    now = datetime.now(UTC)
    return Job(
        job_id=uuid.uuid4(),
        tenant="t",
        corpus_id=1,
        document_id=1,
        blob_id=1,
        filename="a.txt",
        mime_type="text/plain",
        state=State.QUEUED,
        stage="queued",
        progress=0.0,
        error=None,
        attempts=1,
        cancel_requested=False,
        re_extract=False,
        create_time=now,
        update_time=now,
    )


class Store:
    """Hands out ``jobs`` leases, then none; counts reaps."""

    def __init__(self, jobs: int) -> None:
        self.left = jobs
        self.claims = 0
        self.reaps = 0

    async def claim(self, owner: str, lease_s: float) -> Lease | None:
        self.claims += 1
        if self.left == 0:
            return None
        self.left -= 1
        return Lease(job(), owner)

    async def backlog(self) -> int:
        return self.left

    async def reap_cancelled(self) -> int:
        self.reaps += 1
        return 0


class FailingPipeline:
    """Every run fails the way a lost database fails the recording of an outcome."""

    def __init__(self) -> None:
        self.runs = 0

    async def run(self, lease: Lease) -> None:
        self.runs += 1
        raise ConnectionError("the database went away while the failure was being recorded")


async def test_a_job_that_cannot_be_recorded_leaves_the_worker_claiming():
    store, pipeline = Store(jobs=3), FailingPipeline()
    workers = Workers(queue=store, pipeline=pipeline, count=1, lease_s=5, poll_s=0.01, backlog_every_s=0.01)
    await workers.start()
    try:
        for _ in range(200):
            if pipeline.runs == 3 and store.claims > 3:
                break
            await asyncio.sleep(0.01)
    finally:
        await workers.stop()
    assert pipeline.runs == 3  # one worker ran all three: the first failure did not end it
    assert store.claims > 3  # and it went on polling for more
    assert store.reaps > 0  # housekeeping ends cancelled jobs whose worker died


class Gate:
    """Dependencies that are down until ``open`` is set."""

    def __init__(self) -> None:
        self.open = asyncio.Event()

    async def wait_ready(self) -> None:
        await self.open.wait()

    def waiting_for(self) -> list[str]:
        return [] if self.open.is_set() else ["embedder"]


class CountingPipeline:
    def __init__(self) -> None:
        self.runs = 0

    async def run(self, lease: Lease) -> None:
        self.runs += 1


async def test_no_job_is_claimed_until_the_services_it_needs_are_ready():
    store, pipeline, gate = Store(jobs=2), CountingPipeline(), Gate()
    workers = Workers(
        queue=store,
        pipeline=pipeline,
        count=2,
        lease_s=5,
        readiness=gate,
        poll_s=0.01,
        backlog_every_s=0.01,
        ready_log_after_s=0.01,
    )
    await workers.start()
    try:
        await asyncio.sleep(0.2)
        assert store.claims == 0 and pipeline.runs == 0  # queued jobs keep their attempts
        assert store.reaps > 0  # housekeeping needs only the database and goes on
        gate.open.set()
        for _ in range(200):
            if pipeline.runs == 2:
                break
            await asyncio.sleep(0.01)
    finally:
        await workers.stop()
    assert pipeline.runs == 2


class Wakeups:
    """The JobWakeups port: every idle worker's flag, set by ``notify`` (a job queued)."""

    def __init__(self) -> None:
        self.flags: list = []

    @contextmanager
    def jobs(self):
        flag = Wakeup()
        self.flags.append(flag)
        try:
            yield flag
        finally:
            self.flags.remove(flag)

    def notify(self) -> None:
        for flag in self.flags:
            flag.set()


async def test_an_idle_worker_claims_a_queued_job_when_notified_not_at_its_next_poll():
    store, pipeline, wakeups = Store(jobs=0), CountingPipeline(), Wakeups()
    workers = Workers(
        queue=store, pipeline=pipeline, count=2, lease_s=5, wakeups=wakeups, poll_s=30, backlog_every_s=30
    )
    await workers.start()
    try:
        for _ in range(200):
            if store.claims == 2 and len(wakeups.flags) == 2:
                break
            await asyncio.sleep(0.01)
        assert store.claims == 2 and pipeline.runs == 0  # both found nothing and wait (a 30 s poll)
        store.left = 1
        started = time.perf_counter()
        wakeups.notify()
        for _ in range(200):
            if pipeline.runs == 1:
                break
            await asyncio.sleep(0.01)
        assert pipeline.runs == 1 and time.perf_counter() - started < 2  # at once, not after 30 s
        await asyncio.sleep(0.05)
        # Each woken worker claimed once; the one that got the job claimed again after it (none
        # left), so both wait again: 2 + 2 + 1, and no more until the next notification or poll.
        assert store.claims == 5
    finally:
        await workers.stop()
    assert wakeups.flags == []  # a stopped worker leaves no flag behind


async def test_without_a_notification_an_idle_worker_still_polls():
    store, pipeline, wakeups = Store(jobs=0), CountingPipeline(), Wakeups()
    workers = Workers(
        queue=store, pipeline=pipeline, count=1, lease_s=5, wakeups=wakeups, poll_s=0.02, backlog_every_s=30
    )
    await workers.start()
    try:
        await asyncio.sleep(0.05)
        store.left = 1  # e.g. a retry's delay ended: nobody notifies
        for _ in range(200):
            if pipeline.runs == 1:
                break
            await asyncio.sleep(0.01)
    finally:
        await workers.stop()
    assert pipeline.runs == 1
