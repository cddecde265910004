"""What every capability's use cases check before they read or write a corpus, and the page size
every listing takes: one rule each, for corpora, documents, jobs, imports and deletion alike."""

from __future__ import annotations

from knowledge_runtime.auth import Scope
from knowledge_runtime.corpus_keys import BY_KEY, InvalidCorpusKey, check_key
from knowledge_runtime.corpus_keys import resolve as resolve_key
from knowledge_runtime.pagination import bounded_page_size
from knowledge_runtime.reach import Access, Reach

from knowledge_ingest.domain.documents import parse_id
from knowledge_ingest.domain.errors import CorpusKeyNotFound, CorpusNotFound, CorpusReadOnly, InvalidRequest
from knowledge_ingest.domain.model import Page
from knowledge_ingest.domain.ports import CorpusKinds, ReachSource
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


def corpus_ref(corpus_id: str, corpus_key: str) -> str:
    """Which of the two a request named a corpus by ("" for neither): InvalidRequest for both.
    In a REST path, corpus_id "-" means "named by corpus_key" (AIP-159's wildcard)."""
    by_id = corpus_id.strip() not in ("", BY_KEY)
    if by_id and corpus_key:
        raise InvalidRequest("give corpus_id or corpus_key, not both", field="corpus_key")
    if corpus_id.strip() == BY_KEY and not corpus_key:
        raise InvalidRequest(
            f"corpus_id {BY_KEY!r} names the corpus by corpus_key: give corpus_key", field="corpus_key"
        )
    return "" if not (by_id or corpus_key) else ("id" if by_id else "key")


async def corpus_named(source: ReachSource, scope: Scope, reach: Reach, corpus_id: str, corpus_key: str) -> int | None:
    """The corpus a request names by id or key (None: by neither). An id that spells no id, or a
    key that names no corpus in the caller's reach, is CorpusNotFound as an unknown one is; a key
    that is no key is InvalidRequest. Whether the caller may read or write it is the caller's
    next check (``require_readable``, ``require_writable``); a key resolves only within reach."""
    which = corpus_ref(corpus_id, corpus_key)
    if which == "id":
        return parse_id(corpus_id, "corpus_id")
    if which == "":
        return None
    try:
        check_key(corpus_key)
    except InvalidCorpusKey as error:
        raise InvalidRequest(str(error), field="corpus_key") from None
    return resolve_key(reach, await source.keyed(scope.tenant, corpus_key))


async def required_corpus(
    source: ReachSource, scope: Scope, reach: Reach, corpus_id: str, corpus_key: str
) -> tuple[int, str]:
    """(the corpus a request must name, how it named it for an error): by id or by key, as
    ``corpus_named``; naming neither is InvalidRequest, an unknown key CorpusKeyNotFound."""
    key = await corpus_named(source, scope, reach, corpus_id, corpus_key)
    if key is not None:
        return key, corpus_key or corpus_id
    if corpus_key:
        raise CorpusKeyNotFound(corpus_key)
    raise InvalidRequest("corpus_id (or corpus_key) is required", field="corpus_id")
