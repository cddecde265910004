"""Polling, cancelling and retrying ingest jobs (idempotent; another tenant's job is not found)."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from knowledge_runtime.auth import Scope

from knowledge_ingest.domain.documents import Job, parse_job_id
from knowledge_ingest.domain.errors import JobNotFound
from knowledge_ingest.domain.ports import JobRepository

CANCEL_WAIT_S = 5.0


@dataclass
class JobUseCases:
    store: JobRepository
    cancel_wait_s: float = CANCEL_WAIT_S

    async def get(self, scope: Scope, job_id: str) -> Job:
        """The job; its result rides along on the first poll after completion only."""
        job = await self.store.job(scope.tenant, parse_job_id(job_id), deliver_result=True)
        if job is None:
            raise JobNotFound(job_id)
        return job

    async def cancel(self, scope: Scope, job_id: str) -> Job:
        """A queued job ends CANCELLED at once; a running one at its worker's next checkpoint,
        which this waits for briefly so the answer is the real outcome."""
        key = parse_job_id(job_id)
        job = await self.store.cancel(scope.tenant, key)
        if job is None:
            raise JobNotFound(job_id)
        deadline = time.monotonic() + self.cancel_wait_s
        while not job.state.terminal and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
            job = await self.store.job(scope.tenant, key, deliver_result=False) or job
        return job

    async def retry(self, scope: Scope, job_id: str) -> Job:
        """A failed or cancelled job is queued again from the start, and so is a SEARCHABLE one
        whose file gave no text (extracted again: a scan read before OCR); a queued or running
        one is returned as is; another SEARCHABLE one has nothing to retry."""
        job = await self.store.retry(scope.tenant, parse_job_id(job_id))  # domain.jobs.retry_request decides
        if job is None:
            raise JobNotFound(job_id)
        return job
