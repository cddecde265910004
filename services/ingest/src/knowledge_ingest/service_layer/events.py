"""Watching a tenant's events from a cursor, and keeping them for the retention period."""

from __future__ import annotations

import asyncio
import datetime
from collections.abc import AsyncIterator
from dataclasses import dataclass

import structlog
from knowledge_runtime.auth import Scope

from knowledge_ingest.domain.errors import CursorExpired
from knowledge_ingest.domain.events import Event, EventType, parse_cursor, start_after
from knowledge_ingest.domain.ports import EventLog, EventWakeups

log = structlog.get_logger("knowledge.ingest.events")

READ_BATCH = 500  # events per read; a consumer far behind reads page after page without waiting


@dataclass
class EventUseCases:
    log: EventLog
    wakeups: EventWakeups
    heartbeat_s: float
    retention_s: float

    async def watch(self, scope: Scope, after: str) -> AsyncIterator[Event]:
        """The tenant's events after the cursor in commit order, then each as it commits; a
        heartbeat carrying the stream's cursor after ``heartbeat_s`` without one. Runs until the
        caller goes away."""
        tenant = scope.tenant
        with self.wakeups.subscribe(tenant) as wakeup:  # before the first read: no wakeup is lost
            first, head = await self.log.bounds(tenant)
            position = start_after(parse_cursor(after), first, head)
            while True:
                wakeup.clear()
                events = await self.log.read_after(tenant, position, READ_BATCH)
                if events and events[0].seq != position + 1:  # pruned under a slow consumer
                    raise CursorExpired(position, events[0].seq)
                for event in events:
                    yield event
                    position = event.seq
                if len(events) == READ_BATCH:
                    continue
                if not await wakeup.wait(self.heartbeat_s):
                    yield heartbeat(position)

    async def prune(self) -> int:
        return await self.log.prune(self.retention_s)


def heartbeat(position: int) -> Event:
    now = datetime.datetime.now(datetime.UTC)
    return Event(position, None, EventType.HEARTBEAT, None, None, now, {})


class EventRetention:
    """Removes events older than the retention, every ``every_s`` (any replica may: the statement
    is idempotent)."""

    def __init__(self, events: EventUseCases, every_s: float = 60.0) -> None:
        self._events = events
        self._every_s = every_s
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._task = asyncio.create_task(self._loop())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None

    async def _loop(self) -> None:
        while True:
            try:
                pruned = await self._events.prune()
                if pruned:
                    log.info("events_pruned", events=pruned)
            except Exception as error:  # noqa: BLE001 - the database is away: the next round tries again
                log.warning("events_prune_failed", error_type=type(error).__name__)
            await asyncio.sleep(self._every_s)
