"""Migrations on the embedded PostgreSQL: idempotent, locked, dimensioned, least privilege."""

import asyncio

import asyncpg
import pytest
from knowledge_runtime.db.migrate import MigrationError, load_migrations, migrate

from tests.support.db import TEST_DIMENSION

pytestmark = pytest.mark.integration


async def test_applying_twice_changes_nothing(migrated_pg):
    assert await migrate(migrated_pg.url(), embedding_dimension=TEST_DIMENSION) == []
    connection = await asyncpg.connect(migrated_pg.url())
    try:
        versions = await connection.fetch("SELECT version FROM schema_migrations ORDER BY version")
        assert [r["version"] for r in versions] == [m.version for m in load_migrations()]
    finally:
        await connection.close()


async def test_hnsw_indexes_exist_with_the_model_dimension(migrated_pg):
    connection = await asyncpg.connect(migrated_pg.url())
    try:
        indexes = await connection.fetch(
            "SELECT tablename, indexdef FROM pg_indexes WHERE indexdef LIKE '%USING hnsw%'"
        )
        assert {r["tablename"] for r in indexes} == {"chunks", "anchors"}
        assert all("vector_cosine_ops" in r["indexdef"] for r in indexes)
        # built (and inserted into) at ef_construction 128, where recall at a million chunks held
        assert all("ef_construction='128'" in r["indexdef"] for r in indexes), [r["indexdef"] for r in indexes]
        column = await connection.fetchval(
            "SELECT format_type(atttypid, atttypmod) FROM pg_attribute "
            "WHERE attrelid = 'chunks'::regclass AND attname = 'embedding'"
        )
        assert column == f"vector({TEST_DIMENSION})"
        assert await connection.fetchval("SELECT extversion FROM pg_extension WHERE extname = 'vector'") >= "0.8"
    finally:
        await connection.close()


async def test_another_dimension_is_refused_by_name(migrated_pg):
    with pytest.raises(MigrationError, match="KNOWLEDGE_EMBEDDING_DIMENSION"):
        await migrate(migrated_pg.url(), embedding_dimension=1024)


async def test_concurrent_migrators_apply_each_migration_once(migrated_pg):
    migrated_pg.server.psql("DROP DATABASE IF EXISTS knowledge_race; CREATE DATABASE knowledge_race;")
    url = migrated_pg.url(database="knowledge_race")
    results = await asyncio.gather(*(migrate(url, embedding_dimension=TEST_DIMENSION) for _ in range(4)))
    applied = [name for result in results for name in result]
    assert sorted(applied) == sorted(m.name for m in load_migrations())


async def _as(pg, role: str) -> asyncpg.Connection:
    return await asyncpg.connect(pg.url(user=role))


@pytest.mark.parametrize(
    ("role", "statement"),
    [
        (
            "knowledge_search",
            (
                "INSERT INTO chunks (tenant_id, corpus_id, document_id, chunk_index, content, "
                "embedding, metadata) VALUES ('t', 1, 1, 0, 'x', array_fill(0, ARRAY[384])::vector, "
                '\'{"document_id": "1"}\')'
            ),
        ),
        ("knowledge_search", "DELETE FROM documents"),
        ("knowledge_ingest", "INSERT INTO content_blobs (content_hash, size_bytes, storage_uri) VALUES ('h', 1, 'u')"),
        ("knowledge_content_index", "INSERT INTO corpora (tenant_id, name) VALUES ('t', 'n')"),
        ("knowledge_embedder", "UPDATE documents SET state = 'FAILED'"),
    ],
)
async def test_each_role_is_refused_outside_its_context(migrated_pg, role, statement):
    connection = await _as(migrated_pg, role)
    try:
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await connection.execute(statement)
    finally:
        await connection.close()


async def test_the_ingest_role_writes_its_own_tables(migrated_pg):
    connection = await _as(migrated_pg, "knowledge_ingest")
    transaction = connection.transaction()
    await transaction.start()
    try:
        await connection.execute("INSERT INTO tenants (tenant_id) VALUES ('role-test') ON CONFLICT DO NOTHING")
        corpus_id = await connection.fetchval(
            "INSERT INTO corpora (tenant_id, name) VALUES ('role-test', 'c') RETURNING corpus_id"
        )
        assert corpus_id > 0
    finally:
        await transaction.rollback()
        await connection.close()


CHUNK_ROW = (
    "INSERT INTO chunks (tenant_id, corpus_id, document_id, chunk_index, content, embedding, metadata) "
    f"VALUES ($1, $2, $3, 0, 'The ingest role wrote this.', array_fill(0.1, ARRAY[{TEST_DIMENSION}])::vector, "
    "jsonb_build_object('document_id', $3::bigint::text)) RETURNING chunk_id"
)


@pytest.mark.parametrize(
    "statement",
    [
        CHUNK_ROW.replace("0, 'The ingest role wrote this.'", "1, 'The embedder wrote this.'"),
        "UPDATE chunks SET content = 'changed' WHERE document_id = $3 AND $1::text IS NOT NULL AND $2::bigint > 0",
        "DELETE FROM chunks WHERE document_id = $3 AND $1::text IS NOT NULL AND $2::bigint > 0",
        "SELECT corpus_id FROM documents WHERE document_id = $3 AND $1::text IS NOT NULL AND $2::bigint > 0",
    ],
)
async def test_ingest_is_the_only_writer_of_chunks(migrated_pg, statement):
    """Migration 0013: the embedder role can neither write chunks nor read the documents it bound them to."""
    admin = await asyncpg.connect(migrated_pg.url())
    ingest, embedder = await _as(migrated_pg, "knowledge_ingest"), await _as(migrated_pg, "knowledge_embedder")
    try:
        await admin.execute("INSERT INTO tenants (tenant_id) VALUES ('one-writer') ON CONFLICT DO NOTHING")
        corpus_id = await admin.fetchval(
            "INSERT INTO corpora (tenant_id, name) VALUES ('one-writer', gen_random_uuid()::text) RETURNING corpus_id"
        )
        document_id = await admin.fetchval(
            "INSERT INTO documents (tenant_id, corpus_id, filename) "
            "VALUES ('one-writer', $1, 'a.txt') RETURNING document_id",
            corpus_id,
        )
        assert await ingest.fetchval(CHUNK_ROW, "one-writer", corpus_id, document_id) > 0
        with pytest.raises(asyncpg.InsufficientPrivilegeError):
            await embedder.execute(statement, "one-writer", corpus_id, document_id)
        rows = await admin.fetch(
            "SELECT content, lexemes::text AS lexemes FROM chunks WHERE document_id = $1", document_id
        )
        assert [r["content"] for r in rows] == ["The ingest role wrote this."]
        assert "'ingest':2" in rows[0]["lexemes"]  # lexemes by the database's one rule (trigger of 0013)
    finally:
        await admin.execute("DELETE FROM documents WHERE tenant_id = 'one-writer'")
        await admin.close()
        await ingest.close()
        await embedder.close()


async def test_lexemes_are_the_databases_rule_whatever_a_writer_sends(migrated_pg):
    admin = await asyncpg.connect(migrated_pg.url())
    try:
        await admin.execute("INSERT INTO tenants (tenant_id) VALUES ('one-rule') ON CONFLICT DO NOTHING")
        corpus_id = await admin.fetchval(
            "INSERT INTO corpora (tenant_id, name) VALUES ('one-rule', gen_random_uuid()::text) RETURNING corpus_id"
        )
        document_id = await admin.fetchval(
            "INSERT INTO documents (tenant_id, corpus_id, filename) "
            "VALUES ('one-rule', $1, 'a.txt') RETURNING document_id",
            corpus_id,
        )
        chunk_id = await admin.fetchval(
            "INSERT INTO chunks (tenant_id, corpus_id, document_id, chunk_index, section, content, embedding, lexemes, "
            "metadata) VALUES ('one-rule', $1, $2, 0, 'Budget', 'Quokkas everywhere.', "
            f"array_fill(0.1, ARRAY[{TEST_DIMENSION}])::vector, 'forged:1A'::tsvector, "
            "jsonb_build_object('document_id', $2::bigint::text)) RETURNING chunk_id",
            corpus_id,
            document_id,
        )
        assert (
            await admin.fetchval("SELECT lexemes::text FROM chunks WHERE chunk_id = $1", chunk_id)
            == "'budget':1A 'everywher':3 'quokka':2"
        )
        await admin.execute("UPDATE chunks SET content = 'Wombats.', lexemes = 'forged' WHERE chunk_id = $1", chunk_id)
        assert (
            await admin.fetchval("SELECT lexemes::text FROM chunks WHERE chunk_id = $1", chunk_id)
            == "'budget':1A 'wombat':2"
        )
        assert (
            await admin.fetchval(
                "SELECT count(*) FROM information_schema.columns WHERE table_name = 'chunks' AND column_name = 'length'"
            )
            == 0
        )
    finally:
        await admin.execute("DELETE FROM documents WHERE tenant_id = 'one-rule'")
        await admin.close()
