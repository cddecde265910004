"""The agent-facing reads on real PostgreSQL through real gRPC servers: ingest writes the
housekeeping entries (system.write, created on demand), search answers GetContext, PrefetchContext
and SearchDocuments; a search whose embedder is stopped degrades instead of failing.

Vectors hash words (tests/support/hashing.py), so cosine follows word overlap without the model.
"""

from __future__ import annotations

import hashlib
import time

import grpc
import pytest
from knowledge.v1 import ingest_pb2, search_pb2, search_pb2_grpc
from knowledge_ingest.domain.extraction import Extracted
from knowledge_runtime.auth import PUBLIC_CAPABILITIES, Scope
from knowledge_runtime.db.pool import Database
from knowledge_runtime.db.reach import PostgresReach
from knowledge_runtime.server import GrpcApp
from knowledge_runtime.system_corpora import SYSTEM_WRITE
from knowledge_search.adapters.embedder import GrpcQueryEmbedder
from knowledge_search.adapters.postgres import PostgresChunkIndex
from knowledge_search.adapters.system_corpora import PostgresSystemCorpora
from knowledge_search.agent_usecases import ContextUseCases, PrefetchUseCases
from knowledge_search.api.servicer import SearchServicer
from knowledge_search.api.servicer import service_spec as search_spec
from knowledge_search.domain.answer import ExtractiveSynthesiser
from knowledge_search.domain.relevance import Thresholds
from knowledge_search.usecases import LEXICAL_ONLY, AnswerUseCases, SearchUseCases

from tests.support import rpc
from tests.support.hashing import HashingChunkEmbedder, embedder_app, hashed_vector
from tests.support.ingest import MemoryBlobs, ingest_app, settings, wait_terminal, wire_fakes
from tests.support.net import free_port

pytestmark = pytest.mark.integration
THRESHOLDS = Thresholds(high_top=0.6, high_mean=0.3, moderate_top=0.2)


def extract(path, filename, mime_type) -> Extracted:
    return Extracted(text=path.read_bytes().decode("utf-8"), page_count=None, extractable=True, format="text")


def search_app(db: Database, embedder_address: str, make_service_token, verifier) -> tuple[GrpcApp, GrpcQueryEmbedder]:
    embedder = GrpcQueryEmbedder(
        embedder_address, timeout_s=5, token_for=lambda tenant: make_service_token(tenant, ["embed"])
    )
    corpora = PostgresSystemCorpora(db)
    searches = SearchUseCases(PostgresChunkIndex(db), embedder, THRESHOLDS, system_corpora=corpora)
    answers = AnswerUseCases(searches, ExtractiveSynthesiser())
    prefetches = PrefetchUseCases(searches, corpora, deadline_s=2.0)
    servicer = SearchServicer(searches, answers, ContextUseCases(answers), prefetches)
    return GrpcApp(services=[search_spec(servicer)], verifier=verifier), embedder


@pytest.fixture(scope="module")
async def stack(migrated_pg, verifier, make_service_token):
    ingest_db = await Database.connect(migrated_pg.url(user="knowledge_ingest"))
    search_db = await Database.connect(migrated_pg.url(user="knowledge_search"))
    admin = await Database.connect(migrated_pg.url())
    ingest = wire_fakes(settings(), ingest_db, MemoryBlobs(admin), HashingChunkEmbedder(), extract)
    ingest = ingest_app(ingest, verifier)
    embedder = embedder_app(verifier)
    embedder_port = await embedder.start()
    live, live_client = search_app(search_db, f"127.0.0.1:{embedder_port}", make_service_token, verifier)
    # The same search with its embedder stopped: nothing listens on that port.
    dead, dead_client = search_app(search_db, f"127.0.0.1:{free_port()}", make_service_token, verifier)
    ports = {"ingest": await ingest.start(), "search": await live.start(), "dead": await dead.start()}
    channels = {name: grpc.aio.insecure_channel(f"127.0.0.1:{port}") for name, port in ports.items()}
    yield {
        "ingest": rpc.IngestStub(channels["ingest"]),
        "search": search_pb2_grpc.SearchServiceStub(channels["search"]),
        "dead": search_pb2_grpc.SearchServiceStub(channels["dead"]),
        "admin": admin,
    }
    for channel in channels.values():
        await channel.close()
    for app in (dead, live, ingest, embedder):
        await app.stop()
    for client in (live_client, dead_client):
        await client.close()
    for db in (ingest_db, search_db, admin):
        await db.close()


def bearer(token: str) -> list[tuple[str, str]]:
    return [("authorization", f"Bearer {token}")]


def user(make_token, tenant: str, subject: str = "user-1"):
    return bearer(make_token(tenant, subject=subject))


def platform_service(make_token, tenant: str):
    return bearer(make_token(tenant, [*PUBLIC_CAPABILITIES, SYSTEM_WRITE], subject="chat-orchestrator"))


async def entry(stack, metadata, system_corpus: str, text: str, about: str = "") -> ingest_pb2.IngestJob:
    accepted = await stack["ingest"].IngestText(
        ingest_pb2.IngestTextRequest(system_corpus=system_corpus, text=text, title="entry", about_subject=about),
        metadata=metadata,
    )
    job = await wait_terminal(stack["ingest"], metadata, accepted.job_id)
    assert job.state == ingest_pb2.DOCUMENT_STATE_SEARCHABLE
    return job


@pytest.fixture(scope="module")
async def housekeeping(stack, make_token):
    writer = platform_service(make_token, "agent-acme")
    await entry(stack, writer, "operational_patterns", "Restart the billing worker after each billing deploy.")
    await entry(stack, writer, "operational_patterns", "[PROVISIONAL] Billing deploy only happens on Fridays.")
    await entry(stack, writer, "user_behavior", "user-1 wants billing deploy notes as short bullet lists.", "user-1")
    await entry(stack, writer, "user_behavior", "user-2 runs every billing deploy at night.", "user-2")
    other = platform_service(make_token, "agent-globex")
    await entry(stack, other, "operational_patterns", "Globex billing deploy secret runbook.")


async def test_housekeeping_corpora_are_created_on_demand_and_written_only_with_system_write(stack, make_token):
    ingest, admin = stack["ingest"], stack["admin"]
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await ingest.IngestText(
            ingest_pb2.IngestTextRequest(system_corpus="operational_patterns", text="x"),
            metadata=user(make_token, "agent-new"),
        )
    assert caught.value.code() == grpc.StatusCode.NOT_FOUND
    assert await admin.fetchval("t", "SELECT count(*) FROM corpora WHERE tenant_id = 'agent-new'") == 0
    writer = platform_service(make_token, "agent-new")
    for bad in (
        ingest_pb2.IngestTextRequest(system_corpus="nope", text="x"),
        ingest_pb2.IngestTextRequest(system_corpus="user_behavior", text="x"),  # about whom?
        ingest_pb2.IngestTextRequest(system_corpus="data_catalog", text="x", about_subject="u"),
        ingest_pb2.IngestTextRequest(system_corpus="data_catalog", text="x", corpus_id="1"),
    ):
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await ingest.IngestText(bad, metadata=writer)
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    job = await entry(stack, writer, "data_catalog", "Table invoices: one row per invoice.")
    again = await entry(stack, writer, "data_catalog", "Table payments: one row per payment.")
    corpora = await admin.fetch("t", "SELECT name, is_system FROM corpora WHERE tenant_id = 'agent-new'")
    assert [(r["name"], r["is_system"]) for r in corpora] == [("data_catalog", True)]  # one, reused
    assert again.result.document_id != job.result.document_id
    listed = await ingest.ListCorpora(ingest_pb2.ListCorporaRequest(), metadata=writer)
    assert list(listed.corpora) == []  # hidden from listings
    prompt = await ingest.GetPromptContext(ingest_pb2.GetPromptContextRequest(), metadata=writer)
    assert (prompt.text, prompt.document_count) == ("", 0)  # and from the prompt context


async def test_prefetch_suggests_patterns_and_only_the_callers_own_behaviour(stack, make_token, housekeeping):
    reply = await stack["search"].PrefetchContext(
        search_pb2.PrefetchContextRequest(user_message="how do I run the billing deploy?"),
        metadata=user(make_token, "agent-acme", "user-1"),
    )
    assert not reply.degraded, reply.degradations
    assert reply.rendered.startswith("[SUGGESTED CONTEXT]\nOperational patterns:\n- Restart the billing worker")
    assert "user-1 wants billing deploy notes" in reply.rendered
    assert "user-2" not in reply.rendered  # another user's behaviour
    assert "PROVISIONAL" not in reply.rendered and "Fridays" not in reply.rendered  # filtered before ranking
    assert "Globex" not in reply.rendered  # another tenant's housekeeping
    other_user = await stack["search"].PrefetchContext(
        search_pb2.PrefetchContextRequest(user_message="how do I run the billing deploy?"),
        metadata=user(make_token, "agent-acme", "user-2"),
    )
    assert "user-2 runs every billing deploy" in other_user.rendered and "user-1" not in other_user.rendered
    with pytest.raises(grpc.aio.AioRpcError) as caught:  # the caller's mistake, not a failure to hide
        await stack["search"].PrefetchContext(
            search_pb2.PrefetchContextRequest(user_message="  "), metadata=user(make_token, "agent-acme")
        )
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "user_message" in caught.value.details()
    stranger = await stack["search"].PrefetchContext(
        search_pb2.PrefetchContextRequest(user_message="billing deploy"), metadata=user(make_token, "agent-none")
    )
    assert (stranger.rendered, stranger.degraded) == ("", False)


async def test_ordinary_reads_leave_the_housekeeping_corpora_out(stack, make_token, housekeeping):
    metadata = user(make_token, "agent-acme", "user-1")
    found = await stack["search"].Search(
        search_pb2.SearchRequest(query="billing deploy worker night bullet lists", top_k=50), metadata=metadata
    )
    assert list(found.results) == []  # acme holds only housekeeping entries: none is an ordinary result
    context = await stack["search"].GetContext(search_pb2.GetContextRequest(query="billing deploy"), metadata=metadata)
    assert list(context.context.evidence) == []
    hidden = await stack["admin"].fetchval(
        "t", "SELECT corpus_id FROM corpora WHERE tenant_id = 'agent-acme' AND name = 'user_behavior'"
    )
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stack["search"].Search(
            search_pb2.SearchRequest(query="billing deploy", corpus_id=str(hidden)), metadata=metadata
        )
    assert caught.value.code() == grpc.StatusCode.NOT_FOUND  # named in vain
    with pytest.raises(grpc.aio.AioRpcError) as caught:  # and another tenant's is no more there
        await stack["search"].Search(
            search_pb2.SearchRequest(query="billing deploy", corpus_id=str(hidden)),
            metadata=user(make_token, "agent-globex"),
        )
    assert caught.value.code() == grpc.StatusCode.NOT_FOUND
    # Nor is it in another tenant's reach at all (runtime/db/reach.py), so no read path can name it.
    globex = await PostgresReach(stack["admin"]).reach_of(
        Scope("agent-globex", frozenset(PUBLIC_CAPABILITIES), "user-1", scope_claim="/")
    )
    assert not globex.has(hidden) and globex.corpus_ids


async def test_prefetch_with_the_embedder_stopped_answers_by_keywords_within_its_deadline(
    stack, make_token, housekeeping
):
    started = time.monotonic()
    reply = await stack["dead"].PrefetchContext(
        search_pb2.PrefetchContextRequest(user_message="restart billing worker deploy"),
        metadata=user(make_token, "agent-acme", "user-1"),
    )
    assert time.monotonic() - started < 2.0
    assert reply.degraded and list(reply.degradations) == [LEXICAL_ONLY]
    assert "Restart the billing worker" in reply.rendered and "PROVISIONAL" not in reply.rendered


async def test_get_context_on_real_documents_is_grounded_and_byte_stable(stack, make_token):
    metadata = user(make_token, "agent-ctx")
    corpus = await stack["ingest"].CreateCorpus(ingest_pb2.CreateCorpusRequest(name="Handbook"), metadata=metadata)
    for title, text in (
        ("travel.txt", "Employees book train travel for trips under four hours. Flights need approval."),
        ("expenses.txt", "Submit expense receipts within thirty days through the finance portal."),
    ):
        accepted = await stack["ingest"].IngestText(
            ingest_pb2.IngestTextRequest(corpus_id=corpus.corpus_id, text=text, title=title), metadata=metadata
        )
        assert (await wait_terminal(stack["ingest"], metadata, accepted.job_id)).state == (
            ingest_pb2.DOCUMENT_STATE_SEARCHABLE
        )
    # What read a document's text (documents.extractor, helper sources') reaches its evidence.
    await stack["admin"].execute(
        "t",
        "UPDATE documents SET extractor = 'plain text (utf-8)' WHERE tenant_id = 'agent-ctx' AND filename = 'travel.txt'",
    )
    request = search_pb2.GetContextRequest(query="How do employees book train travel?", top_k=4)
    first = (await stack["search"].GetContext(request, metadata=metadata)).context
    second = (await stack["search"].GetContext(request, metadata=metadata)).context
    assert first.rendered.encode() == second.rendered.encode()
    assert first.facts and first.evidence
    ids = {e.evidence_id for e in first.evidence}
    for f in first.facts:
        assert (f.status == search_pb2.FACT_STATUS_GROUNDED and f.evidence_ids and set(f.evidence_ids) <= ids) or (
            f.status == search_pb2.FACT_STATUS_UNRESOLVED and not f.evidence_ids
        )
    assert any("train travel" in f.statement for f in first.facts)
    for e in first.evidence:
        stored = await stack["admin"].fetchval(
            "t", "SELECT content FROM chunks WHERE chunk_id = $1 AND tenant_id = 'agent-ctx'", int(e.chunk_id)
        )
        assert e.excerpt == stored and e.excerpt_sha256 == hashlib.sha256(stored.encode()).hexdigest()
        assert e.filename in ("travel.txt", "expenses.txt")
        assert e.extractor == ("plain text (utf-8)" if e.filename == "travel.txt" else "")
    meta = first.metadata
    assert (meta.query, meta.backend, meta.fact_count, meta.evidence_count) == (
        "How do employees book train travel?",
        "extractive",
        len(first.facts),
        len(first.evidence),
    )
    assert list(meta.degradations) == [] and not meta.truncated
    assert meta.scope == "/"  # the caller's scope node (the token's claim, resolved)
    degraded = (await stack["dead"].GetContext(request, metadata=metadata)).context
    assert list(degraded.metadata.degradations) == [LEXICAL_ONLY] and degraded.evidence
    assert all(e.score == 0.0 for e in degraded.evidence)  # lexical-only hits
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stack["search"].GetContext(search_pb2.GetContextRequest(query="  "), metadata=metadata)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT


async def test_search_documents_renders_the_synthesis_and_a_20000_character_chunk_in_full(stack, make_token):
    admin = stack["admin"]
    await admin.execute("t", "INSERT INTO tenants (tenant_id) VALUES ('agent-long') ON CONFLICT DO NOTHING")
    corpus_id = await admin.fetchval(
        "t", "INSERT INTO corpora (tenant_id, name) VALUES ('agent-long', 'long') RETURNING corpus_id"
    )
    document_id = await admin.fetchval(
        "t",
        "INSERT INTO documents (tenant_id, corpus_id, filename, state) VALUES ('agent-long', $1, 'long.txt', "
        "'SEARCHABLE') RETURNING document_id",
        corpus_id,
    )
    long_chunk = ("Zeppelin maintenance happens every spring. " + " ".join(f"w{i}" for i in range(5000)))[:20_000]
    assert len(long_chunk) == 20_000
    for index, content in enumerate((long_chunk, "Zeppelin hangar keys are at the front desk.")):
        await admin.execute(
            "t",
            "INSERT INTO chunks (tenant_id, corpus_id, document_id, chunk_index, section, content, embedding, metadata) "
            "VALUES ('agent-long', $1, $2, $3, '', $4, $5, $6)",
            corpus_id,
            document_id,
            index,
            content,
            hashed_vector(content),
            f'{{"document_id": "{document_id}"}}',
        )
    reply = await stack["search"].SearchDocuments(
        search_pb2.SearchDocumentsRequest(query="zeppelin maintenance spring", top_k=2),
        metadata=user(make_token, "agent-long"),
    )
    assert reply.result_count == 2 and long_chunk in reply.text  # never truncated
    assert reply.synthesis and "Zeppelin maintenance happens every spring" in reply.synthesis
    assert reply.text.index(f"Synthesis: {reply.synthesis}") < reply.text.index("[Source 1 ")
    assert f"[Source 1 (document_id={document_id}), relevance: " in reply.text
