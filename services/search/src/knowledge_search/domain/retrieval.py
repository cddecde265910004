"""What each retrieval channel defaults to: its depth, the HNSW scan's bounds, BM25's parameters.

Plain values, so the settings (which may depend on the domain only) and the adapters that
apply them share one default each.
"""

from __future__ import annotations

from dataclasses import dataclass

CHANNEL_DEPTH = 300  # candidates each channel returns before fusion
# hnsw.ef_search: the channel's depth, which the iterative scan reads anyway. At a million chunks
# recall@10 against exact search was 0.993 at 300 against 0.884 at 100, at the same median time;
# at 100k chunks 300 cost what 100 did (bench/RESULTS.md).
DEFAULT_EF_SEARCH = CHANNEL_DEPTH
DEFAULT_MAX_SCAN_TUPLES = 20000  # hnsw.max_scan_tuples of an iterative (filtered) scan
RERANK_WINDOW = 50  # fused results the reranking model re-scores


@dataclass(frozen=True, slots=True)
class Bm25:
    """BM25 parameters and the tsvector weight tiers (D, C, B, A).

    A term's frequency counts each position by its tier relative to body text (D): a section
    heading's word (A) counts twice a body word. Chosen on the SciFact train claims over ratios
    of 1, 2, 3, 4, 10 and 20 (the earlier default): 2 gave the best HYBRID and LEXICAL 0.694
    against 0.679 at 20 (the service README's table); k1 0.9 / 1.5 and b 0.5 moved HYBRID by at
    most 0.3 points, so k1 and b keep the usual 1.2 and 0.75."""

    k1: float = 1.2
    b: float = 0.75
    tiers: tuple[float, float, float, float] = (0.5, 0.5, 0.5, 1.0)
    text_config: str = "english"
    common_fraction: float = 0.05
    common_min_df: int = 1000
