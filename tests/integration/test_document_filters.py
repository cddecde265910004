"""Filters on the listings, over real PostgreSQL and a real ingest gRPC server (content-index and
the embedder as fakes at its ports): ListDocuments and WatchDocuments keep the documents a filter
holds for, over their metadata and built-in fields; a watch tells a document coming to hold
(CHANGED) and ceasing to (REMOVED); a malformed filter is INVALID_ARGUMENT at its column."""

from __future__ import annotations

import asyncio

import grpc
import pytest
from google.protobuf import struct_pb2
from knowledge.v1 import ingest_pb2

from tests.support.ingest import auth, new_corpus, partial_text_extract, running_fakes, wait_terminal
from tests.support.rpc import error_info

pytestmark = pytest.mark.integration
K = ingest_pb2.DocumentChangeKind


@pytest.fixture
async def ingest(migrated_pg, verifier):
    async with running_fakes(migrated_pg, verifier, partial_text_extract) as parts:
        yield parts


def struct(values: dict) -> struct_pb2.Struct:
    message = struct_pb2.Struct()
    message.update(values)
    return message


async def add(stub, metadata, corpus_id: str, title: str, values: dict) -> str:
    accepted = await stub.IngestText(
        ingest_pb2.IngestTextRequest(
            corpus_id=corpus_id, text=f"Text of {title}.", title=title, metadata=struct(values)
        ),
        metadata=metadata,
    )
    job = await wait_terminal(stub, metadata, accepted.job_id)
    return job.result.document_id


async def listed(stub, metadata, corpus_id: str, text: str) -> list[str]:
    reply = await stub.ListDocuments(
        ingest_pb2.ListDocumentsRequest(corpus_id=corpus_id, filter=text), metadata=metadata
    )
    return [d.filename for d in reply.documents]


async def test_list_documents_keeps_the_documents_a_filter_holds_for(ingest, make_token):
    stub, *_ = ingest
    metadata = auth(make_token, "t-list-filter")
    corpus_id = await new_corpus(stub, metadata)
    await add(stub, metadata, corpus_id, "a", {"team": "blue", "year": 2024, "tags": ["hr"]})
    await add(stub, metadata, corpus_id, "b", {"team": "red", "year": 2025})
    await add(stub, metadata, corpus_id, "c", {"team": "blue", "year": 2026, "draft": True})
    assert await listed(stub, metadata, corpus_id, "") == ["a.txt", "b.txt", "c.txt"]
    assert await listed(stub, metadata, corpus_id, 'metadata.team = "blue"') == ["a.txt", "c.txt"]
    assert await listed(stub, metadata, corpus_id, "metadata.year IN (2024, 2025)") == ["a.txt", "b.txt"]
    assert await listed(stub, metadata, corpus_id, 'metadata.tags:"hr" OR metadata.draft = true') == ["a.txt", "c.txt"]
    assert await listed(stub, metadata, corpus_id, 'NOT metadata.draft:* AND filename = "b.txt"') == ["b.txt"]
    assert await listed(stub, metadata, corpus_id, 'state = "SEARCHABLE" AND mime_type = "text/plain*"') == [
        "a.txt",
        "b.txt",
        "c.txt",
    ]
    assert await listed(stub, metadata, corpus_id, 'create_time > "2000-01-01T00:00:00Z" AND metadata.year > 2025') == [
        "c.txt"
    ]
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await listed(stub, metadata, corpus_id, "metadata.year >= AND")
    info = error_info(caught.value)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert (info.reason, info.metadata["column"]) == ("FILTER_INVALID", "18")
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await listed(stub, metadata, corpus_id, 'section = "x"')  # a chunk's, not a document's
    assert (error_info(caught.value).reason, error_info(caught.value).metadata["column"]) == ("FILTER_INVALID", "1")


async def test_a_filtered_watch_tells_documents_coming_to_hold_and_ceasing_to(ingest, make_token):
    stub, *_ = ingest
    metadata = auth(make_token, "t-watch-filter")
    corpus_id = await new_corpus(stub, metadata)
    blue = await add(stub, metadata, corpus_id, "blue", {"team": "blue"})
    red = await add(stub, metadata, corpus_id, "red", {"team": "red"})
    changes: list = []
    synced = asyncio.Event()

    async def watch() -> None:
        request = ingest_pb2.WatchDocumentsRequest(corpus_id=corpus_id, filter='metadata.team = "blue"')
        async for change in stub.WatchDocuments(request, metadata=metadata):
            changes.append(change)
            if change.kind == K.DOCUMENT_CHANGE_KIND_SYNCED:
                synced.set()

    task = asyncio.create_task(watch())
    try:
        await asyncio.wait_for(synced.wait(), 10)
        assert [(c.kind, c.document_id) for c in changes] == [
            (K.DOCUMENT_CHANGE_KIND_SNAPSHOT, blue),
            (K.DOCUMENT_CHANGE_KIND_SYNCED, ""),
        ]
        for document_id, team in ((red, "blue"), (blue, "red")):
            await stub.UpdateDocument(
                ingest_pb2.UpdateDocumentRequest(
                    document_id=document_id, document=ingest_pb2.Document(metadata=struct({"team": team}))
                ),
                metadata=metadata,
            )
        for _ in range(100):
            if len(changes) >= 4:
                break
            await asyncio.sleep(0.05)
        assert [(c.kind, c.document_id) for c in changes[2:]] == [
            (K.DOCUMENT_CHANGE_KIND_CHANGED, red),
            (K.DOCUMENT_CHANGE_KIND_REMOVED, blue),
        ]
        assert changes[2].document.metadata["team"] == "blue"
    finally:
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)
