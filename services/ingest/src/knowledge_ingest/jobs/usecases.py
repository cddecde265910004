"""Polling, cancelling and retrying ingest jobs (idempotent; another tenant's job is not found)."""

from __future__ import annotations

import asyncio
import time
import uuid
from dataclasses import dataclass

from knowledge_runtime.auth import Scope

from knowledge_ingest.domain.documents import Job, parse_job_id
from knowledge_ingest.domain.errors import CorpusNotFound, JobNotFound
from knowledge_ingest.domain.ports import CorpusKinds, JobRepository, ReachSource
from knowledge_ingest.guards import require_writable

CANCEL_WAIT_S = 5.0


@dataclass
class JobUseCases:
    store: JobRepository
    reach: ReachSource
    kinds: CorpusKinds
    cancel_wait_s: float = CANCEL_WAIT_S

    async def _check_reach(self, scope: Scope, job_id: str, *, writing: bool = False) -> uuid.UUID:
        """The job's id when the job is the tenant's, its corpus is in the caller's reach and its
        document's access list admits the caller; to cancel or retry it (``writing``) the caller
        must also be allowed to write that corpus (CorpusReadOnly when it only reads it)."""
        key = parse_job_id(job_id)
        reach = await self.reach.reach_of(scope)
        job = await self.store.job(scope.tenant, key, reach.reader.principals, deliver_result=False)
        if job is None or not reach.has(job.corpus_id):
            raise JobNotFound(job_id)
        if writing:
            try:
                await require_writable(self.kinds, scope, reach, job.corpus_id, str(job.corpus_id))
            except CorpusNotFound:
                raise JobNotFound(job_id) from None
        return key

    async def get(self, scope: Scope, job_id: str) -> Job:
        """The job; its result rides along on the first poll after completion only (a caller
        outside the job's reach neither sees it nor consumes that result)."""
        key = await self._check_reach(scope, job_id)
        job = await self.store.job(scope.tenant, key, scope.principals, deliver_result=True)
        if job is None:
            raise JobNotFound(job_id)
        return job

    async def cancel(self, scope: Scope, job_id: str) -> Job:
        """A queued job ends CANCELLED at once; a running one at its worker's next checkpoint,
        which this waits for briefly so the answer is the real outcome."""
        key = await self._check_reach(scope, job_id, writing=True)
        job = await self.store.cancel(scope.tenant, key)
        if job is None:
            raise JobNotFound(job_id)
        deadline = time.monotonic() + self.cancel_wait_s
        while not job.state.terminal and time.monotonic() < deadline:
            await asyncio.sleep(0.1)
            job = await self.store.job(scope.tenant, key, scope.principals, deliver_result=False) or job
        return job

    async def retry(self, scope: Scope, job_id: str) -> Job:
        """A failed or cancelled job is queued again from the start, and so is a SEARCHABLE one
        whose file gave no text (extracted again: a scan read before OCR); a queued or running
        one is returned as is; another SEARCHABLE one has nothing to retry."""
        key = await self._check_reach(scope, job_id, writing=True)
        job = await self.store.retry(scope.tenant, key)  # domain.jobs.retry_request decides
        if job is None:
            raise JobNotFound(job_id)
        return job
