"""What every capability's use cases check before they read or write a corpus, and the page size
every listing takes: one rule each, for corpora, documents, jobs, imports and deletion alike."""

from __future__ import annotations

from knowledge_runtime.auth import Scope
from knowledge_runtime.pagination import bounded_page_size
from knowledge_runtime.reach import Access, Reach

from knowledge_ingest.domain.errors import CorpusNotFound, CorpusReadOnly
from knowledge_ingest.domain.model import Page
from knowledge_ingest.domain.ports import CorpusKinds
from knowledge_ingest.domain.system_corpora import may_read, write_access

DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 1000


def page_of(page_size: int, after_id: int) -> Page:
    return Page(size=bounded_page_size(page_size, DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE), after_id=after_id)


async def require_writable(store: CorpusKinds, scope: Scope, reach: Reach | None, corpus_id: int, named: str) -> None:
    """The guard of every path that writes into a corpus or changes it (bind, delete, move in or
    out, upload, ingest, import, retry...), before anything is written. CorpusNotFound when the
    corpus is out of the caller's reach (``reach``; None: the whole tenant) or a system corpus the
    caller may not write: another tenant's corpus answers the same. CorpusReadOnly when it is in
    reach but bound above the caller's node: reading an ancestor's corpus never grants writing it
    (``write_access`` decides, from runtime.reach's ``Reader.access``)."""
    if reach is not None and not reach.has(corpus_id):
        raise CorpusNotFound(named)
    kind = await store.corpus_kind(scope.tenant, corpus_id)
    in_reach = Access.WRITABLE if reach is None else reach.access(corpus_id)
    access = write_access(in_reach, kind, scope.capabilities, scope.tenant)
    if access is Access.ABSENT:
        raise CorpusNotFound(named)
    if access is Access.READ_ONLY:
        assert reach is not None
        raise CorpusReadOnly(named, reach.placements[corpus_id].node, reach.reader.node)


async def require_readable(store: CorpusKinds, scope: Scope, reach: Reach | None, corpus_id: int, named: str) -> None:
    """CorpusNotFound unless the caller may read the corpus: in its reach (None: the whole
    tenant) and of a kind it reads (a housekeeping corpus only with system.write)."""
    if reach is not None and not reach.has(corpus_id):
        raise CorpusNotFound(named)
    kind = await store.corpus_kind(scope.tenant, corpus_id)
    if kind is None or not may_read(kind, scope.capabilities):
        raise CorpusNotFound(named)
