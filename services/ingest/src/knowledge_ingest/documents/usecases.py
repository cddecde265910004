"""Documents: list, get, move, delete, paginated text, and the agent's prompt context."""

from __future__ import annotations

import dataclasses
from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass

from knowledge_runtime.auth import Scope
from knowledge_runtime.filter_fields import parse_filter
from knowledge_runtime.reach import Reach, access_list

from knowledge_ingest.documents.access import change_access
from knowledge_ingest.domain.documents import Document, parse_id, safe_filename
from knowledge_ingest.domain.errors import CorpusNotFound, DocumentIndexing, DocumentNotFound, InvalidRequest
from knowledge_ingest.domain.metadata import check_metadata
from knowledge_ingest.domain.model import Page
from knowledge_ingest.domain.ports import DocumentFeed, DocumentRepository, ReachSource
from knowledge_ingest.domain.system_corpora import may_read
from knowledge_ingest.domain.text import TextPage, paginate
from knowledge_ingest.domain.watch import ChangeKind, DocumentChange, batch_answer, batch_ids, change_of
from knowledge_ingest.guards import require_writable, required_corpus

MAX_MOVE_IDS = 1000  # per request, and how many moved ids an answer lists
SNAPSHOT_PAGE = 1000  # documents read per query for a watch's snapshot


@dataclass(frozen=True)
class Moved:
    count: int
    document_ids: list[int]  # the first MAX_MOVE_IDS


@dataclass
class DocumentUseCases:
    store: DocumentRepository
    reach: ReachSource
    feed: DocumentFeed | None = None  # None: this ingest does not watch (WatchDocuments is UNIMPLEMENTED)

    async def get(self, scope: Scope, document_id: str) -> Document:
        """The document when it is in the caller's reach, its corpus readable to the caller (a
        housekeeping corpus only to its writers) and its access list admits the caller; else not
        found, as if absent."""
        key = parse_id(document_id, "document_id")
        return await self._get(scope, await self.reach.reach_of(scope), key, document_id)

    async def _get(self, scope: Scope, reach: Reach, key: int, document_id: str) -> Document:
        document = await self.store.document(reach.owners(scope.tenant), key, reach.reader.principals)
        if document is None or not await self._readable(scope, reach, document.corpus_id):
            raise DocumentNotFound(document_id)
        return document

    async def update(
        self, scope: Scope, document_id: str, metadata: Mapping[str, object] | None, filename: str | None
    ) -> Document:
        """Set the document's metadata (replaced whole) and/or filename; None leaves one as it is.
        Writing the document writes its corpus: one the caller only reads is CorpusReadOnly; one
        it cannot read or write at all, or a document whose list does not admit the caller,
        answers as an unknown document."""
        key = parse_id(document_id, "document_id")
        checked = None if metadata is None else check_metadata(metadata)
        if filename is not None and not filename.strip():
            raise InvalidRequest("document.filename must not be empty", field="document.filename")
        safe = None if filename is None else safe_filename(filename)
        reach = await self.reach.reach_of(scope)
        # its own rows: only they are writable; and only a document the caller may read
        document = await self.store.document((scope.tenant,), key, reach.reader.principals)
        if document is None:
            raise DocumentNotFound(document_id)
        try:
            await require_writable(self.store, scope, reach, document.corpus_id, document_id)
        except CorpusNotFound:
            raise DocumentNotFound(document_id) from None
        if not await self.store.update_document(scope.tenant, key, checked, safe):
            raise DocumentNotFound(document_id)  # deleted meanwhile
        return await self._get(scope, reach, key, document_id)

    async def set_access(
        self, scope: Scope, document_id: str, principals: Sequence[str]
    ) -> tuple[Document | None, tuple[str, ...]]:
        """Replace who may read the document (``documents.access``): (the document now, None when
        the new list leaves the caller out; the list it had). The caller must read the document (else
        not found, as if absent) and write its corpus (an ancestor's: CorpusReadOnly)."""
        key = parse_id(document_id, "document_id")
        new = access_list(principals, "principals")
        reach = await self.reach.reach_of(scope)
        document = await self._get(scope, reach, key, document_id)
        try:
            await require_writable(self.store, scope, reach, document.corpus_id, document_id)
        except CorpusNotFound:
            raise DocumentNotFound(document_id) from None
        old = await change_access(self.store, scope, key, document.principals, new)
        now = await self.store.document(reach.owners(scope.tenant), key, reach.reader.principals)
        return now, old

    async def batch_get(self, scope: Scope, document_ids: list[str]) -> tuple[list[Document], list[str]]:
        asked = batch_ids(document_ids)
        wanted = [key for key in asked.values() if key is not None]
        reach = await self.reach.reach_of(scope)
        principals = reach.reader.principals
        found = await self.store.documents(reach.owners(scope.tenant), wanted, principals) if wanted else []
        corpora = {
            corpus_id for corpus_id in {d.corpus_id for d in found} if await self._readable(scope, reach, corpus_id)
        }
        readable = [d for d in found if d.corpus_id in corpora]
        return batch_answer(asked, readable)  # one out of reach is not found, as if absent

    async def watch(
        self, scope: Scope, corpus_id: str, filter_text: str = "", corpus_key: str = ""
    ) -> AsyncIterator[DocumentChange]:
        """The corpus's documents, then each change as the database announces it. Listening
        starts before the snapshot is read, so a change committed meanwhile is not missed (at
        worst it is re-read and found unchanged). The caller's reach is checked again on every
        announcement, before anything of it is read: once the corpus is out of reach (rebound,
        another band, deleted) the watch ends with CorpusNotFound, as a new watch would. (The
        stream also ends at its token's expiry: the runtime's scope interceptor.) With a filter, the
        list is the documents it holds for: one that comes to hold is CHANGED, one that stops REMOVED;
        so with the caller's access: a document whose list stops admitting it is REMOVED, one whose
        list comes to admit it CHANGED (a list change announces its document)."""
        assert self.feed is not None
        condition = parse_filter(filter_text)
        reach = await self.reach.reach_of(scope)
        key, named = await required_corpus(self.reach, scope, reach, corpus_id, corpus_key)
        if not await self._readable(scope, reach, key):
            raise CorpusNotFound(named)
        owners, principals = reach.owners(scope.tenant), reach.reader.principals
        shown: dict[int, Document] = {}
        async with self.feed.subscribe(key) as announced:
            page = Page(SNAPSHOT_PAGE)
            while True:
                found = await self.store.list_documents(owners, key, page.probe(), principals, condition)
                documents, after = page.cut(found, lambda document: document.document_id)
                for document in documents:
                    shown[document.document_id] = document
                    yield DocumentChange(ChangeKind.SNAPSHOT, document.document_id, document)
                if after is None:
                    break
                page = Page(SNAPSHOT_PAGE, after)
            yield DocumentChange(ChangeKind.SYNCED)
            while True:
                document_ids = await announced.next()
                reach = await self.reach.reach_of(scope)
                if not await self._readable(scope, reach, key):
                    raise CorpusNotFound(named)
                if not document_ids:  # only the corpus changed, and it is still in reach
                    continue
                owners = reach.owners(scope.tenant)
                changed = await self.store.documents(owners, document_ids, principals, condition)
                now = {d.document_id: d for d in changed}
                for document_id in document_ids:  # in the order announced
                    change = change_of(key, document_id, now.get(document_id), shown.get(document_id))
                    if change is None:
                        continue
                    if change.document is None:
                        shown.pop(document_id, None)
                    else:
                        shown[document_id] = change.document
                    yield change

    async def _readable(self, scope: Scope, reach: Reach, corpus_id: int) -> bool:
        if not reach.has(corpus_id):
            return False
        kind = await self.store.corpus_kind(scope.tenant, corpus_id)
        return kind is not None and may_read(kind, scope.capabilities)

    async def list(
        self, scope: Scope, corpus_id: str, page: Page, filter_text: str = "", corpus_key: str = ""
    ) -> tuple[list[Document], int | None]:
        """A page of the corpus's documents (those the filter holds for, over their metadata and
        built-in fields), oldest first; the corpus named by id or by key."""
        condition = parse_filter(filter_text)
        reach = await self.reach.reach_of(scope)
        key, named = await required_corpus(self.reach, scope, reach, corpus_id, corpus_key)
        if not await self._readable(scope, reach, key):
            raise CorpusNotFound(named)
        found = await self.store.list_documents(
            reach.owners(scope.tenant), key, page.probe(), reach.reader.principals, condition
        )
        return page.cut(found, lambda document: document.document_id)

    async def text(self, scope: Scope, document_id: str, page: int) -> TextPage:
        key = parse_id(document_id, "document_id")
        reach = await self.reach.reach_of(scope)
        document = await self._get(scope, reach, key, document_id)
        if (
            not document.state.terminal and document.chunk_count == 0
        ):  # nothing searchable yet (a re-extraction keeps its old text)
            raise DocumentIndexing(key, document.stage)
        chunks = await self.store.document_chunks(reach.owners(scope.tenant), key, reach.reader.principals)
        text = paginate(key, chunks, page)
        return dataclasses.replace(text, source_url=document.source_url or "", extractor=document.extractor)

    async def move(
        self,
        scope: Scope,
        target_corpus_id: str,
        document_ids: Sequence[str],
        source_corpus_id: str,
        all_documents: bool,
    ) -> Moved:
        target = parse_id(target_corpus_id, "target_corpus_id")
        reach = await self.reach.reach_of(scope)
        await require_writable(self.store, scope, reach, target, target_corpus_id)
        source = parse_id(source_corpus_id, "source_corpus_id") if source_corpus_id else None
        if source is not None:
            await require_writable(self.store, scope, reach, source, source_corpus_id)
        if document_ids and all_documents:
            raise InvalidRequest("give document_ids or all_documents, not both", field="document_ids")
        if len(document_ids) > MAX_MOVE_IDS:
            raise InvalidRequest(
                f"at most {MAX_MOVE_IDS} document_ids per request; to move a whole corpus, "
                "set all_documents with its source_corpus_id",
                field="document_ids",
            )
        if document_ids:
            keys = [parse_id(d, "document_ids") for d in document_ids]
            await self._require_movable(scope, reach, keys)
        elif all_documents and source is not None:
            count, first = await self.store.move_all(
                scope.tenant, source, target, MAX_MOVE_IDS, reach.reader.principals
            )
            return Moved(count, first)
        else:
            movable = await self.store.movable_documents(scope.tenant, source, reach.writable, reach.reader.principals)
            listed = ",".join(str(d) for d in movable[:100])
            raise InvalidRequest(
                "name the documents to move, or set all_documents with a source_corpus_id; "
                f"documents that could be moved: [{listed}]",
                field="document_ids",
                reason="NOTHING_TO_MOVE",
                document_id=listed,
            )
        # Checked again under the rows' locks: only documents of corpora the caller writes move.
        moved, missing, elsewhere = await self.store.move(
            scope.tenant, target, keys, source, reach.writable, reach.reader.principals
        )
        if missing:  # all or nothing: another tenant's document is simply not found
            raise DocumentNotFound(",".join(str(m) for m in missing[:20]))
        if elsewhere:
            listed = ",".join(str(d) for d in elsewhere[:20])
            raise InvalidRequest(
                f"documents not in source corpus {source_corpus_id}: [{listed}]; nothing was moved",
                field="document_ids",
                reason="DOCUMENT_NOT_IN_SOURCE",
                document_id=listed,
            )
        return Moved(len(moved), moved)

    async def _require_movable(self, scope: Scope, reach: Reach, keys: Sequence[int]) -> None:
        """Moving a document out of its corpus writes that corpus: each named document's corpus
        must be writable by the caller. One in a corpus the caller only reads is CorpusReadOnly;
        one it may not see or write at all is not found, as if absent."""
        found = await self.store.documents((scope.tenant,), sorted(set(keys)), reach.reader.principals)
        for corpus_id in sorted({d.corpus_id for d in found if reach.has(d.corpus_id)}):
            try:
                await require_writable(self.store, scope, reach, corpus_id, str(corpus_id))
            except CorpusNotFound:
                hidden = [str(d.document_id) for d in found if d.corpus_id == corpus_id]
                raise DocumentNotFound(",".join(hidden[:20])) from None

    async def prompt_context(self, scope: Scope) -> tuple[str, int, int]:
        reach = await self.reach.reach_of(scope)
        summary = await self.store.corpus_summary(scope.tenant, reach.reader.principals)
        corpora = [c for c in summary if reach.has(c[0])]
        if not corpora:
            return "", 0, 0
        documents = sum(count for _, _, count in corpora)
        names = ", ".join(f"{name} (corpus_id={corpus_id})" for corpus_id, name, _ in corpora)
        text = (
            f"- Knowledge: {documents} documents across {len(corpora)} corpora: {names}. "
            "Use `search_documents` to find content."
        )
        return text, documents, len(corpora)
