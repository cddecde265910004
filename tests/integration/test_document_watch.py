"""The live document list over real PostgreSQL (LISTEN/NOTIFY from migration 0032's triggers) and a
real gRPC server: WatchDocuments, BatchGetDocuments, and a job refused for a reason waiting cannot
fix. Content-index and the embedder are fakes at their ports; the whole chain with the real
services is test_a_watcher_sees_an_upload_through_the_real_services below."""

from __future__ import annotations

import asyncio
import contextlib

import grpc
import pytest
from knowledge.v1 import ingest_pb2
from knowledge_ingest.bootstrap import build_app
from knowledge_ingest.config import IngestSettings
from knowledge_runtime.auth import PUBLIC_CAPABILITIES
from knowledge_runtime.db.pool import Database
from knowledge_runtime.reach import PLATFORM_TENANT
from knowledge_runtime.refusals import REFUSALS, Refusal, Refused
from knowledge_runtime.settings import Env
from knowledge_runtime.system_corpora import PLATFORM_ADMIN

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
    wait_terminal,
    wire_fakes,
)
from tests.support.platform import drop_platform_corpora
from tests.support.real_services import ingest_env, start_backends

pytestmark = pytest.mark.integration

K = ingest_pb2.DocumentChangeKind
S = ingest_pb2.DocumentState
ORDER = [
    S.DOCUMENT_STATE_QUEUED,
    S.DOCUMENT_STATE_EXTRACTING,
    S.DOCUMENT_STATE_CHUNKING,
    S.DOCUMENT_STATE_EMBEDDING,
    S.DOCUMENT_STATE_STORING,
    S.DOCUMENT_STATE_SEARCHABLE,
]


def extract(path, filename: str, mime_type: str):
    from knowledge_ingest.domain.extraction import Extracted

    text = path.read_bytes().decode("utf-8", "replace")
    return Extracted(text=text, page_count=None, extractable=bool(text.strip()), format="text")


class RefusingEmbedder(CountingEmbedder):
    """Refuses every call for one reason of the closed set, as the embedder (or a quota) would."""

    def __init__(self) -> None:
        super().__init__()
        self.refusal: Refusal | None = None

    async def embed(self, tenant, texts, tokenizer=""):
        if self.refusal is not None:
            self.calls += 1
            raise Refused(self.refusal, f"refused: {self.refusal.value.lower()}")
        return await super().embed(tenant, texts, tokenizer)


@pytest.fixture
async def ingest(migrated_pg, verifier):
    db = await Database.connect(migrated_pg.url(user="knowledge_ingest"))
    admin = await Database.connect(migrated_pg.url())
    blobs, embedder = MemoryBlobs(admin), RefusingEmbedder()
    ingest = wire_fakes(settings(KNOWLEDGE_INGEST_EMBED_BATCH="2"), db, blobs, embedder, extract)
    app = ingest_app(ingest, verifier)
    port = await app.start()
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
    yield rpc.IngestStub(channel), embedder, db
    await channel.close()
    await app.stop()
    await db.close()
    await admin.close()


class Watcher:
    """A WatchDocuments stream read in the background, its changes collected as they come."""

    def __init__(self, stub, metadata, corpus_id: str) -> None:
        self.call = stub.WatchDocuments(ingest_pb2.WatchDocumentsRequest(corpus_id=corpus_id), metadata=metadata)
        self.changes: list[ingest_pb2.DocumentChange] = []
        self._arrived = asyncio.Event()
        self._task = asyncio.create_task(self._read())

    async def _read(self) -> None:
        async for change in self.call:
            self.changes.append(change)
            self._arrived.set()

    async def until(self, predicate, timeout: float = 30.0) -> ingest_pb2.DocumentChange:
        """The first change (of those come so far or to come) that satisfies ``predicate``."""
        deadline = asyncio.get_running_loop().time() + timeout
        seen = 0
        while True:
            for change in self.changes[seen:]:
                if predicate(change):
                    return change
            seen = len(self.changes)
            if self._task.done():
                self._task.result()
                raise AssertionError(f"the watch ended: {self.changes}")
            self._arrived.clear()
            left = deadline - asyncio.get_running_loop().time()
            if left <= 0:
                raise AssertionError(f"no such change within {timeout} s: {self.changes}")
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._arrived.wait(), left)

    async def close(self) -> None:
        self.call.cancel()
        with contextlib.suppress(asyncio.CancelledError, grpc.aio.AioRpcError):
            await self._task


def states_of(changes, document_id: str) -> list[int]:
    """The document's states in the order the watcher saw them, repeats folded."""
    states: list[int] = []
    for change in changes:
        mine = change.document_id == document_id and change.kind == K.DOCUMENT_CHANGE_KIND_CHANGED
        if mine and (not states or states[-1] != change.document.state):
            states.append(change.document.state)
    return states


async def test_a_watcher_gets_the_list_then_each_change_as_it_is_committed(ingest, make_token):
    stub, embedder, _ = ingest
    metadata = auth(make_token, "t-watch")
    corpus_id = await new_corpus(stub, metadata)
    other_corpus = await new_corpus(stub, metadata)
    first = await wait_terminal(stub, metadata, (await upload(stub, metadata, corpus_id, b"An early note.")).job_id)
    watcher = Watcher(stub, metadata, corpus_id)
    try:
        synced = await watcher.until(lambda c: c.kind == K.DOCUMENT_CHANGE_KIND_SYNCED)
        assert not synced.document_id and not synced.HasField("document")
        snapshot = [c for c in watcher.changes if c.kind == K.DOCUMENT_CHANGE_KIND_SNAPSHOT]
        assert [c.document_id for c in snapshot] == [first.result.document_id]
        assert snapshot[0].document.state == S.DOCUMENT_STATE_SEARCHABLE and snapshot[0].document.stage == "searchable"

        embedder.gate = asyncio.Event()  # held in "embedding": the watcher must see it there, live
        reply = await upload(stub, metadata, corpus_id, document_text(4), "live.md")
        embedding = await watcher.until(
            lambda c: c.kind == K.DOCUMENT_CHANGE_KIND_CHANGED and c.document.state == S.DOCUMENT_STATE_EMBEDDING
        )
        document_id = embedding.document_id
        assert embedding.document.filename == "live.md" and embedding.document.stage.startswith("embedding 0/")
        assert embedding.document.job_id == reply.job_id
        # Still being ingested: its text is refused as INDEXING (waiting helps), not an empty page.
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await stub.GetDocumentText(ingest_pb2.GetDocumentTextRequest(document_id=document_id), metadata=metadata)
        assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
        assert "still being ingested" in refused.value.details()
        # Released one batch at a time, so each progress step commits apart from the next (steps
        # that commit together may reach a watcher as one change with the latest state).
        embedder.stagger_s = 0.3
        embedder.gate.set()
        done = await watcher.until(
            lambda c: c.document_id == document_id and c.document.state == S.DOCUMENT_STATE_SEARCHABLE
        )
        embedder.stagger_s = 0.0
        assert done.document.chunk_count > 4 and done.document.progress == 1.0
        states = states_of(watcher.changes, document_id)
        assert states == sorted(states, key=ORDER.index) and states[-1] == S.DOCUMENT_STATE_SEARCHABLE
        stages = [c.document.stage for c in watcher.changes if c.document_id == document_id]
        assert any(s.startswith("embedding ") and not s.startswith("embedding 0/") for s in stages), stages

        # A document of another corpus is not this watcher's; one moved out is REMOVED, one deleted too.
        elsewhere = await upload(stub, metadata, other_corpus, b"Somewhere else entirely.")
        await wait_terminal(stub, metadata, elsewhere.job_id)
        await stub.MoveDocuments(
            ingest_pb2.MoveDocumentsRequest(target_corpus_id=other_corpus, document_ids=[document_id]),
            metadata=metadata,
        )
        moved = await watcher.until(lambda c: c.kind == K.DOCUMENT_CHANGE_KIND_REMOVED)
        assert moved.document_id == document_id and not moved.HasField("document")
        await stub.DeleteDocument(
            ingest_pb2.DeleteDocumentRequest(document_id=first.result.document_id), metadata=metadata
        )
        deleted = await watcher.until(
            lambda c: c.kind == K.DOCUMENT_CHANGE_KIND_REMOVED and c.document_id == first.result.document_id
        )
        assert deleted is watcher.changes[-1]
        assert {c.document_id for c in watcher.changes} <= {"", first.result.document_id, document_id}
    finally:
        await watcher.close()


async def test_a_tenant_watching_a_platform_corpus_sees_the_platform_s_changes(ingest, make_token, migrated_pg):
    """A platform corpus's documents are the platform tenant's rows: a watcher of another tenant
    (who may read the corpus) is told of them all the same."""
    stub, *_ = ingest
    curator = [("authorization", f"Bearer {make_token(PLATFORM_TENANT, [*PUBLIC_CAPABILITIES, PLATFORM_ADMIN])}")]
    admin = await Database.connect(migrated_pg.url())
    try:
        created = await stub.CreateCorpus(
            ingest_pb2.CreateCorpusRequest(name="watched-handbook", platform_wide=True), metadata=curator
        )
        watcher = Watcher(stub, auth(make_token, "t-watch-platform"), created.corpus_id)
        try:
            await watcher.until(lambda c: c.kind == K.DOCUMENT_CHANGE_KIND_SYNCED)
            reply = await upload(stub, curator, created.corpus_id, b"Shared for every tenant.", "shared.md")
            job = await wait_terminal(stub, curator, reply.job_id)
            done = await watcher.until(
                lambda c: c.document_id == job.result.document_id and c.document.state == S.DOCUMENT_STATE_SEARCHABLE
            )
            assert done.document.filename == "shared.md"
        finally:
            await watcher.close()
    finally:
        await drop_platform_corpora(admin)
        await admin.close()


async def test_another_tenant_s_corpus_cannot_be_watched(ingest, make_token):
    stub, *_ = ingest
    corpus_id = await new_corpus(stub, auth(make_token, "t-watch-owner"))
    for corpus in (corpus_id, "999999999", "01"):
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            async for _ in stub.WatchDocuments(
                ingest_pb2.WatchDocumentsRequest(corpus_id=corpus), metadata=auth(make_token, "t-watch-other")
            ):
                pass
        assert caught.value.code() == grpc.StatusCode.NOT_FOUND


async def test_batch_get_answers_in_order_and_lists_what_is_not_the_tenant_s(ingest, make_token):
    stub, *_ = ingest
    mine, theirs = auth(make_token, "t-batch"), auth(make_token, "t-batch-other")
    corpus_id = await new_corpus(stub, mine)
    ids = []
    for n in range(3):
        job = await wait_terminal(stub, mine, (await upload(stub, mine, corpus_id, f"Note {n}.".encode())).job_id)
        ids.append(job.result.document_id)
    other = await new_corpus(stub, theirs)
    foreign = (await wait_terminal(stub, theirs, (await upload(stub, theirs, other, b"Theirs.")).job_id)).result
    asked = [ids[2], foreign.document_id, ids[0], "nope", ids[2], "123456789012"]
    reply = await stub.BatchGetDocuments(ingest_pb2.BatchGetDocumentsRequest(document_ids=asked), metadata=mine)
    assert [d.document_id for d in reply.documents] == [ids[2], ids[0]]
    assert list(reply.not_found_ids) == [foreign.document_id, "nope", "123456789012"]
    assert reply.documents[0].state == S.DOCUMENT_STATE_SEARCHABLE and reply.documents[0].stage == "searchable"
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.BatchGetDocuments(
            ingest_pb2.BatchGetDocumentsRequest(document_ids=[str(n) for n in range(1, 102)]), metadata=mine
        )
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT


async def test_a_job_refused_for_a_reason_waiting_cannot_fix_fails_once_with_the_reason(ingest, make_token):
    stub, embedder, db = ingest
    metadata = auth(make_token, "t-refused")
    corpus_id = await new_corpus(stub, metadata)
    embedder.refusal = Refusal.QUOTA_EXHAUSTED
    job = await wait_terminal(stub, metadata, (await upload(stub, metadata, corpus_id, document_text(2))).job_id)
    assert job.state == S.DOCUMENT_STATE_FAILED and job.attempt == 1  # not retried
    assert REFUSALS[Refusal.QUOTA_EXHAUSTED].plain in job.error
    document = await stub.GetDocument(
        ingest_pb2.GetDocumentRequest(document_id=await document_of(db, job.job_id)), metadata=metadata
    )
    assert document.state == S.DOCUMENT_STATE_FAILED and document.refusal_reason == "QUOTA_EXHAUSTED"
    # Once fixed, a retry ingests it, and the reason is gone with the failure.
    embedder.refusal = None
    await stub.RetryIngestJob(ingest_pb2.RetryIngestJobRequest(job_id=job.job_id), metadata=metadata)
    again = await wait_terminal(stub, metadata, job.job_id)
    assert again.state == S.DOCUMENT_STATE_SEARCHABLE
    document = await stub.GetDocument(
        ingest_pb2.GetDocumentRequest(document_id=document.document_id), metadata=metadata
    )
    assert document.refusal_reason == "" and document.error == ""


async def test_a_job_refused_for_a_reason_waiting_can_fix_is_retried(ingest, make_token):
    stub, embedder, _ = ingest
    metadata = auth(make_token, "t-refused-transient")
    corpus_id = await new_corpus(stub, metadata)
    embedder.refusal = Refusal.RUNTIME_UNAVAILABLE
    reply = await upload(stub, metadata, corpus_id, b"Wait for the model.")
    for _ in range(200):  # the first attempt is refused and the job queued again
        if embedder.calls >= 1:
            break
        await asyncio.sleep(0.05)
    embedder.refusal = None
    job = await wait_terminal(stub, metadata, reply.job_id)
    assert job.state == S.DOCUMENT_STATE_SEARCHABLE and job.attempt >= 2


async def document_of(db: Database, job_id: str) -> str:
    import uuid

    return str(await db.fetchval("t", "SELECT document_id FROM ingest_jobs WHERE job_id = $1", uuid.UUID(job_id)))


@pytest.fixture
async def backends(migrated_pg, keys_dir, tmp_path):
    apps, addresses = await start_backends(migrated_pg, keys_dir, tmp_path)
    yield tmp_path, addresses
    for app in apps:
        await app.stop()


async def test_a_watcher_sees_an_upload_through_the_real_services(backends, migrated_pg, keys_dir, make_token):
    """Real content-index, the embedder with the real model, PostgreSQL: one client watches, another
    uploads, and the watcher sees the document move through its stages to searchable."""
    tmp, addresses = backends
    app = await build_app(IngestSettings.from_env(Env(ingest_env(migrated_pg, keys_dir, tmp, addresses, 0))))
    port = await app.start()
    try:
        async with (
            grpc.aio.insecure_channel(f"127.0.0.1:{port}") as watching,
            grpc.aio.insecure_channel(f"127.0.0.1:{port}") as uploading,
        ):
            token = make_token("watch-stack", ["corpus.create", "corpus.read", "document.upload"])
            metadata = [("authorization", f"Bearer {token}")]
            uploader = rpc.IngestStub(uploading)
            corpus_id = await new_corpus(uploader, metadata)
            watcher = Watcher(rpc.IngestStub(watching), metadata, corpus_id)
            try:
                await watcher.until(lambda c: c.kind == K.DOCUMENT_CHANGE_KIND_SYNCED)
                reply = await upload(uploader, metadata, corpus_id, document_text(8), "handbook.md")
                done = await watcher.until(
                    lambda c: (
                        c.kind == K.DOCUMENT_CHANGE_KIND_CHANGED and c.document.state == S.DOCUMENT_STATE_SEARCHABLE
                    ),
                    timeout=120,
                )
                assert done.document.job_id == reply.job_id and done.document.chunk_count > 8
                states = states_of(watcher.changes, done.document_id)
                assert states == sorted(states, key=ORDER.index), states
                assert S.DOCUMENT_STATE_EMBEDDING in states and len(states) >= 3, states
            finally:
                await watcher.close()
    finally:
        await app.stop()


async def test_a_corpus_outside_the_caller_s_scope_is_neither_watched_nor_batch_got(ingest, make_token):
    """The live list obeys reach: a sibling scope's corpus is 404 to watch, and its
    documents are among the not-found ids of a batch, as if absent."""
    stub, *_ = ingest
    capabilities = ["corpus.create", "corpus.read", "document.upload", "corpus.bind"]

    def scoped(node: str) -> list[tuple[str, str]]:
        return [("authorization", f"Bearer {make_token('t-watch-scopes', capabilities, scope=node)}")]

    root = scoped("/")
    corpus_id = await new_corpus(stub, root)
    job = await wait_terminal(stub, root, (await upload(stub, root, corpus_id, b"A billing note.")).job_id)
    document_id = job.result.document_id
    await stub.BindCorpus(
        ingest_pb2.BindCorpusRequest(corpus_id=corpus_id, scope="workspace:eng/project:billing"), metadata=root
    )
    await stub.BindCorpus(  # a sibling node, so that the tenant has it
        ingest_pb2.BindCorpusRequest(corpus_id=await new_corpus(stub, root), scope="workspace:eng/project:ops"),
        metadata=root,
    )
    inside, sibling = scoped("workspace:eng/project:billing"), scoped("workspace:eng/project:ops")
    reply = await stub.BatchGetDocuments(
        ingest_pb2.BatchGetDocumentsRequest(document_ids=[document_id]), metadata=inside
    )
    assert [d.document_id for d in reply.documents] == [document_id]
    reply = await stub.BatchGetDocuments(
        ingest_pb2.BatchGetDocumentsRequest(document_ids=[document_id]), metadata=sibling
    )
    assert list(reply.documents) == [] and list(reply.not_found_ids) == [document_id]
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        async for _ in stub.WatchDocuments(ingest_pb2.WatchDocumentsRequest(corpus_id=corpus_id), metadata=sibling):
            pass
    assert caught.value.code() == grpc.StatusCode.NOT_FOUND
