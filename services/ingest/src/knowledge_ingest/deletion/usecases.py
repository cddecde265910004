"""Deleting documents and corpora (tombstoned, answered at once), and listing the tombstones."""

from __future__ import annotations

from dataclasses import dataclass

import structlog
from knowledge_runtime.auth import Scope

from knowledge_ingest.domain.documents import parse_id
from knowledge_ingest.domain.errors import CorpusNotEmpty, CorpusNotFound, DocumentNotFound
from knowledge_ingest.domain.model import Page
from knowledge_ingest.domain.ports import DocumentRepository, ReachSource, TombstoneRepository
from knowledge_ingest.domain.tombstones import (
    DELETED_WITH_CORPUS,
    Deletion,
    Tombstone,
    readable,
    reason_of,
)
from knowledge_ingest.guards import require_writable

MAX_LISTED_TOMBSTONES = 100  # how many of its documents' tombstones a corpus deletion's answer lists
log = structlog.get_logger("knowledge.ingest.tombstones")


@dataclass
class TombstoneUseCases:
    tombstones: TombstoneRepository
    documents: DocumentRepository
    reach: ReachSource

    async def delete_document(self, scope: Scope, document_id: str, reason: str = "") -> Deletion:
        """Out of every read at the commit, with its tombstone; a document the caller cannot read
        or write (another tenant's, out of reach, a housekeeping entry without its capability, one
        whose access list does not admit it, one already deleted) is not found, and nothing changes."""
        key = parse_id(document_id, "document_id")
        reach = await self.reach.reach_of(scope)
        # its own rows: only they are deletable; and only a document the caller may read
        document = await self.documents.document((scope.tenant,), key, reach.reader.principals)
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
        it holds documents unless ``delete_documents`` (FAILED_PRECONDITION, nothing changed). Every
        document of it goes; the answer lists the tombstones of those the caller may read."""
        key = parse_id(corpus_id, "corpus_id")
        reach = await self.reach.reach_of(scope)
        await require_writable(self.documents, scope, reach, key, corpus_id)
        outcome = await self.tombstones.delete_corpus(
            scope.tenant, key, scope.subject, DELETED_WITH_CORPUS, delete_documents
        )
        if outcome is None:
            raise CorpusNotFound(corpus_id)
        if isinstance(outcome, int):
            raise CorpusNotEmpty(key, outcome)
        log.info("corpus_deleted", corpus_id=key, documents=len(outcome))
        return [t for t in outcome if reach.reader.may_read_document(t.principals)]

    async def list(self, scope: Scope, corpus_id: str, page: Page) -> tuple[list[Tombstone], int | None]:
        """The tenant's tombstones oldest first, those whose document the caller could have read
        where it was (a page may hold fewer than asked; the token says whether more follow)."""
        key = parse_id(corpus_id, "corpus_id") if corpus_id else None
        reader = await self.reach.reader(scope)
        found = await self.tombstones.list_tombstones(scope.tenant, key, page.probe())
        tombstones, after = page.cut(found, lambda t: t.tombstone_id)
        return [t for t in tombstones if readable(reader, t)], after
