"""Fusion of the vector and lexical channels, chosen by measurement.

Fusion decides the order only: each result keeps its cosine similarity as its score (0.0
when only the lexical channel found it) and carries both channel ranks and the fused score.
It works on ids and scores (``ChannelHit``); content is read afterwards, for what is returned.

Four methods, each selectable by ``KNOWLEDGE_SEARCH_FUSION`` (``bench/search.py eval``
compares them on the same two channel results; the figures are in bench/RESULTS.md). The
default is ``zscore`` with alpha 0.5 and a coverage gate of 0.6, chosen on the SciFact train
claims: alpha 0.5 is the best plain variant there, and the gate costs it almost nothing (the
best lexical hit of nearly every claim matches most of its idf mass) while it keeps queries that
share few words with their answer from being pulled down by a lexical channel that matched
little, as the repository's small set of paraphrased questions shows.

- ``rrf``: weighted Reciprocal Rank Fusion, ``sum(weight / (k + rank))``; with equal weights
  it is plain RRF (k = 60).
- ``coverage_rrf``: RRF whose lexical weight is scaled by the squared share of the query's
  idf mass that the best lexical hit matched. Tuned on the repository's small set; on a real
  benchmark it lost to plain RRF.
- ``minmax``: a convex combination ``alpha * wv * v + (1 - alpha) * wl * l`` of each
  channel's scores normalised per query to [0, 1] by min-max; a hit a channel did not return
  counts that channel's minimum (0).
- ``zscore``: the same convex combination of per-query z-scores; a hit a channel did not
  return counts that channel's lowest z-score. A channel whose hits have no spread (a sole
  hit, or all scored alike) gives them 1.0 and a missing hit 0, as min-max does.

The convex methods' coverage gate: the lexical share ``1 - alpha`` is scaled by
``min(1, coverage / gate)``, where coverage is the share of the query's idf mass the best
lexical hit matched; so a lexical channel that matched under ``gate`` of the query counts in
proportion (0 turns the gate off).
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from knowledge_search.domain.model import ChannelHit, Ranked, Weights

RRF_K = 60


class FusionMethod(enum.Enum):
    RRF = "rrf"
    COVERAGE_RRF = "coverage_rrf"
    MINMAX = "minmax"
    ZSCORE = "zscore"


@dataclass(frozen=True, slots=True)
class Fusion:
    """How HYBRID fuses: the method, RRF's constant, the convex methods' vector share and their
    coverage gate."""

    method: FusionMethod = FusionMethod.ZSCORE
    k: int = RRF_K
    alpha: float = 0.5
    gate: float = 0.6

    def __post_init__(self) -> None:
        if self.k < 1:
            raise ValueError("the RRF constant k must be >= 1")
        if not 0.0 <= self.alpha <= 1.0:
            raise ValueError("alpha must be in [0, 1]")
        if not 0.0 <= self.gate <= 1.0:
            raise ValueError("the coverage gate must be in [0, 1]")


DEFAULT_FUSION = Fusion()


def best_coverage(lexical: Sequence[ChannelHit]) -> float:
    """The share of the query's idf mass the best lexical hit matched, in [0, 1]."""
    return max((min(1.0, max(0.0, hit.coverage)) for hit in lexical), default=0.0)


def lexical_confidence(lexical: Sequence[ChannelHit]) -> float:
    """How far the lexical channel can be trusted for this query, in [0, 1] (coverage_rrf)."""
    return best_coverage(lexical) ** 2


def coverage_gate(lexical: Sequence[ChannelHit], gate: float) -> float:
    """The convex methods' factor on the lexical share: ``min(1, coverage / gate)``; 1 when off."""
    return 1.0 if gate <= 0 else min(1.0, best_coverage(lexical) / gate)


def _minmax(hits: Sequence[ChannelHit]) -> tuple[dict[int, float], float]:
    if not hits:
        return {}, 0.0
    scores = [hit.score for hit in hits]
    low, high = min(scores), max(scores)
    span = high - low
    return {hit.chunk_id: (hit.score - low) / span if span > 0 else 1.0 for hit in hits}, 0.0


def _zscore(hits: Sequence[ChannelHit]) -> tuple[dict[int, float], float]:
    if not hits:
        return {}, 0.0
    scores = [hit.score for hit in hits]
    mean = sum(scores) / len(scores)
    std = math.sqrt(sum((s - mean) ** 2 for s in scores) / len(scores))
    if std == 0:
        # A sole hit (or hits all scored alike) has no spread to measure: like min-max's 1.0, it
        # counts one unit above a hit the channel did not return, instead of 0 for everything.
        return {hit.chunk_id: 1.0 for hit in hits}, 0.0
    normalised = {hit.chunk_id: (hit.score - mean) / std for hit in hits}
    return normalised, min(normalised.values())


_NORMALISERS: dict[FusionMethod, Callable[[Sequence[ChannelHit]], tuple[dict[int, float], float]]] = {
    FusionMethod.MINMAX: _minmax,
    FusionMethod.ZSCORE: _zscore,
}


def fuse(
    vector: Sequence[ChannelHit],
    lexical: Sequence[ChannelHit],
    weights: Weights,
    top_k: int,
    fusion: Fusion = DEFAULT_FUSION,
) -> list[Ranked]:
    """The ``top_k`` best hits of both channels (each given best first) by ``fusion``."""
    w_vector = 1.0 if weights.vector is None else weights.vector
    w_lexical = 1.0 if weights.lexical is None else weights.lexical
    cosine = {hit.chunk_id: hit.score for hit in vector}
    vector_rank = {hit.chunk_id: rank for rank, hit in enumerate(vector, start=1)}
    lexical_rank = {hit.chunk_id: rank for rank, hit in enumerate(lexical, start=1)}
    coverage = {hit.chunk_id: hit.coverage for hit in lexical}
    documents = {hit.chunk_id: hit.document_id for hit in (*lexical, *vector)}
    fused: dict[int, float] = {}
    if fusion.method in (FusionMethod.RRF, FusionMethod.COVERAGE_RRF):
        if fusion.method is FusionMethod.COVERAGE_RRF:
            w_lexical *= lexical_confidence(lexical)
        for chunk_id, rank in vector_rank.items():
            fused[chunk_id] = fused.get(chunk_id, 0.0) + w_vector / (fusion.k + rank)
        for chunk_id, rank in lexical_rank.items():
            fused[chunk_id] = fused.get(chunk_id, 0.0) + w_lexical / (fusion.k + rank)
    else:
        normalise = _NORMALISERS[fusion.method]
        v, v_missing = normalise(vector)
        lex, l_missing = normalise(lexical)
        a = fusion.alpha * w_vector
        b = (1.0 - fusion.alpha) * w_lexical * coverage_gate(lexical, fusion.gate)
        for chunk_id in documents:
            fused[chunk_id] = a * v.get(chunk_id, v_missing) + b * lex.get(chunk_id, l_missing)
    # Ties (equal fused scores) go to the better cosine, then the older chunk: a stable order.
    ordered = sorted(fused, key=lambda c: (-fused[c], -cosine.get(c, 0.0), c))
    return [
        Ranked(
            chunk_id=chunk_id,
            document_id=documents[chunk_id],
            score=cosine.get(chunk_id, 0.0),
            vector_rank=vector_rank.get(chunk_id, 0),
            lexical_rank=lexical_rank.get(chunk_id, 0),
            fused_score=fused[chunk_id],
            coverage=coverage.get(chunk_id, 0.0),
        )
        for chunk_id in ordered[:top_k]
    ]


def single_channel(hits: Sequence[ChannelHit], *, vector: bool, top_k: int, k: int = RRF_K) -> list[Ranked]:
    """One channel's hits in its own order, with the same score contract as fused results."""
    return [
        Ranked(
            chunk_id=hit.chunk_id,
            document_id=hit.document_id,
            score=hit.score if vector else 0.0,
            vector_rank=rank if vector else 0,
            lexical_rank=0 if vector else rank,
            fused_score=1.0 / (k + rank),
            coverage=0.0 if vector else hit.coverage,
        )
        for rank, hit in enumerate(hits[:top_k], start=1)
    ]
