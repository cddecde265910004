"""Passages by reference in PostgreSQL (role knowledge_ingest): a reference's document and the
admission of its versions.

A version is admitted in one transaction under a lock on (tenant, corpus, reference), so two
requests for one reference are decided one after the other (``domain.passages.admit_version``):
the later one cancels the earlier unfinished job and makes its own. Locks are taken in the order
the storing transaction takes them (the job's row, then the document's), so an admission and a
store of the same document never wait on each other in a cycle.
"""

from __future__ import annotations

import json
import uuid

from knowledge_runtime.db.pool import Database, Transaction

from knowledge_ingest.domain.documents import State
from knowledge_ingest.domain.jobs import superseded
from knowledge_ingest.domain.passages import (
    PASSAGES_MIME,
    Admitted,
    IndexRequest,
    Outcome,
    ReferencedDocument,
    VersionAdmission,
    VersionJob,
    admit_version,
)
from knowledge_ingest.domain.ports import StoredBlob
from knowledge_ingest.events.outbox import NOTIFY_JOBS
from knowledge_ingest.jobs.postgres import admit_within_quota, cancel_job
from knowledge_ingest.jobs.rows import JOB_COLUMNS, TERMINAL, job_from_row
from knowledge_ingest.tenants.postgres import ENSURE_TENANT

LOCK_REFERENCE = (
    "SELECT pg_advisory_xact_lock(hashtextextended('ref:' || $1 || ':' || ($2::bigint)::text || ':' || $3, 0))"
)
REFERENCED = """
SELECT document_id, state, chunk_count, source_sha256, principals FROM documents
WHERE tenant_id = $1 AND corpus_id = $2 AND document_ref = $3 AND deleted_at IS NULL
"""
UNENDED = f"""
SELECT job_id, content_sha256, cancel_requested FROM ingest_jobs
WHERE document_id = $1 AND state NOT IN {TERMINAL}
ORDER BY job_id
"""
LOCK_UNENDED = UNENDED.rstrip() + " FOR UPDATE"
LOCK_DOCUMENT = "SELECT document_id FROM documents WHERE document_id = $1 FOR UPDATE"
# Its access list: the request's ($8), else its corpus's default (migration 0062).
INSERT_DOCUMENT = """
INSERT INTO documents (tenant_id, corpus_id, blob_id, filename, mime_type, document_ref, metadata, principals)
VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb,
        coalesce($8::text[], (SELECT c.default_principals FROM corpora c WHERE c.corpus_id = $2), '{}'))
RETURNING document_id
"""
# A document with no searchable version follows its new job (domain.passages: requeues_document).
REQUEUE_DOCUMENT = """
UPDATE documents SET state = 'QUEUED', error = NULL, refusal_reason = NULL, update_time = now() WHERE document_id = $1
"""
INSERT_JOB = f"""
INSERT INTO ingest_jobs (tenant_id, corpus_id, document_id, blob_id, filename, mime_type, content_sha256)
VALUES ($1, $2, $3, $4, $5, $6, $7)
RETURNING {JOB_COLUMNS}
"""
GET_JOB = f"SELECT {JOB_COLUMNS} FROM ingest_jobs WHERE job_id = $1"


class PostgresPassages:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def referenced(self, tenant: str, corpus_id: int, document_ref: str) -> ReferencedDocument | None:
        """The reference's live document with its unfinished jobs, as read now (no lock)."""
        row = await self._db.fetchrow("referenced_document", REFERENCED, tenant, corpus_id, document_ref)
        if row is None:
            return None
        jobs = await self._db.fetch("referenced_jobs", UNENDED, row["document_id"])
        return _referenced(row, jobs)

    async def admit(
        self, tenant: str, corpus_id: int, request: IndexRequest, blob: StoredBlob | None
    ) -> Admitted | None:
        """The version decided and written in one transaction: the earlier unfinished jobs it
        supersedes cancelled, then its document (when new) and its job. None when it needs a job
        but was given no ``blob`` (what was read before the lock has changed): nothing written,
        the caller stores the blob and asks again."""
        async with self._db.transaction() as tx:
            await tx.execute("ensure_tenant", ENSURE_TENANT, tenant)
            await tx.execute("lock_reference", LOCK_REFERENCE, tenant, corpus_id, request.document_ref)
            existing = await _locked_reference(tx, tenant, corpus_id, request.document_ref)
            decision = admit_version(existing, request.content_sha256)
            if decision.creates_job and blob is None:
                return None
            for job_id in decision.cancel:
                await cancel_job(tx, tenant, job_id, superseded)
            if decision.outcome is Outcome.UNCHANGED:
                assert existing is not None
                return Admitted(decision.outcome, existing.document_id, None)
            if decision.outcome is Outcome.IN_PROGRESS:
                assert existing is not None and decision.job_id is not None
                row = await tx.fetchrow("get_job", GET_JOB, decision.job_id)
                assert row is not None  # locked with the document's unended jobs
                return Admitted(decision.outcome, existing.document_id, job_from_row(row))
            assert blob is not None
            document_id = await _document_for(tx, tenant, corpus_id, request, blob, existing, decision)
            row = await tx.fetchrow(
                "insert_passages_job",
                INSERT_JOB,
                tenant,
                corpus_id,
                document_id,
                blob.blob_id,
                request.filename,
                PASSAGES_MIME,
                request.content_sha256,
            )
            assert row is not None
            await tx.execute("notify_jobs", NOTIFY_JOBS)
        return Admitted(decision.outcome, document_id, job_from_row(row))


async def _locked_reference(
    tx: Transaction, tenant: str, corpus_id: int, document_ref: str
) -> ReferencedDocument | None:
    """The reference's document and its unfinished jobs, locked jobs first, then the document."""
    row = await tx.fetchrow("referenced_document", REFERENCED, tenant, corpus_id, document_ref)
    if row is None:
        return None
    jobs = await tx.fetch("lock_referenced_jobs", LOCK_UNENDED, row["document_id"])
    await tx.execute("lock_referenced_document", LOCK_DOCUMENT, row["document_id"])
    # Read again under the locks: a job may have stored (or ended) since the first read.
    row = await tx.fetchrow("referenced_document", REFERENCED, tenant, corpus_id, document_ref)
    assert row is not None  # the reference's lock keeps its document from being replaced
    return _referenced(row, jobs)


async def _document_for(
    tx: Transaction,
    tenant: str,
    corpus_id: int,
    request: IndexRequest,
    blob: StoredBlob,
    existing: ReferencedDocument | None,
    decision: VersionAdmission,
) -> int:
    if existing is None:  # a new reference: counted against the tenant's quotas under its lock
        await admit_within_quota(tx, tenant, blob)
        document_id: int = await tx.fetchval(
            "insert_passages_document",
            INSERT_DOCUMENT,
            tenant,
            corpus_id,
            blob.blob_id,
            request.filename,
            PASSAGES_MIME,
            request.document_ref,
            json.dumps(request.version.metadata),
            None if request.principals is None else list(request.principals),
        )
        return document_id
    if decision.requeues_document:
        await tx.execute("requeue_passages_document", REQUEUE_DOCUMENT, existing.document_id)
    return existing.document_id


def _referenced(row, jobs) -> ReferencedDocument:
    return ReferencedDocument(
        document_id=row["document_id"],
        state=State(row["state"]),
        chunk_count=row["chunk_count"],
        source_sha256=row["source_sha256"],
        principals=tuple(row["principals"]),
        unended=tuple(
            VersionJob(uuid.UUID(str(j["job_id"])), j["content_sha256"], j["cancel_requested"]) for j in jobs
        ),
    )
