"""The model change's own evaluation: storing an operator's evaluation sets, and running every
stored set on both models through search when a change's new vectors are complete.

The run asks search, over gRPC, exactly what a user's search would ask (the set's corpus, each
mode, the current vectors or the candidate's), so the figures measure what users would get; the
scoring is the domain's (``domain.evaluation.figures``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from knowledge_runtime.auth import Scope
from knowledge_runtime.db.reach import PostgresReach
from knowledge_runtime.errors import CorpusNotFound
from knowledge_runtime.logging import get_logger
from knowledge_runtime.retrieval_metrics import unique

from knowledge_ingest.domain.errors import EvaluationSetNotFound
from knowledge_ingest.domain.evaluation import TOP_K, EvaluationSet, JudgedQuery, checked_set, figures
from knowledge_ingest.domain.model_change import MODES, Figures
from knowledge_ingest.domain.ports import SetSearch
from knowledge_ingest.models.postgres import PostgresEvaluationSets

log = get_logger("knowledge.ingest")

CONCURRENT_SEARCHES = 8  # a run is background work: it must not crowd out users' searches


class EvaluationSetUseCases:
    def __init__(self, sets: PostgresEvaluationSets, reach: PostgresReach) -> None:
        self._sets = sets
        self._reach = reach

    async def put(self, scope: Scope, name: str, corpus_id: str, queries: Sequence[JudgedQuery]) -> EvaluationSet:
        name, corpus, judged = checked_set(name, corpus_id, queries)
        reader = await self._reach.reader(scope)
        if not (await self._reach.reach_for(scope.tenant, reader)).has(corpus):
            raise CorpusNotFound(corpus_id)
        stored = await self._sets.put(
            EvaluationSet(
                tenant=scope.tenant,
                name=name,
                corpus_id=corpus,
                scope_claim=str(reader.node),
                clearance=reader.clearance,
                queries=judged,
            )
        )
        log.info("evaluation_set_stored", name=name, queries=len(judged))
        return stored

    async def delete(self, scope: Scope, name: str) -> None:
        if not await self._sets.delete(scope.tenant, name):
            raise EvaluationSetNotFound(name)


class Evaluator:
    """Every stored set on both models: (current figures, candidate figures), or None when no
    set is stored (the change then waits for the operator's --force)."""

    def __init__(self, sets: PostgresEvaluationSets, search: SetSearch) -> None:
        self._sets = sets
        self._search = search

    async def run(self) -> tuple[Figures, Figures] | None:
        sets = await self._sets.all()
        if not sets:
            return None
        slots = asyncio.Semaphore(CONCURRENT_SEARCHES)

        async def one(evaluation_set: EvaluationSet, query: JudgedQuery, mode: str, candidate: bool) -> list[str]:
            async with slots:
                hits = await self._search.ranked(evaluation_set, query.text, mode, candidate, TOP_K)
            return unique(hits)  # a document at its best chunk's place

        results = []
        for candidate in (False, True):
            keys = [(s, q, m) for s in sets for q in s.queries for m in MODES]
            answers = await asyncio.gather(*(one(s, q, m, candidate) for s, q, m in keys))
            rankings = {(s.tenant, s.name, q.query_id, m): a for (s, q, m), a in zip(keys, answers, strict=True)}
            results.append(figures(sets, rankings))
        log.info("model_change_evaluated", sets=len(sets), queries=sum(len(s.queries) for s in sets))
        return results[0], results[1]
