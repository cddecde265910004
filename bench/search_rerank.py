"""``bench/search.py rerank-cost``: the reranker's CPU cost per 100 (query, passage) pairs."""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path


def rerank_cost(options: argparse.Namespace) -> None:
    """Seconds per 100 (query, passage) pairs of the reranker on CPU, with the local cross-encoder."""
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from knowledge_cli.evaluate import Dataset, document_text
    from knowledge_embedder.adapters.torch_reranker import TorchReranker
    from knowledge_embedder.domain.model import RerankPair

    from tests.support.crossencoder import build_cross_encoder

    dataset = Dataset.load(options.dataset, split=options.split)
    work = Path(tempfile.mkdtemp(prefix="rerank-bench-"))
    try:
        model_dir = build_cross_encoder(work / "cross-encoder")
        reranker = TorchReranker("local/cross-encoder", model_dir, device="cpu", max_length=512, batch_size=0)
        passages = [document_text(*value) for value in list(dataset.corpus.values())[:100]]
        query = next(iter(dataset.queries.values()))
        pairs = [RerankPair(query, p) for p in passages]
        tokens = sum(reranker.measure(pairs))
        reranker.score(pairs[:16])  # warm-up
        runs = []
        for _ in range(options.repeat):
            started = time.perf_counter()
            reranker.score(pairs)
            runs.append(time.perf_counter() - started)
        print(
            f"rerank on cpu (torch threads {__import__('torch').get_num_threads()}): {len(pairs)} pairs, "
            f"{tokens / len(pairs):.0f} tokens per pair; median {statistics.median(runs):.2f} s per 100 pairs "
            f"(min {min(runs):.2f}, max {max(runs):.2f}, {options.repeat} runs)"
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)
