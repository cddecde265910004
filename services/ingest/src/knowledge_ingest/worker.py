"""Workers that claim jobs from PostgreSQL (any number, in any number of replicas)."""

from __future__ import annotations

import asyncio
import os
import socket
import uuid
from dataclasses import dataclass, field

import structlog

from knowledge_ingest.domain.ports import JobQueue
from knowledge_ingest.metrics import JOBS_BACKLOG
from knowledge_ingest.service_layer.pipeline import Pipeline

log = structlog.get_logger("knowledge.ingest.worker")


@dataclass
class Workers:
    queue: JobQueue
    pipeline: Pipeline
    count: int
    lease_s: float
    poll_s: float = 0.5
    backlog_every_s: float = 5.0
    _tasks: list[asyncio.Task] = field(default_factory=list)
    _stopping: asyncio.Event = field(default_factory=asyncio.Event)

    async def start(self) -> None:
        base = f"{socket.gethostname()}:{os.getpid()}"
        self._tasks = [asyncio.create_task(self._loop(f"{base}:{i}:{uuid.uuid4().hex[:6]}"))
                       for i in range(self.count)]
        self._tasks.append(asyncio.create_task(self._housekeeping()))

    async def _housekeeping(self) -> None:
        """Even a replica with no workers reports the backlog, so the autoscaler sees demand; and
        ends the cancelled jobs whose worker died (any replica may: the statement is idempotent)."""
        while not self._stopping.is_set():
            try:
                JOBS_BACKLOG.set(await self.queue.backlog())
            except Exception:
                log.warning("ingest_backlog_unavailable")
            try:
                reaped = await self.queue.reap_cancelled()
                if reaped:
                    log.info("ingest_cancelled_jobs_reaped", jobs=reaped)
            except Exception:
                log.warning("ingest_reap_cancelled_failed")
            try:
                await asyncio.wait_for(self._stopping.wait(), timeout=self.backlog_every_s)
            except TimeoutError:
                pass

    async def stop(self) -> None:
        """Stop claiming; a job in flight is abandoned and its lease expires for another worker."""
        self._stopping.set()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []

    async def _loop(self, owner: str) -> None:
        while not self._stopping.is_set():
            try:
                lease = await self.queue.claim(owner, self.lease_s)
            except Exception:
                log.exception("ingest_claim_failed")
                lease = None
            if lease is None:
                try:
                    await asyncio.wait_for(self._stopping.wait(), timeout=self.poll_s)
                except TimeoutError:
                    pass
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
