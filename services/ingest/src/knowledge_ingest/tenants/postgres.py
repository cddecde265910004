"""Tenant settings (the only writer: role knowledge_ingest), usage and per-tenant totals."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from knowledge_runtime.db.pool import Database, Transaction
from knowledge_runtime.db.tenant_settings import SETTINGS, TenantSettingsReader, settings_from_row
from knowledge_runtime.tenancy import Holdings, TenantSettings

from knowledge_ingest.domain.usage import TenantTotals

# A tenant's row, written by the first thing it creates (a corpus, a document, a job).
ENSURE_TENANT = "INSERT INTO tenants (tenant_id) VALUES ($1) ON CONFLICT (tenant_id) DO NOTHING"
# What a tenant holds (documents, their distinct blobs' bytes, chunks: those of document $3 left
# out, whose chunks a job is about to replace; a deleted one is gone at once, its removal pending)
# and has embedded and spent since $2.
HOLDINGS = """
SELECT (SELECT count(*) FROM documents WHERE tenant_id = $1 AND deleted_at IS NULL) AS documents,
       (SELECT coalesce(sum(b.size_bytes), 0)::bigint FROM content_blobs b
        WHERE b.blob_id IN (SELECT blob_id FROM documents WHERE tenant_id = $1 AND deleted_at IS NULL)) AS bytes,
       (SELECT coalesce(sum(chunk_count), 0)::bigint FROM documents
        WHERE tenant_id = $1 AND document_id IS DISTINCT FROM $3::bigint AND deleted_at IS NULL) AS chunks,
       (SELECT coalesce(sum(tokens), 0)::bigint FROM cost_records
        WHERE tenant_id = $1 AND operation = 'embed' AND create_time >= $2) AS embedding_tokens,
       (SELECT coalesce(sum(cost), 0) FROM cost_records
        WHERE tenant_id = $1 AND operation = 'chat' AND create_time >= $2) AS llm_cost
"""
# What the tenant's documents in the corpora $2 hold now (a usage report of part of the tree).
CORPUS_HOLDINGS = """
SELECT count(*) AS documents, coalesce(sum(chunk_count), 0)::bigint AS chunks,
       (SELECT coalesce(sum(b.size_bytes), 0)::bigint FROM content_blobs b
        WHERE b.blob_id IN (SELECT blob_id FROM documents
                            WHERE tenant_id = $1 AND corpus_id = ANY($2::bigint[]) AND deleted_at IS NULL)) AS bytes
FROM documents WHERE tenant_id = $1 AND corpus_id = ANY($2::bigint[]) AND deleted_at IS NULL
"""
# Idempotent: a body equal to the stored settings writes nothing (update_time and updated_by stay).
UPSERT_SETTINGS = """
INSERT INTO tenant_settings AS s (tenant_id, enabled, max_documents, max_bytes, max_chunks,
                                  max_embedding_tokens_per_month, max_llm_cost_per_month, updated_by, features)
VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)
ON CONFLICT (tenant_id) DO UPDATE SET
    enabled = EXCLUDED.enabled, max_documents = EXCLUDED.max_documents, max_bytes = EXCLUDED.max_bytes,
    max_chunks = EXCLUDED.max_chunks, max_embedding_tokens_per_month = EXCLUDED.max_embedding_tokens_per_month,
    max_llm_cost_per_month = EXCLUDED.max_llm_cost_per_month, features = EXCLUDED.features,
    updated_by = EXCLUDED.updated_by, update_time = now()
WHERE (s.enabled, s.max_documents, s.max_bytes, s.max_chunks, s.max_embedding_tokens_per_month,
       s.max_llm_cost_per_month, s.features)
      IS DISTINCT FROM (EXCLUDED.enabled, EXCLUDED.max_documents, EXCLUDED.max_bytes, EXCLUDED.max_chunks,
                        EXCLUDED.max_embedding_tokens_per_month, EXCLUDED.max_llm_cost_per_month, EXCLUDED.features)
"""
# The period's embedding and LLM tokens and cost, from the embedder's and search's records.
SPENDING = """
SELECT coalesce(sum(tokens) FILTER (WHERE operation = 'embed'), 0)::bigint AS embedding_tokens,
       coalesce(sum(cost) FILTER (WHERE operation = 'embed'), 0) AS embedding_cost,
       coalesce(sum(tokens) FILTER (WHERE operation = 'chat'), 0)::bigint AS llm_tokens,
       coalesce(sum(cost) FILTER (WHERE operation = 'chat'), 0) AS llm_cost
FROM cost_records WHERE tenant_id = $1 AND create_time >= $2 AND create_time < $3
"""
TENANT_TOTALS = """
SELECT d.tenant_id, count(*) AS documents, coalesce(sum(d.chunk_count), 0)::bigint AS chunks,
       coalesce((SELECT sum(b.size_bytes) FROM content_blobs b WHERE b.blob_id IN
                 (SELECT blob_id FROM documents WHERE tenant_id = d.tenant_id AND deleted_at IS NULL)), 0)::bigint
           AS stored_bytes
FROM documents d WHERE d.deleted_at IS NULL GROUP BY d.tenant_id
"""


async def holdings(
    db: Database | Transaction, tenant: str, month_start: datetime, except_document: int | None = None
) -> Holdings:
    """Needs SELECT on documents, content_blobs and cost_records (ingest's role)."""
    row = await db.fetchrow("tenant_holdings", HOLDINGS, tenant, month_start, except_document)
    assert row is not None
    return Holdings(
        documents=row["documents"],
        bytes=row["bytes"],
        chunks=row["chunks"],
        embedding_tokens=row["embedding_tokens"],
        llm_cost=row["llm_cost"],
    )


class PostgresTenants:
    def __init__(self, db: Database, enabled_by_default: bool) -> None:
        self._db = db
        self._reader = TenantSettingsReader(db, enabled_by_default)

    async def settings(self, tenant: str) -> TenantSettings:
        return await self._reader.settings(tenant)

    async def put(self, settings: TenantSettings) -> TenantSettings:
        q = settings.quotas
        async with self._db.transaction() as tx:
            await tx.execute(
                "upsert_tenant_settings",
                UPSERT_SETTINGS,
                settings.tenant,
                settings.enabled,
                q.max_documents,
                q.max_bytes,
                q.max_chunks,
                q.max_embedding_tokens_per_month,
                q.max_llm_cost_per_month,
                settings.updated_by,
                list(settings.features),
            )
            row = await tx.fetchrow("tenant_settings", SETTINGS, settings.tenant)
        assert row is not None
        return settings_from_row(row)

    async def holdings(self, tenant: str, month_start: datetime, except_document: int | None = None) -> Holdings:
        return await holdings(self._db, tenant, month_start, except_document)

    async def corpus_holdings(self, tenant: str, corpus_ids: frozenset[int]) -> Holdings:
        row = await self._db.fetchrow("corpus_holdings", CORPUS_HOLDINGS, tenant, sorted(corpus_ids))
        assert row is not None
        return Holdings(documents=row["documents"], bytes=row["bytes"], chunks=row["chunks"])

    async def spending(self, tenant: str, start: datetime, end: datetime) -> dict[str, Any]:
        row = await self._db.fetchrow("tenant_spending", SPENDING, tenant, start, end)
        assert row is not None
        return dict(row)

    async def totals(self) -> list[TenantTotals]:
        rows = await self._db.fetch("tenant_totals", TENANT_TOTALS)
        return [TenantTotals(r["tenant_id"], r["documents"], r["stored_bytes"], r["chunks"]) for r in rows]
