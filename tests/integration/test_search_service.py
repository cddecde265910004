"""The search service over gRPC on real PostgreSQL: BM25, fusion, isolation, banner, answers.

Query vectors come over gRPC from an EmbedQuery server in this process that hashes words
into 384 dimensions (so cosine follows word overlap), behind the real token checks; the
chunks' vectors come from the same function.
"""

from __future__ import annotations

import json
import re

import asyncpg
import grpc
import pytest
from knowledge.v1 import common_pb2, embedder_pb2, embedder_pb2_grpc, search_pb2, search_pb2_grpc
from knowledge_runtime.db.pool import Database
from knowledge_runtime.server import GrpcApp, ServiceSpec
from knowledge_search.adapters.embedder import GrpcQueryEmbedder
from knowledge_search.adapters.postgres import PostgresChunkIndex, PostgresCostLedger
from knowledge_search.api.servicer import SearchServicer, service_spec
from knowledge_search.domain.answer import ExtractiveSynthesiser
from knowledge_search.domain.fusion import Fusion, FusionMethod
from knowledge_search.domain.relevance import Thresholds
from knowledge_search.usecases import AnswerUseCases, SearchUseCases

from tests.support.hashing import hashed_vector

pytestmark = pytest.mark.integration


class HashingEmbedder(embedder_pb2_grpc.EmbedderServiceServicer):
    async def EmbedQuery(self, request, context):
        return embedder_pb2.EmbedQueryResponse(
            vector=common_pb2.Vector(values=hashed_vector(request.query).tolist()),
            cost=common_pb2.Cost(currency="USD", items=[common_pb2.CostItem(model_id="hashing", operation="embed")]),
        )


FILLER = "general staff information about the office and the usual working arrangements "

# (tenant, corpus name, filename, [(section, content)])
DOCS = [
    (
        "acme",
        "handbook",
        "travel.pdf",
        [
            (
                "Travel policy",
                "Employees book train travel for trips under four hours. The travel policy applies to all staff.",
            ),
            (
                "Expenses",
                "Submit expense receipts within thirty days through the finance portal. Policy exceptions need approval.",
            ),
        ],
    ),
    (
        "acme",
        "handbook",
        "zeppelin.pdf",
        [
            ("Airships", "The zeppelin policy covers sightseeing flights booked by the events team."),
        ],
    ),
    (
        "acme",
        "handbook",
        "policies.pdf",
        [
            ("General", "This policy document lists every policy. Policy owners review each policy yearly."),
            ("Security policy", "Badges must be worn visibly. The security policy is owned by facilities."),
        ],
    ),
    (
        "acme",
        "handbook",
        "lengths.txt",
        [
            ("", "quokka sighting report"),
            ("", "quokka " + FILLER * 12),
            ("Quokka", FILLER[:60]),
            ("", "a quokka " + FILLER[:52]),
        ],
    ),
    (
        "acme",
        "archive",
        "old.txt",
        [
            ("Old travel policy", "Until 2019 employees could book flights for any trip."),
        ],
    ),
    (
        "globex",
        "handbook",
        "travel.pdf",
        [
            (
                "Travel policy",
                "Employees book train travel for trips under four hours. The travel policy applies to all staff.",
            ),
            ("Secret", "The globex quokka launch plan is confidential."),
        ],
    ),
]


async def seed(admin_url: str, writer_url: str) -> dict:
    """Documents as an admin; chunks through ingest's role (their only writer), lexemes by the trigger."""
    admin = await asyncpg.connect(admin_url)
    writer = await asyncpg.connect(writer_url)
    from pgvector.asyncpg import register_vector

    await register_vector(writer)
    ids: dict = {"corpora": {}, "documents": {}, "chunks": {}}
    try:
        for tenant, corpus, filename, chunks in DOCS:
            await admin.execute("INSERT INTO tenants (tenant_id) VALUES ($1) ON CONFLICT DO NOTHING", tenant)
            key = (tenant, corpus)
            if key not in ids["corpora"]:
                ids["corpora"][key] = await admin.fetchval(
                    "INSERT INTO corpora (tenant_id, name) VALUES ($1, $2) RETURNING corpus_id", tenant, corpus
                )
            document_id = await admin.fetchval(
                "INSERT INTO documents (tenant_id, corpus_id, filename, state) VALUES ($1, $2, $3, 'SEARCHABLE') "
                "RETURNING document_id",
                tenant,
                ids["corpora"][key],
                filename,
            )
            ids["documents"][(tenant, filename, corpus)] = document_id
            for index, (section, content) in enumerate(chunks):
                chunk_id = await writer.fetchval(
                    "INSERT INTO chunks (tenant_id, corpus_id, document_id, chunk_index, section, page, content, "
                    "embedding, metadata) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING chunk_id",
                    tenant,
                    ids["corpora"][key],
                    document_id,
                    index,
                    section,
                    index + 1,
                    content,
                    hashed_vector(f"{section} {content}"),
                    f'{{"document_id": "{document_id}"}}',
                )
                ids["chunks"][(tenant, filename, index)] = chunk_id
    finally:
        await admin.close()
        await writer.close()
    return ids


@pytest.fixture(scope="module")
async def stack(migrated_pg, verifier, make_service_token):
    ids = await seed(migrated_pg.url(), migrated_pg.url(user="knowledge_ingest"))
    embedder_servicer = HashingEmbedder()
    embedder_app = GrpcApp(
        services=[
            ServiceSpec(
                descriptor=embedder_pb2.DESCRIPTOR.services_by_name["EmbedderService"],
                register=lambda s: embedder_pb2_grpc.add_EmbedderServiceServicer_to_server(embedder_servicer, s),
                capabilities={
                    m.name: "embed" for m in embedder_pb2.DESCRIPTOR.services_by_name["EmbedderService"].methods
                },
                unscoped=[m.name for m in embedder_pb2.DESCRIPTOR.services_by_name["EmbedderService"].methods],
            )
        ],
        verifier=verifier,
    )
    embedder_port = await embedder_app.start()
    db = await Database.connect(migrated_pg.url(user="knowledge_search"))
    embedder = GrpcQueryEmbedder(
        f"127.0.0.1:{embedder_port}", token_for=lambda tenant: make_service_token(tenant, ["embed"])
    )
    # RRF here, so the fused scores can be checked against their formula; the default fusion is
    # measured in test_search_eval.py and bench/search.py eval.
    searches = SearchUseCases(
        PostgresChunkIndex(db),
        embedder,
        Thresholds(high_top=0.6, high_mean=0.3, moderate_top=0.3),
        fusion=Fusion(FusionMethod.RRF),
    )
    answers = AnswerUseCases(searches, ExtractiveSynthesiser(), ledger=PostgresCostLedger(db))
    app = GrpcApp(services=[service_spec(SearchServicer(searches, answers))], verifier=verifier)
    port = await app.start()
    yield {"address": f"127.0.0.1:{port}", "ids": ids, "db": db, "pg": migrated_pg}
    await app.stop()
    await embedder.close()
    await embedder_app.stop()
    await db.close()


@pytest.fixture
async def stub(stack):
    async with grpc.aio.insecure_channel(stack["address"]) as channel:
        yield search_pb2_grpc.SearchServiceStub(channel)


@pytest.fixture
def acme(make_token):
    return [("authorization", f"Bearer {make_token('acme')}")]


def corpus(stack, tenant="acme", name="handbook") -> str:
    return str(stack["ids"]["corpora"][(tenant, name)])


async def search(stub, metadata, query, mode=search_pb2.SEARCH_MODE_HYBRID, **fields):
    return await stub.Search(search_pb2.SearchRequest(query=query, mode=mode, **fields), metadata=metadata)


async def test_a_rare_term_outranks_a_common_one(stub, acme, stack):
    reply = await search(stub, acme, "policy zeppelin", search_pb2.SEARCH_MODE_LEXICAL, corpus_id=corpus(stack))
    assert reply.results[0].chunk_id == str(stack["ids"]["chunks"][("acme", "zeppelin.pdf", 0)])
    # "policy" alone appears in many chunks: each of them scores below the one rare-term chunk.
    assert all(r.lexical_rank == i for i, r in enumerate(reply.results, start=1))
    assert all(r.score == 0.0 and r.vector_rank == 0 for r in reply.results)


async def test_length_normalisation_and_heading_weight(stub, acme, stack):
    reply = await search(stub, acme, "quokka", search_pb2.SEARCH_MODE_LEXICAL, corpus_id=corpus(stack))
    chunk = {r.chunk_id: r.lexical_rank for r in reply.results}
    ids = {i: str(stack["ids"]["chunks"][("acme", "lengths.txt", i)]) for i in range(4)}
    # The heading match ranks first; among body matches the short chunk beats the long one.
    assert chunk[ids[2]] == 1
    assert chunk[ids[0]] < chunk[ids[3]] < chunk[ids[1]]
    # globex's quokka chunk never shows up for acme.
    assert len(reply.results) == 4


async def test_hybrid_fusion_order_and_score_contract(stub, acme, stack):
    hybrid = await search(stub, acme, "train travel policy for staff", corpus_id=corpus(stack), top_k=20)
    vector = await search(
        stub, acme, "train travel policy for staff", search_pb2.SEARCH_MODE_VECTOR, corpus_id=corpus(stack), top_k=20
    )
    cosine = {r.chunk_id: r.score for r in vector.results}
    fused = [r.fused_score for r in hybrid.results]
    assert fused == sorted(fused, reverse=True)
    # fused = 1/(60 + vector_rank) + w/(60 + lexical_rank), one lexical weight w (here 1) for the query.
    lexical_weights = {
        round((r.fused_score - (1 / (60 + r.vector_rank) if r.vector_rank else 0)) * (60 + r.lexical_rank), 9)
        for r in hybrid.results
        if r.lexical_rank
    }
    assert len(lexical_weights) == 1 and 0 < lexical_weights.pop() <= 1
    for r in hybrid.results:
        if not r.lexical_rank:
            assert r.fused_score == pytest.approx(1 / (60 + r.vector_rank))
        assert r.document_id and r.filename and r.content
        assert r.score == (pytest.approx(cosine[r.chunk_id]) if r.vector_rank else 0.0)
        assert 0.0 <= r.score <= 1.0
    top = hybrid.results[0]
    assert top.chunk_id == str(stack["ids"]["chunks"][("acme", "travel.pdf", 0)])
    assert top.vector_rank == 1 and top.lexical_rank == 1


async def test_request_weights_move_the_order(stub, acme, stack):
    query = "policy owners review yearly"
    lexical_heavy = await search(
        stub, acme, query, corpus_id=corpus(stack), weights=search_pb2.ChannelWeights(vector=0.0, lexical=1.0)
    )
    vector_heavy = await search(
        stub, acme, query, corpus_id=corpus(stack), weights=search_pb2.ChannelWeights(vector=1.0, lexical=0.0)
    )
    lexical = await search(stub, acme, query, search_pb2.SEARCH_MODE_LEXICAL, corpus_id=corpus(stack))
    vector = await search(stub, acme, query, search_pb2.SEARCH_MODE_VECTOR, corpus_id=corpus(stack))
    # A zero-weight channel decides nothing: the order is the other channel's own.
    lexical_ids = [r.chunk_id for r in lexical.results]
    assert [r.chunk_id for r in lexical_heavy.results][: len(lexical_ids)] == lexical_ids
    assert [r.chunk_id for r in vector_heavy.results] == [r.chunk_id for r in vector.results]
    assert all(r.fused_score == pytest.approx(1 / (60 + r.vector_rank)) for r in vector_heavy.results)
    lexical_weights = {round(r.fused_score * (60 + r.lexical_rank), 9) for r in lexical_heavy.results if r.lexical_rank}
    assert len(lexical_weights) == 1 and 0 < lexical_weights.pop() <= 1
    assert all(r.fused_score == 0.0 for r in lexical_heavy.results if not r.lexical_rank)


async def test_tenants_and_filters_isolate_results(stub, acme, stack, make_token):
    everything = await search(stub, acme, "quokka launch plan confidential", top_k=100)
    documents = {r.document_id for r in everything.results}
    assert str(stack["ids"]["documents"][("globex", "travel.pdf", "handbook")]) not in documents
    assert "confidential" not in " ".join(r.content for r in everything.results)
    archive = await search(stub, acme, "travel policy", corpus_id=corpus(stack, name="archive"))
    assert {r.corpus_id for r in archive.results} == {corpus(stack, name="archive")}
    one_doc = str(stack["ids"]["documents"][("acme", "policies.pdf", "handbook")])
    filtered = await search(stub, acme, "policy", document_id=one_doc)
    assert filtered.results and {r.document_id for r in filtered.results} == {one_doc}
    for bad in (
        {"corpus_id": corpus(stack, "globex")},
        {"corpus_id": "nope"},
        {"document_id": str(stack["ids"]["documents"][("globex", "travel.pdf", "handbook")])},
    ):
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await search(stub, acme, "travel", **bad)
        assert caught.value.code() == grpc.StatusCode.NOT_FOUND


@pytest.mark.parametrize(
    "fields",
    [
        {"query": "  "},
        {"query": "x", "top_k": -1},
        {"query": "x", "mode": 9},
        {"query": "x", "weights": search_pb2.ChannelWeights(vector=-1)},
    ],
)
async def test_bad_input_is_invalid_argument(stub, acme, fields):
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.Search(search_pb2.SearchRequest(**fields), metadata=acme)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT


async def test_a_token_without_search_is_refused(stub, make_token):
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.Search(
            search_pb2.SearchRequest(query="travel"),
            metadata=[("authorization", f"Bearer {make_token('acme', ['corpus.read'])}")],
        )
    assert caught.value.code() == grpc.StatusCode.PERMISSION_DENIED


async def test_search_documents_renders_every_chunk_in_full(stub, acme, stack):
    reply = await stub.SearchDocuments(
        search_pb2.SearchDocumentsRequest(query="quokka sighting", corpus_id=corpus(stack), top_k=5), metadata=acme
    )
    long_chunk = "quokka " + FILLER * 12
    assert reply.result_count == 5
    assert reply.text.startswith("Relevance: ")
    assert long_chunk in reply.text  # never truncated
    lines = [line for line in reply.text.splitlines() if line.startswith("[Source ")]
    assert len(lines) == 5
    assert re.match(r"\[Source 1 \(document_id=\d+\), relevance: \d+%, vec#(\d+|-)/lex#(\d+|-)\]", lines[0])


async def test_query_answers_with_citations_of_real_chunks(stub, acme, stack):
    reply = await stub.Query(
        search_pb2.QueryRequest(query="How do employees book train travel?", corpus_id=corpus(stack)), metadata=acme
    )
    assert reply.answer and reply.citations
    markers = {int(n) for n in re.findall(r"\[(\d+)\]", reply.answer)}
    assert markers == set(range(1, len(reply.citations) + 1))
    async with stack["db"].pool.acquire() as connection:
        for citation in reply.citations:
            row = await connection.fetchrow(
                "SELECT document_id, content FROM chunks WHERE chunk_id = $1 AND tenant_id = 'acme'",
                int(citation.chunk_id),
            )
            assert row is not None and str(row["document_id"]) == citation.document_id
            for part in citation.excerpt.split(" ... "):
                assert " ".join(part.split()) in " ".join(row["content"].split())
    assert "train" in reply.answer


async def test_query_about_absent_content_answers_nothing(stub, acme, stack):
    reply = await stub.Query(search_pb2.QueryRequest(query="volcanic basalt geology"), metadata=acme)
    assert reply.answer == "" and not reply.citations
    assert reply.relevance in (search_pb2.RELEVANCE_LOW, search_pb2.RELEVANCE_UNSPECIFIED)


async def test_query_through_a_chat_completions_model(stack):
    from knowledge_runtime.auth import scope_from_claims
    from knowledge_search.adapters.llm import ChatCompletionsSynthesiser
    from knowledge_search.domain.anonymise import Anonymiser
    from knowledge_search.domain.model import SearchRequest

    from tests.support.chat import ChatServer

    db = stack["db"]
    searches = SearchUseCases(PostgresChunkIndex(db), _DirectEmbedder(), Thresholds(0.6, 0.3, 0.05))
    question = "Can jane@acme.example book train travel, asks Mia?"
    with ChatServer("Yes, <EMAIL_1> books trains for short trips [2]. Also [1] and [12].") as server:
        llm = ChatCompletionsSynthesiser(server.url, "local-model", price_input_per_1k=1.0)
        answers = AnswerUseCases(searches, llm, Anonymiser(["Mia"]), PostgresCostLedger(db))
        try:
            answer = await answers.query(
                scope_from_claims({"tenant": "acme", "capabilities": ["search"], "scope": "/"}),
                SearchRequest.parse(question, corpus_id=corpus(stack), top_k=4),
            )
        finally:
            await llm.close()
    sent = json.dumps(server.requests[0])
    assert "jane@acme.example" not in sent and "Mia" not in sent and "<EMAIL_1>" in sent and "<NAME_1>" in sent
    assert answer.text == "Yes, jane@acme.example books trains for short trips [1]. Also [2] and."
    assert len(answer.citations) == 2
    assert all(c.chunk.document_id in stack["ids"]["documents"].values() for c in answer.citations)
    async with db.pool.acquire() as connection:
        recorded = await connection.fetchval(
            "SELECT count(*) FROM cost_records WHERE tenant_id = 'acme' AND model = 'local-model' AND tokens = 150"
        )
    assert recorded >= 1


class _DirectEmbedder:
    async def embed_query(self, tenant, text):
        from knowledge_search.domain.model import EmbeddedQuery

        return EmbeddedQuery(vector=hashed_vector(text).tolist())


async def test_common_terms_score_but_do_not_select(stack):
    from knowledge_search.domain.model import Filters
    from knowledge_search.domain.retrieval import Bm25

    ids = stack["ids"]
    filters = Filters(corpus_id=ids["corpora"][("acme", "handbook")])
    # With a low cut-off "policy" is common in acme: only chunks holding "zeppelin" are candidates.
    pruned = PostgresChunkIndex(stack["db"], bm25=Bm25(common_fraction=0.2, common_min_df=0))
    hits = await pruned.lexical_search("acme", "policy zeppelin", filters, 300)
    assert [h.chunk_id for h in hits] == [ids["chunks"][("acme", "zeppelin.pdf", 0)]]
    exact = await PostgresChunkIndex(stack["db"]).lexical_search("acme", "policy zeppelin", filters, 300)
    assert len(exact) > 1 and exact[0].score == pytest.approx(hits[0].score)  # the same BM25 score
    # When every term is common (here both "policy" and "travel"), a candidate must hold them all.
    strict = PostgresChunkIndex(stack["db"], bm25=Bm25(common_fraction=0.1, common_min_df=0))
    both = await strict.lexical_search("acme", "policy travel", filters, 300)
    contents = [c.content.lower() for c in (await strict.chunks("acme", [h.chunk_id for h in both])).values()]
    assert both and len(contents) == len(both) and all("travel" in c and "polic" in c for c in contents)
    assert ids["chunks"][("acme", "zeppelin.pdf", 0)] not in {h.chunk_id for h in both}


async def test_search_reads_content_for_the_returned_top_k_only(stack):
    """The channels ship ids and scores; content is read once, for the top_k returned."""
    from knowledge_runtime.auth import Scope
    from knowledge_search.domain.model import ChannelHit, Filters, SearchRequest

    class Counting(PostgresChunkIndex):
        def __init__(self, db) -> None:
            super().__init__(db)
            self.read: list[int] = []

        async def chunks(self, tenant, chunk_ids, owners=(), principals=()):
            found = await super().chunks(tenant, chunk_ids, owners, principals)
            self.read.append(len(found))
            return found

    index = Counting(stack["db"])
    filters = Filters(corpus_id=stack["ids"]["corpora"][("acme", "handbook")])
    vector = await index.vector_search("acme", hashed_vector("travel policy staff").tolist(), filters, 300)
    lexical = await index.lexical_search("acme", "travel policy staff", filters, 300)
    assert len(vector) > 3 and len(lexical) > 3
    assert all(type(h) is ChannelHit for h in (*vector, *lexical)) and not hasattr(ChannelHit, "content")
    scope = Scope(tenant="acme", capabilities=frozenset({"search"}), scope_claim="/")
    outcome = await SearchUseCases(index, _DirectEmbedder()).search(
        scope, SearchRequest.parse("travel policy staff", top_k=3, corpus_id=str(filters.corpus_id))
    )
    assert index.read == [3] and len(outcome.hits) == 3 and all(h.chunk.content for h in outcome.hits)
    # Another tenant's chunk ids read nothing.
    assert await index.chunks("globex", [h.chunk.chunk_id for h in outcome.hits]) == {}
