"""Migration 0005: BM25 statistics follow every write to chunks, in the writer's transaction."""

from __future__ import annotations

import asyncpg
import numpy as np
import pytest
from pgvector.asyncpg import register_vector

pytestmark = pytest.mark.integration
TENANT = "stats-tenant"


async def stats(admin: asyncpg.Connection) -> tuple[dict, dict]:
    tenant = await admin.fetchrow(
        "SELECT chunk_count, total_length FROM search_tenant_stats WHERE tenant_id = $1", TENANT
    )
    lexemes = await admin.fetch("SELECT lexeme, doc_freq FROM search_lexeme_stats WHERE tenant_id = $1", TENANT)
    return (dict(tenant) if tenant else {}), {r["lexeme"]: r["doc_freq"] for r in lexemes if r["doc_freq"]}


async def truth(admin: asyncpg.Connection) -> tuple[dict, dict]:
    """The statistics recomputed from the chunks themselves."""
    tenant = await admin.fetchrow(
        "SELECT count(*) AS chunk_count, coalesce(sum(search_bm25_length(lexemes)), 0) AS total_length "
        "FROM chunks WHERE tenant_id = $1",
        TENANT,
    )
    lexemes = await admin.fetch(
        "SELECT u.lexeme, count(*) AS doc_freq FROM chunks c, unnest(c.lexemes) u WHERE c.tenant_id = $1 GROUP BY 1",
        TENANT,
    )
    return ({} if tenant["chunk_count"] == 0 else dict(tenant)), {r["lexeme"]: r["doc_freq"] for r in lexemes}


async def test_statistics_follow_inserts_updates_deletes_and_rollbacks(migrated_pg):
    admin = await asyncpg.connect(migrated_pg.url())
    embedder = await asyncpg.connect(migrated_pg.url(user="knowledge_embedder"))
    ingest = await asyncpg.connect(migrated_pg.url(user="knowledge_ingest"))
    await register_vector(ingest)
    try:
        await admin.execute("INSERT INTO tenants (tenant_id) VALUES ($1) ON CONFLICT DO NOTHING", TENANT)
        corpus = await admin.fetchval(
            "INSERT INTO corpora (tenant_id, name) VALUES ($1, 'c') RETURNING corpus_id", TENANT
        )
        document = await admin.fetchval(
            "INSERT INTO documents (tenant_id, corpus_id, filename) VALUES ($1, $2, 'f') RETURNING document_id",
            TENANT,
            corpus,
        )
        insert = (
            "INSERT INTO chunks (tenant_id, corpus_id, document_id, chunk_index, section, content, embedding, metadata) "
            "SELECT $1, $2, $3, i, 'Heading', 'the cats sat on ' || repeat('mats ', i + 1), $4, '{\"document_id\": 1}' "
            "FROM generate_series($5::int, $6::int) AS i"
        )
        vector = np.ones(384, dtype=np.float32)
        await ingest.execute(insert, TENANT, corpus, document, vector, 0, 4)
        assert await stats(admin) == await truth(admin)
        tenant, lexemes = await stats(admin)
        assert tenant["chunk_count"] == 5 and lexemes["cat"] == 5 and lexemes["head"] == 5

        # A rolled-back write leaves no trace in the statistics.
        transaction = ingest.transaction()
        await transaction.start()
        await ingest.execute(insert, TENANT, corpus, document, vector, 5, 9)
        await transaction.rollback()
        assert (await stats(admin))[0]["chunk_count"] == 5

        # A re-written text re-computes the lexemes (the database's rule); a corpus move changes nothing.
        await ingest.execute(
            "UPDATE chunks SET section = '', content = 'dogs bark' WHERE tenant_id = $1 AND chunk_index = 0", TENANT
        )
        await ingest.execute("UPDATE chunks SET corpus_id = corpus_id WHERE tenant_id = $1", TENANT)
        await ingest.execute("DELETE FROM chunks WHERE tenant_id = $1 AND chunk_index IN (1, 2)", TENANT)
        assert await stats(admin) == await truth(admin)
        tenant, lexemes = await stats(admin)
        assert tenant["chunk_count"] == 3 and lexemes["cat"] == 2 and lexemes["dog"] == 1
        # Migration 0015: each chunk's stored BM25 length follows its lexemes, whoever wrote them.
        lengths = await admin.fetch(
            "SELECT chunk_index, bm25_length, search_bm25_length(lexemes) AS truth "
            "FROM chunks WHERE tenant_id = $1 ORDER BY chunk_index",
            TENANT,
        )
        assert [(r["chunk_index"], r["bm25_length"]) for r in lengths] == [
            (0, 2),
            (3, 7),
            (4, 8),
        ]  # heading 1 + cat, sat + i + 1 mats
        assert all(r["bm25_length"] == r["truth"] for r in lengths)
        assert tenant["total_length"] == sum(r["bm25_length"] for r in lengths)

        # The writing roles cannot touch the statistics directly, and search can only read them.
        for role in (embedder, ingest):
            with pytest.raises(asyncpg.InsufficientPrivilegeError):
                await role.execute("UPDATE search_lexeme_stats SET doc_freq = 0")
            with pytest.raises(asyncpg.InsufficientPrivilegeError):
                await role.execute("SELECT search_stats_add(ARRAY['x'], ARRAY[''::tsvector], 1)")
        search = await asyncpg.connect(migrated_pg.url(user="knowledge_search"))
        try:
            assert await search.fetchval("SELECT count(*) FROM search_lexeme_stats WHERE tenant_id = $1", TENANT) > 0
            with pytest.raises(asyncpg.InsufficientPrivilegeError):
                await search.execute("DELETE FROM search_tenant_stats")
        finally:
            await search.close()

        await ingest.execute("DELETE FROM chunks WHERE tenant_id = $1", TENANT)
        assert await stats(admin) == ({"chunk_count": 0, "total_length": 0}, {})
    finally:
        for connection in (admin, embedder, ingest):
            await connection.close()
