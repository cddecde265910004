"""Search benchmarks (not part of the test suite).

``latency``: 100k chunks (``--rows``) with clustered random vectors and Zipf-distributed words in a
fresh embedded PostgreSQL; HNSW recall@10 of the vector channel against exact search, unfiltered
and with a corpus filter that keeps 1% of the rows; the database's size and the memory of
PostgreSQL and the bench; p50/p95 latency per mode over direct gRPC; p95 per mode with a metadata
filter that keeps 1% of the rows beside the unfiltered p95 (same run, held to at most 1.5x); HYBRID
p95 with documents' access lists on beside off, 1,000 groups and a token in 20 of them, at a
quarter and at all of the 2,000 documents restricted (same run, held to at most 1.5x at a
quarter: bench/search_access.py); and the REST-through-Envoy path divided by the direct gRPC
path, measured in the same run. Query
vectors come from an in-process EmbedQuery server (a lookup, no model), so the figures are the
search service's own.

``eval DIR``: nDCG@10 / Recall@100 / MRR@10 per mode on a BEIR-layout dataset with the real
content-index, embedder and ingest in-process (documents through ingest's IngestTexts), plus every fusion method of
``knowledge_search.domain.fusion`` computed from the same channel results, overall and on the
lexical-led and paraphrased query subsets, so a change to the fusion is measured, not guessed.

    .venv/bin/python bench/search.py latency [--rows 100000] [--queries 200] [--data-dir DIR]
        [--halfvec] [--maintenance-work-mem 2GB]   # 1,000,000 rows: see latency --help
    .venv/bin/python bench/search.py eval tests/data/search_eval
    .venv/bin/python bench/search.py eval --dataset ../shared/datasets/scifact-train --split train \
        --data-dir DIR                     # the dev set; the indexed corpus is kept for the next run
        [--limit 200]                      # the judged documents plus 200 others
        [--baseline]                       # the channels' previous SQL, to compare
        [--backend onnx-int8]              # the int8 export's embeddings (default torch)
        [--chunk-window-share 0.5]         # chunks of this share of the model's window, in its tokens (default 0.75)
        [--chunk-max-tokens N | --chunk-max-chars N]   # or of N tokens, or of N characters (before: 1500)
        [--stack-dir DIR --tenant T --corpus-name C]   # score the corpus `knowledge eval` indexed through a
                                           # (stopped) `knowledge up` in DIR: the same chunks, the in-process channels
    .venv/bin/python bench/search.py rerank-cost [--dataset DIR]   # the reranker's CPU cost per 100 pairs
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path

from search_common import TENANT
from search_eval import evaluate
from search_latency import latency
from search_rerank import rerank_cost

LATENCY_SIZES = """What --rows costs, scaled from a 20,000-row run on a busy 2-core machine (estimates,
not measurements; --data-dir keeps the loaded rows for the next run):

  rows       database on disk          HNSW index            load + HNSW build + recall, on 2 cores
  100,000    about 1 GiB               about 200 MiB         5-10 min
  1,000,000  about 10 GiB (postings    about 1.9 GiB         1-2 h: the load 10-30 min, the build
             5 GiB, chunks 2.3 GiB)    (--halfvec: 1.1 GiB)  15-60 min, the exact searches ~5 min

--halfvec saves about 0.8 GiB of index and 0.7 GiB of heap per million rows. The rows are drawn
and copied 10,000 at a time, so the bench itself stays under about 1 GiB at any --rows. The HNSW
build wants its graph in maintenance_work_mem: give 1M full-precision rows 4GB
(--maintenance-work-mem 4GB); with --halfvec the default 2GB is enough. When the graph does not
fit, PostgreSQL says so and the build slows down several times. Searches stay fast while the
index fits in the machine's page cache.
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    lat = commands.add_parser(
        "latency",
        description=LATENCY_SIZES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    lat.add_argument("--rows", type=int, default=100_000)
    lat.add_argument(
        "--halfvec", action="store_true", help="store the vectors in half precision (pgvector halfvec(384))"
    )
    lat.add_argument(
        "--maintenance-work-mem",
        default="2GB",
        help="PostgreSQL's memory for the HNSW build (default 2GB; 4GB for 1M full-precision rows)",
    )
    lat.add_argument("--queries", type=int, default=200)
    lat.add_argument("--uniform", action="store_true", help="uniform random vectors (HNSW's worst case)")
    lat.add_argument("--data-dir", type=Path, help="keep the loaded chunks here and reuse them on the next run")
    lat.add_argument(
        "--hnsw",
        type=lambda text: tuple(int(v) for v in text.split(",")),
        help="M,EF_CONSTRUCTION of the HNSW index (default: the schema's); a kept data dir's index is rebuilt to match",
    )
    lat.add_argument(
        "--ef-sweep",
        type=lambda text: [int(v) for v in text.split(",")],
        help="hnsw.ef_search values (e.g. 100,200,400): recall@10 and VECTOR latency at each, then stop",
    )
    lat.add_argument(
        "--lexical-fractions",
        type=lambda text: [float(v) for v in text.split(",")],
        help="BM25 common_fraction values (e.g. 0.05,0.01): the lexical channel alone at each, then stop",
    )
    lat.add_argument(
        "--lexical-versus",
        metavar="REVISION",
        help="a git revision (e.g. HEAD~2): its lexical statement against the working tree's, in turn, then stop",
    )
    ev = commands.add_parser("eval")
    ev.add_argument("directory", type=Path, nargs="?", help="a BEIR-layout dataset (or --dataset)")
    ev.add_argument("--dataset", type=Path, help="a BEIR-layout dataset, e.g. ../shared/datasets/scifact-train")
    ev.add_argument("--split", default="test", help="qrels/SPLIT.tsv (default test)")
    ev.add_argument("--data-dir", type=Path, help="keep the indexed corpus here and reuse it on the next run")
    ev.add_argument("--limit", type=int, help="only the judged documents plus this many others (a corpus of their own)")
    ev.add_argument("--ingest-only", action="store_true", help="index the corpus into --data-dir and stop")
    ev.add_argument("--tiers", help="BM25 weight tiers D,C,B,A (default the service's)")
    ev.add_argument("--k1", type=float, default=1.2)
    ev.add_argument("--b", type=float, default=0.75)
    ev.add_argument("--baseline", action="store_true", help="score the channels' previous SQL (TodayChunkIndex)")
    ev.add_argument("--verbose", action="store_true", help="print the queries where HYBRID differs")
    ev.add_argument("--stack-dir", type=Path, help="the data dir of a stopped `knowledge up` whose corpus to score")
    ev.add_argument("--tenant", default=TENANT, help=f"the corpus's tenant (default {TENANT})")
    ev.add_argument("--corpus-name", help="the corpus's name (default eval, or eval-limit-N)")
    ev.add_argument(
        "--backend",
        choices=("torch", "onnx-int8"),
        default="torch",
        help="the embedder's backend (default torch; `knowledge up` on a CPU runs the faster of the two)",
    )
    sizes = ev.add_mutually_exclusive_group()
    sizes.add_argument(
        "--chunk-window-share",
        type=float,
        help="ingest's chunks as this share of the model's window, in its tokens (default: ingest's, 0.75)",
    )
    sizes.add_argument("--chunk-max-tokens", type=int, help="ingest's chunks of at most N of the model's tokens")
    sizes.add_argument(
        "--chunk-max-chars", type=int, help="ingest's chunks of at most N characters (1500 before chunks were tokens)"
    )
    rc = commands.add_parser("rerank-cost", help="seconds per 100 pairs of the local cross-encoder on CPU")
    rc.add_argument(
        "--dataset", type=Path, default=Path(__file__).resolve().parents[1] / "tests" / "data" / "search_eval"
    )
    rc.add_argument("--split", default="test")
    rc.add_argument("--repeat", type=int, default=5)
    options = parser.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    if options.command == "latency":
        asyncio.run(latency(options))
    elif options.command == "rerank-cost":
        rerank_cost(options)
    else:
        from knowledge_search.domain.retrieval import Bm25

        tiers = tuple(float(t) for t in options.tiers.split(",")) if options.tiers else Bm25().tiers
        directory = options.dataset or options.directory
        if directory is None:
            parser.error("eval needs a dataset folder (DIR or --dataset)")
        if not (directory / "corpus.jsonl").exists():
            print(f"bench eval: skipped, no dataset at {directory} (see ../shared/datasets/)", file=sys.stderr)
            return
        asyncio.run(
            evaluate(
                directory,
                Bm25(k1=options.k1, b=options.b, tiers=tiers),
                options.verbose,
                split=options.split,
                data_dir=options.data_dir,
                ingest_only=options.ingest_only,
                limit=options.limit,
                baseline=options.baseline,
                stack_dir=options.stack_dir,
                tenant=options.tenant,
                corpus_name=options.corpus_name,
                backend=options.backend,
                chunking=chunking(options),
            )
        )


def chunking(options: argparse.Namespace) -> dict[str, str]:
    """Ingest's chunk settings the options ask for (none: ingest's defaults)."""
    chosen = {
        "KNOWLEDGE_CHUNK_WINDOW_SHARE": options.chunk_window_share,
        "KNOWLEDGE_CHUNK_MAX_TOKENS": options.chunk_max_tokens,
        "KNOWLEDGE_CHUNK_MAX_CHARS": options.chunk_max_chars,
    }
    return {name: str(value) for name, value in chosen.items() if value is not None}


if __name__ == "__main__":
    main()
