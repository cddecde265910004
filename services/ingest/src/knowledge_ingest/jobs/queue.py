"""The workers' job queue in PostgreSQL (role knowledge_ingest).

Jobs are claimed with ``FOR UPDATE SKIP LOCKED`` under a lease; every write a worker makes is a
``domain.jobs.Transition`` conditioned on still holding it, so a job taken over after its worker
died is never written twice. Chunks, document state, job result and the event change in ONE transaction.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields

import numpy as np
from knowledge_runtime.chunking import TextChunk
from knowledge_runtime.db.pool import Database, Transaction
from pgvector import Vector

from knowledge_ingest.documents.chunk_metadata import chunk_metadata
from knowledge_ingest.domain.events import NewEvent, document_ended, ends_with_event, searchable
from knowledge_ingest.domain.jobs import DocumentEffect, Transition, cancelled
from knowledge_ingest.domain.metadata import MAX_KEYS, MAX_TOTAL_BYTES
from knowledge_ingest.domain.passages import Passage, StoredVersion
from knowledge_ingest.domain.ports import Lease
from knowledge_ingest.events.outbox import publish
from knowledge_ingest.jobs.rows import J_JOB_COLUMNS, TERMINAL, follows, job_from_row, result_json

CLAIM_JOB = f"""
WITH next AS (
    SELECT job_id FROM ingest_jobs
    WHERE state NOT IN {TERMINAL} AND NOT cancel_requested AND not_before <= now()
      AND (lease_expires_at IS NULL OR lease_expires_at < now())
      AND ((document_id IS NOT NULL AND blob_id IS NOT NULL) OR (fetch_url IS NOT NULL AND blob_id IS NULL))
    ORDER BY not_before, create_time
    FOR UPDATE SKIP LOCKED
    LIMIT 1
)
UPDATE ingest_jobs j SET lease_owner = $1, lease_expires_at = now() + make_interval(secs => $2),
    -- a lease still set has expired: its worker stopped; taking over is an interruption, not an attempt
    attempts = j.attempts + (j.lease_owner IS NULL)::int,
    interruptions = j.interruptions + (j.lease_owner IS NOT NULL)::int, update_time = now()
FROM next WHERE j.job_id = next.job_id
RETURNING {J_JOB_COLUMNS}
"""
# A transition: written only by the lease's holder, on an unended job, and (when it says so) not
# once cancel was asked; it keeps and renews the lease unless it ends the job or re-queues it.
JOB_TRANSITION = f"""
    UPDATE ingest_jobs SET state = $3, stage = $4, progress = $5, error = $6,
        result = coalesce($7::jsonb, result), result_delivered = result_delivered AND $7::jsonb IS NULL,
        lease_owner = CASE WHEN $8 THEN NULL ELSE lease_owner END,
        lease_expires_at = CASE WHEN $8 THEN NULL ELSE now() + make_interval(secs => $9) END,
        not_before = CASE WHEN $10::float8 IS NULL THEN not_before
                          ELSE now() + make_interval(secs => $10::float8) END,
        attempts = CASE WHEN $11 THEN greatest(attempts - 1, 0) ELSE attempts END,
        interruptions = interruptions + $13::int, update_time = now()
    WHERE job_id = $1 AND lease_owner = $2 AND state NOT IN {TERMINAL} AND NOT ($12 AND cancel_requested)
    RETURNING tenant_id, document_id, create_time
"""
# With $14 the document follows (the job's state, error and, $15, the refusal that failed it) in the
# same statement, where ``follows`` allows: one round trip. The document's corpus comes back when it
# followed, for the event of a document ended FAILED or CANCELLED (``apply`` then writes it in the
# statement's transaction).
APPLY = f"""
WITH job AS ({JOB_TRANSITION}), followed AS (
    UPDATE documents d SET state = $3, error = $6, refusal_reason = $15, update_time = now()
    FROM job WHERE $14 AND d.document_id = job.document_id AND {follows("d", "job.create_time")}
    RETURNING d.document_id, d.corpus_id
)
SELECT job.tenant_id, job.document_id, followed.corpus_id
FROM job LEFT JOIN followed ON followed.document_id = job.document_id
"""
# The storing transaction's first statement: the job's transition (as APPLY, lease-conditioned,
# and never once cancel was asked: a superseded version does not land), the document SEARCHABLE
# with its chunk count (its row locked by the update, so a concurrent move is seen) and its old
# chunks deleted; the new chunks follow in one batched insert. $14.. are the document's chunk
# count, extractable, warnings, extractor, pages read by OCR and their confidence; $20.. a passages
# version's title, metadata, hash and blob (NULL: the document keeps its own), which change with
# its passages; $24 what the file says of itself (Extracted.metadata, NULL: nothing), added under
# the caller's keys as ``with_extracted`` decides.
_KEPT_METADATA = "coalesce($21::jsonb, d.metadata)"
_WITH_EXTRACTED = f"(coalesce($24::jsonb, '{{}}'::jsonb) || {_KEPT_METADATA})"
# jsonb's text has a space after each ':' and ',': longer than the compact JSON the limit counts,
# so what passes here passes there.
_METADATA = (
    f"CASE WHEN (SELECT count(*) FROM jsonb_object_keys({_WITH_EXTRACTED})) <= {MAX_KEYS}"
    f" AND octet_length({_WITH_EXTRACTED}::text) <= {MAX_TOTAL_BYTES} THEN {_WITH_EXTRACTED} ELSE {_KEPT_METADATA} END"
)
STORE = f"""
WITH job AS ({JOB_TRANSITION}), document AS (
    UPDATE documents d SET state = 'SEARCHABLE', chunk_count = $14, extractable = $15, warnings = $16,
        extractor = $17, ocr_page_count = $18, ocr_confidence = $19, error = NULL, refusal_reason = NULL,
        update_time = now(), filename = coalesce($20, d.filename), metadata = {_METADATA},
        source_sha256 = coalesce($22, d.source_sha256), blob_id = coalesce($23, d.blob_id)
    FROM job WHERE d.document_id = job.document_id
    RETURNING d.document_id, d.corpus_id
), replaced AS (
    DELETE FROM chunks c USING document WHERE c.document_id = document.document_id
)
SELECT job.tenant_id, job.document_id, document.corpus_id
FROM job LEFT JOIN document ON document.document_id = job.document_id
"""
RENEW = f"""
UPDATE ingest_jobs SET lease_expires_at = now() + make_interval(secs => $3)
WHERE job_id = $1 AND lease_owner = $2 AND NOT cancel_requested AND state NOT IN {TERMINAL}
RETURNING 1
"""
CANCEL_REQUESTED = f"""
SELECT cancel_requested FROM ingest_jobs WHERE job_id = $1 AND lease_owner = $2 AND state NOT IN {TERMINAL}
"""
# Lexemes are the database's rule (the chunks_fill_lexemes trigger of migration 0013). One statement
# for all of a document's chunks: the BM25 statistics triggers (migration 0005) are per statement,
# so they aggregate the whole document once instead of once per chunk. The metadata is merged here
# from the document's row as this transaction sees it (``chunk_metadata``): after the storing
# statement locked and updated that row, so a concurrent UpdateDocument is either before it or waits.
INSERT_CHUNKS = f"""
INSERT INTO chunks (tenant_id, corpus_id, document_id, chunk_index, section, page, content, embedding, fragment,
                    passage_metadata, metadata)
SELECT $1, $2, $3, u.chunk_index, u.section, u.page, u.content, u.embedding, u.fragment, u.passage_metadata,
       {chunk_metadata(c="u", filename="d.filename", document="d.metadata", overlap="u.overlap_chars")}
FROM (
    SELECT $3::bigint AS document_id, x.chunk_index, x.section, x.page, x.content, x.embedding, x.fragment,
           x.passage::jsonb AS passage_metadata, x.overlap_chars
    FROM unnest($4::integer[], $5::text[], $6::integer[], $7::text[], $8::vector[], $9::text[], $10::text[],
                $11::integer[]) AS x(chunk_index, section, page, content, embedding, fragment, passage, overlap_chars)
) AS u
CROSS JOIN (SELECT filename, metadata FROM documents WHERE document_id = $3) AS d
RETURNING chunk_id, chunk_index
"""
INSERT_NEXT_VECTORS = """
INSERT INTO chunk_vectors_next (chunk_id, embedding)
SELECT x.chunk_id, x.embedding FROM unnest($1::bigint[], $2::vector[]) AS x(chunk_id, embedding)
ON CONFLICT (chunk_id) DO NOTHING
"""
SHARE_STORES = "SELECT chunks_model, next_model FROM embedding_stores FOR SHARE"
# Cancel asked of a running job whose worker then died: nobody will claim it (claims skip
# cancel_requested), so once its lease has expired it is ended here, with its document.
REAP_CANCELLED = f"""
WITH reaped AS (
    UPDATE ingest_jobs SET state = $1, stage = $2, progress = $3, lease_owner = NULL,
        lease_expires_at = NULL, update_time = now()
    WHERE cancel_requested AND state NOT IN {TERMINAL}
      AND (lease_expires_at IS NULL OR lease_expires_at < now())
    RETURNING job_id, document_id, create_time
), documents_reaped AS (
    UPDATE documents d SET state = $1, error = NULL, refusal_reason = NULL, update_time = now()
    FROM reaped r WHERE d.document_id = r.document_id AND {follows("d", "r.create_time")}
    RETURNING d.tenant_id, d.document_id, d.corpus_id
)
SELECT r.job_id, d.tenant_id, d.document_id, d.corpus_id
FROM reaped r LEFT JOIN documents_reaped d USING (document_id)
"""
BACKLOG = f"SELECT count(*) FROM ingest_jobs WHERE state NOT IN {TERMINAL} AND NOT cancel_requested"


class PostgresJobQueue:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def claim(self, owner: str, lease_s: float) -> Lease | None:
        row = await self._db.fetchrow("claim_job", CLAIM_JOB, owner, float(lease_s))
        return None if row is None else Lease(job_from_row(row), owner)

    async def apply(self, lease: Lease, transition: Transition, lease_s: float) -> bool:
        refusal = transition.refusal.value if transition.refusal is not None else None
        follows = transition.document is DocumentEffect.FOLLOW
        args = (*JobTransitionArgs.of(lease, transition, lease_s).values(), follows, refusal)  # $14, $15
        if transition.document is not DocumentEffect.FOLLOW or not ends_with_event(transition.state):
            # Progress, re-queues and the like: no event, one round trip.
            return await self._db.fetchrow("apply_transition", APPLY, *args) is not None
        async with self._db.transaction() as tx:
            row = await tx.fetchrow("apply_transition", APPLY, *args)
            if row is None:
                return False
            if row["corpus_id"] is not None:
                ended = document_ended(transition.state, row["document_id"], row["corpus_id"], transition.error)
                await publish(tx, row["tenant_id"], [ended])
        return True

    async def store(
        self,
        lease: Lease,
        chunks: Sequence[TextChunk],
        vectors: Sequence[Sequence[float]] | Sequence[None],
        transition: Transition,
        version: StoredVersion | None = None,
        extracted: Mapping[str, str] | None = None,
        next_vectors: Sequence[Sequence[float]] | None = None,
    ) -> bool:
        """``vectors``: the chunks' own column's (None each when that store is not written);
        ``next_vectors``: the next store's, while a model change writes it."""
        assert transition.document is DocumentEffect.SEARCHABLE and transition.result is not None
        async with self._db.transaction() as tx:
            # Shared with every other storing job, exclusive with a model change's transitions:
            # the stores written here are the ones live at the commit.
            stores = await tx.fetchrow("share_embedding_stores", SHARE_STORES)
            row = await tx.fetchrow(
                "store_job",
                STORE,
                *JobTransitionArgs.of(lease, transition, 0.0).values(),
                len(chunks),
                transition.result.extractable,
                list(transition.result.warnings),
                transition.result.extractor,
                transition.result.ocr_page_count,
                transition.result.ocr_confidence,
                None if version is None else lease.job.filename,
                None if version is None else json.dumps(version.version.metadata),
                None if version is None else version.content_sha256,
                None if version is None else version.blob_id,
                json.dumps(dict(extracted)) if extracted else None,
            )
            if row is None:
                return False
            if row["corpus_id"] is None:  # the document went away under the job: store nothing
                raise RuntimeError("the job's document no longer exists")
            passages = None if version is None else version.version.passages
            if stores is not None and stores["chunks_model"] is None:
                vectors = [None] * len(chunks)  # that store was dropped
            ids = await _insert_chunks(
                tx, row["tenant_id"], row["corpus_id"], row["document_id"], chunks, vectors, passages
            )
            if next_vectors is not None and stores is not None and stores["next_model"] is not None:
                # A store that went (a cancel, a rollback) meanwhile is not written; one that
                # came meanwhile is filled by the change's re-embedding.
                await tx.execute(
                    "insert_next_vectors",
                    INSERT_NEXT_VECTORS,
                    ids,
                    [Vector(np.asarray(v, dtype=np.float32)) for v in next_vectors],
                )
            ended = searchable(row["document_id"], row["corpus_id"], len(chunks), tuple(transition.result.warnings))
            await publish(tx, row["tenant_id"], [ended])
        return True

    async def renew(self, lease: Lease, lease_s: float) -> bool:
        return await self._db.fetchval("renew_lease", RENEW, lease.job.job_id, lease.owner, float(lease_s)) is not None

    async def cancel_requested(self, lease: Lease) -> bool:
        return bool(await self._db.fetchval("cancel_requested", CANCEL_REQUESTED, lease.job.job_id, lease.owner))

    async def reap_cancelled(self) -> int:
        ended = cancelled()
        async with self._db.transaction() as tx:
            rows = await tx.fetch("reap_cancelled", REAP_CANCELLED, ended.state.value, ended.stage, ended.progress)
            by_tenant: dict[str, list[NewEvent | None]] = {}
            for r in rows:
                if r["document_id"] is not None:
                    event = document_ended(ended.state, r["document_id"], r["corpus_id"], None)
                    by_tenant.setdefault(r["tenant_id"], []).append(event)
            for tenant in sorted(by_tenant):
                await publish(tx, tenant, by_tenant[tenant])
        return len(rows)

    async def backlog(self) -> int:
        return await self._db.fetchval("jobs_backlog", BACKLOG)


@dataclass(frozen=True, slots=True)
class JobTransitionArgs:
    """JOB_TRANSITION's $1..$13, by name, in the statement's order."""

    job_id: uuid.UUID
    owner: str
    state: str
    stage: str
    progress: float
    error: str | None
    result: str | None
    releases_lease: bool
    lease_s: float
    requeue_after_s: float | None
    refund_attempt: bool
    unless_cancelled: bool
    interrupted: int

    @classmethod
    def of(cls, lease: Lease, transition: Transition, lease_s: float) -> JobTransitionArgs:
        return cls(
            job_id=lease.job.job_id,
            owner=lease.owner,
            state=transition.state.value,
            stage=transition.stage,
            progress=transition.progress,
            error=transition.error,
            result=result_json(transition),
            releases_lease=transition.releases_lease,
            lease_s=float(lease_s),
            requeue_after_s=transition.requeue_after_s,
            refund_attempt=transition.refund_attempt,
            unless_cancelled=transition.unless_cancelled,
            interrupted=int(transition.interrupted),
        )

    def values(self) -> tuple[object, ...]:
        return tuple(getattr(self, field.name) for field in fields(self))


async def _insert_chunks(
    tx: Transaction,
    tenant: str,
    corpus_id: int,
    document_id: int,
    chunks: Sequence[TextChunk],
    vectors: Sequence[Sequence[float] | None],
    passages: Sequence[Passage] | None = None,
) -> list[int]:
    """The chunks' ids, in the chunks' order."""
    if len(chunks) != len(vectors) or (passages is not None and len(passages) != len(chunks)):
        raise ValueError("one vector (and, for passages, one passage) per chunk")
    if not chunks:
        return []
    rows = await tx.fetch(
        "insert_chunks",
        INSERT_CHUNKS,
        tenant,
        corpus_id,
        document_id,
        [chunk.chunk_index for chunk in chunks],
        [chunk.section for chunk in chunks],
        [chunk.page for chunk in chunks],
        [chunk.content for chunk in chunks],
        # Vector, not a bare ndarray: asyncpg would read an array's elements as a nested list.
        [None if vector is None else Vector(np.asarray(vector, dtype=np.float32)) for vector in vectors],
        [p.fragment for p in passages] if passages is not None else [None] * len(chunks),
        [json.dumps(p.metadata) for p in passages] if passages is not None else ["{}"] * len(chunks),
        [chunk.overlap_chars for chunk in chunks],
    )
    by_index = {row["chunk_index"]: row["chunk_id"] for row in rows}
    return [by_index[chunk.chunk_index] for chunk in chunks]
