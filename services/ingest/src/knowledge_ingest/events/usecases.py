"""Watching a tenant's events from a cursor, and keeping them for the retention period."""

from __future__ import annotations

import datetime
from collections.abc import AsyncIterator
from dataclasses import dataclass

import structlog
from knowledge_runtime.auth import Scope

from knowledge_ingest.domain.errors import CursorExpired
from knowledge_ingest.domain.events import Event, EventType, delivered_to, parse_cursor, start_after
from knowledge_ingest.domain.ports import EventLog, EventWakeups, ReachSource

log = structlog.get_logger("knowledge.ingest.events")

READ_BATCH = 500  # events per read; a consumer far behind reads page after page without waiting


@dataclass
class EventUseCases:
    log: EventLog
    wakeups: EventWakeups
    heartbeat_s: float
    retention_s: float
    reach: ReachSource

    async def watch(self, scope: Scope, after: str) -> AsyncIterator[Event]:
        """The tenant's events after the cursor in commit order, then each as it commits, each
        only when the caller could read its corpus now (``delivered_to``); a heartbeat carrying
        the stream's cursor after ``heartbeat_s`` without one, and at once when the newest
        events read were all skipped, so that a resume starts past them. Runs until the caller
        goes away. An unresolved scope is Refused(SCOPE_UNRESOLVED) before anything is read."""
        tenant = scope.tenant
        reader = await self.reach.reader(scope)
        with self.wakeups.subscribe(tenant) as wakeup:  # before the first read: no wakeup is lost
            first, head = await self.log.bounds(tenant)
            position = start_after(parse_cursor(after), first, head)
            while True:
                wakeup.clear()
                events = await self.log.read_after(tenant, position, READ_BATCH)
                if events and events[0].seq != position + 1:  # pruned under a slow consumer
                    raise CursorExpired(position, events[0].seq)
                skipped = False
                for event in events:
                    position = event.seq
                    skipped = not delivered_to(event, reader, scope.capabilities)
                    if not skipped:
                        yield event
                if len(events) == READ_BATCH:
                    continue
                if skipped:
                    yield heartbeat(position)
                if not await wakeup.wait(self.heartbeat_s):
                    yield heartbeat(position)

    async def prune(self) -> None:
        """Removes the events older than the retention (any replica may: the statement is idempotent)."""
        pruned = await self.log.prune(self.retention_s)
        if pruned:
            log.info("events_pruned", events=pruned)


def heartbeat(position: int) -> Event:
    now = datetime.datetime.now(datetime.UTC)
    return Event(position, None, EventType.HEARTBEAT, None, None, now, {})
