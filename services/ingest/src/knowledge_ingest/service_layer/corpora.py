"""Corpora: create and list, per tenant."""

from __future__ import annotations

from dataclasses import dataclass

from knowledge_runtime.auth import Scope
from knowledge_runtime.pagination import check_page_size

from knowledge_ingest.domain.errors import CorpusNotFound
from knowledge_ingest.domain.model import Corpus, NewCorpus, Page
from knowledge_ingest.domain.ports import CorpusRepository, DocumentRepository
from knowledge_ingest.domain.system_corpora import may_write

DEFAULT_PAGE_SIZE = 50
MAX_PAGE_SIZE = 1000


def page_of(page_size: int, after_id: int) -> Page:
    size = DEFAULT_PAGE_SIZE if check_page_size(page_size) == 0 else min(page_size, MAX_PAGE_SIZE)
    return Page(size=size, after_id=after_id)


async def require_writable(store: DocumentRepository, scope: Scope, corpus_id: int, named: str) -> None:
    """CorpusNotFound unless the caller may write into the corpus: another tenant's corpus, and a
    system corpus without the capability that writes it, are alike absent."""
    kind = await store.corpus_kind(scope.tenant, corpus_id)
    if kind is None or not may_write(kind, scope.capabilities):
        raise CorpusNotFound(named)


@dataclass
class CorpusUseCases:
    corpora: CorpusRepository

    async def create_corpus(self, scope: Scope, name: str, description: str) -> Corpus:
        return await self.corpora.create(scope.tenant, NewCorpus.parse(name, description))

    async def list_corpora(self, scope: Scope, page: Page) -> tuple[list[Corpus], int | None]:
        """One page and the id to continue after (None on the last page)."""
        found = await self.corpora.list_user_corpora(scope.tenant, page.probe())
        return page.cut(found, lambda corpus: corpus.corpus_id)
