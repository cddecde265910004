"""Search's pure domain: request parsing, fusion, the banner, the agent text, citations, anonymisation."""

from __future__ import annotations

import re

import pytest
from knowledge_search.domain.anonymise import Anonymiser
from knowledge_search.domain.answer import ExtractiveSynthesiser, Source, cite, excerpt
from knowledge_search.domain.errors import CorpusNotFound, DocumentNotFound, InvalidSearch
from knowledge_search.domain.fusion import DEFAULT_FUSION, Fusion, FusionMethod, fuse, single_channel
from knowledge_search.domain.model import ChannelHit, Chunk, Relevance, SearchHit, SearchRequest, Weights
from knowledge_search.domain.relevance import Thresholds, banner
from knowledge_search.domain.render import render


def chunk(chunk_id: int, content: str = "text", document_id: int | None = None) -> Chunk:
    return Chunk(
        chunk_id=chunk_id,
        document_id=document_id or chunk_id * 10,
        corpus_id=1,
        filename="f.txt",
        section="",
        page=None,
        content=content,
    )


def hits(*pairs: tuple[int, float]) -> list[ChannelHit]:
    return [ChannelHit(chunk_id, chunk_id * 10, score, rank) for rank, (chunk_id, score) in enumerate(pairs, start=1)]


RRF = Fusion(FusionMethod.RRF)
COVERAGE_RRF = Fusion(FusionMethod.COVERAGE_RRF)


def hit(score: float, vector_rank: int = 1, lexical_rank: int = 0) -> SearchHit:
    return SearchHit(chunk(vector_rank or lexical_rank), score, vector_rank, lexical_rank, 0.0)


# --- request parsing -------------------------------------------------------------------------


def test_parse_defaults_and_clamps():
    request = SearchRequest.parse("  where is it  ", top_k=0)
    assert (request.text, request.top_k, request.warnings) == ("where is it", 10, ())
    clamped = SearchRequest.parse("q", top_k=500)
    assert clamped.top_k == 100 and "clamped" in clamped.warnings[0]


@pytest.mark.parametrize(
    "kwargs, field",
    [
        ({"text": " "}, "query"),
        ({"text": "q", "top_k": -1}, "top_k"),
        ({"text": "a\x00b"}, "query"),
        ({"text": "x" * 100_001}, "query"),
        ({"text": "q", "weights": Weights(vector=-0.5)}, "weights.vector"),
        ({"text": "q", "weights": Weights(vector=0.0, lexical=0.0)}, "weights"),
    ],
)
def test_parse_refuses_bad_input_naming_the_field(kwargs, field):
    text = kwargs.pop("text")
    with pytest.raises(InvalidSearch) as caught:
        SearchRequest.parse(text, **kwargs)
    assert caught.value.code == "INVALID_ARGUMENT" and caught.value.metadata["field"] == field


def test_identifiers_that_cannot_exist_are_not_found():
    with pytest.raises(CorpusNotFound):
        SearchRequest.parse("q", corpus_id="abc")
    with pytest.raises(DocumentNotFound):
        SearchRequest.parse("q", document_id="99999999999999999999999")
    assert SearchRequest.parse("q", corpus_id="7").filters.corpus_id == 7
    with pytest.raises(CorpusNotFound):  # one spelling per id: " 7 " is not 7
        SearchRequest.parse("q", corpus_id=" 7 ")


# --- fusion ----------------------------------------------------------------------------------


def test_rrf_orders_by_fused_score_and_keeps_cosine_scores():
    vector = hits((1, 0.9), (2, 0.8), (3, 0.7))
    lexical = hits((3, 12.0), (4, 9.0), (1, 2.0))
    fused = fuse(vector, lexical, Weights(1.0, 1.0), top_k=10, fusion=RRF)
    assert [h.chunk_id for h in fused] == [1, 3, 2, 4]
    by_id = {h.chunk_id: h for h in fused}
    assert by_id[1].fused_score == pytest.approx(1 / 61 + 1 / 63)
    assert (by_id[3].vector_rank, by_id[3].lexical_rank, by_id[3].score) == (3, 1, 0.7)
    assert (by_id[4].vector_rank, by_id[4].lexical_rank, by_id[4].score) == (0, 2, 0.0)  # lexical-only
    assert by_id[4].document_id == 40 and by_id[4].lexical_only
    assert by_id[2].lexical_rank == 0 and by_id[2].score == 0.8


def test_weights_and_top_k():
    vector, lexical = hits((1, 0.9), (2, 0.8)), hits((2, 5.0), (3, 4.0))
    lexical_first = fuse(vector, lexical, Weights(vector=0.2, lexical=1.0), top_k=2, fusion=RRF)
    assert [h.chunk_id for h in lexical_first] == [2, 3]
    assert lexical_first[0].fused_score == pytest.approx(0.2 / 62 + 1 / 61)
    assert [h.chunk_id for h in fuse(vector, lexical, Weights(1.0, 0.0), 3, RRF)] == [1, 2, 3]


def test_coverage_rrf_scales_the_lexical_weight_by_the_channels_confidence():
    vector = hits((1, 0.9), (2, 0.8))
    generic = [ChannelHit(2, 20, 3.0, 1, coverage=0.1), ChannelHit(3, 30, 2.0, 2, coverage=0.05)]
    fused = fuse(vector, generic, Weights(1.0, 1.0), 3, COVERAGE_RRF)
    # Only generic words matched: lexical weight 0.1^2, so the vector order stands.
    assert [h.chunk_id for h in fused] == [1, 2, 3]
    assert fused[1].fused_score == pytest.approx(1 / 62 + 0.01 / 61)
    exact = [ChannelHit(1, 10, 9.0, 1, coverage=1.0), ChannelHit(3, 30, 8.0, 2, coverage=0.9)]
    by_id = {h.chunk_id: h for h in fuse(vector, exact, Weights(1.0, 1.0), 3, COVERAGE_RRF)}
    assert by_id[3].fused_score == pytest.approx(1 / 62)  # the full lexical weight (confidence 1.0^2)
    assert by_id[1].fused_score == pytest.approx(2 / 61)


# One constructed case on which the four methods disagree. The vector channel is sure of 1
# (0.90) and barely separates the rest (0.50 .. 0.47); the lexical channel matched generic
# words only (coverage 0.2) and puts 3 far ahead (BM25 10 against 1 and less), then 2.
#   rrf:          ranks only: 2 (1/62 + 1/62) and 3 (1/63 + 1/61) beat 1 (1/61 + 1/64): 3, 2, 1
#   coverage_rrf: lexical weight 0.2^2, so the vector order stands: 1, 2, 3
#   minmax 0.5:   3 = 0.5 * 0.02/0.43 + 0.5 * 1 edges out 1 = 0.5 * 1 + 0.5 * 0: 3, 1, 2
#   zscore 0.5:   1 is the vector channel's lone outlier (z 2.0 against the lexical 3's 1.7): 1, 3, 2
#   minmax 0.5 with the coverage gate 0.6: the lexical share is scaled by 0.2 / 0.6, so
#                 3 = 0.5 * 0.02/0.43 + 0.5/3 * 1 = 0.19 falls behind 1 (0.5): 1, 3, 2
VECTOR_CASE = [
    ChannelHit(1, 10, 0.90, 1),
    ChannelHit(2, 20, 0.50, 2),
    ChannelHit(3, 30, 0.49, 3),
    ChannelHit(4, 40, 0.48, 4),
    ChannelHit(6, 60, 0.47, 5),
]
LEXICAL_CASE = [
    ChannelHit(3, 30, 10.0, 1, coverage=0.2),
    ChannelHit(2, 20, 1.0, 2, coverage=0.1),
    ChannelHit(5, 50, 0.95, 3, coverage=0.1),
    ChannelHit(1, 10, 0.9, 4, coverage=0.1),
]


@pytest.mark.parametrize(
    "fusion, expected",
    [
        (RRF, [3, 2, 1]),
        (COVERAGE_RRF, [1, 2, 3]),
        (Fusion(FusionMethod.MINMAX, alpha=0.5, gate=0.0), [3, 1, 2]),
        (Fusion(FusionMethod.ZSCORE, alpha=0.5, gate=0.0), [1, 3, 2]),
        (Fusion(FusionMethod.MINMAX, alpha=0.5, gate=0.6), [1, 3, 2]),
    ],
)
def test_each_fusion_method_on_a_case_where_they_differ(fusion, expected):
    assert [h.chunk_id for h in fuse(VECTOR_CASE, LEXICAL_CASE, Weights(1.0, 1.0), 3, fusion)] == expected


def test_convex_fusion_normalises_per_query_and_weighs_by_alpha():
    fused = {
        h.chunk_id: h
        for h in fuse(
            VECTOR_CASE, LEXICAL_CASE, Weights(1.0, 1.0), 10, Fusion(FusionMethod.MINMAX, alpha=0.5, gate=0.0)
        )
    }
    # min-max: vector (s - 0.47) / 0.43, lexical (s - 0.9) / 9.1; a channel's missing hit counts 0.
    assert fused[3].fused_score == pytest.approx(0.5 * (0.02 / 0.43) + 0.5 * 1.0)
    assert fused[1].fused_score == pytest.approx(0.5 * 1.0 + 0.5 * 0.0)
    assert fused[4].fused_score == pytest.approx(0.5 * 0.01 / 0.43)
    assert fused[6].fused_score == pytest.approx(0.0) and fused[5].fused_score == pytest.approx(0.5 * 0.05 / 9.1)
    assert (fused[5].score, fused[5].vector_rank, fused[5].lexical_rank) == (0.0, 0, 3)
    vector_only = fuse(VECTOR_CASE, LEXICAL_CASE, Weights(1.0, 1.0), 3, Fusion(FusionMethod.MINMAX, alpha=1.0))
    assert [h.chunk_id for h in vector_only] == [1, 2, 3]
    lexical_only = fuse(VECTOR_CASE, LEXICAL_CASE, Weights(1.0, 1.0), 3, Fusion(FusionMethod.ZSCORE, alpha=0.0))
    assert [h.chunk_id for h in lexical_only] == [3, 2, 5]
    # The request's weights still shift the balance of a convex fusion.
    leaning = fuse(VECTOR_CASE, LEXICAL_CASE, Weights(1.0, 0.1), 1, Fusion(FusionMethod.MINMAX, alpha=0.5, gate=0.0))
    assert leaning[0].chunk_id == 1


def test_the_coverage_gate_scales_the_lexical_share_by_what_the_best_lexical_hit_matched():
    gated = Fusion(FusionMethod.MINMAX, alpha=0.5, gate=0.6)
    fused = {h.chunk_id: h.fused_score for h in fuse(VECTOR_CASE, LEXICAL_CASE, Weights(1.0, 1.0), 10, gated)}
    # The best lexical hit matched 0.2 of the query's idf mass: the lexical share 0.5 counts 0.2 / 0.6 of it.
    assert fused[3] == pytest.approx(0.5 * (0.02 / 0.43) + 0.5 * (0.2 / 0.6) * 1.0)
    assert fused[1] == pytest.approx(0.5 * 1.0)
    # A lexical channel whose best hit matched at least the gate's share counts in full.
    confident = [ChannelHit(3, 30, 10.0, 1, coverage=0.7), ChannelHit(2, 20, 1.0, 2, coverage=0.1)]
    full = {h.chunk_id: h.fused_score for h in fuse(VECTOR_CASE, confident, Weights(1.0, 1.0), 10, gated)}
    assert full[3] == pytest.approx(0.5 * (0.02 / 0.43) + 0.5 * 1.0)
    # No lexical hit at all: the gate is 0 and the vector order stands.
    alone = fuse(VECTOR_CASE, [], Weights(1.0, 1.0), 3, gated)
    assert [h.chunk_id for h in alone] == [1, 2, 3]
    # The default fusion is gated.
    assert DEFAULT_FUSION.gate == 0.6 and DEFAULT_FUSION.alpha == 0.5


def test_fusion_settings_are_validated():
    with pytest.raises(ValueError):
        Fusion(alpha=1.5)
    with pytest.raises(ValueError):
        Fusion(k=0)
    with pytest.raises(ValueError):
        Fusion(gate=1.5)


def test_fusion_of_empty_channels():
    assert fuse([], [], Weights(1.0, 1.0), 5, Fusion(FusionMethod.ZSCORE)) == []
    only = fuse(hits((1, 0.5)), [], Weights(1.0, 1.0), 5, Fusion(FusionMethod.MINMAX, alpha=0.5))
    assert [(h.chunk_id, h.fused_score) for h in only] == [(1, 0.5)]


def test_zscore_gives_a_sole_candidate_a_score():
    zscore = Fusion(FusionMethod.ZSCORE, alpha=0.6)
    # One hit in each channel, the same chunk: the best possible fused score, not 0.
    both = fuse(hits((1, 0.7)), hits((1, 4.0)), Weights(1.0, 1.0), 5, zscore)
    assert [(h.chunk_id, h.fused_score) for h in both] == [(1, pytest.approx(1.0))]
    only = fuse(hits((1, 0.7)), [], Weights(1.0, 1.0), 5, zscore)
    assert [(h.chunk_id, h.fused_score) for h in only] == [(1, pytest.approx(0.6))]
    # A sole lexical hit counts one unit above what the lexical channel did not return.
    mixed = {h.chunk_id: h.fused_score for h in fuse(hits((1, 0.80), (2, 0.79)), hits((2, 3.0)), Weights(), 5, zscore)}
    assert mixed == {1: pytest.approx(0.6 * 1.0 + 0.4 * 0.0), 2: pytest.approx(0.6 * -1.0 + 0.4 * 1.0)}


def test_single_channel_keeps_its_order_and_contract():
    lexical = single_channel(hits((5, 3.0), (6, 2.0)), vector=False, top_k=1)
    assert [(h.chunk_id, h.score, h.vector_rank, h.lexical_rank) for h in lexical] == [(5, 0.0, 0, 1)]
    vector = single_channel(hits((5, 0.7)), vector=True, top_k=5)
    assert (vector[0].score, vector[0].vector_rank, vector[0].lexical_rank) == (0.7, 1, 0)


def test_weights_fall_back_field_by_field():
    assert Weights(vector=2.0).over(Weights(lexical=0.5)).over(Weights(1.0, 1.0)) == Weights(2.0, 0.5)


# --- banner ----------------------------------------------------------------------------------

THRESHOLDS = Thresholds(high_top=0.6, high_mean=0.45, moderate_top=0.4, mean_of=3)


@pytest.mark.parametrize(
    "scores, expected",
    [
        ([0.7, 0.5, 0.45], Relevance.HIGH),
        ([0.6, 0.45, 0.3], Relevance.HIGH),
        ([0.7, 0.3, 0.2], Relevance.MODERATE),  # one lucky hit does not make HIGH
        ([0.59, 0.58, 0.57], Relevance.MODERATE),
        ([0.4, 0.1], Relevance.MODERATE),
        ([0.39, 0.38], Relevance.LOW),
        ([], Relevance.NONE),
    ],
)
def test_banner_thresholds(scores, expected):
    assert banner([hit(s, vector_rank=i) for i, s in enumerate(scores, start=1)], THRESHOLDS) is expected


def test_a_lexical_only_top_hit_is_a_lexical_match():
    assert banner([hit(0.0, vector_rank=0, lexical_rank=1), hit(0.9)], THRESHOLDS) is Relevance.LEXICAL_MATCH


def test_a_hit_matching_every_query_term_is_never_low():
    exact_code = SearchHit(chunk(1), 0.3, 1, 1, 0.03, coverage=0.95)
    assert banner([exact_code, hit(0.2, vector_rank=2)], THRESHOLDS) is Relevance.MODERATE
    partial = SearchHit(chunk(1), 0.3, 1, 1, 0.03, coverage=0.5)
    assert banner([partial, hit(0.2, vector_rank=2)], THRESHOLDS) is Relevance.LOW


def test_thresholds_must_be_ordered():
    with pytest.raises(ValueError):
        Thresholds(high_top=0.3, moderate_top=0.5)


# --- agent text ------------------------------------------------------------------------------


def test_render_has_the_banner_then_every_chunk_in_full():
    long = "word " * 5000
    results = [SearchHit(chunk(1, long), 0.734, 1, 2, 0.03), SearchHit(chunk(2, "short"), 0.0, 0, 1, 0.01)]
    text = render(results, Relevance.HIGH)
    assert text.startswith("Relevance: HIGH")
    assert "[Source 1 (document_id=10), relevance: 73%, vec#1/lex#2]\n" + long in text
    assert "[Source 2 (document_id=20), relevance: 0%, vec#-/lex#1]\nshort" in text
    assert "LOW" in render([], Relevance.LOW) and "will not help" in render([], Relevance.LOW)


def test_render_names_the_web_address_a_source_was_fetched_from():
    import dataclasses

    fetched = dataclasses.replace(chunk(1, "Pumps are inspected quarterly."), source_url="https://example.com/pumps")
    text = render([SearchHit(fetched, 0.5, 1, 1, 0.03)], Relevance.HIGH)
    assert "[Source 1 (document_id=10, url=https://example.com/pumps), relevance: 50%, vec#1/lex#1]\n" in text


# --- citations -------------------------------------------------------------------------------


def test_cite_keeps_existing_sources_renumbered_in_order_of_use():
    text, order = cite("B is true [3]. A too [1, 3]. Made up [7] and [0].", source_count=3)
    assert order == [3, 1]
    assert text == "B is true [1]. A too [2][1]. Made up and."
    assert cite("no markers", 2) == ("no markers", [])


def test_excerpt_is_bounded_and_cuts_on_a_word():
    assert excerpt("short") == "short"
    cut = excerpt("lorem ipsum " * 200)
    assert len(cut) <= 1000 and not cut.endswith(" ")


async def test_extractive_synthesiser_quotes_best_sentences_deterministically():
    sources = [
        Source(1, "a", "Cats purr. The refund window is thirty days after delivery. See page [2] for forms."),
        Source(2, "b", "Refund requests go to the billing team. Unrelated sentence here."),
    ]
    synthesiser = ExtractiveSynthesiser(sentences=2)
    first = await synthesiser.synthesise("How long is the refund window?", sources)
    second = await synthesiser.synthesise("How long is the refund window?", sources)
    assert first == second
    assert first.text.startswith("The refund window is thirty days after delivery. [1]")
    assert "Refund requests go to the billing team. [2]" in first.text  # half the best score: kept
    assert "Cats purr" not in first.text and first.cost.items == ()
    assert first.excerpts[1] == "The refund window is thirty days after delivery."
    text, order = cite(first.text, len(sources))
    assert set(re.findall(r"\[(\d+)\]", text)) == {"1", "2"} and order == [1, 2]


async def test_extractive_drops_sentences_far_below_the_best():
    sources = [Source(1, "a", "The refund window for online orders is thirty days. Orders ship daily.")]
    synthesis = await ExtractiveSynthesiser().synthesise("refund window for online orders", sources)
    assert synthesis.text == "The refund window for online orders is thirty days. [1]"


async def test_extractive_quotes_never_carry_markers_of_their_own():
    synthesis = await ExtractiveSynthesiser().synthesise("forms page", [Source(1, "a", "See page [2] for forms.")])
    assert synthesis.text == "See page (2) for forms. [1]"


# --- anonymisation ---------------------------------------------------------------------------


def test_anonymise_and_restore_round_trip():
    anonymiser = Anonymiser(names=["Jane Doe", "Bob"])
    question = (
        "Did jane doe (jane.doe@example.com, +44 20 7946 0958) pay from DE89 3704 0044 0532 0130 00 "
        "with card 4111 1111 1111 1111? Ask Bob at jane.doe@example.com. Invoice 2024 total 1500."
    )
    result = anonymiser.anonymise(question)
    for secret in (
        "jane doe",
        "jane.doe@example.com",
        "+44 20 7946 0958",
        "DE89 3704 0044 0532 0130 00",
        "4111 1111 1111 1111",
        "Bob",
    ):
        assert secret not in result.text
    assert result.text.count("<EMAIL_1>") == 2  # the same value, the same placeholder
    assert {"<NAME_1>", "<NAME_2>", "<PHONE_1>", "<IBAN_1>", "<CARD_1>"} <= set(result.values)
    assert "2024" in result.text and "1500" in result.text  # plain numbers are not phone numbers
    assert result.restore(result.text) == question
    assert result.mask("write to jane.doe@example.com") == "write to <EMAIL_1>"


def test_invalid_iban_and_card_numbers_stay():
    result = Anonymiser().anonymise("ref DE00 1234 5678 9012 3456 78 and 4111 1111 1111 1112")
    assert "<IBAN_" not in result.text and "<CARD_" not in result.text
