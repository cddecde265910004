"""``bench/search.py eval``: retrieval quality per mode and per fusion method on a BEIR dataset.

nDCG@10 / Recall@100 / MRR@10 with the real content-index, embedder and ingest in-process
(documents through ingest's IngestTexts), every fusion method of
``knowledge_search.domain.fusion`` computed from the same channel results, overall and on the
lexical-led and paraphrased query subsets.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
import time
from contextlib import AsyncExitStack
from pathlib import Path

import asyncpg
from knowledge_runtime.db.embedded import start_embedded
from knowledge_runtime.db.migrate import migrate
from knowledge_runtime.db.pool import Database
from knowledge_runtime.devkeys import ensure_dev_keys, mint_dev_token
from knowledge_search.adapters.postgres import PostgresChunkIndex, scan_settings
from knowledge_search.domain.model import Filters
from search_common import DIM, TENANT, TodayChunkIndex

ALPHAS = (0.3, 0.4, 0.5, 0.6, 0.7)
GATES = (0.4, 0.5, 0.6, 0.7, 0.8)  # the convex methods' coverage gate (0 is the plain method)
BENCH_TOKEN_TTL_S = 86400


async def prepare(
    dataset,
    pg,
    work: Path,
    token_keys: Path,
    services: AsyncExitStack,
    corpus_name: str = "eval",
    tenant: str = TENANT,
    backend: str = "torch",
    chunking: dict[str, str] | None = None,
    **stack,
):
    """content-index, embedder and ingest in-process (on ``services``), and every dataset document
    ingested once into corpus ``corpus_name`` through IngestTexts, as a user's text is, chunked
    as ``chunking`` (ingest's KNOWLEDGE_CHUNK_* settings; none: its defaults) says. ``stack``: more
    of ``ingest_services``' arguments (``embedder_settings``, ``with_search``). Returned: the
    embedder's address, a token, the corpus, {document id: dataset id} and every service's address.

    A kept ``--data-dir`` holds the indexed corpus: a later run ingests only the documents
    that have no chunks yet, so one slow ingestion serves every comparison.
    """
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    from knowledge.v1 import ingest_pb2
    from knowledge_cli.evaluate import document_text

    from tests.support.eval_stack import ingest_services, ingest_texts

    await migrate(pg.url(), embedding_dimension=DIM)
    addresses = await services.enter_async_context(
        ingest_services(
            lambda role: pg.url(user=role),
            token_keys,
            work,
            log_level="warning",
            backend=backend,
            ingest_settings=chunking,
            **stack,
        )
    )
    # A full ingestion on a loaded machine outlasts the default hour: the first run died polling
    # its jobs with "token expired" after 3,200 of 5,183 documents. Bench tokens live a day.
    token = mint_dev_token(token_keys, tenant=tenant, capabilities=["embed"], service="bench", ttl_s=BENCH_TOKEN_TTL_S)
    admin = await asyncpg.connect(pg.url())
    try:
        await admin.execute("INSERT INTO tenants (tenant_id) VALUES ($1) ON CONFLICT DO NOTHING", tenant)
        corpus = await admin.fetchval(
            "SELECT corpus_id FROM corpora WHERE tenant_id = $1 AND name = $2", tenant, corpus_name
        )
        if corpus is None:
            corpus = await admin.fetchval(
                "INSERT INTO corpora (tenant_id, name) VALUES ($1, $2) RETURNING corpus_id", tenant, corpus_name
            )
        rows = {
            r["filename"].removesuffix(".md"): (r["document_id"], r["chunks"])
            for r in await admin.fetch(
                "SELECT d.document_id, d.filename, (SELECT count(*) FROM chunks c WHERE c.document_id = d.document_id) AS chunks "
                "FROM documents d WHERE d.corpus_id = $1",
                corpus,
            )
        }
    finally:
        await admin.close()
    by_row, todo = {}, []
    for doc_id in dataset.corpus:
        row, chunks = rows.get(doc_id, (None, 0))
        if chunks:
            by_row[row] = doc_id
        else:  # new, or left without chunks by an interrupted run: its content again
            todo.append(
                (
                    doc_id,
                    ingest_pb2.IngestTextRequest(
                        corpus_id=str(corpus),
                        text=document_text(*dataset.corpus[doc_id]),
                        title=f"{doc_id}.md",
                        document_id=str(row) if row is not None else "",
                    ),
                )
            )
    started = time.perf_counter()

    def progress(done: int, total: int) -> None:
        if done % 200 == 0 or done == total:
            rate = done / (time.perf_counter() - started)
            print(
                f"  indexed {done}/{total} ({rate:.1f} docs/s, ETA {(total - done) / rate:.0f} s)",
                file=sys.stderr,
                flush=True,
            )

    if todo:
        upload = mint_dev_token(token_keys, tenant=tenant, capabilities=["document.upload"], ttl_s=BENCH_TOKEN_TTL_S)
        by_row.update(await ingest_texts(addresses["ingest"], upload, todo, progress=progress))
    print(
        f"indexed {len(todo)} documents in {time.perf_counter() - started:.1f} s "
        f"({len(dataset.corpus) - len(todo)} already indexed)",
        file=sys.stderr,
    )
    return addresses["embedder"], token, corpus, by_row, addresses


async def chunk_sizes(admin_url: str, embedder: str, token: str, corpus: int) -> str:
    """The corpus's chunks: how many, and their sizes in the embedding model's tokens (counted
    with the tokenizer the embedder serves) and in characters."""
    import grpc
    import numpy as np
    from knowledge.v1 import embedder_pb2, embedder_pb2_grpc
    from knowledge_runtime.tokens import TokenCounter

    async with grpc.aio.insecure_channel(embedder) as channel:
        replies = [
            reply
            async for reply in embedder_pb2_grpc.EmbedderServiceStub(channel).ReadTokenizer(
                embedder_pb2.ReadTokenizerRequest(), metadata=[("authorization", f"Bearer {token}")]
            )
        ]
    window = replies[0].tokenizer.max_seq_length
    counter = TokenCounter.from_json(b"".join(reply.chunk for reply in replies[1:]).decode())
    admin = await asyncpg.connect(admin_url)
    try:
        contents = [r["content"] for r in await admin.fetch("SELECT content FROM chunks WHERE corpus_id = $1", corpus)]
    finally:
        await admin.close()
    tokens = np.array(counter.sizes(contents) if contents else [0])
    over = int((tokens > window).sum())
    line = (
        f"{len(contents)}, {tokens.mean():.0f} tokens on average (p95 {np.percentile(tokens, 95):.0f}, max "
        f"{tokens.max()}; {over} over the window of {window}), {np.mean([len(c) for c in contents] or [0]):.0f} characters"
    )
    print(f"chunks: {line}", file=sys.stderr)
    return line


async def evaluate(
    directory: Path,
    bm25=None,
    verbose: bool = False,
    *,
    split: str = "test",
    data_dir: Path | None = None,
    ingest_only: bool = False,
    limit: int | None = None,
    baseline: bool = False,
    stack_dir: Path | None = None,
    tenant: str = TENANT,
    corpus_name: str | None = None,
    backend: str = "torch",
    chunking: dict[str, str] | None = None,
) -> None:
    from knowledge_cli.evaluate import Dataset

    dataset = Dataset.load(directory, split=split, limit=limit)
    work = data_dir or Path(tempfile.mkdtemp(prefix="search-eval-"))
    # A kept corpus's vectors are the backend's it was indexed with, its chunks cut as they were
    # then: its queries must be embedded alike, and new documents chunked alike.
    marker, chunks_marker = work / "embedding-backend", work / "chunking"
    chunked = " ".join(f"{k}={v}" for k, v in sorted((chunking or {}).items())) or "defaults"
    if marker.exists() and marker.read_text().strip() != backend:
        raise SystemExit(f"bench eval: {work} was indexed with --backend {marker.read_text().strip()}, not {backend}")
    # A data dir from before chunks were cut in tokens was indexed at 1,500 characters.
    before = chunks_marker.read_text().strip() if chunks_marker.exists() else "KNOWLEDGE_CHUNK_MAX_CHARS=1500"
    if marker.exists() and before != chunked:
        raise SystemExit(f"bench eval: {work} was indexed with chunks cut by {before}, not {chunked}")
    work.mkdir(parents=True, exist_ok=True)
    marker.write_text(backend + "\n")
    chunks_marker.write_text(chunked + "\n")
    # A stopped `knowledge up`'s cluster is <stack dir>/postgres, the bench's own <work>/pg/postgres.
    pg = start_embedded(stack_dir or work / "pg")
    keys = work / "keys"
    ensure_dev_keys(keys)
    try:
        async with AsyncExitStack() as services:
            await _evaluate(
                dataset,
                pg,
                work,
                keys,
                services,
                bm25,
                verbose,
                split=split,
                ingest_only=ingest_only,
                corpus_name=corpus_name or ("eval" if limit is None else f"eval-limit-{limit}"),
                baseline=baseline,
                tenant=tenant,
                backend=backend,
                chunking=chunking,
            )
    finally:
        pg.stop()
        if data_dir is None:
            shutil.rmtree(work, ignore_errors=True)


async def _evaluate(
    dataset,
    pg,
    work: Path,
    keys: Path,
    services: AsyncExitStack,
    bm25,
    verbose: bool,
    *,
    split: str,
    ingest_only: bool,
    corpus_name: str,
    baseline: bool = False,
    tenant: str = TENANT,
    backend: str = "torch",
    chunking: dict[str, str] | None = None,
) -> None:
    from knowledge_cli.evaluate import report, score, unique
    from knowledge_search.adapters.embedder import GrpcQueryEmbedder
    from knowledge_search.domain.fusion import DEFAULT_FUSION, Fusion, FusionMethod, fuse, single_channel
    from knowledge_search.domain.model import Weights
    from knowledge_search.usecases import CHANNEL_DEPTH

    address, token, corpus, by_row, _ = await prepare(
        dataset, pg, work, keys, services, corpus_name, tenant, backend, chunking
    )
    chunks = await chunk_sizes(pg.url(), address, token, corpus)
    if ingest_only:
        return
    db = await Database.connect(pg.url(user="knowledge_search"), server_settings=scan_settings())
    kind = TodayChunkIndex if baseline else PostgresChunkIndex
    chunk_index = kind(db, bm25=bm25) if bm25 else kind(db)
    if baseline:
        print("channels: the baseline SQL (TodayChunkIndex, before the lexeme postings)")
    embedder = GrpcQueryEmbedder(address, token_for=lambda tenant: token)
    variants: dict[str, dict[str, list[str]]] = {}

    def put(name: str, query_id: str, ranked) -> None:
        variants.setdefault(name, {})[query_id] = unique(by_row[r.document_id] for r in ranked)[:100]

    equal = Weights(1.0, 1.0)
    fusions = {
        "rrf k=60 (plain)": (Fusion(FusionMethod.RRF), equal),
        **{
            f"weighted rrf v{wv}/l{wl}": (Fusion(FusionMethod.RRF), Weights(wv, wl))
            for wv, wl in ((1.0, 0.5), (1.0, 0.75), (0.75, 1.0), (0.5, 1.0))
        },
        "coverage rrf (previous default)": (Fusion(FusionMethod.COVERAGE_RRF), equal),
        **{
            f"{method.value} alpha={alpha}": (Fusion(method, alpha=alpha, gate=0.0), equal)
            for method in (FusionMethod.MINMAX, FusionMethod.ZSCORE)
            for alpha in ALPHAS
        },
        **{
            f"{method.value} alpha={alpha} gate={gate}": (Fusion(method, alpha=alpha, gate=gate), equal)
            for method, alpha in ((FusionMethod.MINMAX, 0.4), (FusionMethod.ZSCORE, 0.5))
            for gate in GATES
        },
    }
    filters = Filters(corpus_id=corpus)
    started = time.perf_counter()
    latencies: dict[str, list[float]] = {"VECTOR": [], "LEXICAL": [], "HYBRID": []}
    coverage: dict[str, float] = {}
    for n, (query_id, text) in enumerate(dataset.queries.items(), start=1):
        t0 = time.perf_counter()
        vector_query = (await embedder.embed_query(tenant, text)).vector
        vector = await chunk_index.vector_search(tenant, vector_query, filters, CHANNEL_DEPTH)
        t1 = time.perf_counter()
        lexical = await chunk_index.lexical_search(tenant, text, filters, CHANNEL_DEPTH)
        t2 = time.perf_counter()
        hybrid = fuse(vector, lexical, equal, CHANNEL_DEPTH, DEFAULT_FUSION)
        t3 = time.perf_counter()
        # The channels run one after the other here; the service runs them concurrently.
        latencies["VECTOR"].append((t1 - t0) * 1000)
        latencies["LEXICAL"].append((t2 - t1) * 1000)
        latencies["HYBRID"].append((max(t1 - t0, t2 - t1) + t3 - t2) * 1000)
        coverage[query_id] = max((h.coverage for h in lexical), default=0.0)
        put("VECTOR", query_id, single_channel(vector, vector=True, top_k=CHANNEL_DEPTH))
        put("LEXICAL", query_id, single_channel(lexical, vector=False, top_k=CHANNEL_DEPTH))
        put("HYBRID", query_id, hybrid)
        for name, (fusion, weights) in fusions.items():
            put(name, query_id, fuse(vector, lexical, weights, CHANNEL_DEPTH, fusion))
        if n % 100 == 0:
            print(
                f"  {n}/{len(dataset.queries)} queries ({n / (time.perf_counter() - started):.1f}/s)",
                file=sys.stderr,
                flush=True,
            )
    results = score(dataset, variants, latencies)
    table, _ok = report({m: results[m] for m in ("VECTOR", "LEXICAL", "HYBRID")})
    print(
        f"{len(dataset.corpus)} documents, {len(dataset.queries)} judged queries (qrels/{split}.tsv); "
        f"HYBRID = {DEFAULT_FUSION.method.value} alpha={DEFAULT_FUSION.alpha} gate={DEFAULT_FUSION.gate} "
        f"k={DEFAULT_FUSION.k}; embeddings {backend}; chunks {chunks}\n{table}"
    )
    from knowledge_cli.evaluate import ndcg

    per_query = {m: {q: ndcg(r, dataset.qrels[q]) for q, r in runs.items()} for m, runs in variants.items()}
    # Subsets by what the query is, not by which channel won it: the third of the queries whose
    # best lexical hit matched the largest share of their idf mass (their words are in the
    # corpus: codes, names, terms) and the third with the smallest (paraphrased: the answer
    # uses other words). Subsets chosen by the per-query winner would make that channel an
    # oracle no fusion can reach; they are printed below, as such, for diagnosis only.
    by_coverage = sorted(dataset.queries, key=lambda q: coverage[q])
    third = max(1, len(by_coverage) // 3)
    subsets = {"lexical-led": by_coverage[-third:], "paraphrased": by_coverage[:third]}
    oracle = {
        "LEXICAL won": [q for q in dataset.queries if per_query["LEXICAL"][q] > per_query["VECTOR"][q]],
        "VECTOR won": [q for q in dataset.queries if per_query["VECTOR"][q] > per_query["LEXICAL"][q]],
    }
    subset_means = {
        label: {m: sum(per_query[m][q] for q in chosen) / len(chosen) for m in per_query}
        for label, chosen in subsets.items()
        if chosen
    }
    better = max(results["VECTOR"]["ndcg@10"], results["LEXICAL"]["ndcg@10"])
    header = " | ".join(f"{label} ({len(subsets[label])} q) nDCG@10, gap" for label in subset_means)
    print(f"\n| variant | nDCG@10 | vs better channel | Recall@100 | MRR@10 | {header} |")
    print("|---|---|---|---|---|" + "---|" * len(subset_means))
    for name, values in results.items():
        cells = []
        for label, means in subset_means.items():
            best_here = max(means["VECTOR"], means["LEXICAL"])
            cells.append(f"{means[name]:.4f}, {(means[name] - best_here) * 100:+.1f}")
        print(
            f"| {name} | {values['ndcg@10']:.4f} | {(values['ndcg@10'] - better) * 100:+.2f} | "
            f"{values['recall@100']:.4f} | {values['mrr@10']:.4f} | " + " | ".join(cells) + " |"
        )
    for label, chosen in oracle.items():
        if chosen:
            means = {m: sum(per_query[m][q] for q in chosen) / len(chosen) for m in ("VECTOR", "LEXICAL", "HYBRID")}
            print(
                f"(oracle subset, diagnosis only) {label} on {len(chosen)} queries: "
                + ", ".join(f"{m} {v:.4f}" for m, v in means.items())
            )
    if verbose:
        for query_id in dataset.queries:
            marks = {m: per_query[m][query_id] for m in ("VECTOR", "LEXICAL", "HYBRID")}
            if abs(marks["HYBRID"] - max(marks["VECTOR"], marks["LEXICAL"])) > 1e-9:
                top = {m: variants[m][query_id][:3] for m in ("VECTOR", "LEXICAL", "HYBRID")}
                print(
                    f"  {query_id} {dataset.queries[query_id]!r} relevant={list(dataset.qrels[query_id])} "
                    + " ".join(f"{m[:3]}={marks[m]:.2f}{top[m]}" for m in marks)
                )
    await embedder.close()
    await db.close()
