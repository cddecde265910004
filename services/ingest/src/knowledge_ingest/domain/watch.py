"""A live document list: what a watcher of a corpus is told when a document is announced.

The database announces every committed change of a document (or of its job's stage); the watcher
re-reads the document and these rules decide what, if anything, it shows.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from knowledge_runtime import ids

from knowledge_ingest.domain.documents import Document
from knowledge_ingest.domain.errors import InvalidRequest

MAX_BATCH_GET = 100  # ids per BatchGetDocuments


class ChangeKind(enum.Enum):
    SNAPSHOT = "SNAPSHOT"  # as it was when the watch began
    SYNCED = "SYNCED"  # the snapshot is complete
    CHANGED = "CHANGED"  # added to the corpus, or changed
    REMOVED = "REMOVED"  # deleted, or moved to another corpus


@dataclass(frozen=True, slots=True)
class DocumentChange:
    kind: ChangeKind
    document_id: int | None = None
    document: Document | None = None


def change_of(corpus_id: int, document_id: int, now: Document | None, shown: Document | None) -> DocumentChange | None:
    """What to send after ``document_id`` was announced: ``now`` is the document as re-read (None
    when it is gone), ``shown`` what the watcher last sent of it (None: nothing, or REMOVED).
    None: nothing the watcher shows changed (a repeat announcement, or one of another corpus's
    document that it never showed)."""
    here = now if now is not None and now.corpus_id == corpus_id else None
    if here is None:
        return DocumentChange(ChangeKind.REMOVED, document_id) if shown is not None else None
    if here == shown:
        return None
    return DocumentChange(ChangeKind.CHANGED, document_id, here)


def batch_ids(document_ids: list[str]) -> dict[str, int | None]:
    """The ids asked, once each in the order asked, with the id each spells (None: it spells no
    document's, so it is simply not found)."""
    if not document_ids:
        raise InvalidRequest("document_ids must name at least one document", field="document_ids")
    if len(document_ids) > MAX_BATCH_GET:
        raise InvalidRequest(f"at most {MAX_BATCH_GET} document_ids per request", field="document_ids")
    return {raw: ids.parse_id(raw) for raw in document_ids}


def batch_answer(asked: dict[str, int | None], found: list[Document]) -> tuple[list[Document], list[str]]:
    """(the documents found, in the order asked; the ids asked that are not the tenant's)."""
    by_id = {document.document_id: document for document in found}
    documents = [by_id[key] for key in asked.values() if key is not None and key in by_id]
    missing = [raw for raw, key in asked.items() if key is None or key not in by_id]
    return documents, missing
