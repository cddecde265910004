"""Search use cases with fakes at the ports: channels per mode, weights, tenant scope, answers."""

from __future__ import annotations

import pytest
from knowledge_runtime.auth import Scope
from knowledge_runtime.costs import Cost, CostItem
from knowledge_runtime.reach import ScopePath
from knowledge_runtime.settings import Env, SettingsError
from knowledge_search.config import SearchSettings
from knowledge_search.domain.anonymise import Anonymiser
from knowledge_search.domain.answer import Synthesis
from knowledge_search.domain.errors import CorpusNotFound
from knowledge_search.domain.fusion import DEFAULT_FUSION, Fusion, FusionMethod
from knowledge_search.domain.model import (
    ChannelHit,
    Relevance,
    SearchMode,
    SearchRequest,
    Weights,
)
from knowledge_search.domain.relevance import Thresholds
from knowledge_search.usecases import AnswerUseCases, SearchUseCases

from tests.support.search_fakes import CONTENT, SCOPE, FakeEmbedder, FakeIndex


class RecordingSynthesiser:
    model_id = "fake-llm"

    def __init__(self, answer: str) -> None:
        self.answer = answer
        self.seen: list = []

    async def synthesise(self, question, sources):
        self.seen.append((question, list(sources)))
        return Synthesis(text=self.answer, cost=Cost(items=(CostItem("fake-llm", "chat", 2, 100, 20, 0.01),)))


class Ledger:
    def __init__(self) -> None:
        self.items: list = []

    async def record(self, tenant, item):
        self.items.append((tenant, item))


@pytest.mark.parametrize(
    "mode, channels",
    [(SearchMode.HYBRID, {"vector", "lexical"}), (SearchMode.VECTOR, {"vector"}), (SearchMode.LEXICAL, {"lexical"})],
)
async def test_each_mode_runs_its_channels_for_the_scope_tenant(mode, channels):
    index, embedder = FakeIndex(), FakeEmbedder()
    request = SearchRequest.parse("refund", mode=mode, top_k=7)
    outcome = await SearchUseCases(index, embedder).search(SCOPE, request)
    assert {c[0] for c in index.calls if c[0] not in ("filters", "chunks")} == channels
    assert all(c[1] == "acme" for c in index.calls)
    # fusion reads each channel 300 deep; a single channel only as deep as what it returns
    depth = 300 if mode is SearchMode.HYBRID else 7
    assert all(c[3] == depth for c in index.calls if c[0] in ("vector", "lexical"))
    assert bool(embedder.texts) == ("vector" in channels)
    if mode is SearchMode.HYBRID:
        assert [h.chunk.chunk_id for h in outcome.hits] == [1, 3, 2]
        assert outcome.warnings == ("query truncated",) and outcome.cost.items[0].operation == "embed"
    if mode is SearchMode.LEXICAL:
        assert outcome.relevance is Relevance.LEXICAL_MATCH


async def test_content_is_read_once_for_the_returned_top_k_only():
    index = FakeIndex(extra=297)  # 299 vector hits, 2 lexical: 300 candidates
    outcome = await SearchUseCases(index, FakeEmbedder()).search(SCOPE, SearchRequest.parse("refund", top_k=5))
    assert len(index.hydrated) == 1 and len(index.hydrated[0]) == 5
    assert [h.chunk.chunk_id for h in outcome.hits] == index.hydrated[0]
    assert outcome.hits[0].chunk.content == CONTENT[outcome.hits[0].chunk.chunk_id]


async def test_a_chunk_deleted_between_ranking_and_reading_drops_out():
    class Deleting(FakeIndex):
        async def vector_search(self, tenant, vector, filters, depth):
            return [ChannelHit(404, 4040, 0.9, 1), ChannelHit(2, 20, 0.5, 2)]

    outcome = await SearchUseCases(Deleting(), FakeEmbedder()).search(
        SCOPE, SearchRequest.parse("refund", mode=SearchMode.VECTOR)
    )
    assert [h.chunk.chunk_id for h in outcome.hits] == [2]


async def test_a_re_index_between_ranking_and_reading_reads_again_and_finds_the_new_version():
    """The channels found the old version's chunks; before their content was read, a re-index
    replaced them (one transaction): the search reads the channels again, embedding only once."""

    class ReIndexed(FakeIndex):
        async def vector_search(self, tenant, vector, filters, depth):
            self.calls.append(("vector", tenant, tuple(vector), depth))
            reads = sum(1 for c in self.calls if c[0] == "vector")
            return [ChannelHit(404, 4040, 0.9, 1)] if reads == 1 else [ChannelHit(2, 20, 0.9, 1)]

    index, embedder = ReIndexed(), FakeEmbedder()
    outcome = await SearchUseCases(index, embedder).search(SCOPE, SearchRequest.parse("refund", mode=SearchMode.VECTOR))
    assert [h.chunk.chunk_id for h in outcome.hits] == [2]
    assert len(embedder.texts) == 1 and index.hydrated == [[404], [2]]


async def test_a_writer_that_never_stops_costs_a_bounded_number_of_reads():
    class Churning(FakeIndex):
        async def lexical_search(self, tenant, text, filters, depth):
            self.calls.append(("lexical", tenant, text, depth))
            return [ChannelHit(404, 4040, 7.0, 1), ChannelHit(3, 30, 3.0, 2)]

    index = Churning()
    outcome = await SearchUseCases(index, FakeEmbedder()).search(
        SCOPE, SearchRequest.parse("refund", mode=SearchMode.LEXICAL)
    )
    assert [h.chunk.chunk_id for h in outcome.hits] == [3] and len(index.hydrated) == 3


async def test_corpus_weights_apply_unless_the_request_sets_its_own():
    request = SearchRequest.parse("refund", corpus_id="1")
    lexical_corpus = SearchUseCases(FakeIndex(Weights(vector=0.0, lexical=1.0)), FakeEmbedder())
    assert [h.chunk.chunk_id for h in (await lexical_corpus.search(SCOPE, request)).hits][:2] == [3, 1]
    override = SearchRequest.parse("refund", corpus_id="1", weights=Weights(vector=1.0))
    assert next(h.chunk.chunk_id for h in (await lexical_corpus.search(SCOPE, override)).hits) == 1


async def test_a_corpus_filter_outside_the_callers_reach_is_not_found_before_any_channel_reads():
    index = FakeIndex()
    index._reach.place("acme", 2, node="workspace:eng")  # beyond the root caller's node
    index._reach.place("globex", 3)  # another tenant's
    for corpus in ("2", "3", "99"):
        with pytest.raises(CorpusNotFound):
            await SearchUseCases(index, FakeEmbedder()).search(SCOPE, SearchRequest.parse("refund", corpus_id=corpus))
    assert index.calls == []


async def test_query_anonymises_for_the_model_and_restores_the_answer():
    synthesiser = RecordingSynthesiser("Ask <EMAIL_1> [1]; see also [9]. Forms [3].")
    ledger = Ledger()
    answers = AnswerUseCases(
        SearchUseCases(FakeIndex(), FakeEmbedder(), Thresholds(high_top=0.8, high_mean=0.5, moderate_top=0.4)),
        synthesiser,
        Anonymiser(["Jane"]),
        ledger,
    )
    answer = await answers.query(SCOPE, SearchRequest.parse("Jane asks: refund to help@shop.example?"))
    question, sources = synthesiser.seen[0]
    assert "help@shop.example" not in question and "Jane" not in question
    assert "help@shop.example" not in sources[0].text and "<EMAIL_1>" in sources[0].text
    assert answer.text == "Ask help@shop.example [1]; see also. Forms [2]."
    assert [c.chunk.chunk_id for c in answer.citations] == [1, 2]  # sources 1 and 3, renumbered
    assert "help@shop.example" in answer.citations[0].excerpt  # excerpts are never anonymised
    assert answer.relevance is Relevance.MODERATE  # top 0.82, but the mean of the first hits is 0.44
    assert [i.operation for i in answer.cost.items] == ["embed", "chat"]
    assert ledger.items == [("acme", CostItem("fake-llm", "chat", 2, 100, 20, 0.01))]


async def test_query_without_relevant_content_does_not_call_the_model():
    synthesiser = RecordingSynthesiser("anything [1]")
    searches = SearchUseCases(
        FakeIndex(coverage=0.3), FakeEmbedder(), Thresholds(high_top=0.95, high_mean=0.9, moderate_top=0.9)
    )
    answer = await AnswerUseCases(searches, synthesiser).query(SCOPE, SearchRequest.parse("refund"))
    assert (answer.text, answer.citations, answer.relevance, synthesiser.seen) == ("", (), Relevance.LOW, [])


def test_settings_defaults_and_validation():
    settings = SearchSettings.from_env(Env({}))
    assert settings.bm25.tiers == (0.5, 0.5, 0.5, 1.0) and (settings.bm25.k1, settings.bm25.b) == (1.2, 0.75)
    assert settings.channel_depth == 300 and settings.fusion == DEFAULT_FUSION and settings.llm is None
    chosen = SearchSettings.from_env(
        Env(
            {
                "KNOWLEDGE_SEARCH_FUSION": "ZScore",
                "KNOWLEDGE_SEARCH_FUSION_ALPHA": "0.3",
                "KNOWLEDGE_SEARCH_RRF_K": "20",
                "KNOWLEDGE_SEARCH_FUSION_COVERAGE_GATE": "0",
            }
        )
    )
    assert chosen.fusion == Fusion(FusionMethod.ZSCORE, k=20, alpha=0.3, gate=0.0)
    custom = SearchSettings.from_env(
        Env(
            {
                "KNOWLEDGE_LLM_URL": "http://127.0.0.1:9/v1",
                "KNOWLEDGE_LLM_MODEL": "m",
                "KNOWLEDGE_SEARCH_ANONYMISE_NAMES": "Ann, Bo",
            }
        )
    )
    assert custom.llm.model == "m" and custom.anonymise_names == ("Ann", "Bo")
    for bad in (
        {"KNOWLEDGE_SEARCH_BM25_B": "1.5"},
        {"KNOWLEDGE_SEARCH_BM25_WEIGHTS": "1,2,3"},
        {"KNOWLEDGE_LLM_URL": "http://x"},
        {"KNOWLEDGE_SEARCH_RELEVANCE_MODERATE": "0.9"},
        {"KNOWLEDGE_SEARCH_TEXT_CONFIG": "english; drop"},
        {"KNOWLEDGE_SEARCH_FUSION": "borda"},
        {"KNOWLEDGE_SEARCH_FUSION_ALPHA": "1.5"},
        {"KNOWLEDGE_SEARCH_FUSION_COVERAGE_GATE": "1.2"},
        {"KNOWLEDGE_SEARCH_FUSION_COVERAGE_GATE": "-0.1"},
        {"KNOWLEDGE_SEARCH_LEXICAL_CONFIDENCE": "false"},
        {"KNOWLEDGE_SEARCH_VECTOR_WEIGHT": "0", "KNOWLEDGE_SEARCH_LEXICAL_WEIGHT": "0"},
    ):
        with pytest.raises(SettingsError) as caught:
            SearchSettings.from_env(Env(bad))
        assert "KNOWLEDGE_" in str(caught.value)


def test_the_search_service_never_imports_a_model_library():
    import ast
    from pathlib import Path

    import knowledge_search

    root = Path(knowledge_search.__file__).parent
    for path in root.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            names = (
                [a.name for a in node.names]
                if isinstance(node, ast.Import)
                else ([node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            )
            assert not any(n.split(".")[0] in {"torch", "sentence_transformers", "transformers"} for n in names), path


class FakeReranker:
    """Scores a passage by how often it says "refund"; records each call."""

    def __init__(self, error: Exception | None = None) -> None:
        self.calls: list[tuple[str, list[str]]] = []
        self._error = error

    async def rerank(self, tenant, query, passages):
        from knowledge_search.domain.model import Reranking

        self.calls.append((query, list(passages)))
        if self._error is not None:
            raise self._error
        return Reranking(
            scores=tuple(float(p.lower().count("refund")) for p in passages),
            cost=Cost(items=(CostItem("ce", "rerank", len(passages), 40),)),
        )


async def test_rerank_reorders_the_window_and_reads_content_for_it_only():
    index, reranker = FakeIndex(extra=97), FakeReranker()
    searches = SearchUseCases(index, FakeEmbedder(), reranker=reranker, rerank_window=20)
    outcome = await searches.search(SCOPE, SearchRequest.parse("refund", top_k=3, rerank=True))
    assert len(index.hydrated) == 1 and len(index.hydrated[0]) == 20  # the window, not the 100 candidates
    assert len(reranker.calls) == 1 and len(reranker.calls[0][1]) == 20
    assert [h.chunk.chunk_id for h in outcome.hits] == [1, 3, 2]  # 1 and 3 say "refund"; then fused order
    assert [h.rerank_score for h in outcome.hits] == [1.0, 1.0, 0.0]
    assert [i.operation for i in outcome.cost.items] == ["embed", "rerank"]
    plain = await searches.search(SCOPE, SearchRequest.parse("refund", top_k=3))
    assert all(h.rerank_score is None for h in plain.hits) and len(reranker.calls) == 1  # default off


async def test_the_banner_keeps_its_meaning_when_reranked():
    # The reranker puts the lexical-only chunk 3 first: the banner still judges what is returned.
    searches = SearchUseCases(FakeIndex(), FakeEmbedder(), reranker=FakeReranker())
    outcome = await searches.search(SCOPE, SearchRequest.parse("refund", top_k=2, rerank=True))
    assert outcome.hits[0].chunk.chunk_id in (1, 3)
    by_cosine = SearchUseCases(FakeIndex(), FakeEmbedder()).search
    same_hits = await by_cosine(SCOPE, SearchRequest.parse("refund", top_k=2))
    assert {h.chunk.chunk_id: h.score for h in outcome.hits} == {h.chunk.chunk_id: h.score for h in same_hits.hits}


async def test_a_single_channel_reranked_is_read_as_deep_as_the_rerank_window():
    index = FakeIndex()
    searches = SearchUseCases(index, FakeEmbedder(), reranker=FakeReranker(), rerank_window=20)
    await searches.search(SCOPE, SearchRequest.parse("refund", mode=SearchMode.LEXICAL, top_k=3, rerank=True))
    assert [c[3] for c in index.calls if c[0] in ("vector", "lexical")] == [20]


async def test_rerank_true_without_a_model_is_refused_and_the_default_falls_back():
    from knowledge_search.domain.errors import RerankUnavailable

    with pytest.raises(RerankUnavailable) as caught:  # no reranker wired at all
        await SearchUseCases(FakeIndex(), FakeEmbedder()).search(SCOPE, SearchRequest.parse("refund", rerank=True))
    assert caught.value.code == "UNAVAILABLE" and caught.value.reason == "RUNTIME_UNAVAILABLE"
    refusing = SearchUseCases(FakeIndex(), FakeEmbedder(), reranker=FakeReranker(RerankUnavailable()))
    with pytest.raises(RerankUnavailable):  # the embedder has no model
        await refusing.search(SCOPE, SearchRequest.parse("refund", rerank=True))
    refusing.rerank_default = True
    fallback = await refusing.search(SCOPE, SearchRequest.parse("refund"))
    assert [h.chunk.chunk_id for h in fallback.hits] == [1, 3, 2]  # the fused order
    assert any("reranking is unavailable" in w for w in fallback.warnings)
    off = await refusing.search(SCOPE, SearchRequest.parse("refund", rerank=False))  # the request says no
    assert not any("rerank" in w for w in off.warnings)


async def test_the_cache_answers_while_the_scopes_generation_holds_and_is_keyed_on_the_reader():
    from knowledge_runtime.reach import Band
    from knowledge_search.adapters.memory_cache import TtlCache

    index = FakeIndex()
    index._reach.place("acme", 2, "workspace:eng")
    searches = SearchUseCases(index, FakeEmbedder(), cache=TtlCache(30))
    request = SearchRequest.parse("refund")

    def channel_calls() -> int:
        return sum(1 for call in index.calls if call[0] in ("vector", "lexical"))

    first = await searches.search(SCOPE, request)
    calls = channel_calls()
    again = await searches.search(SCOPE, request)
    assert channel_calls() == calls and again.hits == first.hits  # a hit
    assert first.cost.items and not again.cost.items  # nothing was embedded for the hit
    index._reach.generations[("acme", ScopePath())] = 1  # a change at the root: every reader sees it
    await searches.search(SCOPE, request)
    assert channel_calls() == calls * 2
    # another reader, another scope or clearance, another request: each its own entry
    for scope in (
        Scope("acme", SCOPE.capabilities, scope_claim="workspace:eng"),
        Scope("acme", SCOPE.capabilities, scope_claim="/", clearance=Band.GENERAL),
    ):
        before = channel_calls()
        await searches.search(scope, request)
        assert channel_calls() == before + calls
    before = channel_calls()
    await searches.search(SCOPE, SearchRequest.parse("refund", top_k=3))
    assert channel_calls() == before + calls
    index._reach.generations[("acme", ScopePath.parse("workspace:eng"))] = 1  # only eng's readers change
    before = channel_calls()
    await searches.search(SCOPE, request)
    assert channel_calls() == before  # the root reader's entry survives


def test_cache_entries_expire_after_the_ttl_and_the_oldest_go_first():
    from knowledge_search.adapters.memory_cache import TtlCache
    from knowledge_search.domain.cache import CacheKey
    from knowledge_search.domain.model import SearchOutcome

    now = [0.0]
    cache = TtlCache(30, max_entries=2, clock=lambda: now[0])
    outcome = SearchOutcome(hits=(), relevance=Relevance.LOW)
    keys = [CacheKey("t", "/", "TENANT", frozenset(), 0, n) for n in range(3)]
    cache.put(keys[0], outcome)
    now[0] = 29.9
    assert cache.get(keys[0]) is outcome
    now[0] = 30.0
    assert cache.get(keys[0]) is None and len(cache) == 0
    for key in keys:
        cache.put(key, outcome)
    assert len(cache) == 2 and cache.get(keys[0]) is None and cache.get(keys[2]) is outcome


def test_the_cache_ttl_is_a_setting_and_zero_disables_it():
    assert SearchSettings.from_env(Env({})).cache_ttl_s == 30.0
    assert SearchSettings.from_env(Env({"KNOWLEDGE_SEARCH_CACHE_TTL_S": "0"})).cache_ttl_s == 0.0
    with pytest.raises(SettingsError):
        SearchSettings.from_env(Env({"KNOWLEDGE_SEARCH_CACHE_TTL_S": "-1"}))


# ---- the LLM budget --------------------------------------------------------------------


class Budget:
    def __init__(self, spent: bool) -> None:
        self.spent = spent
        self.asked: list[str] = []

    async def refusal(self, tenant):
        from knowledge_runtime.refusals import Refusal, Refused

        self.asked.append(tenant)
        return (
            Refused(Refusal.BUDGET_EXHAUSTED, "the tenant's LLM budget for this month is spent") if self.spent else None
        )


@pytest.mark.parametrize("spent", [False, True])
async def test_a_spent_llm_budget_answers_extractively_and_says_so(spent):
    from knowledge_search.domain.answer import ExtractiveSynthesiser

    llm, ledger, budget = RecordingSynthesiser("Refunds take thirty days [1]."), Ledger(), Budget(spent)
    searches = SearchUseCases(FakeIndex(), FakeEmbedder(), Thresholds(high_top=0.8, high_mean=0.5, moderate_top=0.4))
    answers = AnswerUseCases(searches, llm, ledger=ledger, budget=budget, fallback=ExtractiveSynthesiser())
    answer = await answers.query(SCOPE, SearchRequest.parse("refund"))
    assert budget.asked == ["acme"]
    if spent:
        assert llm.seen == [] and ledger.items == []  # the LLM is not called, nothing is spent
        assert answer.fallback_reason == "BUDGET_EXHAUSTED" and "extractive" in answer.fallback_message
        assert answer.citations and answer.text
    else:
        assert len(llm.seen) == 1 and answer.fallback_reason == "" and answer.fallback_message == ""
