"""Streamed answers and conversations with fakes at the ports: what is sent and in what order,
markers and placeholders never split, the history condensed (or, without a model, the last
earlier question read with the new one), the history's budget."""

from __future__ import annotations

import pytest
from knowledge_runtime.costs import Cost, CostItem
from knowledge_search.domain.answer import Citer, ExtractiveSynthesiser, Source, Synthesis, cite
from knowledge_search.domain.conversation import (
    WITHOUT_MODEL_NOTE,
    Turn,
    condensed,
    parse_history,
    within_budget,
    without_model,
)
from knowledge_search.domain.errors import InvalidSearch
from knowledge_search.domain.model import Answer, SearchRequest
from knowledge_search.domain.streaming import AnswerStream, Started
from knowledge_search.usecases import AnswerUseCases, SearchUseCases

from tests.support.search_fakes import SCOPE, FakeEmbedder, FakeIndex


def streamed(pieces: list[str], sources: int, restore=lambda text: text) -> tuple[list[str], list[int]]:
    citer = Citer(sources)
    stream = AnswerStream(citer, restore)
    sent = [stream.feed(piece) for piece in pieces] + [stream.finish()]
    return sent, citer.order


def test_a_marker_split_across_pieces_is_held_until_whole_and_numbered_as_the_final_answer():
    raw = "Refunds take 30 days [3]. Forms are online [1][9]. Ask [3, 1]."
    pieces = ["Refunds take 30 days [", "3", "]. Forms are online [1][", "9]. Ask [3,", " 1]."]
    sent, order = streamed(pieces, sources=3)
    assert sent[0] == "Refunds take 30 days " and sent[1] == ""  # "[3" waits for its "]"
    final, final_order = cite(raw, 3)
    assert "".join(sent) == "Refunds take 30 days [1]. Forms are online [2]. Ask [1][2]."
    assert order == final_order == [3, 1] and " ".join("".join(sent).split()) == final


def test_a_placeholder_is_restored_only_whole_and_an_unclosed_bracket_is_text_in_the_end():
    restore = lambda text: text.replace("<EMAIL_1>", "ana@example.org")
    sent, _ = streamed(["Write to <EMA", "IL_1> today [1", "]. Arrays use a[i"], 1, restore)
    assert sent[:2] == ["Write to ", "ana@example.org today "]
    assert "".join(sent) == "Write to ana@example.org today [1]. Arrays use a[i"


async def test_the_extractive_synthesiser_streams_its_sentences_which_join_to_its_answer():
    sources = [
        Source(1, "policy", "Refunds take thirty days. Shipping is free."),
        Source(2, "faq", "A refund needs form R-7. Returns are accepted for refunds within thirty days."),
    ]
    items = [item async for item in ExtractiveSynthesiser().stream("refund days", sources)]
    *pieces, whole = items
    assert isinstance(whole, Synthesis) and len(pieces) >= 2 and all(isinstance(p, str) for p in pieces)
    assert "".join(pieces) == whole.text


def test_history_is_checked_and_kept_within_its_budget_oldest_out_first():
    with pytest.raises(InvalidSearch) as caught:
        parse_history([("user", "ok"), (None, "who?")])
    assert caught.value.field == "history[1].role"
    with pytest.raises(InvalidSearch):
        parse_history([("user", "  ")])
    with pytest.raises(InvalidSearch):
        parse_history([("user", "x")] * 51)
    turns = (Turn("user", "a" * 10), Turn("assistant", "b" * 10), Turn("user", "c" * 10))
    assert within_budget(turns, 25) == turns[1:] and within_budget(turns, 30) == turns
    assert without_model("and for part-time staff?", turns) == "cccccccccc and for part-time staff?"
    assert condensed('Standalone query: "leave days for part-time staff"\nbecause...', "q") == (
        "leave days for part-time staff"
    )
    assert condensed("  \n", "the question") == "the question"


class StreamingSynthesiser:
    model_id = "fake-llm"
    grades = False

    def __init__(self, pieces: list[str]) -> None:
        self.pieces = pieces
        self.closed = False
        self.history: list = []

    async def synthesise(self, question, sources, *, graded=False, history=()):
        return Synthesis(text="".join(self.pieces))

    async def stream(self, question, sources, *, history=()):
        self.history.append(list(history))
        try:
            for piece in self.pieces:
                yield piece
            yield Synthesis(text="".join(self.pieces), cost=Cost(items=(CostItem("fake-llm", "chat", 1, 10, 5),)))
        finally:
            self.closed = True


class Condenser:
    def __init__(self) -> None:
        self.seen: list = []

    async def condense(self, question, history):
        self.seen.append((question, list(history)))
        return "refund time for part-time staff", Cost(items=(CostItem("fake-llm", "chat", 1, 20, 6),))


async def test_the_stream_sends_its_head_then_the_text_then_the_whole_answer_with_its_citations():
    index, embedder = FakeIndex(), FakeEmbedder()
    synthesiser = StreamingSynthesiser(["Refunds take ", "thirty days [", "3]", " via form [1]."])
    answers = AnswerUseCases(SearchUseCases(index, embedder), synthesiser)
    events = [e async for e in answers.query_stream(SCOPE, SearchRequest.parse("refund"))]
    head, *deltas, done = events
    assert isinstance(head, Started) and head.source_count == 3 and head.condensed_query == ""
    assert all(isinstance(d, str) and d for d in deltas) and len(deltas) >= 2
    assert isinstance(done, Answer) and done.text == "Refunds take thirty days [1] via form [2]."
    # sources are the hits in order (chunks 1, 3, 2); cited in order of first use: source 3, then 1
    assert [c.chunk.chunk_id for c in done.citations] == [2, 1]
    assert done.cost.items[-1].operation == "chat" and synthesiser.closed


async def test_a_caller_that_goes_away_closes_the_models_stream():
    synthesiser = StreamingSynthesiser(["one ", "two ", "three [1]."])
    answers = AnswerUseCases(SearchUseCases(FakeIndex(), FakeEmbedder()), synthesiser)
    events = answers.query_stream(SCOPE, SearchRequest.parse("refund"))
    assert isinstance(await anext(events), Started) and await anext(events) == "one "
    await events.aclose()
    assert synthesiser.closed


async def test_a_follow_up_is_condensed_by_the_model_and_the_condensed_query_is_what_retrieval_reads():
    embedder, condenser = FakeEmbedder(), Condenser()
    answers = AnswerUseCases(
        SearchUseCases(FakeIndex(), embedder), StreamingSynthesiser(["Thirty days [1]."]), condenser=condenser
    )
    history = (Turn("user", "How long do refunds take?"), Turn("assistant", "Thirty days [1]."))
    answer = await answers.query(SCOPE, SearchRequest.parse("and for part-time staff?"), history)
    assert embedder.texts == ["refund time for part-time staff"]
    assert answer.condensed_query == "refund time for part-time staff" and answer.conversation_note == ""
    assert condenser.seen[0][1] == list(history)
    assert next(i.input_tokens for i in answer.cost.items if i.operation == "chat") == 20


async def test_without_a_model_the_last_earlier_question_is_read_with_the_new_one_and_the_answer_says_so():
    embedder = FakeEmbedder()
    answers = AnswerUseCases(SearchUseCases(FakeIndex(), embedder), ExtractiveSynthesiser())
    history = (Turn("user", "How long do refunds take?"), Turn("assistant", "Thirty days [1]."))
    events = [e async for e in answers.query_stream(SCOPE, SearchRequest.parse("and for staff?"), history)]
    assert embedder.texts == ["How long do refunds take? and for staff?"]
    assert events[0].condensed_query == "How long do refunds take? and for staff?"
    assert events[-1].conversation_note == WITHOUT_MODEL_NOTE
    no_history = await answers.query(SCOPE, SearchRequest.parse("refund"))
    assert no_history.condensed_query == "" and no_history.conversation_note == ""
