"""One job, start to finish: extract → chunk → embed (k/n) → store, with honest progress.

Every decision (abandon, settle a duplicate, retry or fail, cancel) is a ``domain.jobs``
function; this runs the steps and hands what they decide to the job queue, which writes it only
while the lease is held. Nothing is visible to search until the final transaction.
"""

from __future__ import annotations

import asyncio
import tempfile
from collections.abc import Awaitable, Callable
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path

import structlog
from knowledge_runtime.chunking import DEFAULT_WINDOW_SHARE, ChunkSize, TextChunk, split_structural, window_chunk_size
from knowledge_runtime.errors import DomainError, Unavailable
from knowledge_runtime.refusals import Refused
from knowledge_runtime.tracing import tracer

from knowledge_ingest.domain import jobs
from knowledge_ingest.domain.documents import State, safe_filename
from knowledge_ingest.domain.errors import DependencyNotReady
from knowledge_ingest.domain.extraction import Extracted, Source
from knowledge_ingest.domain.fetching import page_filename
from knowledge_ingest.domain.jobs import RetryPolicy, Transition
from knowledge_ingest.domain.model_change import CHUNKS_STORE, NEXT_STORE, Stores
from knowledge_ingest.domain.passages import PASSAGES_FORMAT, PASSAGES_MIME, StoredVersion
from knowledge_ingest.domain.ports import (
    BlobStore,
    DocumentRepository,
    Embedder,
    FetchAdmission,
    HeldModels,
    JobQueue,
    Lease,
)
from knowledge_ingest.extraction.passages import READER as PASSAGES_READER
from knowledge_ingest.extraction.passages import read_passages
from knowledge_ingest.jobs.uploads import capped
from knowledge_ingest.jobs.web import PageFetcher
from knowledge_ingest.tenants.usecases import QuotaChecks

log = structlog.get_logger("knowledge.ingest.pipeline")
_tracer = tracer("knowledge.ingest")


class Stopped(Exception):
    """The job was cancelled or its lease was lost: stop without writing anything more."""


PROGRESS_STEP = 0.1  # while embedding, progress is written at most every 10% of the chunks (STORING ends it)


@dataclass(frozen=True)
class PipelineSettings:
    embed_batch: int
    lease_s: float
    retry: RetryPolicy
    embed_window: int = 4  # EmbedTexts calls in flight per document, so the embedder forms full batches
    chunk_max_chars: int = 0  # chunks sized in characters; 0: in the embedding model's tokens, as below
    chunk_max_tokens: int = 0  # 0: chunk_window_share of the model's window
    chunk_window_share: float = DEFAULT_WINDOW_SHARE


@dataclass
class Pipeline:
    queue: JobQueue
    documents: DocumentRepository
    blobs: BlobStore
    embedder: Embedder
    extract: Callable[[Source, str, str], Extracted]  # a path, or the bytes of a kept blob
    settings: PipelineSettings
    fetcher: PageFetcher | None = None  # IngestUrl jobs: their first stage fetches the page
    admission: FetchAdmission | None = None
    max_upload_bytes: int = 0
    # The tenant's quotas before each costly step; a refusal fails the job (not retried) with the
    # refusal's words on its document.
    quotas: QuotaChecks | None = None
    # While a model change is open (or after one), the stores every chunk is written to and the
    # model of each; None: the chunks' own column only, by the current model.
    stores: Callable[[], Awaitable[Stores]] | None = None
    models: HeldModels | None = None  # embeds with a named model (a model change's)

    async def run(self, lease: Lease) -> None:
        job = lease.job
        abandon = jobs.abandoned(job, self.settings.retry)
        if abandon is not None:
            # Its workers kept dying (or what it needs kept restarting) with nothing recorded: a
            # file that takes its worker down must not be retried forever.
            log.warning("ingest_abandoned", job_id=str(job.job_id), interruptions=job.interruptions)
            await self._write(lease, abandon)
            return
        if job.duplicate:
            assert job.document_id is not None
            # the worker's own read: the job is settled whoever may read its document
            document = await self.documents.document((job.tenant,), job.document_id, None)
            settled = jobs.settle_duplicate(job, document)
            if settled is not None:
                await self._write(lease, settled)
                return
        heartbeat = asyncio.create_task(self._heartbeat(lease))
        try:
            if job.to_fetch:
                await self._fetch(lease)
                return
            chunks, vectors, extracted, version, next_vectors = await self._ingest(lease)
            outcome = jobs.stored(
                job,
                len(chunks),
                extracted.warnings,
                extracted.extractor,
                extracted.ocr_page_count,
                extracted.ocr_confidence,
            )
            also = {} if next_vectors is None else {"next_vectors": next_vectors}
            if not await self.queue.store(lease, chunks, vectors, outcome, version, extracted.metadata, **also):
                log.warning("ingest_lease_lost", job_id=str(job.job_id))
                return
            log.info("document_ingested", job_id=str(job.job_id), chunks=len(chunks))
        except Stopped:
            if await self.queue.cancel_requested(lease):
                await self._write(lease, jobs.cancelled())
                log.info("ingest_cancelled", job_id=str(job.job_id))
            else:
                log.warning("ingest_lease_lost", job_id=str(job.job_id))
        except Refused as error:  # before Unavailable and DomainError: the closed set's rule decides
            transition = jobs.after_refusal(job, error.refusal, error.message, self.settings.retry)
            log.info(
                "ingest_refused", job_id=str(job.job_id), reason=error.reason, retried=transition.state is State.QUEUED
            )
            await self._write(lease, transition)
        except DependencyNotReady as error:
            log.info("ingest_interrupted", job_id=str(job.job_id), service=error.service)
            await self._write(lease, jobs.interrupted(error.service))
        except Unavailable as error:
            retry = jobs.after_transient(job, error.message, self.settings.retry)
            if retry.state is State.QUEUED:
                log.info(
                    "ingest_retry_scheduled",
                    job_id=str(job.job_id),
                    attempt=job.attempts,
                    delay_s=retry.requeue_after_s,
                )
            await self._write(lease, retry)
        except DomainError as error:
            log.info("ingest_failed", job_id=str(job.job_id), reason=error.reason)
            await self._write(lease, jobs.failed(error.message))
        except Exception:
            log.exception("ingest_crashed", job_id=str(job.job_id))
            await self._write(lease, jobs.crashed())
        finally:
            heartbeat.cancel()

    async def _write(self, lease: Lease, transition: Transition) -> bool:
        return await self.queue.apply(lease, transition, self.settings.lease_s)

    async def _heartbeat(self, lease: Lease) -> None:
        """Keeps the lease through long steps (a big extraction) that report nothing meanwhile."""
        while True:
            await asyncio.sleep(self.settings.lease_s / 3)
            try:
                if not await self.queue.renew(lease, self.settings.lease_s):
                    return  # cancelled or taken over: the next checkpoint stops the job
            except Unavailable:
                continue

    async def _report(self, lease: Lease, state: State, done: int = 0, total: int = 0) -> None:
        if not await self._write(lease, jobs.reached(state, done, total)):
            raise Stopped()

    async def _fetch(self, lease: Lease) -> None:
        """The fetching stage of an IngestUrl job: the page (fenced, ``adapters/fetch.py``) into a
        blob, then admitted as an upload would be; the job goes back to the queue for the rest
        (or ends a duplicate). A refused URL, a redirect to a refused address, a site that does
        not answer or a page over the cap ends the job FAILED with the reason."""
        job = lease.job
        assert job.fetch_url is not None and self.fetcher is not None and self.admission is not None
        if not await self._write(lease, jobs.fetching()):
            raise Stopped()
        with _tracer.start_as_current_span("ingest.fetch"):
            async with self.fetcher.open(job.fetch_url) as page:
                filename = safe_filename(page_filename(page.final_url, page.content_type))
                blob = await self.blobs.write(
                    job.tenant, filename, page.content_type, capped(page.chunks, self.max_upload_bytes)
                )
        admitted = await self.admission.admit_fetched(
            job, lease.owner, blob, filename, page.content_type, page.final_url
        )
        if admitted is None:
            raise Stopped()  # cancelled or taken over: nothing admitted (the blob goes by GC)
        log.info("ingest_page_fetched", job_id=str(job.job_id), size_bytes=blob.size_bytes)

    async def _ingest(
        self, lease: Lease
    ) -> tuple[
        list[TextChunk], list[list[float]] | list[None], Extracted, StoredVersion | None, list[list[float]] | None
    ]:
        """The job's chunks, their vectors, what read them, for a passages job the version its
        storing transaction writes with them, and the vectors of the next store when it is
        written (a model change)."""
        job = lease.job
        assert job.document_id is not None and job.blob_id is not None
        checks, quotas = self.quotas, None
        if checks is not None:  # the tenant's quotas read once, for both checks
            quotas = await checks.embedding_quotas(job.tenant)
            await checks.before_embedding(job.tenant, job.document_id, 0, quotas)
        await self._report(lease, State.EXTRACTING)
        with _tracer.start_as_current_span("ingest.extract"), ExitStack() as staging:
            source: Source | None = self.blobs.kept(job.tenant, job.blob_id)  # a small text written here
            if source is None:  # read from content-index into a staging file
                path = Path(staging.enter_context(tempfile.TemporaryDirectory())) / "blob"
                await self.blobs.read_to(job.tenant, job.blob_id, path)
                source = path
            if job.mime_type == PASSAGES_MIME:
                read = await asyncio.to_thread(read_passages, source)
                extracted = Extracted("", None, True, PASSAGES_FORMAT, extractor=PASSAGES_READER)
            else:
                extracted = await asyncio.to_thread(self.extract, source, job.filename, job.mime_type)
        await self._report(lease, State.CHUNKING)
        version: StoredVersion | None = None
        chunks: list[TextChunk] = []
        tokenizer = ""
        if job.mime_type == PASSAGES_MIME:  # as given: one chunk per passage, never re-chunked
            assert job.content_sha256 is not None
            version = StoredVersion(read, job.content_sha256, job.blob_id)
            chunks = [TextChunk(p.text, "", p.page, index) for index, p in enumerate(read.passages)]
        elif extracted.extractable:
            size, tokenizer = await self._chunk_size(job.tenant)
            with _tracer.start_as_current_span("ingest.chunk"):  # counting tokens blocks: off the loop
                chunks = await asyncio.to_thread(split_structural, extracted.text, source=job.filename, size=size)
        if checks is not None and chunks:
            await checks.before_embedding(job.tenant, job.document_id, len(chunks), quotas)
        await self._report(lease, State.EMBEDDING, 0, len(chunks))
        live = (await self.stores()).live() if self.stores is not None else {CHUNKS_STORE: ""}
        vectors: list[list[float]] | list[None] = [None] * len(chunks)
        if CHUNKS_STORE in live:
            vectors = await self._embed(lease, chunks, tokenizer, live[CHUNKS_STORE])
        next_vectors = None
        if NEXT_STORE in live and chunks:
            next_vectors = await self._embed(lease, chunks, tokenizer, live[NEXT_STORE])
        await self._report(lease, State.STORING)
        return chunks, vectors, extracted, version, next_vectors

    async def _chunk_size(self, tenant: str) -> tuple[ChunkSize, str]:
        """How big a chunk may be, and the id of the tokenizer it is counted in: the embedding
        model's tokens (a share of its window, or a set count), or characters when
        ``chunk_max_chars`` asks for them (then no tokenizer: "")."""
        if self.settings.chunk_max_chars:
            return ChunkSize(self.settings.chunk_max_chars), ""
        window = await self.embedder.window(tenant)
        size = window_chunk_size(
            window, share=self.settings.chunk_window_share, max_tokens=self.settings.chunk_max_tokens
        )
        return size, window.tokenizer_id

    async def _embed(self, lease: Lease, chunks: list[TextChunk], tokenizer: str, model: str = "") -> list[list[float]]:
        """Batches of ``embed_batch`` chunks, ``embed_window`` calls in flight; progress written
        when another tenth of the chunks is embedded, until the last batch (a cancel is seen
        there, or at STORING). ``tokenizer``: what the chunks were counted in (the embedder
        refuses them if it has another). ``model``: a model change's model by name ('' the
        current one, which cut the chunks)."""
        size = self.settings.embed_batch
        batches = [chunks[start : start + size] for start in range(0, len(chunks), size)]
        window = asyncio.Semaphore(self.settings.embed_window)

        async def embedded(index: int) -> tuple[int, list[list[float]]]:
            async with window:
                with _tracer.start_as_current_span("ingest.embed"):
                    texts = [c.content for c in batches[index]]
                    if model and self.models is not None:
                        return index, await self.models.embed_with(lease.job.tenant, texts, model)
                    return index, await self.embedder.embed(lease.job.tenant, texts, tokenizer)

        results: list[list[list[float]]] = [[] for _ in batches]
        done, reported = 0, 0
        tasks = [asyncio.create_task(embedded(index)) for index in range(len(batches))]
        try:
            for finished in asyncio.as_completed(tasks):
                index, vectors = await finished
                results[index] = vectors
                done += len(batches[index])
                # The last batch writes nothing: STORING, written next, says every chunk is embedded.
                if done < len(chunks) and done - reported >= PROGRESS_STEP * len(chunks):
                    reported = done
                    await self._report(lease, State.EMBEDDING, done, len(chunks))
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
        return [vector for batch in results for vector in batch]
