"""``bench/search.py latency``: recall and latency of the search service on 100k chunks (or ``--rows``).

Clustered random vectors and Zipf-distributed words in a fresh embedded PostgreSQL; HNSW
recall@10 of the vector channel against exact search, unfiltered and with a corpus filter that
keeps 1% of the rows; p50/p95 latency per mode over direct gRPC, now and with the baseline
SQL; p95 per mode with a metadata filter that keeps 1% of the rows (``metadata.bucket = 7``)
beside the unfiltered p95, timed alternately in the same run (held to at most 1.5x); HYBRID p95
with documents' access lists on beside off, at 1,000 groups and a token in 20 of them
(``search_access``, held to at most 1.5x where a quarter of the documents is restricted); and the
REST-through-Envoy path divided by the direct gRPC path, measured in the same run.
``--ef-sweep`` instead measures, for each ``hnsw.ef_search`` given, recall@10 against exact
search and the vector channel's latency at its depth, the trade a deployment sets with
``SEARCH_HNSW_EF_SEARCH``; ``--lexical-fractions`` the lexical channel alone per BM25
``common_fraction``, with what each value changes in the results.
Query vectors come from an in-process EmbedQuery server (a lookup, no model), so the figures
are the search service's own. Also the database's size (the chunks' heap, the HNSW index, the
postings) and the memory of PostgreSQL and of this process; ``--halfvec`` stores the vectors in
half precision (pgvector's halfvec) to measure that where full precision does not fit.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import subprocess
import sys
import tempfile
import time
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
from knowledge_search.domain.retrieval import CHANNEL_DEPTH, DEFAULT_EF_SEARCH
from knowledge_search.usecases import AnswerUseCases, SearchUseCases
from search_access import TARGET_RATIO as ACCESS_TARGET_RATIO
from search_access import WithoutAccessLists, access_list_latency, token_groups
from search_common import DIM, TENANT, TodayChunkIndex, percentile
from search_sweeps import ef_sweep, exact_top10, forced_hnsw_recall, lexical_fractions, lexical_versus, recall

CORPORA = 100  # one corpus keeps 1% of the rows
DOCUMENTS_PER_CORPUS = 20  # 2,000 documents: 50 chunks each at 100k rows
BUCKETS = 100  # metadata.bucket takes 100 values, spread across corpora: one keeps 1% of the rows
METADATA_FILTER = "metadata.bucket = 7"  # the 1% metadata filter (served by the GIN index on chunks.metadata)
TARGET_RATIO = 1.5  # the filtered p95 over the unfiltered p95 this benchmark is held to
MODES = {
    "VECTOR": search_pb2.SEARCH_MODE_VECTOR,
    "LEXICAL": search_pb2.SEARCH_MODE_LEXICAL,
    "HYBRID": search_pb2.SEARCH_MODE_HYBRID,
}


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


BATCH_ROWS = 10_000  # rows drawn, built and copied at a time: memory stays flat at any --rows


def drawn(first: int, count: int, uniform: bool, centres: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows ``first..first+count``: unit vectors (clustered as real embeddings are, or uniform) and
    60 Zipf word ids each; the same draws for the same rows on every run (a seed per batch)."""
    rng = np.random.default_rng([7, first])
    noise = rng.standard_normal((count, DIM)).astype(np.float32) / np.sqrt(DIM)
    vectors = noise if uniform else centres[rng.integers(0, len(centres), count)] + noise  # cosine to the centre ~0.7
    return unit(vectors), rng.zipf(1.3, (count, 60))


async def load_rows(
    admin_url: str,
    rows: int,
    rng: np.random.Generator,
    uniform: bool,
    *,
    queries: int,
    halfvec: bool,
    maintenance_work_mem: str,
    hnsw: tuple[int, int] | None = None,
) -> tuple[np.ndarray, list[int], list[str]]:
    """Chunks with unit vectors and Zipf words, drawn a batch at a time; a database that already
    holds them (a kept ``--data-dir``) is reused. Returned: the vectors of ``queries`` rows picked
    at random (each query is drawn near one), the corpora, the vocabulary."""
    vocabulary = [f"w{i}" for i in range(20000)]
    centres = unit(rng.standard_normal((1000, DIM)).astype(np.float32))
    picks = rng.integers(0, rows, queries)
    connection = await asyncpg.connect(admin_url)
    from pgvector.asyncpg import register_vector

    await register_vector(connection)
    try:
        if await connection.fetchval("SELECT count(*) FROM chunks WHERE tenant_id = $1", TENANT) == rows:
            held = await connection.fetchval("SELECT count(*) FROM documents WHERE tenant_id = $1", TENANT)
            if held != CORPORA * DOCUMENTS_PER_CORPUS:
                raise SystemExit(
                    f"the data dir holds {held} documents, from before the access lists were measured "
                    f"({CORPORA * DOCUMENTS_PER_CORPUS} now): load it again into a fresh --data-dir"
                )
            corpora = [
                r["corpus_id"]
                for r in await connection.fetch(
                    "SELECT corpus_id FROM corpora WHERE tenant_id = $1 ORDER BY corpus_id", TENANT
                )
            ]
            print(f"reusing the {rows} chunks already loaded")
            wanted = hnsw_options(hnsw)
            if wanted is not None and wanted != await connection.fetchval(HNSW_OPTIONS):
                await build_hnsw(connection, halfvec, maintenance_work_mem, wanted)
            if not await connection.fetchval(
                "SELECT metadata ? 'bucket' FROM chunks WHERE tenant_id = $1 LIMIT 1", TENANT
            ):
                # a data dir from before the metadata filter was measured: its rows get their bucket
                await connection.execute(
                    f"UPDATE chunks SET metadata = metadata || jsonb_build_object('bucket', (chunk_id * 7919) % {BUCKETS}, "
                    "'file_id', 'f' || (chunk_id / 50)) WHERE tenant_id = $1",
                    TENANT,
                )
                await connection.execute("VACUUM ANALYZE chunks")
            return _picked(picks, rows, uniform, centres), corpora, vocabulary
        await connection.execute("INSERT INTO tenants (tenant_id) VALUES ($1)", TENANT)
        corpora = [
            await connection.fetchval(
                "INSERT INTO corpora (tenant_id, name) VALUES ($1, $2) RETURNING corpus_id", TENANT, f"c{i}"
            )
            for i in range(CORPORA)
        ]
        documents = [
            [
                await connection.fetchval(
                    "INSERT INTO documents (tenant_id, corpus_id, filename) VALUES ($1, $2, $3) RETURNING document_id",
                    TENANT,
                    c,
                    f"d{c}-{n}.txt",
                )
                for n in range(DOCUMENTS_PER_CORPUS)
            ]
            for c in corpora
        ]
        # built after the load, as the schema builds it unless --hnsw says otherwise
        options = hnsw_options(hnsw) or await connection.fetchval(HNSW_OPTIONS)
        await connection.execute("DROP INDEX chunks_embedding_hnsw")
        if halfvec:  # half-precision storage: half the heap and index for the vectors
            await connection.execute(f"ALTER TABLE chunks ALTER COLUMN embedding TYPE halfvec({DIM})")
            await register_vector(connection)
        started = time.perf_counter()
        for first in range(0, rows, BATCH_ROWS):
            count = min(BATCH_ROWS, rows - first)
            vectors, words = drawn(first, count, uniform, centres)
            records = []
            for offset in range(count):
                i = first + offset
                slot = i % CORPORA
                document = documents[slot][(i // CORPORA) % DOCUMENTS_PER_CORPUS]
                text = " ".join(vocabulary[min(int(w), len(vocabulary)) - 1] for w in words[offset])
                records.append(
                    (
                        TENANT,
                        corpora[slot],
                        document,
                        i // CORPORA,
                        text,
                        vectors[offset],
                        # a passage's metadata as the platform index writes it: a file, a page, a
                        # bucket (1%, independent of the corpus) the filter benchmark selects on
                        json.dumps(
                            {
                                "document_id": str(document),
                                "bucket": (i * 7919) % BUCKETS,
                                "file_id": f"f{i // 50}",
                                "page": i % 30,
                            }
                        ),
                    )
                )
            await connection.copy_records_to_table(
                "chunks",
                records=records,
                columns=["tenant_id", "corpus_id", "document_id", "chunk_index", "content", "embedding", "metadata"],
            )
            if first and first % (20 * BATCH_ROWS) == 0:
                rate = (first + count) / (time.perf_counter() - started)
                print(f"  loaded {first + count}/{rows} ({rate:.0f} rows/s)", file=sys.stderr, flush=True)
        loaded = time.perf_counter() - started
        built = await build_hnsw(connection, halfvec, maintenance_work_mem, options)
        started = time.perf_counter()
        # What autovacuum does after a bulk insert: the postings' visibility map lets the lexical
        # channel's index-only scans skip the heap.
        await connection.execute("VACUUM ANALYZE chunks")
        await connection.execute("VACUUM ANALYZE search_postings")
        vacuumed = time.perf_counter() - started
        print(
            f"loaded {rows} chunks in {loaded:.1f} s (statistics and postings triggers included); "
            f"HNSW built in {built:.1f} s; "
            f"VACUUM ANALYZE {vacuumed:.1f} s"
        )
    finally:
        await connection.close()
    return _picked(picks, rows, uniform, centres), corpora, vocabulary


HNSW_OPTIONS = (
    "SELECT coalesce(array_to_string(reloptions, ', '), '') FROM pg_class WHERE relname = 'chunks_embedding_hnsw'"
)


def hnsw_options(hnsw: tuple[int, int] | None) -> str | None:
    return f"m={hnsw[0]}, ef_construction={hnsw[1]}" if hnsw else None


async def build_hnsw(connection: asyncpg.Connection, halfvec: bool, maintenance_work_mem: str, options: str) -> float:
    """Builds the HNSW index WITH ``options`` (as ``reloptions`` reads: 'm=16, ef_construction=128')."""
    await connection.execute("DROP INDEX IF EXISTS chunks_embedding_hnsw")
    await connection.execute(f"SET maintenance_work_mem = '{maintenance_work_mem}'")
    ops = "halfvec_cosine_ops" if halfvec else "vector_cosine_ops"
    started = time.perf_counter()
    await connection.execute(
        f"CREATE INDEX chunks_embedding_hnsw ON chunks USING hnsw (embedding {ops})"
        + (f" WITH ({options})" if options else "")
    )
    built = time.perf_counter() - started
    print(
        f"HNSW ({ops}, {options or 'pgvector defaults'}, maintenance_work_mem {maintenance_work_mem}) built in {built:.1f} s"
    )
    return built


def _picked(picks: np.ndarray, rows: int, uniform: bool, centres: np.ndarray) -> np.ndarray:
    """The vectors of rows ``picks``, in their order, drawn again batch by batch."""
    found: dict[int, np.ndarray] = {}
    for first in sorted({int(p) // BATCH_ROWS * BATCH_ROWS for p in picks}):
        vectors, _ = drawn(first, min(BATCH_ROWS, rows - first), uniform, centres)
        found.update({int(p): vectors[int(p) - first] for p in picks if first <= p < first + BATCH_ROWS})
    return np.stack([found[int(p)] for p in picks])


async def sizes_and_memory(admin_url: str, pg) -> None:
    """What the index costs: the database's size on disk, the chunks' heap and HNSW index, and
    the memory of PostgreSQL (unique per process, plus its shared buffers) and of this process."""
    import resource

    import psutil

    connection = await asyncpg.connect(admin_url)
    try:
        row = await connection.fetchrow(
            "SELECT pg_database_size(current_database()) AS db, pg_table_size('chunks') AS heap, "
            "pg_relation_size('chunks_embedding_hnsw') AS hnsw, pg_indexes_size('chunks') AS indexes, "
            "pg_total_relation_size('search_postings') AS postings, current_setting('shared_buffers') AS buffers"
        )
    finally:
        await connection.close()
    mib = 2**20
    postmaster = psutil.Process(pg.running_pid())
    unique = 0
    for process in [postmaster, *postmaster.children(recursive=True)]:
        try:
            unique += process.memory_full_info().uss
        except (psutil.Error, AttributeError):
            continue
    print(
        f"database {row['db'] / mib:.0f} MiB: chunks heap {row['heap'] / mib:.0f} MiB, HNSW index "
        f"{row['hnsw'] / mib:.0f} MiB (all chunk indexes {row['indexes'] / mib:.0f} MiB), postings "
        f"{row['postings'] / mib:.0f} MiB"
    )
    print(
        f"memory: PostgreSQL {unique / mib:.0f} MiB unique to its processes, shared_buffers {row['buffers']}; "
        f"this process peak {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB; machine "
        f"{psutil.virtual_memory().total / 2**30:.1f} GiB (the HNSW index answers fast while it stays in the page cache)"
    )


async def timed(call, texts: list[str]) -> list[float]:
    durations = []
    for text in texts:
        started = time.perf_counter()
        await call(text)
        durations.append((time.perf_counter() - started) * 1000)
    return durations


async def metadata_filter_latency(port: int, metadata: list, texts: list[str]) -> dict[str, float]:
    """p95 of each mode with the 1% metadata filter beside its unfiltered p95, timed alternately
    query by query in this run (load on the machine hits both alike); the ratios by mode."""
    ratios: dict[str, float] = {}
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        stub = search_pb2_grpc.SearchServiceStub(channel)
        for name, mode in MODES.items():

            def call(filter_text: str, mode: int = mode):
                return lambda query: stub.Search(
                    search_pb2.SearchRequest(query=query, mode=mode, top_k=10, filter=filter_text), metadata=metadata
                )

            unfiltered, filtered = call(""), call(METADATA_FILTER)
            filled = [len((await filtered(text)).results) for text in texts[:10]]  # also the warm-up
            await timed(unfiltered, texts[:10])
            plain_ms, filtered_ms = [], []
            for text in texts:
                plain_ms += await timed(unfiltered, [text])
                filtered_ms += await timed(filtered, [text])
            ratios[name] = percentile(filtered_ms, 95) / percentile(plain_ms, 95)
            print(
                f"gRPC {name:<8} unfiltered p50 {percentile(plain_ms, 50):7.2f} p95 {percentile(plain_ms, 95):7.2f} ms"
                f"   1% metadata filter p50 {percentile(filtered_ms, 50):7.2f} p95 {percentile(filtered_ms, 95):7.2f} ms"
                f"   p95 x{ratios[name]:.2f}   hits per filtered query (top_k 10): min {min(filled)}"
            )
    return ratios


def start_envoy(work: Path, search_port: int, keys: Path, http_port: int) -> subprocess.Popen | None:
    envoy = shutil.which("envoy", path=str(Path(sys.executable).parent))
    if envoy is None:
        return None
    from knowledge_gateway.config import GatewayConfig
    from knowledge_gateway.descriptors import write_descriptor_set
    from knowledge_gateway.envoy import write_config

    config = GatewayConfig(
        listen_host="127.0.0.1",
        listen_port=http_port,
        admin_port=0,
        # Only search is measured: the other public upstreams point nowhere.
        upstreams={"search": f"127.0.0.1:{search_port}", "ingest": "127.0.0.1:1", "documents-ai": "127.0.0.1:1"},
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
        vectors, corpora, vocabulary = await load_rows(
            pg.url(),
            options.rows,
            rng,
            options.uniform,
            queries=options.queries,
            halfvec=options.halfvec,
            maintenance_work_mem=options.maintenance_work_mem,
            hnsw=options.hnsw,
        )
        print(
            f"vectors: {'uniform random' if options.uniform else 'clustered random'}, {options.rows} rows, "
            f"{'half' if options.halfvec else 'full'} precision, {options.queries} queries"
        )
        await sizes_and_memory(pg.url(), pg)
        query_vectors = unit(
            vectors + 0.5 * rng.standard_normal((options.queries, DIM)).astype(np.float32) / np.sqrt(DIM)
        )
        texts = [
            " ".join(vocabulary[min(int(w), len(vocabulary)) - 1] for w in rng.zipf(1.3, 3)) + f" q{i}"
            for i in range(options.queries)
        ]
        exact_cache = options.data_dir / f"exact-top10-{options.queries}.json" if options.data_dir else None
        if options.ef_sweep:
            await ef_sweep(pg.url(user="knowledge_search"), options.ef_sweep, query_vectors, exact_cache)
            return
        if options.lexical_fractions:
            await lexical_fractions(pg.url(user="knowledge_search"), options.lexical_fractions, texts)
            return
        if options.lexical_versus:
            await lexical_versus(pg.url(user="knowledge_search"), options.lexical_versus, texts)
            return
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
                ("1% metadata", "AND (c.metadata @? $4::jsonpath)", ["$.bucket ? (@ == 7)"]),
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
        unfiltered = await exact_top10(db, query_vectors[:100], exact_cache)
        print(
            f"HNSW recall@10 vs exact (channel depth {CHANNEL_DEPTH}, ef_search {DEFAULT_EF_SEARCH}, iterative scan): "
            f"unfiltered {await recall(db, index, query_vectors[:100], None, CHANNEL_DEPTH, unfiltered):.3f}, "
            f"1% corpus filter {await recall(db, index, query_vectors[:100], filtered_corpus, CHANNEL_DEPTH):.3f}"
        )
        forced, hits = await forced_hnsw_recall(db, query_vectors[:100], filtered_corpus)
        print(
            f"HNSW recall@10 vs exact, 1% corpus filter forced onto the HNSW index (iterative scan): "
            f"{forced:.3f}, {hits:.0f} of 300 hits returned on average"
        )
        print(
            f"HNSW recall@10 vs exact (depth 10, ef_search {DEFAULT_EF_SEARCH}): "
            f"unfiltered {await recall(db, index, query_vectors[:100], None, 10, unfiltered):.3f}, "
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
        ratios = await metadata_filter_latency(port, metadata, texts)
        print(
            f"1% metadata filter ({METADATA_FILTER}) p95 / unfiltered p95, same run: "
            + ", ".join(f"{name} x{ratio:.2f}" for name, ratio in ratios.items())
            + f" (target <= {TARGET_RATIO}: {'met' if max(ratios.values()) <= TARGET_RATIO else 'NOT met'})"
        )
        without = SearchUseCases(WithoutAccessLists(db), embedder)
        off_app = GrpcApp(
            services=[service_spec(SearchServicer(without, AnswerUseCases(without, ExtractiveSynthesiser())))],
            verifier=verifier,
        )
        off_port = await off_app.start()
        # the bench's token (its lookup embedder takes service tokens), in TOKEN_GROUPS groups
        grouped = mint_dev_token(
            keys, tenant=TENANT, capabilities=["search", "embed"], service="bench", groups=token_groups()
        )
        shares = await access_list_latency(
            pg.url(), TENANT, port, off_port, [("authorization", f"Bearer {grouped}")], texts, timed, percentile
        )
        await off_app.stop()
        held = next(iter(shares.values()))
        print(
            "access lists p95 on / off (HYBRID, same run): "
            + ", ".join(f"{share:.0%} restricted x{ratio:.2f}" for share, ratio in shares.items())
            + f" (target <= {ACCESS_TARGET_RATIO} at {next(iter(shares)):.0%}: "
            + f"{'met' if held <= ACCESS_TARGET_RATIO else 'NOT met'})"
        )
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
