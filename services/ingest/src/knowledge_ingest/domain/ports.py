"""What the use cases need from the outside world."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from knowledge_runtime.chunking import TextChunk

from knowledge_ingest.domain.documents import Document, Job, JobResult, State
from knowledge_ingest.domain.model import Corpus, NewCorpus, Page


class CorpusRepository(Protocol):
    async def create(self, tenant: str, corpus: NewCorpus) -> Corpus:
        """Insert the corpus; raises CorpusNameTaken on a duplicate name in the tenant."""

    async def list_user_corpora(self, tenant: str, page: Page) -> list[Corpus]:
        """The tenant's non-system corpora after ``page.after_id``, oldest first, at most ``page.size``."""


@dataclass(frozen=True, slots=True)
class StoredBlob:
    blob_id: int
    size_bytes: int
    already_existed: bool


class BlobStore(Protocol):
    """The content-index service: the only owner of blobs."""

    async def write(self, tenant: str, filename: str, mime_type: str, chunks: AsyncIterator[bytes]) -> StoredBlob: ...

    async def read_to(self, tenant: str, blob_id: int, target: Path) -> int:
        """Copy the blob's bytes into ``target``; returns the size."""


class Embedder(Protocol):
    """The embedder service: the only holder of the model."""

    async def embed(self, tenant: str, texts: Sequence[str]) -> list[list[float]]: ...


@dataclass(frozen=True, slots=True)
class Lease:
    """A worker's claim on a job; every write of the worker is conditioned on it."""

    job: Job
    owner: str


class IngestStore(Protocol):
    """Documents, jobs and chunks in PostgreSQL."""

    async def corpus_accepts_uploads(self, tenant: str, corpus_id: int) -> bool:
        """The corpus is the tenant's own or a system corpus."""

    async def enqueue(self, tenant: str, corpus_id: int, blob: StoredBlob, filename: str, mime_type: str,
                      source_url: str | None) -> Job:
        """Create the job (and the document, unless the tenant already has one on this blob)."""

    async def enqueue_into(self, tenant: str, document_id: int, corpus_id: int | None, blob: StoredBlob,
                           mime_type: str, source_url: str | None) -> Job | None:
        """Create a job that makes ``blob`` the content of the tenant's document (None: no such
        document); raises what ``admit_into`` raises."""

    async def job(self, tenant: str, job_id: uuid.UUID, *, deliver_result: bool) -> Job | None: ...

    async def cancel(self, tenant: str, job_id: uuid.UUID) -> Job | None: ...

    async def retry(self, tenant: str, job_id: uuid.UUID) -> Job | None: ...

    async def claim(self, owner: str, lease_s: float) -> Lease | None: ...

    async def report(self, lease: Lease, state: State, progress: float, stage: str, lease_s: float) -> bool:
        """Record progress and renew the lease; False when the lease was lost or cancel was asked."""

    async def renew(self, lease: Lease, lease_s: float) -> bool:
        """Extend the lease; False when it was lost or cancel was asked."""

    async def store(self, lease: Lease, chunks: Sequence[TextChunk], vectors: Sequence[Sequence[float]],
                    result: JobResult) -> bool:
        """Chunks, document and job become SEARCHABLE in one transaction; False if the lease was lost."""

    async def complete_duplicate(self, lease: Lease, result: JobResult) -> bool:
        """End a duplicate job with the outcome of the document it waited for."""

    async def finish(self, lease: Lease, state: State, error: str | None) -> None: ...

    async def postpone(self, lease: Lease, delay_s: float, stage: str) -> None: ...

    async def wait_for_original(self, lease: Lease, delay_s: float, stage: str) -> None:
        """Re-queue a duplicate job to look again later; its document and attempt count stay."""

    async def reap_cancelled(self) -> int:
        """End cancel-requested jobs whose worker is gone (lease expired); how many were ended."""

    async def document(self, tenant: str, document_id: int) -> Document | None: ...

    async def list_documents(self, tenant: str, corpus_id: int, page: Page) -> list[Document]: ...

    async def document_chunks(self, tenant: str, document_id: int) -> list[TextChunk]: ...

    async def movable_documents(self, tenant: str, source_corpus_id: int | None) -> list[int]: ...

    async def move(self, tenant: str, target_corpus_id: int, document_ids: Sequence[int],
                   source_corpus_id: int | None) -> tuple[list[int], list[int], list[int]]:
        """(moved, missing, outside the source): nothing moves unless every document is the
        tenant's and, when a source is given, in it."""

    async def move_all(self, tenant: str, source_corpus_id: int, target_corpus_id: int,
                       listed: int) -> tuple[int, list[int]]:
        """Every document of the source, in one transaction: (how many, the first ``listed`` ids)."""

    async def delete_document(self, tenant: str, document_id: int) -> tuple[int, uuid.UUID | None] | None:
        """Delete the document and its chunks, release its blob reference; (chunks, cancelled job)."""

    async def backlog(self) -> int:
        """Jobs of every tenant not yet ended: what the autoscaler scales ingest on."""

    async def corpus_summary(self, tenant: str) -> list[tuple[int, str, int]]:
        """(corpus_id, name, document_count) of the tenant's user corpora."""
