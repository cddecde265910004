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
    error, attempts, cancel_requested, re_extract, duplicate, create_time, update_time, interruptions, fetch_url"""
J_JOB_COLUMNS = ", ".join("j." + c.strip() for c in JOB_COLUMNS.split(","))  # where the table is aliased j
SET_DOCUMENT_STATE = """
UPDATE documents SET state = $2, error = $3, refusal_reason = $4, update_time = now() WHERE document_id = $1
"""
FOLLOW_DOCUMENT = SET_DOCUMENT_STATE.rstrip() + " RETURNING corpus_id"


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
    )


def result_json(transition: Transition) -> str | None:
    return json.dumps(transition.result.as_json()) if transition.result is not None else None


async def follow(tx: Transaction, tenant: str, document_id: int | None, transition: Transition) -> None:
    """The document's side of a transition that it follows (the job's state and error), and its
    event when that ends the document FAILED or CANCELLED, in the same transaction."""
    if document_id is not None and transition.document is DocumentEffect.FOLLOW:
        refusal = transition.refusal.value if transition.refusal is not None else None
        corpus_id = await tx.fetchval(
            "document_state", FOLLOW_DOCUMENT, document_id, transition.state.value, transition.error, refusal
        )
        if corpus_id is not None:
            await publish(tx, tenant, [document_ended(transition.state, document_id, corpus_id, transition.error)])
