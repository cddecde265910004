"""Documents, ingest jobs and chunks in PostgreSQL (role knowledge_ingest).

Jobs are claimed with ``FOR UPDATE SKIP LOCKED`` under a lease; every write a worker makes
is conditioned on still holding it, so a job taken over after its worker died is never
written twice. Chunks, document state and job result change in ONE transaction.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence

import asyncpg
import numpy as np
from knowledge_runtime.chunking import TextChunk
from knowledge_runtime.db.pool import Database, Transaction

from knowledge_ingest.adapters.postgres import ENSURE_TENANT
from knowledge_ingest.domain.documents import Document, Job, JobResult, State
from knowledge_ingest.domain.errors import JobFinished
from knowledge_ingest.domain.model import Page
from knowledge_ingest.domain.ports import Lease, StoredBlob

_TERMINAL = "('SEARCHABLE', 'FAILED', 'CANCELLED')"
_JOB_COLUMNS = """job_id, tenant_id, corpus_id, document_id, blob_id, filename, mime_type, state, stage, progress,
    error, attempts, cancel_requested, re_extract, duplicate, create_time, update_time"""
_J_JOB_COLUMNS = ", ".join("j." + c.strip() for c in _JOB_COLUMNS.split(","))  # where the table is aliased j

CORPUS_ACCEPTS = "SELECT 1 FROM corpora WHERE corpus_id = $2 AND (tenant_id = $1 OR is_system)"
LOCK_BLOB = "SELECT pg_advisory_xact_lock(hashtextextended($1 || ':' || ($2::bigint)::text, 0))"
EXISTING_DOCUMENT = """
SELECT document_id, state, chunk_count, warnings FROM documents
WHERE tenant_id = $1 AND blob_id = $2 ORDER BY document_id LIMIT 1 FOR UPDATE
"""
INSERT_DOCUMENT = """
INSERT INTO documents (tenant_id, corpus_id, blob_id, filename, mime_type, source_url)
VALUES ($1, $2, $3, $4, $5, $6) RETURNING document_id
"""
REQUEUE_DOCUMENT = "UPDATE documents SET state = 'QUEUED', error = NULL, update_time = now() WHERE document_id = $1"
INSERT_JOB = f"""
INSERT INTO ingest_jobs (tenant_id, corpus_id, document_id, blob_id, filename, mime_type, re_extract,
                         state, stage, progress, result, duplicate)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12)
RETURNING {_JOB_COLUMNS}
"""
GET_JOB = f"""
WITH delivered AS (
    UPDATE ingest_jobs SET result_delivered = true
    WHERE job_id = $2 AND tenant_id = $1 AND $3 AND result IS NOT NULL AND NOT result_delivered
    RETURNING job_id, result
)
SELECT {_J_JOB_COLUMNS}, d.result AS delivered
FROM ingest_jobs j LEFT JOIN delivered d USING (job_id)
WHERE j.job_id = $2 AND j.tenant_id = $1
"""
CANCEL_JOB = f"""
UPDATE ingest_jobs SET cancel_requested = true,
    state = CASE WHEN state = 'QUEUED' THEN 'CANCELLED' ELSE state END,
    stage = CASE WHEN state = 'QUEUED' THEN 'cancelled' ELSE 'cancelling' END,
    progress = CASE WHEN state = 'QUEUED' THEN 1 ELSE progress END,
    update_time = now()
WHERE job_id = $2 AND tenant_id = $1 AND state NOT IN {_TERMINAL}
RETURNING {_JOB_COLUMNS}
"""
RETRY_JOB = f"""
UPDATE ingest_jobs SET state = 'QUEUED', stage = 'queued', progress = 0, error = NULL, attempts = 0,
    cancel_requested = false, not_before = now(), lease_owner = NULL, lease_expires_at = NULL,
    result = NULL, result_delivered = false, update_time = now(), re_extract = re_extract OR state = 'SEARCHABLE'
WHERE job_id = $2 AND tenant_id = $1
  AND (state IN ('FAILED', 'CANCELLED')
       -- a file that gave no text (a scan read before OCR) is read again from its kept blob
       OR (state = 'SEARCHABLE' AND NOT duplicate AND EXISTS (
           SELECT 1 FROM documents d WHERE d.document_id = ingest_jobs.document_id
             AND d.state = 'SEARCHABLE' AND d.chunk_count = 0)))
  AND document_id IS NOT NULL AND blob_id IS NOT NULL
RETURNING {_JOB_COLUMNS}
"""
CLAIM_JOB = f"""
WITH next AS (
    SELECT job_id FROM ingest_jobs
    WHERE state NOT IN {_TERMINAL} AND NOT cancel_requested AND not_before <= now()
      AND (lease_expires_at IS NULL OR lease_expires_at < now())
      AND document_id IS NOT NULL AND blob_id IS NOT NULL
    ORDER BY not_before, create_time
    FOR UPDATE SKIP LOCKED
    LIMIT 1
)
UPDATE ingest_jobs j SET lease_owner = $1, lease_expires_at = now() + make_interval(secs => $2),
    attempts = j.attempts + 1, update_time = now()
FROM next WHERE j.job_id = next.job_id
RETURNING {_J_JOB_COLUMNS}
"""
REPORT = f"""
UPDATE ingest_jobs SET state = $3, progress = $4, stage = $5,
    lease_expires_at = now() + make_interval(secs => $6), update_time = now()
WHERE job_id = $1 AND lease_owner = $2 AND NOT cancel_requested AND state NOT IN {_TERMINAL}
RETURNING document_id
"""
RENEW = f"""
UPDATE ingest_jobs SET lease_expires_at = now() + make_interval(secs => $3)
WHERE job_id = $1 AND lease_owner = $2 AND NOT cancel_requested AND state NOT IN {_TERMINAL}
RETURNING 1
"""
SET_DOCUMENT_STATE = "UPDATE documents SET state = $2, error = $3, update_time = now() WHERE document_id = $1"
OWN_FOR_STORE = f"""
UPDATE ingest_jobs SET state = 'SEARCHABLE', stage = 'searchable', progress = 1, result = $3,
    result_delivered = false, error = NULL, lease_owner = NULL, lease_expires_at = NULL, update_time = now()
WHERE job_id = $1 AND lease_owner = $2 AND NOT cancel_requested AND state NOT IN {_TERMINAL}
RETURNING tenant_id, document_id
"""
LOCK_DOCUMENT = "SELECT corpus_id FROM documents WHERE document_id = $1 FOR UPDATE"
DELETE_CHUNKS = "DELETE FROM chunks WHERE document_id = $1"
INSERT_CHUNK = """
INSERT INTO chunks (tenant_id, corpus_id, document_id, chunk_index, section, page, content, embedding,
                    lexemes, length, metadata)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8,
        setweight(to_tsvector('english', $5), 'A') || setweight(to_tsvector('english', $7), 'D'),
        coalesce(array_length(regexp_split_to_array(btrim($7), '\\s+'), 1), 0), $9)
"""
DOCUMENT_SEARCHABLE = """
UPDATE documents SET state = 'SEARCHABLE', chunk_count = $2, extractable = $3, warnings = $4, error = NULL,
    update_time = now()
WHERE document_id = $1
"""
COMPLETE_DUPLICATE = f"""
UPDATE ingest_jobs SET state = 'SEARCHABLE', stage = 'searchable (duplicate)', progress = 1, result = $3,
    result_delivered = false, lease_owner = NULL, lease_expires_at = NULL, update_time = now()
WHERE job_id = $1 AND lease_owner = $2 AND NOT cancel_requested AND state NOT IN {_TERMINAL}
RETURNING 1
"""
FINISH = f"""
UPDATE ingest_jobs SET state = $3, stage = lower($3), progress = 1, error = $4,
    lease_owner = NULL, lease_expires_at = NULL, update_time = now()
WHERE job_id = $1 AND lease_owner = $2 AND state NOT IN {_TERMINAL}
RETURNING document_id
"""
POSTPONE = f"""
UPDATE ingest_jobs SET state = 'QUEUED', stage = $3, progress = 0, lease_owner = NULL, lease_expires_at = NULL,
    not_before = now() + make_interval(secs => $4), update_time = now()
WHERE job_id = $1 AND lease_owner = $2 AND state NOT IN {_TERMINAL}
RETURNING document_id
"""
# A duplicate waiting for the ingest of the same bytes: the job only, never the document (whose
# state is the running ingest's), and the wait gives its attempt back (waiting is not trying).
WAIT_FOR_ORIGINAL = f"""
UPDATE ingest_jobs SET state = 'QUEUED', stage = $3, progress = 0, lease_owner = NULL, lease_expires_at = NULL,
    not_before = now() + make_interval(secs => $4), attempts = greatest(attempts - 1, 0), update_time = now()
WHERE job_id = $1 AND lease_owner = $2 AND state NOT IN {_TERMINAL}
RETURNING 1
"""
# Cancel asked of a running job whose worker then died: nobody will claim it (claims skip
# cancel_requested), so once its lease has expired it is ended here, with its document.
REAP_CANCELLED = f"""
WITH reaped AS (
    UPDATE ingest_jobs SET state = 'CANCELLED', stage = 'cancelled', progress = 1, lease_owner = NULL,
        lease_expires_at = NULL, update_time = now()
    WHERE cancel_requested AND state NOT IN {_TERMINAL}
      AND (lease_expires_at IS NULL OR lease_expires_at < now())
    RETURNING document_id
), documents_reaped AS (
    UPDATE documents SET state = 'CANCELLED', error = NULL, update_time = now()
    WHERE document_id IN (SELECT document_id FROM reaped WHERE document_id IS NOT NULL)
)
SELECT count(*) FROM reaped
"""
_DOCUMENT_SELECT = """
SELECT d.document_id, d.corpus_id, d.filename, d.state, d.error, d.chunk_count, coalesce(b.size_bytes, 0) AS size_bytes,
       d.mime_type, d.extractable, d.source_url, d.create_time, d.update_time, d.warnings,
       (SELECT j.job_id FROM ingest_jobs j WHERE j.document_id = d.document_id
        ORDER BY j.create_time DESC LIMIT 1) AS job_id
FROM documents d LEFT JOIN content_blobs b ON b.blob_id = d.blob_id
"""
GET_DOCUMENT = _DOCUMENT_SELECT + "WHERE d.tenant_id = $1 AND d.document_id = $2"
LIST_DOCUMENTS = _DOCUMENT_SELECT + """
WHERE d.tenant_id = $1 AND d.corpus_id = $2 AND d.document_id > $3 ORDER BY d.document_id LIMIT $4
"""
DOCUMENT_CHUNKS = """
SELECT content, section, page, chunk_index, coalesce((metadata->>'overlap_chars')::int, 0) AS overlap_chars
FROM chunks WHERE tenant_id = $1 AND document_id = $2 ORDER BY chunk_index
"""
MOVABLE = """
SELECT document_id FROM documents WHERE tenant_id = $1 AND ($2::bigint IS NULL OR corpus_id = $2)
ORDER BY document_id LIMIT 1000
"""
LOCK_OWNED = """
SELECT document_id, corpus_id FROM documents WHERE tenant_id = $1 AND document_id = ANY($2::bigint[])
ORDER BY document_id FOR UPDATE
"""
LOCK_CORPUS_DOCUMENTS = """
SELECT document_id FROM documents WHERE tenant_id = $1 AND corpus_id = $2 ORDER BY document_id FOR UPDATE
"""
MOVE_DOCUMENTS = "UPDATE documents SET corpus_id = $2, update_time = now() WHERE document_id = ANY($1::bigint[])"
MOVE_CHUNKS = "UPDATE chunks SET corpus_id = $2 WHERE document_id = ANY($1::bigint[])"
MOVE_JOBS = "UPDATE ingest_jobs SET corpus_id = $2 WHERE document_id = ANY($1::bigint[])"
LOCK_FOR_DELETE = "SELECT document_id FROM documents WHERE tenant_id = $1 AND document_id = $2 FOR UPDATE"
CANCEL_FOR_DELETE = f"""
UPDATE ingest_jobs SET cancel_requested = true, state = 'CANCELLED', stage = 'cancelled (document deleted)',
    progress = 1, lease_owner = NULL, lease_expires_at = NULL, update_time = now()
WHERE document_id = $1 AND state NOT IN {_TERMINAL}
RETURNING job_id
"""
RELEASE_BLOB = "UPDATE ingest_jobs SET blob_id = NULL WHERE document_id = $1"
DELETE_DOCUMENT = "DELETE FROM documents WHERE document_id = $1"
BACKLOG = f"SELECT count(*) FROM ingest_jobs WHERE state NOT IN {_TERMINAL} AND NOT cancel_requested"
CORPUS_SUMMARY = """
SELECT c.corpus_id, c.name, count(d.document_id) AS documents
FROM corpora c LEFT JOIN documents d ON d.corpus_id = c.corpus_id AND d.tenant_id = $1
WHERE c.tenant_id = $1 AND NOT c.is_system
GROUP BY c.corpus_id ORDER BY c.corpus_id
"""


def _job(row: asyncpg.Record, result: str | None = None) -> Job:
    return Job(
        job_id=row["job_id"], tenant=row["tenant_id"], corpus_id=row["corpus_id"], document_id=row["document_id"],
        blob_id=row["blob_id"], filename=row["filename"], mime_type=row["mime_type"], state=State(row["state"]),
        stage=row["stage"], progress=row["progress"], error=row["error"], attempts=row["attempts"],
        cancel_requested=row["cancel_requested"], re_extract=row["re_extract"], create_time=row["create_time"],
        update_time=row["update_time"], result=JobResult.from_json(json.loads(result)) if result else None,
        duplicate=row["duplicate"],
    )


def _document(row: asyncpg.Record) -> Document:
    return Document(
        document_id=row["document_id"], corpus_id=row["corpus_id"], filename=row["filename"],
        state=State(row["state"]), error=row["error"], chunk_count=row["chunk_count"], size_bytes=row["size_bytes"],
        mime_type=row["mime_type"], extractable=row["extractable"], source_url=row["source_url"],
        job_id=row["job_id"], create_time=row["create_time"], update_time=row["update_time"],
        warnings=tuple(row["warnings"]),
    )


class PostgresIngestStore:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def corpus_accepts_uploads(self, tenant: str, corpus_id: int) -> bool:
        return await self._db.fetchval("corpus_accepts", CORPUS_ACCEPTS, tenant, corpus_id) is not None

    async def enqueue(self, tenant: str, corpus_id: int, blob: StoredBlob, filename: str, mime_type: str,
                      source_url: str | None) -> Job:
        async with self._db.transaction() as tx:
            await tx.execute("ensure_tenant", ENSURE_TENANT, tenant)
            await tx.execute("lock_blob", LOCK_BLOB, tenant, blob.blob_id)
            existing = await tx.fetchrow("existing_document", EXISTING_DOCUMENT, tenant, blob.blob_id)
            # (re_extract, state, stage, progress, result, duplicate) of the new job
            if existing is None:
                document_id = await tx.fetchval("insert_document", INSERT_DOCUMENT, tenant, corpus_id,
                                                blob.blob_id, filename, mime_type, source_url)
                fields = (False, "QUEUED", "queued", 0.0, None, False)
            else:
                document_id, state = existing["document_id"], State(existing["state"])
                if state is State.SEARCHABLE and existing["chunk_count"] > 0:
                    result = JobResult(document_id, existing["chunk_count"], duplicate=True,
                                       warnings=tuple(existing["warnings"]))
                    fields = (False, "SEARCHABLE", "searchable (duplicate)", 1.0, json.dumps(result.as_json()), True)
                elif not state.terminal:  # being ingested now: wait for its outcome
                    fields = (False, "QUEUED", "queued (same file being ingested)", 0.0, None, True)
                else:  # an earlier ingest of these bytes failed or found no text: extract again into that document
                    await tx.execute("requeue_document", REQUEUE_DOCUMENT, document_id)
                    fields = (True, "QUEUED", "queued", 0.0, None, False)
            row = await tx.fetchrow("insert_job", INSERT_JOB, tenant, corpus_id, document_id, blob.blob_id, filename,
                                    mime_type, *fields)
        return _job(row)

    async def job(self, tenant: str, job_id: uuid.UUID, *, deliver_result: bool) -> Job | None:
        row = await self._db.fetchrow("get_job", GET_JOB, tenant, job_id, deliver_result)
        return None if row is None else _job(row, row["delivered"])

    async def cancel(self, tenant: str, job_id: uuid.UUID) -> Job | None:
        async with self._db.transaction() as tx:
            row = await tx.fetchrow("cancel_job", CANCEL_JOB, tenant, job_id)
            if row is not None and row["state"] == "CANCELLED" and row["document_id"] is not None:
                await tx.execute("document_state", SET_DOCUMENT_STATE, row["document_id"], "CANCELLED", None)
        return _job(row) if row is not None else await self.job(tenant, job_id, deliver_result=False)

    async def retry(self, tenant: str, job_id: uuid.UUID) -> Job | None:
        async with self._db.transaction() as tx:
            row = await tx.fetchrow("retry_job", RETRY_JOB, tenant, job_id)
            if row is not None:
                await tx.execute("document_state", SET_DOCUMENT_STATE, row["document_id"], "QUEUED", None)
                return _job(row)
        job = await self.job(tenant, job_id, deliver_result=False)
        if job is not None and job.state in (State.FAILED, State.CANCELLED):
            raise JobFinished(f"{job.state.value} and its document was deleted; upload the file again")
        return job

    async def claim(self, owner: str, lease_s: float) -> Lease | None:
        row = await self._db.fetchrow("claim_job", CLAIM_JOB, owner, float(lease_s))
        return None if row is None else Lease(_job(row), owner)

    async def report(self, lease: Lease, state: State, progress: float, stage: str, lease_s: float) -> bool:
        async with self._db.transaction() as tx:
            document_id = await tx.fetchval("report_job", REPORT, lease.job.job_id, lease.owner, state.value,
                                            progress, stage, float(lease_s))
            if document_id is None:
                return False
            await tx.execute("document_state", SET_DOCUMENT_STATE, document_id, state.value, None)
        return True

    async def renew(self, lease: Lease, lease_s: float) -> bool:
        return await self._db.fetchval("renew_lease", RENEW, lease.job.job_id, lease.owner, float(lease_s)) is not None

    async def store(self, lease: Lease, chunks: Sequence[TextChunk], vectors: Sequence[Sequence[float]],
                    result: JobResult) -> bool:
        async with self._db.transaction() as tx:
            owned = await tx.fetchrow("own_for_store", OWN_FOR_STORE, lease.job.job_id, lease.owner,
                                      json.dumps(result.as_json()))
            if owned is None:
                return False
            corpus_id = await tx.fetchval("lock_document", LOCK_DOCUMENT, owned["document_id"])
            await tx.execute("delete_chunks", DELETE_CHUNKS, owned["document_id"])
            await _insert_chunks(tx, owned["tenant_id"], corpus_id, owned["document_id"], lease.job.filename,
                                 chunks, vectors)
            await tx.execute("document_searchable", DOCUMENT_SEARCHABLE, owned["document_id"], len(chunks),
                             result.extractable, list(result.warnings))
        return True

    async def complete_duplicate(self, lease: Lease, result: JobResult) -> bool:
        return await self._db.fetchval("complete_duplicate", COMPLETE_DUPLICATE, lease.job.job_id, lease.owner,
                                       json.dumps(result.as_json())) is not None

    async def finish(self, lease: Lease, state: State, error: str | None) -> None:
        async with self._db.transaction() as tx:
            document_id = await tx.fetchval("finish_job", FINISH, lease.job.job_id, lease.owner, state.value, error)
            if document_id is not None:
                await tx.execute("document_state", SET_DOCUMENT_STATE, document_id, state.value, error)

    async def postpone(self, lease: Lease, delay_s: float, stage: str) -> None:
        async with self._db.transaction() as tx:
            document_id = await tx.fetchval("postpone_job", POSTPONE, lease.job.job_id, lease.owner, stage,
                                            float(delay_s))
            if document_id is not None:
                await tx.execute("document_state", SET_DOCUMENT_STATE, document_id, "QUEUED", None)

    async def wait_for_original(self, lease: Lease, delay_s: float, stage: str) -> None:
        await self._db.fetchval("wait_for_original", WAIT_FOR_ORIGINAL, lease.job.job_id, lease.owner, stage,
                                float(delay_s))

    async def reap_cancelled(self) -> int:
        return await self._db.fetchval("reap_cancelled", REAP_CANCELLED)

    async def document(self, tenant: str, document_id: int) -> Document | None:
        row = await self._db.fetchrow("get_document", GET_DOCUMENT, tenant, document_id)
        return None if row is None else _document(row)

    async def list_documents(self, tenant: str, corpus_id: int, page: Page) -> list[Document]:
        rows = await self._db.fetch("list_documents", LIST_DOCUMENTS, tenant, corpus_id, page.after_id, page.size)
        return [_document(row) for row in rows]

    async def document_chunks(self, tenant: str, document_id: int) -> list[TextChunk]:
        rows = await self._db.fetch("document_chunks", DOCUMENT_CHUNKS, tenant, document_id)
        return [TextChunk(r["content"], r["section"], r["page"], r["chunk_index"], r["overlap_chars"]) for r in rows]

    async def movable_documents(self, tenant: str, source_corpus_id: int | None) -> list[int]:
        return [r["document_id"] for r in await self._db.fetch("movable", MOVABLE, tenant, source_corpus_id)]

    async def move(self, tenant: str, target_corpus_id: int, document_ids: Sequence[int],
                   source_corpus_id: int | None) -> tuple[list[int], list[int], list[int]]:
        wanted = sorted(set(document_ids))
        async with self._db.transaction() as tx:
            owned = {r["document_id"]: r["corpus_id"] for r in await tx.fetch("lock_owned", LOCK_OWNED, tenant, wanted)}
            missing = [d for d in wanted if d not in owned]
            elsewhere = [d for d in wanted if d in owned and source_corpus_id not in (None, owned[d])]
            if missing or elsewhere:
                return [], missing, elsewhere
            await _move(tx, wanted, target_corpus_id)
        return wanted, [], []

    async def move_all(self, tenant: str, source_corpus_id: int, target_corpus_id: int,
                       listed: int) -> tuple[int, list[int]]:
        async with self._db.transaction() as tx:
            ids = [r["document_id"] for r in await tx.fetch("lock_corpus_documents", LOCK_CORPUS_DOCUMENTS, tenant,
                                                            source_corpus_id)]
            if ids:
                await _move(tx, ids, target_corpus_id)
        return len(ids), ids[:listed]

    async def delete_document(self, tenant: str, document_id: int) -> tuple[int, uuid.UUID | None] | None:
        async with self._db.transaction() as tx:
            if await tx.fetchval("lock_for_delete", LOCK_FOR_DELETE, tenant, document_id) is None:
                return None
            cancelled = await tx.fetchval("cancel_for_delete", CANCEL_FOR_DELETE, document_id)
            await tx.execute("release_blob", RELEASE_BLOB, document_id)
            deleted = await tx.execute("delete_chunks", DELETE_CHUNKS, document_id)
            await tx.execute("delete_document", DELETE_DOCUMENT, document_id)
        return int(deleted.split()[-1]), cancelled

    async def backlog(self) -> int:
        return await self._db.fetchval("jobs_backlog", BACKLOG)

    async def corpus_summary(self, tenant: str) -> list[tuple[int, str, int]]:
        rows = await self._db.fetch("corpus_summary", CORPUS_SUMMARY, tenant)
        return [(r["corpus_id"], r["name"], r["documents"]) for r in rows]


async def _move(tx: Transaction, document_ids: list[int], target_corpus_id: int) -> None:
    """Documents, their chunks and their jobs change corpus together (rows already locked)."""
    for name, sql in (("move_documents", MOVE_DOCUMENTS), ("move_chunks", MOVE_CHUNKS), ("move_jobs", MOVE_JOBS)):
        await tx.execute(name, sql, document_ids, target_corpus_id)


async def _insert_chunks(tx: Transaction, tenant: str, corpus_id: int, document_id: int, source: str,
                         chunks: Sequence[TextChunk], vectors: Sequence[Sequence[float]]) -> None:
    if len(chunks) != len(vectors):
        raise ValueError("one vector per chunk")
    rows = [
        (tenant, corpus_id, document_id, chunk.chunk_index, chunk.section, chunk.page, chunk.content,
         np.asarray(vector, dtype=np.float32),
         json.dumps({"source": source, "section": chunk.section, "page": chunk.page,
                     "chunk_index": chunk.chunk_index, "document_id": str(document_id),
                     "overlap_chars": chunk.overlap_chars}))
        for chunk, vector in zip(chunks, vectors)
    ]
    if rows:
        await tx.executemany("insert_chunks", INSERT_CHUNK, rows)
