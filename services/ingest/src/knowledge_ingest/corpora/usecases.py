"""Corpora: create, list and bind, per tenant, within the caller's reach (runtime.reach)."""

from __future__ import annotations

from dataclasses import dataclass

from knowledge_runtime.auth import Scope
from knowledge_runtime.pagination import bounded_page_size
from knowledge_runtime.reach import InvalidScopePath, Reach, ScopePath, allows

from knowledge_ingest.domain.documents import parse_id
from knowledge_ingest.domain.errors import CorpusNotFound, InvalidCorpus, InvalidRequest
from knowledge_ingest.domain.model import Corpus, NewCorpus, Page
from knowledge_ingest.domain.ports import CorpusRepository, DocumentRepository, ReachSource
from knowledge_ingest.domain.system_corpora import may_write, new_platform_corpus

DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 1000


def page_of(page_size: int, after_id: int) -> Page:
    return Page(size=bounded_page_size(page_size, DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE), after_id=after_id)


async def require_writable(
    store: DocumentRepository, scope: Scope, reach: Reach | None, corpus_id: int, named: str
) -> None:
    """CorpusNotFound unless the corpus is in the caller's reach (``reach``; None: the whole
    tenant) and the caller may write into it: another tenant's corpus, one outside the caller's
    scope or clearance, and a system corpus without the capability that writes it, are alike absent."""
    if reach is not None and not reach.has(corpus_id):
        raise CorpusNotFound(named)
    kind = await store.corpus_kind(scope.tenant, corpus_id)
    if kind is None or not may_write(kind, scope.capabilities, scope.tenant):
        raise CorpusNotFound(named)


@dataclass
class CorpusUseCases:
    corpora: CorpusRepository
    reach: ReachSource

    async def create_corpus(
        self, scope: Scope, name: str, description: str, confidentiality: str = "", platform_wide: bool = False
    ) -> Corpus:
        """A new corpus is bound to its creator's own node, in a band the creator may read; a
        platform-wide one (domain.system_corpora decides who and which band) to no tenant."""
        if platform_wide:
            platform = new_platform_corpus(
                name, description, confidentiality, capabilities=scope.capabilities, tenant=scope.tenant
            )
            return await self.corpora.create_platform(scope.tenant, platform)
        corpus = NewCorpus.parse(name, description, confidentiality)
        reader = await self.reach.reader(scope)
        if not allows(reader.clearance, corpus.confidentiality):
            raise InvalidCorpus(
                f"confidentiality {corpus.confidentiality.value} is above the token's clearance "
                f"{reader.clearance.value}; its creator could not read the corpus",
                field="confidentiality",
            )
        return await self.corpora.create(scope.tenant, corpus, reader.node)

    async def list_corpora(self, scope: Scope, page: Page) -> tuple[list[Corpus], int | None]:
        """One page and the id to continue after (None on the last page)."""
        reach = await self.reach.reach_of(scope)
        found = await self.corpora.list_user_corpora(scope.tenant, page.probe(), reach.corpus_ids)
        return page.cut(found, lambda corpus: corpus.corpus_id)

    async def bind_corpus(self, scope: Scope, corpus_id: str, node_text: str) -> Corpus:
        """Bind a corpus in the caller's reach to the caller's own node or a node below it."""
        key = parse_id(corpus_id, "corpus_id")
        try:
            node = ScopePath.parse(node_text)
        except InvalidScopePath as error:
            raise InvalidRequest(str(error), field="scope") from None
        reach = await self.reach.reach_of(scope)
        if not reach.has(key):
            raise CorpusNotFound(corpus_id)
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
