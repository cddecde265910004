"""Documents and their chunks as the API reads and changes them, in PostgreSQL (role knowledge_ingest)."""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence

import asyncpg
from knowledge_runtime.chunking import TextChunk
from knowledge_runtime.db.pool import Database, Transaction
from knowledge_runtime.db.reach import principals_arg, readable_by
from knowledge_runtime.filter_fields import compile_filter, document_fields
from knowledge_runtime.filters import Node, Params
from knowledge_runtime.system_corpora import HOUSEKEEPING_FILENAME_PREFIXES

from knowledge_ingest.documents.chunk_metadata import chunk_metadata
from knowledge_ingest.domain.documents import Document, State
from knowledge_ingest.domain.events import access_changed, moved
from knowledge_ingest.domain.metadata import Metadata
from knowledge_ingest.domain.model import Page
from knowledge_ingest.domain.system_corpora import CorpusKind, corpus_kind
from knowledge_ingest.events.outbox import publish
from knowledge_ingest.tenants.postgres import ENSURE_TENANT

# The tenant's own corpora (its housekeeping ones among them) and the platform-wide ones; whether
# the caller may write into one is domain.system_corpora's decision.
CORPUS_KIND = """
SELECT tenant_id, is_system FROM corpora
WHERE corpus_id = $2 AND (tenant_id = $1 OR (tenant_id IS NULL AND is_system)) AND deleted_at IS NULL
"""
_READABLE_3 = readable_by("d.principals", "$3")
_DOCUMENT_SELECT = """
SELECT d.document_id, d.corpus_id, d.filename, d.state, d.error, d.chunk_count, coalesce(b.size_bytes, 0) AS size_bytes,
       d.mime_type, d.extractable, d.source_url, d.create_time, d.update_time, d.warnings,
       d.extractor, d.ocr_page_count, d.ocr_confidence, d.refusal_reason, d.metadata, d.document_ref,
       d.principals,
       j.job_id, j.stage, j.progress
FROM documents d LEFT JOIN content_blobs b ON b.blob_id = d.blob_id
LEFT JOIN LATERAL (SELECT job_id, stage, progress FROM ingest_jobs WHERE document_id = d.document_id
                   ORDER BY create_time DESC LIMIT 1) j ON true
"""
# $1: the tenant keys the caller may read (Reach.owners); reach and kind are checked by the use case.
# A deleted document (deleted_at set, its removal pending) is gone for every read; so is one whose
# access list does not admit the caller's principals (each read's last parameter before a filter's),
# for every read and every write that names a document.
# A worker's own read (no caller) passes NULL principals.
GET_DOCUMENT = (
    _DOCUMENT_SELECT
    + "WHERE d.tenant_id = ANY($1::text[]) AND d.document_id = $2 AND d.deleted_at IS NULL"
    + f" AND ($3::text[] IS NULL OR {_READABLE_3})"
)
# BatchGetDocuments (and a watch's re-reads, {filter} its filter from $4 on): in the order asked
# ($2 holds no duplicate).
GET_DOCUMENTS = (
    _DOCUMENT_SELECT
    + f"""
JOIN unnest($2::bigint[]) WITH ORDINALITY AS asked(document_id, position) ON asked.document_id = d.document_id
WHERE d.tenant_id = ANY($1::text[]) AND d.deleted_at IS NULL AND {_READABLE_3} AND {{filter}} ORDER BY asked.position
"""
)
# A filter reads the document row itself (alias d).
FILTER_FIELDS = document_fields("d.metadata", lambda column: f"d.{column}")
# {filter} is the request's filter compiled over the document row (its values bound from $6 on).
LIST_DOCUMENTS = (
    _DOCUMENT_SELECT
    + f"""
WHERE d.tenant_id = ANY($1::text[]) AND d.corpus_id = $2 AND d.document_id > $3 AND d.deleted_at IS NULL
    AND {readable_by("d.principals", "$5")} AND {{filter}}
ORDER BY d.document_id LIMIT $4
"""
)
DOCUMENT_CHUNKS = f"""
SELECT content, section, page, chunk_index, coalesce((metadata->>'overlap_chars')::int, 0) AS overlap_chars
FROM chunks WHERE tenant_id = ANY($1::text[]) AND document_id = $2
    AND EXISTS (SELECT 1 FROM documents d WHERE d.document_id = $2 AND d.deleted_at IS NULL AND {_READABLE_3})
ORDER BY chunk_index
"""
# Moving names documents the caller may read ($4: its principals); all_documents moves those alone.
MOVABLE = f"""
SELECT document_id FROM documents d WHERE tenant_id = $1 AND ($2::bigint IS NULL OR corpus_id = $2)
    AND corpus_id = ANY($3::bigint[]) AND deleted_at IS NULL AND {readable_by("d.principals", "$4")}
ORDER BY document_id LIMIT 1000
"""
LOCK_OWNED = f"""
SELECT document_id, corpus_id FROM documents d WHERE tenant_id = $1 AND document_id = ANY($2::bigint[])
    AND corpus_id = ANY($3::bigint[]) AND deleted_at IS NULL AND {readable_by("d.principals", "$4")}
ORDER BY document_id FOR UPDATE
"""
LOCK_CORPUS_DOCUMENTS = f"""
SELECT document_id, corpus_id FROM documents d WHERE tenant_id = $1 AND corpus_id = $2 AND deleted_at IS NULL
    AND {_READABLE_3}
ORDER BY document_id FOR UPDATE
"""
MOVE_DOCUMENTS = "UPDATE documents SET corpus_id = $2, update_time = now() WHERE document_id = ANY($1::bigint[])"
MOVE_CHUNKS = "UPDATE chunks SET corpus_id = $2 WHERE document_id = ANY($1::bigint[])"
MOVE_JOBS = "UPDATE ingest_jobs SET corpus_id = $2 WHERE document_id = ANY($1::bigint[])"
# Only what a search can find (SEARCHABLE) for the caller (its principals $3) and no housekeeping
# file ($2: filename prefixes).
CORPUS_SUMMARY = f"""
SELECT c.corpus_id, c.name, count(d.document_id) AS documents
FROM corpora c
LEFT JOIN documents d ON d.corpus_id = c.corpus_id AND d.tenant_id = $1 AND d.state = 'SEARCHABLE'
    AND d.deleted_at IS NULL AND {_READABLE_3}
    AND NOT EXISTS (SELECT 1 FROM unnest($2::text[]) AS p (prefix) WHERE starts_with(d.filename, p.prefix))
WHERE c.tenant_id = $1 AND NOT c.is_system AND c.deleted_at IS NULL
GROUP BY c.corpus_id ORDER BY c.corpus_id
"""


# A housekeeping corpus sits at the root in the default band; names are unique among live corpora
# of one node and band (migration 0055's partial index: the columns and predicate infer it), so
# only a corpus of the tenant's own there, in that band, can hold its name.
INSERT_HOUSEKEEPING = """
INSERT INTO corpora (tenant_id, name, is_system, scope_path, confidentiality) VALUES ($1, $2, true, '/', 'TENANT')
ON CONFLICT (tenant_id, scope_path, confidentiality, name) WHERE deleted_at IS NULL DO NOTHING
"""
HOUSEKEEPING_CORPUS = """
SELECT corpus_id, is_system FROM corpora
WHERE tenant_id = $1 AND name = $2 AND scope_path = '/' AND confidentiality = 'TENANT' AND deleted_at IS NULL
"""
# UpdateDocument: the document's row first (locking it: a job storing its chunks waits for this
# transaction, or this for that one's), then its chunks' merged metadata in one statement that
# reads the row as updated, so no chunk keeps the old metadata and none is missed.
UPDATE_DOCUMENT = """
UPDATE documents SET metadata = coalesce($3::jsonb, metadata), filename = coalesce($4, filename), update_time = now()
WHERE tenant_id = $1 AND document_id = $2 AND deleted_at IS NULL
RETURNING document_id
"""
REMERGE_CHUNKS = f"""
UPDATE chunks c SET metadata = {
    chunk_metadata(
        c="c",
        filename="d.filename",
        document="d.metadata",
        overlap="coalesce(c.metadata -> 'overlap_chars', '0'::jsonb)",
    )
}
FROM documents d WHERE d.document_id = $1 AND c.document_id = $1
"""
SET_SUBJECT = "UPDATE documents SET subject = $3 WHERE tenant_id = $1 AND document_id = $2"
# SetDocumentAccess: the row locked (a job storing its chunks waits, or this waits for it), the
# list changed, the change recorded (migration 0062) and announced, in one transaction.
LOCK_ACCESS = """
SELECT corpus_id, principals FROM documents WHERE tenant_id = $1 AND document_id = $2 AND deleted_at IS NULL
FOR UPDATE
"""
SET_ACCESS = "UPDATE documents SET principals = $2, update_time = now() WHERE document_id = $1"
RECORD_ACCESS = """
INSERT INTO document_access_changes (tenant_id, document_id, corpus_id, changed_by, old_principals, new_principals)
VALUES ($1, $2, $3, $4, $5, $6)
"""


def _document(row: asyncpg.Record) -> Document:
    return Document(
        document_id=row["document_id"],
        corpus_id=row["corpus_id"],
        filename=row["filename"],
        state=State(row["state"]),
        error=row["error"],
        chunk_count=row["chunk_count"],
        size_bytes=row["size_bytes"],
        mime_type=row["mime_type"],
        extractable=row["extractable"],
        source_url=row["source_url"],
        job_id=row["job_id"],
        create_time=row["create_time"],
        update_time=row["update_time"],
        warnings=tuple(row["warnings"]),
        extractor=row["extractor"],
        ocr_page_count=row["ocr_page_count"],
        ocr_confidence=row["ocr_confidence"],
        stage=row["stage"] or "",
        progress=round(row["progress"] or 0.0, 4),
        refusal_reason=row["refusal_reason"] or "",
        metadata=json.loads(row["metadata"]),
        document_ref=row["document_ref"] or "",
        principals=tuple(row["principals"]),
    )


class PostgresDocuments:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def corpus_kind(self, tenant: str, corpus_id: int) -> CorpusKind | None:
        row = await self._db.fetchrow("corpus_kind", CORPUS_KIND, tenant, corpus_id)
        return None if row is None else corpus_kind(row["tenant_id"], row["is_system"])

    async def document(
        self, owners: Sequence[str], document_id: int, principals: Collection[str] | None
    ) -> Document | None:
        caller = None if principals is None else principals_arg(principals)
        row = await self._db.fetchrow("get_document", GET_DOCUMENT, list(owners), document_id, caller)
        return None if row is None else _document(row)

    async def documents(
        self,
        owners: Sequence[str],
        document_ids: Sequence[int],
        principals: Collection[str],
        condition: Node | None = None,
    ) -> list[Document]:
        params = Params(first=4)
        statement = GET_DOCUMENTS.format(filter=compile_filter(condition, FILTER_FIELDS, params))
        rows = await self._db.fetch(
            "get_documents",
            statement,
            list(owners),
            list(document_ids),
            principals_arg(principals),
            *params.values,
        )
        return [_document(row) for row in rows]

    async def list_documents(
        self,
        owners: Sequence[str],
        corpus_id: int,
        page: Page,
        principals: Collection[str],
        condition: Node | None = None,
    ) -> list[Document]:
        params = Params(first=6)
        statement = LIST_DOCUMENTS.format(filter=compile_filter(condition, FILTER_FIELDS, params))
        rows = await self._db.fetch(
            "list_documents",
            statement,
            list(owners),
            corpus_id,
            page.after_id,
            page.size,
            principals_arg(principals),
            *params.values,
        )
        return [_document(row) for row in rows]

    async def document_chunks(
        self, owners: Sequence[str], document_id: int, principals: Collection[str]
    ) -> list[TextChunk]:
        rows = await self._db.fetch(
            "document_chunks", DOCUMENT_CHUNKS, list(owners), document_id, principals_arg(principals)
        )
        return [TextChunk(r["content"], r["section"], r["page"], r["chunk_index"], r["overlap_chars"]) for r in rows]

    async def movable_documents(
        self, tenant: str, source_corpus_id: int | None, reachable: frozenset[int], principals: Collection[str]
    ) -> list[int]:
        rows = await self._db.fetch(
            "movable", MOVABLE, tenant, source_corpus_id, sorted(reachable), principals_arg(principals)
        )
        return [r["document_id"] for r in rows]

    async def move(
        self,
        tenant: str,
        target_corpus_id: int,
        document_ids: Sequence[int],
        source_corpus_id: int | None,
        reachable: frozenset[int],
        principals: Collection[str],
    ) -> tuple[list[int], list[int], list[int]]:
        wanted = sorted(set(document_ids))
        async with self._db.transaction() as tx:
            rows = await tx.fetch(
                "lock_owned", LOCK_OWNED, tenant, wanted, sorted(reachable), principals_arg(principals)
            )
            owned = {r["document_id"]: r["corpus_id"] for r in rows}
            missing = [d for d in wanted if d not in owned]
            elsewhere = [d for d in wanted if d in owned and source_corpus_id not in (None, owned[d])]
            if missing or elsewhere:
                return [], missing, elsewhere
            await _move(tx, tenant, owned, target_corpus_id)
        return wanted, [], []

    async def move_all(
        self, tenant: str, source_corpus_id: int, target_corpus_id: int, listed: int, principals: Collection[str]
    ) -> tuple[int, list[int]]:
        async with self._db.transaction() as tx:
            rows = await tx.fetch(
                "lock_corpus_documents", LOCK_CORPUS_DOCUMENTS, tenant, source_corpus_id, principals_arg(principals)
            )
            owned = {r["document_id"]: r["corpus_id"] for r in rows}
            if owned:
                await _move(tx, tenant, owned, target_corpus_id)
        ids = list(owned)
        return len(ids), ids[:listed]

    async def housekeeping_corpus(self, tenant: str, name: str) -> int | None:
        async with self._db.transaction() as tx:
            await tx.execute("ensure_tenant", ENSURE_TENANT, tenant)
            await tx.execute("insert_housekeeping", INSERT_HOUSEKEEPING, tenant, name)
            row = await tx.fetchrow("housekeeping_corpus", HOUSEKEEPING_CORPUS, tenant, name)
        return row["corpus_id"] if row is not None and row["is_system"] else None

    async def update_document(
        self, tenant: str, document_id: int, metadata: Metadata | None, filename: str | None
    ) -> bool:
        async with self._db.transaction() as tx:
            updated = await tx.fetchval(
                "update_document",
                UPDATE_DOCUMENT,
                tenant,
                document_id,
                None if metadata is None else json.dumps(metadata),
                filename,
            )
            if updated is None:
                return False
            await tx.execute("remerge_chunks", REMERGE_CHUNKS, document_id)
        return True

    async def set_access(
        self, tenant: str, document_id: int, principals: tuple[str, ...], changed_by: str
    ) -> tuple[str, ...] | None:
        async with self._db.transaction() as tx:
            row = await tx.fetchrow("lock_access", LOCK_ACCESS, tenant, document_id)
            if row is None:
                return None
            old = tuple(row["principals"])
            event = access_changed(document_id, row["corpus_id"], old, principals)
            if event is None:
                return old
            await tx.execute("set_access", SET_ACCESS, document_id, list(principals))
            await tx.execute(
                "record_access",
                RECORD_ACCESS,
                tenant,
                document_id,
                row["corpus_id"],
                changed_by,
                list(old),
                list(principals),
            )
            await publish(tx, tenant, [event])
        return old

    async def set_subject(self, tenant: str, document_id: int, subject: str) -> None:
        await self._db.execute("set_subject", SET_SUBJECT, tenant, document_id, subject)

    async def corpus_summary(self, tenant: str, principals: Collection[str]) -> list[tuple[int, str, int]]:
        rows = await self._db.fetch(
            "corpus_summary",
            CORPUS_SUMMARY,
            tenant,
            list(HOUSEKEEPING_FILENAME_PREFIXES),
            principals_arg(principals),
        )
        return [(r["corpus_id"], r["name"], r["documents"]) for r in rows]


async def _move(tx: Transaction, tenant: str, owned: dict[int, int], target_corpus_id: int) -> None:
    """Documents, their chunks and their jobs change corpus together (rows already locked:
    ``owned`` maps each to its corpus before the move), with an event per document that moved."""
    document_ids = sorted(owned)
    for name, sql in (("move_documents", MOVE_DOCUMENTS), ("move_chunks", MOVE_CHUNKS), ("move_jobs", MOVE_JOBS)):
        await tx.execute(name, sql, document_ids, target_corpus_id)
    await publish(tx, tenant, [moved(d, owned[d], target_corpus_id) for d in document_ids])
