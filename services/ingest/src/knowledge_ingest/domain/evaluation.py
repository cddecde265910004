"""The model-change gate's own evaluation: the sets an operator stores, and both models' figures
from the rankings search gave for them.

A set's queries search one corpus of its tenant; relevance is judged by document id (the corpus's
own documents). Every stored set is run when a change's new vectors are complete; the figures
the gate compares are the mean over every query of every set (a set of many queries weighs more
than a set of few, as one bigger set would), computed by the same functions ``knowledge eval``
prints (``knowledge_runtime.retrieval_metrics``). Pure: rankings in, figures out.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from knowledge_runtime.reach import Band
from knowledge_runtime.retrieval_metrics import RECALL_AT, ndcg, recall

from knowledge_ingest.domain.errors import InvalidRequest
from knowledge_ingest.domain.model_change import MODES, Figures, ModeFigures

NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,62}$")
MAX_QUERIES = 5000
MAX_QUERY_CHARS = 3500  # what search embeds of a query
MAX_RELEVANT = 1000  # judged documents per query
TOP_K = RECALL_AT  # each query's ranking is read this deep: Recall@100 needs 100


@dataclass(frozen=True, slots=True)
class JudgedQuery:
    query_id: str
    text: str
    relevant: Mapping[str, int]  # document id -> grade (>= 1)


@dataclass(frozen=True, slots=True)
class EvaluationSet:
    tenant: str
    name: str
    corpus_id: int
    scope_claim: str  # the reach of the operator who stored it: the run searches with it
    clearance: Band
    queries: tuple[JudgedQuery, ...]
    update_time: float = 0.0


def checked_set(name: str, corpus_id: str, queries: Sequence[JudgedQuery]) -> tuple[str, int, tuple[JudgedQuery, ...]]:
    """The set's name, corpus and queries as stored, or InvalidRequest naming the field at fault."""
    if not NAME.match(name):
        raise InvalidRequest(
            "name must be 1-63 characters of a-z, 0-9, '.', '_', '-', starting with a letter or digit", field="name"
        )
    if not corpus_id.isdigit() or len(corpus_id) > 18:
        raise InvalidRequest("corpus_id must be a corpus id", field="corpus_id")
    if not queries:
        raise InvalidRequest("an evaluation set needs at least one judged query", field="queries")
    if len(queries) > MAX_QUERIES:
        raise InvalidRequest(f"at most {MAX_QUERIES} queries per set", field="queries")
    seen: set[str] = set()
    for index, query in enumerate(queries):
        where = f"queries[{index}]"
        if not query.query_id or query.query_id in seen or len(query.query_id) > 200:
            raise InvalidRequest(
                "each query needs its own query_id (at most 200 characters)", field=where + ".query_id"
            )
        seen.add(query.query_id)
        if not query.text.strip() or len(query.text) > MAX_QUERY_CHARS:
            raise InvalidRequest(f"a query's text is 1-{MAX_QUERY_CHARS} characters", field=where + ".text")
        if not query.relevant or len(query.relevant) > MAX_RELEVANT:
            raise InvalidRequest(
                f"a query names 1-{MAX_RELEVANT} relevant documents (their ids)", field=where + ".relevant"
            )
        for document_id, grade in query.relevant.items():
            if not document_id.isdigit() or len(document_id) > 18 or not 1 <= grade <= 100:
                raise InvalidRequest(
                    "relevant maps document ids to grades 1-100",
                    field=where + ".relevant",
                    document_id=document_id[:40],
                )
    return name, int(corpus_id), tuple(queries)


def figures(sets: Sequence[EvaluationSet], rankings: Mapping[tuple[str, str, str, str], Sequence[str]]) -> Figures:
    """One model's figures: per mode, the mean nDCG@10 and Recall@100 over every query of every
    set, from ``rankings[(tenant, set name, query id, mode)]`` (document ids, best first; a
    missing one counts as an empty answer)."""
    judged = [((s.tenant, s.name), q) for s in sets for q in s.queries]
    if not judged:
        raise ValueError("no queries to score")
    modes = {}
    for mode in MODES:
        answers = [(rankings.get((*name, q.query_id, mode), ()), q.relevant) for name, q in judged]
        modes[mode] = ModeFigures(
            ndcg_at_10=sum(ndcg(list(r), rel) for r, rel in answers) / len(answers),
            recall_at_100=sum(recall(list(r), rel) for r, rel in answers) / len(answers),
        )
    return Figures(modes=modes)
