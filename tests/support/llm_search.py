"""A real gRPC search whose answers come from a real chat-completions server (llama.cpp in the
tests), over real PostgreSQL, with the query's vector fixed at the embedder's port: what the LLM
tests of search share."""

from __future__ import annotations

import asyncpg
import grpc
from knowledge.v1 import search_pb2_grpc
from knowledge_runtime.costs import Cost
from knowledge_runtime.db.pool import Database
from knowledge_runtime.server import GrpcApp
from knowledge_search.adapters.llm import ChatCompletionsSynthesiser
from knowledge_search.adapters.postgres import PostgresChunkIndex, PostgresCostLedger
from knowledge_search.api.servicer import SearchServicer, service_spec
from knowledge_search.domain.model import EmbeddedQuery
from knowledge_search.usecases import AnswerUseCases, SearchUseCases
from pgvector.asyncpg import register_vector

from tests.support.db import TEST_DIMENSION

MAX_TOKENS = 24  # few tokens: the contract, not the prose, is under test
CHUNKS = [
    "Employees book train travel for trips under four hours.",
    "Expense receipts are submitted within thirty days through the finance portal.",
]


class FixedEmbedder:
    """The query's vector at the embedder's port (the model is not what this tests)."""

    async def embed_query(self, tenant, text):
        return EmbeddedQuery(vector=[0.1] * TEST_DIMENSION, warnings=(), cost=Cost())


async def seed(pg, tenant: str) -> dict[int, str]:
    """Two chunks of one document; their ids -> contents."""
    admin = await asyncpg.connect(pg.url())
    writer = await asyncpg.connect(pg.url(user="knowledge_ingest"))
    await register_vector(writer)
    chunks = {}
    try:
        await admin.execute("INSERT INTO tenants (tenant_id) VALUES ($1)", tenant)
        corpus = await admin.fetchval(
            "INSERT INTO corpora (tenant_id, name) VALUES ($1, 'handbook') RETURNING corpus_id", tenant
        )
        document = await admin.fetchval(
            "INSERT INTO documents (tenant_id, corpus_id, filename, state) VALUES ($1, $2, 'travel.txt', 'SEARCHABLE') "
            "RETURNING document_id",
            tenant,
            corpus,
        )
        for index, content in enumerate(CHUNKS):
            chunk_id = await writer.fetchval(
                "INSERT INTO chunks (tenant_id, corpus_id, document_id, chunk_index, content, embedding, metadata) "
                "VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING chunk_id",
                tenant,
                corpus,
                document,
                index,
                content,
                [0.1] * TEST_DIMENSION,
                f'{{"document_id": "{document}"}}',
            )
            chunks[chunk_id] = content
    finally:
        await admin.close()
        await writer.close()
    return chunks


class Search:
    """A real gRPC search whose answers come from the chat-completions server at ``url``."""

    def __init__(self, pg, verifier, url: str, model: str, max_tokens: int = MAX_TOKENS) -> None:
        self.pg, self.verifier, self.url, self.model = pg, verifier, url, model
        self.max_tokens = max_tokens

    async def __aenter__(self) -> Search:
        self.db = await Database.connect(self.pg.url(user="knowledge_search"))
        self.llm = ChatCompletionsSynthesiser(
            self.url, self.model, max_tokens=self.max_tokens, timeout_s=120, price_input_per_1k=1.0
        )
        answers = AnswerUseCases(
            SearchUseCases(PostgresChunkIndex(self.db), FixedEmbedder()),
            self.llm,
            ledger=PostgresCostLedger(self.db),
            condenser=self.llm,
        )
        self.app = GrpcApp(services=[service_spec(SearchServicer(answers.searcher, answers))], verifier=self.verifier)
        port = await self.app.start()
        self.channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
        self.stub = search_pb2_grpc.SearchServiceStub(self.channel)
        return self

    async def __aexit__(self, *exc) -> None:
        await self.channel.close()
        await self.app.stop()
        await self.llm.close()
        await self.db.close()
