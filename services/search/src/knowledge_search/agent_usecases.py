"""The agent-facing reads: provenance-carrying context and pre-fetch.

Both are built on ``SearchUseCases.search`` (the one retrieval path: tenant, filters, channels,
fusion, hydration) and, for the context, on ``AnswerUseCases.synthesise`` (anonymisation, the
synthesiser, cost records), so whatever limits what a caller may read limits these reads too.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Sequence
from dataclasses import dataclass

from knowledge_runtime.auth import Scope
from knowledge_runtime.errors import DomainError
from knowledge_runtime.logging import get_logger
from knowledge_runtime.system_corpora import DATA_CATALOG, OPERATIONAL_PATTERNS, USER_BEHAVIOR

from knowledge_search.domain.context import (
    ContextMetadata,
    Fact,
    KnowledgeContext,
    evidence_of,
    facts_from,
    render,
)
from knowledge_search.domain.errors import LlmUnavailable
from knowledge_search.domain.model import (
    LEXICAL_QUERY_CHARS,
    EmbeddedQuery,
    Relevance,
    SearchHit,
    SearchOutcome,
    SearchRequest,
)
from knowledge_search.domain.ports import QueryEmbedder, SystemCorpora
from knowledge_search.domain.prefetch import PREFETCH_DEADLINE_S, Prefetch, Section, render_prefetch
from knowledge_search.usecases import BUDGET_FALLBACK, AnswerUseCases, SearchUseCases, answerable

log = get_logger("knowledge.search")
NO_SYNTHESIS = "the language model is unavailable: evidence only, no facts"


def _elapsed_ms(started: float) -> int:
    return int((time.monotonic() - started) * 1000)


@dataclass
class ContextUseCases:
    answers: AnswerUseCases

    async def context(self, scope: Scope, request: SearchRequest) -> KnowledgeContext:
        started = time.monotonic()
        outcome = await self.answers.searcher.search(scope, request, fallback_to_lexical=True)
        evidence = evidence_of(outcome.hits)
        degradations = list(outcome.degradations)
        facts: tuple[Fact, ...] = ()
        synthesiser, refusal = await self.answers.pick(scope)
        if refusal is not None:
            degradations.append(BUDGET_FALLBACK.format(why=refusal.message))
        if answerable(outcome):
            graded = bool(getattr(synthesiser, "grades", False))
            try:
                synthesis, anonymised = await self.answers.synthesise(
                    scope, request.text, outcome.hits, graded=graded, synthesiser=synthesiser
                )
                facts = facts_from(anonymised.restore(synthesis.text), evidence, graded=graded)
            except LlmUnavailable as error:
                log.warning("context_without_synthesis", reason=error.reason)
                degradations.append(NO_SYNTHESIS)
        metadata = ContextMetadata(
            query=request.text,
            # the caller's scope node: the search above resolved it (else it was refused)
            scope=str(scope.claimed_node) if scope.claimed_node is not None else "",
            backend=synthesiser.model_id,
            elapsed_ms=_elapsed_ms(started),
            truncated=bool(request.warnings) or len(request.text) > LEXICAL_QUERY_CHARS,
            degradations=tuple(degradations),
            relevance=outcome.relevance,
        )
        rendered = render(request.text, outcome.relevance, facts, evidence, metadata.degradations)
        context = KnowledgeContext(facts=facts, evidence=evidence, metadata=metadata, rendered=rendered)
        log.info(
            "context_done",
            facts=len(facts),
            unresolved=context.unresolved_count,
            evidence=len(evidence),
            degraded=bool(degradations),
        )
        return context


class _EmbedOnce:
    """One embedding of the message for all of a pre-fetch's sections (or one failure)."""

    def __init__(self, embedder: QueryEmbedder) -> None:
        self._embedder = embedder
        self._task: asyncio.Task[EmbeddedQuery] | None = None

    async def embed_query(self, tenant: str, text: str, model: str = "") -> EmbeddedQuery:
        if self._task is None:  # every section of one pre-fetch reads the same vectors
            extra = {"model": model} if model else {}
            self._task = asyncio.ensure_future(self._embedder.embed_query(tenant, text, **extra))
        return await asyncio.shield(self._task)

    def close(self) -> None:
        """A deadline may leave the embedding running: stop waiting for it (behind the breaker the
        call itself may be left to finish, to learn whether the embedder answers late); a failure
        already seen is consumed."""
        if self._task is None:
            return
        if not self._task.done():
            self._task.cancel()
        elif not self._task.cancelled():
            self._task.exception()


@dataclass
class PrefetchUseCases:
    searcher: SearchUseCases
    corpora: SystemCorpora
    deadline_s: float = PREFETCH_DEADLINE_S
    data_catalog: bool = False  # KNOWLEDGE_PREFETCH_DATA_CATALOG

    async def prefetch(self, scope: Scope, user_message: str) -> Prefetch:
        """Never raises for the chat's sake: past the deadline or on any failure, an empty, degraded answer."""
        started = time.monotonic()
        try:
            async with asyncio.timeout(self.deadline_s):
                sections, degradations = await self._sections(scope, user_message)
        except TimeoutError:
            log.warning("prefetch_deadline_passed", deadline_ms=int(self.deadline_s * 1000))
            return Prefetch.empty(f"past the deadline of {int(self.deadline_s * 1000)} ms", _elapsed_ms(started))
        except Exception as error:  # noqa: BLE001 - a pre-fetch must never break a chat request
            reason = error.reason if isinstance(error, DomainError) else type(error).__name__
            log.warning("prefetch_failed", reason=reason)
            return Prefetch.empty("the pre-fetch failed", _elapsed_ms(started))
        rendered = render_prefetch(sections)
        count = sum(len(section.hits) for section in sections)
        log.info("prefetch_done", entries=count, degraded=bool(degradations))
        return Prefetch(
            rendered=rendered,
            degradations=degradations,
            entry_count=count,
            elapsed_ms=_elapsed_ms(started),
        )

    def _wanted(self, scope: Scope) -> list[tuple[str, int, str | None]]:
        """(corpus name, top k, the subject its entries must be about) for this caller."""
        wanted: list[tuple[str, int, str | None]] = [(OPERATIONAL_PATTERNS, 3, None)]
        if scope.subject:  # a user's own behaviour only; a token without a subject has none
            wanted.append((USER_BEHAVIOR, 2, scope.subject))
        if self.data_catalog:
            wanted.append((DATA_CATALOG, 25, None))
        return wanted

    async def _sections(self, scope: Scope, user_message: str) -> tuple[Sequence[Section], tuple[str, ...]]:
        text = " ".join(user_message.split())[:LEXICAL_QUERY_CHARS]
        if not text:
            return [], ()
        corpora = await self.corpora.housekeeping(scope.tenant)
        wanted = [(name, k, subject) for name, k, subject in self._wanted(scope) if name in corpora]
        if not wanted:
            return [], ()
        once = _EmbedOnce(self.searcher.embedder)
        searcher = dataclasses.replace(self.searcher, embedder=once, reranker=None)

        async def one(name: str, top_k: int, subject: str | None) -> tuple[str, SearchOutcome]:
            request = SearchRequest.parse(text, corpus_id=str(corpora[name]), top_k=top_k)
            filters = dataclasses.replace(request.filters, subject=subject, exclude_provisional=True)
            request = dataclasses.replace(request, filters=filters, rerank=False)
            return name, await searcher.search(scope, request, fallback_to_lexical=True, include_housekeeping=True)

        try:
            outcomes = await asyncio.gather(*(one(*w) for w in wanted))
        finally:
            once.close()
        degradations = tuple(sorted({d for _, outcome in outcomes for d in outcome.degradations}))
        sections = [Section(name=name, hits=_relevant(outcome)) for name, outcome in outcomes if _relevant(outcome)]
        return sections, degradations


def _relevant(outcome: SearchOutcome) -> tuple[SearchHit, ...]:
    """Nothing from a section whose retrieval found only unrelated entries."""
    return () if outcome.relevance in (Relevance.LOW, Relevance.NONE) else outcome.hits
