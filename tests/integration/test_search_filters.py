"""Filters inside both retrieval channels, over real PostgreSQL and a real search gRPC server:
a filter matching 1% of a corpus still fills top_k in every mode (a filter applied after the
channels' depth would leave most of it empty), every operator and built-in field selects what
it says, and a malformed filter is INVALID_ARGUMENT naming its column, before anything is
embedded. Query and chunk vectors come from one word-hashing function (tests/support/hashing.py)."""

from __future__ import annotations

import json

import asyncpg
import grpc
import pytest
from knowledge.v1 import search_pb2, search_pb2_grpc
from knowledge_runtime.costs import Cost
from knowledge_runtime.db.pool import Database
from knowledge_runtime.server import GrpcApp
from knowledge_search.adapters.memory_cache import TtlCache
from knowledge_search.adapters.postgres import PostgresChunkIndex
from knowledge_search.api.servicer import SearchServicer, service_spec
from knowledge_search.domain.answer import ExtractiveSynthesiser
from knowledge_search.domain.model import EmbeddedQuery, SearchRequest
from knowledge_search.usecases import AnswerUseCases, SearchUseCases
from pgvector import Vector
from pgvector.asyncpg import register_vector

from tests.support.hashing import hashed_vector
from tests.support.rpc import auth, error_info

pytestmark = pytest.mark.integration

TENANT = "t-filters"
DOCUMENTS = 30
CHUNKS_PER_DOCUMENT = 100  # 3,000 chunks; bucket 7 is 1% of them
WORDS = ["falcon", "harbour", "ledger", "orchid", "tundra", "violin", "quartz", "meadow"]


class Hashing:
    def __init__(self) -> None:
        self.calls = 0

    async def embed_query(self, tenant: str, text: str) -> EmbeddedQuery:
        self.calls += 1
        return EmbeddedQuery(vector=hashed_vector(text).tolist(), warnings=(), cost=Cost())


async def seed(admin_url: str, writer_url: str) -> None:
    admin = await asyncpg.connect(admin_url)
    writer = await asyncpg.connect(writer_url)
    await register_vector(writer)
    try:
        await admin.execute("INSERT INTO tenants (tenant_id) VALUES ($1) ON CONFLICT DO NOTHING", TENANT)
        corpus = await admin.fetchval(
            "INSERT INTO corpora (tenant_id, name) VALUES ($1, 'filters') RETURNING corpus_id", TENANT
        )
        for d in range(DOCUMENTS):
            metadata = {"team": "blue" if d % 2 else "red", "year": 2020 + d % 5}
            document_id = await admin.fetchval(
                "INSERT INTO documents (tenant_id, corpus_id, filename, mime_type, state, document_ref, metadata, "
                "create_time) VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb, $8::text::timestamptz) RETURNING document_id",
                TENANT,
                corpus,
                f"report-{d}.pdf",
                "application/pdf" if d % 3 else "text/plain",
                "SEARCHABLE" if d != 29 else "FAILED",
                f"projects/{42 if d < 10 else 7}/report-{d}.pdf",
                json.dumps(metadata),
                f"2026-01-{d % 28 + 1:02d}T00:00:00Z",
            )
            rows = []
            for c in range(CHUNKS_PER_DOCUMENT):
                n = d * CHUNKS_PER_DOCUMENT + c
                content = f"falcon report {WORDS[n % 8]} {WORDS[(n // 8) % 8]} {WORDS[(n // 64) % 8]} item {n}"
                chunk_metadata = {**metadata, "bucket": n % 100, "tags": ["even" if n % 2 == 0 else "odd"]}
                chunk_metadata |= {"document_id": str(document_id), "chunk_index": c, "section": f"part {c % 3}"}
                rows.append((c, content, Vector(hashed_vector(content)), json.dumps(chunk_metadata)))
            await writer.execute(
                "INSERT INTO chunks (tenant_id, corpus_id, document_id, chunk_index, section, content, embedding, "
                "metadata) SELECT $1, $2, $3, u.i, 'part', u.content, u.embedding, u.metadata::jsonb "
                "FROM unnest($4::int[], $5::text[], $6::vector[], $7::text[]) AS u(i, content, embedding, metadata)",
                TENANT,
                corpus,
                document_id,
                [r[0] for r in rows],
                [r[1] for r in rows],
                [r[2] for r in rows],
                [r[3] for r in rows],
            )
        await admin.execute("ANALYZE chunks")
    finally:
        await admin.close()
        await writer.close()


@pytest.fixture(scope="module")
async def search(migrated_pg, verifier):
    await seed(migrated_pg.url(), migrated_pg.url(user="knowledge_ingest"))
    db = await Database.connect(migrated_pg.url(user="knowledge_search"))
    embedder = Hashing()
    searches = SearchUseCases(PostgresChunkIndex(db), embedder)
    app = GrpcApp(
        services=[service_spec(SearchServicer(searches, AnswerUseCases(searches, ExtractiveSynthesiser())))],
        verifier=verifier,
    )
    port = await app.start()
    async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
        yield search_pb2_grpc.SearchServiceStub(channel), db, embedder
    await app.stop()
    await db.close()


async def chunk_metadata(db: Database, results) -> list[dict]:
    rows = await db.fetch(
        "t", "SELECT metadata FROM chunks WHERE chunk_id = ANY($1::bigint[])", [int(r.chunk_id) for r in results]
    )
    return [json.loads(r["metadata"]) for r in rows]


@pytest.mark.parametrize(
    "mode", [search_pb2.SEARCH_MODE_HYBRID, search_pb2.SEARCH_MODE_VECTOR, search_pb2.SEARCH_MODE_LEXICAL]
)
async def test_a_filter_matching_1_percent_still_fills_top_k(search, make_token, mode):
    stub, db, _ = search
    reply = await stub.Search(
        search_pb2.SearchRequest(query="falcon report orchid", top_k=10, mode=mode, filter="metadata.bucket = 7"),
        metadata=auth(make_token(TENANT)),
    )
    assert len(reply.results) == 10
    assert {m["bucket"] for m in await chunk_metadata(db, reply.results)} == {7}


@pytest.mark.parametrize(
    ("text", "holds"),
    [
        (
            'metadata.team = "blue" AND metadata.bucket IN (3, 4)',
            lambda m, d: m["team"] == "blue" and m["bucket"] in (3, 4),
        ),
        ("metadata.year >= 2023 AND metadata.bucket < 2", lambda m, d: m["year"] >= 2023 and m["bucket"] < 2),
        ('metadata.tags:"even" AND metadata.bucket = 10', lambda m, d: m["bucket"] == 10),
        ('NOT metadata.team = "red" AND metadata.bucket = 11', lambda m, d: m["team"] == "blue" and m["bucket"] == 11),
        ('document_ref = "projects/42/*" AND metadata.bucket = 12', lambda m, d: d < 10 and m["bucket"] == 12),
        ('filename = "report-3.pdf"', lambda m, d: d == 3),
        ('mime_type = "text/plain" AND metadata.bucket = 13', lambda m, d: d % 3 == 0 and m["bucket"] == 13),
        ('create_time < "2026-01-03T00:00:00Z"', lambda m, d: d % 28 < 2),
        ('state = "FAILED"', lambda m, d: d == 29),
        (
            'metadata.section = "part 1" AND metadata.bucket = 13',
            lambda m, d: m["section"] == "part 1" and m["bucket"] == 13,
        ),
        ("metadata.missing:*", lambda m, d: False),
    ],
)
async def test_each_operator_and_built_in_field_selects_what_it_says(search, make_token, text, holds):
    stub, db, _ = search
    reply = await stub.Search(
        search_pb2.SearchRequest(query="falcon report", top_k=100, filter=text), metadata=auth(make_token(TENANT))
    )
    assert reply.results or text == "metadata.missing:*"
    for metadata in await chunk_metadata(db, reply.results):
        document = int(metadata["document_id"]) - int(await first_document(db))
        assert holds(metadata, document), (text, metadata)


async def first_document(db: Database) -> int:
    return await db.fetchval(
        "t", "SELECT min(document_id) FROM documents WHERE tenant_id = $1 AND filename LIKE 'report-%'", TENANT
    )


@pytest.mark.parametrize(
    ("text", "column"),
    [
        ("metadata.year >", 15),  # ends too early
        ("metadata.year = 2024 AND (", 26),
        ("metadata.year ~ 2024", 15),  # no such operator
        ('owner = "ana"', 1),  # an unknown field
        ('metadata.team = "blue" AND filename > "a"', 28),  # a range over text
        ('state = "DONE"', 1),  # not a state
    ],
)
async def test_a_malformed_filter_is_invalid_argument_at_its_column_before_any_embedding(
    search, make_token, text, column
):
    stub, _, embedder = search
    calls = embedder.calls
    for call, request in (
        (stub.Search, search_pb2.SearchRequest(query="falcon", filter=text)),
        (stub.Query, search_pb2.QueryRequest(query="falcon", filter=text)),
        (stub.SearchDocuments, search_pb2.SearchDocumentsRequest(query="falcon", filter=text)),
        (stub.GetContext, search_pb2.GetContextRequest(query="falcon", filter=text)),
    ):
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await call(request, metadata=auth(make_token(TENANT)))
        info = error_info(caught.value)
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert (info.reason, info.metadata["field"], info.metadata["column"]) == (
            "FILTER_INVALID",
            "filter",
            str(column),
        )
        assert f"column {column}" in caught.value.details()
    assert embedder.calls == calls


async def test_query_context_and_the_agent_tool_read_through_the_filter(search, make_token):
    stub, db, _ = search
    metadata, text = auth(make_token(TENANT)), "metadata.bucket = 21"
    answer = await stub.Query(search_pb2.QueryRequest(query="falcon report", filter=text), metadata=metadata)
    tool = await stub.SearchDocuments(
        search_pb2.SearchDocumentsRequest(query="falcon report", top_k=5, filter=text), metadata=metadata
    )
    context = await stub.GetContext(search_pb2.GetContextRequest(query="falcon report", filter=text), metadata=metadata)
    chunk_ids = [c.chunk_id for c in answer.citations] + [e.chunk_id for e in context.context.evidence]
    assert chunk_ids and tool.result_count == 5
    rows = await db.fetch(
        "t", "SELECT metadata FROM chunks WHERE chunk_id = ANY($1::bigint[])", [int(c) for c in chunk_ids]
    )
    assert {json.loads(r["metadata"])["bucket"] for r in rows} == {21}


async def test_the_answer_cache_keys_on_the_filter(search, make_token, verifier):
    _, db, embedder = search
    cached = SearchUseCases(PostgresChunkIndex(db), embedder, cache=TtlCache(ttl_s=600))
    scope = verifier.verify(make_token(TENANT))
    plain = await cached.search(scope, SearchRequest.parse("falcon report meadow", top_k=10))
    narrowed = await cached.search(
        scope, SearchRequest.parse("falcon report meadow", top_k=10, filter_text="metadata.bucket = 8")
    )
    buckets = {
        json.loads(r["metadata"])["bucket"]
        for r in await db.fetch(
            "t",
            "SELECT metadata FROM chunks WHERE chunk_id = ANY($1::bigint[])",
            [h.chunk.chunk_id for h in narrowed.hits],
        )
    }
    assert buckets == {8} and len(narrowed.hits) == 10
    assert [h.chunk.chunk_id for h in plain.hits] != [h.chunk.chunk_id for h in narrowed.hits]
