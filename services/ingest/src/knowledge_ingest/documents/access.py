"""Who may read a document: changing its access list, wherever a request changes it.

SetDocumentAccess changes it; so do IngestText with document_id and IndexPassages of a known
reference when they carry a list (``AccessList``). One path for all three: the caller has read the
document already (a document it may not read is absent to it) and may write its corpus; a list
that differs from the document's needs ``document.share``; the store changes it, records the
change and announces it in one transaction. The rule that reads the list is
``knowledge_runtime.reach.may_read_document``.
"""

from __future__ import annotations

from collections.abc import Iterable

from knowledge_runtime.auth import DOCUMENT_SHARE, Scope
from knowledge_runtime.reach import access_list

from knowledge_ingest.domain.errors import DocumentNotFound
from knowledge_ingest.domain.ports import AccessStore


def given_list(entries: Iterable[str] | None, field: str) -> tuple[str, ...] | None:
    """A request's list as stored (checked, deduplicated, sorted: AccessListInvalid naming
    ``field``); None when the request gave none (an absent ``AccessList``)."""
    return None if entries is None else access_list(entries, field)


async def change_access(
    store: AccessStore, scope: Scope, document_id: int, current: tuple[str, ...], new: tuple[str, ...]
) -> tuple[str, ...]:
    """Make ``new`` the list of the document whose list the caller read as ``current`` (it read
    the document, and may write its corpus: the caller's checks); the list it had. Nothing is
    written or recorded when it is ``new`` already; a change needs ``document.share``.
    DocumentNotFound when the document went meanwhile."""
    if current == new:
        return current
    scope.require(DOCUMENT_SHARE)
    old = await store.set_access(scope.tenant, document_id, new, scope.subject)
    if old is None:
        raise DocumentNotFound(str(document_id))
    return old
