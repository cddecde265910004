"""Tombstones: what a deleted document was, and the durable job that removes what it left.

A deletion answers at once: the document is out of every read from that commit on, and its
tombstone (this record) is written with it. The tombstone is also the removal job: a worker claims
it under a lease, deletes the chunks a batch per transaction, then the document row (its blob
reference), and marks it done. The decisions here are pure; adapters.tombstones reads and writes.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum

from knowledge_runtime.reach import Reader, ScopePath, parse_band

from knowledge_ingest.domain.jobs import RetryPolicy

# Why a deletion happened, as the tombstone records it.
DELETED_BY_REQUEST = "deleted by request"
DELETED_WITH_CORPUS = "deleted with its corpus"
MAX_REASON_CHARS = 500

REMOVAL_BATCH = 500  # chunks deleted per transaction of a removal job
REMOVAL_RETRY_BASE_S = 2.0
REMOVAL_RETRY_MAX_S = 300.0
# The jobs' doubling backoff; a removal is retried until done, so no attempt limit is consulted.
REMOVAL_BACKOFF = RetryPolicy(max_attempts=0, retry_base_s=REMOVAL_RETRY_BASE_S)


class RemovalState(StrEnum):
    PENDING = "PENDING"  # the document is invisible; its chunks and row are still being removed
    DONE = "DONE"  # nothing of it is left but this record


@dataclass(frozen=True, slots=True)
class Tombstone:
    tombstone_id: int
    tenant: str
    document_id: int
    corpus_id: int
    scope_path: str
    confidentiality: str
    filename: str
    content_hash: str
    chunk_count: int
    deleted_by: str
    reason: str
    delete_time: datetime
    removal_state: RemovalState
    remove_time: datetime | None
    principals: tuple[str, ...] = ()  # the document's access list when it was deleted


@dataclass(frozen=True, slots=True)
class Deletion:
    """What DeleteDocument answers: the tombstone and the ingestion it cancelled (None: none ran)."""

    tombstone: Tombstone
    cancelled_job_id: str | None


@dataclass(frozen=True, slots=True)
class Removal:
    """A claimed removal job."""

    tombstone_id: int
    tenant: str
    document_id: int
    corpus_id: int
    owner: str
    attempts: int


def reason_of(given: str, default: str = DELETED_BY_REQUEST) -> str:
    """The recorded reason: the caller's, trimmed and cut, or ``default`` when none was given."""
    text = " ".join(given.split())
    return text[:MAX_REASON_CHARS] if text else default


def retry_delay_s(attempts: int) -> float:
    """Backoff of a removal that failed (the database went away, say): it is retried until done."""
    return min(REMOVAL_RETRY_MAX_S, REMOVAL_BACKOFF.delay_after(max(1, attempts)))


def readable(reader: Reader, tombstone: Tombstone) -> bool:
    """A tombstone is listed to a caller who could have read its document where it was, and as its
    access list then stood (reach.py): its filename is the document's to tell."""
    try:
        node = ScopePath.parse(tombstone.scope_path)
        band = parse_band(tombstone.confidentiality)
    except ValueError:
        return False
    return reader.may_read(node, band) and reader.may_read_document(tombstone.principals)
