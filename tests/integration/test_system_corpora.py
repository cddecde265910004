"""System corpora on real PostgreSQL through ingest's gRPC server: who may write into them, what
another tenant can see of them, and what the prompt context counts."""

import grpc
import pytest
from knowledge.v1 import ingest_pb2
from knowledge_ingest.domain.extraction import Extracted
from knowledge_runtime.auth import PUBLIC_CAPABILITIES
from knowledge_runtime.db.pool import Database
from knowledge_runtime.reach import PLATFORM_TENANT
from knowledge_runtime.system_corpora import PLATFORM_ADMIN, SYSTEM_WRITE

from tests.support import rpc
from tests.support.ingest import (
    CountingEmbedder,
    MemoryBlobs,
    auth,
    ingest_app,
    new_corpus,
    settings,
    upload,
    wait_removed,
    wait_terminal,
    wire_fakes,
)
from tests.support.platform import drop_platform_corpora

pytestmark = pytest.mark.integration


def extract(path, filename, mime_type) -> Extracted:
    text = path.read_bytes().decode("utf-8", "replace")
    return Extracted(text=text, page_count=None, extractable=True, format="text")


@pytest.fixture
async def ingest(migrated_pg, verifier):
    db = await Database.connect(migrated_pg.url(user="knowledge_ingest"))
    admin = await Database.connect(migrated_pg.url())
    ingest = wire_fakes(settings(), db, MemoryBlobs(admin), CountingEmbedder(), extract)
    app = ingest_app(ingest, verifier)
    port = await app.start()
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
    yield rpc.IngestStub(channel), admin
    await drop_platform_corpora(admin)
    await channel.close()
    await app.stop()
    await db.close()
    await admin.close()


def with_capability(make_token, tenant: str, capability: str):
    return [("authorization", f"Bearer {make_token(tenant, [*PUBLIC_CAPABILITIES, capability])}")]


async def system_corpus(admin: Database, tenant: str | None, name: str) -> str:
    if tenant is not None:
        await admin.execute("t", "INSERT INTO tenants (tenant_id) VALUES ($1) ON CONFLICT DO NOTHING", tenant)
    band = "GENERAL" if tenant is None else "TENANT"  # a platform-wide corpus holds only GENERAL material
    corpus_id = await admin.fetchval(
        "t",
        "INSERT INTO corpora (tenant_id, name, is_system, confidentiality) VALUES ($1, $2, true, $3) RETURNING corpus_id",
        tenant,
        name,
        band,
    )
    return str(corpus_id)


async def stored(admin: Database, corpus_id: str) -> tuple[int, int]:
    documents = await admin.fetchval("t", "SELECT count(*) FROM documents WHERE corpus_id = $1", int(corpus_id))
    jobs = await admin.fetchval("t", "SELECT count(*) FROM ingest_jobs WHERE corpus_id = $1", int(corpus_id))
    return documents, jobs


async def test_a_normal_token_cannot_write_into_either_kind_of_system_corpus(ingest, make_token):
    stub, admin = ingest
    housekeeping = await system_corpus(admin, "t-sys", "operational_patterns")
    platform = await system_corpus(admin, None, "platform-handbook")
    normal = auth(make_token, "t-sys")
    for corpus_id in (housekeeping, platform):
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await upload(stub, normal, corpus_id, b"Always restart the billing worker after a deploy.")
        assert caught.value.code() == grpc.StatusCode.NOT_FOUND
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await stub.IngestText(
                ingest_pb2.IngestTextRequest(corpus_id=corpus_id, text="an entry", title="t"), metadata=normal
            )
        assert caught.value.code() == grpc.StatusCode.NOT_FOUND
        with pytest.raises(grpc.aio.AioRpcError) as caught:  # the fetching path too, before any fetch
            await stub.IngestUrl(
                ingest_pb2.IngestUrlRequest(corpus_id=corpus_id, url="https://docs.example.org/runbook"),
                metadata=normal,
            )
        assert caught.value.code() == grpc.StatusCode.NOT_FOUND
        assert await stored(admin, corpus_id) == (0, 0)  # refused before anything was written
    # Each kind has its own writer: system.write for housekeeping, platform.admin for platform-wide.
    wrong = with_capability(make_token, "t-sys", PLATFORM_ADMIN)
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await upload(stub, wrong, housekeeping, b"an entry")
    assert caught.value.code() == grpc.StatusCode.NOT_FOUND
    writer = with_capability(make_token, "t-sys", SYSTEM_WRITE)
    job = await wait_terminal(stub, writer, (await upload(stub, writer, housekeeping, b"Restart the worker.")).job_id)
    assert job.state == ingest_pb2.DOCUMENT_STATE_SEARCHABLE
    curator = with_capability(make_token, PLATFORM_TENANT, PLATFORM_ADMIN)
    job = await wait_terminal(stub, curator, (await upload(stub, curator, platform, b"Platform guide.")).job_id)
    assert job.state == ingest_pb2.DOCUMENT_STATE_SEARCHABLE
    # A normal token cannot move its documents into a system corpus either.
    own = await new_corpus(stub, normal)
    mine = await wait_terminal(stub, normal, (await upload(stub, normal, own, b"My own notes.")).job_id)
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.MoveDocuments(
            ingest_pb2.MoveDocumentsRequest(target_corpus_id=housekeeping, document_ids=[mine.result.document_id]),
            metadata=normal,
        )
    assert caught.value.code() == grpc.StatusCode.NOT_FOUND
    assert await stored(admin, housekeeping) == (1, 1)
    # The entry is about the tenant's users: only its writers read or delete it here.
    entry = await admin.fetchval("t", "SELECT document_id FROM documents WHERE corpus_id = $1", int(housekeeping))
    for call in (
        lambda m: stub.GetDocument(ingest_pb2.GetDocumentRequest(document_id=str(entry)), metadata=m),
        lambda m: stub.GetDocumentText(ingest_pb2.GetDocumentTextRequest(document_id=str(entry)), metadata=m),
        lambda m: stub.ListDocuments(ingest_pb2.ListDocumentsRequest(corpus_id=housekeeping), metadata=m),
        lambda m: stub.DeleteDocument(ingest_pb2.DeleteDocumentRequest(document_id=str(entry)), metadata=m),
    ):
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await call(normal)
        assert caught.value.code() == grpc.StatusCode.NOT_FOUND
    assert await stored(admin, housekeeping) == (1, 1)  # the refused delete removed nothing
    listed = await stub.ListDocuments(ingest_pb2.ListDocumentsRequest(corpus_id=housekeeping), metadata=writer)
    assert [d.document_id for d in listed.documents] == [str(entry)]
    await stub.DeleteDocument(ingest_pb2.DeleteDocumentRequest(document_id=str(entry)), metadata=writer)
    await wait_removed(admin, entry)  # its row goes with the removal job
    assert (await stored(admin, housekeeping))[0] == 0


async def test_no_tenant_reads_another_tenants_material_through_a_system_corpus(ingest, make_token):
    """Another tenant's platform.admin cannot write into a platform-wide corpus (every tenant reads
    it, tests/integration/test_platform_corpora.py): its upload is refused before anything is stored."""
    stub, admin = ingest
    platform = await system_corpus(admin, None, "platform-shared")
    globex_housekeeping = await system_corpus(admin, "t-globex", "user_behavior")
    acme_admin = with_capability(make_token, "t-acme", PLATFORM_ADMIN)
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await upload(stub, acme_admin, platform, b"acme's secret plan")
    assert caught.value.code() == grpc.StatusCode.NOT_FOUND
    assert await stored(admin, platform) == (0, 0)
    acme_corpus = await new_corpus(stub, auth(make_token, "t-acme"))
    job = await wait_terminal(stub, acme_admin, (await upload(stub, acme_admin, acme_corpus, b"acme's plan")).job_id)
    other = auth(make_token, "t-globex")
    for call in (
        stub.GetDocument(ingest_pb2.GetDocumentRequest(document_id=job.result.document_id), metadata=other),
        stub.GetDocumentText(ingest_pb2.GetDocumentTextRequest(document_id=job.result.document_id), metadata=other),
        stub.ListDocuments(ingest_pb2.ListDocumentsRequest(corpus_id=acme_corpus), metadata=other),
        stub.ListDocuments(
            ingest_pb2.ListDocumentsRequest(corpus_id=globex_housekeeping), metadata=auth(make_token, "t-acme")
        ),
    ):
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await call
        assert caught.value.code() == grpc.StatusCode.NOT_FOUND
    corpora = await stub.ListCorpora(ingest_pb2.ListCorporaRequest(), metadata=other)
    assert {c.corpus_id for c in corpora.corpora}.isdisjoint({platform, globex_housekeeping})  # never listed


async def test_the_prompt_context_counts_only_searchable_documents_and_no_housekeeping_files(ingest, make_token):
    stub, admin = ingest
    metadata = auth(make_token, "t-prompt")
    corpus_id = await new_corpus(stub, metadata, "Handbook")
    for filename in ("guide.txt", "_system_seed_1.txt", "_provisional_entries_2026.txt", "_extracted_patterns.md"):
        job = await wait_terminal(
            stub, metadata, (await upload(stub, metadata, corpus_id, filename.encode(), filename)).job_id
        )
        assert job.state == ingest_pb2.DOCUMENT_STATE_SEARCHABLE
    # One more that is not searchable (still queued): not counted either.
    await admin.execute(
        "t",
        "INSERT INTO documents (tenant_id, corpus_id, filename, state) VALUES ('t-prompt', $1, 'queued.txt', 'QUEUED')",
        int(corpus_id),
    )
    await system_corpus(admin, "t-prompt", "operational_patterns")
    context = await stub.GetPromptContext(ingest_pb2.GetPromptContextRequest(), metadata=metadata)
    assert context.document_count == 1 and context.corpus_count == 1
    assert context.text == (
        f"- Knowledge: 1 documents across 1 corpora: Handbook (corpus_id={corpus_id}). "
        "Use `search_documents` to find content."
    )
