"""Search use cases: retrieve, fuse, judge relevance, answer with citations.

Independent of gRPC and PostgreSQL: the channels, the embedder and the synthesiser are ports.
The tenant always comes from the verified scope, never from the request.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field, replace

from knowledge_runtime.auth import Scope
from knowledge_runtime.logging import get_logger
from knowledge_runtime.reach import Reach, Reader
from knowledge_runtime.tracing import tracer

from knowledge_search.domain.anonymise import Anonymiser
from knowledge_search.domain.answer import Source, cite, excerpt
from knowledge_search.domain.cache import OutcomeCache, cache_key
from knowledge_search.domain.errors import EmbedderUnavailable, RerankUnavailable
from knowledge_search.domain.fusion import DEFAULT_FUSION, Fusion, fuse, single_channel
from knowledge_search.domain.model import (
    EQUAL_WEIGHTS,
    Answer,
    ChannelHit,
    Chunk,
    Citation,
    Cost,
    Ranked,
    Relevance,
    SearchHit,
    SearchMode,
    SearchOutcome,
    SearchRequest,
    Weights,
)
from knowledge_search.domain.ports import ChunkIndex, CostLedger, LlmBudget, QueryEmbedder, Reranker, Synthesiser
from knowledge_search.domain.relevance import Thresholds, banner
from knowledge_search.domain.retrieval import CHANNEL_DEPTH, RERANK_WINDOW

log = get_logger("knowledge.search")
_tracer = tracer("knowledge.search")
RERANK_FALLBACK = "reranking is unavailable ({why}); the results are in fused order"
BUDGET_FALLBACK = "{why}; this answer is extractive (quoted from the sources, no LLM)"


@dataclass
class SearchUseCases:
    index: ChunkIndex
    embedder: QueryEmbedder
    thresholds: Thresholds = field(default_factory=Thresholds)
    channel_depth: int = CHANNEL_DEPTH
    default_weights: Weights = EQUAL_WEIGHTS
    fusion: Fusion = DEFAULT_FUSION
    reranker: Reranker | None = None
    rerank_default: bool = False  # rerank when the request does not say
    rerank_window: int = RERANK_WINDOW
    cache: OutcomeCache | None = None  # None: every request computed

    async def search(self, scope: Scope, request: SearchRequest) -> SearchOutcome:
        """The outcome for the caller's reach; from the cache while nothing it sees has changed."""
        tenant = scope.tenant
        reader = await self.index.reader(scope)
        if self.cache is None:
            return await self._search(tenant, reader, request)
        key = cache_key(tenant, reader, await self.index.generation(tenant, reader), request)
        cached = self.cache.get(key)
        if cached is not None:
            return replace(cached, cost=Cost())  # nothing was embedded for this answer
        outcome = await self._search(tenant, reader, request)
        self.cache.put(key, outcome)
        return outcome

    async def _search(self, tenant: str, reader: Reader, request: SearchRequest) -> SearchOutcome:
        rerank = self.rerank_default if request.rerank is None else request.rerank
        if request.rerank and self.reranker is None:
            raise RerankUnavailable()
        rerank = rerank and self.reranker is not None
        depth = max(request.top_k, self.rerank_window) if rerank else request.top_k
        request = within(request, await self.index.reach_for(tenant, reader))
        await self.index.check_filters(tenant, request.filters)
        vector_task = self._vector(tenant, request) if request.mode is not SearchMode.LEXICAL else _nothing()
        lexical_task = self._lexical(tenant, request) if request.mode is not SearchMode.VECTOR else _none()
        (vector_hits, warnings, cost), lexical_hits = await asyncio.gather(vector_task, lexical_task)
        with _tracer.start_as_current_span("search.fuse") as span:
            if request.mode is SearchMode.HYBRID:
                weights = await self._weights(request)
                ranked = fuse(vector_hits, lexical_hits, weights, depth, self.fusion)
            elif request.mode is SearchMode.VECTOR:
                ranked = single_channel(vector_hits, vector=True, top_k=depth, k=self.fusion.k)
            else:
                ranked = single_channel(lexical_hits, vector=False, top_k=depth, k=self.fusion.k)
            span.set_attribute("search.fused", len(ranked))
        hits = await self._hydrate(tenant, ranked)
        if rerank and hits:
            try:
                hits, rerank_cost = await self._rerank(tenant, request, hits)
                cost = cost.plus(rerank_cost)
            except (RerankUnavailable, EmbedderUnavailable) as error:
                if request.rerank:  # asked for by the caller: say so, never a silent no-op
                    raise
                # The service default: fall back to the fused order, with a warning.
                log.warning("rerank_fallback", reason=error.reason)
                why = "no reranking model" if isinstance(error, RerankUnavailable) else "the embedder is unavailable"
                warnings = (*warnings, RERANK_FALLBACK.format(why=why))
        hits = hits[: request.top_k]
        # The banner judges the cosine similarity of what is returned, reranked or not.
        relevance = banner(hits, self.thresholds)
        log.info(
            "search_done",
            mode=request.mode.value,
            results=len(hits),
            vector_hits=len(vector_hits),
            lexical_hits=len(lexical_hits),
            relevance=relevance.value,
        )
        return SearchOutcome(hits=tuple(hits), relevance=relevance, warnings=request.warnings + warnings, cost=cost)

    async def _rerank(self, tenant: str, request: SearchRequest, hits: list[SearchHit]) -> tuple[list[SearchHit], Cost]:
        """The first ``rerank_window`` hits in the reranking model's order (ties keep the fused
        order), then the rest in fused order."""
        window, rest = hits[: self.rerank_window], hits[self.rerank_window :]
        assert self.reranker is not None
        with _tracer.start_as_current_span("search.rerank") as span:
            span.set_attribute("search.rerank_window", len(window))
            reranking = await self.reranker.rerank(tenant, request.lexical_text, [h.chunk.content for h in window])
        order = sorted(range(len(window)), key=lambda i: (-reranking.scores[i], i))
        reranked = [replace(window[i], rerank_score=reranking.scores[i]) for i in order]
        return reranked + rest, reranking.cost

    async def _hydrate(self, tenant: str, ranked: list[Ranked]) -> list[SearchHit]:
        """Content is read once, for the results returned; a chunk deleted meanwhile drops out."""
        with _tracer.start_as_current_span("search.hydrate") as span:
            chunks = await self.index.chunks(tenant, [r.chunk_id for r in ranked])
            span.set_attribute("search.results", len(chunks))
        return [SearchHit.of(r, chunks[r.chunk_id]) for r in ranked if r.chunk_id in chunks]

    async def _vector(self, tenant: str, request: SearchRequest) -> tuple[list[ChannelHit], tuple[str, ...], Cost]:
        with _tracer.start_as_current_span("search.embed"):
            embedded = await self.embedder.embed_query(tenant, request.text)
        with _tracer.start_as_current_span("search.vector") as span:
            hits = await self.index.vector_search(tenant, embedded.vector, request.filters, self.channel_depth)
            span.set_attribute("search.hits", len(hits))
        return hits, embedded.warnings, embedded.cost

    async def _lexical(self, tenant: str, request: SearchRequest) -> list[ChannelHit]:
        with _tracer.start_as_current_span("search.lexical") as span:
            hits = await self.index.lexical_search(tenant, request.lexical_text, request.filters, self.channel_depth)
            span.set_attribute("search.hits", len(hits))
        return hits

    async def _weights(self, request: SearchRequest) -> Weights:
        """The request's weights, else the corpus's, else the defaults, field by field."""
        corpus = Weights()
        if request.filters.corpus_id is not None:
            corpus = await self.index.corpus_weights(request.filters.corpus_id)
        return request.weights.over(corpus).over(self.default_weights)


def within(request: SearchRequest, reach: Reach) -> SearchRequest:
    """The request restricted to the corpora the caller reaches (no predicate when it reaches all)."""
    corpus_ids = None if reach.everything else reach.corpus_ids
    return replace(request, filters=replace(request.filters, corpus_ids=corpus_ids))


async def _nothing() -> tuple[list[ChannelHit], tuple[str, ...], Cost]:
    return [], (), Cost()


async def _none() -> list[ChannelHit]:
    return []


@dataclass
class AnswerUseCases:
    searcher: SearchUseCases
    synthesiser: Synthesiser
    anonymiser: Anonymiser = field(default_factory=Anonymiser)
    ledger: CostLedger | None = None
    # With an LLM synthesiser: the tenant's LLM budget, and what answers once it is spent.
    budget: LlmBudget | None = None
    fallback: Synthesiser | None = None

    async def query(self, scope: Scope, request: SearchRequest) -> Answer:
        outcome = await self.searcher.search(scope, request)
        if not outcome.hits or outcome.relevance is Relevance.LOW:
            return Answer(text="", citations=(), relevance=outcome.relevance, cost=outcome.cost)
        hits = outcome.hits
        anonymised = self.anonymiser.anonymise(request.text)
        sources = [
            Source(number=n, title=_title(hit.chunk), text=anonymised.mask(hit.chunk.content))
            for n, hit in enumerate(hits, start=1)
        ]
        synthesiser, refusal = self.synthesiser, None
        if self.budget is not None and self.fallback is not None:
            refusal = await self.budget.refusal(scope.tenant)
            if refusal is not None:
                log.info("answer_budget_fallback", reason=refusal.reason)
                synthesiser = self.fallback
        with _tracer.start_as_current_span("search.synthesise") as span:
            span.set_attribute("search.synthesiser", synthesiser.model_id)
            synthesis = await synthesiser.synthesise(anonymised.text, sources)
        text, order = cite(synthesis.text, len(sources))
        quoted = synthesis.excerpts or {}
        citations = tuple(
            Citation(
                chunk=hits[n - 1].chunk,
                excerpt=anonymised.restore(quoted[n]) if n in quoted else excerpt(hits[n - 1].chunk.content),
            )
            for n in order
        )
        if self.ledger is not None:
            for item in synthesis.cost.items:
                await self.ledger.record(scope.tenant, item)
        log.info("answer_done", sources=len(sources), citations=len(citations), synthesiser=synthesiser.model_id)
        return Answer(
            text=anonymised.restore(text),
            citations=citations,
            relevance=outcome.relevance,
            cost=outcome.cost.plus(synthesis.cost),
            fallback_reason=refusal.reason if refusal is not None else "",
            fallback_message=BUDGET_FALLBACK.format(why=refusal.message) if refusal is not None else "",
        )


def _title(chunk: Chunk) -> str:
    parts = [chunk.filename or f"document {chunk.document_id}"]
    if chunk.section:
        parts.append(chunk.section)
    if chunk.page:
        parts.append(f"page {chunk.page}")
    return " - ".join(parts)
