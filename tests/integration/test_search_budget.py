"""The LLM budget over real PostgreSQL, a real gRPC search and a real chat-completions
server: once the month's spend recorded in cost_records reaches the tenant's budget, answers are
extractive, say why (BUDGET_EXHAUSTED), and the LLM is not called."""

from __future__ import annotations

import uuid

import asyncpg
import grpc
import pytest
from knowledge.v1 import common_pb2, search_pb2, search_pb2_grpc
from knowledge_runtime.costs import Cost
from knowledge_runtime.db.pool import Database
from knowledge_runtime.db.tenant_settings import PostgresLlmBudget
from knowledge_runtime.server import GrpcApp
from knowledge_search.adapters.llm import ChatCompletionsSynthesiser
from knowledge_search.adapters.postgres import PostgresChunkIndex, PostgresCostLedger
from knowledge_search.api.servicer import SearchServicer, service_spec
from knowledge_search.domain.answer import ExtractiveSynthesiser
from knowledge_search.domain.model import EmbeddedQuery
from knowledge_search.usecases import AnswerUseCases, SearchUseCases
from pgvector.asyncpg import register_vector

from tests.support.chat import ChatServer
from tests.support.db import TEST_DIMENSION
from tests.support.rpc import auth

pytestmark = pytest.mark.integration


class FixedEmbedder:
    """The query's vector at the embedder's port (the model is not what this tests)."""

    async def embed_query(self, tenant, text):
        return EmbeddedQuery(vector=[0.1] * TEST_DIMENSION, warnings=(), cost=Cost())


async def seed(pg, tenant: str) -> None:
    admin = await asyncpg.connect(pg.url())
    writer = await asyncpg.connect(pg.url(user="knowledge_ingest"))
    await register_vector(writer)
    try:
        await admin.execute("INSERT INTO tenants (tenant_id) VALUES ($1)", tenant)
        corpus = await admin.fetchval(
            "INSERT INTO corpora (tenant_id, name) VALUES ($1, 'c') RETURNING corpus_id", tenant
        )
        document = await admin.fetchval(
            "INSERT INTO documents (tenant_id, corpus_id, filename, state) VALUES ($1, $2, 'refunds.txt', 'SEARCHABLE') "
            "RETURNING document_id",
            tenant,
            corpus,
        )
        await writer.execute(
            "INSERT INTO chunks (tenant_id, corpus_id, document_id, chunk_index, content, embedding, metadata) "
            "VALUES ($1, $2, $3, 0, 'Refunds take thirty days after the request.', $4, $5)",
            tenant,
            corpus,
            document,
            [0.1] * TEST_DIMENSION,
            f'{{"document_id": "{document}"}}',
        )
        await admin.execute(
            "INSERT INTO tenant_settings (tenant_id, enabled, max_llm_cost_per_month) VALUES ($1, true, 0.05)", tenant
        )
    finally:
        await admin.close()
        await writer.close()


async def test_answers_turn_extractive_once_the_months_llm_budget_is_spent(migrated_pg, verifier, make_token):
    tenant = f"budget-{uuid.uuid4().hex[:8]}"
    await seed(migrated_pg, tenant)
    db = await Database.connect(migrated_pg.url(user="knowledge_search"))
    with ChatServer("Refunds take thirty days [1].") as chat:
        llm = ChatCompletionsSynthesiser(chat.url, "local-model", price_input_per_1k=0.5, price_output_per_1k=1.0)
        answers = AnswerUseCases(
            SearchUseCases(PostgresChunkIndex(db), FixedEmbedder()),
            llm,
            ledger=PostgresCostLedger(db),
            budget=PostgresLlmBudget(db),
            fallback=ExtractiveSynthesiser(),
        )
        app = GrpcApp(services=[service_spec(SearchServicer(answers.searcher, answers))], verifier=verifier)
        port = await app.start()
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                stub = search_pb2_grpc.SearchServiceStub(channel)
                request = search_pb2.QueryRequest(query="refunds")
                first = await stub.Query(request, metadata=auth(make_token(tenant)))
                # 0.09 spent (120 input and 30 output tokens), over the 0.05 budget: the next is extractive
                second = await stub.Query(request, metadata=auth(make_token(tenant)))
        finally:
            await app.stop()
            await llm.close()
    spent = await db.fetchval(
        "s", "SELECT sum(cost) FROM cost_records WHERE tenant_id = $1 AND operation = 'chat'", tenant
    )
    await db.close()
    assert first.answer == "Refunds take thirty days [1]." and first.fallback_reason == 0
    assert float(spent) == pytest.approx(0.09)  # only the first answer called the LLM
    assert len(chat.requests) == 1
    assert second.fallback_reason == common_pb2.REFUSAL_REASON_BUDGET_EXHAUSTED
    assert "extractive" in second.fallback_message and second.citations
    assert "Refunds take thirty days" in second.answer
