"""Retrieval quality figures: nDCG@k, Recall@k and MRR@k of one ranking against its judgements.

One place for them: ``knowledge eval`` scores a running stack with them from the client side, and
ingest's model-change gate scores both models' answers with them on the service side, so the
figures an operator measures and the ones the gate compares are computed the same way.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence

NDCG_AT = 10
RECALL_AT = 100
MRR_AT = 10


def ndcg(ranked: Sequence[str], relevant: Mapping[str, int], k: int = NDCG_AT) -> float:
    gains = [relevant.get(doc, 0) for doc in ranked[:k]]
    dcg = sum((2**g - 1) / math.log2(i + 2) for i, g in enumerate(gains))
    ideal = sorted(relevant.values(), reverse=True)[:k]
    idcg = sum((2**g - 1) / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


def recall(ranked: Sequence[str], relevant: Mapping[str, int], k: int = RECALL_AT) -> float:
    return len(set(ranked[:k]) & set(relevant)) / len(relevant) if relevant else 0.0


def mrr(ranked: Sequence[str], relevant: Mapping[str, int], k: int = MRR_AT) -> float:
    """The reciprocal rank of the first relevant document within the first ``k`` (0 when none)."""
    for i, doc in enumerate(ranked[:k], start=1):
        if relevant.get(doc, 0) > 0:
            return 1.0 / i
    return 0.0


def unique(ids: Iterable[str]) -> list[str]:
    """Chunk hits as a document ranking: each document at its best chunk's place."""
    seen: dict[str, None] = {}
    for value in ids:
        seen.setdefault(value, None)
    return list(seen)
