"""Collections by key, over real PostgreSQL and real ingest and search gRPC servers (content-index
and the embedder as fakes at ingest's ports, search's query vectors from the same fake): a corpus
created with a key is named by it wherever a request names a corpus, the key nearest the caller's
node wins, an unknown key is NOT_FOUND, a key and an id together are INVALID_ARGUMENT."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import grpc
import pytest
from knowledge.v1 import ingest_pb2, search_pb2, search_pb2_grpc
from knowledge_ingest.domain.extraction import Extracted
from knowledge_runtime.costs import Cost
from knowledge_runtime.db.pool import Database
from knowledge_runtime.server import GrpcApp
from knowledge_search.adapters.postgres import PostgresChunkIndex
from knowledge_search.api.servicer import SearchServicer
from knowledge_search.api.servicer import service_spec as search_spec
from knowledge_search.domain.answer import ExtractiveSynthesiser
from knowledge_search.domain.model import EmbeddedQuery
from knowledge_search.usecases import AnswerUseCases, SearchUseCases

from tests.support import rpc
from tests.support.ingest import CountingEmbedder, MemoryBlobs, ingest_app, settings, wait_terminal, wire_fakes
from tests.support.rpc import auth, error_info

pytestmark = pytest.mark.integration


def extract(path: Path, filename: str, mime_type: str) -> Extracted:
    return Extracted(text=path.read_text(), page_count=None, extractable=True, format="text")


class SameVectors:
    def __init__(self) -> None:
        self._embedder = CountingEmbedder()

    async def embed_query(self, tenant: str, text: str) -> EmbeddedQuery:
        return EmbeddedQuery(vector=(await self._embedder.embed(tenant, [text]))[0], warnings=(), cost=Cost())


@pytest.fixture(scope="module")
async def services(migrated_pg, verifier):
    ingest_db = await Database.connect(migrated_pg.url(user="knowledge_ingest"))
    search_db = await Database.connect(migrated_pg.url(user="knowledge_search"))
    admin = await Database.connect(migrated_pg.url())
    ingest = wire_fakes(settings(), ingest_db, MemoryBlobs(admin), CountingEmbedder(), extract)
    ingest_server = ingest_app(ingest, verifier)
    searches = SearchUseCases(PostgresChunkIndex(search_db), SameVectors())
    search_server = GrpcApp(
        services=[search_spec(SearchServicer(searches, AnswerUseCases(searches, ExtractiveSynthesiser())))],
        verifier=verifier,
    )
    ingest_port, search_port = await ingest_server.start(), await search_server.start()
    async with (
        grpc.aio.insecure_channel(f"127.0.0.1:{ingest_port}") as ingest_channel,
        grpc.aio.insecure_channel(f"127.0.0.1:{search_port}") as search_channel,
    ):
        yield rpc.IngestStub(ingest_channel), search_pb2_grpc.SearchServiceStub(search_channel)
    await search_server.stop()
    await ingest_server.stop()
    for db in (ingest_db, search_db, admin):
        await db.close()


async def add_text(ingest, metadata, corpus_id: str, text: str) -> str:
    accepted = await ingest.IngestText(
        ingest_pb2.IngestTextRequest(corpus_id=corpus_id, text=text, title=uuid.uuid4().hex[:8]), metadata=metadata
    )
    job = await wait_terminal(ingest, metadata, accepted.job_id)
    assert job.state == ingest_pb2.DOCUMENT_STATE_SEARCHABLE, job.error
    return job.result.document_id


async def test_a_key_names_its_corpus_in_listings_watches_and_searches(services, make_token):
    ingest, search = services
    tenant = f"t-keys-{uuid.uuid4().hex[:6]}"
    metadata = auth(make_token(tenant))
    keyed = await ingest.CreateCorpus(
        ingest_pb2.CreateCorpusRequest(name="Production", key="projects/42/production"), metadata=metadata
    )
    other = await ingest.CreateCorpus(ingest_pb2.CreateCorpusRequest(name="Staging"), metadata=metadata)
    assert keyed.key == "projects/42/production" and other.key == ""
    inside = await add_text(ingest, metadata, keyed.corpus_id, "The osprey nests by the river.")
    await add_text(ingest, metadata, other.corpus_id, "The osprey also nests in staging.")

    listed = await ingest.ListDocuments(
        ingest_pb2.ListDocumentsRequest(corpus_id="-", corpus_key="projects/42/production"), metadata=metadata
    )
    assert [d.document_id for d in listed.documents] == [inside]
    found = await search.Search(
        search_pb2.SearchRequest(query="osprey nests", corpus_key="projects/42/production"), metadata=metadata
    )
    assert {r.document_id for r in found.results} == {inside}
    context = await search.GetContext(
        search_pb2.GetContextRequest(query="osprey nests", corpus_key="projects/42/production"), metadata=metadata
    )
    assert {e.document_id for e in context.context.evidence} == {inside}

    async def first_two():
        request = ingest_pb2.WatchDocumentsRequest(corpus_key="projects/42/production")
        seen = []
        async for change in ingest.WatchDocuments(request, metadata=metadata):
            seen.append((change.kind, change.document_id))
            if len(seen) == 2:
                return seen

    assert await asyncio.wait_for(first_two(), 10) == [
        (ingest_pb2.DOCUMENT_CHANGE_KIND_SNAPSHOT, inside),
        (ingest_pb2.DOCUMENT_CHANGE_KIND_SYNCED, ""),
    ]


@pytest.mark.parametrize(
    ("call", "code", "reason"),
    [
        ("list_unknown", grpc.StatusCode.NOT_FOUND, "CORPUS_NOT_FOUND"),
        ("search_unknown", grpc.StatusCode.NOT_FOUND, "CORPUS_NOT_FOUND"),
        ("list_both", grpc.StatusCode.INVALID_ARGUMENT, "INVALID_REQUEST"),
        ("search_both", grpc.StatusCode.INVALID_ARGUMENT, "INVALID_REQUEST"),
        ("list_dash_alone", grpc.StatusCode.INVALID_ARGUMENT, "INVALID_REQUEST"),
        ("search_malformed", grpc.StatusCode.INVALID_ARGUMENT, "INVALID_REQUEST"),
        ("create_malformed", grpc.StatusCode.INVALID_ARGUMENT, "INVALID_REQUEST"),
    ],
)
async def test_an_unknown_key_is_not_found_and_a_key_with_an_id_is_refused(services, make_token, call, code, reason):
    ingest, search = services
    metadata = auth(make_token("t-keys-refused"))
    corpus = await ingest.CreateCorpus(ingest_pb2.CreateCorpusRequest(name=uuid.uuid4().hex[:8]), metadata=metadata)
    calls = {
        "list_unknown": lambda: ingest.ListDocuments(
            ingest_pb2.ListDocumentsRequest(corpus_id="-", corpus_key="projects/none"), metadata=metadata
        ),
        "search_unknown": lambda: search.Search(
            search_pb2.SearchRequest(query="x", corpus_key="projects/none"), metadata=metadata
        ),
        "list_both": lambda: ingest.ListDocuments(
            ingest_pb2.ListDocumentsRequest(corpus_id=corpus.corpus_id, corpus_key="projects/none"), metadata=metadata
        ),
        "search_both": lambda: search.Search(
            search_pb2.SearchRequest(query="x", corpus_id=corpus.corpus_id, corpus_key="projects/none"),
            metadata=metadata,
        ),
        "list_dash_alone": lambda: ingest.ListDocuments(
            ingest_pb2.ListDocumentsRequest(corpus_id="-"), metadata=metadata
        ),
        "search_malformed": lambda: search.Search(
            search_pb2.SearchRequest(query="x", corpus_key="/leading/slash"), metadata=metadata
        ),
        "create_malformed": lambda: ingest.CreateCorpus(
            ingest_pb2.CreateCorpusRequest(name="k", key="spaces are not keys"), metadata=metadata
        ),
    }
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await calls[call]()
    assert (caught.value.code(), error_info(caught.value).reason) == (code, reason)


async def test_a_key_is_unique_per_node_and_the_nearest_one_wins(services, make_token):
    ingest, search = services
    tenant = f"t-keys-near-{uuid.uuid4().hex[:6]}"
    root, eng = auth(make_token(tenant)), auth(make_token(tenant, scope="workspace:eng"))
    at_root = await ingest.CreateCorpus(ingest_pb2.CreateCorpusRequest(name="root", key="shared"), metadata=root)
    with pytest.raises(grpc.aio.AioRpcError) as caught:  # the same node: taken
        await ingest.CreateCorpus(ingest_pb2.CreateCorpusRequest(name="again", key="shared"), metadata=root)
    info = error_info(caught.value)
    assert (caught.value.code(), info.reason, info.metadata["corpus_key"]) == (
        grpc.StatusCode.ALREADY_EXISTS,
        "CORPUS_ALREADY_EXISTS",
        "shared",
    )
    placed = await ingest.CreateCorpus(ingest_pb2.CreateCorpusRequest(name="placeholder"), metadata=root)
    await ingest.BindCorpus(
        ingest_pb2.BindCorpusRequest(corpus_id=placed.corpus_id, scope="workspace:eng"), metadata=root
    )
    at_eng = await ingest.CreateCorpus(ingest_pb2.CreateCorpusRequest(name="eng", key="shared"), metadata=eng)
    assert at_eng.scope == "workspace:eng"
    root_doc = await add_text(ingest, root, at_root.corpus_id, "The heron waits at the root.")
    eng_doc = await add_text(ingest, eng, at_eng.corpus_id, "The heron waits in engineering.")
    for who, expected in ((root, root_doc), (eng, eng_doc)):
        listed = await ingest.ListDocuments(
            ingest_pb2.ListDocumentsRequest(corpus_id="-", corpus_key="shared"), metadata=who
        )
        assert [d.document_id for d in listed.documents] == [expected]
        found = await search.Search(search_pb2.SearchRequest(query="heron waits", corpus_key="shared"), metadata=who)
        assert {r.document_id for r in found.results} == {expected}
