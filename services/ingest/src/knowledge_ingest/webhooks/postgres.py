"""Webhooks and their delivery attempts in PostgreSQL (role knowledge_ingest; migration 0065).

``PostgresWebhooks`` is what the API changes; every change bumps the webhook's ``version``.
``PostgresDeliveries`` is the deliverer's side: it leases due webhooks (``FOR UPDATE SKIP LOCKED``,
so replicas claim different ones), and every write it makes afterwards names its lease and the
version it read, in one statement with the attempt it records: a replica whose lease was taken
over, or whose webhook was changed, paused or deleted meanwhile, writes nothing and stops.
"""

from __future__ import annotations

import datetime
import uuid
from dataclasses import dataclass

import asyncpg
from knowledge_runtime.db.pool import Database
from knowledge_runtime.reach import Band, ScopePath

from knowledge_ingest.domain.events import Event
from knowledge_ingest.domain.model import Page
from knowledge_ingest.domain.webhooks import (
    AfterFailure,
    Attempt,
    Delivery,
    Registrant,
    Webhook,
    WebhookChanges,
    WebhookState,
    disabled_event,
)
from knowledge_ingest.events.outbox import NOTIFY_WEBHOOKS, publish
from knowledge_ingest.tenants.postgres import ENSURE_TENANT

COLUMNS = (
    "webhook_id, tenant_id, url, event_types, description, state, disabled_reason, scope_path, clearance, "
    "created_by, capabilities, principals, cursor, failed_attempts, next_attempt_time, failing_since, "
    "previous_secret_expire_time, create_time, update_time, version"
)
HEAD = "coalesce((SELECT last_seq FROM event_heads WHERE tenant_id = $1), 0)"
# From the tenant's newest event on; at most $10 webhooks per tenant (two racing creates may both
# pass: the limit bounds a tenant's listing, it is not an invariant anything relies on).
CREATE = f"""
INSERT INTO webhooks (tenant_id, url, event_types, description, scope_path, clearance, created_by, capabilities,
                      principals, secret_sealed, cursor)
SELECT $1, $2, $3, $4, $5, $6, $7, $8, $9, $11, {HEAD}
WHERE (SELECT count(*) FROM webhooks WHERE tenant_id = $1) < $10
RETURNING {COLUMNS}
"""
LIST = f"SELECT {COLUMNS} FROM webhooks WHERE tenant_id = $1 ORDER BY webhook_id"
GET = f"SELECT {COLUMNS} FROM webhooks WHERE tenant_id = $1 AND webhook_id = $2"
# ACTIVE on a disabled webhook enables it again: its failures forgotten, the next attempt due now.
UPDATE = f"""
UPDATE webhooks SET
    state = coalesce($3, state),
    disabled_reason = CASE WHEN $3 IS NULL THEN disabled_reason ELSE '' END,
    failed_attempts = CASE WHEN $3 = 'active' AND state = 'disabled' THEN 0 ELSE failed_attempts END,
    failing_since = CASE WHEN $3 = 'active' AND state = 'disabled' THEN NULL ELSE failing_since END,
    next_attempt_time = CASE WHEN $3 = 'active' AND state = 'disabled' THEN now() ELSE next_attempt_time END,
    event_types = coalesce($4, event_types),
    description = coalesce($5, description),
    version = version + 1, update_time = now()
WHERE tenant_id = $1 AND webhook_id = $2
RETURNING {COLUMNS}
"""
DELETE = "DELETE FROM webhooks WHERE tenant_id = $1 AND webhook_id = $2"
ROTATE = f"""
UPDATE webhooks SET previous_secret_sealed = secret_sealed, secret_sealed = $3,
    previous_secret_expire_time = now() + make_interval(secs => $4), version = version + 1, update_time = now()
WHERE tenant_id = $1 AND webhook_id = $2
RETURNING {COLUMNS}
"""
REPLAY = f"""
UPDATE webhooks SET cursor = $3, failed_attempts = 0, failing_since = NULL, next_attempt_time = now(),
    version = version + 1, update_time = now()
WHERE tenant_id = $1 AND webhook_id = $2
RETURNING {COLUMNS}
"""
DELIVERY_COLUMNS = (
    "delivery_id, event_id, event_seq, event_type, attempt, attempt_time, status_code, latency_ms, delivered, error"
)
LIST_DELIVERIES = f"""
SELECT {DELIVERY_COLUMNS} FROM webhook_deliveries
WHERE webhook_id = $1 AND ($2 = 0 OR delivery_id < $2) ORDER BY delivery_id DESC LIMIT $3
"""

# ---- the deliverer's statements ----

# Due active webhooks with events after their cursor and no live lease, the longest waiting first.
CLAIM = f"""
WITH due AS (
    SELECT w.webhook_id FROM webhooks w JOIN event_heads h ON h.tenant_id = w.tenant_id
    WHERE w.state = 'active' AND w.next_attempt_time <= now() AND h.last_seq > w.cursor
      AND (w.lease_expire_time IS NULL OR w.lease_expire_time < now())
    ORDER BY w.next_attempt_time LIMIT $3
    FOR UPDATE OF w SKIP LOCKED
)
UPDATE webhooks w SET lease_owner = $1, lease_expire_time = now() + make_interval(secs => $2)
FROM due WHERE w.webhook_id = due.webhook_id
RETURNING {", ".join(f"w.{c.strip()}" for c in COLUMNS.split(","))}, w.secret_sealed,
          CASE WHEN w.previous_secret_expire_time > now() THEN w.previous_secret_sealed END AS previous_sealed
"""
HELD = "webhook_id = $1 AND lease_owner = $2 AND version = $3 AND state = 'active'"
# Past events that are not the webhook's; the lease renewed.
ADVANCE = f"""
UPDATE webhooks SET cursor = $4, failed_attempts = 0, lease_expire_time = now() + make_interval(secs => $5)
WHERE {HELD}
"""
# Before each attempt: still held, still active, unchanged (a pause or an update stops the walk
# before the next send, not only at the write after it); the lease renewed.
RENEW = f"UPDATE webhooks SET lease_expire_time = now() + make_interval(secs => $4) WHERE {HELD}"
# Acknowledged events: the cursor moves on, failures are forgotten, the lease renewed, the
# attempts recorded; in one statement, and only while the lease is held.
DELIVERED = f"""
WITH moved AS (
    UPDATE webhooks SET cursor = $4, failed_attempts = 0, failing_since = NULL,
        lease_expire_time = now() + make_interval(secs => $5)
    WHERE {HELD}
    RETURNING webhook_id
)
INSERT INTO webhook_deliveries (webhook_id, event_id, event_seq, event_type, attempt, attempt_time, status_code,
                                latency_ms, delivered, error)
SELECT moved.webhook_id, a.event_id, a.seq, a.type, a.attempt, a.at, a.status_code, a.latency_ms, true, ''
FROM moved, unnest($6::uuid[], $7::bigint[], $8::text[], $9::int[], $10::timestamptz[], $11::int[], $12::int[])
    AS a(event_id, seq, type, attempt, at, status_code, latency_ms)
"""
FAILED = f"""
WITH counted AS (
    UPDATE webhooks SET failed_attempts = $4, failing_since = $5, next_attempt_time = $6,
        state = CASE WHEN $7 = '' THEN state ELSE 'disabled' END, disabled_reason = $7,
        update_time = CASE WHEN $7 = '' THEN update_time ELSE now() END
    WHERE {HELD}
    RETURNING webhook_id
)
INSERT INTO webhook_deliveries (webhook_id, event_id, event_seq, event_type, attempt, status_code, latency_ms,
                                delivered, error)
SELECT webhook_id, $8::uuid, $9::bigint, $10::text, $4::int, $11::int, $12::int, false, $13::text FROM counted
RETURNING delivery_id
"""
# The webhook.disabled event names no corpus: it is placed at the webhook's node and clearance.
PLACE_EVENT = "UPDATE events SET scope_path = $2, confidentiality = $3, corpus_system = false WHERE event_id = $1"
# ``requeue``: to the back of the queue (a slice ended with more to send).
RELEASE = """
UPDATE webhooks SET lease_owner = NULL, lease_expire_time = NULL,
    next_attempt_time = CASE WHEN $3 THEN greatest(next_attempt_time, now()) ELSE next_attempt_time END
WHERE webhook_id = $1 AND lease_owner = $2
"""
BACKLOGS = """
SELECT w.webhook_id, h.last_seq - w.cursor AS behind,
       coalesce(extract(epoch FROM now() - (SELECT e.create_time FROM events e
                                            WHERE e.tenant_id = w.tenant_id AND e.seq = w.cursor + 1)), 0) AS oldest_s
FROM webhooks w JOIN event_heads h ON h.tenant_id = w.tenant_id
WHERE h.last_seq > w.cursor
"""
PRUNE = "DELETE FROM webhook_deliveries WHERE attempt_time < now() - make_interval(secs => $1)"


def _webhook(row: asyncpg.Record) -> Webhook:
    return Webhook(
        webhook_id=row["webhook_id"],
        tenant=row["tenant_id"],
        url=row["url"],
        event_types=tuple(row["event_types"]),
        description=row["description"],
        state=WebhookState(row["state"]),
        disabled_reason=row["disabled_reason"],
        registrant=Registrant(
            node=ScopePath.parse(row["scope_path"]),
            clearance=Band(row["clearance"]),
            subject=row["created_by"],
            capabilities=frozenset(row["capabilities"]),
            principals=frozenset(row["principals"]),
        ),
        cursor=row["cursor"],
        failed_attempts=row["failed_attempts"],
        next_attempt_time=row["next_attempt_time"],
        failing_since=row["failing_since"],
        previous_secret_expire_time=row["previous_secret_expire_time"],
        create_time=row["create_time"],
        update_time=row["update_time"],
        version=row["version"],
    )


def _delivery(row: asyncpg.Record) -> Delivery:
    return Delivery(
        delivery_id=row["delivery_id"],
        event_id=row["event_id"],
        cursor=row["event_seq"],
        type=row["event_type"],
        attempt=row["attempt"],
        attempt_time=row["attempt_time"],
        status_code=row["status_code"],
        latency_ms=row["latency_ms"],
        delivered=row["delivered"],
        error=row["error"],
    )


class PostgresWebhooks:
    def __init__(self, db: Database) -> None:
        self._db = db

    async def create(
        self,
        tenant: str,
        url: str,
        event_types: tuple[str, ...],
        description: str,
        registrant: Registrant,
        sealed_secret: str,
        limit: int,
    ) -> Webhook | None:
        async with self._db.transaction() as tx:
            await tx.execute("ensure_tenant", ENSURE_TENANT, tenant)
            row = await tx.fetchrow(
                "create_webhook",
                CREATE,
                tenant,
                url,
                list(event_types),
                description,
                str(registrant.node),
                registrant.clearance.value,
                registrant.subject,
                sorted(registrant.capabilities),
                sorted(registrant.principals),
                limit,
                sealed_secret,
            )
        return _webhook(row) if row is not None else None

    async def of_tenant(self, tenant: str) -> list[Webhook]:
        return [_webhook(r) for r in await self._db.fetch("list_webhooks", LIST, tenant)]

    async def get(self, tenant: str, webhook_id: int) -> Webhook | None:
        row = await self._db.fetchrow("get_webhook", GET, tenant, webhook_id)
        return _webhook(row) if row is not None else None

    async def update(self, tenant: str, webhook_id: int, changes: WebhookChanges) -> Webhook | None:
        async with self._db.transaction() as tx:
            row = await tx.fetchrow(
                "update_webhook",
                UPDATE,
                tenant,
                webhook_id,
                changes.state.value if changes.state is not None else None,
                list(changes.event_types) if changes.event_types is not None else None,
                changes.description,
            )
            if row is not None and row["state"] == WebhookState.ACTIVE:
                await tx.execute("notify_webhooks", NOTIFY_WEBHOOKS)
        return _webhook(row) if row is not None else None

    async def delete(self, tenant: str, webhook_id: int) -> bool:
        return await self._db.execute("delete_webhook", DELETE, tenant, webhook_id) != "DELETE 0"

    async def rotate(self, tenant: str, webhook_id: int, sealed_secret: str, grace_s: int) -> Webhook | None:
        row = await self._db.fetchrow("rotate_webhook", ROTATE, tenant, webhook_id, sealed_secret, float(grace_s))
        return _webhook(row) if row is not None else None

    async def replay(self, tenant: str, webhook_id: int, cursor: int) -> Webhook | None:
        async with self._db.transaction() as tx:
            row = await tx.fetchrow("replay_webhook", REPLAY, tenant, webhook_id, cursor)
            if row is not None:
                await tx.execute("notify_webhooks", NOTIFY_WEBHOOKS)
        return _webhook(row) if row is not None else None

    async def deliveries(self, webhook_id: int, page: Page) -> list[Delivery]:
        rows = await self._db.fetch("list_webhook_deliveries", LIST_DELIVERIES, webhook_id, page.after_id, page.size)
        return [_delivery(r) for r in rows]


@dataclass(frozen=True, slots=True)
class Lease:
    """A deliverer's hold on one webhook, as it read it."""

    webhook: Webhook
    owner: uuid.UUID
    sealed_secrets: tuple[str, ...]  # the current one, then the previous while it still signs

    def held(self) -> tuple[int, uuid.UUID, int]:
        return self.webhook.webhook_id, self.owner, self.webhook.version


@dataclass(frozen=True, slots=True)
class Acknowledged:
    """An event the endpoint answered 2xx, not yet written."""

    event: Event
    attempt_no: int
    attempt: Attempt
    at: datetime.datetime


class PostgresDeliveries:
    def __init__(self, db: Database, lease_s: float) -> None:
        self._db = db
        self._lease_s = float(lease_s)

    async def claim(self, owner: uuid.UUID, limit: int) -> list[Lease]:
        rows = await self._db.fetch("claim_webhooks", CLAIM, owner, self._lease_s, limit)
        return [
            Lease(_webhook(r), owner, tuple(s for s in (r["secret_sealed"], r["previous_sealed"]) if s is not None))
            for r in rows
        ]

    async def advance(self, lease: Lease, cursor: int) -> bool:
        """The cursor moved past events that are not the webhook's; False: the lease is lost."""
        status = await self._db.execute("advance_webhook", ADVANCE, *lease.held(), cursor, self._lease_s)
        return status != "UPDATE 0"

    async def renew(self, lease: Lease) -> bool:
        """False: the lease is lost, or the webhook was changed, paused or deleted."""
        status = await self._db.execute("renew_webhook_lease", RENEW, *lease.held(), self._lease_s)
        return status != "UPDATE 0"

    async def delivered(self, lease: Lease, cursor: int, acknowledged: list[Acknowledged]) -> bool:
        """The cursor at ``cursor`` and the acknowledged attempts recorded; False: the lease is lost."""
        status = await self._db.execute(
            "webhook_delivered",
            DELIVERED,
            *lease.held(),
            cursor,
            self._lease_s,
            [a.event.event_id for a in acknowledged],
            [a.event.seq for a in acknowledged],
            [a.event.type.value for a in acknowledged],
            [a.attempt_no for a in acknowledged],
            [a.at for a in acknowledged],
            [a.attempt.status_code for a in acknowledged],
            [a.attempt.latency_ms for a in acknowledged],
        )
        return status != "INSERT 0 0"

    async def failed(self, lease: Lease, event: Event, attempt: Attempt, after: AfterFailure) -> bool:
        """The attempt recorded and the next one scheduled, or the webhook disabled with its
        webhook.disabled event, in one transaction; False: the lease is lost."""
        async with self._db.transaction() as tx:
            recorded = await tx.fetchval(
                "webhook_failed",
                FAILED,
                *lease.held(),
                after.failed_attempts,
                after.failing_since,
                after.next_attempt_time,
                after.disabled_reason,
                event.event_id,
                event.seq,
                event.type.value,
                attempt.status_code,
                attempt.latency_ms,
                attempt.error,
            )
            if recorded is not None and after.disabled_reason:
                webhook = lease.webhook
                (event_id,) = await publish(
                    tx, webhook.tenant, [disabled_event(webhook.webhook_id, after.disabled_reason)]
                )
                registrant = webhook.registrant
                await tx.execute(
                    "place_webhook_event", PLACE_EVENT, event_id, str(registrant.node), registrant.clearance.value
                )
        return recorded is not None

    async def release(self, lease: Lease, *, requeue: bool) -> None:
        await self._db.execute("release_webhook", RELEASE, lease.webhook.webhook_id, lease.owner, requeue)

    async def backlogs(self) -> list[tuple[str, int, float]]:
        """(webhook id, events behind its cursor, age in s of the oldest) of each webhook behind."""
        rows = await self._db.fetch("webhook_backlogs", BACKLOGS)
        return [(str(r["webhook_id"]), int(r["behind"]), float(r["oldest_s"])) for r in rows]

    async def prune(self, retention_s: float) -> int:
        status = await self._db.execute("prune_webhook_deliveries", PRUNE, float(retention_s))
        return int(status.split()[-1])
