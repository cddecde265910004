"""Weighted Reciprocal Rank Fusion of the vector and lexical channels.

Fusion decides the order only: each hit keeps its cosine similarity as its score (0.0 when
only the lexical channel found it) and carries both channel ranks and the fused score,
``sum(weight / (k + rank))`` over the channels that returned it.

Plain RRF trusts both channels equally for every query. Measured on our dataset
(``bench/search.py eval``) that put HYBRID 2.4 nDCG@10 points below VECTOR: for a
paraphrased question the lexical channel's ranks come from generic words, and RRF's bonus
for appearing in both lists lifts those chunks over the right one. So the lexical weight is
scaled by the channel's confidence for this query: the squared share of the query's idf
mass that its best hit matched (``ChannelHit.coverage``). A hit that matches every
informative term (a code, a name) keeps the full weight; ranks built on generic words get
little. That closed the gap to -0.05 points while keeping lexical-led queries at LEXICAL's
level (see the bench's per-regime table).
"""

from __future__ import annotations

from collections.abc import Sequence

from knowledge_search.domain.model import ChannelHit, SearchHit, Weights

RRF_K = 60


def lexical_confidence(lexical: Sequence[ChannelHit]) -> float:
    """How far the lexical channel can be trusted for this query, in [0, 1]."""
    best = max((min(1.0, max(0.0, hit.coverage)) for hit in lexical), default=0.0)
    return best * best


def fuse(
    vector: Sequence[ChannelHit],
    lexical: Sequence[ChannelHit],
    weights: Weights,
    top_k: int,
    k: int = RRF_K,
    *,
    confidence: bool = True,
) -> list[SearchHit]:
    """The ``top_k`` best hits of both channels (each given best first) by weighted RRF."""
    w_vector = 1.0 if weights.vector is None else weights.vector
    w_lexical = 1.0 if weights.lexical is None else weights.lexical
    if confidence:
        w_lexical *= lexical_confidence(lexical)
    fused: dict[int, dict] = {}
    for rank, hit in enumerate(vector, start=1):
        entry = fused.setdefault(hit.chunk.chunk_id, {"chunk": hit.chunk, "score": 0.0, "v": 0, "l": 0, "f": 0.0})
        entry.update(score=hit.score, v=rank)
        entry["f"] += w_vector / (k + rank)
    for rank, hit in enumerate(lexical, start=1):
        entry = fused.setdefault(hit.chunk.chunk_id, {"chunk": hit.chunk, "score": 0.0, "v": 0, "l": 0, "f": 0.0})
        entry["l"] = rank
        entry["c"] = hit.coverage
        entry["f"] += w_lexical / (k + rank)
    # Ties (equal fused scores) go to the better cosine, then the older chunk: a stable order.
    ordered = sorted(fused.values(), key=lambda e: (-e["f"], -e["score"], e["chunk"].chunk_id))
    return [
        SearchHit(
            chunk=e["chunk"],
            score=e["score"],
            vector_rank=e["v"],
            lexical_rank=e["l"],
            fused_score=e["f"],
            coverage=e.get("c", 0.0),
        )
        for e in ordered[:top_k]
    ]


def single_channel(hits: Sequence[ChannelHit], *, vector: bool, top_k: int, k: int = RRF_K) -> list[SearchHit]:
    """One channel's hits in its own order, with the same score contract as fused results."""
    return [
        SearchHit(
            chunk=hit.chunk,
            score=hit.score if vector else 0.0,
            vector_rank=rank if vector else 0,
            lexical_rank=0 if vector else rank,
            fused_score=1.0 / (k + rank),
            coverage=0.0 if vector else hit.coverage,
        )
        for rank, hit in enumerate(hits[:top_k], start=1)
    ]
