"""Search use cases: retrieve, fuse, judge relevance, answer with citations.

Independent of gRPC and PostgreSQL: the channels, the embedder and the synthesiser are ports.
The tenant always comes from the verified scope, never from the request.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field, replace

from knowledge_runtime.auth import Scope
from knowledge_runtime.corpus_keys import resolve as resolve_key
from knowledge_runtime.costs import Cost
from knowledge_runtime.errors import CorpusKeyNotFound, Unavailable
from knowledge_runtime.logging import get_logger
from knowledge_runtime.reach import Reach, Reader
from knowledge_runtime.refusals import Refused
from knowledge_runtime.tracing import tracer

from knowledge_search.domain import conversation
from knowledge_search.domain.anonymise import Anonymised, Anonymiser
from knowledge_search.domain.answer import Citer, Source, Synthesis, cite, excerpt, tidy
from knowledge_search.domain.cache import OutcomeCache, cache_key
from knowledge_search.domain.conversation import Turn
from knowledge_search.domain.errors import CorpusNotFound, EmbedderUnavailable, LlmUnavailable, RerankUnavailable
from knowledge_search.domain.fusion import DEFAULT_FUSION, Fusion, fuse, single_channel
from knowledge_search.domain.model import (
    CURRENT_SPACE,
    EQUAL_WEIGHTS,
    Answer,
    ChannelHit,
    Chunk,
    Citation,
    Filters,
    Ranked,
    Relevance,
    SearchHit,
    SearchMode,
    SearchOutcome,
    SearchRequest,
    Weights,
)
from knowledge_search.domain.ports import (
    ChunkIndex,
    Condenser,
    CostLedger,
    LlmBudget,
    QueryEmbedder,
    Reranker,
    Synthesiser,
    SystemCorpora,
    VectorSpaces,
)
from knowledge_search.domain.relevance import Thresholds, banner
from knowledge_search.domain.retrieval import CHANNEL_DEPTH, RERANK_WINDOW
from knowledge_search.domain.streaming import AnswerStream, Started

log = get_logger("knowledge.search")
_tracer = tracer("knowledge.search")
RERANK_FALLBACK = "reranking is unavailable ({why}); the results are in fused order"
LEXICAL_ONLY = "the embedder is unavailable: only the lexical channel answered"
BUDGET_FALLBACK = "{why}; this answer is extractive (quoted from the sources, no LLM)"
MAX_CONDENSED_CHARS = 3_500  # as a query's own limit
# Reads of the channels per search while a writer keeps replacing what they found (see ``_search``).
READ_ATTEMPTS = 3


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
    system_corpora: SystemCorpora | None = None  # the tenant's housekeeping corpora, left out of ordinary reads
    cache: OutcomeCache | None = None  # None: every request computed
    spaces: VectorSpaces | None = None  # None: the chunks' own column, by the current model, always

    async def search(
        self,
        scope: Scope,
        request: SearchRequest,
        *,
        fallback_to_lexical: bool = False,
        include_housekeeping: bool = False,
    ) -> SearchOutcome:
        """``fallback_to_lexical``: an embedder that cannot answer leaves the lexical channel to
        answer alone (HYBRID only), said in the outcome's ``degradations``, instead of failing.
        ``include_housekeeping``: pre-fetch reads the tenant's housekeeping corpora; every other
        read leaves them out, and names one of them in vain (404).

        The outcome is for the caller's reach; from the cache while nothing it sees has changed
        (keyed on the request as narrowed here, so a read with and one without the housekeeping
        corpora never share an entry); a degraded outcome is never cached."""
        tenant = scope.tenant
        reader = await self.index.reader(scope)
        if self.spaces is not None and request.mode is not SearchMode.LEXICAL:
            # Read once: the query is embedded by the model whose vectors it is compared with,
            # whatever a swap commits meanwhile; and a cached answer is one model's.
            request = replace(request, space=await self.spaces.space(request.candidate))
        if request.filters.corpus_key is not None:
            request = await self._keyed(tenant, reader, request)
        if self.system_corpora is not None and not include_housekeeping:
            request = await self._without_housekeeping(tenant, request)
        if self.cache is None:
            return await self._search(tenant, reader, request, fallback_to_lexical)
        key = cache_key(tenant, reader, await self.index.generation(tenant, reader), request)
        cached = self.cache.get(key)
        if cached is not None:
            return replace(cached, cost=Cost())  # nothing was embedded for this answer
        outcome = await self._search(tenant, reader, request, fallback_to_lexical)
        if not outcome.degradations:  # the same answer with or without a fallback allowed
            self.cache.put(key, outcome)
        return outcome

    async def _search(
        self, tenant: str, reader: Reader, request: SearchRequest, fallback_to_lexical: bool = False
    ) -> SearchOutcome:
        rerank = self.rerank_default if request.rerank is None else request.rerank
        if request.rerank and self.reranker is None:
            raise RerankUnavailable()
        rerank = rerank and self.reranker is not None
        depth = max(request.top_k, self.rerank_window) if rerank else request.top_k
        request = within(request, await self.index.reach_for(tenant, reader), tenant)
        await self.index.check_filters(tenant, request.filters)
        # Fusion needs each channel's depth; a single channel's order is final, so it is read only
        # as deep as what is returned (and reranked).
        channel_depth = self.channel_depth if request.mode is SearchMode.HYBRID else depth
        vector_task = (
            self._vector(tenant, request, channel_depth, fallback_to_lexical and request.mode is SearchMode.HYBRID)
            if request.mode is not SearchMode.LEXICAL
            else _nothing()
        )
        lexical_task = (
            self._lexical(tenant, request, channel_depth) if request.mode is not SearchMode.VECTOR else _none()
        )
        (vector_hits, warnings, cost, vector), lexical_hits = await asyncio.gather(vector_task, lexical_task)
        degradations = (LEXICAL_ONLY,) if vector_hits is None else ()
        weights = await self._weights(request) if request.mode is SearchMode.HYBRID else EQUAL_WEIGHTS
        for attempt in range(READ_ATTEMPTS):
            ranked = self._rank(request, vector_hits or [], lexical_hits, weights, depth)
            hits, lost = await self._hydrate(tenant, ranked, request.filters)
            if not lost or attempt == READ_ATTEMPTS - 1:
                break
            # A chunk the channels found was gone when its content was read: a writer committed in
            # between. A re-index replaces a document's chunks in one transaction, so reading again
            # sees its new version whole, where keeping what was left would have the document missing.
            log.info("search_reread", lost=lost, attempt=attempt + 1)
            vector_hits, lexical_hits = await asyncio.gather(
                self._read_vector(tenant, request, vector, channel_depth),
                self._reread_lexical(tenant, request, channel_depth),
            )
        vector_hits = vector_hits or []
        if rerank and hits:
            try:
                hits, rerank_cost = await self._rerank(tenant, request, hits)
                cost = cost + rerank_cost
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
        return SearchOutcome(
            hits=tuple(hits),
            relevance=relevance,
            warnings=request.warnings + warnings,
            cost=cost,
            degradations=degradations,
        )

    async def _keyed(self, tenant: str, reader: Reader, request: SearchRequest) -> SearchRequest:
        """The request with the corpus its key names for this reader (``corpus_keys.resolve``);
        CorpusNotFound when the key names none in its reach."""
        assert request.filters.corpus_key is not None
        reach = await self.index.reach_for(tenant, reader)
        corpus_id = resolve_key(reach, await self.index.keyed(tenant, request.filters.corpus_key))
        if corpus_id is None:
            raise CorpusKeyNotFound(request.filters.corpus_key)
        return replace(request, filters=replace(request.filters, corpus_id=corpus_id, corpus_key=None))

    async def _without_housekeeping(self, tenant: str, request: SearchRequest) -> SearchRequest:
        assert self.system_corpora is not None
        hidden = tuple(sorted((await self.system_corpora.housekeeping(tenant)).values()))
        if request.filters.corpus_id is not None and request.filters.corpus_id in hidden:
            raise CorpusNotFound(str(request.filters.corpus_id))
        if not hidden or request.filters.corpus_id is not None:
            return request
        return replace(request, filters=replace(request.filters, exclude_corpora=hidden))

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

    def _rank(
        self,
        request: SearchRequest,
        vector_hits: list[ChannelHit],
        lexical_hits: list[ChannelHit],
        weights: Weights,
        depth: int,
    ) -> list[Ranked]:
        with _tracer.start_as_current_span("search.fuse") as span:
            if request.mode is SearchMode.HYBRID:
                ranked = fuse(vector_hits, lexical_hits, weights, depth, self.fusion)
            elif request.mode is SearchMode.VECTOR:
                ranked = single_channel(vector_hits, vector=True, top_k=depth, k=self.fusion.k)
            else:
                ranked = single_channel(lexical_hits, vector=False, top_k=depth, k=self.fusion.k)
            span.set_attribute("search.fused", len(ranked))
        return ranked

    async def _hydrate(self, tenant: str, ranked: list[Ranked], filters: Filters) -> tuple[list[SearchHit], int]:
        """Content is read once, for the results returned, under the tenant keys the channels read
        and the caller's principals; a chunk deleted meanwhile, or whose document's list stopped
        admitting the caller, drops out, and is counted (the second value)."""
        with _tracer.start_as_current_span("search.hydrate") as span:
            chunks = await self.index.chunks(tenant, [r.chunk_id for r in ranked], filters.owners, filters.principals)
            span.set_attribute("search.results", len(chunks))
        return [SearchHit.of(r, chunks[r.chunk_id]) for r in ranked if r.chunk_id in chunks], len(ranked) - len(chunks)

    async def _vector(
        self, tenant: str, request: SearchRequest, depth: int, fallback: bool = False
    ) -> tuple[list[ChannelHit] | None, tuple[str, ...], Cost, Sequence[float] | None]:
        """The vector channel's hits and the query's vector; None when it could not answer and
        ``fallback`` allows that."""
        with _tracer.start_as_current_span("search.embed"):
            try:
                model = request.space.model if request.space is not None else ""
                # Named only when it is not the current model (a test's embedder knows one).
                embedded = await self.embedder.embed_query(tenant, request.text, **({"model": model} if model else {}))
            except (Unavailable, EmbedderUnavailable) as error:  # down: a passing failure, or RUNTIME_UNAVAILABLE
                if not fallback:
                    raise
                log.warning("search_lexical_fallback", reason=error.reason)
                return None, (), Cost(), None
        hits = await self._read_vector(tenant, request, embedded.vector, depth)
        return hits, embedded.warnings, embedded.cost, embedded.vector

    async def _read_vector(
        self, tenant: str, request: SearchRequest, vector: Sequence[float] | None, depth: int
    ) -> list[ChannelHit] | None:
        if vector is None:  # no vector channel: LEXICAL mode, or the embedder was down
            return None
        with _tracer.start_as_current_span("search.vector") as span:
            space = request.space
            extra = {"space": space} if space is not None and space != CURRENT_SPACE else {}
            hits = await self.index.vector_search(tenant, vector, request.filters, depth, **extra)
            span.set_attribute("search.hits", len(hits))
        return hits

    async def _reread_lexical(self, tenant: str, request: SearchRequest, depth: int) -> list[ChannelHit]:
        return [] if request.mode is SearchMode.VECTOR else await self._lexical(tenant, request, depth)

    async def _lexical(self, tenant: str, request: SearchRequest, depth: int) -> list[ChannelHit]:
        with _tracer.start_as_current_span("search.lexical") as span:
            hits = await self.index.lexical_search(tenant, request.lexical_text, request.filters, depth)
            span.set_attribute("search.hits", len(hits))
        return hits

    async def _weights(self, request: SearchRequest) -> Weights:
        """The request's weights, else the corpus's, else the defaults, field by field."""
        corpus = Weights()
        if request.filters.corpus_id is not None:
            corpus = await self.index.corpus_weights(request.filters.corpus_id)
        return request.weights.over(corpus).over(self.default_weights)


def within(request: SearchRequest, reach: Reach, tenant: str) -> SearchRequest:
    """The request restricted to the corpora the caller reaches (no predicate when it reaches all),
    to the tenant keys of their rows (the platform tenant's too when it reaches a platform-wide
    corpus) and, inside them, to the documents whose access list admits the caller's principals.
    CorpusNotFound for a corpus filter outside that reach: another tenant's, a deleted one, or one
    beyond the caller's node or clearance are all as if absent."""
    if request.filters.corpus_id is not None and not reach.has(request.filters.corpus_id):
        raise CorpusNotFound(str(request.filters.corpus_id))
    corpus_ids = None if reach.everything else reach.corpus_ids
    filters = replace(
        request.filters, corpus_ids=corpus_ids, owners=reach.owners(tenant), principals=reach.reader.principals
    )
    return replace(request, filters=filters)


async def _nothing() -> tuple[list[ChannelHit] | None, tuple[str, ...], Cost, Sequence[float] | None]:
    return [], (), Cost(), None


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
    # With an LLM: what condenses a question and its history into one query for retrieval.
    condenser: Condenser | None = None

    async def query(self, scope: Scope, request: SearchRequest, history: Sequence[Turn] = ()) -> Answer:
        retrieval, talk = await self.standalone(scope, request, history)
        answer = await self.answer(scope, request, await self.searcher.search(scope, retrieval), talk.history)
        return replace(
            answer, cost=talk.cost + answer.cost, condensed_query=talk.condensed_query, conversation_note=talk.note
        )

    async def query_stream(
        self, scope: Scope, request: SearchRequest, history: Sequence[Turn] = ()
    ) -> AsyncIterator[Started | str | Answer]:
        """``query``'s answer as it is written: :class:`Started`, then the text's pieces, then the
        whole :class:`Answer`. Closing the iterator early (the caller went away) closes the
        synthesiser's stream, which ends a model's call."""
        retrieval, talk = await self.standalone(scope, request, history)
        outcome = await self.searcher.search(scope, retrieval)
        hits = outcome.hits if answerable(outcome) else ()
        yield Started(outcome.relevance, talk.condensed_query, len(hits))
        if not hits:
            yield Answer(
                text="",
                citations=(),
                relevance=outcome.relevance,
                cost=talk.cost + outcome.cost,
                condensed_query=talk.condensed_query,
                conversation_note=talk.note,
            )
            return
        synthesiser, refusal = await self.pick(scope)
        anonymised, sources = self._sources(request.text, hits)
        citer = Citer(len(hits))
        stream = AnswerStream(citer, anonymised.restore)
        parts: list[str] = []
        synthesis = Synthesis(text="")
        masked = _masked(talk.history, anonymised)
        async with aclosing(synthesiser.stream(anonymised.text, sources, history=masked)) as pieces:
            async for item in pieces:
                if isinstance(item, Synthesis):
                    synthesis = item
                    continue
                piece = stream.feed(item)
                if piece:
                    parts.append(piece)
                    yield piece
        tail = stream.finish()
        if tail:
            parts.append(tail)
            yield tail
        await self._record(scope, synthesis)
        yield Answer(
            text=tidy("".join(parts)),
            citations=_citations(hits, citer.order, synthesis, anonymised),
            relevance=outcome.relevance,
            cost=talk.cost + outcome.cost + synthesis.cost,
            fallback_reason=refusal.reason if refusal is not None else "",
            fallback_message=BUDGET_FALLBACK.format(why=refusal.message) if refusal is not None else "",
            condensed_query=talk.condensed_query,
            conversation_note=talk.note,
        )

    async def standalone(
        self, scope: Scope, request: SearchRequest, history: Sequence[Turn]
    ) -> tuple[SearchRequest, Talk]:
        """The request retrieval reads, and what the conversation gave it: with no history, the
        request itself; else a model's condensation of the question and its history (its cost
        recorded), or without a model (none configured, the month's budget spent, or down) the
        last earlier user turn with the question, said in the note."""
        if not history:
            return request, Talk()
        kept = conversation.within_budget(history, conversation.HISTORY_BUDGET_CHARS)
        _, refusal = await self.pick(scope)
        if self.condenser is not None and refusal is None:
            anonymised = self.anonymiser.anonymise(request.text)
            masked = _masked(history, anonymised)
            try:
                with _tracer.start_as_current_span("search.condense"):
                    text, cost = await self.condenser.condense(anonymised.text, masked)
                await self._record(scope, Synthesis(text="", cost=cost))
                query = anonymised.restore(text)[:MAX_CONDENSED_CHARS]
                return replace(request, text=query), Talk(kept, query, "", cost)
            except LlmUnavailable as error:
                log.warning("condense_fallback", reason=error.reason)
        query = conversation.without_model(request.text, history)[:MAX_CONDENSED_CHARS]
        return replace(request, text=query), Talk(kept, query, conversation.WITHOUT_MODEL_NOTE)

    async def answer(
        self, scope: Scope, request: SearchRequest, outcome: SearchOutcome, history: Sequence[Turn] = ()
    ) -> Answer:
        """The cited answer from a retrieval already made (SearchDocuments makes one, not two)."""
        if not answerable(outcome):
            return Answer(text="", citations=(), relevance=outcome.relevance, cost=outcome.cost)
        hits = outcome.hits
        synthesiser, refusal = await self.pick(scope)
        synthesis, anonymised = await self.synthesise(
            scope, request.text, hits, synthesiser=synthesiser, history=history
        )
        text, order = cite(synthesis.text, len(hits))
        citations = _citations(hits, order, synthesis, anonymised)
        log.info("answer_done", sources=len(hits), citations=len(citations), synthesiser=synthesiser.model_id)
        return Answer(
            text=anonymised.restore(text),
            citations=citations,
            relevance=outcome.relevance,
            cost=outcome.cost + synthesis.cost,
            fallback_reason=refusal.reason if refusal is not None else "",
            fallback_message=BUDGET_FALLBACK.format(why=refusal.message) if refusal is not None else "",
        )

    async def search_documents(
        self, scope: Scope, request: SearchRequest, history: Sequence[Turn] = ()
    ) -> tuple[SearchOutcome, str, str]:
        """One retrieval (of the standalone query when there is history), and its synthesis
        citing the results by their own numbers: (outcome, synthesis, why there is none when the
        language model could not answer)."""
        retrieval, _ = await self.standalone(scope, request, history)
        outcome = await self.searcher.search(scope, retrieval)
        if not answerable(outcome):
            return outcome, "", ""
        synthesiser, _ = await self.pick(scope)  # extractive once the tenant's LLM budget is spent
        try:
            synthesis, anonymised = await self.synthesise(scope, request.text, outcome.hits, synthesiser=synthesiser)
        except LlmUnavailable as error:  # the sources still answer the tool
            log.warning("search_documents_without_synthesis", reason=error.reason)
            return outcome, "", error.message
        text, _ = cite(synthesis.text, len(outcome.hits), renumber=False)
        return outcome, anonymised.restore(text), ""

    async def pick(self, scope: Scope) -> tuple[Synthesiser, Refused | None]:
        """The synthesiser that answers the caller's tenant now: the configured one, or the
        fallback with the BUDGET_EXHAUSTED refusal that chose it once the month's LLM budget is spent."""
        if self.budget is None or self.fallback is None:
            return self.synthesiser, None
        refusal = await self.budget.refusal(scope.tenant)
        if refusal is None:
            return self.synthesiser, None
        log.info("answer_budget_fallback", reason=refusal.reason)
        return self.fallback, refusal

    async def synthesise(
        self,
        scope: Scope,
        question: str,
        hits: Sequence[SearchHit],
        *,
        graded: bool = False,
        synthesiser: Synthesiser | None = None,
        history: Sequence[Turn] = (),
    ) -> tuple[Synthesis, Anonymised]:
        """The synthesis over ``hits`` as sources 1..n: the question, the sources and the history
        anonymised before the synthesiser sees them; the synthesis text still anonymised
        (``restore`` it), its cost recorded. ``graded`` asks for a support level per statement;
        ``synthesiser`` (from :meth:`pick`) defaults to the configured one."""
        synthesiser = synthesiser or self.synthesiser
        anonymised, sources = self._sources(question, hits)
        with _tracer.start_as_current_span("search.synthesise") as span:
            span.set_attribute("search.synthesiser", synthesiser.model_id)
            if graded:
                synthesis = await synthesiser.synthesise(anonymised.text, sources, graded=True)
            elif history:
                masked = _masked(history, anonymised)
                synthesis = await synthesiser.synthesise(anonymised.text, sources, history=masked)
            else:
                synthesis = await synthesiser.synthesise(anonymised.text, sources)
        await self._record(scope, synthesis)
        return synthesis, anonymised

    def _sources(self, question: str, hits: Sequence[SearchHit]) -> tuple[Anonymised, list[Source]]:
        anonymised = self.anonymiser.anonymise(question)
        sources = [
            Source(number=n, title=_title(hit.chunk), text=anonymised.mask(hit.chunk.content))
            for n, hit in enumerate(hits, start=1)
        ]
        return anonymised, sources

    async def _record(self, scope: Scope, synthesis: Synthesis) -> None:
        if self.ledger is not None:
            for item in synthesis.cost.items:
                await self.ledger.record(scope.tenant, item)


@dataclass(frozen=True, slots=True)
class Talk:
    """What a conversation gave a question: the turns kept for the model (within the budget),
    the standalone query retrieval read, the note when no model condensed it, and the cost."""

    history: tuple[Turn, ...] = ()
    condensed_query: str = ""
    note: str = ""
    cost: Cost = field(default_factory=Cost)


def _masked(history: Sequence[Turn], anonymised: Anonymised) -> tuple[Turn, ...]:
    """The turns as the model may see them: the question's placeholders applied to each."""
    return tuple(Turn(turn.role, anonymised.mask(turn.text)) for turn in history)


def _citations(
    hits: Sequence[SearchHit], order: Sequence[int], synthesis: Synthesis, anonymised: Anonymised
) -> tuple[Citation, ...]:
    quoted = synthesis.excerpts or {}
    return tuple(
        Citation(
            chunk=hits[n - 1].chunk,
            excerpt=anonymised.restore(quoted[n]) if n in quoted else excerpt(hits[n - 1].chunk.content),
        )
        for n in order
    )


def answerable(outcome: SearchOutcome) -> bool:
    """Whether a retrieval is worth a synthesis: it found something, and not only unrelated text."""
    return bool(outcome.hits) and outcome.relevance is not Relevance.LOW


def _title(chunk: Chunk) -> str:
    parts = [chunk.filename or f"document {chunk.document_id}"]
    if chunk.section:
        parts.append(chunk.section)
    if chunk.page:
        parts.append(f"page {chunk.page}")
    return " - ".join(parts)
