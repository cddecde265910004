"""Deleting documents and corpora (tombstoned, answered at once), listing the tombstones, and the
workers that remove what a deletion left and prune tombstones past their retention."""

from __future__ import annotations

import asyncio
import os
import socket
import uuid
from dataclasses import dataclass

import structlog
from knowledge_runtime.auth import Scope
from knowledge_runtime.errors import Unavailable
from knowledge_runtime.outages import outage

from knowledge_ingest.corpora.usecases import require_writable
from knowledge_ingest.domain.documents import parse_id
from knowledge_ingest.domain.errors import CorpusNotEmpty, CorpusNotFound, DocumentNotFound
from knowledge_ingest.domain.model import Page
from knowledge_ingest.domain.ports import DocumentRepository, ReachSource, TombstoneRepository
from knowledge_ingest.domain.tombstones import (
    DELETED_WITH_CORPUS,
    REMOVAL_BATCH,
    Deletion,
    Removal,
    Tombstone,
    readable,
    reason_of,
    retry_delay_s,
)

log = structlog.get_logger("knowledge.ingest.tombstones")


@dataclass
class TombstoneUseCases:
    tombstones: TombstoneRepository
    documents: DocumentRepository
    reach: ReachSource

    async def delete_document(self, scope: Scope, document_id: str, reason: str = "") -> Deletion:
        """Out of every read at the commit, with its tombstone; a document the caller cannot read
        or write (another tenant's, out of reach, a housekeeping entry without its capability, one
        already deleted) is not found, and nothing changes."""
        key = parse_id(document_id, "document_id")
        reach = await self.reach.reach_of(scope)
        document = await self.documents.document((scope.tenant,), key)  # its own rows: only they are deletable
        if document is None:
            raise DocumentNotFound(document_id)
        try:
            await require_writable(self.documents, scope, reach, document.corpus_id, document_id)
        except CorpusNotFound:
            raise DocumentNotFound(document_id) from None
        deletion = await self.tombstones.delete_document(scope.tenant, key, scope.subject, reason_of(reason))
        if deletion is None:  # deleted meanwhile
            raise DocumentNotFound(document_id)
        log.info("document_deleted", document_id=key, chunks=deletion.tombstone.chunk_count)
        return deletion

    async def delete_corpus(self, scope: Scope, corpus_id: str, delete_documents: bool) -> list[Tombstone]:
        """A corpus in the caller's reach that it may write (never a system corpus); refused while
        it holds documents unless ``delete_documents`` (FAILED_PRECONDITION, nothing changed)."""
        key = parse_id(corpus_id, "corpus_id")
        await require_writable(self.documents, scope, await self.reach.reach_of(scope), key, corpus_id)
        outcome = await self.tombstones.delete_corpus(
            scope.tenant, key, scope.subject, DELETED_WITH_CORPUS, delete_documents
        )
        if outcome is None:
            raise CorpusNotFound(corpus_id)
        if isinstance(outcome, int):
            raise CorpusNotEmpty(key, outcome)
        log.info("corpus_deleted", corpus_id=key, documents=len(outcome))
        return outcome

    async def list(self, scope: Scope, corpus_id: str, page: Page) -> tuple[list[Tombstone], int | None]:
        """The tenant's tombstones oldest first, those whose document the caller could have read
        where it was (a page may hold fewer than asked; the token says whether more follow)."""
        key = parse_id(corpus_id, "corpus_id") if corpus_id else None
        reader = await self.reach.reader(scope)
        found = await self.tombstones.list_tombstones(scope.tenant, key, page.probe())
        tombstones, after = page.cut(found, lambda t: t.tombstone_id)
        return [t for t in tombstones if readable(reader, t)], after


@dataclass
class Remover:
    """Runs claimed removal jobs to the end: the chunks a batch per transaction, then the row."""

    tombstones: TombstoneRepository
    lease_s: float
    batch: int = REMOVAL_BATCH

    async def run(self, removal: Removal) -> bool:
        """True when it completed; False when the lease was lost (another worker carries on)."""
        try:
            while True:
                deleted = await self.tombstones.remove_batch(removal, self.batch, self.lease_s)
                if deleted is None:
                    log.info("removal_lease_lost", document_id=removal.document_id)
                    return False
                if deleted < self.batch:  # the last batch: nothing is added to a deleted document
                    break
            if not await self.tombstones.finish(removal, self.lease_s):
                log.info("removal_lease_lost", document_id=removal.document_id)
                return False
        except asyncio.CancelledError:
            raise
        except Exception as error:  # noqa: BLE001 - recorded on the job and retried until done
            delay = retry_delay_s(removal.attempts)
            log.warning("removal_retry_scheduled", document_id=removal.document_id, error_type=type(error).__name__)
            try:
                await self.tombstones.failed(removal, delay, type(error).__name__)
            except Exception:  # noqa: BLE001 - its lease expires and another claim retries it
                log.warning("removal_unrecorded", document_id=removal.document_id)
            return False
        log.info("document_removed", document_id=removal.document_id)
        return True


class RemovalWorkers:
    """Background removal: ``count`` loops claim removal jobs (any replica; SKIP LOCKED), and one
    pass every ``prune_every_s`` removes tombstones past the retention (idempotent)."""

    def __init__(
        self,
        tombstones: TombstoneRepository,
        *,
        count: int,
        lease_s: float,
        retention_s: float,
        poll_s: float = 0.5,
        prune_every_s: float = 300.0,
        batch: int = REMOVAL_BATCH,
    ) -> None:
        self._tombstones = tombstones
        self._remover = Remover(tombstones, lease_s, batch)
        self._count = count
        self._lease_s = lease_s
        self._retention_s = retention_s
        self._poll_s = poll_s
        self._prune_every_s = prune_every_s
        self._tasks: list[asyncio.Task[None]] = []
        # The process's one record of the database's outage (the job workers' too): one line when
        # it goes away and one when it is back, not one per poll.
        self._database = outage("database")

    async def start(self) -> None:
        base = f"{socket.gethostname()}:{os.getpid()}:removal"
        self._tasks = [
            asyncio.create_task(self._loop(f"{base}:{i}:{uuid.uuid4().hex[:6]}")) for i in range(self._count)
        ]
        self._tasks.append(asyncio.create_task(self._prune_loop()))

    async def stop(self) -> None:
        """A removal in flight is abandoned: its lease expires and a worker takes it over."""
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks = []

    async def _loop(self, owner: str) -> None:
        while True:
            try:
                removal = await self._tombstones.claim(owner, self._lease_s)
            except Unavailable as error:  # the database is away: logged once, the next poll tries again
                self._database.failed(error)
                removal = None
            except Exception as error:  # noqa: BLE001 - the next poll tries again
                log.warning("removal_claim_failed", error_type=type(error).__name__)
                removal = None
            else:
                self._database.succeeded()
            if removal is None:
                await asyncio.sleep(self._poll_s)
                continue
            structlog.contextvars.bind_contextvars(tenant=removal.tenant)
            try:
                await self._remover.run(removal)
            finally:
                structlog.contextvars.unbind_contextvars("tenant")

    async def _prune_loop(self) -> None:
        while True:
            try:
                pruned = await self._tombstones.prune(self._retention_s)
                if pruned:
                    log.info("tombstones_pruned", tombstones=pruned)
            except Exception as error:  # noqa: BLE001 - the database is away: the next round tries again
                log.warning("tombstones_prune_failed", error_type=type(error).__name__)
            await asyncio.sleep(self._prune_every_s)
