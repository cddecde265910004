"""The relevance banner: how well the corpus appears to hold what was asked.

Judged from the cosine similarity of the top hit and the mean over the first few hits, so
that one lucky match does not read as HIGH. A lexical-only top hit has no similarity to
judge and says so (LEXICAL_MATCH). LOW tells an agent the content is not there, so it stops
re-searching with other words.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from knowledge_search.domain.model import Relevance, SearchHit

BANNER_TEXT = {
    Relevance.HIGH: "Relevance: HIGH - the documents very likely contain the answer.",
    Relevance.MODERATE: "Relevance: MODERATE - related content was found; the answer may be partial.",
    Relevance.LOW: (
        "Relevance: LOW - the documents do not appear to hold this content; "
        "searching again with other words will not help."
    ),
    Relevance.LEXICAL_MATCH: (
        "Relevance: LEXICAL MATCH - the top result matched words only, not meaning; check that it reads as relevant."
    ),
    Relevance.NONE: "Relevance: NONE - nothing was found.",
}


@dataclass(frozen=True, slots=True)
class Thresholds:
    """Cosine similarity bounds; defaults suit MiniLM/bge-style models (unrelated text sits near 0.1-0.2)."""

    high_top: float = 0.6
    high_mean: float = 0.45
    moderate_top: float = 0.4
    mean_of: int = 5
    lexical_coverage: float = 0.8

    def __post_init__(self) -> None:
        if not 0.0 <= self.moderate_top <= self.high_top <= 1.0 or not 0.0 <= self.high_mean <= 1.0:
            raise ValueError("thresholds must satisfy 0 <= moderate_top <= high_top <= 1 and 0 <= high_mean <= 1")
        if self.mean_of < 1:
            raise ValueError("mean_of must be >= 1")


def banner(hits: Sequence[SearchHit], thresholds: Thresholds) -> Relevance:
    if not hits:
        return Relevance.NONE
    if hits[0].lexical_only:
        return Relevance.LEXICAL_MATCH
    top = max(hit.score for hit in hits)
    head = hits[: thresholds.mean_of]
    mean = sum(hit.score for hit in head) / len(head)
    if top >= thresholds.high_top and mean >= thresholds.high_mean:
        return Relevance.HIGH
    if top >= thresholds.moderate_top or any(hit.coverage >= thresholds.lexical_coverage for hit in head):
        return Relevance.MODERATE
    return Relevance.LOW
