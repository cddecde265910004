"""A metadata filter on the lexical channel, judged either way the statement can choose: a filter
holding fewer chunks than the driving terms have postings is read once into a hash; a broader
one is judged on each posting's chunk. Both give exactly the chunks the filter holds, and the
statement is planned for its own values on every run (a generic plan cost seconds)."""

from __future__ import annotations

import asyncpg
import numpy as np
import pytest
from knowledge_runtime.db.pool import Database
from knowledge_runtime.filters import parse
from knowledge_search.adapters.postgres import PostgresChunkIndex, scan_settings
from knowledge_search.domain.model import Filters
from pgvector.asyncpg import register_vector

from tests.support.db import TEST_DIMENSION

pytestmark = pytest.mark.integration
TENANT = "postings-filter"
CHUNKS = 300


async def test_a_selective_and_a_broad_filter_give_exactly_the_chunks_they_hold(migrated_pg):
    admin = await asyncpg.connect(migrated_pg.url())
    ingest = await asyncpg.connect(migrated_pg.url(user="knowledge_ingest"))
    await register_vector(ingest)
    db = await Database.connect(migrated_pg.url(user="knowledge_search"), max_size=1, server_settings=scan_settings())
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
        rng = np.random.default_rng(5)
        # every chunk holds "lantern" (a long postings list); every 20th also "quartz" (a short one)
        rows = [
            (
                TENANT,
                corpus,
                document,
                i,
                "lantern archive" + (" quartz" if i % 20 == 0 else ""),
                rng.standard_normal(TEST_DIMENSION).astype(np.float32),
                f'{{"document_id": {document}, "bucket": {i % 100}}}',
            )
            for i in range(CHUNKS)
        ]
        await ingest.executemany(
            "INSERT INTO chunks (tenant_id, corpus_id, document_id, chunk_index, content, embedding, metadata)"
            " VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb)",
            rows,
        )
        by_index = {
            r["chunk_id"]: r["chunk_index"]
            for r in await admin.fetch("SELECT chunk_id, chunk_index FROM chunks WHERE tenant_id = $1", TENANT)
        }
        index = PostgresChunkIndex(db)

        async def found(text: str, condition: str) -> set[int]:
            hits = await index.lexical_search(TENANT, text, Filters(condition=parse(condition)), CHUNKS)
            return {by_index[h.chunk_id] for h in hits}

        for _ in range(7):  # past the five runs after which PostgreSQL may plan a prepared statement generically
            # 3 chunks hold bucket 7, against 300 postings of "lantern": the hash
            assert await found("lantern", "metadata.bucket = 7") == {7, 107, 207}
            # 270 chunks hold bucket < 90, against 15 postings of "quartz": each posting's chunk
            assert await found("quartz", "metadata.bucket < 90") == {i for i in range(0, CHUNKS, 20) if i % 100 < 90}
            assert await found("quartz", "metadata.bucket = 7") == set()
        assert (await db.fetchval("plan", "SELECT current_setting('plan_cache_mode')")) == "force_custom_plan"
    finally:
        await db.close()
        await admin.close()
        await ingest.close()
