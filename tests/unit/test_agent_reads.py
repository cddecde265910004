"""The agent-facing reads with fakes at the ports: facts and their provenance,
byte-stable rendering, SearchDocuments' one retrieval with its synthesis, and pre-fetch's
degraded answers (the embedder down, the deadline passed, a failure)."""

from __future__ import annotations

import asyncio
import random
import re
import time

import pytest
from knowledge_runtime.auth import Scope
from knowledge_runtime.reach import Reach
from knowledge_runtime.system_corpora import DATA_CATALOG, OPERATIONAL_PATTERNS, USER_BEHAVIOR
from knowledge_search.agent_usecases import ContextUseCases, PrefetchUseCases
from knowledge_search.domain.answer import ExtractiveSynthesiser, Synthesis
from knowledge_search.domain.context import (
    FactStatus,
    KnowledgeContext,
    Support,
    evidence_of,
    fact,
    facts_from,
    facts_without_provenance,
)
from knowledge_search.domain.errors import EmbedderUnavailable
from knowledge_search.domain.model import ChannelHit, Chunk, EmbeddedQuery, SearchHit, SearchRequest
from knowledge_search.domain.relevance import Thresholds
from knowledge_search.usecases import LEXICAL_ONLY, AnswerUseCases, SearchUseCases

SCOPE = Scope(tenant="acme", capabilities=frozenset({"search"}), subject="user-1", scope_claim="/")
CONTENT = {
    1: "Refunds take thirty days from the date of purchase. Ask the desk for a form.",
    2: "Shipping is free for orders above fifty euros.",
    3: "Refund requests need the receipt and the order number.",
    4: "The warehouse closes at six.",
}


def hit(chunk_id: int, score: float, content: str | None = None) -> SearchHit:
    chunk = Chunk(chunk_id, chunk_id * 10, 1, f"doc{chunk_id}.txt", "Refunds", 2, content or CONTENT[chunk_id])
    return SearchHit(chunk=chunk, score=score, vector_rank=chunk_id, lexical_rank=0, fused_score=0.1)


class ShuffledIndex:
    """Returns its channel hits and its rows in a random order each call, as a database may."""

    def __init__(self, seed: int, contents: dict[int, str] | None = None) -> None:
        self._random = random.Random(seed)
        self.contents = contents or CONTENT
        self.filters: list = []

    def _shuffled(self, items: list) -> list:
        items = list(items)
        self._random.shuffle(items)
        return items

    async def vector_search(self, tenant, vector, filters, depth):
        self.filters.append(filters)
        hits = [ChannelHit(c, c * 10, 0.9 - c / 10, 0) for c in self.contents]
        return [ChannelHit(h.chunk_id, h.document_id, h.score, rank) for rank, h in enumerate(hits, start=1)]

    async def lexical_search(self, tenant, text, filters, depth):
        self.filters.append(filters)
        return [ChannelHit(c, c * 10, 5.0 - c, rank, 0.9) for rank, c in enumerate(self.contents, start=1)]

    async def chunks(self, tenant, chunk_ids, owners=(), principals=()):
        rows = self._shuffled(list(chunk_ids))
        return {c: Chunk(c, c * 10, 1, f"doc{c}.txt", "Refunds", 2, self.contents[c]) for c in rows}

    async def check_filters(self, tenant, filters):
        pass

    async def reader(self, scope):
        return scope.reader([])

    async def reach_for(self, tenant, reader):
        return Reach(reader, frozenset({1, 2, 3}), everything=True)  # the caller reaches every corpus

    async def generation(self, tenant, reader):
        return 0

    async def corpus_weights(self, corpus_id):
        from knowledge_search.domain.model import Weights

        return Weights()


class Embedder:
    def __init__(self, down: bool = False, delay_s: float = 0.0) -> None:
        self.down, self.delay_s, self.calls = down, delay_s, 0

    async def embed_query(self, tenant, text):
        self.calls += 1
        await asyncio.sleep(self.delay_s)
        if self.down:
            raise EmbedderUnavailable()
        return EmbeddedQuery(vector=[1.0, 0.0])


class ModelSynthesiser:
    """A language model's answer, with the support levels it was asked for."""

    model_id = "fake-llm"
    grades = True

    def __init__(self, answer: str) -> None:
        self.answer = answer
        self.graded: list[bool] = []
        self.questions: list[str] = []

    async def synthesise(self, question, sources, *, graded=False):
        self.graded.append(graded)
        self.questions.append(question)
        return Synthesis(text=self.answer)


def searches(index, embedder=None) -> SearchUseCases:
    return SearchUseCases(index, embedder or Embedder(), Thresholds(high_top=0.6, high_mean=0.3, moderate_top=0.3))


def test_a_fact_without_evidence_is_unresolved_and_nothing_else():
    evidence = evidence_of([hit(1, 0.8)])
    grounded = fact("Refunds take thirty days.", Support.SUPPORTED, evidence)
    assert grounded.status is FactStatus.GROUNDED and grounded.evidence_ids == ("E1",)
    assert grounded.confidence == pytest.approx(0.8)
    bare = fact("Refunds are instant.", Support.SUPPORTED, [])
    assert (bare.status, bare.support, bare.confidence, bare.evidence_ids) == (
        FactStatus.UNRESOLVED,
        Support.UNKNOWN,
        0.0,
        (),
    )
    from dataclasses import replace

    forged = replace(bare, status=FactStatus.GROUNDED)
    assert facts_without_provenance([grounded, bare, forged], evidence) == [forged]
    elsewhere = replace(grounded, evidence_ids=("E9",))  # evidence this context does not hold
    assert facts_without_provenance([elsewhere], evidence) == [elsewhere]
    with pytest.raises(ValueError, match="without provenance"):
        KnowledgeContext(facts=(forged,), evidence=evidence, metadata=None, rendered="")  # type: ignore[arg-type]


def test_model_levels_are_read_and_an_invented_one_becomes_unknown():
    evidence = evidence_of([hit(1, 0.8), hit(3, 0.6)])
    text = (
        "SUPPORTED: Refunds take thirty days [1]. PARTIAL: A receipt is needed [2][1]. "
        "CERTAIN: Refunds are paid in cash [2]. Refunds need a manager's approval. "
        "UNKNOWN: Stores may differ [7]. Shipping is free [2]."
    )
    facts = facts_from(text, evidence, graded=True)
    assert [(f.statement, f.support, f.status, f.evidence_ids) for f in facts] == [
        ("Refunds take thirty days.", Support.SUPPORTED, FactStatus.GROUNDED, ("E1",)),
        ("A receipt is needed.", Support.PARTIAL, FactStatus.GROUNDED, ("E2", "E1")),
        ("Refunds are paid in cash.", Support.UNKNOWN, FactStatus.GROUNDED, ("E2",)),
        ("Refunds need a manager's approval.", Support.UNKNOWN, FactStatus.UNRESOLVED, ()),
        ("Stores may differ.", Support.UNKNOWN, FactStatus.UNRESOLVED, ()),  # [7] names no evidence
        ("Shipping is free.", Support.UNKNOWN, FactStatus.GROUNDED, ("E2",)),  # unlabelled: UNKNOWN
    ]
    assert facts_without_provenance(facts, evidence) == []


async def test_the_extractive_path_quotes_supported_facts_with_their_evidence():
    answers = AnswerUseCases(searches(ShuffledIndex(1)), ExtractiveSynthesiser())
    context = await ContextUseCases(answers).context(SCOPE, SearchRequest.parse("How long do refunds take?", top_k=3))
    assert context.facts and all(f.status is FactStatus.GROUNDED for f in context.facts)
    assert all(f.support is Support.SUPPORTED and f.evidence_ids for f in context.facts)
    assert facts_without_provenance(context.facts, context.evidence) == []
    assert [e.evidence_id for e in context.evidence] == ["E1", "E2", "E3"]
    import hashlib

    for e in context.evidence:
        assert e.excerpt == e.hit.chunk.content
        assert e.excerpt_sha256 == hashlib.sha256(e.excerpt.encode()).hexdigest()
    assert context.metadata.backend == "extractive" and context.metadata.degradations == ()
    assert "[SUPPORTED, confidence " in context.rendered and "[E1] doc1.txt" in context.rendered


async def test_the_llm_path_is_asked_for_levels_and_an_unsupported_claim_is_unresolved():
    model = ModelSynthesiser("SUPPORTED: Refunds take thirty days [1]. MAYBE: They are paid in gold.")
    answers = AnswerUseCases(searches(ShuffledIndex(2)), model)
    context = await ContextUseCases(answers).context(SCOPE, SearchRequest.parse("refunds for jo@x.example?", top_k=2))
    assert model.graded == [True] and "jo@x.example" not in model.questions[0]  # anonymised first
    assert [(f.support, f.status) for f in context.facts] == [
        (Support.SUPPORTED, FactStatus.GROUNDED),
        (Support.UNKNOWN, FactStatus.UNRESOLVED),
    ]
    assert "[UNRESOLVED - no evidence; do not rely on it] They are paid in gold." in context.rendered
    assert facts_without_provenance(context.facts, context.evidence) == []


async def test_rendered_is_byte_stable_whatever_the_row_order():
    rendered = set()
    for seed in range(6):  # a different row order each time
        answers = AnswerUseCases(searches(ShuffledIndex(seed)), ExtractiveSynthesiser())
        context = await ContextUseCases(answers).context(SCOPE, SearchRequest.parse("refund receipt", top_k=4))
        rendered.add(context.rendered.encode())
    assert len(rendered) == 1
    assert "elapsed" not in rendered.pop().decode()  # nothing of the clock in the block


async def test_context_falls_back_to_the_lexical_channel_when_the_embedder_is_down():
    answers = AnswerUseCases(searches(ShuffledIndex(3), Embedder(down=True)), ExtractiveSynthesiser())
    context = await ContextUseCases(answers).context(SCOPE, SearchRequest.parse("refund receipt", top_k=2))
    assert context.metadata.degradations == (LEXICAL_ONLY,)
    assert context.evidence and all(e.hit.vector_rank == 0 for e in context.evidence)
    assert f"Degraded: {LEXICAL_ONLY}" in context.rendered
    # Search itself still says the embedder is unavailable: the fallback is the agent reads' own.
    with pytest.raises(EmbedderUnavailable):
        await searches(ShuffledIndex(3), Embedder(down=True)).search(SCOPE, SearchRequest.parse("refund"))


async def test_search_documents_makes_one_retrieval_with_its_synthesis_and_every_chunk_in_full():
    long_chunk = "refund " + "x" * 20_000
    index = ShuffledIndex(4, {1: long_chunk, 2: CONTENT[2], 3: CONTENT[3]})
    embedder = Embedder()
    model = ModelSynthesiser("Refunds need a receipt [3] and take long [1]. See also [9].")
    answers = AnswerUseCases(searches(index, embedder), model)
    outcome, synthesis, unavailable = await answers.search_documents(
        SCOPE, SearchRequest.parse("refund for jo@x.example", top_k=3)
    )
    assert embedder.calls == 1 and len(index.filters) == 2  # one retrieval: one embedding, one call per channel
    assert synthesis == "Refunds need a receipt [3] and take long [1]. See also." and unavailable == ""
    assert "jo@x.example" not in model.questions[0]
    from knowledge_search.domain.render import render

    text = render(outcome.hits, outcome.relevance, synthesis)
    assert long_chunk in text  # never truncated
    assert text.index("Synthesis: Refunds need") < text.index("[Source 1 ")
    assert re.search(r"\[Source 1 \(document_id=10\), relevance: \d+%, vec#1/lex#1\]\n" + long_chunk, text)


def housekeeping_index() -> ShuffledIndex:
    return ShuffledIndex(5, {1: "Restart the billing worker after each deploy.", 2: "Deploys happen on Tuesdays."})


class Corpora:
    def __init__(self, names=(OPERATIONAL_PATTERNS, USER_BEHAVIOR, DATA_CATALOG), fail: bool = False) -> None:
        self.names, self.fail = names, fail

    async def housekeeping(self, tenant):
        if self.fail:
            raise ConnectionError("database gone")
        return {name: n for n, name in enumerate(self.names, start=1)}


async def test_prefetch_reads_each_housekeeping_corpus_once_embedded_and_filters_before_ranking():
    index, embedder = housekeeping_index(), Embedder()
    prefetch = PrefetchUseCases(searches(index, embedder), Corpora())
    found = await prefetch.prefetch(SCOPE, "how do I deploy billing?")
    assert found.rendered.startswith("[SUGGESTED CONTEXT]\nOperational patterns:\n- Restart the billing worker")
    assert "This user's habits:" in found.rendered and "Data catalog:" not in found.rendered  # off by default
    assert not found.degraded and embedder.calls == 1
    by_corpus = {f.corpus_id: f for f in index.filters}
    assert set(by_corpus) == {1, 2} and all(f.exclude_provisional for f in index.filters)
    assert by_corpus[2].subject == "user-1" and by_corpus[1].subject is None  # the caller's own behaviour only
    with_catalog = PrefetchUseCases(searches(housekeeping_index()), Corpora(), data_catalog=True)
    assert "Data catalog:" in (await with_catalog.prefetch(SCOPE, "deploy billing")).rendered
    anonymous = Scope(tenant="acme", capabilities=frozenset({"search"}), scope_claim="/")
    index = housekeeping_index()
    await PrefetchUseCases(searches(index), Corpora()).prefetch(anonymous, "deploy billing")
    assert {f.corpus_id for f in index.filters} == {1}  # no subject: no user_behavior at all


async def test_prefetch_degrades_instead_of_failing():
    lexical = await PrefetchUseCases(searches(housekeeping_index(), Embedder(down=True)), Corpora()).prefetch(
        SCOPE, "deploy billing"
    )
    assert lexical.degraded and lexical.degradations == (LEXICAL_ONLY,) and "Restart the billing" in lexical.rendered
    started = time.monotonic()
    slow = PrefetchUseCases(searches(housekeeping_index(), Embedder(delay_s=5)), Corpora(), deadline_s=0.2)
    late = await slow.prefetch(SCOPE, "deploy billing")
    assert time.monotonic() - started < 1.0
    assert (late.rendered, late.entry_count, late.degradations) == ("", 0, ("past the deadline of 200 ms",))
    broken = await PrefetchUseCases(searches(housekeeping_index()), Corpora(fail=True)).prefetch(SCOPE, "deploy")
    assert (broken.rendered, broken.degradations) == ("", ("the pre-fetch failed",))
    nothing = await PrefetchUseCases(searches(housekeeping_index()), Corpora(names=())).prefetch(SCOPE, "deploy")
    assert (nothing.rendered, nothing.degraded) == ("", False)  # no housekeeping corpus yet: empty, not degraded


async def test_the_scope_keyed_cache_covers_the_agent_reads_but_never_a_degraded_outcome():
    from knowledge_search.adapters.memory_cache import TtlCache

    embedder = Embedder(down=True)
    index = ShuffledIndex(4)
    searcher = SearchUseCases(index, embedder, Thresholds(), system_corpora=Corpora(), cache=TtlCache(30.0))
    context = ContextUseCases(AnswerUseCases(searcher, ExtractiveSynthesiser()))
    request = SearchRequest.parse("refund receipt", top_k=2)
    degraded = await context.context(SCOPE, request)
    assert degraded.metadata.degradations == (LEXICAL_ONLY,)
    embedder.down = False
    fresh = await context.context(SCOPE, request)  # the lexical-only outcome was not kept
    assert fresh.metadata.degradations == () and embedder.calls == 2
    again = await context.context(SCOPE, request)
    assert embedder.calls == 2 and again.rendered == fresh.rendered  # from the cache
    # Pre-fetch's reads include the housekeeping corpora: never the entry of an ordinary read.
    seen = len(index.filters)
    await searcher.search(SCOPE, request, include_housekeeping=True)
    assert len(index.filters) > seen and all(not f.exclude_corpora for f in index.filters[seen:])


async def test_a_spent_llm_budget_makes_the_context_extractive_and_says_so():
    from knowledge_runtime.refusals import Refusal, Refused

    class Spent:
        async def refusal(self, tenant):
            return Refused(Refusal.BUDGET_EXHAUSTED, "the tenant's LLM budget for the month is spent")

    model = ModelSynthesiser("SUPPORTED: Refunds take thirty days [1].")
    answers = AnswerUseCases(searches(ShuffledIndex(5)), model, budget=Spent(), fallback=ExtractiveSynthesiser())
    context = await ContextUseCases(answers).context(SCOPE, SearchRequest.parse("How long do refunds take?", top_k=2))
    assert model.questions == [] and context.metadata.backend == "extractive"
    assert any("LLM budget" in d and "extractive" in d for d in context.metadata.degradations)
    assert context.facts and all(f.status is FactStatus.GROUNDED for f in context.facts)
