"""Corpora in PostgreSQL (role knowledge_ingest)."""

from __future__ import annotations

from collections.abc import Collection

import asyncpg
from knowledge_runtime.db.pool import Database
from knowledge_runtime.db.reach import principals_arg, readable_by
from knowledge_runtime.reach import Band, ScopePath

from knowledge_ingest.domain.errors import CorpusKeyTaken, CorpusNameTaken
from knowledge_ingest.domain.events import corpus_created
from knowledge_ingest.domain.model import Corpus, NewCorpus, Page
from knowledge_ingest.events.outbox import publish
from knowledge_ingest.tenants.postgres import ENSURE_TENANT

INSERT_CORPUS = """
INSERT INTO corpora (tenant_id, name, description, scope_path, confidentiality, key, default_principals)
VALUES ($1, $2, $3, $4, $5, $6, $7)
RETURNING corpus_id, name, description, 0 AS document_count, 0 AS chunk_count, create_time, scope_path,
    confidentiality, key, default_principals
"""
INSERT_PLATFORM_CORPUS = """
INSERT INTO corpora (tenant_id, name, description, is_system, scope_path, confidentiality)
VALUES (NULL, $1, $2, true, '/', 'GENERAL')
RETURNING corpus_id, name, description, 0 AS document_count, 0 AS chunk_count, create_time, scope_path,
    confidentiality, key, default_principals
"""
# A corpus's counts are of the documents the caller may read ($5: its principals), as its listing.
LIST_USER_CORPORA = f"""
SELECT c.corpus_id, c.name, c.description, c.create_time, c.scope_path, c.confidentiality, c.key,
       c.default_principals, count(d.document_id) AS document_count,
       coalesce(sum(d.chunk_count), 0) AS chunk_count
FROM corpora c
LEFT JOIN documents d ON d.corpus_id = c.corpus_id AND d.tenant_id = $1 AND d.deleted_at IS NULL
    AND {readable_by("d.principals", "$5")}
WHERE c.tenant_id = $1 AND NOT c.is_system AND c.corpus_id > $2 AND c.deleted_at IS NULL AND c.corpus_id = ANY($4::bigint[])
GROUP BY c.corpus_id
ORDER BY c.corpus_id
LIMIT $3
"""
# A node and its ancestors (the root has no row), then the corpus's binding.
ENSURE_NODES = """
INSERT INTO scope_nodes (tenant_id, path) SELECT $1, p FROM unnest($2::text[]) AS p
ON CONFLICT (tenant_id, path) DO NOTHING
"""
BIND_CORPUS = """
UPDATE corpora SET scope_path = $3 WHERE tenant_id = $1 AND corpus_id = $2 AND NOT is_system AND deleted_at IS NULL
RETURNING corpus_id
"""
BANDS_NAMED = """
SELECT DISTINCT confidentiality FROM corpora WHERE tenant_id = $1 AND scope_path = $2 AND name = $3 AND deleted_at IS NULL
"""
BANDS_KEYED = """
SELECT DISTINCT confidentiality FROM corpora WHERE tenant_id = $1 AND scope_path = $2 AND key = $3 AND deleted_at IS NULL
"""
SET_DEFAULT_ACCESS = """
UPDATE corpora SET default_principals = $3
WHERE tenant_id = $1 AND corpus_id = $2 AND NOT is_system AND deleted_at IS NULL
RETURNING corpus_id
"""
CORPUS_NAME = "SELECT name FROM corpora WHERE corpus_id = $1"
# The index of a key's uniqueness (migration 0059): a violation of it is a key taken, not a name.
KEY_INDEX = "corpora_node_key"
GET_CORPUS = f"""
SELECT c.corpus_id, c.name, c.description, c.create_time, c.scope_path, c.confidentiality, c.key,
       c.default_principals, count(d.document_id) AS document_count,
       coalesce(sum(d.chunk_count), 0) AS chunk_count
FROM corpora c
LEFT JOIN documents d ON d.corpus_id = c.corpus_id AND d.tenant_id = $1 AND d.deleted_at IS NULL
    AND {readable_by("d.principals", "$3")}
WHERE c.tenant_id = $1 AND c.corpus_id = $2 AND c.deleted_at IS NULL
GROUP BY c.corpus_id
"""


class PostgresCorpora:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def create(self, tenant: str, corpus: NewCorpus, node: ScopePath) -> Corpus:
        try:
            async with self._db.transaction() as tx:
                await tx.execute("ensure_tenant", ENSURE_TENANT, tenant)
                row = await tx.fetchrow(
                    "insert_corpus",
                    INSERT_CORPUS,
                    tenant,
                    corpus.name,
                    corpus.description,
                    str(node),
                    corpus.confidentiality.value,
                    corpus.key,
                    list(corpus.default_principals),
                )
                assert row is not None
                await publish(tx, tenant, [corpus_created(row["corpus_id"])])
        except asyncpg.UniqueViolationError as error:
            if corpus.key is not None and error.constraint_name == KEY_INDEX:
                raise CorpusKeyTaken(corpus.key) from None
            raise CorpusNameTaken(corpus.name) from None
        assert row is not None
        return _corpus(row)

    async def create_platform(self, tenant: str, corpus: NewCorpus) -> Corpus:
        try:
            async with self._db.transaction() as tx:
                await tx.execute("ensure_tenant", ENSURE_TENANT, tenant)
                row = await tx.fetchrow(
                    "insert_platform_corpus", INSERT_PLATFORM_CORPUS, corpus.name, corpus.description
                )
                assert row is not None
                await publish(tx, tenant, [corpus_created(row["corpus_id"])])
        except asyncpg.UniqueViolationError:
            raise CorpusNameTaken(corpus.name) from None
        return _corpus(row)

    async def bands_named(self, tenant: str, node: ScopePath, name: str) -> list[Band]:
        rows = await self._db.fetch("corpus_bands_named", BANDS_NAMED, tenant, str(node), name)
        return [Band(row["confidentiality"]) for row in rows]

    async def bands_keyed(self, tenant: str, node: ScopePath, key: str) -> list[Band]:
        rows = await self._db.fetch("corpus_bands_keyed", BANDS_KEYED, tenant, str(node), key)
        return [Band(row["confidentiality"]) for row in rows]

    async def list_user_corpora(
        self, tenant: str, page: Page, reachable: frozenset[int], principals: Collection[str]
    ) -> list[Corpus]:
        rows = await self._db.fetch(
            "list_user_corpora",
            LIST_USER_CORPORA,
            tenant,
            page.after_id,
            page.size,
            sorted(reachable),
            principals_arg(principals),
        )
        return [_corpus(row) for row in rows]

    async def set_default_access(
        self, tenant: str, corpus_id: int, default_principals: tuple[str, ...], principals: Collection[str]
    ) -> Corpus | None:
        async with self._db.transaction() as tx:
            changed = await tx.fetchval(
                "set_default_access", SET_DEFAULT_ACCESS, tenant, corpus_id, list(default_principals)
            )
            if changed is None:
                return None
            row = await tx.fetchrow("get_corpus", GET_CORPUS, tenant, corpus_id, principals_arg(principals))
        assert row is not None
        return _corpus(row)

    async def bind(self, tenant: str, corpus_id: int, node: ScopePath, principals: Collection[str]) -> Corpus | None:
        lineage = [str(n) for n in node.lineage() if not n.is_root]
        try:
            async with self._db.transaction() as tx:
                if await tx.fetchval("bind_corpus", BIND_CORPUS, tenant, corpus_id, str(node)) is None:
                    return None
                await tx.execute("ensure_scope_nodes", ENSURE_NODES, tenant, lineage)
                row = await tx.fetchrow("get_corpus", GET_CORPUS, tenant, corpus_id, principals_arg(principals))
        except asyncpg.UniqueViolationError:
            raise CorpusNameTaken(str(await self._db.fetchval("corpus_name", CORPUS_NAME, corpus_id))) from None
        assert row is not None
        return _corpus(row)


def _corpus(row: asyncpg.Record) -> Corpus:
    return Corpus(
        corpus_id=row["corpus_id"],
        name=row["name"],
        description=row["description"],
        document_count=row["document_count"],
        chunk_count=row["chunk_count"],
        create_time=row["create_time"],
        scope=ScopePath.parse(row["scope_path"]),
        confidentiality=Band(row["confidentiality"]),
        key=row["key"],
        default_principals=tuple(row["default_principals"]),
    )
