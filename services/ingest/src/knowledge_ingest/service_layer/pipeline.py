"""One job, start to finish: extract → chunk → embed (k/n) → store, with honest progress.

Every step reports through the lease, which renews it and tells the worker to stop when the
job was cancelled or taken over. Nothing is visible to search until the final transaction.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import structlog
from knowledge_runtime.chunking import TextChunk, split_structural
from knowledge_runtime.errors import DomainError, Unavailable
from knowledge_runtime.tracing import tracer

from knowledge_ingest.domain.documents import JobResult, State, progress_of
from knowledge_ingest.domain.extraction import Extracted
from knowledge_ingest.domain.ports import BlobStore, Embedder, IngestStore, Lease

log = structlog.get_logger("knowledge.ingest.pipeline")
_tracer = tracer("knowledge.ingest")


DUPLICATE_WAIT_S = 1.0


class Stopped(Exception):
    """The job was cancelled or its lease was lost: stop without writing anything more."""


@dataclass(frozen=True)
class PipelineSettings:
    chunk_max_chars: int
    embed_batch: int
    lease_s: float
    max_attempts: int
    retry_base_s: float


@dataclass
class Pipeline:
    store: IngestStore
    blobs: BlobStore
    embedder: Embedder
    extract: Callable[[Path, str, str], Extracted]
    settings: PipelineSettings

    async def run(self, lease: Lease) -> None:
        job = lease.job
        if job.attempts > self.settings.max_attempts:
            # Each earlier attempt ended with its worker gone (killed, or its lease lost) and
            # nothing recorded: a file that takes its worker down must not be retried forever.
            log.warning("ingest_abandoned", job_id=str(job.job_id), attempts=job.attempts)
            await self.store.finish(lease, State.FAILED, f"ingesting this file stopped unexpectedly "
                                    f"{job.attempts - 1} times; retry the job, or contact the operators if it "
                                    "fails again")
            return
        if job.duplicate and await self._settled_as_duplicate(lease):
            return
        heartbeat = asyncio.create_task(self._heartbeat(lease))
        try:
            result = await self._ingest(lease)
            if not await self.store.store(lease, *result):
                log.warning("ingest_lease_lost", job_id=str(job.job_id))
                return
            log.info("document_ingested", job_id=str(job.job_id), chunks=result[2].chunk_count)
        except Stopped:
            job_now = await self.store.job(job.tenant, job.job_id, deliver_result=False)
            if job_now is not None and job_now.cancel_requested and not job_now.state.terminal:
                await self.store.finish(lease, State.CANCELLED, None)
                log.info("ingest_cancelled", job_id=str(job.job_id))
        except Unavailable as error:
            await self._transient(lease, error)
        except DomainError as error:
            log.info("ingest_failed", job_id=str(job.job_id), reason=error.reason)
            await self.store.finish(lease, State.FAILED, error.message)
        except Exception:
            log.exception("ingest_crashed", job_id=str(job.job_id))
            await self.store.finish(lease, State.FAILED, "the file could not be processed (internal error); "
                                                          "retry the job, or contact the operators if it fails again")
        finally:
            heartbeat.cancel()

    async def _heartbeat(self, lease: Lease) -> None:
        """Keeps the lease through long steps (a big extraction) that report nothing meanwhile."""
        while True:
            await asyncio.sleep(self.settings.lease_s / 3)
            try:
                if not await self.store.renew(lease, self.settings.lease_s):
                    return  # cancelled or taken over: the next checkpoint stops the job
            except Unavailable:
                continue

    async def _settled_as_duplicate(self, lease: Lease) -> bool:
        """A job for bytes the tenant is already ingesting reports that ingest's real outcome;
        if it failed, this job extracts the document itself."""
        job = lease.job
        assert job.document_id is not None
        document = await self.store.document(job.tenant, job.document_id)
        if document is None:
            await self.store.finish(lease, State.CANCELLED, "the document was deleted")
            return True
        if not document.state.terminal:
            await self.store.wait_for_original(lease, DUPLICATE_WAIT_S, "queued (same file being ingested)")
            return True
        if document.state is State.SEARCHABLE and document.chunk_count > 0:
            await self.store.complete_duplicate(lease, JobResult(document.document_id, document.chunk_count,
                                                                 duplicate=True, warnings=document.warnings))
            return True
        return False

    async def _transient(self, lease: Lease, error: Unavailable) -> None:
        attempts = lease.job.attempts
        if attempts >= self.settings.max_attempts:
            await self.store.finish(lease, State.FAILED, f"{error.message} after {attempts} attempts; retry the job later")
            return
        delay = self.settings.retry_base_s * 2 ** (attempts - 1)
        log.info("ingest_retry_scheduled", job_id=str(lease.job.job_id), attempt=attempts, delay_s=delay)
        await self.store.postpone(lease, delay, f"waiting to retry ({error.message}; attempt {attempts} of "
                                                f"{self.settings.max_attempts})")

    async def _report(self, lease: Lease, state: State, done: int = 0, total: int = 0) -> None:
        progress, stage = progress_of(state, done, total)
        if not await self.store.report(lease, state, progress, stage, self.settings.lease_s):
            raise Stopped()

    async def _ingest(self, lease: Lease) -> tuple[list[TextChunk], list[list[float]], JobResult]:
        job = lease.job
        assert job.document_id is not None and job.blob_id is not None
        await self._report(lease, State.EXTRACTING)
        with _tracer.start_as_current_span("ingest.extract"), tempfile.TemporaryDirectory() as folder:
            path = Path(folder) / "blob"
            await self.blobs.read_to(job.tenant, job.blob_id, path)
            extracted = await asyncio.to_thread(self.extract, path, job.filename, job.mime_type)
        await self._report(lease, State.CHUNKING)
        with _tracer.start_as_current_span("ingest.chunk"):
            chunks = split_structural(extracted.text, source=job.filename, max_chars=self.settings.chunk_max_chars) \
                if extracted.extractable else []
        vectors: list[list[float]] = []
        await self._report(lease, State.EMBEDDING, 0, len(chunks))
        for start in range(0, len(chunks), self.settings.embed_batch):
            batch = chunks[start:start + self.settings.embed_batch]
            with _tracer.start_as_current_span("ingest.embed"):
                vectors += await self.embedder.embed(job.tenant, [c.content for c in batch])
            await self._report(lease, State.EMBEDDING, len(vectors), len(chunks))
        await self._report(lease, State.STORING)
        result = JobResult(job.document_id, len(chunks), re_extracted=job.re_extract, extractable=bool(chunks),
                           warnings=extracted.warnings)
        return chunks, vectors, result
