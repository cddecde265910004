"""Jobs as the API creates and changes them, in PostgreSQL (role knowledge_ingest).

Each change is a decision of ``domain.admission`` or ``domain.jobs``, taken on rows read under
their locks (the (tenant, blob) advisory lock, the document's or the job's row lock) and then
written as it answers.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Collection

import asyncpg
from knowledge_runtime.db.pool import Database, Transaction
from knowledge_runtime.db.reach import principals_arg, readable_by
from knowledge_runtime.db.tenant_settings import TenantSettingsReader
from knowledge_runtime.tenancy import current_period, period_bounds

from knowledge_ingest.domain.admission import FETCH_STAGE, ExistingDocument, NewJob, admit, admit_into
from knowledge_ingest.domain.documents import Job, State
from knowledge_ingest.domain.jobs import CancelDecision, CancelKind, cancel_request, retry_request
from knowledge_ingest.domain.metadata import Metadata
from knowledge_ingest.domain.ports import StoredBlob
from knowledge_ingest.domain.quotas import upload_refusal
from knowledge_ingest.events.outbox import NOTIFY_JOBS
from knowledge_ingest.jobs.rows import (
    J_JOB_COLUMNS,
    JOB_COLUMNS,
    SET_DOCUMENT_STATE,
    TERMINAL,
    follow,
    job_from_row,
)
from knowledge_ingest.tenants.postgres import ENSURE_TENANT, holdings

# Serialises the admissions of a tenant's new documents while it has a documents or bytes quota,
# so that concurrent uploads cannot overshoot it (taken after the blob's lock, by enqueue only).
LOCK_TENANT_QUOTA = "SELECT pg_advisory_xact_lock(hashtextextended('quota:' || $1, 0))"
LOCK_BLOB = "SELECT pg_advisory_xact_lock(hashtextextended($1 || ':' || ($2::bigint)::text, 0))"
EXISTING_DOCUMENT = """
SELECT document_id, corpus_id, blob_id, state, chunk_count, warnings FROM documents
WHERE tenant_id = $1 AND blob_id = $2 AND deleted_at IS NULL ORDER BY document_id LIMIT 1 FOR UPDATE
"""
LOCK_BOUND_DOCUMENT = f"""
SELECT d.document_id, d.corpus_id, d.blob_id, d.state, d.chunk_count, d.warnings, d.filename,
       (SELECT j.job_id FROM ingest_jobs j WHERE j.document_id = d.document_id AND j.state NOT IN {TERMINAL}
        LIMIT 1) AS unended_job
FROM documents d WHERE d.tenant_id = $1 AND d.document_id = $2 AND d.deleted_at IS NULL FOR UPDATE
"""
REBIND_DOCUMENT = """
UPDATE documents SET blob_id = $2, mime_type = $3, source_url = coalesce($4, source_url), state = 'QUEUED',
    error = NULL, refusal_reason = NULL, metadata = coalesce($5::jsonb, metadata), update_time = now()
WHERE document_id = $1
"""
# Its access list: the request's ($8), else its corpus's default (migration 0062).
INSERT_DOCUMENT = """
INSERT INTO documents (tenant_id, corpus_id, blob_id, filename, mime_type, source_url, metadata, principals)
VALUES ($1, $2, $3, $4, $5, $6, coalesce($7::jsonb, '{}'),
        coalesce($8::text[], (SELECT c.default_principals FROM corpora c WHERE c.corpus_id = $2), '{}'))
RETURNING document_id
"""
# An earlier ingest of these bytes failed or found no text: extracted again, with the new
# upload's metadata when it gives some ($2).
REQUEUE_DOCUMENT = """
UPDATE documents SET state = 'QUEUED', error = NULL, refusal_reason = NULL, metadata = coalesce($2::jsonb, metadata),
    update_time = now()
WHERE document_id = $1
"""
INSERT_JOB = f"""
INSERT INTO ingest_jobs (tenant_id, corpus_id, document_id, blob_id, filename, mime_type, re_extract,
                         state, stage, progress, result, duplicate)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
RETURNING {JOB_COLUMNS}
"""
INSERT_FETCH_JOB = f"""
INSERT INTO ingest_jobs (tenant_id, corpus_id, filename, mime_type, fetch_url, state, stage, progress)
VALUES ($1, $2, $3, '', $4, 'QUEUED', $5, 0)
RETURNING {JOB_COLUMNS}
"""
# The fetching worker's job, still its own: nothing is admitted for a job taken over or cancelled.
LOCK_FETCHING_JOB = f"""
SELECT job_id FROM ingest_jobs
WHERE job_id = $1 AND lease_owner = $2 AND state NOT IN {TERMINAL} AND NOT cancel_requested AND blob_id IS NULL
FOR UPDATE
"""
DOCUMENT_AT_URL = """
SELECT document_id FROM documents WHERE tenant_id = $1 AND corpus_id = $2 AND source_url = $3
    AND deleted_at IS NULL
ORDER BY document_id DESC LIMIT 1
"""
# The fetched page admitted: the job becomes what an upload's would have been created as, back
# in the queue at once (or ended, a duplicate), its lease released; the fetch's claim is no
# attempt of its own (the next claim counts the one attempt of the run).
ADMIT_FETCHED_JOB = f"""
UPDATE ingest_jobs SET document_id = $2, blob_id = $3, filename = $4, mime_type = $5, re_extract = $6, state = $7,
    stage = $8, progress = $9, result = $10, duplicate = $11, lease_owner = NULL, lease_expires_at = NULL,
    not_before = now(), attempts = greatest(attempts - 1, 0), update_time = now()
WHERE job_id = $1
RETURNING {JOB_COLUMNS}
"""
# A job is its document's: one whose document's access list does not admit the caller's
# principals ($4) is not found, and its result is not delivered (a job with no document yet, a
# page still to fetch, is its corpus's alone).
_JOB_READABLE = f"""(j.document_id IS NULL OR EXISTS (
    SELECT 1 FROM documents jd WHERE jd.document_id = j.document_id AND {readable_by("jd.principals", "$4")}))"""
GET_JOB = f"""
WITH delivered AS (
    UPDATE ingest_jobs j SET result_delivered = true
    WHERE j.job_id = $2 AND j.tenant_id = $1 AND $3 AND j.result IS NOT NULL AND NOT j.result_delivered
        AND {_JOB_READABLE}
    RETURNING j.job_id, j.result
)
SELECT {J_JOB_COLUMNS}, d.result AS delivered
FROM ingest_jobs j LEFT JOIN delivered d USING (job_id)
WHERE j.job_id = $2 AND j.tenant_id = $1 AND {_JOB_READABLE}
"""
LOCK_JOB = f"SELECT {JOB_COLUMNS} FROM ingest_jobs WHERE job_id = $2 AND tenant_id = $1 FOR UPDATE"
CANCEL_NOW = f"""
UPDATE ingest_jobs SET cancel_requested = true, state = $2, stage = $3, progress = $4, lease_owner = NULL,
    lease_expires_at = NULL, update_time = now()
WHERE job_id = $1
RETURNING {JOB_COLUMNS}
"""
CANCEL_ASK = f"""
UPDATE ingest_jobs SET cancel_requested = true, stage = $2, update_time = now()
WHERE job_id = $1
RETURNING {JOB_COLUMNS}
"""
REQUEUE_JOB = f"""
UPDATE ingest_jobs SET state = $2, stage = $3, progress = $4, error = NULL, attempts = 0, interruptions = 0,
    cancel_requested = false, not_before = now(), lease_owner = NULL, lease_expires_at = NULL,
    result = NULL, result_delivered = false, update_time = now(), re_extract = re_extract OR $5
WHERE job_id = $1
RETURNING {JOB_COLUMNS}
"""

# Whether a job's document is SEARCHABLE with no chunks: its file gave no text (retry reads it again).
GAVE_NO_TEXT = "SELECT state = 'SEARCHABLE' AND chunk_count = 0 FROM documents WHERE document_id = $1"
# Whether a later job of the job's document exists: a later version superseded it.
SUPERSEDED = """
SELECT EXISTS (SELECT 1 FROM ingest_jobs later WHERE later.document_id = $1 AND later.create_time > $2
               AND NOT later.duplicate)
"""


class PostgresJobs:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def enqueue(
        self,
        tenant: str,
        corpus_id: int,
        blob: StoredBlob,
        filename: str,
        mime_type: str,
        source_url: str | None,
        metadata: Metadata | None = None,
        principals: tuple[str, ...] | None = None,
    ) -> Job:
        given = json.dumps(metadata) if metadata else None
        async with self._db.transaction() as tx:
            await tx.execute("ensure_tenant", ENSURE_TENANT, tenant)
            await tx.execute("lock_blob", LOCK_BLOB, tenant, blob.blob_id)
            row = await tx.fetchrow("existing_document", EXISTING_DOCUMENT, tenant, blob.blob_id)
            new = admit(None if row is None else _existing(row))
            if new.creates_document:
                await admit_within_quota(tx, tenant, blob)
                document_id = await tx.fetchval(
                    "insert_document",
                    INSERT_DOCUMENT,
                    tenant,
                    corpus_id,
                    blob.blob_id,
                    filename,
                    mime_type,
                    source_url,
                    given,
                    None if principals is None else list(principals),
                )
            else:
                assert row is not None  # admit() creates a document exactly when there is none
                document_id = row["document_id"]
                if new.requeues_document:
                    await tx.execute("requeue_document", REQUEUE_DOCUMENT, document_id, given)
            return await _insert_job(tx, tenant, corpus_id, document_id, blob.blob_id, filename, mime_type, new)

    async def enqueue_into(
        self,
        tenant: str,
        document_id: int,
        corpus_id: int | None,
        blob: StoredBlob,
        mime_type: str,
        source_url: str | None,
        metadata: Metadata | None = None,
    ) -> Job | None:
        async with self._db.transaction() as tx:
            await tx.execute("lock_blob", LOCK_BLOB, tenant, blob.blob_id)
            row = await tx.fetchrow("lock_bound_document", LOCK_BOUND_DOCUMENT, tenant, document_id)
            if row is None:
                return None
            new = admit_into(_existing(row), blob.blob_id, corpus_id, row["unended_job"])
            if new.requeues_document:
                given = json.dumps(metadata) if metadata else None
                await tx.execute(
                    "rebind_document", REBIND_DOCUMENT, document_id, blob.blob_id, mime_type, source_url, given
                )
            return await _insert_job(
                tx, tenant, row["corpus_id"], document_id, blob.blob_id, row["filename"], mime_type, new
            )

    async def enqueue_fetch(self, tenant: str, corpus_id: int, url: str, filename: str) -> Job:
        """A job whose first stage fetches ``url`` (no bytes, no document yet)."""
        async with self._db.transaction() as tx:
            await tx.execute("ensure_tenant", ENSURE_TENANT, tenant)
            row = await tx.fetchrow("insert_fetch_job", INSERT_FETCH_JOB, tenant, corpus_id, filename, url, FETCH_STAGE)
            await tx.execute("notify_jobs", NOTIFY_JOBS)
        assert row is not None
        return job_from_row(row)

    async def admit_fetched(
        self, job: Job, owner: str, blob: StoredBlob, filename: str, mime_type: str, source_url: str
    ) -> Job | None:
        """The fetched page's bytes admitted for ``job`` as an upload's would be, except that when
        the corpus has a document fetched from the same URL the page becomes that document's
        content (unchanged and searchable: a duplicate; changed: re-extracted into it). None when
        the job is no longer this worker's or was cancelled (nothing admitted)."""
        tenant = job.tenant
        async with self._db.transaction() as tx:
            if await tx.fetchval("lock_fetching_job", LOCK_FETCHING_JOB, job.job_id, owner) is None:
                return None
            await tx.execute("lock_blob", LOCK_BLOB, tenant, blob.blob_id)
            earlier = await tx.fetchval("document_at_url", DOCUMENT_AT_URL, tenant, job.corpus_id, source_url)
            bound = None
            if earlier is not None:
                bound = await tx.fetchrow("lock_bound_document", LOCK_BOUND_DOCUMENT, tenant, earlier)
            if bound is not None:
                new = admit_into(_existing(bound), blob.blob_id, None, bound["unended_job"])
                document_id, filename = bound["document_id"], bound["filename"]
                if new.requeues_document:
                    await tx.execute(
                        "rebind_document", REBIND_DOCUMENT, document_id, blob.blob_id, mime_type, source_url, None
                    )
            else:
                row = await tx.fetchrow("existing_document", EXISTING_DOCUMENT, tenant, blob.blob_id)
                new = admit(None if row is None else _existing(row))
                if new.creates_document:
                    document_id = await tx.fetchval(
                        "insert_document",
                        INSERT_DOCUMENT,
                        tenant,
                        job.corpus_id,
                        blob.blob_id,
                        filename,
                        mime_type,
                        source_url,
                        None,
                        None,  # a fetched page's document gets its corpus's default list
                    )
                else:
                    assert row is not None
                    document_id = row["document_id"]
                    if new.requeues_document:
                        await tx.execute("requeue_document", REQUEUE_DOCUMENT, document_id, None)
            result = json.dumps(new.result.as_json()) if new.result is not None else None
            admitted = await tx.fetchrow(
                "admit_fetched_job",
                ADMIT_FETCHED_JOB,
                job.job_id,
                document_id,
                blob.blob_id,
                filename,
                mime_type,
                new.re_extract,
                new.state.value,
                new.stage,
                new.progress,
                result,
                new.duplicate,
            )
            await tx.execute("notify_jobs", NOTIFY_JOBS)
        assert admitted is not None
        return job_from_row(admitted)

    async def job(
        self, tenant: str, job_id: uuid.UUID, principals: Collection[str], *, deliver_result: bool
    ) -> Job | None:
        row = await self._db.fetchrow("get_job", GET_JOB, tenant, job_id, deliver_result, principals_arg(principals))
        return None if row is None else job_from_row(row, row["delivered"])

    async def cancel(self, tenant: str, job_id: uuid.UUID) -> Job | None:
        async with self._db.transaction() as tx:
            return await cancel_job(tx, tenant, job_id, cancel_request)

    async def retry(self, tenant: str, job_id: uuid.UUID) -> Job | None:
        async with self._db.transaction() as tx:
            job = await _locked(tx, tenant, job_id)
            gave_no_text = superseded = False
            if job is not None and job.document_id is not None:
                gave_no_text = bool(await tx.fetchval("gave_no_text", GAVE_NO_TEXT, job.document_id))
                superseded = bool(await tx.fetchval("superseded", SUPERSEDED, job.document_id, job.create_time))
            change = None if job is None else retry_request(job, gave_no_text=gave_no_text, superseded=superseded)
            if job is None or change is None:
                return job
            row = await tx.fetchrow(
                "requeue_job", REQUEUE_JOB, job_id, change.state.value, change.stage, change.progress, change.re_extract
            )
            assert row is not None  # the job is locked: the update finds it
            await tx.execute(
                "document_state",
                SET_DOCUMENT_STATE,
                row["document_id"],
                change.state.value,
                None,
                None,
                row["create_time"],
            )
            await tx.execute("notify_jobs", NOTIFY_JOBS)
        return job_from_row(row)


async def cancel_job(
    tx: Transaction, tenant: str, job_id: uuid.UUID, decide: Callable[[Job], CancelDecision | None]
) -> Job | None:
    """The tenant's job cancelled in ``tx`` as ``decide`` says (``cancel_request`` for a caller's
    cancel, ``superseded`` for a version a later one replaces): the job after it; None when the
    tenant has no such job. A finished job is returned unchanged."""
    job = await _locked(tx, tenant, job_id)
    decision = None if job is None else decide(job)
    if job is None or decision is None:
        return job
    change = decision.transition
    if decision.kind is CancelKind.NOW:
        row = await tx.fetchrow("cancel_now", CANCEL_NOW, job_id, change.state.value, change.stage, change.progress)
    else:
        row = await tx.fetchrow("cancel_ask", CANCEL_ASK, job_id, change.stage)
    assert row is not None  # the job is locked: the update finds it
    await follow(tx, tenant, row, change)
    return job_from_row(row)


async def admit_within_quota(tx: Transaction, tenant: str, blob: StoredBlob) -> None:
    """The exact check of a new document against the documents and bytes quotas, counted under
    the tenant's lock (the check before the upload was a cheap early one). A refusal rolls the
    admission back; the blob just written, referenced by nothing, goes by content-index's GC."""
    quotas = (await TenantSettingsReader(tx, True).settings(tenant)).quotas
    if quotas.max_documents is None and quotas.max_bytes is None:
        return
    await tx.execute("lock_tenant_quota", LOCK_TENANT_QUOTA, tenant)
    held = await holdings(tx, tenant, period_bounds(current_period())[0])
    refusal = upload_refusal(quotas, held, adding_bytes=blob.size_bytes)
    if refusal is not None:
        raise refusal


async def _locked(tx: Transaction, tenant: str, job_id: uuid.UUID) -> Job | None:
    row = await tx.fetchrow("lock_job", LOCK_JOB, tenant, job_id)
    return None if row is None else job_from_row(row)


def _existing(row: asyncpg.Record) -> ExistingDocument:
    return ExistingDocument(
        document_id=row["document_id"],
        corpus_id=row["corpus_id"],
        blob_id=row["blob_id"],
        state=State(row["state"]),
        chunk_count=row["chunk_count"],
        warnings=tuple(row["warnings"]),
    )


async def _insert_job(
    tx: Transaction,
    tenant: str,
    corpus_id: int,
    document_id: int,
    blob_id: int,
    filename: str,
    mime_type: str,
    new: NewJob,
) -> Job:
    result = json.dumps(new.result.as_json()) if new.result is not None else None
    row = await tx.fetchrow(
        "insert_job",
        INSERT_JOB,
        tenant,
        corpus_id,
        document_id,
        blob_id,
        filename,
        mime_type,
        new.re_extract,
        new.state.value,
        new.stage,
        new.progress,
        result,
        new.duplicate,
    )
    assert row is not None  # INSERT ... RETURNING returns its row
    await tx.execute("notify_jobs", NOTIFY_JOBS)
    return job_from_row(row)
