"""The events outbox in PostgreSQL (role knowledge_ingest): written with each change, read by watchers.

``publish`` is the one way an event is written: the LAST statement of the transaction that makes
the change, so the event commits with it or not at all. It increments the tenant's
``event_heads.last_seq``, whose row lock it then holds until commit: the tenant's next publisher
waits for that commit, so sequence numbers are gapless and in commit order, and a watcher reading
``seq > cursor`` can never skip an event that commits later with a lower number (two replicas
writing concurrently included). Holding the lock only from the last statement to the commit keeps
the serialised part short. ``pg_notify`` (delivered at commit) wakes the watchers of the tenant.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import asyncpg
import structlog
from knowledge_runtime.db.pool import Database, Transaction

from knowledge_ingest.domain.events import Event, EventType, NewEvent

log = structlog.get_logger("knowledge.ingest.events")

CHANNEL = "knowledge_events"
# Data-modifying CTEs run whether or not the final SELECT reads them.
PUBLISH = """
WITH head AS (
    INSERT INTO event_heads AS h (tenant_id, last_seq) VALUES ($1, $2)
    ON CONFLICT (tenant_id) DO UPDATE SET last_seq = h.last_seq + $2
    RETURNING last_seq
), written AS (
    INSERT INTO events (tenant_id, seq, type, document_id, corpus_id, detail)
    SELECT $1, head.last_seq - $2 + e.ord, e.type, e.document_id, e.corpus_id, e.detail
    FROM head, unnest($3::text[], $4::bigint[], $5::bigint[], $6::jsonb[])
        WITH ORDINALITY AS e(type, document_id, corpus_id, detail, ord)
    RETURNING seq
)
SELECT pg_notify($7, $1), (SELECT max(seq) FROM written)
"""
READ_AFTER = """
SELECT seq, event_id, type, document_id, corpus_id, detail, create_time FROM events
WHERE tenant_id = $1 AND seq > $2 ORDER BY seq LIMIT $3
"""
BOUNDS = """
SELECT coalesce((SELECT min(seq) FROM events WHERE tenant_id = $1),
                coalesce((SELECT last_seq FROM event_heads WHERE tenant_id = $1), 0) + 1) AS first_retained,
       coalesce((SELECT last_seq FROM event_heads WHERE tenant_id = $1), 0) AS head
"""
# A prefix of each tenant's sequence: everything up to its newest event older than retention.
PRUNE = """
WITH cut AS (
    SELECT tenant_id, max(seq) AS through FROM events
    WHERE create_time < now() - make_interval(secs => $1) GROUP BY tenant_id
)
DELETE FROM events e USING cut WHERE e.tenant_id = cut.tenant_id AND e.seq <= cut.through
"""


async def publish(tx: Transaction, tenant: str, events: Sequence[NewEvent | None]) -> int | None:
    """Write the events (None entries skipped) as the transaction's last statement; the seq of the
    last one, None when there were none."""
    kept = [e for e in events if e is not None]
    if not kept:
        return None
    row = await tx.fetchrow(
        "publish_events",
        PUBLISH,
        tenant,
        len(kept),
        [e.type.value for e in kept],
        [e.document_id for e in kept],
        [e.corpus_id for e in kept],
        [json.dumps(e.detail) for e in kept],
        CHANNEL,
    )
    assert row is not None
    return row[1]


def _event(row: asyncpg.Record) -> Event:
    detail = row["detail"]
    return Event(
        seq=row["seq"],
        event_id=row["event_id"],
        type=EventType(row["type"]),
        document_id=row["document_id"],
        corpus_id=row["corpus_id"],
        time=row["create_time"],
        detail=json.loads(detail) if isinstance(detail, str) else dict(detail),
    )


class PostgresEventLog:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def read_after(self, tenant: str, after: int, limit: int) -> list[Event]:
        return [_event(r) for r in await self._db.fetch("read_events", READ_AFTER, tenant, after, limit)]

    async def bounds(self, tenant: str) -> tuple[int, int]:
        row = await self._db.fetchrow("event_bounds", BOUNDS, tenant)
        assert row is not None
        return row["first_retained"], row["head"]

    async def prune(self, retention_s: float) -> int:
        status = await self._db.execute("prune_events", PRUNE, float(retention_s))
        return int(status.split()[-1])


class Wakeup:
    """One watcher's flag: set when its tenant may have new events."""

    def __init__(self) -> None:
        self._flag = asyncio.Event()

    def clear(self) -> None:
        self._flag.clear()

    def set(self) -> None:
        self._flag.set()

    async def wait(self, timeout_s: float) -> bool:
        """True when woken, False when the timeout passed first."""
        try:
            await asyncio.wait_for(self._flag.wait(), timeout=timeout_s)
        except TimeoutError:
            return False
        return True


class PostgresWakeups:
    """One LISTEN connection (from the pool, held while running) fanning NOTIFYs out to the
    watchers of each tenant. A lost connection is taken again after ``retry_s``; every watcher is
    woken then, since notifications sent meanwhile are lost (it reads again; nothing is missed,
    because the read, not the notification, decides what is delivered)."""

    def __init__(self, db: Database, retry_s: float = 1.0) -> None:
        self._db = db
        self._retry_s = retry_s
        self._watchers: dict[str, set[Wakeup]] = {}
        self._task: asyncio.Task[None] | None = None

    @contextmanager
    def subscribe(self, tenant: str) -> Iterator[Wakeup]:
        wakeup = Wakeup()
        self._watchers.setdefault(tenant, set()).add(wakeup)
        try:
            yield wakeup
        finally:
            watchers = self._watchers.get(tenant, set())
            watchers.discard(wakeup)
            if not watchers:
                self._watchers.pop(tenant, None)

    def _notified(self, connection: object, pid: int, channel: str, payload: object) -> None:
        for wakeup in self._watchers.get(str(payload), ()):
            wakeup.set()

    def _wake_all(self) -> None:
        for watchers in self._watchers.values():
            for wakeup in watchers:
                wakeup.set()

    async def start(self) -> None:
        self._task = asyncio.create_task(self._listen())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    async def _listen(self) -> None:
        while True:
            try:
                async with self._db.pool.acquire() as connection:
                    lost = asyncio.Event()
                    connection.add_termination_listener(lambda _c, lost=lost: lost.set())
                    await connection.add_listener(CHANNEL, self._notified)
                    self._wake_all()
                    try:
                        await lost.wait()
                    finally:
                        if not connection.is_closed():
                            await connection.remove_listener(CHANNEL, self._notified)
            except asyncio.CancelledError:
                raise
            except Exception as error:  # noqa: BLE001 - the database is away: watchers wake on their heartbeat
                log.warning("events_listener_lost", error_type=type(error).__name__)
            self._wake_all()
            await asyncio.sleep(self._retry_s)
