"""Documents and ingestion jobs: states, honest progress, results, safe filenames."""

from __future__ import annotations

import enum
import os
import re
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from knowledge_runtime import ids

from knowledge_ingest.domain.errors import CorpusNotFound, DocumentNotFound, InvalidRequest, JobNotFound

MAX_FILENAME_CHARS = 255
_UNSAFE = re.compile(r"[^\w.-]", re.UNICODE)


class State(enum.StrEnum):
    QUEUED = "QUEUED"
    EXTRACTING = "EXTRACTING"
    CHUNKING = "CHUNKING"
    EMBEDDING = "EMBEDDING"
    STORING = "STORING"
    SEARCHABLE = "SEARCHABLE"
    FAILED = "FAILED"
    CANCELLED = "CANCELLED"

    @property
    def terminal(self) -> bool:
        return self in TERMINAL


TERMINAL = frozenset({State.SEARCHABLE, State.FAILED, State.CANCELLED})


def progress_of(state: State, done: int = 0, total: int = 0) -> tuple[float, str]:
    """(progress in 0..1, stage text) for a state; embedding moves with chunks done k/n."""
    if state is State.EMBEDDING:
        fraction = done / total if total else 1.0
        return 0.2 + 0.7 * fraction, f"embedding {done}/{total}"
    return _FIXED[state]


_FIXED = {
    State.QUEUED: (0.0, "queued"),
    State.EXTRACTING: (0.05, "extracting"),
    State.CHUNKING: (0.15, "chunking"),
    State.STORING: (0.92, "storing"),
    State.SEARCHABLE: (1.0, "searchable"),
    State.FAILED: (1.0, "failed"),
    State.CANCELLED: (1.0, "cancelled"),
}


def safe_filename(name: str) -> str:
    """Basename, then every character outside ``[\\w.-]`` becomes ``_`` (never empty, bounded)."""
    base = os.path.basename(name.replace("\\", "/").replace("\x00", ""))
    cleaned = _UNSAFE.sub("_", base).lstrip(".") or "upload"
    if len(cleaned) > MAX_FILENAME_CHARS:
        _stem, dot, ext = cleaned.rpartition(".")
        keep = ext if dot and len(ext) <= 16 else ""
        cleaned = cleaned[: MAX_FILENAME_CHARS - len(keep) - 1] + ("." + keep if keep else "")
    return cleaned


def parse_id(value: str, field: str) -> int:
    """Identifiers are opaque strings to callers: a missing one is a bad request, one that
    cannot exist is simply not found (like another tenant's)."""
    if not value:
        raise InvalidRequest(f"{field} is required", field=field)
    parsed = ids.parse_id(value)  # the one parser; the treatment (404, or 400 when missing) is ours
    if parsed is None:
        raise (DocumentNotFound if field.startswith("document") else CorpusNotFound)(value)
    return parsed


def parse_job_id(value: str) -> uuid.UUID:
    if not value:
        raise InvalidRequest("job_id is required", field="job_id")
    try:
        parsed = uuid.UUID(value)
    except ValueError:
        raise JobNotFound(value) from None
    if str(parsed) != value:  # one spelling per job: no braces, "urn:uuid:", capitals or missing hyphens
        raise JobNotFound(value)
    return parsed


@dataclass(frozen=True, slots=True)
class Document:
    document_id: int
    corpus_id: int
    filename: str
    state: State
    error: str | None
    chunk_count: int
    size_bytes: int
    mime_type: str
    extractable: bool | None
    source_url: str | None
    job_id: uuid.UUID | None
    create_time: datetime
    update_time: datetime
    warnings: tuple[str, ...] = ()  # what the extraction behind its chunks could not do
    extractor: str = ""  # what read the text behind its chunks ("pdfium, pypdf; OCR (...) on pages 2, 5")
    ocr_page_count: int = 0  # pages of it OCR read
    ocr_confidence: float = 0.0  # the mean confidence (0-100) of the words OCR read; 0 when none
    stage: str = ""  # of its most recent job ("embedding 3/8"); empty without one
    progress: float = 0.0  # of its most recent job
    refusal_reason: str = ""  # FAILED because refused for a reason waiting cannot fix (e.g. QUOTA_EXHAUSTED)
    metadata: dict[str, Any] = field(default_factory=dict)  # the caller's (domain.metadata)
    document_ref: str = ""  # the caller's own name for it (passages by reference); empty for others
    # Who may read it (runtime.reach.may_read_document): user:<sub> and group:<name> entries;
    # empty, everyone who reaches its corpus.
    principals: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class JobResult:
    document_id: int
    chunk_count: int
    duplicate: bool = False
    re_extracted: bool = False
    extractable: bool = True
    warnings: tuple[str, ...] = ()  # what extraction could not do
    extractor: str = ""  # what read the text (stored on the document)
    ocr_page_count: int = 0
    ocr_confidence: float = 0.0

    @property
    def message(self) -> str:
        """Four variants: (fresh | re-extracted) x (text found | no text found); duplicates say so."""
        if self.duplicate:
            return "This file is already in the knowledge base; the existing document was kept."
        if self.re_extracted:
            if self.extractable:
                return f"The document was extracted again: {self.chunk_count} chunks are searchable."
            return "The document was extracted again, but no text was found in it."
        if self.extractable:
            return f"The document was ingested: {self.chunk_count} chunks are searchable."
        return "The document was stored, but no text was found in it, so it cannot be searched."

    def as_json(self) -> dict[str, object]:
        return {
            "document_id": self.document_id,
            "chunk_count": self.chunk_count,
            "duplicate": self.duplicate,
            "re_extracted": self.re_extracted,
            "extractable": self.extractable,
            "warnings": list(self.warnings),
            "extractor": self.extractor,
            "ocr_page_count": self.ocr_page_count,
            "ocr_confidence": self.ocr_confidence,
        }

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> JobResult:
        return cls(
            document_id=int(data["document_id"]),
            chunk_count=int(data["chunk_count"]),
            duplicate=bool(data.get("duplicate", False)),
            re_extracted=bool(data.get("re_extracted", False)),
            extractable=bool(data.get("extractable", True)),
            warnings=tuple(str(w) for w in data.get("warnings", ())),
            extractor=str(data.get("extractor", "")),
            ocr_page_count=int(data.get("ocr_page_count", 0)),
            ocr_confidence=float(data.get("ocr_confidence", 0.0)),
        )


@dataclass(frozen=True, slots=True)
class Job:
    job_id: uuid.UUID
    tenant: str
    corpus_id: int
    document_id: int | None
    blob_id: int | None
    filename: str
    mime_type: str
    state: State
    stage: str
    progress: float
    error: str | None
    attempts: int
    cancel_requested: bool
    re_extract: bool
    create_time: datetime
    update_time: datetime
    result: JobResult | None = None  # set only on the one poll that delivers it
    duplicate: bool = False  # waits for the tenant's ingest of the same bytes, then reports it
    interruptions: int = 0  # takeovers and dependency restarts of this run: no attempt spent
    fetch_url: str | None = None  # IngestUrl: the page to fetch, as the job's first stage
    content_sha256: str | None = None  # a passages job: the caller's hash of the version it indexes

    @property
    def to_fetch(self) -> bool:
        """Its page is still to be fetched (no bytes stored, no document admitted yet)."""
        return self.fetch_url is not None and self.blob_id is None
