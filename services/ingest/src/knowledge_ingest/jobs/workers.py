"""Workers that claim jobs from PostgreSQL (any number, in any number of replicas).

An idle worker waits for a job's notification (``JobWakeups``: LISTEN/NOTIFY, sent when a job is
queued) or ``poll_s``, whichever comes first: a new job is claimed as it commits, and the poll
still finds what no notification announces (a retry's delay ending, a dead worker's lease
expiring, a notification lost with the listening connection)."""

from __future__ import annotations

import asyncio
import os
import socket
import uuid
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Protocol

import structlog
from knowledge_runtime.errors import Unavailable
from knowledge_runtime.outages import Outage, outage

from knowledge_ingest.domain.ports import JobQueue, JobWakeups, Readiness, Wakeup
from knowledge_ingest.jobs.pipeline import Pipeline
from knowledge_ingest.metrics import JOBS_BACKLOG

log = structlog.get_logger("knowledge.ingest.worker")


class Service(Protocol):
    async def start(self) -> None: ...

    async def stop(self) -> None: ...


@dataclass
class Workers:
    queue: JobQueue
    pipeline: Pipeline
    count: int
    lease_s: float
    readiness: Readiness | None = None  # None: nothing to wait for (tests of the loop itself)
    wakeups: JobWakeups | None = None  # None: idle workers poll only
    poll_s: float = 0.5
    backlog_every_s: float = 5.0
    ready_log_after_s: float = 1.0
    # Background loops that run while the workers do (the events listener, the events retention).
    services: list[Service] = field(default_factory=list)
    _tasks: list[asyncio.Task] = field(default_factory=list)
    _stopping: asyncio.Event = field(default_factory=asyncio.Event)
    # One line when the database goes away and one when it is back, shared by every loop (and
    # the readiness probe).
    _database: Outage = field(default_factory=lambda: outage("database"))

    async def start(self) -> None:
        base = f"{socket.gethostname()}:{os.getpid()}"
        self._tasks = [asyncio.create_task(self._loop(f"{base}:{i}:{uuid.uuid4().hex[:6]}")) for i in range(self.count)]
        self._tasks.append(asyncio.create_task(self._housekeeping()))
        for service in self.services:
            await service.start()

    async def _housekeeping(self) -> None:
        """Even a replica with no workers reports the backlog, so the autoscaler sees demand; and
        ends the cancelled jobs whose worker died (any replica may: the statement is idempotent)."""
        while not self._stopping.is_set():
            try:
                JOBS_BACKLOG.set(await self.queue.backlog())
            except Unavailable as error:
                self._database.failed(error)
            except Exception:  # noqa: BLE001 - handed to the caller or logged, never swallowed silently
                log.warning("ingest_backlog_unavailable")
            try:
                reaped = await self.queue.reap_cancelled()
                if reaped:
                    log.info("ingest_cancelled_jobs_reaped", jobs=reaped)
            except Unavailable as error:
                self._database.failed(error)
            except Exception:  # noqa: BLE001 - handed to the caller or logged, never swallowed silently
                log.warning("ingest_reap_cancelled_failed")
            try:
                async with asyncio.timeout(self.backlog_every_s):
                    await self._stopping.wait()
            except TimeoutError:
                pass

    async def stop(self) -> None:
        """Stop claiming; a job in flight is abandoned and its lease expires for another worker."""
        self._stopping.set()
        for service in reversed(self.services):
            await service.stop()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []

    async def _ready(self) -> None:
        """A job is claimed only once the services it needs answer: one that is starting or
        restarting (its channel still reconnecting) would otherwise cost queued jobs attempts."""
        if self.readiness is None or not self.readiness.waiting_for():
            return
        try:
            async with asyncio.timeout(self.ready_log_after_s):
                await self.readiness.wait_ready()
        except TimeoutError:
            log.info("ingest_waiting_for_dependencies", services=self.readiness.waiting_for())
            await self.readiness.wait_ready()
            log.info("ingest_dependencies_ready")

    async def _loop(self, owner: str) -> None:
        with self.wakeups.jobs() if self.wakeups is not None else nullcontext() as wakeup:
            await self._claiming(owner, wakeup)

    async def _idle(self, wakeup: Wakeup | None) -> None:
        """Until a job is queued (``wakeup``), ``poll_s`` passes, or the workers stop."""
        if wakeup is not None:
            await wakeup.wait(self.poll_s)
            return
        try:
            async with asyncio.timeout(self.poll_s):
                await self._stopping.wait()
        except TimeoutError:
            pass

    async def _claiming(self, owner: str, wakeup: Wakeup | None) -> None:
        while not self._stopping.is_set():
            await self._ready()
            if wakeup is not None:
                wakeup.clear()  # before the claim: a job queued from now on wakes the wait below
            try:
                lease = await self.queue.claim(owner, self.lease_s)
            except Unavailable as error:  # a known outage: logged once, not once per poll
                self._database.failed(error)
                lease = None
            except Exception:
                log.exception("ingest_claim_failed")
                lease = None
            else:
                self._database.succeeded()
            if lease is None:
                await self._idle(wakeup)
                continue
            structlog.contextvars.bind_contextvars(tenant=lease.job.tenant, job_id=str(lease.job.job_id))
            try:
                await self.pipeline.run(lease)
            except Exception:
                # Even recording the outcome failed (the database went away, say): the job's lease
                # expires and a worker takes it over; this worker carries on.
                log.exception("ingest_job_unrecorded")
            finally:
                structlog.contextvars.unbind_contextvars("tenant", "job_id")
