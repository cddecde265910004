"""Platform-wide corpora are read by every tenant, so a test that makes one removes it (and what
it holds) when done: the tests that follow, on the same database, assert exact reads."""

from __future__ import annotations

from knowledge_runtime.db.pool import Database

_PLATFORM = "SELECT corpus_id FROM corpora WHERE tenant_id IS NULL"


async def drop_platform_corpora(admin: Database) -> None:
    """Every platform-wide corpus with its jobs, documents and chunks (an administrator's connection)."""
    async with admin.transaction() as tx:
        for table in ("ingest_jobs", "chunks", "documents"):
            await tx.execute(f"drop_platform_{table}", f"DELETE FROM {table} WHERE corpus_id IN ({_PLATFORM})")
        await tx.execute("drop_platform_corpora", "DELETE FROM corpora WHERE tenant_id IS NULL")
