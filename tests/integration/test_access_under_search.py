"""An access change under concurrent search: several clients search (hybrid: both channels, the
answer cache on with a long TTL) while SetDocumentAccess takes their reader out of a document's
list; no search started after the change answered (its commit) returns the document. And two
readers of one scope node whose groups differ never share a cached answer. Real ingest (its ports
as fakes) and search over one PostgreSQL."""

from __future__ import annotations

import asyncio
import time
import uuid

import grpc
import pytest
from knowledge.v1 import ingest_pb2, search_pb2, search_pb2_grpc
from knowledge_runtime.db.pool import Database
from knowledge_runtime.server import GrpcApp
from knowledge_search.adapters.memory_cache import TtlCache
from knowledge_search.adapters.postgres import PostgresChunkIndex
from knowledge_search.api.servicer import SearchServicer
from knowledge_search.api.servicer import service_spec as search_spec
from knowledge_search.domain.answer import ExtractiveSynthesiser
from knowledge_search.usecases import AnswerUseCases, SearchUseCases

from tests.support import rpc
from tests.support.ingest import (
    CountingEmbedder,
    MemoryBlobs,
    SameVectors,
    ingest_app,
    settings,
    text_extract,
    upload,
    wait_terminal,
    wire_fakes,
)

pytestmark = pytest.mark.integration

CLIENTS = 4
TERM = "kestrel"


@pytest.fixture
async def stack(migrated_pg, verifier):
    ingest_db = await Database.connect(migrated_pg.url(user="knowledge_ingest"))
    search_db = await Database.connect(migrated_pg.url(user="knowledge_search"), max_size=CLIENTS + 2)
    admin = await Database.connect(migrated_pg.url())
    ingest = wire_fakes(settings(), ingest_db, MemoryBlobs(admin), CountingEmbedder(), text_extract)
    index = PostgresChunkIndex(search_db)
    searches = SearchUseCases(index, SameVectors(), cache=TtlCache(600.0))  # a stale answer would show
    apps = [
        ingest_app(ingest, verifier),
        GrpcApp(
            services=[search_spec(SearchServicer(searches, AnswerUseCases(searches, ExtractiveSynthesiser())))],
            verifier=verifier,
            scope_resolver=index.reader,
        ),
    ]
    channels = [grpc.aio.insecure_channel(f"127.0.0.1:{await app.start()}") for app in apps]
    yield rpc.IngestStub(channels[0]), search_pb2_grpc.SearchServiceStub(channels[1])
    for channel in channels:
        await channel.close()
    for app in reversed(apps):
        await app.stop()
    for db in (ingest_db, search_db, admin):
        await db.close()


async def documents(ingest, owner, texts: dict[str, str]) -> dict[str, str]:
    corpus = (await ingest.CreateCorpus(ingest_pb2.CreateCorpusRequest(name="birds"), metadata=owner)).corpus_id
    ids = {}
    for filename, text in texts.items():
        job = await wait_terminal(ingest, owner, (await upload(ingest, owner, corpus, text.encode(), filename)).job_id)
        assert job.state == ingest_pb2.DOCUMENT_STATE_SEARCHABLE, job.error
        ids[filename] = job.result.document_id
    return ids


async def test_no_search_started_after_the_change_answered_returns_the_document(stack, make_token):
    ingest, search = stack
    tenant = f"t-acl-load-{uuid.uuid4().hex[:6]}"
    ana = rpc.auth(make_token(tenant, subject="ana"))
    bob = rpc.auth(make_token(tenant, subject="bob", groups=["hr"]))
    ids = await documents(
        ingest,
        ana,
        {
            # The tenant in the text: these are not test_delete_under_search's bytes (a blob is
            # stored once for identical bytes, and that test checks that nothing references its own).
            "doomed.md": f"# Birds of prey\n\nThe {TERM} hovers over the meadow before it dives for voles ({tenant}).",
            "kept.md": f"# Falcons\n\nA {TERM} is a small falcon; it nests on cliffs and church towers ({tenant}).",
        },
    )
    doomed = ids["doomed.md"]
    await ingest.SetDocumentAccess(  # bob reads it through his group, to begin with
        ingest_pb2.SetDocumentAccessRequest(document_id=doomed, principals=["user:ana", "group:hr"]), metadata=ana
    )

    answers: list[tuple[float, bool]] = []  # (when the search started, whether it held the document)
    stop = asyncio.Event()

    async def client() -> None:
        request = search_pb2.SearchRequest(query=f"{TERM} meadow", mode=search_pb2.SEARCH_MODE_HYBRID, top_k=10)
        while not stop.is_set():
            started = time.monotonic()
            reply = await search.Search(request, metadata=bob)
            answers.append((started, any(r.document_id == doomed for r in reply.results)))

    clients = [asyncio.create_task(client()) for _ in range(CLIENTS)]
    try:
        while sum(held for _, held in answers) < 2 * CLIENTS:  # the load finds it (and caches it) first
            await asyncio.sleep(0.05)
        changed = await ingest.SetDocumentAccess(
            ingest_pb2.SetDocumentAccessRequest(document_id=doomed, principals=["user:ana"]), metadata=ana
        )
        committed = time.monotonic()  # the answer came after the commit
        while sum(1 for started, _ in answers if started > committed) < 5 * CLIENTS:
            await asyncio.sleep(0.05)
    finally:
        stop.set()
        await asyncio.gather(*clients)

    assert list(changed.previous_principals) == ["group:hr", "user:ana"]
    after = [held for started, held in answers if started > committed]
    assert len(after) >= 5 * CLIENTS and not any(after), (
        f"{sum(after)} of {len(after)} answers after the change held it"
    )
    assert any(held for started, held in answers if started < committed)
    # the other document is still found, and ana, still listed, still finds both
    last = await search.Search(search_pb2.SearchRequest(query=TERM, top_k=10), metadata=bob)
    assert [r.document_id for r in last.results] == [ids["kept.md"]]
    mine = await search.Search(search_pb2.SearchRequest(query=TERM, top_k=10), metadata=ana)
    assert {r.document_id for r in mine.results} == set(ids.values())


async def test_readers_in_other_groups_never_share_a_cached_answer(stack, make_token):
    ingest, search = stack
    tenant = f"t-acl-cache-{uuid.uuid4().hex[:6]}"
    bob = rpc.auth(make_token(tenant, subject="bob", groups=["hr"]))
    carl = rpc.auth(make_token(tenant, subject="carl", groups=["finance"]))
    ids = await documents(ingest, bob, {"hr.md": f"# HR\n\nThe {TERM} roster of the hr team."})
    await ingest.SetDocumentAccess(
        ingest_pb2.SetDocumentAccessRequest(document_id=ids["hr.md"], principals=["group:hr"]), metadata=bob
    )
    request = search_pb2.SearchRequest(query=f"{TERM} roster", top_k=10)
    assert [r.document_id for r in (await search.Search(request, metadata=bob)).results] == [ids["hr.md"]]
    # the same node, band, generation and request: only the principals tell the two answers apart
    assert (await search.Search(request, metadata=carl)).results == []
