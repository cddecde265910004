"""Corpora in PostgreSQL (role knowledge_ingest)."""

from __future__ import annotations

import asyncpg
from knowledge_runtime.db.pool import Database

from knowledge_ingest.adapters.outbox import publish
from knowledge_ingest.domain.errors import CorpusNameTaken
from knowledge_ingest.domain.events import corpus_created
from knowledge_ingest.domain.model import Corpus, NewCorpus, Page

ENSURE_TENANT = "INSERT INTO tenants (tenant_id) VALUES ($1) ON CONFLICT (tenant_id) DO NOTHING"
INSERT_CORPUS = """
INSERT INTO corpora (tenant_id, name, description)
VALUES ($1, $2, $3)
RETURNING corpus_id, name, description, 0 AS document_count, 0 AS chunk_count, create_time
"""
LIST_USER_CORPORA = """
SELECT c.corpus_id, c.name, c.description, c.create_time,
       count(d.document_id) AS document_count,
       coalesce(sum(d.chunk_count), 0) AS chunk_count
FROM corpora c
LEFT JOIN documents d ON d.corpus_id = c.corpus_id AND d.tenant_id = $1
WHERE c.tenant_id = $1 AND NOT c.is_system AND c.corpus_id > $2
GROUP BY c.corpus_id
ORDER BY c.corpus_id
LIMIT $3
"""


class PostgresCorpora:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def create(self, tenant: str, corpus: NewCorpus) -> Corpus:
        try:
            async with self._db.transaction() as tx:
                await tx.execute("ensure_tenant", ENSURE_TENANT, tenant)
                row = await tx.fetchrow("insert_corpus", INSERT_CORPUS, tenant, corpus.name, corpus.description)
                assert row is not None
                await publish(tx, tenant, [corpus_created(row["corpus_id"])])
        except asyncpg.UniqueViolationError:
            raise CorpusNameTaken(corpus.name) from None
        assert row is not None
        return _corpus(row)

    async def list_user_corpora(self, tenant: str, page: Page) -> list[Corpus]:
        rows = await self._db.fetch("list_user_corpora", LIST_USER_CORPORA, tenant, page.after_id, page.size)
        return [_corpus(row) for row in rows]


def _corpus(row: asyncpg.Record) -> Corpus:
    return Corpus(
        corpus_id=row["corpus_id"],
        name=row["name"],
        description=row["description"],
        document_count=row["document_count"],
        chunk_count=row["chunk_count"],
        create_time=row["create_time"],
    )
