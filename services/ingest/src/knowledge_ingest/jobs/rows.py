"""What the job adapters share: the job row's columns and mapping, and a transition's parameters."""

from __future__ import annotations

import json

import asyncpg
from knowledge_runtime.db.pool import Transaction

from knowledge_ingest.domain.documents import Job, JobResult, State
from knowledge_ingest.domain.events import document_ended
from knowledge_ingest.domain.jobs import DocumentEffect, Transition
from knowledge_ingest.events.outbox import publish

TERMINAL = "('SEARCHABLE', 'FAILED', 'CANCELLED')"
JOB_COLUMNS = """job_id, tenant_id, corpus_id, document_id, blob_id, filename, mime_type, state, stage, progress,
    error, attempts, cancel_requested, re_extract, duplicate, create_time, update_time, interruptions, fetch_url,
    content_sha256"""
J_JOB_COLUMNS = ", ".join("j." + c.strip() for c in JOB_COLUMNS.split(","))  # where the table is aliased j


def follows(document: str, job_created: str) -> str:
    """SQL: whether the document (alias ``document``) takes the state of its job created at
    ``job_created``. Not when a later job of it exists that drives it (a superseded version's end
    is not the document's; a duplicate upload waiting for this job's outcome does not drive it),
    nor while it has a searchable version (SEARCHABLE with chunks): a later version's job, until
    it stores, and its failure or cancellation are the job's alone, and the document stays
    SEARCHABLE with the version it has. Every other job of a document starts by moving it out of
    SEARCHABLE (a re-extraction, IngestText's new content), so this changes nothing for them."""
    return (
        f"NOT ({document}.state = 'SEARCHABLE' AND {document}.chunk_count > 0)"
        f" AND NOT EXISTS (SELECT 1 FROM ingest_jobs later WHERE later.document_id = {document}.document_id"
        f" AND later.create_time > {job_created} AND NOT later.duplicate)"
    )


# $5: the create_time of the job the document follows.
SET_DOCUMENT_STATE = f"""
UPDATE documents d SET state = $2, error = $3, refusal_reason = $4, update_time = now()
WHERE d.document_id = $1 AND {follows("d", "$5::timestamptz")}
"""
FOLLOW_DOCUMENT = SET_DOCUMENT_STATE.rstrip() + " RETURNING d.corpus_id"


def job_from_row(row: asyncpg.Record, result: str | None = None) -> Job:
    return Job(
        job_id=row["job_id"],
        tenant=row["tenant_id"],
        corpus_id=row["corpus_id"],
        document_id=row["document_id"],
        blob_id=row["blob_id"],
        filename=row["filename"],
        mime_type=row["mime_type"],
        state=State(row["state"]),
        stage=row["stage"],
        progress=row["progress"],
        error=row["error"],
        attempts=row["attempts"],
        cancel_requested=row["cancel_requested"],
        re_extract=row["re_extract"],
        create_time=row["create_time"],
        update_time=row["update_time"],
        result=JobResult.from_json(json.loads(result)) if result else None,
        duplicate=row["duplicate"],
        interruptions=row["interruptions"],
        fetch_url=row["fetch_url"],
        content_sha256=row["content_sha256"],
    )


def result_json(transition: Transition) -> str | None:
    return json.dumps(transition.result.as_json()) if transition.result is not None else None


async def follow(tx: Transaction, tenant: str, job: asyncpg.Record, transition: Transition) -> None:
    """The document's side of a transition of ``job`` (its row) that it follows (the job's state
    and error, unless ``follows`` says otherwise), and its event when that ends the document FAILED
    or CANCELLED, in the same transaction."""
    document_id = job["document_id"]
    if document_id is not None and transition.document is DocumentEffect.FOLLOW:
        refusal = transition.refusal.value if transition.refusal is not None else None
        corpus_id = await tx.fetchval(
            "document_state",
            FOLLOW_DOCUMENT,
            document_id,
            transition.state.value,
            transition.error,
            refusal,
            job["create_time"],
        )
        if corpus_id is not None:
            await publish(tx, tenant, [document_ended(transition.state, document_id, corpus_id, transition.error)])
