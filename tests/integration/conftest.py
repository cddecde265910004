"""Database fixtures shared by the integration tests (the session's migrated PostgreSQL)."""

import asyncpg
import pytest
from knowledge_runtime.db.pool import Database


@pytest.fixture
async def admin(migrated_pg):
    """A superuser connection, to arrange and inspect rows outside any service's role."""
    connection = await asyncpg.connect(migrated_pg.url())
    yield connection
    await connection.close()


@pytest.fixture(scope="module")
async def content_db(migrated_pg):
    """The content-index service's own pool (its least-privilege role)."""
    db = await Database.connect(migrated_pg.url(user="knowledge_content_index"), max_size=10)
    yield db
    await db.close()
