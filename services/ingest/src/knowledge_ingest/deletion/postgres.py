"""Deletions, their tombstones and the removal jobs, in PostgreSQL (role knowledge_ingest).

A deletion is one transaction: the documents are marked deleted (``documents.deleted_at``, which
every read filters), their ingest jobs are deleted (a running one's lease-conditioned writes then
find no row and fail harmlessly; their blob references go with them), a tombstone per document
records what it was, and the ``document.removed`` events are written. The tombstone row is the
removal job: claimed under a lease like ``ingest_jobs``, it deletes the chunks a batch per
transaction, then the document row (the last reference to its blob that ingest holds; content-
index's GC collects the blob), each step conditioned on still holding the lease.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

import asyncpg
from knowledge_runtime.db.pool import Database, Transaction
from tenacity import AsyncRetrying, retry_if_exception_type, stop_after_attempt, wait_random

from knowledge_ingest.domain.events import corpus_deleted, removed
from knowledge_ingest.domain.model import Page
from knowledge_ingest.domain.tombstones import Deletion, Removal, RemovalState, Tombstone
from knowledge_ingest.events.outbox import publish
from knowledge_ingest.jobs.rows import TERMINAL

T = TypeVar("T")

TOMBSTONE_COLUMNS = """tombstone_id, tenant_id, document_id, corpus_id, scope_path, confidentiality, filename,
    content_hash, chunk_count, deleted_by, reason, delete_time, removal_state, remove_time, principals"""
# The documents still live, locked ($2: their ids).
LOCK_LIVE = """
SELECT d.document_id FROM documents d
WHERE d.tenant_id = $1 AND d.document_id = ANY($2::bigint[]) AND d.deleted_at IS NULL
ORDER BY d.document_id FOR UPDATE OF d
"""
LOCK_CORPUS = """
SELECT corpus_id FROM corpora WHERE tenant_id = $1 AND corpus_id = $2 AND NOT is_system AND deleted_at IS NULL
FOR UPDATE
"""
LIVE_IN_CORPUS = """
SELECT document_id FROM documents WHERE tenant_id = $1 AND corpus_id = $2 AND deleted_at IS NULL
ORDER BY document_id FOR UPDATE
"""
# Their jobs go now: an unended one is the ingestion the deletion cancels.
DROP_JOBS = f"""
DELETE FROM ingest_jobs WHERE document_id = ANY($1::bigint[])
RETURNING document_id, job_id, state NOT IN {TERMINAL} AS unended
"""
# Marked and tombstoned in one statement; read after the rows were locked, so the chunk count is
# what the last committed ingestion stored.
TOMBSTONE = f"""
WITH marked AS (
    UPDATE documents SET deleted_at = now(), update_time = now()
    WHERE document_id = ANY($1::bigint[])
    RETURNING document_id, tenant_id, corpus_id, filename, blob_id, chunk_count, principals
)
INSERT INTO document_tombstones (tenant_id, document_id, corpus_id, scope_path, confidentiality, filename,
                                 content_hash, chunk_count, deleted_by, reason, principals)
SELECT m.tenant_id, m.document_id, m.corpus_id, c.scope_path, c.confidentiality, m.filename,
       b.content_hash, m.chunk_count, $2, $3, m.principals
FROM marked m JOIN corpora c ON c.corpus_id = m.corpus_id LEFT JOIN content_blobs b ON b.blob_id = m.blob_id
ORDER BY m.document_id
RETURNING {TOMBSTONE_COLUMNS}
"""
MARK_CORPUS = "UPDATE corpora SET deleted_at = now() WHERE corpus_id = $1"
# A deleted corpus is never scanned or auto-indexed again.
DROP_BINDINGS = "DELETE FROM import_bindings WHERE corpus_id = $1"
# A deleted corpus goes once no document row of it is left (its last removal done).
DROP_EMPTY_CORPUS = """
DELETE FROM corpora c WHERE c.corpus_id = $1 AND c.deleted_at IS NOT NULL
    AND NOT EXISTS (SELECT 1 FROM documents d WHERE d.corpus_id = c.corpus_id)
"""
LIST_TOMBSTONES = f"""
SELECT {TOMBSTONE_COLUMNS} FROM document_tombstones
WHERE tenant_id = $1 AND ($2::bigint IS NULL OR corpus_id = $2) AND tombstone_id > $3
ORDER BY tombstone_id LIMIT $4
"""
CLAIM_REMOVAL = """
WITH next AS (
    SELECT tombstone_id FROM document_tombstones
    WHERE removal_state = 'PENDING' AND not_before <= now()
      AND (lease_expires_at IS NULL OR lease_expires_at < now())
    ORDER BY not_before, tombstone_id
    FOR UPDATE SKIP LOCKED
    LIMIT 1
)
UPDATE document_tombstones t SET lease_owner = $1, lease_expires_at = now() + make_interval(secs => $2),
    -- a lease still set has expired: its worker stopped; taking over is an interruption
    attempts = t.attempts + (t.lease_owner IS NULL)::int,
    interruptions = t.interruptions + (t.lease_owner IS NOT NULL)::int
FROM next WHERE t.tombstone_id = next.tombstone_id
RETURNING t.tombstone_id, t.tenant_id, t.document_id, t.corpus_id, t.attempts
"""
# Every step holds the removal's row lock for its transaction and renews the lease.
HOLD = """
UPDATE document_tombstones SET lease_expires_at = now() + make_interval(secs => $3)
WHERE tombstone_id = $1 AND lease_owner = $2 AND removal_state = 'PENDING'
RETURNING 1
"""
DELETE_CHUNK_BATCH = """
DELETE FROM chunks WHERE chunk_id IN (SELECT chunk_id FROM chunks WHERE document_id = $1 LIMIT $2)
"""
DELETE_DOCUMENT_ROW = "DELETE FROM documents WHERE document_id = $1 AND deleted_at IS NOT NULL"
REMOVAL_DONE = """
UPDATE document_tombstones SET removal_state = 'DONE', remove_time = now(), lease_owner = NULL,
    lease_expires_at = NULL, last_error = NULL
WHERE tombstone_id = $1
"""
REMOVAL_FAILED = """
UPDATE document_tombstones SET lease_owner = NULL, lease_expires_at = NULL,
    not_before = now() + make_interval(secs => $3), last_error = $4
WHERE tombstone_id = $1 AND lease_owner = $2 AND removal_state = 'PENDING'
"""
# Removed, and older than the retention.
PRUNE = """
DELETE FROM document_tombstones
WHERE removal_state = 'DONE' AND delete_time < now() - make_interval(secs => $1)
"""


def _tombstone(row: asyncpg.Record) -> Tombstone:
    return Tombstone(
        tombstone_id=row["tombstone_id"],
        tenant=row["tenant_id"],
        document_id=row["document_id"],
        corpus_id=row["corpus_id"],
        scope_path=row["scope_path"],
        confidentiality=row["confidentiality"],
        filename=row["filename"],
        content_hash=row["content_hash"] or "",
        chunk_count=row["chunk_count"],
        deleted_by=row["deleted_by"],
        reason=row["reason"],
        delete_time=row["delete_time"],
        removal_state=RemovalState(row["removal_state"]),
        remove_time=row["remove_time"],
        principals=tuple(row["principals"]),
    )


async def _delete(
    tx: Transaction, tenant: str, document_ids: list[int], subject: str, reason: str
) -> tuple[list[Tombstone], dict[int, str]]:
    """Tombstone documents already locked: their tombstones and the jobs cancelled, by document."""
    if not document_ids:
        return [], {}
    jobs = await tx.fetch("drop_document_jobs", DROP_JOBS, document_ids)
    cancelled = {r["document_id"]: str(r["job_id"]) for r in jobs if r["unended"]}
    rows = await tx.fetch("tombstone_documents", TOMBSTONE, document_ids, subject, reason)
    tombstones = [_tombstone(r) for r in rows]
    await publish(tx, tenant, [removed(t.document_id, t.corpus_id, t.chunk_count) for t in tombstones])
    return tombstones, cancelled


# A deletion locks the documents, then their jobs; a worker writing a job's progress locks the job,
# then its document. PostgreSQL ends one of the two when they cross (a deadlock, a whole
# transaction rolled back), so the deletion runs again: the worker's write is what it waited for.
async def _again_after_deadlock(db: Database, body: Callable[[Transaction], Awaitable[T]]) -> T:
    """``body`` in a transaction, run up to three times while PostgreSQL ends it as a deadlock's loser."""
    retrying = AsyncRetrying(
        retry=retry_if_exception_type(asyncpg.DeadlockDetectedError),
        stop=stop_after_attempt(3),
        wait=wait_random(0.01, 0.1),
        reraise=True,
    )
    async for attempt in retrying:
        with attempt:
            async with db.transaction() as tx:
                return await body(tx)
    raise AssertionError("unreachable: the last attempt returns or raises")


async def _delete_one(tx: Transaction, tenant: str, document_id: int, subject: str, reason: str) -> Deletion | None:
    if not await tx.fetch("lock_live_documents", LOCK_LIVE, tenant, [document_id]):
        return None
    tombstones, cancelled = await _delete(tx, tenant, [document_id], subject, reason)
    return Deletion(tombstones[0], cancelled.get(document_id))


async def _delete_corpus(
    tx: Transaction, tenant: str, corpus_id: int, subject: str, reason: str, with_documents: bool
) -> list[Tombstone] | int | None:
    if await tx.fetchval("lock_corpus_for_delete", LOCK_CORPUS, tenant, corpus_id) is None:
        return None
    live = [r["document_id"] for r in await tx.fetch("live_in_corpus", LIVE_IN_CORPUS, tenant, corpus_id)]
    if live and not with_documents:
        return len(live)
    tombstones, _ = await _delete(tx, tenant, live, subject, reason)
    await tx.execute("mark_corpus_deleted", MARK_CORPUS, corpus_id)
    await tx.execute("drop_import_bindings", DROP_BINDINGS, corpus_id)
    # Before the drop: the event takes its placement from the corpus row (outbox.PUBLISH).
    await publish(tx, tenant, [corpus_deleted(corpus_id, len(tombstones))])
    await tx.execute("drop_empty_corpus", DROP_EMPTY_CORPUS, corpus_id)
    return tombstones


class PostgresTombstones:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def delete_document(self, tenant: str, document_id: int, subject: str, reason: str) -> Deletion | None:
        """None when the tenant has no such live document."""
        return await _again_after_deadlock(self._db, lambda tx: _delete_one(tx, tenant, document_id, subject, reason))

    async def delete_corpus(
        self, tenant: str, corpus_id: int, subject: str, reason: str, with_documents: bool
    ) -> list[Tombstone] | int | None:
        """The documents' tombstones; None when the tenant has no such live corpus; the number of
        its live documents (nothing changed) when it holds some and ``with_documents`` is not set."""
        return await _again_after_deadlock(
            self._db, lambda tx: _delete_corpus(tx, tenant, corpus_id, subject, reason, with_documents)
        )

    async def list_tombstones(self, tenant: str, corpus_id: int | None, page: Page) -> list[Tombstone]:
        rows = await self._db.fetch("list_tombstones", LIST_TOMBSTONES, tenant, corpus_id, page.after_id, page.size)
        return [_tombstone(r) for r in rows]

    async def claim(self, owner: str, lease_s: float) -> Removal | None:
        row = await self._db.fetchrow("claim_removal", CLAIM_REMOVAL, owner, float(lease_s))
        if row is None:
            return None
        return Removal(
            row["tombstone_id"], row["tenant_id"], row["document_id"], row["corpus_id"], owner, row["attempts"]
        )

    async def remove_batch(self, removal: Removal, batch: int, lease_s: float) -> int | None:
        """Delete up to ``batch`` of the document's chunks; how many went (None: the lease is lost)."""
        async with self._db.transaction() as tx:
            if await tx.fetchval("hold_removal", HOLD, removal.tombstone_id, removal.owner, float(lease_s)) is None:
                return None
            status = await tx.execute("delete_chunk_batch", DELETE_CHUNK_BATCH, removal.document_id, batch)
        return int(status.split()[-1])

    async def finish(self, removal: Removal, lease_s: float) -> bool:
        """The document row goes (and its corpus, deleted and now empty); the removal is done."""
        async with self._db.transaction() as tx:
            if await tx.fetchval("hold_removal", HOLD, removal.tombstone_id, removal.owner, float(lease_s)) is None:
                return False
            await tx.execute("delete_document_row", DELETE_DOCUMENT_ROW, removal.document_id)
            await tx.execute("drop_empty_corpus", DROP_EMPTY_CORPUS, removal.corpus_id)
            await tx.execute("removal_done", REMOVAL_DONE, removal.tombstone_id)
        return True

    async def failed(self, removal: Removal, retry_after_s: float, error: str) -> None:
        await self._db.execute(
            "removal_failed", REMOVAL_FAILED, removal.tombstone_id, removal.owner, float(retry_after_s), error[:500]
        )

    async def prune(self, retention_s: float) -> int:
        status = await self._db.execute("prune_tombstones", PRUNE, float(retention_s))
        return int(status.split()[-1])
