"""Streams do not outlive their token or the caller's reach, over real PostgreSQL and the real
ingest gRPC server (blobs and vectors as fakes at their ports): WatchEvents and WatchDocuments
opened with a short-lived token end at its ``exp`` with UNAUTHENTICATED (TOKEN_EXPIRED), while
quiet and while busy; a watched corpus rebound out of the watcher's reach ends the watch with
NOT_FOUND at once, and its events stop reaching that watcher."""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid

import grpc
import jwt
import pytest
from knowledge.v1 import ingest_pb2
from knowledge_runtime.db.pool import Database

from tests.support.ingest import CountingEmbedder, MemoryBlobs, replica, upload, wait_terminal
from tests.support.rpc import auth, error_info

pytestmark = pytest.mark.integration

TTL_S = 4


@pytest.fixture
async def stub(migrated_pg, verifier):
    admin = await Database.connect(migrated_pg.url())
    try:
        async with replica(
            migrated_pg.url(user="knowledge_ingest"), verifier, MemoryBlobs(admin), CountingEmbedder()
        ) as ingest:  # events beat every 0.5 s
            yield ingest
    finally:
        await admin.close()


async def read_to_the_end(call, limit_s: float) -> tuple[list, grpc.aio.AioRpcError | None]:
    """Every item of the stream until it ends (its error, None when it ended cleanly); the test
    fails when it is still open after ``limit_s``."""
    items: list = []
    try:
        async with asyncio.timeout(limit_s):
            async for item in call:
                items.append(item)
    except grpc.aio.AioRpcError as error:
        return items, error
    except TimeoutError:
        call.cancel()
        raise AssertionError(f"the stream was still open after {limit_s} s ({len(items)} items)") from None
    return items, None


def expired(error: grpc.aio.AioRpcError | None) -> bool:
    return (
        error is not None
        and error.code() == grpc.StatusCode.UNAUTHENTICATED
        and error_info(error).reason == "TOKEN_EXPIRED"
    )


async def test_both_watches_end_at_their_tokens_expiry(stub, make_token):
    tenant = f"expiry-{uuid.uuid4().hex[:8]}"
    lasting = auth(make_token(tenant))
    corpus = (await stub.CreateCorpus(ingest_pb2.CreateCorpusRequest(name="live"), metadata=lasting)).corpus_id
    short = make_token(tenant, ttl_s=TTL_S)
    exp = jwt.decode(short, options={"verify_signature": False})["exp"]
    events = stub.WatchEvents(ingest_pb2.WatchEventsRequest(), metadata=auth(short))
    documents = stub.WatchDocuments(ingest_pb2.WatchDocumentsRequest(corpus_id=corpus), metadata=auth(short))

    async def keep_busy() -> None:  # changes keep coming until well after the expiry
        for n in range(2 * TTL_S):
            await upload(stub, lasting, corpus, f"# Note {n}\n\nOkapi {uuid.uuid4().hex}".encode(), f"n{n}.txt")
            await asyncio.sleep(1)

    busy = asyncio.create_task(keep_busy())
    try:
        (seen_events, events_error), (seen_documents, documents_error) = await asyncio.gather(
            read_to_the_end(events, TTL_S + 10), read_to_the_end(documents, TTL_S + 10)
        )
        ended = time.time()
    finally:
        await busy
    for seen, error in ((seen_events, events_error), (seen_documents, documents_error)):
        assert seen, "the stream delivered nothing before the expiry"
        assert expired(error), error
    assert ended < exp + 3  # at the expiry, not at some later heartbeat or change
    assert any(line.type == "stream.heartbeat" for line in seen_events)
    assert any(change.kind == ingest_pb2.DOCUMENT_CHANGE_KIND_SYNCED for change in seen_documents)


async def test_a_quiet_watch_ends_at_the_expiry_too(stub, make_token):
    """Nothing happens in the corpus: the watch waits, and still ends at the token's exp."""
    tenant = f"expiry-quiet-{uuid.uuid4().hex[:8]}"
    corpus = (
        await stub.CreateCorpus(ingest_pb2.CreateCorpusRequest(name="q"), metadata=auth(make_token(tenant)))
    ).corpus_id
    short = make_token(tenant, ttl_s=TTL_S)
    call = stub.WatchDocuments(ingest_pb2.WatchDocumentsRequest(corpus_id=corpus), metadata=auth(short))
    seen, error = await read_to_the_end(call, TTL_S + 10)
    assert [c.kind for c in seen] == [ingest_pb2.DOCUMENT_CHANGE_KIND_SYNCED]
    assert expired(error), error


async def test_a_watched_corpus_rebound_out_of_reach_ends_the_watch_and_its_events_stop(stub, make_token):
    tenant = f"rebound-{uuid.uuid4().hex[:8]}"
    root = auth(make_token(tenant))
    eng = auth(make_token(tenant, scope="workspace:eng"))
    made = await stub.CreateCorpus(ingest_pb2.CreateCorpusRequest(name="runbooks"), metadata=root)
    other = await stub.CreateCorpus(ingest_pb2.CreateCorpusRequest(name="handbook"), metadata=root)
    await stub.BindCorpus(ingest_pb2.BindCorpusRequest(corpus_id=made.corpus_id, scope="workspace:eng"), metadata=root)
    watch = stub.WatchDocuments(ingest_pb2.WatchDocumentsRequest(corpus_id=made.corpus_id), metadata=eng)
    events = stub.WatchEvents(ingest_pb2.WatchEventsRequest(), metadata=eng)
    lines: list[ingest_pb2.Event] = []

    async def listen() -> None:
        async for line in events:
            lines.append(line)

    watched = asyncio.create_task(read_to_the_end(watch, 15))
    heard = asyncio.create_task(listen())
    await asyncio.sleep(0.5)  # both streams open
    billing = auth(make_token(tenant, scope="workspace:eng/project:billing"))
    # eng binds its own corpus below itself: eng no longer reads it, billing does.
    await stub.BindCorpus(
        ingest_pb2.BindCorpusRequest(corpus_id=made.corpus_id, scope="workspace:eng/project:billing"), metadata=eng
    )
    seen, error = await watched  # no document changed: the rebinding alone ends it
    assert [c.kind for c in seen] == [ingest_pb2.DOCUMENT_CHANGE_KIND_SYNCED]
    assert error is not None and error.code() == grpc.StatusCode.NOT_FOUND, error
    assert error_info(error).reason == "CORPUS_NOT_FOUND"
    # Its later changes are not told to eng; those of a corpus eng still reads are.
    hidden = await upload(stub, billing, made.corpus_id, b"# Hidden\n\nZebu.", "h.txt")
    assert (await wait_terminal(stub, billing, hidden.job_id)).state == ingest_pb2.DOCUMENT_STATE_SEARCHABLE
    shown = await upload(stub, root, other.corpus_id, b"# Shown\n\nGnu.", "s.txt")
    assert (await wait_terminal(stub, root, shown.job_id)).state == ingest_pb2.DOCUMENT_STATE_SEARCHABLE
    async with asyncio.timeout(10):
        while not any(line.corpus_id == other.corpus_id and line.document_id for line in lines):
            await asyncio.sleep(0.1)
    events.cancel()
    with contextlib.suppress(asyncio.CancelledError, grpc.aio.AioRpcError):
        await heard
    assert made.corpus_id not in {line.corpus_id for line in lines if line.document_id}
