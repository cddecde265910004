"""Blob rows in PostgreSQL (role knowledge_content_index).

The per-hash lock is a transaction-level advisory lock, ``pg_advisory_xact_lock(namespace,
int4 of the hash)``, taken first in every transaction that changes a hash's row or its file; it
also covers the moment between a row's deletion and the removal of its file, which no row lock
can (the row is gone). A transaction that needs several hashes' locks (the orphan-file sweep)
takes them in ascending key order, so no two transactions ever wait for each other in a cycle.
Row locks then order us against the other services: a row that gains a reference is
``FOR KEY SHARE``-locked by that insert's foreign-key check, which GC's ``FOR UPDATE`` waits for
before it re-checks for references.

What references a blob is the :data:`REFERENCING_TABLES` registry, read live on every call; an
integration test fails when the schema gains a foreign key to ``content_blobs`` it does not list.
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import timedelta

import asyncpg
from knowledge_runtime.db.pool import Database, Transaction

from knowledge_content_index.domain.errors import BlobInUse
from knowledge_content_index.domain.identity import ContentHash
from knowledge_content_index.domain.model import Blob, BlobReference, NewBlob, ReferenceCounts

# First key of every per-hash advisory lock ("blob"); the second is 32 bits of the hash.
LOCK_NAMESPACE = 0x626C6F62


@dataclass(frozen=True, slots=True)
class ReferencingTable:
    """A table whose rows reference blobs; each has blob_id, tenant_id, corpus_id, create_time."""

    entity_type: str
    table: str
    id_column: str


REFERENCING_TABLES = (
    ReferencingTable("document", "documents", "document_id"),
    ReferencingTable("ingest_job", "ingest_jobs", "job_id"),
)
# Tables with a foreign key to content_blobs that are not references (GC ignores them).
NON_REFERENCING_TABLES = ("content_blob_writers",)


def _referenced(by_tenant: str | None = None) -> str:
    tenant = f" AND r.tenant_id = {by_tenant}" if by_tenant else ""
    return " OR ".join(
        f"EXISTS (SELECT 1 FROM {t.table} r WHERE r.blob_id = b.blob_id{tenant})" for t in REFERENCING_TABLES
    )


_COLUMNS = "b.blob_id, b.content_hash, b.size_bytes, b.storage_uri, b.mime_type, b.create_time"
# What tenant $2 is shown: the blob as it first came to that tenant, not when another tenant stored it.
_TENANT_COLUMNS = _COLUMNS.replace(
    "b.create_time",
    "COALESCE((SELECT w.first_write_time FROM content_blob_writers w WHERE w.blob_id = b.blob_id "
    "AND w.tenant_id = $2), b.create_time) AS create_time",
)
_SEEN_BY_TENANT = (
    "(EXISTS (SELECT 1 FROM content_blob_writers w WHERE w.blob_id = b.blob_id AND w.tenant_id = $2) OR "
    + _referenced(by_tenant="$2")
    + ")"
)

HASH_LOCK = "SELECT pg_advisory_xact_lock($1::int4, $2::int4)"
FIND_FOR_WRITE = f"SELECT {_COLUMNS} FROM content_blobs b WHERE b.content_hash = $1 FOR NO KEY UPDATE"
PEEK = f"SELECT {_COLUMNS} FROM content_blobs b WHERE b.content_hash = $1"
PEEK_MANY = f"SELECT {_COLUMNS} FROM content_blobs b WHERE b.content_hash = ANY($1::text[])"
INSERT_BLOB = """
INSERT INTO content_blobs (content_hash, size_bytes, mime_type, storage_uri)
VALUES ($1, $2, $3, $4)
ON CONFLICT (content_hash) DO NOTHING
RETURNING blob_id
"""
RECORD_WRITER = """
INSERT INTO content_blob_writers (blob_id, tenant_id) VALUES ($1, $2)
ON CONFLICT (blob_id, tenant_id) DO NOTHING
"""
TOUCH = "UPDATE content_blobs SET last_write_time = now() WHERE blob_id = $1"
REPOINT = f"""
UPDATE content_blobs AS b SET storage_uri = $2, last_write_time = now()
WHERE b.blob_id = $1
RETURNING {_COLUMNS}
"""
MOVE = "UPDATE content_blobs SET storage_uri = $2 WHERE blob_id = $1"
LOCK_FOR_DELETE = "SELECT blob_id FROM content_blobs WHERE blob_id = $1 FOR UPDATE"
# A statement of its own after LOCK_FOR_DELETE, so its snapshot sees every reference committed
# while we waited for the row lock.
DELETE_IF_COLLECTABLE = f"""
DELETE FROM content_blobs AS b
WHERE b.blob_id = $1 AND b.last_write_time < now() - $2::interval AND NOT ({_referenced()})
RETURNING {_COLUMNS}
"""
SEEN_BY = f"SELECT {_SEEN_BY_TENANT} FROM content_blobs b WHERE b.blob_id = $1"
TENANT_ISOLATES = "SELECT isolate_content FROM tenants WHERE tenant_id = $1"
VISIBLE = f"SELECT {_TENANT_COLUMNS} FROM content_blobs b WHERE b.blob_id = $1 AND {_SEEN_BY_TENANT}"
VISIBLE_BY_HASH = f"SELECT {_TENANT_COLUMNS} FROM content_blobs b WHERE b.content_hash = $1 AND {_SEEN_BY_TENANT}"
# The caller tenant's references only: another tenant's are none of its business (shared blobs).
COUNT_REFERENCES = "SELECT " + ", ".join(
    f"(SELECT count(*) FROM {t.table} WHERE blob_id = $1 AND tenant_id = $2) AS {t.entity_type}"
    for t in REFERENCING_TABLES
)
TENANT_REFERENCES = (
    " UNION ALL ".join(
        f"SELECT '{t.entity_type}' AS entity_type, {t.id_column}::text AS entity_id, corpus_id, create_time "
        f"FROM {t.table} WHERE blob_id = $1 AND tenant_id = $2"
        for t in REFERENCING_TABLES
    )
    + " ORDER BY create_time, entity_type, entity_id"
)
COLLECTABLE = f"""
SELECT {_COLUMNS} FROM content_blobs b
WHERE b.last_write_time < now() - $1::interval AND NOT ({_referenced()})
ORDER BY b.blob_id
LIMIT $2
"""
ROWS_AFTER = f"SELECT {_COLUMNS} FROM content_blobs b WHERE b.blob_id > $1 ORDER BY b.blob_id LIMIT $2"
WRITERS = "SELECT tenant_id FROM content_blob_writers WHERE blob_id = $1 ORDER BY first_write_time, tenant_id"


def lock_key(content_hash: ContentHash) -> int:
    """32 bits of the hash as a signed int4 (a collision only serialises two hashes)."""
    return int.from_bytes(hashlib.sha256(str(content_hash).encode()).digest()[:4], "big", signed=True)


def _blob(row: asyncpg.Record) -> Blob:
    content_hash = ContentHash.parse(row["content_hash"])
    if content_hash is None:
        raise ValueError(f"content_blobs row {row['blob_id']} holds a malformed hash")
    return Blob(
        blob_id=row["blob_id"],
        content_hash=content_hash,
        size_bytes=row["size_bytes"],
        storage_uri=row["storage_uri"],
        mime_type=row["mime_type"],
        create_time=row["create_time"],
    )


class PostgresLockedHash:
    def __init__(self, tx: Transaction, content_hash: ContentHash) -> None:
        self._tx = tx
        self._hash = content_hash

    async def find(self) -> Blob | None:
        row = await self._tx.fetchrow("blob_find_for_write", FIND_FOR_WRITE, str(self._hash))
        return None if row is None else _blob(row)

    async def insert(self, blob: NewBlob, tenant: str) -> tuple[Blob, bool]:
        """Insert-or-find: ``ON CONFLICT DO NOTHING``, then read; True when this call inserted."""
        inserted = await self._tx.fetchval(
            "blob_insert", INSERT_BLOB, str(blob.content_hash), blob.size_bytes, blob.mime_type, blob.storage_uri
        )
        found = await self.find()
        assert found is not None
        await self._tx.execute("blob_record_writer", RECORD_WRITER, found.blob_id, tenant)
        return found, inserted is not None

    async def seen_by(self, blob_id: int, tenant: str) -> bool:
        return bool(await self._tx.fetchval("blob_seen_by", SEEN_BY, blob_id, tenant))

    async def touch(self, blob_id: int, tenant: str) -> None:
        await self._tx.execute("blob_touch", TOUCH, blob_id)
        await self._tx.execute("blob_record_writer", RECORD_WRITER, blob_id, tenant)

    async def repoint(self, blob_id: int, storage_uri: str, tenant: str) -> Blob:
        row = await self._tx.fetchrow("blob_repoint", REPOINT, blob_id, storage_uri)
        assert row is not None
        await self._tx.execute("blob_record_writer", RECORD_WRITER, blob_id, tenant)
        return _blob(row)

    async def move(self, blob_id: int, storage_uri: str) -> None:
        await self._tx.execute("blob_move", MOVE, blob_id, storage_uri)

    async def delete_if_collectable(self, blob_id: int, min_age: timedelta) -> Blob | None:
        if await self._tx.fetchval("blob_lock_for_delete", LOCK_FOR_DELETE, blob_id) is None:
            return None
        row = await self._tx.fetchrow("blob_delete_if_collectable", DELETE_IF_COLLECTABLE, blob_id, min_age)
        return None if row is None else _blob(row)


class PostgresBlobs:
    def __init__(self, db: Database) -> None:
        self._db = db

    @asynccontextmanager
    async def locked(self, content_hash: ContentHash) -> AsyncIterator[PostgresLockedHash]:
        async with self.locked_all([content_hash]) as (held,):
            yield held

    @asynccontextmanager
    async def locked_all(self, content_hashes: Sequence[ContentHash]) -> AsyncIterator[list[PostgresLockedHash]]:
        try:
            async with self._db.transaction() as tx:
                # Ascending and once per key: two hashes whose keys collide share one lock.
                for key in sorted({lock_key(h) for h in content_hashes}):
                    await tx.execute("blob_hash_lock", HASH_LOCK, LOCK_NAMESPACE, key)
                yield [PostgresLockedHash(tx, h) for h in content_hashes]
        except asyncpg.ForeignKeyViolationError:
            # A reference the registry does not know about; the transaction is rolled back.
            raise BlobInUse() from None

    async def tenant_isolates_content(self, tenant: str) -> bool:
        return bool(await self._db.fetchval("tenant_isolates_content", TENANT_ISOLATES, tenant))

    async def peek(self, content_hash: ContentHash) -> Blob | None:
        row = await self._db.fetchrow("blob_peek", PEEK, str(content_hash))
        return None if row is None else _blob(row)

    async def peek_digests(self, digests: Sequence[str]) -> list[Blob]:
        if not digests:
            return []
        hashes = [str(ContentHash(digest, keyed)) for digest in digests for keyed in (False, True)]
        rows = await self._db.fetch("blob_peek_many", PEEK_MANY, hashes)
        return [_blob(row) for row in rows]

    async def visible(self, blob_id: int, tenant: str) -> Blob | None:
        row = await self._db.fetchrow("blob_visible", VISIBLE, blob_id, tenant)
        return None if row is None else _blob(row)

    async def visible_by_hash(self, content_hash: ContentHash, tenant: str) -> Blob | None:
        row = await self._db.fetchrow("blob_visible_by_hash", VISIBLE_BY_HASH, str(content_hash), tenant)
        return None if row is None else _blob(row)

    async def count_references(self, blob_id: int, tenant: str) -> ReferenceCounts:
        row = await self._db.fetchrow("blob_count_references", COUNT_REFERENCES, blob_id, tenant)
        assert row is not None
        return ReferenceCounts(tuple((t.entity_type, row[t.entity_type]) for t in REFERENCING_TABLES))

    async def tenant_references(self, blob_id: int, tenant: str) -> list[BlobReference]:
        rows = await self._db.fetch("blob_tenant_references", TENANT_REFERENCES, blob_id, tenant)
        return [
            BlobReference(row["entity_type"], row["entity_id"], row["corpus_id"], row["create_time"]) for row in rows
        ]

    async def collectable(self, min_age: timedelta, limit: int | None) -> list[Blob]:
        rows = await self._db.fetch("blob_collectable", COLLECTABLE, min_age, limit)
        return [_blob(row) for row in rows]

    async def rows_after(self, blob_id: int, limit: int) -> list[Blob]:
        rows = await self._db.fetch("blob_rows_after", ROWS_AFTER, blob_id, limit)
        return [_blob(row) for row in rows]

    async def writers(self, blob_id: int) -> list[str]:
        rows = await self._db.fetch("blob_writers", WRITERS, blob_id)
        return [row["tenant_id"] for row in rows]
