"""The relay's wake-ups on real PostgreSQL: its own replica's watchers are woken in process once
the numbering commits, another replica's through the announcement it sends after the commit."""

import asyncio

import pytest
from knowledge_ingest.adapters.outbox import OutboxRelay, PostgresEventLog, PostgresWakeups, publish
from knowledge_ingest.domain.events import EventType, NewEvent
from knowledge_runtime.db.pool import Database

pytestmark = pytest.mark.integration

TENANT = "t-events-announce"


async def test_watchers_of_the_relays_replica_and_of_another_replica_are_both_woken(migrated_pg):
    url = migrated_pg.url(user="knowledge_ingest")
    here, there = await Database.connect(url, max_size=4), await Database.connect(url, max_size=4)
    wakeups = [PostgresWakeups(here), PostgresWakeups(there)]
    relay = OutboxRelay(PostgresEventLog(here), wakeups[0], poll_s=60)  # only this replica numbers
    for part in (*wakeups, relay):
        await part.start()
    try:
        await here.execute("t", "INSERT INTO tenants (tenant_id) VALUES ($1) ON CONFLICT DO NOTHING", TENANT)
        with wakeups[0].subscribe(TENANT) as local, wakeups[1].subscribe(TENANT) as remote:
            await asyncio.sleep(0.5)  # both LISTENs in place, the relay's first round done
            for _ in range(3):
                local.clear()
                remote.clear()
                async with there.transaction() as tx:
                    await publish(tx, TENANT, [NewEvent(EventType.CORPUS_CREATED, None, 1)])
                assert await local.wait(5) and await remote.wait(5)
        events = await PostgresEventLog(there).read_after(TENANT, 0, 10)
        assert [e.seq for e in events] == [1, 2, 3]  # each was numbered before its watchers woke
    finally:
        await relay.stop()
        for part in wakeups:
            await part.stop()
        await here.close()
        await there.close()


async def test_a_replica_ignores_its_own_announcement_and_wakes_for_another_one(migrated_pg):
    db = await Database.connect(migrated_pg.url(user="knowledge_ingest"), max_size=2)
    wakeups = PostgresWakeups(db)
    await wakeups.start()
    try:
        with wakeups.subscribe(TENANT) as wakeup:
            await asyncio.sleep(0.5)
            wakeup.clear()
            await PostgresEventLog(db).announce([TENANT], wakeups.sender)
            assert not await wakeup.wait(0.5)  # it woke its watchers itself, before announcing
            await PostgresEventLog(db).announce([TENANT], "another-replica")
            assert await wakeup.wait(5)
    finally:
        await wakeups.stop()
        await db.close()
