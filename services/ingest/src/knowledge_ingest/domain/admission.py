"""Admission and dedup: what a new job (and its document) must be, from what the tenant has.

Pure decisions; the store reads what they need under the (tenant, blob) lock, asks, and writes
what they answer.
"""

from __future__ import annotations

import enum
import uuid
from dataclasses import dataclass

from knowledge_ingest.domain.documents import JobResult, State
from knowledge_ingest.domain.errors import DocumentBusy, DocumentNotInCorpus

FETCH_STAGE = "queued (to fetch)"  # an IngestUrl job before its worker fetched the page
WAITING_STAGE = "queued (same file being ingested)"


class Admission(enum.StrEnum):
    FRESH = "fresh"  # a new document, extracted from the start
    DUPLICATE = "duplicate"  # the tenant's document on these bytes is searchable: nothing to do
    WAIT_FOR_ORIGINAL = "wait"  # the same bytes are being ingested: report that ingest's outcome
    RE_EXTRACT = "re-extract"  # an earlier ingest failed or found nothing, or new content is bound


@dataclass(frozen=True, slots=True)
class ExistingDocument:
    """The tenant's document, as admission needs it."""

    document_id: int
    corpus_id: int
    blob_id: int | None
    state: State
    chunk_count: int
    warnings: tuple[str, ...] = ()

    @property
    def searchable_with_chunks(self) -> bool:
        return self.state is State.SEARCHABLE and self.chunk_count > 0


@dataclass(frozen=True, slots=True)
class NewJob:
    """What to write: the job's first row, and whether its document is created or re-queued."""

    admission: Admission
    state: State
    stage: str
    progress: float
    re_extract: bool = False
    duplicate: bool = False
    result: JobResult | None = None

    @property
    def creates_document(self) -> bool:
        return self.admission is Admission.FRESH

    @property
    def requeues_document(self) -> bool:
        return self.admission is Admission.RE_EXTRACT


def _queued(admission: Admission, **fields: object) -> NewJob:
    return NewJob(admission, State.QUEUED, "queued", 0.0, **fields)  # type: ignore[arg-type]


def _duplicate_of(document: ExistingDocument) -> NewJob:
    result = JobResult(document.document_id, document.chunk_count, duplicate=True, warnings=document.warnings)
    return NewJob(Admission.DUPLICATE, State.SEARCHABLE, "searchable (duplicate)", 1.0, duplicate=True, result=result)


def admit(existing: ExistingDocument | None) -> NewJob:
    """An upload (or a text for a new document) of bytes the tenant may already have."""
    if existing is None:
        return _queued(Admission.FRESH)
    if existing.searchable_with_chunks:
        return _duplicate_of(existing)
    if not existing.state.terminal:  # being ingested now: wait for its outcome
        return NewJob(Admission.WAIT_FOR_ORIGINAL, State.QUEUED, WAITING_STAGE, 0.0, duplicate=True)
    # an earlier ingest of these bytes failed or found no text: extract again into that document
    return _queued(Admission.RE_EXTRACT, re_extract=True)


def admit_into(
    document: ExistingDocument, blob_id: int, corpus_id: int | None, unended_job: uuid.UUID | None
) -> NewJob:
    """New content bound to an existing document: it is extracted again into that document (its
    chunks replaced at the end), unless another job of it is still running, or the content is
    the one it already has, searchable."""
    if corpus_id is not None and corpus_id != document.corpus_id:
        raise DocumentNotInCorpus(document.document_id, corpus_id)
    if unended_job is not None:
        raise DocumentBusy(document.document_id, unended_job)
    if document.blob_id == blob_id and document.searchable_with_chunks:
        return _duplicate_of(document)
    return _queued(Admission.RE_EXTRACT, re_extract=True)
