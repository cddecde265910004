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
from dataclasses import dataclass, field
from functools import partial

import structlog
from knowledge_runtime.periodic import Background, Periodic
from prometheus_client import Gauge

from knowledge_ingest.domain.ports import JobQueue, JobWakeups, Readiness
from knowledge_ingest.jobs.pipeline import Pipeline

log = structlog.get_logger("knowledge.ingest.worker")

# The Kubernetes autoscaler reads the job backlog by this name.
JOBS_BACKLOG = Gauge(
    "knowledge_ingest_jobs_backlog",
    "Ingestion jobs not yet ended (queued, waiting to retry, or running), across all replicas.",
)


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
    _running: Background = field(default_factory=Background, init=False)

    async def start(self) -> None:
        self._running = Background(self.loops())
        await self._running.start()

    async def stop(self) -> None:
        """Stop claiming; a job in flight is abandoned and its lease expires for another worker."""
        await self._running.stop()

    def loops(self) -> list[Periodic]:
        """``count`` claiming loops, and the housekeeping that even a replica with no workers runs."""
        base = f"{socket.gethostname()}:{os.getpid()}"
        wakeup = self.wakeups.jobs if self.wakeups is not None else None
        claiming = [
            Periodic(
                "ingest_claim",
                partial(self.claim_and_run, f"{base}:{i}:{uuid.uuid4().hex[:6]}"),
                self.poll_s,
                wakeup=wakeup,
            )
            for i in range(self.count)
        ]
        return [*claiming, Periodic("ingest_housekeeping", self.housekeeping, self.backlog_every_s)]

    async def housekeeping(self) -> None:
        """Reports the backlog, so the autoscaler sees demand; and ends the cancelled jobs whose
        worker died (any replica may: the statement is idempotent)."""
        JOBS_BACKLOG.set(await self.queue.backlog())
        reaped = await self.queue.reap_cancelled()
        if reaped:
            log.info("ingest_cancelled_jobs_reaped", jobs=reaped)

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

    async def claim_and_run(self, owner: str) -> bool:
        """One job, if one is due: True when a job ran (the worker looks for the next at once)."""
        await self._ready()
        lease = await self.queue.claim(owner, self.lease_s)
        if lease is None:
            return False
        structlog.contextvars.bind_contextvars(tenant=lease.job.tenant, job_id=str(lease.job.job_id))
        try:
            await self.pipeline.run(lease)
        except Exception:
            # Even recording the outcome failed (the database went away, say): the job's lease
            # expires and a worker takes it over; this worker carries on.
            log.exception("ingest_job_unrecorded")
        finally:
            structlog.contextvars.unbind_contextvars("tenant", "job_id")
        return True
