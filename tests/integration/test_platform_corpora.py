"""Platform-wide corpora on real PostgreSQL through real ingest and search gRPC servers:
GENERAL material written by the platform tenant's administrator and read by every tenant, through
both channels, Query, SearchDocuments, GetContext and the document reads, while no tenant reads
another tenant's material and no tenant token writes, moves, binds or deletes in them (404).

Vectors hash words (tests/support/hashing.py), so cosine follows word overlap without the model.
"""

from __future__ import annotations

import asyncpg
import grpc
import pytest
from knowledge.v1 import ingest_pb2, search_pb2, search_pb2_grpc
from knowledge_ingest.domain.extraction import Extracted
from knowledge_runtime.auth import PUBLIC_CAPABILITIES
from knowledge_runtime.db.pool import Database
from knowledge_runtime.reach import PLATFORM_TENANT
from knowledge_runtime.server import GrpcApp
from knowledge_runtime.system_corpora import PLATFORM_ADMIN
from knowledge_search.adapters.embedder import GrpcQueryEmbedder
from knowledge_search.adapters.postgres import PostgresChunkIndex
from knowledge_search.adapters.system_corpora import PostgresSystemCorpora
from knowledge_search.agent_usecases import ContextUseCases, PrefetchUseCases
from knowledge_search.api.servicer import SearchServicer
from knowledge_search.api.servicer import service_spec as search_spec
from knowledge_search.domain.answer import ExtractiveSynthesiser
from knowledge_search.domain.relevance import Thresholds
from knowledge_search.usecases import AnswerUseCases, SearchUseCases

from tests.support import rpc
from tests.support.hashing import HashingChunkEmbedder, embedder_app
from tests.support.ingest import MemoryBlobs, ingest_app, new_corpus, settings, upload, wait_terminal, wire_fakes
from tests.support.platform import drop_platform_corpora

pytestmark = pytest.mark.integration
THRESHOLDS = Thresholds(high_top=0.6, high_mean=0.3, moderate_top=0.2)
TEXT = {
    "platform": "Ostrich handbook: every ostrich enclosure needs a sand bath and shade.",
    "acme": "Acme ostrich enclosure secret: the acme sand bath supplier and its prices.",
    "globex": "Globex ostrich enclosure secret: the globex sand bath supplier and its prices.",
}


def extract(path, filename, mime_type) -> Extracted:
    return Extracted(text=path.read_bytes().decode("utf-8"), page_count=None, extractable=True, format="text")


def bearer(token: str) -> list[tuple[str, str]]:
    return [("authorization", f"Bearer {token}")]


@pytest.fixture(scope="module")
async def stack(migrated_pg, verifier, make_service_token, make_token):
    ingest_db = await Database.connect(migrated_pg.url(user="knowledge_ingest"))
    search_db = await Database.connect(migrated_pg.url(user="knowledge_search"))
    admin = await Database.connect(migrated_pg.url())
    ingest = wire_fakes(settings(), ingest_db, MemoryBlobs(admin), HashingChunkEmbedder(), extract)
    ingest = ingest_app(ingest, verifier)
    embedder = embedder_app(verifier)
    embedder_port = await embedder.start()
    client = GrpcQueryEmbedder(
        f"127.0.0.1:{embedder_port}", timeout_s=5, token_for=lambda tenant: make_service_token(tenant, ["embed"])
    )
    corpora = PostgresSystemCorpora(search_db)
    searches = SearchUseCases(PostgresChunkIndex(search_db), client, THRESHOLDS, system_corpora=corpora)
    answers = AnswerUseCases(searches, ExtractiveSynthesiser())
    search = GrpcApp(
        services=[
            search_spec(
                SearchServicer(searches, answers, ContextUseCases(answers), PrefetchUseCases(searches, corpora))
            )
        ],
        verifier=verifier,
    )
    ports = {"ingest": await ingest.start(), "search": await search.start()}
    channels = {name: grpc.aio.insecure_channel(f"127.0.0.1:{port}") for name, port in ports.items()}
    ingest_stub = rpc.IngestStub(channels["ingest"])

    # The platform-wide corpus (created by the platform tenant's administrator) and each tenant's own one.
    curator = bearer(make_token(PLATFORM_TENANT, [*PUBLIC_CAPABILITIES, PLATFORM_ADMIN]))
    created = await ingest_stub.CreateCorpus(
        ingest_pb2.CreateCorpusRequest(name="ostrich-handbook", platform_wide=True), metadata=curator
    )
    assert (created.confidentiality, created.scope) == ("GENERAL", "/")
    platform_corpus = created.corpus_id
    documents, own = {}, {}
    for owner, metadata in (("platform", curator), ("acme", None), ("globex", None)):
        if metadata is None:
            metadata = bearer(make_token(f"pf-{owner}"))
            corpus_id = own[owner] = await new_corpus(ingest_stub, metadata, f"{owner}-own")
        else:
            corpus_id = str(platform_corpus)
        reply = await upload(ingest_stub, metadata, corpus_id, TEXT[owner].encode(), f"{owner}-ostrich.txt")
        job = await wait_terminal(ingest_stub, metadata, reply.job_id)
        assert job.state == ingest_pb2.DOCUMENT_STATE_SEARCHABLE, job.error
        documents[owner] = job.result.document_id
    yield {
        "ingest": ingest_stub,
        "search": search_pb2_grpc.SearchServiceStub(channels["search"]),
        "admin": admin,
        "platform_corpus": str(platform_corpus),
        "documents": documents,
        "own": own,
        "curator": curator,
    }
    await drop_platform_corpora(admin)
    for channel in channels.values():
        await channel.close()
    for app in (search, ingest, embedder):
        await app.stop()
    await client.close()
    for db in (ingest_db, search_db, admin):
        await db.close()


def owner_of(stack, document_id: str) -> str:
    return next(owner for owner, known in stack["documents"].items() if known == document_id)


async def everything_read(stack, metadata) -> dict[str, set[str]]:
    """The owners of the documents each read path answers for this caller."""
    search = stack["search"]
    query = "ostrich enclosure sand bath"
    seen: dict[str, set[str]] = {}
    for mode in (search_pb2.SEARCH_MODE_LEXICAL, search_pb2.SEARCH_MODE_VECTOR, search_pb2.SEARCH_MODE_HYBRID):
        reply = await search.Search(search_pb2.SearchRequest(query=query, mode=mode, top_k=20), metadata=metadata)
        seen[f"search-{mode}"] = {owner_of(stack, r.document_id) for r in reply.results}
    answer = await search.Query(search_pb2.QueryRequest(query=query, top_k=20), metadata=metadata)
    seen["query"] = {owner_of(stack, c.document_id) for c in answer.citations}
    tool = await search.SearchDocuments(search_pb2.SearchDocumentsRequest(query=query, top_k=20), metadata=metadata)
    seen["search_documents"] = {o for o, d in stack["documents"].items() if f"document_id={d})" in tool.text}
    context = await search.GetContext(search_pb2.GetContextRequest(query=query, top_k=20), metadata=metadata)
    seen["context"] = {owner_of(stack, e.document_id) for e in context.context.evidence}
    readable = set()
    for owner, document_id in stack["documents"].items():
        try:
            await stack["ingest"].GetDocument(ingest_pb2.GetDocumentRequest(document_id=document_id), metadata=metadata)
            text = await stack["ingest"].GetDocumentText(
                ingest_pb2.GetDocumentTextRequest(document_id=document_id), metadata=metadata
            )
            assert TEXT[owner] in text.text
            readable.add(owner)
        except grpc.aio.AioRpcError as error:
            assert error.code() == grpc.StatusCode.NOT_FOUND
    seen["document"] = readable
    batch = await stack["ingest"].BatchGetDocuments(
        ingest_pb2.BatchGetDocumentsRequest(document_ids=list(stack["documents"].values())), metadata=metadata
    )
    seen["batch"] = {owner_of(stack, d.document_id) for d in batch.documents}
    listed = await stack["ingest"].ListDocuments(
        ingest_pb2.ListDocumentsRequest(corpus_id=stack["platform_corpus"]), metadata=metadata
    )
    seen["list_platform"] = {owner_of(stack, d.document_id) for d in listed.documents}
    return seen


async def test_every_tenant_reads_the_platform_corpus_and_never_another_tenants_material(stack, make_token):
    for tenant, other in (("acme", "globex"), ("globex", "acme")):
        seen = await everything_read(stack, bearer(make_token(f"pf-{tenant}")))
        for path, owners in seen.items():
            expected = {"platform"} if path == "list_platform" else {"platform", tenant}
            assert owners == expected, (tenant, path, owners)
            assert other not in owners
    # A token whose clearance admits only GENERAL reads the platform material and nothing of its own.
    general = await everything_read(stack, bearer(make_token("pf-acme", clearance="GENERAL")))
    assert all(owners == {"platform"} for owners in general.values()), general
    # A tenant with no material of its own still finds the platform's, lexically too.
    fresh = await everything_read(stack, bearer(make_token("pf-newcomer")))
    assert all(owners == {"platform"} for owners in fresh.values()), fresh
    # The platform tenant itself reads its corpus, and no tenant's material.
    assert all(o == {"platform"} for o in (await everything_read(stack, stack["curator"])).values())


async def stored(stack) -> tuple[int, int]:
    corpus_id = int(stack["platform_corpus"])
    admin = stack["admin"]
    documents = await admin.fetchval("t", "SELECT count(*) FROM documents WHERE corpus_id = $1", corpus_id)
    scope = await admin.fetchval("t", "SELECT scope_path FROM corpora WHERE corpus_id = $1", corpus_id)
    return documents, scope


async def test_no_tenant_token_writes_moves_binds_or_deletes_in_a_platform_corpus(stack, make_token):
    ingest, platform = stack["ingest"], stack["platform_corpus"]
    before = await stored(stack)
    # An ordinary token, and another tenant's platform.admin (its rows would be keyed to acme).
    for metadata in (
        bearer(make_token("pf-acme")),
        bearer(make_token("pf-acme", [*PUBLIC_CAPABILITIES, PLATFORM_ADMIN])),
    ):
        calls = (
            lambda m: upload(ingest, m, platform, b"acme plants a rumour", "rumour.txt"),
            lambda m: ingest.IngestText(
                ingest_pb2.IngestTextRequest(corpus_id=platform, text="a rumour", title="t"), metadata=m
            ),
            lambda m: ingest.MoveDocuments(
                ingest_pb2.MoveDocumentsRequest(target_corpus_id=platform, document_ids=[stack["documents"]["acme"]]),
                metadata=m,
            ),
            lambda m: ingest.MoveDocuments(  # nor out of it, into its own corpus
                ingest_pb2.MoveDocumentsRequest(
                    target_corpus_id=stack["own"]["acme"], document_ids=[stack["documents"]["platform"]]
                ),
                metadata=m,
            ),
            lambda m: ingest.BindCorpus(ingest_pb2.BindCorpusRequest(corpus_id=platform, scope="/"), metadata=m),
            lambda m: ingest.DeleteDocument(
                ingest_pb2.DeleteDocumentRequest(document_id=stack["documents"]["platform"]), metadata=m
            ),
        )
        for call in calls:
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await call(metadata)
            assert caught.value.code() == grpc.StatusCode.NOT_FOUND
    assert await stored(stack) == before  # nothing written, moved, rebound or deleted
    corpus = await stack["admin"].fetchval(
        "t", "SELECT corpus_id FROM documents WHERE document_id = $1", int(stack["documents"]["acme"])
    )
    assert str(corpus) == stack["own"]["acme"]


async def test_only_the_platform_tenants_administrator_creates_one_and_only_general(stack, make_token):
    ingest, admin = stack["ingest"], stack["admin"]
    before = await admin.fetchval("t", "SELECT count(*) FROM corpora WHERE tenant_id IS NULL")
    for metadata in (
        bearer(make_token("pf-acme")),
        bearer(make_token("pf-acme", [*PUBLIC_CAPABILITIES, PLATFORM_ADMIN])),  # another tenant's admin
        bearer(make_token(PLATFORM_TENANT)),  # the platform tenant without platform.admin
    ):
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await ingest.CreateCorpus(
                ingest_pb2.CreateCorpusRequest(name="rumours", platform_wide=True), metadata=metadata
            )
        assert caught.value.code() == grpc.StatusCode.PERMISSION_DENIED and "platform.admin" in caught.value.details()
    for band in ("TENANT", "CONFIDENTIAL", "RESTRICTED"):
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await ingest.CreateCorpus(
                ingest_pb2.CreateCorpusRequest(name="inner", platform_wide=True, confidentiality=band),
                metadata=stack["curator"],
            )
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "GENERAL" in caught.value.details()
    with pytest.raises(grpc.aio.AioRpcError) as caught:  # one name among the platform-wide corpora
        await ingest.CreateCorpus(
            ingest_pb2.CreateCorpusRequest(name="ostrich-handbook", platform_wide=True), metadata=stack["curator"]
        )
    assert caught.value.code() == grpc.StatusCode.ALREADY_EXISTS
    assert await admin.fetchval("t", "SELECT count(*) FROM corpora WHERE tenant_id IS NULL") == before
    listed = await ingest.ListCorpora(ingest_pb2.ListCorporaRequest(), metadata=stack["curator"])
    assert stack["platform_corpus"] not in {c.corpus_id for c in listed.corpora}  # never listed


async def test_a_platform_corpus_holds_only_general_material(stack):
    with pytest.raises(asyncpg.CheckViolationError):
        await stack["admin"].execute(
            "t", "INSERT INTO corpora (tenant_id, name, is_system, confidentiality) VALUES (NULL, 'x', true, 'TENANT')"
        )
    with pytest.raises(asyncpg.CheckViolationError):
        await stack["admin"].execute(
            "t",
            "UPDATE corpora SET confidentiality = 'CONFIDENTIAL' WHERE corpus_id = $1",
            int(stack["platform_corpus"]),
        )
