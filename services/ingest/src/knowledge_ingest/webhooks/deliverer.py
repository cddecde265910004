"""The deliverer: every ingest replica runs one; each webhook is served by one replica at a time.

A round (``Periodic``, woken whenever any tenant's events are numbered, and when one of its own
deliveries ends) leases as many due webhooks as it has free slots (``concurrency``), and a task
per lease walks the webhook's events from its cursor: an event it is not sent moves the cursor
on; one it is sent is POSTed, signed, and only once the endpoint answered 2xx does the cursor
move past it. A failure schedules the next attempt at the same event (``domain.webhooks``) and
ends the task: the next event waits, so an endpoint sees its events in order, each at least once.

A slow or dead endpoint holds one slot and one connection, for at most the delivery timeout per
attempt, and then waits out its retry schedule holding nothing; no other webhook waits for it.
A task hands its webhook back after ``SLICE_EVENTS`` deliveries or ``SLICE_S`` seconds (to the back
of the queue), so a webhook far behind does not keep a slot from the others. The lease outlives a
delivery's timeout and is renewed with every write, which names it: a replica that lost its lease
(or whose webhook was changed meanwhile) writes nothing more and stops, and the event it was
sending is sent again by the next holder (the same ``webhook-id``: receivers de-duplicate by it).
"""

from __future__ import annotations

import asyncio
import datetime
import random
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import structlog
from knowledge_runtime.periodic import Periodic
from knowledge_runtime.reach import Reader
from knowledge_runtime.refusals import Refused
from prometheus_client import Counter, Gauge, Histogram

from knowledge_ingest.domain.events import Event
from knowledge_ingest.domain.ports import EventLog, ReachSource, SecretSealer
from knowledge_ingest.domain.webhooks import (
    Attempt,
    RetryPolicy,
    Webhook,
    after_failure,
    bounded_backlogs,
    delivery_headers,
    wanted,
)
from knowledge_ingest.events.outbox import PostgresWakeups, Wakeup
from knowledge_ingest.webhooks.postgres import Acknowledged, Lease, PostgresDeliveries
from knowledge_ingest.webhooks.sender import Session, WebhookSender

log = structlog.get_logger("knowledge.ingest.webhooks")

READ_BATCH = 200
SLICE_EVENTS = 500
SLICE_S = 10.0
FLUSH_EVENTS = 100
FLUSH_S = 0.05
METRICS_MAX_WEBHOOKS = 20  # webhooks with their own backlog series; the rest are summed as "_other"
SECRET_UNUSABLE = "the signing secret cannot be opened: KNOWLEDGE_WEBHOOK_KEY_PATH is not the key it was sealed with"

ATTEMPTS = Counter(
    "knowledge_webhook_attempts_total",
    "Webhook delivery attempts by outcome: delivered (2xx), failed (another answer), no_answer.",
    ["outcome"],
)
DELIVERY_DELAY = Histogram(
    "knowledge_webhook_delivery_seconds",
    "From an event's write to the endpoint's acknowledgement of it.",
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 3600),
)
BACKLOG = Gauge("knowledge_webhook_backlog_events", "Events after a webhook's cursor (of any type).", ["webhook"])
OLDEST = Gauge(
    "knowledge_webhook_oldest_undelivered_seconds", "Age of the first event after a webhook's cursor.", ["webhook"]
)


class Walk:
    """Where one walk over a webhook's events is, and the acknowledgements not yet written.

    Acknowledgements are written together (``flush``: the cursor, the attempts and the lease's
    renewal in one statement) every ``FLUSH_EVENTS`` or ``FLUSH_S``, before a failure is recorded,
    before the first send of each read, and at the end: one write per event would cap an endpoint
    at the database's round trips. A crash before a flush sends those events again (the same
    ``webhook-id``): at least once, never skipped."""

    def __init__(
        self,
        lease: Lease,
        deliveries: PostgresDeliveries,
        cursor: int,
        failures: int,
        failing_since: datetime.datetime | None,
    ) -> None:
        self._lease = lease
        self._deliveries = deliveries
        self.position = self._written = cursor
        self.failures, self.failing_since = failures, failing_since
        self._pending: list[Acknowledged] = []
        self._flushed = time.monotonic()

    def acknowledged(self, event: Event, attempt: Attempt) -> None:
        self._pending.append(Acknowledged(event, self.failures + 1, attempt, datetime.datetime.now(datetime.UTC)))
        self.position = event.seq
        self.failures, self.failing_since = 0, None

    def due(self) -> bool:
        return bool(self._pending) and (
            len(self._pending) >= FLUSH_EVENTS or time.monotonic() - self._flushed >= FLUSH_S
        )

    async def flush(self) -> bool:
        """Writes the cursor and what was acknowledged, renewing the lease; False: the lease is
        lost, or the webhook was changed, paused or deleted (the walk stops)."""
        if self._pending:
            held = await self._deliveries.delivered(self._lease, self.position, self._pending)
        elif self.position != self._written:
            held = await self._deliveries.advance(self._lease, self.position)
        else:
            held = await self._deliveries.renew(self._lease)
        if held and self.position != self._written:
            self.failures = 0  # the failures counted were at an event the cursor is now past
        self._pending, self._written, self._flushed = [], self.position, time.monotonic()
        return held


class WebhookDeliverer:
    def __init__(
        self,
        deliveries: PostgresDeliveries,
        events: EventLog,
        reach: ReachSource,
        sender: WebhookSender,
        sealer: SecretSealer,
        render: Callable[[Event], bytes],
        policy: RetryPolicy,
        wakeups: PostgresWakeups,
        *,
        concurrency: int,
        poll_s: float = 1.0,
    ) -> None:
        self._deliveries = deliveries
        self._events = events
        self._reach = reach
        self._sender = sender
        self._sealer = sealer
        self._render = render
        self._policy = policy
        self._wakeups = wakeups
        self._concurrency = concurrency
        self._owner = uuid.uuid4()
        self._tasks: set[asyncio.Task[None]] = set()
        self._wakeup: Wakeup | None = None
        self._loop = Periodic("webhooks_deliver", self.claim, poll_s, wakeup=self._woken)

    async def start(self) -> None:
        if self._concurrency:
            await self._loop.start()

    async def stop(self) -> None:
        """Claims no more; the deliveries under way are abandoned (their leases hand the
        webhooks back to their releases, or to their expiry when a release cannot be made)."""
        await self._loop.stop()
        tasks, self._tasks = list(self._tasks), set()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    @contextmanager
    def _woken(self) -> Iterator[Wakeup]:
        with self._wakeups.numbered() as wakeup:
            self._wakeup = wakeup
            try:
                yield wakeup
            finally:
                self._wakeup = None

    async def claim(self) -> bool:
        """Leases due webhooks for the free slots, a task each."""
        free = self._concurrency - len(self._tasks)
        if free <= 0:
            return False
        for lease in await self._deliveries.claim(self._owner, free):
            task = asyncio.get_running_loop().create_task(self._serve(lease), name="webhook_delivery")
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)
        return False

    async def _serve(self, lease: Lease) -> None:
        requeue = False
        try:
            requeue = await self.deliver(lease)
        except Exception as error:  # noqa: BLE001 - one webhook's failure ends its turn, not the deliverer
            log.warning("webhook_delivery_error", webhook_id=lease.webhook.webhook_id, error_type=type(error).__name__)
        finally:
            try:
                await self._deliveries.release(lease, requeue=requeue)
            except Exception as error:  # noqa: BLE001 - the lease expires instead
                log.info("webhook_release_failed", webhook_id=lease.webhook.webhook_id, error_type=type(error).__name__)
            if self._wakeup is not None:
                self._wakeup.set()  # a slot is free, and this webhook may have more already

    async def deliver(self, lease: Lease) -> bool:
        """Walks the webhook's events from its cursor until there are none, one fails, the lease is
        lost, or the slice is used up (then True: hand it back to the end of the queue)."""
        webhook = lease.webhook
        secrets = self._secrets(lease)
        reader = await self._reader(webhook)
        walk = Walk(lease, self._deliveries, webhook.cursor, webhook.failed_attempts, webhook.failing_since)
        started, sent = time.monotonic(), 0
        async with self._sender.session(webhook.url) as session:
            while events := await self._events.read_after(webhook.tenant, walk.position, READ_BATCH):
                if events[0].seq != walk.position + 1:
                    log.warning(
                        "webhook_events_expired", webhook_id=webhook.webhook_id, lost=events[0].seq - walk.position - 1
                    )
                checked = False  # the lease, before the first send of what was read (a pause stops it)
                for event in events:
                    if sent >= SLICE_EVENTS or time.monotonic() - started >= SLICE_S:
                        return await walk.flush()
                    if not wanted(webhook, event, reader):
                        walk.position = event.seq
                        continue
                    if (not checked or walk.due()) and not await walk.flush():
                        return False
                    checked = True
                    attempt = await self._attempt(session, event, secrets)
                    if not attempt.delivered:
                        if not await walk.flush():
                            return False
                        now = datetime.datetime.now(datetime.UTC)
                        after = after_failure(
                            walk.failures, walk.failing_since, event.seq, attempt, now, self._policy, random.random()
                        )
                        if await self._deliveries.failed(lease, event, attempt, after) and after.disabled_reason:
                            log.warning("webhook_disabled", webhook_id=webhook.webhook_id, tenant=webhook.tenant)
                        return False
                    walk.acknowledged(event, attempt)
                    DELIVERY_DELAY.observe((datetime.datetime.now(datetime.UTC) - event.time).total_seconds())
                    sent += 1
        await walk.flush()
        return False

    async def _attempt(self, session: Session, event: Event, secrets: list[str] | None) -> Attempt:
        if secrets is None:
            attempt = Attempt(0, 0, SECRET_UNUSABLE)
        else:
            body = self._render(event)
            attempt = await session.post(body, delivery_headers(str(event.event_id), int(time.time()), body, secrets))
        outcome = "delivered" if attempt.delivered else "failed" if attempt.status_code else "no_answer"
        ATTEMPTS.labels(outcome=outcome).inc()
        return attempt

    def _secrets(self, lease: Lease) -> list[str] | None:
        webhook = lease.webhook
        try:
            return [self._sealer.open(webhook.tenant, webhook.url, sealed) for sealed in lease.sealed_secrets]
        except ValueError:
            log.error("webhook_secret_unusable", webhook_id=webhook.webhook_id)
            return None

    async def _reader(self, webhook: Webhook) -> Reader | None:
        """The registrant resolved as a caller now; None when its node no longer resolves (then
        it reads nothing, and is sent nothing)."""
        try:
            return await self._reach.reader(webhook.registrant.scope(webhook.tenant))
        except Refused:
            return None

    async def refresh_metrics(self) -> None:
        BACKLOG.clear()
        OLDEST.clear()
        for label, behind, oldest_s in bounded_backlogs(await self._deliveries.backlogs(), METRICS_MAX_WEBHOOKS):
            BACKLOG.labels(webhook=label).set(behind)
            OLDEST.labels(webhook=label).set(oldest_s)

    async def prune(self, retention_s: float) -> None:
        pruned = await self._deliveries.prune(retention_s)
        if pruned:
            log.info("webhook_deliveries_pruned", deliveries=pruned)
