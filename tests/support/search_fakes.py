"""Fakes at search's ports for the use-case tests: an index of three chunks whose channels
answer fixed hits, and an embedder that records what it embedded."""

from __future__ import annotations

from knowledge_runtime.auth import Scope
from knowledge_runtime.costs import Cost, CostItem
from knowledge_search.domain.model import ChannelHit, Chunk, EmbeddedQuery, Weights

from tests.support.reach import FakeReach

SCOPE = Scope(tenant="acme", capabilities=frozenset({"search"}), scope_claim="/")


def chunk(chunk_id: int, content: str) -> Chunk:
    return Chunk(chunk_id, chunk_id * 10, 1, "f.txt", "", None, content)


CONTENT = {
    1: "Refunds take thirty days. Write to help@shop.example for help.",
    2: "Shipping is free.",
    3: "Refund form R-7.",
}


class FakeIndex:
    def __init__(self, corpus_weights: Weights = Weights(), coverage: float = 1.0, extra: int = 0) -> None:
        self.calls: list[tuple] = []
        self.hydrated: list[list[int]] = []
        self._weights = corpus_weights
        self._coverage = coverage
        self._extra = extra  # more vector hits, as a deep channel returns
        self._reach = FakeReach()
        self._reach.place("acme", 1)

    async def vector_search(self, tenant, vector, filters, depth):
        self.calls.append(("vector", tenant, tuple(vector), depth))
        more = [ChannelHit(100 + i, 1000 + i, 0.4 - i / 10_000, 3 + i) for i in range(self._extra)]
        return [ChannelHit(1, 10, 0.82, 1), ChannelHit(2, 20, 0.5, 2), *more]

    async def lexical_search(self, tenant, text, filters, depth):
        self.calls.append(("lexical", tenant, text, depth))
        return [ChannelHit(3, 30, 7.0, 1, self._coverage), ChannelHit(1, 10, 3.0, 2, self._coverage / 2)]

    async def chunks(self, tenant, chunk_ids, owners=(), principals=()):
        self.calls.append(("chunks", tenant, tuple(chunk_ids)))
        self.hydrated.append(list(chunk_ids))
        return {c: chunk(c, CONTENT.get(c, f"chunk {c}")) for c in chunk_ids if c != 404}

    async def check_filters(self, tenant, filters):
        self.calls.append(("filters", tenant, filters))

    async def reader(self, scope):
        return await self._reach.reader(scope)

    async def reach_for(self, tenant, reader):
        return await self._reach.reach_for(tenant, reader)

    async def generation(self, tenant, reader):
        return await self._reach.generation(tenant, reader)

    async def corpus_weights(self, corpus_id):
        return self._weights


class FakeEmbedder:
    def __init__(self) -> None:
        self.texts: list[str] = []

    async def embed_query(self, tenant, text):
        self.texts.append(text)
        return EmbeddedQuery(
            vector=[1.0, 0.0], warnings=("query truncated",), cost=Cost(items=(CostItem("m", "embed", 1, 5),))
        )
