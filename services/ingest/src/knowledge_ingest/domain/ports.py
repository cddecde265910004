"""What the use cases need from the outside world."""

from __future__ import annotations

from typing import Protocol

from knowledge_ingest.domain.model import Corpus, NewCorpus, Page


class CorpusRepository(Protocol):
    async def create(self, tenant: str, corpus: NewCorpus) -> Corpus:
        """Insert the corpus; raises CorpusNameTaken on a duplicate name in the tenant."""

    async def list_user_corpora(self, tenant: str, page: Page) -> list[Corpus]:
        """The tenant's non-system corpora after ``page.after_id``, oldest first, at most ``page.size``."""
