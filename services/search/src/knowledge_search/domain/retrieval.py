"""What each retrieval channel defaults to: its depth, the HNSW scan's bounds, BM25's parameters.

Plain values, so the settings (which may depend on the domain only) and the adapters that
apply them share one default each.
"""

from __future__ import annotations

from dataclasses import dataclass

CHANNEL_DEPTH = 300  # candidates each channel returns before fusion
DEFAULT_EF_SEARCH = 100  # hnsw.ef_search; the iterative scan fills a deeper channel past it
DEFAULT_MAX_SCAN_TUPLES = 20000  # hnsw.max_scan_tuples of an iterative (filtered) scan
RERANK_WINDOW = 50  # fused results the reranking model re-scores


@dataclass(frozen=True, slots=True)
class Bm25:
    """BM25 parameters and the tsvector weight tiers (D, C, B, A)."""

    k1: float = 1.2
    b: float = 0.75
    tiers: tuple[float, float, float, float] = (0.05, 0.1, 0.2, 1.0)
    text_config: str = "english"
    common_fraction: float = 0.05
    common_min_df: int = 1000
