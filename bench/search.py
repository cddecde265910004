"""Search benchmarks (not part of the test suite).

``latency``: 100k chunks with clustered random vectors and Zipf-distributed words in a fresh
embedded PostgreSQL; HNSW recall@10 of the vector channel against exact search, unfiltered
and with a corpus filter that keeps 1% of the rows; p50/p95 latency per mode over direct
gRPC; and the REST-through-Envoy path divided by the direct gRPC path, measured in the same
run. Query vectors come from an in-process EmbedQuery server (a lookup, no model), so the
figures are the search service's own.

``eval DIR``: nDCG@10 / Recall@100 / MRR@10 per mode on a BEIR-layout dataset with the real
content-index, embedder and ingest in-process (documents through ingest's IngestTexts), plus every fusion method of
``knowledge_search.domain.fusion`` computed from the same channel results, overall and on the
lexical-led and paraphrased query subsets, so a change to the fusion is measured, not guessed.

    .venv/bin/python bench/search.py latency [--rows 100000] [--queries 200] [--data-dir DIR]
    .venv/bin/python bench/search.py eval tests/data/search_eval
    .venv/bin/python bench/search.py eval --dataset ../shared/datasets/scifact-train --split train \
        --data-dir DIR                     # the dev set; the indexed corpus is kept for the next run
        [--limit 200]                      # the judged documents plus 200 others
        [--baseline]                       # the channels' previous SQL, to compare
        [--backend onnx-int8]              # the embeddings `knowledge up` makes on a CPU (default torch)
        [--stack-dir DIR --tenant T --corpus-name C]   # score the corpus `knowledge eval` indexed through a
                                           # (stopped) `knowledge up` in DIR: the same chunks, the in-process channels
    .venv/bin/python bench/search.py rerank-cost [--dataset DIR]   # the reranker's CPU cost per 100 pairs
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import AsyncExitStack
from pathlib import Path

import asyncpg
import grpc
import httpx
import numpy as np
from knowledge.v1 import common_pb2, embedder_pb2, embedder_pb2_grpc, search_pb2, search_pb2_grpc
from knowledge_runtime.auth import TokenVerifier
from knowledge_runtime.db.embedded import start_embedded
from knowledge_runtime.db.migrate import migrate
from knowledge_runtime.db.pool import Database
from knowledge_runtime.devkeys import ensure_dev_keys, mint_dev_token
from knowledge_runtime.server import GrpcApp, ServiceSpec
from knowledge_search.adapters.postgres import PostgresChunkIndex, scan_settings
from knowledge_search.api.servicer import SearchServicer, service_spec
from knowledge_search.domain.answer import ExtractiveSynthesiser
from knowledge_search.domain.model import Filters
from knowledge_search.usecases import AnswerUseCases, SearchUseCases

DIM = 384
TENANT = "bench"
CORPORA = 100  # one corpus keeps 1% of the rows
MODES = {
    "VECTOR": search_pb2.SEARCH_MODE_VECTOR,
    "LEXICAL": search_pb2.SEARCH_MODE_LEXICAL,
    "HYBRID": search_pb2.SEARCH_MODE_HYBRID,
}


# The channels as they were before the lexeme postings (migration 0022): lexical candidates from
# the GIN index on chunks.lexemes, each candidate's chunk row read and its query lexemes unnested
# from its tsvector; HNSW ef_search raised to the channel depth. Kept as the baseline that
# ``latency`` times in the same run and that ``eval --baseline`` scores.
TODAY_VECTOR_SEARCH = """
WITH nearest AS MATERIALIZED (
    SELECT c.chunk_id, c.embedding <=> $1 AS distance
    FROM chunks c
    WHERE c.tenant_id = $2 {filters}
    ORDER BY c.embedding <=> $1
    LIMIT $3
)
SELECT n.chunk_id, c.document_id, greatest(0.0, least(1.0, 1.0 - n.distance)) AS score
FROM nearest n
JOIN chunks c ON c.chunk_id = n.chunk_id
ORDER BY n.distance, n.chunk_id
"""
TODAY_LEXICAL_SEARCH = """
WITH terms AS (
    SELECT DISTINCT t.lexeme FROM unnest(to_tsvector($1::regconfig, $2)) AS t
),
stats AS (
    SELECT greatest(s.chunk_count, 1)::float8 AS n,
           greatest(s.total_length::float8 / greatest(s.chunk_count, 1), 1.0) AS avgdl
    FROM search_tenant_stats s WHERE s.tenant_id = $3
),
idf AS (
    SELECT t.lexeme,
           ln(1.0 + (st.n - coalesce(l.doc_freq, 0) + 0.5) / (coalesce(l.doc_freq, 0) + 0.5)) AS idf,
           coalesce(l.doc_freq, 0) <= greatest($10, $11 * st.n) AS selective
    FROM terms t
    CROSS JOIN stats st
    LEFT JOIN search_lexeme_stats l ON l.tenant_id = $3 AND l.lexeme = t.lexeme
),
quoted AS (
    SELECT '''' || replace(replace(lexeme, '\\', '\\\\'), '''', '''''') || '''' AS term, selective FROM idf
),
query AS (
    SELECT (CASE WHEN bool_or(selective) THEN string_agg(term, ' | ') FILTER (WHERE selective)
                 ELSE string_agg(term, ' & ') END)::tsquery AS q
    FROM quoted
),
matched AS (
    SELECT c.chunk_id, c.document_id, c.lexemes, c.bm25_length::float8 AS len
    FROM chunks c, query
    WHERE c.tenant_id = $3 AND c.lexemes @@ query.q {filters}
),
scored AS (
    SELECT m.chunk_id, m.document_id,
           sum(i.idf * tf.w * ($4 + 1.0) / (tf.w + $4 * (1.0 - $5 + $5 * m.len / st.avgdl))) AS score
    FROM matched m
    CROSS JOIN stats st
    CROSS JOIN (SELECT array_agg(lexeme) AS lexemes FROM terms) AS qt
    -- Only the query's lexemes of the chunk: deleting from it every lexeme that is not the
    -- query's (all in C) leaves a few entries to unnest instead of the whole tsvector.
    CROSS JOIN LATERAL unnest(ts_delete(m.lexemes, tsvector_to_array(ts_delete(m.lexemes, qt.lexemes)))) AS u
    JOIN idf i ON i.lexeme = u.lexeme
    CROSS JOIN LATERAL (
        SELECT coalesce(sum(CASE wt WHEN 'A' THEN $6 WHEN 'B' THEN $7 WHEN 'C' THEN $8 ELSE 1.0 END), 1.0) AS w
        FROM unnest(u.weights) AS wt
    ) AS tf
    GROUP BY m.chunk_id, m.document_id
    ORDER BY score DESC, m.chunk_id
    LIMIT $9
)
SELECT s.chunk_id, s.document_id, s.score,
       least(1.0, s.score / nullif((SELECT sum(idf) FROM idf), 0)) AS coverage
FROM scored s
ORDER BY s.score DESC, s.chunk_id
"""


class TodayChunkIndex(PostgresChunkIndex):
    """The index as it was: the same ports, the previous queries."""

    async def vector_search(self, tenant, vector, filters, depth):
        from knowledge_search.adapters.postgres import SET_SCAN, _filters, _hits

        predicates, args = _filters(filters, 4)
        async with self._db.transaction() as tx:
            await tx.fetchrow(
                "set_hnsw_scan", SET_SCAN, str(max(self._ef_search, min(depth, 1000))), str(self._max_scan_tuples)
            )
            rows = await tx.fetch(
                "today_vector",
                TODAY_VECTOR_SEARCH.format(filters=predicates),
                np.asarray(vector, dtype=np.float32),
                tenant,
                depth,
                *args,
            )
        return _hits(rows)

    async def lexical_search(self, tenant, text, filters, depth):
        from knowledge_search.adapters.postgres import _filters, _hits

        predicates, args = _filters(filters, 12)
        d, c, b, a = self._bm25.tiers
        rows = await self._db.fetch(
            "today_lexical",
            TODAY_LEXICAL_SEARCH.format(filters=predicates),
            self._bm25.text_config,
            text,
            tenant,
            self._bm25.k1,
            self._bm25.b,
            a / d,
            b / d,
            c / d,
            depth,
            self._bm25.common_min_df,
            self._bm25.common_fraction,
            *args,
        )
        return _hits(rows)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q / 100 * (len(ordered) - 1)))]


def unit(rows: np.ndarray) -> np.ndarray:
    return rows / np.linalg.norm(rows, axis=-1, keepdims=True)


class LookupEmbedder(embedder_pb2_grpc.EmbedderServiceServicer):
    """EmbedQuery answered from a table of precomputed query vectors."""

    def __init__(self, vectors: dict[str, np.ndarray]) -> None:
        self.vectors = vectors

    async def EmbedQuery(self, request, context):
        return embedder_pb2.EmbedQueryResponse(vector=common_pb2.Vector(values=self.vectors[request.query].tolist()))


def embedder_spec(servicer: LookupEmbedder) -> ServiceSpec:
    descriptor = embedder_pb2.DESCRIPTOR.services_by_name["EmbedderService"]
    return ServiceSpec(
        descriptor=descriptor,
        register=lambda s: embedder_pb2_grpc.add_EmbedderServiceServicer_to_server(servicer, s),
        capabilities={m.name: "embed" for m in descriptor.methods},
        unscoped=[m.name for m in descriptor.methods],  # internal, as the real embedder's
    )


async def load_rows(
    admin_url: str, rows: int, rng: np.random.Generator, uniform: bool
) -> tuple[np.ndarray, list[int], list[str]]:
    """Chunks with unit vectors (clustered as real embeddings are, or uniform) and Zipf words;
    a database that already holds them (a kept ``--data-dir``) only gets the same draws again."""
    vocabulary = [f"w{i}" for i in range(20000)]
    noise = rng.standard_normal((rows, DIM)).astype(np.float32) / np.sqrt(DIM)
    if uniform:
        vectors = unit(noise)
    else:
        centres = unit(rng.standard_normal((1000, DIM)).astype(np.float32))
        vectors = unit(centres[rng.integers(0, len(centres), rows)] + noise)  # cosine to the centre ~0.7
    words = np.minimum(rng.zipf(1.3, (rows, 60)), len(vocabulary)) - 1
    connection = await asyncpg.connect(admin_url)
    from pgvector.asyncpg import register_vector

    await register_vector(connection)
    try:
        if await connection.fetchval("SELECT count(*) FROM chunks WHERE tenant_id = $1", TENANT) == rows:
            corpora = [
                r["corpus_id"]
                for r in await connection.fetch(
                    "SELECT corpus_id FROM corpora WHERE tenant_id = $1 ORDER BY corpus_id", TENANT
                )
            ]
            print(f"reusing the {rows} chunks already loaded")
            return vectors, corpora, vocabulary
        await connection.execute("INSERT INTO tenants (tenant_id) VALUES ($1)", TENANT)
        corpora = [
            await connection.fetchval(
                "INSERT INTO corpora (tenant_id, name) VALUES ($1, $2) RETURNING corpus_id", TENANT, f"c{i}"
            )
            for i in range(CORPORA)
        ]
        documents = [
            await connection.fetchval(
                "INSERT INTO documents (tenant_id, corpus_id, filename) VALUES ($1, $2, $3) RETURNING document_id",
                TENANT,
                c,
                f"d{c}.txt",
            )
            for c in corpora
        ]
        await connection.execute("DROP INDEX chunks_embedding_hnsw")
        started = time.perf_counter()
        batch = 10000
        for first in range(0, rows, batch):
            records = []
            for i in range(first, min(rows, first + batch)):
                slot = i % CORPORA
                text = " ".join(vocabulary[w] for w in words[i])
                records.append(
                    (
                        TENANT,
                        corpora[slot],
                        documents[slot],
                        i // CORPORA,
                        text,
                        vectors[i],
                        f'{{"document_id": "{documents[slot]}"}}',
                    )
                )
            await connection.copy_records_to_table(
                "chunks",
                records=records,
                columns=["tenant_id", "corpus_id", "document_id", "chunk_index", "content", "embedding", "metadata"],
            )
        loaded = time.perf_counter() - started
        await connection.execute("SET maintenance_work_mem = '2GB'")
        started = time.perf_counter()
        await connection.execute(
            "CREATE INDEX chunks_embedding_hnsw ON chunks USING hnsw (embedding vector_cosine_ops)"
        )
        built = time.perf_counter() - started
        started = time.perf_counter()
        # What autovacuum does after a bulk insert: the postings' visibility map lets the lexical
        # channel's index-only scans skip the heap.
        await connection.execute("VACUUM ANALYZE chunks")
        await connection.execute("VACUUM ANALYZE search_postings")
        vacuumed = time.perf_counter() - started
        postings = await connection.fetchrow(
            "SELECT count(*) AS n, pg_total_relation_size('search_postings') AS size, "
            "pg_total_relation_size('chunks') AS chunks FROM search_postings"
        )
        print(
            f"loaded {rows} chunks in {loaded:.1f} s (statistics and postings triggers included); "
            f"HNSW built in {built:.1f} s; VACUUM ANALYZE {vacuumed:.1f} s; {postings['n']} postings, "
            f"{postings['size'] / 2**20:.0f} MiB (chunks with their indexes {postings['chunks'] / 2**20:.0f} MiB)"
        )
    finally:
        await connection.close()
    return vectors, corpora, vocabulary


EXACT = """
SELECT chunk_id FROM chunks WHERE tenant_id = $2 {filter}
ORDER BY (embedding <=> $1) + 0 LIMIT $3
"""


async def recall(db: Database, index: PostgresChunkIndex, queries: np.ndarray, corpus: int | None, depth: int) -> float:
    found = []
    for vector in queries:
        filters = Filters(corpus_id=corpus)
        approx = [h.chunk_id for h in await index.vector_search(TENANT, vector, filters, depth)][:10]
        extra = "AND corpus_id = $4" if corpus is not None else ""
        args = [corpus] if corpus is not None else []
        exact = [r["chunk_id"] for r in await db.fetch("exact", EXACT.format(filter=extra), vector, TENANT, 10, *args)]
        found.append(len(set(approx) & set(exact)) / len(exact))
    return statistics.mean(found)


async def forced_hnsw_recall(db: Database, queries: np.ndarray, corpus: int) -> tuple[float, float]:
    """Recall@10 and mean hits of the filtered query when the planner must take the HNSW index
    (no sort allowed), i.e. what pgvector's iterative scan delivers on a selective filter."""
    from knowledge_search.adapters.postgres import SET_SCAN, VECTOR_SEARCH

    found, counts = [], []
    for vector in queries:
        async with db.transaction() as tx:
            await tx.fetchrow("scan", SET_SCAN, "300", "20000")
            await tx.fetchrow("no_sort", "SELECT set_config('enable_sort', 'off', true)")
            rows = await tx.fetch(
                "vector_search", VECTOR_SEARCH.format(filters="AND c.corpus_id = $4"), vector, [TENANT], 300, corpus
            )
        exact = [
            r["chunk_id"]
            for r in await db.fetch("exact", EXACT.format(filter="AND corpus_id = $4"), vector, TENANT, 10, corpus)
        ]
        found.append(len({r["chunk_id"] for r in rows[:10]} & set(exact)) / len(exact))
        counts.append(len(rows))
    return statistics.mean(found), statistics.mean(counts)


async def timed(call, texts: list[str]) -> list[float]:
    durations = []
    for text in texts:
        started = time.perf_counter()
        await call(text)
        durations.append((time.perf_counter() - started) * 1000)
    return durations


def start_envoy(work: Path, search_port: int, keys: Path, http_port: int) -> subprocess.Popen | None:
    envoy = shutil.which("envoy", path=str(Path(sys.executable).parent))
    if envoy is None:
        return None
    from knowledge_gateway.envoy import GatewayConfig, write_config, write_descriptor_set

    config = GatewayConfig(
        listen_host="127.0.0.1",
        listen_port=http_port,
        admin_port=0,
        upstreams={
            "knowledge.v1.SearchService": f"127.0.0.1:{search_port}",
            "knowledge.v1.IngestService": "127.0.0.1:1",
            "knowledge.v1.DocumentsAIService": "127.0.0.1:1",
        },  # not measured here
        jwks_path=keys / "jwks.json",
        issuer="knowledge-dev",
        audience="knowledge",
        descriptor_path=write_descriptor_set(work / "knowledge.pb"),
    )
    path = write_config(config, work / "envoy.json")
    return subprocess.Popen(
        [envoy, "-c", str(path), "--log-level", "error", "--base-id", str(http_port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


async def latency(options: argparse.Namespace) -> None:
    rng = np.random.default_rng(7)
    work = options.data_dir or Path(tempfile.mkdtemp(prefix="search-bench-"))
    pg = start_embedded(work / "pg")
    processes: list[subprocess.Popen] = []
    try:
        await migrate(pg.url(), embedding_dimension=DIM)
        vectors, corpora, vocabulary = await load_rows(pg.url(), options.rows, rng, options.uniform)
        print(
            f"vectors: {'uniform random' if options.uniform else 'clustered random'}, {options.rows} rows, "
            f"{options.queries} queries"
        )
        picks = rng.integers(0, len(vectors), options.queries)
        query_vectors = unit(
            vectors[picks] + 0.5 * rng.standard_normal((options.queries, DIM)).astype(np.float32) / np.sqrt(DIM)
        )
        texts = [
            " ".join(vocabulary[min(int(w), len(vocabulary)) - 1] for w in rng.zipf(1.3, 3)) + f" q{i}"
            for i in range(options.queries)
        ]
        # as the service's bootstrap opens it: the HNSW scan settings are session defaults
        db = await Database.connect(pg.url(user="knowledge_search"), max_size=4, server_settings=scan_settings())
        index = PostgresChunkIndex(db)
        filtered_corpus = corpora[0]
        from knowledge_search.adapters.postgres import SET_SCAN, VECTOR_SEARCH

        async with db.transaction() as tx:
            await tx.fetchrow("scan", SET_SCAN, "300", "20000")
            for label, predicate, args in (
                ("unfiltered", "", []),
                ("1% corpus", "AND c.corpus_id = $4", [filtered_corpus]),
            ):
                plan = await tx.fetch(
                    "explain",
                    "EXPLAIN " + VECTOR_SEARCH.format(filters=predicate),
                    query_vectors[0],
                    [TENANT],
                    300,
                    *args,
                )
                nodes = [r[0].strip() for r in plan if "Scan" in r[0]]
                print(f"plan {label}: {nodes[0] if nodes else plan[0][0]}")
        print(
            f"HNSW recall@10 vs exact (channel depth 300, ef_search 100, iterative scan): "
            f"unfiltered {await recall(db, index, query_vectors[:100], None, 300):.3f}, "
            f"1% corpus filter {await recall(db, index, query_vectors[:100], filtered_corpus, 300):.3f}"
        )
        forced, hits = await forced_hnsw_recall(db, query_vectors[:100], filtered_corpus)
        print(
            f"HNSW recall@10 vs exact, 1% corpus filter forced onto the HNSW index (iterative scan): "
            f"{forced:.3f}, {hits:.0f} of 300 hits returned on average"
        )
        print(
            f"HNSW recall@10 vs exact (depth 10, ef_search 100): "
            f"unfiltered {await recall(db, index, query_vectors[:100], None, 10):.3f}, "
            f"1% corpus filter {await recall(db, index, query_vectors[:100], filtered_corpus, 10):.3f}"
        )

        keys = work / "keys"
        ensure_dev_keys(keys)
        verifier = TokenVerifier.from_file(keys / "jwks.json", issuer="knowledge-dev", audience="knowledge")
        embedder_app = GrpcApp(
            services=[embedder_spec(LookupEmbedder(dict(zip(texts, query_vectors))))], verifier=verifier
        )
        embedder_port = await embedder_app.start()
        from knowledge_search.adapters.embedder import GrpcQueryEmbedder

        embedder = GrpcQueryEmbedder(f"127.0.0.1:{embedder_port}")

        searches = SearchUseCases(index, embedder)
        app = GrpcApp(
            services=[service_spec(SearchServicer(searches, AnswerUseCases(searches, ExtractiveSynthesiser())))],
            verifier=verifier,
        )
        port = await app.start()
        today = SearchUseCases(TodayChunkIndex(db), embedder)
        today_app = GrpcApp(
            services=[service_spec(SearchServicer(today, AnswerUseCases(today, ExtractiveSynthesiser())))],
            verifier=verifier,
        )
        today_port = await today_app.start()
        token = mint_dev_token(keys, tenant=TENANT, capabilities=["search", "embed"], service="bench")
        metadata = [("authorization", f"Bearer {token}")]
        results: dict[str, list[float]] = {}
        print(
            "direct gRPC, top_k 10; 'today' is the channel SQL before the lexeme postings (bench TodayChunkIndex), "
            "timed alternately with the current code in the same run"
        )
        async with (
            grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel,
            grpc.aio.insecure_channel(f"127.0.0.1:{today_port}") as today_channel,
        ):
            stub = search_pb2_grpc.SearchServiceStub(channel)
            today_stub = search_pb2_grpc.SearchServiceStub(today_channel)
            for name, mode in MODES.items():
                for corpus in (None, filtered_corpus):
                    label = f"{name}{' 1% corpus' if corpus else ''}"
                    fields = {"corpus_id": str(corpus)} if corpus else {}
                    calls = {
                        which: (
                            lambda text, s=s, mode=mode, fields=fields: s.Search(
                                search_pb2.SearchRequest(query=text, mode=mode, top_k=10, **fields), metadata=metadata
                            )
                        )
                        for which, s in (("now", stub), ("today", today_stub))
                    }
                    for call in calls.values():
                        await timed(call, texts[:10])  # warm-up
                    now_ms, today_ms = [], []
                    for text in texts:  # alternately, so that load on the machine hits both alike
                        today_ms += await timed(calls["today"], [text])
                        now_ms += await timed(calls["now"], [text])
                    results[label] = now_ms
                    print(
                        f"gRPC {label:<20} p50 {percentile(now_ms, 50):7.2f} ms  p95 {percentile(now_ms, 95):7.2f} ms"
                        f"   today p50 {percentile(today_ms, 50):7.2f} p95 {percentile(today_ms, 95):7.2f}"
                        f"   now/today p50 x{percentile(now_ms, 50) / percentile(today_ms, 50):.2f}"
                        f" p95 x{percentile(now_ms, 95) / percentile(today_ms, 95):.2f}"
                    )
        await today_app.stop()
        http_port = free_port()
        envoy = start_envoy(work, port, keys, http_port)
        if envoy is None:
            print("REST via Envoy: skipped (no envoy binary)")
        else:
            processes.append(envoy)
            base = f"http://127.0.0.1:{http_port}/api/v1/knowledge"
            async with httpx.AsyncClient(timeout=30, headers={"Authorization": f"Bearer {token}"}) as client:
                for _ in range(100):
                    try:
                        await client.post(f"{base}/search", json={"query": texts[0]})
                        break
                    except httpx.HTTPError:
                        await asyncio.sleep(0.1)

                async def rest(text: str) -> None:
                    response = await client.post(
                        f"{base}/search", json={"query": text, "top_k": 10, "mode": "SEARCH_MODE_HYBRID"}
                    )
                    response.raise_for_status()

                await timed(rest, texts[:10])
                rest_ms = await timed(rest, texts)
            grpc_ms = results["HYBRID"]
            print(
                f"REST via Envoy HYBRID      p50 {percentile(rest_ms, 50):7.2f} ms  p95 {percentile(rest_ms, 95):7.2f} ms"
            )
            print(
                f"REST via Envoy / direct gRPC (HYBRID): p50 x{percentile(rest_ms, 50) / percentile(grpc_ms, 50):.2f}, "
                f"p95 x{percentile(rest_ms, 95) / percentile(grpc_ms, 95):.2f}"
            )
        await app.stop()
        await embedder.close()
        await embedder_app.stop()
        await db.close()
    finally:
        for process in processes:
            process.terminate()
            process.wait(timeout=10)
        pg.stop()
        if options.data_dir is None:
            shutil.rmtree(work, ignore_errors=True)


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
):
    """content-index, embedder and ingest in-process (on ``services``), and every dataset document
    ingested once into corpus ``corpus_name`` through IngestTexts, as a user's text is.

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
            lambda role: pg.url(user=f"knowledge_{role}"), token_keys, work, log_level="warning", backend=backend
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
    return addresses["embedder"], token, corpus, by_row


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
) -> None:
    from knowledge_cli.evaluate import Dataset

    dataset = Dataset.load(directory, split=split, limit=limit)
    work = data_dir or Path(tempfile.mkdtemp(prefix="search-eval-"))
    # A kept corpus's vectors are the backend's it was indexed with: its queries must be too.
    marker = work / "embedding-backend"
    if marker.exists() and marker.read_text().strip() != backend:
        raise SystemExit(f"bench eval: {work} was indexed with --backend {marker.read_text().strip()}, not {backend}")
    work.mkdir(parents=True, exist_ok=True)
    marker.write_text(backend + "\n")
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
) -> None:
    from knowledge_cli.evaluate import report, score, unique
    from knowledge_search.adapters.embedder import GrpcQueryEmbedder
    from knowledge_search.domain.fusion import DEFAULT_FUSION, Fusion, FusionMethod, fuse, single_channel
    from knowledge_search.domain.model import Weights
    from knowledge_search.usecases import CHANNEL_DEPTH

    address, token, corpus, by_row = await prepare(dataset, pg, work, keys, services, corpus_name, tenant, backend)
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
        f"k={DEFAULT_FUSION.k}; embeddings {backend}\n{table}"
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    lat = commands.add_parser("latency")
    lat.add_argument("--rows", type=int, default=100_000)
    lat.add_argument("--queries", type=int, default=200)
    lat.add_argument("--uniform", action="store_true", help="uniform random vectors (HNSW's worst case)")
    lat.add_argument("--data-dir", type=Path, help="keep the loaded chunks here and reuse them on the next run")
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
        help="the embedder's backend (default torch; onnx-int8 is what `knowledge up` runs on a CPU)",
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
            )
        )


if __name__ == "__main__":
    main()
