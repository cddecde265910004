"""Corpora: create, list and bind, per tenant, within the caller's reach (runtime.reach)."""

from __future__ import annotations

from dataclasses import dataclass

from knowledge_runtime.auth import Scope
from knowledge_runtime.corpus_keys import BY_KEY, InvalidCorpusKey, check_key
from knowledge_runtime.corpus_keys import resolve as resolve_key
from knowledge_runtime.pagination import bounded_page_size
from knowledge_runtime.reach import Access, InvalidScopePath, Reach, ScopePath, allows

from knowledge_ingest.domain.documents import parse_id
from knowledge_ingest.domain.errors import (
    CorpusKeyNotFound,
    CorpusKeyTaken,
    CorpusNameTaken,
    CorpusNotFound,
    CorpusReadOnly,
    InvalidCorpus,
    InvalidRequest,
)
from knowledge_ingest.domain.model import Corpus, NewCorpus, Page, name_taken
from knowledge_ingest.domain.ports import CorpusKinds, CorpusRepository, ReachSource
from knowledge_ingest.domain.system_corpora import may_read, new_platform_corpus, write_access

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


async def require_readable(store: CorpusKinds, scope: Scope, reach: Reach | None, corpus_id: int, named: str) -> None:
    """CorpusNotFound unless the caller may read the corpus: in its reach (None: the whole
    tenant) and of a kind it reads (a housekeeping corpus only with system.write)."""
    if reach is not None and not reach.has(corpus_id):
        raise CorpusNotFound(named)
    kind = await store.corpus_kind(scope.tenant, corpus_id)
    if kind is None or not may_read(kind, scope.capabilities):
        raise CorpusNotFound(named)


@dataclass
class CorpusUseCases:
    corpora: CorpusRepository
    reach: ReachSource
    kinds: CorpusKinds

    async def create_corpus(
        self,
        scope: Scope,
        name: str,
        description: str,
        confidentiality: str = "",
        platform_wide: bool = False,
        key: str = "",
    ) -> Corpus:
        """A new corpus is bound to its creator's own node, in a band the creator may read; a
        platform-wide one (domain.system_corpora decides who and which band) to no tenant. Its
        name, and its key when it has one, must be free among the corpora the creator reads at
        its node (``name_taken``)."""
        if platform_wide and key:
            raise InvalidCorpus("a platform-wide corpus takes no key", field="key")
        if platform_wide:
            platform = new_platform_corpus(
                name, description, confidentiality, capabilities=scope.capabilities, tenant=scope.tenant
            )
            return await self.corpora.create_platform(scope.tenant, platform)
        corpus = NewCorpus.parse(name, description, confidentiality, key)
        reader = await self.reach.reader(scope)
        if not allows(reader.clearance, corpus.confidentiality):
            raise InvalidCorpus(
                f"confidentiality {corpus.confidentiality.value} is above the token's clearance "
                f"{reader.clearance.value}; its creator could not read the corpus",
                field="confidentiality",
            )
        if name_taken(reader, reader.node, await self.corpora.bands_named(scope.tenant, reader.node, corpus.name)):
            raise CorpusNameTaken(corpus.name)
        if corpus.key is not None and name_taken(
            reader, reader.node, await self.corpora.bands_keyed(scope.tenant, reader.node, corpus.key)
        ):
            raise CorpusKeyTaken(corpus.key)
        return await self.corpora.create(scope.tenant, corpus, reader.node)

    async def keyed_or_created(self, scope: Scope, key: str, confidentiality: str = "") -> tuple[int, bool]:
        """(the corpus ``key`` names for the caller, whether it was created now): an unknown key
        is a new corpus at the caller's node, named after the key, in the band asked (TENANT
        unless given). Of two callers creating one key at once, the second finds the first's."""
        reach = await self.reach.reach_of(scope)
        found = await corpus_named(self.reach, scope, reach, "", key)
        if found is not None:
            return found, False
        try:
            return (await self.create_corpus(scope, key, "", confidentiality, key=key)).corpus_id, True
        except (CorpusKeyTaken, CorpusNameTaken):
            found = await corpus_named(self.reach, scope, await self.reach.reach_of(scope), "", key)
            if found is None:
                raise
            return found, False

    async def list_corpora(self, scope: Scope, page: Page) -> tuple[list[Corpus], int | None]:
        """One page and the id to continue after (None on the last page)."""
        reach = await self.reach.reach_of(scope)
        found = await self.corpora.list_user_corpora(scope.tenant, page.probe(), reach.corpus_ids)
        return page.cut(found, lambda corpus: corpus.corpus_id)

    async def bind_corpus(self, scope: Scope, corpus_id: str, node_text: str) -> Corpus:
        """Bind a corpus the caller may write (bound at its node or below) to the caller's own
        node or a node below it: an ancestor's corpus is read-only to the caller, or a low token
        could take it away from every node above it."""
        key = parse_id(corpus_id, "corpus_id")
        try:
            node = ScopePath.parse(node_text)
        except InvalidScopePath as error:
            raise InvalidRequest(str(error), field="scope") from None
        reach = await self.reach.reach_of(scope)
        await require_writable(self.kinds, scope, reach, key, corpus_id)
        if not reach.reader.may_bind_to(node):
            raise InvalidRequest(
                f"scope {str(node)!r} is not the token's own node {str(reach.reader.node)!r} or below it",
                field="scope",
                reason="SCOPE_OUT_OF_REACH",
            )
        bound = await self.corpora.bind(scope.tenant, key, node)
        if bound is None:  # a system corpus, or gone meanwhile
            raise CorpusNotFound(corpus_id)
        return bound
