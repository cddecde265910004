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
from knowledge.v1 import ingest_pb2
from knowledge_cli.evaluate import MODES, Dataset, document_text, report, score, unique
from knowledge_runtime.auth import Scope
from knowledge_runtime.db.pool import Database
from knowledge_search.adapters.embedder import GrpcQueryEmbedder
from knowledge_search.adapters.postgres import PostgresChunkIndex
from knowledge_search.domain.model import SearchMode, SearchRequest
from knowledge_search.usecases import SearchUseCases

from tests.support import rpc
from tests.support.eval_stack import ingest_services, ingest_texts

pytestmark = pytest.mark.integration
DATASET = Path(__file__).resolve().parents[1] / "data" / "search_eval"
TENANT = "eval-tenant"


@pytest.fixture(scope="module")
async def services(migrated_pg, keys_dir, tmp_path_factory):
    """The real content-index, embedder and ingest on free ports: documents become chunks the way
    a user's do (ingest is the only writer of chunks)."""
    async with ingest_services(
        lambda role: migrated_pg.url(user=role), keys_dir, tmp_path_factory.mktemp("search-eval")
    ) as addresses:
        yield addresses


@pytest.fixture(scope="module")
def embedder_address(services):
    return services["embedder"]


@pytest.fixture(scope="module")
async def indexed(services, make_token):
    """Each BEIR document sent as a text to ingest (IngestTexts), one document each."""
    dataset = Dataset.load(DATASET)
    token = make_token(TENANT, ["corpus.create", "document.upload"])
    async with grpc.aio.insecure_channel(services["ingest"]) as channel:
        corpus_id = (
            await rpc.IngestStub(channel).CreateCorpus(
                ingest_pb2.CreateCorpusRequest(name="eval"), metadata=[("authorization", f"Bearer {token}")]
            )
        ).corpus_id
    by_row = await ingest_texts(
        services["ingest"],
        token,
        [
            (
                doc_id,
                ingest_pb2.IngestTextRequest(corpus_id=corpus_id, text=document_text(*value), title=f"{doc_id}.md"),
            )
            for doc_id, value in dataset.corpus.items()
        ],
    )
    assert len(by_row) == len(dataset.corpus)
    return dataset, int(corpus_id), by_row


async def test_hybrid_is_not_worse_than_the_better_channel(migrated_pg, indexed, embedder_address, make_service_token):
    dataset, corpus_id, by_row = indexed
    db = await Database.connect(migrated_pg.url(user="knowledge_search"))
    embedder = GrpcQueryEmbedder(embedder_address, token_for=lambda tenant: make_service_token(tenant, ["embed"]))
    searches = SearchUseCases(PostgresChunkIndex(db), embedder)
    scope = Scope(tenant=TENANT, capabilities=frozenset({"search"}), scope_claim="/")
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
