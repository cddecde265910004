"""Cited answers: the prompt, the deterministic extractive synthesiser, and citation hygiene.

Whatever wrote the answer (a language model or the extractive synthesiser), ``cite`` keeps
only the ``[n]`` markers that point at a source that was given, renumbers them densely in
order of first use, and returns exactly those sources as the citations, so every ``[n]`` in
an answer refers to a citation that exists.
"""

from __future__ import annotations

import math
import re
from collections.abc import AsyncGenerator, Sequence
from dataclasses import dataclass

from knowledge_runtime.costs import Cost

MAX_EXCERPT_CHARS = 1000
EXTRACTIVE_SENTENCES = 3
_MARKER = re.compile(r"\[(\d+(?:\s*,\s*\d+)*)\]")
_SENTENCE = re.compile(r"(?<=[.!?])\s+|\n+")
_WORD = re.compile(r"\w+", re.UNICODE)
# One quoted sentence of the extractive answer, with its marker (and the space before it).
_QUOTED = re.compile(r".+?\[\d+\](?= |$)")
_STOPWORDS = frozenset(
    [
        "a",
        "an",
        "and",
        "are",
        "as",
        "at",
        "be",
        "by",
        "can",
        "do",
        "does",
        "for",
        "from",
        "has",
        "have",
        "how",
        "i",
        "in",
        "is",
        "it",
        "its",
        "me",
        "my",
        "of",
        "on",
        "or",
        "our",
        "should",
        "that",
        "the",
        "their",
        "there",
        "these",
        "this",
        "to",
        "was",
        "we",
        "were",
        "what",
        "when",
        "where",
        "which",
        "who",
        "why",
        "will",
        "with",
        "you",
        "your",
    ]
)

SYSTEM_PROMPT = (
    "You answer questions using only the numbered sources you are given. After every statement, cite the "
    "source it comes from by its number in square brackets, like [1] or [2]. Do not cite numbers that are "
    "not listed. If the sources do not contain the answer, say that they do not. Placeholders such as "
    "<EMAIL_1> or <NAME_1> stand for hidden values: keep them exactly as written."
)


@dataclass(frozen=True, slots=True)
class Source:
    """One numbered piece of context as the synthesiser sees it."""

    number: int
    title: str
    text: str


@dataclass(frozen=True, slots=True)
class Synthesis:
    text: str
    cost: Cost = Cost()
    excerpts: dict[int, str] | None = None  # source number -> the part the answer quotes


def chat_messages(
    question: str, sources: Sequence[Source], instruction: str = "", history: Sequence[tuple[str, str]] = ()
) -> list[dict[str, str]]:
    """The chat; ``instruction`` is added to the system prompt (e.g. the context's grading);
    ``history``: the conversation's earlier (role, text) turns, before the sources and question."""
    blocks = [f"[{s.number}] {s.title}\n{s.text}" for s in sources]
    user = "Sources:\n\n" + "\n\n".join(blocks) + f"\n\nQuestion: {question}"
    system = f"{SYSTEM_PROMPT} {instruction}" if instruction else SYSTEM_PROMPT
    earlier = [{"role": role, "content": text} for role, text in history]
    return [{"role": "system", "content": system}, *earlier, {"role": "user", "content": user}]


class Citer:
    """The marker rule, for a whole answer or one piece after another: a marker naming a source
    that was given is kept, renumbered 1..m in order of first use (or kept as it is with
    ``renumber=False``); any other is dropped. ``order`` holds the source numbers cited so far."""

    def __init__(self, source_count: int, *, renumber: bool = True) -> None:
        self.order: list[int] = []
        self._count = source_count
        self._renumber = renumber

    def markers(self, text: str) -> str:
        return _MARKER.sub(self._marker, text)

    def _marker(self, match: re.Match[str]) -> str:
        kept = []
        for part in match.group(1).split(","):
            number = int(part)
            if 1 <= number <= self._count:
                if number not in self.order:
                    self.order.append(number)
                kept.append(f"[{self.order.index(number) + 1}]" if self._renumber else f"[{number}]")
        return "".join(kept)


def tidy(text: str) -> str:
    """Spacing left by dropped markers: no doubled blanks, none before punctuation."""
    return re.sub(r"[ \t]+([.,;:])", r"\1", re.sub(r"[ \t]{2,}", " ", text)).strip()


def cite(text: str, source_count: int, *, renumber: bool = True) -> tuple[str, list[int]]:
    """The answer with valid markers renumbered 1..m, and the 1-based source numbers they now name.

    ``renumber=False`` keeps the valid markers' own numbers (the sources are shown as numbered)."""
    citer = Citer(source_count, renumber=renumber)
    return tidy(citer.markers(text)), citer.order


def excerpt(text: str, limit: int = MAX_EXCERPT_CHARS) -> str:
    if len(text) <= limit:
        return text
    cut = text[:limit]
    space = cut.rfind(" ")
    return cut[:space] if space > limit // 2 else cut


def _terms(text: str) -> set[str]:
    return {_stem(w) for w in _WORD.findall(text.lower()) if w not in _STOPWORDS and len(w) > 1}


def _stem(word: str) -> str:
    for suffix in ("ing", "es", "ed", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def _neutral(sentence: str) -> str:
    """A quoted sentence must not carry a marker of its own."""
    return _MARKER.sub(lambda m: f"({m.group(1)})", " ".join(sentence.split()))


class ExtractiveSynthesiser:
    """Quotes the sentences that share the most terms with the question, best sources first.

    Deterministic and local: no model, no cost. Used when no language model is configured.
    """

    model_id = "extractive"
    grades = False  # it quotes: every statement is a source's own words

    def __init__(self, sentences: int = EXTRACTIVE_SENTENCES, max_sentence_chars: int = 600) -> None:
        self._sentences = sentences
        self._max_chars = max_sentence_chars

    async def stream(
        self, question: str, sources: Sequence[Source], *, history: Sequence[object] = ()
    ) -> AsyncGenerator[str | Synthesis]:
        """Its sentences one by one (each with its marker), then the whole synthesis."""
        synthesis = await self.synthesise(question, sources)
        for sentence in _QUOTED.findall(synthesis.text):  # joined, they are the text
            yield sentence
        yield synthesis

    async def synthesise(
        self, question: str, sources: Sequence[Source], *, graded: bool = False, history: Sequence[object] = ()
    ) -> Synthesis:
        wanted = _terms(question)
        scored: list[tuple[float, int, int, str]] = []
        for source in sources:
            for position, sentence in enumerate(s for s in _SENTENCE.split(source.text) if s.strip()):
                sentence = excerpt(sentence.strip(), self._max_chars)
                if len(sentence) < 12:
                    continue
                overlap = len(wanted & _terms(sentence))
                if overlap == 0:
                    continue
                # Shared terms first; a better-ranked source and an earlier sentence break ties.
                score = overlap / math.sqrt(len(wanted) or 1) + 0.1 / source.number
                scored.append((score, source.number, position, sentence))
        if not scored and sources:
            first = next((s.strip() for s in _SENTENCE.split(sources[0].text) if s.strip()), "")
            if first:
                scored.append((0.0, sources[0].number, 0, excerpt(first, self._max_chars)))
        # Sentences well below the best one add noise, not support.
        best = max((item[0] for item in scored), default=0.0)
        kept = [item for item in scored if item[0] >= best / 2]
        chosen = sorted(kept, key=lambda item: (-item[0], item[1], item[2]))[: self._sentences]
        chosen.sort(key=lambda item: (item[1], item[2]))
        excerpts: dict[int, list[str]] = {}
        for _, number, _, sentence in chosen:
            excerpts.setdefault(number, []).append(sentence)
        text = " ".join(f"{_neutral(sentence)} [{number}]" for _, number, _, sentence in chosen)
        return Synthesis(
            text=text,
            excerpts={n: excerpt(" ... ".join(parts)) for n, parts in excerpts.items()},
        )
