"""The vector channel's HNSW scan settings as session defaults of search's pool: one statement per
query, and the iterative scan still fills a filtered query's depth; a pool opened without them
falls back to setting them per transaction."""

from __future__ import annotations

import asyncpg
import numpy as np
import pytest
from knowledge_runtime.db.pool import Database
from knowledge_search.adapters.postgres import PostgresChunkIndex, scan_settings
from knowledge_search.domain.model import Filters
from pgvector.asyncpg import register_vector

from tests.support.db import TEST_DIMENSION

pytestmark = pytest.mark.integration
TENANT = "scan-settings"
NO_SORT = {"enable_sort": "off"}  # the planner must take the HNSW index, as on a large table


class _Naming:
    """The search pool, keeping the names of the statements sent on it."""

    def __init__(self, db: Database) -> None:
        self.db = db
        self.names: list[str] = []

    def __getattr__(self, name):
        return getattr(self.db, name)

    async def fetch(self, name, sql, *args):
        self.names.append(name)
        return await self.db.fetch(name, sql, *args)

    async def fetchrow(self, name, sql, *args):
        self.names.append(name)
        return await self.db.fetchrow(name, sql, *args)


async def test_the_scan_settings_as_session_defaults_make_one_statement_that_fills_the_depth(migrated_pg):
    admin = await asyncpg.connect(migrated_pg.url())
    ingest = await asyncpg.connect(migrated_pg.url(user="knowledge_ingest"))
    await register_vector(ingest)
    url = migrated_pg.url(user="knowledge_search")
    session = await Database.connect(url, max_size=1, server_settings={**scan_settings(), **NO_SORT})
    plain = await Database.connect(url, max_size=1, server_settings=NO_SORT)
    try:
        await admin.execute("INSERT INTO tenants (tenant_id) VALUES ($1) ON CONFLICT DO NOTHING", TENANT)
        corpora, documents = [], []
        for i in range(10):
            corpora.append(
                await admin.fetchval(
                    "INSERT INTO corpora (tenant_id, name) VALUES ($1, $2) RETURNING corpus_id", TENANT, f"c{i}"
                )
            )
            documents.append(
                await admin.fetchval(
                    "INSERT INTO documents (tenant_id, corpus_id, filename) VALUES ($1, $2, 'f') RETURNING document_id",
                    TENANT,
                    corpora[-1],
                )
            )
        rng = np.random.default_rng(3)
        vectors = rng.standard_normal((600, TEST_DIMENSION)).astype(np.float32)
        await ingest.executemany(
            "INSERT INTO chunks (tenant_id, corpus_id, document_id, chunk_index, content, embedding, metadata)"
            " VALUES ($1, $2, $3, $4, 'text', $5, '{\"document_id\": 1}')",
            [(TENANT, corpora[i % 10], documents[i % 10], i, v) for i, v in enumerate(vectors)],
        )
        query = rng.standard_normal(TEST_DIMENSION).astype(np.float32)
        one_corpus = Filters(corpus_id=corpora[3])  # 60 of 600 chunks
        naming = _Naming(session)
        index = PostgresChunkIndex(naming)  # type: ignore[arg-type]
        first = await index.vector_search(TENANT, query, one_corpus, 50)
        again = await index.vector_search(TENANT, query, one_corpus, 50)
        # the settings are checked once, then each query is one statement (no BEGIN, SET, COMMIT);
        # the walk fills the depth here unless the shared test database's other chunks crowd it
        # out, when the exact statement follows (below)
        assert naming.names[:2] == ["show_hnsw_scan", "vector_search"]
        assert naming.names.count("vector_search") == 2 and "set_hnsw_scan" not in naming.names
        fallback = await PostgresChunkIndex(plain).vector_search(TENANT, query, one_corpus, 50)
        # the iterative scan filled the depth from a 10% filter (ef_search alone: about 4 rows)
        assert len(first) == 50 and {h.document_id for h in first} == {documents[3]}
        assert [h.chunk_id for h in again] == [h.chunk_id for h in first] == [h.chunk_id for h in fallback]
        async with plain.transaction() as tx:  # the same pool without the settings: what they prevent
            rows = await tx.fetch(
                "no_scan_settings",
                "SELECT chunk_id FROM chunks c WHERE tenant_id = $2 AND corpus_id = $3 ORDER BY embedding <=> $1 LIMIT 50",
                query,
                TENANT,
                corpora[3],
            )
        assert len(rows) < 50

        # A walk cut short (max_scan_tuples reached, as a small corpus among a large table's
        # chunks would): the exact nearest of the filtered chunks instead, not a short answer.
        ids = await admin.fetch(
            "SELECT chunk_id, chunk_index FROM chunks WHERE tenant_id = $1 AND corpus_id = $2", TENANT, corpora[3]
        )
        in_corpus = {row["chunk_index"]: row["chunk_id"] for row in ids}
        unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
        closeness = unit @ (query / np.linalg.norm(query))
        nearest = sorted(in_corpus, key=lambda i: -closeness[i])[:50]
        short = _Naming(plain)
        cut = await PostgresChunkIndex(short, ef_search=10, max_scan_tuples=20).vector_search(
            TENANT, query, one_corpus, 50
        )  # type: ignore[arg-type]
        assert short.names[-1] == "vector_search_exact"  # sent only when the walk's rows are short
        assert [h.chunk_id for h in cut] == [in_corpus[i] for i in nearest]
        whole = await PostgresChunkIndex(plain).vector_search(TENANT, query, one_corpus, 100)  # 60 chunks only
        assert sorted(h.chunk_id for h in whole) == sorted(in_corpus.values())
    finally:
        await session.close()
        await plain.close()
        await admin.close()
        await ingest.close()
