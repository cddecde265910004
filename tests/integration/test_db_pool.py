"""The pool on real PostgreSQL: a released connection costs no reset round trip, and the holders of
session state (a LISTEN connection) give it back clean, since no reset query cleans up after them."""

import asyncio

import asyncpg
import pytest
from knowledge_ingest.events.outbox import RELAY_CHANNEL, PostgresWakeups
from knowledge_runtime.db.pool import Database

pytestmark = pytest.mark.integration


async def test_a_released_connection_runs_no_reset_statement(migrated_pg):
    db = await Database.connect(migrated_pg.url(), min_size=1, max_size=1)
    try:
        ran: list[str] = []
        async with db.pool.acquire() as connection:  # the pool's only connection: every call below uses it
            connection.add_query_logger(lambda logged: ran.append(logged.query))
        assert await db.fetchval("one", "SELECT 1") == 1
        async with db.transaction() as tx:
            await tx.fetchval("local_setting", "SELECT set_config('application_name', 'within', true)")
        assert await db.fetchval("name", "SELECT current_setting('application_name')") != "within"
        assert ran == [
            "SELECT 1",
            "BEGIN;",
            "SELECT set_config('application_name', 'within', true)",
            "COMMIT;",
            "SELECT current_setting('application_name')",
        ]
    finally:
        await db.close()


async def test_the_job_listener_gives_its_connection_back_listening_to_nothing(migrated_pg):
    db = await Database.connect(migrated_pg.url(user="knowledge_ingest"), min_size=1, max_size=1)
    wakeups = PostgresWakeups(db)
    try:
        await wakeups.start()
        with wakeups.jobs() as wakeup:
            assert await wakeup.wait(5)  # starting wakes everyone once its LISTEN is in place
        await wakeups.stop()
        listening = await asyncio.wait_for(db.fetchval("channels", "SELECT count(*) FROM pg_listening_channels()"), 5)
        assert listening == 0
    finally:
        await wakeups.stop()
        await db.close()


async def test_a_job_listener_that_cannot_unlisten_closes_its_connection_rather_than_return_it_listening(
    migrated_pg, monkeypatch
):
    db = await Database.connect(migrated_pg.url(user="knowledge_ingest"), min_size=1, max_size=1)
    wakeups = PostgresWakeups(db)
    removed = asyncpg.Connection.remove_listener

    async def failing(self, channel, callback):
        if channel == RELAY_CHANNEL:
            raise RuntimeError("the removal failed half-way")
        await removed(self, channel, callback)

    try:
        await wakeups.start()
        with wakeups.jobs() as wakeup:
            assert await wakeup.wait(5)
        monkeypatch.setattr(asyncpg.Connection, "remove_listener", failing)
        await wakeups.stop()
        listening = await asyncio.wait_for(db.fetchval("channels", "SELECT count(*) FROM pg_listening_channels()"), 5)
        assert listening == 0  # the pool's one connection is a new one
    finally:
        monkeypatch.undo()
        await wakeups.stop()
        await db.close()
