"""Ordered SQL migrations for the whole schema, applied idempotently under an advisory lock.

Files are ``NNNN_name.sql`` in this package's ``migrations`` folder; each one runs in its
own transaction and is recorded with its checksum, so an edited migration that already ran
is refused instead of silently diverging. ``{{EMBEDDING_DIMENSION}}`` is replaced by the
embedding model's dimension; a database made for another dimension is refused by name.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass
from importlib import resources

import asyncpg

# pg_advisory_lock key: any constant shared by every migrator of this schema.
MIGRATION_LOCK_KEY = 0x6B6E6F776C656467  # "knowledg"
_NAME = re.compile(r"^(\d{4})_[a-z0-9_]+\.sql$")

CREATE_LEDGER = """
CREATE TABLE IF NOT EXISTS schema_migrations (
    version    integer PRIMARY KEY,
    name       text NOT NULL,
    checksum   text NOT NULL,
    applied_at timestamptz NOT NULL DEFAULT now()
)
"""
APPLIED = "SELECT version, checksum FROM schema_migrations"
RECORD = "INSERT INTO schema_migrations (version, name, checksum) VALUES ($1, $2, $3)"
EMBEDDING_TYPE = """
SELECT format_type(a.atttypid, a.atttypmod)
FROM pg_attribute a
WHERE a.attrelid = 'chunks'::regclass AND a.attname = 'embedding'
"""


class MigrationError(RuntimeError):
    """The database cannot be brought to this schema; the message says why and what to set."""


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    sql: str

    @property
    def checksum(self) -> str:
        return hashlib.sha256(self.sql.encode()).hexdigest()


def load_migrations() -> list[Migration]:
    folder = resources.files("knowledge_runtime.db") / "migrations"
    found = []
    for entry in folder.iterdir():
        match = _NAME.match(entry.name)
        if match:
            found.append(Migration(int(match.group(1)), entry.name, entry.read_text()))
    found.sort(key=lambda m: m.version)
    versions = [m.version for m in found]
    if len(set(versions)) != len(versions):
        raise MigrationError(f"duplicate migration versions: {versions}")
    return found


def render(sql: str, embedding_dimension: int) -> str:
    return sql.replace("{{EMBEDDING_DIMENSION}}", str(embedding_dimension))


async def migrate(dsn: str, *, embedding_dimension: int) -> list[str]:
    """Apply what is missing; returns the names applied now (empty when up to date)."""
    if not 1 <= embedding_dimension <= 16000:
        raise MigrationError(f"KNOWLEDGE_EMBEDDING_DIMENSION must be in 1..16000, got {embedding_dimension}")
    migrations = load_migrations()
    connection = await asyncpg.connect(dsn)
    applied_now: list[str] = []
    try:
        await connection.execute("SELECT pg_advisory_lock($1)", MIGRATION_LOCK_KEY)
        try:
            await connection.execute(CREATE_LEDGER)
            applied = {row["version"]: row["checksum"] for row in await connection.fetch(APPLIED)}
            for migration in migrations:
                if migration.version in applied:
                    if applied[migration.version] != migration.checksum:
                        raise MigrationError(
                            f"migration {migration.name} changed after it was applied; add a new migration instead"
                        )
                    continue
                async with connection.transaction():
                    await connection.execute(render(migration.sql, embedding_dimension))
                    await connection.execute(RECORD, migration.version, migration.name, migration.checksum)
                applied_now.append(migration.name)
            await _check_dimension(connection, embedding_dimension)
        finally:
            await connection.execute("SELECT pg_advisory_unlock($1)", MIGRATION_LOCK_KEY)
    finally:
        await connection.close()
    return applied_now


async def _check_dimension(connection: asyncpg.Connection, embedding_dimension: int) -> None:
    column_type = await connection.fetchval(EMBEDDING_TYPE)
    expected = f"vector({embedding_dimension})"
    if column_type != expected:
        raise MigrationError(
            f"the database stores {column_type} but the embedding model gives {expected} "
            "(KNOWLEDGE_EMBEDDING_MODEL / KNOWLEDGE_EMBEDDING_DIMENSION); use a new database or re-embed"
        )
