"""The events outbox in PostgreSQL (role knowledge_ingest): written with each change, numbered
by a relay, read by watchers.

``publish`` is the one way an event is written: a statement of the transaction that makes the
change, so the event commits with it or not at all (with its corpus's placement at that moment,
read only once the corpus is gone: migration 0043). It does not number the event: a per-tenant
number taken by the writer would have to stay locked until its commit, serialising every writer
of the tenant behind each other's fsync. ``OutboxRelay`` numbers committed events instead, in
batches, one relay at a time (an advisory lock; every replica runs one): each gets the next seq
of its tenant in the order the relay finds them. A row is numbered only once it is committed and
after every row numbered before it, so sequence numbers are gapless and a watcher reading
``seq > cursor`` never skips an event that commits late, with two replicas writing too. Events of
one document keep their order: its changes take its row lock, so the later one's event is
inserted (and gets a higher id) only after the earlier one committed.

Wakeups: a writer's ``pg_notify(RELAY_CHANNEL)`` (delivered at commit) wakes the relays, the
relay's ``pg_notify(CHANNEL, tenant)`` wakes the tenant's watchers and every webhook deliverer
(``PostgresWakeups``); the same listener wakes idle workers on ``JOBS_CHANNEL`` when a job is
queued (``NOTIFY_JOBS``, sent by ``adapters/jobs.py``), and the deliverers on ``WEBHOOKS_CHANNEL``
when a webhook became due through the API.
"""

from __future__ import annotations

import asyncio
import functools
import json
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import asyncpg
import structlog
from knowledge_runtime.db.pool import Database, Transaction
from knowledge_runtime.periodic import Periodic
from knowledge_runtime.reach import Band, ScopePath

from knowledge_ingest.domain.events import Event, EventPlacement, EventType, NewEvent
from knowledge_ingest.domain.system_corpora import corpus_kind

log = structlog.get_logger("knowledge.ingest.events")

CHANNEL = "knowledge_events"  # payload: a tenant whose events were numbered
RELAY_CHANNEL = "knowledge_outbox"  # an event was committed: the relay has work
# A job was queued: idle workers (of every replica) claim it at commit instead of at their next
# poll. Sent in the transaction that queues it (adapters/jobs.py), so only a committed job wakes.
JOBS_CHANNEL = "knowledge_jobs"
NOTIFY_JOBS = f"SELECT pg_notify('{JOBS_CHANNEL}', '')"
# A webhook became due through the API (resumed, replayed, enabled again): the deliverers of
# every replica claim it at commit, not at their next poll (``webhooks/postgres.py``).
WEBHOOKS_CHANNEL = "knowledge_webhooks"
NOTIFY_WEBHOOKS = f"SELECT pg_notify('{WEBHOOKS_CHANNEL}', '')"
RELAY_LOCK = 7_318_201_018  # pg_advisory_xact_lock key: one relay numbers at a time
RELAY_BATCH = 5000
# An event keeps its document's access list as the change left it (migration 0062).
PUBLISH = """
WITH written AS (
    INSERT INTO events (tenant_id, type, document_id, corpus_id, detail, scope_path, confidentiality, corpus_system,
                        principals)
    SELECT $1, e.type, e.document_id, e.corpus_id, e.detail, c.scope_path, c.confidentiality, c.is_system,
           coalesce(d.principals, '{}')
    FROM unnest($2::text[], $3::bigint[], $4::bigint[], $5::jsonb[]) WITH ORDINALITY AS e(type, document_id, corpus_id, detail, ord)
    LEFT JOIN corpora c ON c.corpus_id = e.corpus_id AND (c.tenant_id = $1 OR (c.tenant_id IS NULL AND c.is_system))
    LEFT JOIN documents d ON d.document_id = e.document_id
    ORDER BY e.ord
    RETURNING event_id
)
SELECT pg_notify($6, ''), array_agg(event_id) FROM written
"""
LOCK_RELAY = "SELECT pg_advisory_xact_lock($1)"
# The oldest committed unnumbered events, numbered per tenant in id order after its head.
NUMBER_EVENTS = """
WITH pending AS (
    SELECT id, tenant_id FROM events WHERE seq IS NULL ORDER BY id LIMIT $1
), numbered AS (
    SELECT id, tenant_id, row_number() OVER (PARTITION BY tenant_id ORDER BY id) AS n,
           count(*) OVER (PARTITION BY tenant_id) AS c
    FROM pending
), heads AS (
    INSERT INTO event_heads AS h (tenant_id, last_seq)
    SELECT DISTINCT tenant_id, c FROM numbered
    ON CONFLICT (tenant_id) DO UPDATE SET last_seq = h.last_seq + EXCLUDED.last_seq
    RETURNING tenant_id, last_seq
), done AS (
    UPDATE events e SET seq = heads.last_seq - numbered.c + numbered.n
    FROM numbered JOIN heads USING (tenant_id)
    WHERE e.id = numbered.id
    RETURNING e.tenant_id
)
SELECT count(*) AS numbered, coalesce(array_agg(DISTINCT tenant_id), '{}') AS tenants FROM done
"""
NOTIFY_TENANTS = "SELECT pg_notify($1, t) FROM unnest($2::text[]) AS t"
# Each event with its corpus's placement as it is now (0043): the corpus row when it exists (so a
# rebinding applies from its commit on), else the placement recorded when the event was written;
# and its document's access list likewise (0062): the document row's while it exists, else the
# list recorded with the event. One statement, one snapshot: a rebinding or a list change committed
# before an event's change is seen with it.
READ_AFTER = """
SELECT e.seq, e.event_id, e.type, e.document_id, e.corpus_id, e.detail, e.create_time,
       coalesce(c.scope_path, e.scope_path) AS scope_path,
       coalesce(c.confidentiality, e.confidentiality) AS confidentiality,
       coalesce(c.is_system, e.corpus_system) AS corpus_system,
       CASE WHEN c.corpus_id IS NULL THEN e.tenant_id ELSE c.tenant_id END AS corpus_tenant,
       coalesce(d.principals, e.principals) AS principals
FROM events e
LEFT JOIN corpora c ON c.corpus_id = e.corpus_id AND (c.tenant_id = e.tenant_id OR (c.tenant_id IS NULL AND c.is_system))
LEFT JOIN documents d ON d.document_id = e.document_id
WHERE e.tenant_id = $1 AND e.seq IS NOT NULL AND e.seq > $2 ORDER BY e.seq LIMIT $3
"""
BOUNDS = """
SELECT coalesce((SELECT min(seq) FROM events WHERE tenant_id = $1 AND seq IS NOT NULL),
                coalesce((SELECT last_seq FROM event_heads WHERE tenant_id = $1), 0) + 1) AS first_retained,
       coalesce((SELECT last_seq FROM event_heads WHERE tenant_id = $1), 0) AS head
"""
# A prefix of each tenant's sequence: everything up to its newest event older than retention.
PRUNE = """
WITH cut AS (
    SELECT tenant_id, max(seq) AS through FROM events
    WHERE seq IS NOT NULL AND create_time < now() - make_interval(secs => $1) GROUP BY tenant_id
)
DELETE FROM events e USING cut WHERE e.tenant_id = cut.tenant_id AND e.seq <= cut.through
"""


async def publish(tx: Transaction, tenant: str, events: Sequence[NewEvent | None]) -> list[uuid.UUID]:
    """Write the events (None entries skipped) in the change's transaction; their event ids."""
    kept = [e for e in events if e is not None]
    if not kept:
        return []
    row = await tx.fetchrow(
        "publish_events",
        PUBLISH,
        tenant,
        [e.type.value for e in kept],
        [e.document_id for e in kept],
        [e.corpus_id for e in kept],
        [json.dumps(e.detail) for e in kept],
        RELAY_CHANNEL,
    )
    assert row is not None
    return list(row[1])


@functools.lru_cache(maxsize=4096)
def _node(path: str) -> ScopePath:
    return ScopePath.parse(path)


def _placement(row: asyncpg.Record) -> EventPlacement | None:
    if row["scope_path"] is None or row["confidentiality"] is None:
        return None
    kind = corpus_kind(row["corpus_tenant"], bool(row["corpus_system"]))
    return EventPlacement(_node(row["scope_path"]), Band(row["confidentiality"]), kind, tuple(row["principals"]))


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
        placement=_placement(row),
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

    async def number_committed(self) -> int:
        """Number the oldest committed unnumbered events (one relay at a time) and wake their
        tenants' watchers; how many were numbered."""
        async with self._db.transaction() as tx:
            await tx.execute("lock_relay", LOCK_RELAY, RELAY_LOCK)
            row = await tx.fetchrow("number_events", NUMBER_EVENTS, RELAY_BATCH)
            assert row is not None
            if row["tenants"]:
                await tx.execute("notify_tenants", NOTIFY_TENANTS, CHANNEL, list(row["tenants"]))
        return row["numbered"]

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
        """True when woken, False when the timeout passed first. A cancel always propagates:
        Python 3.11's ``asyncio.wait_for`` returned the result instead when the flag was set in the
        same loop turn as the cancel, so the relay's loop went on and its ``stop()`` never ended."""
        try:
            async with asyncio.timeout(timeout_s):
                await self._flag.wait()
        except TimeoutError:
            return False
        return True


@contextmanager
def _member(members: set[Wakeup]) -> Iterator[Wakeup]:
    """A new Wakeup in ``members`` for as long as the block runs."""
    wakeup = Wakeup()
    members.add(wakeup)
    try:
        yield wakeup
    finally:
        members.discard(wakeup)


class PostgresWakeups:
    """One LISTEN connection (from the pool, held while running) fanning NOTIFYs out to the
    watchers of each tenant, to the relay and to idle workers. A lost connection is taken again
    after ``retry_s``; everyone is woken then, since notifications sent meanwhile are lost (they read again; nothing
    is missed, because the read, not the notification, decides what is delivered)."""

    def __init__(self, db: Database, retry_s: float = 1.0) -> None:
        self._db = db
        self._watchers: dict[str, set[Wakeup]] = {}
        self._relays: set[Wakeup] = set()
        self._workers: set[Wakeup] = set()
        self._deliverers: set[Wakeup] = set()
        # Its step holds the connection until it is lost; the interval is the wait before the next.
        self._loop = Periodic("events_listener", self._listen_until_lost, retry_s)

    @contextmanager
    def relay(self) -> Iterator[Wakeup]:
        """Woken when an event was committed (the relay has work)."""
        with _member(self._relays) as wakeup:
            yield wakeup

    @contextmanager
    def jobs(self) -> Iterator[Wakeup]:
        """Woken when a job was queued (a worker has work)."""
        with _member(self._workers) as wakeup:
            yield wakeup

    @contextmanager
    def numbered(self) -> Iterator[Wakeup]:
        """Woken when any tenant's events were numbered (a webhook may have something to send)."""
        with _member(self._deliverers) as wakeup:
            yield wakeup

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
        for wakeup in (*self._watchers.get(str(payload), ()), *self._deliverers):
            wakeup.set()

    def _everyone_notified(self, connection: object, pid: int, channel: str, payload: object) -> None:
        """RELAY_CHANNEL wakes every relay, JOBS_CHANNEL every idle worker, WEBHOOKS_CHANNEL every
        deliverer (no payload)."""
        woken = {RELAY_CHANNEL: self._relays, WEBHOOKS_CHANNEL: self._deliverers}.get(channel, self._workers)
        for wakeup in tuple(woken):
            wakeup.set()

    def _wake_all(self) -> None:
        for wakeup in (*self._relays, *self._workers, *self._deliverers):
            wakeup.set()
        for watchers in self._watchers.values():
            for wakeup in watchers:
                wakeup.set()

    async def start(self) -> None:
        await self._loop.start()

    async def stop(self) -> None:
        await self._loop.stop()

    async def _listen_until_lost(self) -> None:
        try:
            async with self._db.pool.acquire() as connection:
                lost = asyncio.Event()

                def terminated(_connection: object, lost: asyncio.Event = lost) -> None:
                    lost.set()

                connection.add_termination_listener(terminated)
                await connection.add_listener(CHANNEL, self._notified)
                await connection.add_listener(RELAY_CHANNEL, self._everyone_notified)
                await connection.add_listener(JOBS_CHANNEL, self._everyone_notified)
                await connection.add_listener(WEBHOOKS_CHANNEL, self._everyone_notified)
                self._wake_all()
                try:
                    await lost.wait()
                finally:
                    connection.remove_termination_listener(terminated)
                    await _unlisten(connection, self._notified, self._everyone_notified)
        finally:
            # Notifications sent while nobody listened are lost: everyone reads again (watchers
            # otherwise wake on their heartbeat).
            self._wake_all()


async def _unlisten(connection: Any, notified: Callable[..., None], everyone: Callable[..., None]) -> None:
    """The connection's LISTENs removed before the pool takes it back, since its release runs no
    UNLISTEN (``db/pool.py``). If a removal fails or is cancelled (a stop during a stop) the
    connection is closed instead: the pool replaces it, and no pooled connection keeps listening."""
    try:
        if not connection.is_closed():
            await connection.remove_listener(CHANNEL, notified)
            await connection.remove_listener(RELAY_CHANNEL, everyone)
            await connection.remove_listener(JOBS_CHANNEL, everyone)
            await connection.remove_listener(WEBHOOKS_CHANNEL, everyone)
    except Exception as error:  # noqa: BLE001 - closed instead; what ended the listening goes on
        connection.terminate()
        log.info("events_listener_unlisten_failed", error_type=type(error).__name__)
    except BaseException:  # cancelled meanwhile
        connection.terminate()
        raise


class OutboxRelay:
    """Numbers committed events as they come (woken by the writers' notifications, and every
    ``poll_s`` in case one was lost). Every replica runs one; the advisory lock makes them take
    turns, each seeing what the one before it numbered."""

    def __init__(self, log: PostgresEventLog, wakeups: PostgresWakeups, poll_s: float = 1.0) -> None:
        self._log = log
        self._loop = Periodic("events_relay", self.number_batch, poll_s, wakeup=wakeups.relay)

    async def start(self) -> None:
        await self._loop.start()

    async def stop(self) -> None:
        await self._loop.stop()

    async def number_batch(self) -> bool:
        """True when a whole batch was numbered: more may be waiting."""
        return await self._log.number_committed() >= RELAY_BATCH
