"""Committed document changes from PostgreSQL's LISTEN/NOTIFY (migration 0032's triggers).

One connection of the pool LISTENs on ``knowledge_documents`` for the whole process while anyone
watches; each announcement (a document's change, or its corpus's: migration 0056) goes to the
subscriptions of its corpus (corpus ids are global; the
tenant in the payload is the row's, the platform tenant's in a platform corpus, not the
watcher's). Nothing polls.
When that connection is lost every subscription ends with Unavailable (its watcher reconnects
and reads a fresh snapshot); the next subscriber listens on a new one.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import asyncpg
import structlog
from asyncpg.pool import PoolConnectionProxy
from knowledge_runtime.db.pool import Database
from knowledge_runtime.errors import Unavailable

log = structlog.get_logger("knowledge.ingest.document_feed")
CHANNEL = "knowledge_documents"
_BROKEN = (OSError, asyncpg.PostgresError, asyncpg.InterfaceError)


class _Subscription:
    def __init__(self) -> None:
        self._pending: dict[int, None] = {}  # ordered, each id once
        self._corpus_changed = False
        self._wake = asyncio.Event()
        self._lost = False

    def announce(self, document_id: int) -> None:
        self._pending[document_id] = None
        self._wake.set()

    def announce_corpus(self) -> None:
        """The corpus itself changed (bound elsewhere, another band, deleted): no document named."""
        self._corpus_changed = True
        self._wake.set()

    def lose(self) -> None:
        self._lost = True
        self._wake.set()

    async def next(self) -> list[int]:
        while not self._pending and not self._corpus_changed:
            if self._lost:
                raise Unavailable("the database stopped announcing document changes; watch again")
            self._wake.clear()
            await self._wake.wait()
        if self._lost:
            raise Unavailable("the database stopped announcing document changes; watch again")
        ids, self._pending, self._corpus_changed = list(self._pending), {}, False
        return ids


class PostgresDocumentFeed:
    def __init__(self, db: Database) -> None:
        self._db = db
        self._connection: PoolConnectionProxy | None = None
        self._subscribers: dict[int, set[_Subscription]] = {}
        self._lock = asyncio.Lock()
        self._closed = False
        self._releasing: set[asyncio.Task] = set()

    @asynccontextmanager
    async def subscribe(self, corpus_id: int) -> AsyncIterator[_Subscription]:
        subscription = _Subscription()
        async with self._lock:
            if self._closed:
                raise Unavailable("ingest is stopping; watch again")
            await self._listen()
            self._subscribers.setdefault(corpus_id, set()).add(subscription)
        try:
            yield subscription
        finally:
            watchers = self._subscribers.get(corpus_id)
            if watchers is not None:
                watchers.discard(subscription)
                if not watchers:
                    del self._subscribers[corpus_id]
            if not self._subscribers:
                await self._unlisten()

    async def close(self) -> None:
        self._closed = True
        for watchers in list(self._subscribers.values()):
            for subscription in watchers:
                subscription.lose()
        self._subscribers.clear()
        await self._unlisten()

    async def _listen(self) -> None:
        if self._connection is not None and not self._connection.is_closed():
            return
        try:
            connection = await self._db.pool.acquire()
        except _BROKEN as error:
            raise Unavailable("the database is unavailable") from error
        try:
            await connection.add_listener(CHANNEL, self._announced)
        except _BROKEN as error:
            await self._release_broken(connection)
            raise Unavailable("the database is unavailable") from error
        connection.add_termination_listener(self._terminated)
        self._connection = connection

    async def _unlisten(self) -> None:
        async with self._lock:
            if self._subscribers:
                return
            connection, self._connection = self._connection, None
        if connection is None:
            return
        try:
            connection.remove_termination_listener(self._terminated)
            await connection.remove_listener(CHANNEL, self._announced)
            await self._db.pool.release(connection)
        except _BROKEN:  # already broken: the pool replaces it
            log.info("document_feed_release_failed")

    async def _release_broken(self, connection: PoolConnectionProxy) -> None:
        try:
            await self._db.pool.release(connection)
        except _BROKEN:
            log.info("document_feed_release_failed")

    def _announced(self, connection: object, pid: int, channel: str, payload: object) -> None:
        try:
            change = json.loads(str(payload))
            corpus_id = int(change["c"])
            document_id = None if change["d"] is None else int(change["d"])  # None: the corpus changed
        except (ValueError, KeyError, TypeError):
            log.warning("document_feed_bad_payload")
            return
        for subscription in self._subscribers.get(corpus_id, ()):
            if document_id is None:
                subscription.announce_corpus()
            else:
                subscription.announce(document_id)

    def _terminated(self, connection: object) -> None:
        """The listening connection was lost (only one listens at a time): every watch ends."""
        log.warning("document_feed_connection_lost", watchers=sum(len(s) for s in self._subscribers.values()))
        broken, self._connection = self._connection, None
        if broken is not None:
            task = asyncio.get_running_loop().create_task(self._release_broken(broken))
            self._releasing.add(task)
            task.add_done_callback(self._releasing.discard)
        for watchers in self._subscribers.values():
            for subscription in watchers:
                subscription.lose()
        self._subscribers.clear()
