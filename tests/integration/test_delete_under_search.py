"""The peer trackers' "deleted documents still retrieved": several clients search a term
a document holds while it is deleted; no answer to a search started after DeleteDocument answered
(its commit) includes the document. Real content-index, embedder (the real model), ingest and
search (hybrid: both channels, its cache on) over one PostgreSQL; then the removal job deletes the
chunks and the document's row, so no row references its blob any more."""

from __future__ import annotations

import asyncio
import time

import grpc
import pytest
from knowledge.v1 import ingest_pb2, search_pb2, search_pb2_grpc
from knowledge_ingest.bootstrap import build_app as ingest_app
from knowledge_ingest.config import IngestSettings
from knowledge_runtime.db.pool import Database
from knowledge_runtime.settings import Env
from knowledge_search.bootstrap import build_app as search_app
from knowledge_search.config import SearchSettings

from tests.support import rpc
from tests.support.ingest import new_corpus, upload, wait_removed, wait_terminal
from tests.support.real_services import base_env, ingest_env, start_backends

pytestmark = pytest.mark.integration

CLIENTS = 4
TERM = "kestrel"


@pytest.fixture
async def stack(migrated_pg, keys_dir, tmp_path):
    apps, addresses = await start_backends(migrated_pg, keys_dir, tmp_path)
    ingest = await ingest_app(IngestSettings.from_env(Env(ingest_env(migrated_pg, keys_dir, tmp_path, addresses, 0))))
    env = {
        **base_env(migrated_pg, keys_dir, tmp_path, "search"),
        "KNOWLEDGE_SEARCH_PORT": "0",
        "KNOWLEDGE_EMBEDDER_ADDRESS": addresses["embedder"],
        "KNOWLEDGE_SEARCH_CACHE_TTL_S": "600",  # a stale cached answer would show here
    }
    search = await search_app(SearchSettings.from_env(Env(env)))
    apps += [ingest, search]
    ingest_port, search_port = await ingest.start(), await search.start()
    admin = await Database.connect(migrated_pg.url())
    async with (
        grpc.aio.insecure_channel(f"127.0.0.1:{ingest_port}") as ingest_channel,
        grpc.aio.insecure_channel(f"127.0.0.1:{search_port}") as search_channel,
    ):
        yield (
            rpc.IngestStub(ingest_channel),
            search_pb2_grpc.SearchServiceStub(search_channel),
            admin,
        )
    await admin.close()
    for app in reversed(apps):
        await app.stop()


async def test_no_search_started_after_the_delete_answered_includes_the_document(stack, make_token):
    ingest, search, admin = stack
    metadata = [("authorization", f"Bearer {make_token('t-delete-load')}")]
    corpus_id = await new_corpus(ingest, metadata)
    texts = {
        "doomed.md": f"# Birds of prey\n\nThe {TERM} hovers over the meadow before it dives for voles.",
        "kept.md": f"# Falcons\n\nA {TERM} is a small falcon; it nests on cliffs and church towers.",
    }
    ids = {}
    for filename, text in texts.items():
        job = await wait_terminal(
            ingest, metadata, (await upload(ingest, metadata, corpus_id, text.encode(), filename)).job_id, timeout=120
        )
        assert job.state == ingest_pb2.DOCUMENT_STATE_SEARCHABLE, job.error
        ids[filename] = job.result.document_id
    doomed = ids["doomed.md"]
    blob_id = await admin.fetchval("t", "SELECT blob_id FROM documents WHERE document_id = $1", int(doomed))

    answers: list[tuple[float, bool]] = []  # (when the search started, whether it held the document)
    stop = asyncio.Event()

    async def client() -> None:
        request = search_pb2.SearchRequest(query=f"{TERM} meadow", mode=search_pb2.SEARCH_MODE_HYBRID, top_k=10)
        while not stop.is_set():
            started = time.monotonic()
            reply = await search.Search(request, metadata=metadata)
            answers.append((started, any(r.document_id == doomed for r in reply.results)))

    clients = [asyncio.create_task(client()) for _ in range(CLIENTS)]
    try:
        while sum(held for _, held in answers) < 2 * CLIENTS:  # the load finds it before the delete
            await asyncio.sleep(0.05)
        # The removal job is held back (its chunk deletes wait on this share lock; reads do not),
        # so what keeps the document out of the answers below is the delete's commit alone.
        async with admin.transaction() as hold:
            await hold.fetch("hold_chunks", "SELECT 1 FROM chunks WHERE document_id = $1 FOR SHARE", int(doomed))
            deleted = await ingest.DeleteDocument(
                ingest_pb2.DeleteDocumentRequest(document_id=doomed), metadata=metadata
            )
            committed = time.monotonic()  # the answer came after the commit
            await asyncio.sleep(2.0)
            while sum(1 for started, _ in answers if started > committed) < 3 * CLIENTS:
                await asyncio.sleep(0.05)
            still_there = await admin.fetchval("t", "SELECT count(*) FROM chunks WHERE document_id = $1", int(doomed))
        await wait_removed(admin, int(doomed), timeout=60)  # the load goes on through the removal
        removed = time.monotonic()
        while sum(1 for started, _ in answers if started > removed) < CLIENTS:
            await asyncio.sleep(0.05)
    finally:
        stop.set()
        await asyncio.gather(*clients)

    assert still_there > 0  # the answers after the commit did not miss it for want of chunks
    assert deleted.tombstone.document_id == doomed
    after = [held for started, held in answers if started > committed]
    assert len(after) >= CLIENTS and not any(after), f"{sum(after)} of {len(after)} answers after the delete held it"
    assert any(held for started, held in answers if started < committed)
    # The kept document is still found; the deleted one left no chunk and no reference to its blob.
    last = await search.Search(search_pb2.SearchRequest(query=TERM, top_k=10), metadata=metadata)
    assert [r.document_id for r in last.results] == [ids["kept.md"]]
    assert await admin.fetchval("t", "SELECT count(*) FROM chunks WHERE document_id = $1", int(doomed)) == 0
    references = await admin.fetchval(
        "t",
        "SELECT (SELECT count(*) FROM documents WHERE blob_id = $1) + (SELECT count(*) FROM ingest_jobs WHERE blob_id = $1)",
        blob_id,
    )
    assert references == 0
