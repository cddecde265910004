"""Deletion as a durable job with tombstones, over real PostgreSQL and a real gRPC
ingest (content-index and the embedder as fakes at their ports): a deleted document is gone from
every read at the commit while its removal is still pending, its tombstone is listed for audit,
a running ingest of it is cancelled, a removal killed mid-job completes after a restart, a corpus
is deleted the same way, and tombstones are pruned after their retention."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import grpc
import pytest
from knowledge.v1 import ingest_pb2
from knowledge_ingest.deletion.postgres import PostgresTombstones
from knowledge_ingest.deletion.workers import RemovalWorkers
from knowledge_ingest.domain.extraction import Extracted
from knowledge_runtime.db.pool import Database

from tests.support import rpc
from tests.support.ingest import (
    CountingEmbedder,
    MemoryBlobs,
    auth,
    document_text,
    ingest_app,
    new_corpus,
    settings,
    upload,
    wait_removed,
    wait_terminal,
    wire_fakes,
)
from tests.support.rpc import error_info

pytestmark = pytest.mark.integration

AUDITOR = ["audit.read"]


def extract(path: Path, filename: str, mime_type: str) -> Extracted:
    text = path.read_text()
    return Extracted(text=text, page_count=None, extractable=bool(text.strip()), format="text")


@pytest.fixture
async def ingest(migrated_pg, verifier):
    """Ingest with its job workers; removals run only when a test starts them (``removals``)."""
    db = await Database.connect(migrated_pg.url(user="knowledge_ingest"))
    admin = await Database.connect(migrated_pg.url())
    blobs, embedder = MemoryBlobs(admin), CountingEmbedder()
    ingest = wire_fakes(settings(), db, blobs, embedder, extract)
    ingest.background.loops = [s for s in ingest.background.loops if not isinstance(s, RemovalWorkers)]
    app = ingest_app(ingest, verifier)
    port = await app.start()
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
    started: list[RemovalWorkers] = []

    async def removals(**kwargs) -> RemovalWorkers:
        options = {"count": 1, "lease_s": 1.0, "retention_s": 86400.0, "poll_s": 0.05} | kwargs
        tombstones = options.pop("tombstones", PostgresTombstones(db))
        running = RemovalWorkers(tombstones, **options)
        await running.start()
        started.append(running)
        return running

    yield rpc.IngestStub(channel), db, embedder, removals
    for running in started:
        await running.stop()
    await channel.close()
    await app.stop()
    await db.close()
    await admin.close()


async def searchable(stub, metadata, corpus_id: str, data: bytes, filename: str = "notes.txt") -> ingest_pb2.IngestJob:
    job = await wait_terminal(stub, metadata, (await upload(stub, metadata, corpus_id, data, filename)).job_id)
    assert job.state == ingest_pb2.DOCUMENT_STATE_SEARCHABLE
    return job


async def code_of(call) -> grpc.StatusCode:
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await call
    return caught.value.code()


async def chunks_of(db: Database, document_id: int) -> int:
    return await db.fetchval("t", "SELECT count(*) FROM chunks WHERE document_id = $1", document_id)


async def test_a_deleted_document_leaves_every_read_at_once_and_its_removal_completes(ingest, make_token):
    stub, db, _, removals = ingest
    tenant = "t-tomb-reads"
    metadata = auth(make_token, tenant)
    auditor = [("authorization", f"Bearer {make_token(tenant, capabilities=AUDITOR)}")]
    corpus_id = await new_corpus(stub, metadata, "Handbook")
    data = document_text(3)
    job = await searchable(stub, metadata, corpus_id, data, "handbook.txt")
    kept = await searchable(stub, metadata, corpus_id, document_text(2) + b" kept", "kept.txt")
    document_id = job.result.document_id
    chunk_count = job.result.chunk_count

    deleted = await stub.DeleteDocument(
        ingest_pb2.DeleteDocumentRequest(document_id=document_id, reason="  superseded by v2 "), metadata=metadata
    )
    tombstone = deleted.tombstone
    assert deleted.document_id == document_id and deleted.deleted_chunk_count == chunk_count
    assert (tombstone.document_id, tombstone.corpus_id, tombstone.filename) == (document_id, corpus_id, "handbook.txt")
    assert (tombstone.chunk_count, tombstone.deleted_by, tombstone.reason) == (chunk_count, "dev", "superseded by v2")
    assert tombstone.removal_state == "pending" and not tombstone.HasField("remove_time")
    blob_hash = await db.fetchval(
        "t",
        "SELECT b.content_hash FROM documents d JOIN content_blobs b USING (blob_id) WHERE d.document_id = $1",
        int(document_id),
    )
    assert tombstone.content_hash == blob_hash and tombstone.HasField("delete_time")

    # The removal has not run: the chunks are still there, yet no read finds the document.
    assert await chunks_of(db, int(document_id)) == chunk_count
    for call in (
        stub.GetDocument(ingest_pb2.GetDocumentRequest(document_id=document_id), metadata=metadata),
        stub.GetDocumentText(ingest_pb2.GetDocumentTextRequest(document_id=document_id), metadata=metadata),
        stub.DeleteDocument(ingest_pb2.DeleteDocumentRequest(document_id=document_id), metadata=metadata),
        stub.GetIngestJob(ingest_pb2.GetIngestJobRequest(job_id=job.job_id), metadata=metadata),
        stub.RetryIngestJob(ingest_pb2.RetryIngestJobRequest(job_id=job.job_id), metadata=metadata),
        stub.CancelIngestJob(ingest_pb2.CancelIngestJobRequest(job_id=job.job_id), metadata=metadata),
        stub.MoveDocuments(
            ingest_pb2.MoveDocumentsRequest(target_corpus_id=corpus_id, document_ids=[document_id]), metadata=metadata
        ),
    ):
        assert await code_of(call) == grpc.StatusCode.NOT_FOUND
    listed = await stub.ListDocuments(ingest_pb2.ListDocumentsRequest(corpus_id=corpus_id), metadata=metadata)
    assert [d.document_id for d in listed.documents] == [kept.result.document_id]
    batch = await stub.BatchGetDocuments(
        ingest_pb2.BatchGetDocumentsRequest(document_ids=[document_id, kept.result.document_id]), metadata=metadata
    )
    assert list(batch.not_found_ids) == [document_id] and len(batch.documents) == 1
    corpora = await stub.ListCorpora(ingest_pb2.ListCorporaRequest(), metadata=metadata)
    assert [(c.document_count, c.chunk_count) for c in corpora.corpora] == [(1, kept.result.chunk_count)]
    context = await stub.GetPromptContext(ingest_pb2.GetPromptContextRequest(), metadata=metadata)
    assert "1 documents" in context.text
    usage = await stub.GetUsage(ingest_pb2.GetUsageRequest(), metadata=metadata)
    assert (usage.document_count, usage.chunk_count) == (1, kept.result.chunk_count)
    event = await db.fetchrow(
        "t", "SELECT corpus_id, detail FROM events WHERE tenant_id = $1 AND type = 'document.removed'", tenant
    )
    assert event["corpus_id"] == int(corpus_id) and '"chunk_count": ' + str(chunk_count) in event["detail"]

    # The same bytes uploaded again are a new document, not the deleted one brought back.
    again = await searchable(stub, metadata, corpus_id, data, "handbook.txt")
    assert again.result.document_id != document_id and not again.result.duplicate

    await removals()
    await wait_removed(db, int(document_id))
    assert await chunks_of(db, int(document_id)) == 0
    assert await db.fetchval("t", "SELECT count(*) FROM documents WHERE document_id = $1", int(document_id)) == 0
    assert await chunks_of(db, int(again.result.document_id)) == again.result.chunk_count  # untouched
    assert (
        await code_of(stub.GetDocument(ingest_pb2.GetDocumentRequest(document_id=document_id), metadata=metadata))
        == grpc.StatusCode.NOT_FOUND
    )

    listing = await stub.ListTombstones(ingest_pb2.ListTombstonesRequest(), metadata=auditor)
    [done] = listing.tombstones
    assert done.document_id == document_id and done.removal_state == "done" and done.HasField("remove_time")
    assert done.tombstone_id == tombstone.tombstone_id and not listing.next_page_token
    # audit.read is not in an ordinary token; another tenant sees none of them.
    assert (
        await code_of(stub.ListTombstones(ingest_pb2.ListTombstonesRequest(), metadata=metadata))
        == grpc.StatusCode.PERMISSION_DENIED
    )
    other = [("authorization", f"Bearer {make_token('t-tomb-other', capabilities=AUDITOR)}")]
    assert not (await stub.ListTombstones(ingest_pb2.ListTombstonesRequest(), metadata=other)).tombstones


async def test_tombstones_page_and_filter_by_corpus(ingest, make_token):
    stub, _, _, _ = ingest
    tenant = "t-tomb-pages"
    metadata = auth(make_token, tenant)
    auditor = [("authorization", f"Bearer {make_token(tenant, capabilities=AUDITOR)}")]
    first, second = await new_corpus(stub, metadata), await new_corpus(stub, metadata)
    deleted = []
    for corpus_id, n in ((first, 1), (first, 2), (second, 3)):
        job = await searchable(stub, metadata, corpus_id, document_text(n) + f" doc{n}".encode())
        await stub.DeleteDocument(
            ingest_pb2.DeleteDocumentRequest(document_id=job.result.document_id), metadata=metadata
        )
        deleted.append(job.result.document_id)
    page = await stub.ListTombstones(ingest_pb2.ListTombstonesRequest(page_size=2), metadata=auditor)
    assert [t.document_id for t in page.tombstones] == deleted[:2] and page.next_page_token
    rest = await stub.ListTombstones(
        ingest_pb2.ListTombstonesRequest(page_size=2, page_token=page.next_page_token), metadata=auditor
    )
    assert [t.document_id for t in rest.tombstones] == deleted[2:] and not rest.next_page_token
    only = await stub.ListTombstones(ingest_pb2.ListTombstonesRequest(corpus_id=second), metadata=auditor)
    assert [t.document_id for t in only.tombstones] == deleted[2:]
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.ListTombstones(ingest_pb2.ListTombstonesRequest(page_token="forged"), metadata=auditor)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT


async def test_a_tombstone_is_listed_only_to_a_caller_who_could_read_its_corpus(ingest, make_token):
    stub, _, _, _ = ingest
    tenant = "t-tomb-scopes"
    root = auth(make_token, tenant)
    corpus_id = await new_corpus(stub, root, "Sales")
    job = await searchable(stub, root, corpus_id, document_text(1) + b" sales")
    await stub.BindCorpus(ingest_pb2.BindCorpusRequest(corpus_id=corpus_id, scope="workspace:sales"), metadata=root)
    sales = [("authorization", f"Bearer {make_token(tenant, scope='workspace:sales')}")]
    assert (
        await code_of(  # the root's token no longer reaches it
            stub.DeleteDocument(ingest_pb2.DeleteDocumentRequest(document_id=job.result.document_id), metadata=root)
        )
        == grpc.StatusCode.NOT_FOUND
    )
    await stub.DeleteDocument(ingest_pb2.DeleteDocumentRequest(document_id=job.result.document_id), metadata=sales)

    def auditor(scope: str) -> list[tuple[str, str]]:
        return [("authorization", f"Bearer {make_token(tenant, capabilities=AUDITOR, scope=scope)}")]

    await stub.BindCorpus(
        ingest_pb2.BindCorpusRequest(corpus_id=await new_corpus(stub, root), scope="workspace:billing"), metadata=root
    )
    seen = await stub.ListTombstones(ingest_pb2.ListTombstonesRequest(), metadata=auditor("workspace:sales"))
    assert [t.document_id for t in seen.tombstones] == [job.result.document_id]
    unseen = await stub.ListTombstones(ingest_pb2.ListTombstonesRequest(), metadata=auditor("workspace:billing"))
    assert not unseen.tombstones


async def test_a_running_ingest_is_cancelled_and_its_late_writes_fail_harmlessly(ingest, make_token):
    stub, db, embedder, removals = ingest
    metadata = auth(make_token, "t-tomb-running")
    corpus_id = await new_corpus(stub, metadata)
    embedder.gate = asyncio.Event()  # the ingest stalls in embedding
    accepted = await upload(stub, metadata, corpus_id, document_text(4))
    job_id = uuid.UUID(accepted.job_id)
    for _ in range(200):
        row = await db.fetchrow("t", "SELECT document_id, state FROM ingest_jobs WHERE job_id = $1", job_id)
        if row["state"] == "EMBEDDING":
            break
        await asyncio.sleep(0.05)
    assert row["state"] == "EMBEDDING"
    document_id = row["document_id"]
    deleted = await stub.DeleteDocument(
        ingest_pb2.DeleteDocumentRequest(document_id=str(document_id)), metadata=metadata
    )
    assert deleted.cancelled_job_id == accepted.job_id and deleted.deleted_chunk_count == 0
    embedder.gate.set()  # the worker finishes embedding; its storing transaction finds no job
    await asyncio.sleep(1.0)
    assert await chunks_of(db, document_id) == 0
    assert (
        await code_of(stub.GetIngestJob(ingest_pb2.GetIngestJobRequest(job_id=accepted.job_id), metadata=metadata))
        == grpc.StatusCode.NOT_FOUND
    )
    await removals()
    await wait_removed(db, document_id)
    assert await db.fetchval("t", "SELECT count(*) FROM documents WHERE document_id = $1", document_id) == 0
    assert await chunks_of(db, document_id) == 0


class StallAfterFirstBatch:
    """The real adapter, holding the removal after its first committed batch (where the test kills it)."""

    def __init__(self, inner: PostgresTombstones) -> None:
        self._inner = inner
        self.first_batch_done = asyncio.Event()

    def __getattr__(self, name):
        return getattr(self._inner, name)

    async def remove_batch(self, removal, batch, lease_s):
        deleted = await self._inner.remove_batch(removal, batch, lease_s)
        self.first_batch_done.set()
        await asyncio.Event().wait()  # forever: until the worker is killed
        return deleted


async def test_a_removal_killed_mid_job_completes_after_a_restart(ingest, make_token):
    stub, db, _, removals = ingest
    metadata = auth(make_token, "t-tomb-crash")
    corpus_id = await new_corpus(stub, metadata)
    job = await searchable(stub, metadata, corpus_id, document_text(8))
    document_id, total = int(job.result.document_id), job.result.chunk_count
    assert total > 4
    await stub.DeleteDocument(ingest_pb2.DeleteDocumentRequest(document_id=str(document_id)), metadata=metadata)

    stalled = StallAfterFirstBatch(PostgresTombstones(db))
    first = await removals(tombstones=stalled, batch=2, lease_s=1.0)
    await asyncio.wait_for(stalled.first_batch_done.wait(), 10)
    await first.stop()  # killed mid-job: its lease is still held, two chunks gone, the rest left
    assert await chunks_of(db, document_id) == total - 2
    row = await db.fetchrow(
        "t", "SELECT removal_state, lease_owner FROM document_tombstones WHERE document_id = $1", document_id
    )
    assert row["removal_state"] == "PENDING" and row["lease_owner"] is not None

    await removals(batch=2, lease_s=1.0)  # the restart: claims it once the dead lease expires
    await wait_removed(db, document_id)
    assert await chunks_of(db, document_id) == 0
    assert await db.fetchval("t", "SELECT count(*) FROM documents WHERE document_id = $1", document_id) == 0
    interruptions = await db.fetchval(
        "t", "SELECT interruptions FROM document_tombstones WHERE document_id = $1", document_id
    )
    assert interruptions == 1


async def test_a_corpus_is_deleted_only_when_asked_to_delete_its_documents_too(ingest, make_token):
    stub, db, _, removals = ingest
    tenant = "t-tomb-corpus"
    metadata = auth(make_token, tenant)
    corpus_id = await new_corpus(stub, metadata, "Archive")
    jobs = [await searchable(stub, metadata, corpus_id, document_text(n) + f" c{n}".encode()) for n in (1, 2)]
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.DeleteCorpus(ingest_pb2.DeleteCorpusRequest(corpus_id=corpus_id), metadata=metadata)
    assert caught.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert error_info(caught.value).reason == "CORPUS_NOT_EMPTY" and "delete_documents" in caught.value.details()
    assert (
        len(
            (
                await stub.ListDocuments(ingest_pb2.ListDocumentsRequest(corpus_id=corpus_id), metadata=metadata)
            ).documents
        )
        == 2
    )
    other = auth(make_token, "t-tomb-corpus-other")
    assert (
        await code_of(
            stub.DeleteCorpus(
                ingest_pb2.DeleteCorpusRequest(corpus_id=corpus_id, delete_documents=True), metadata=other
            )
        )
        == grpc.StatusCode.NOT_FOUND
    )

    deleted = await stub.DeleteCorpus(
        ingest_pb2.DeleteCorpusRequest(corpus_id=corpus_id, delete_documents=True), metadata=metadata
    )
    ids = [j.result.document_id for j in jobs]
    assert deleted.deleted_document_count == 2 and [t.document_id for t in deleted.tombstones] == ids
    assert all(t.reason == "deleted with its corpus" for t in deleted.tombstones)
    assert not (await stub.ListCorpora(ingest_pb2.ListCorporaRequest(), metadata=metadata)).corpora
    for call in (
        stub.ListDocuments(ingest_pb2.ListDocumentsRequest(corpus_id=corpus_id), metadata=metadata),
        stub.GetDocument(ingest_pb2.GetDocumentRequest(document_id=ids[0]), metadata=metadata),
        upload(stub, metadata, corpus_id, b"into a deleted corpus"),
        stub.DeleteCorpus(
            ingest_pb2.DeleteCorpusRequest(corpus_id=corpus_id, delete_documents=True), metadata=metadata
        ),
    ):
        assert await code_of(call) == grpc.StatusCode.NOT_FOUND
    types = [r["type"] for r in await db.fetch("t", "SELECT type FROM events WHERE tenant_id = $1 ORDER BY id", tenant)]
    assert types[-3:] == ["document.removed", "document.removed", "corpus.deleted"]

    await removals()
    for document_id in ids:
        await wait_removed(db, int(document_id))
    assert await db.fetchval("t", "SELECT count(*) FROM corpora WHERE corpus_id = $1", int(corpus_id)) == 0
    # An empty corpus goes at once, and its name is free again.
    empty = await new_corpus(stub, metadata, "Archive")
    gone = await stub.DeleteCorpus(ingest_pb2.DeleteCorpusRequest(corpus_id=empty), metadata=metadata)
    assert gone.deleted_document_count == 0
    assert await db.fetchval("t", "SELECT count(*) FROM corpora WHERE corpus_id = $1", int(empty)) == 0


async def test_a_corpus_deleted_with_its_documents_frees_its_name_while_its_removals_are_pending(ingest, make_token):
    stub, db, *_ = ingest
    metadata = auth(make_token, "t-tomb-rename")
    corpus_id = await new_corpus(stub, metadata, "Ledger")
    job = await searchable(stub, metadata, corpus_id, document_text(1))
    await stub.DeleteCorpus(
        ingest_pb2.DeleteCorpusRequest(corpus_id=corpus_id, delete_documents=True), metadata=metadata
    )
    # No removal runs here: the deleted corpus's row stays until its document's removal is done.
    assert await db.fetchval("t", "SELECT count(*) FROM corpora WHERE corpus_id = $1", int(corpus_id)) == 1
    again = await new_corpus(stub, metadata, "Ledger")
    assert again != corpus_id
    listed = (await stub.ListCorpora(ingest_pb2.ListCorporaRequest(), metadata=metadata)).corpora
    assert [(c.corpus_id, c.name) for c in listed] == [(again, "Ledger")]
    assert await chunks_of(db, int(job.result.document_id)) == job.result.chunk_count  # still to be removed


async def test_tombstones_past_their_retention_are_pruned_once_removed(ingest, make_token, admin):
    stub, db, _, removals = ingest
    tenant = "t-tomb-prune"
    metadata = auth(make_token, tenant)
    corpus_id = await new_corpus(stub, metadata)
    old, pending = [
        (await searchable(stub, metadata, corpus_id, document_text(1) + f" p{n}".encode())).result.document_id
        for n in (1, 2)
    ]
    await stub.DeleteDocument(ingest_pb2.DeleteDocumentRequest(document_id=old), metadata=metadata)
    await removals(retention_s=3600.0, prune_every_s=0.1)
    await wait_removed(db, int(old))
    await stub.DeleteDocument(ingest_pb2.DeleteDocumentRequest(document_id=pending), metadata=metadata)
    await admin.execute(
        "UPDATE document_tombstones SET removal_state = 'PENDING', delete_time = now() - interval '2 hours', "
        "lease_owner = 'elsewhere', lease_expires_at = now() + interval '1 hour' WHERE document_id = $1",
        int(pending),
    )
    await admin.execute(
        "UPDATE document_tombstones SET delete_time = now() - interval '2 hours' WHERE document_id = $1", int(old)
    )
    for _ in range(100):
        left = [
            r["document_id"]
            for r in await admin.fetch("SELECT document_id FROM document_tombstones WHERE tenant_id = $1", tenant)
        ]
        if left == [int(pending)]:
            break
        await asyncio.sleep(0.05)
    assert left == [int(pending)]  # the old, removed one pruned; one still being removed is kept
