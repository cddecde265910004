"""Real files through the real pipeline (the isolated extractor, PostgreSQL, a real gRPC server):
bad files end FAILED or not extractable with a clear reason and the worker keeps working;
a Word document's headings and table cells, and a PDF's ruled table, arrive in chunks with their
sections."""

import grpc
import pytest
from knowledge.v1 import ingest_pb2
from knowledge_ingest.extraction.isolated import IsolatedExtractor
from knowledge_runtime.db.pool import Database

from tests.support import rpc
from tests.support.documents import (
    SECRET,
    a_docx_lying_about_its_size,
    a_pdf,
    regions_report,
    word_document,
    zip_bomb_docx,
)
from tests.support.ingest import (
    CountingEmbedder,
    MemoryBlobs,
    auth,
    ingest_app,
    new_corpus,
    settings,
    upload,
    wait_terminal,
    wire_fakes,
)

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
async def real_ingest(migrated_pg, verifier):
    db = await Database.connect(migrated_pg.url(user="knowledge_ingest"))
    admin = await Database.connect(migrated_pg.url())
    ingest = wire_fakes(
        settings(KNOWLEDGE_MAX_UPLOAD_BYTES=str(8 * 1024 * 1024)),
        db,
        MemoryBlobs(admin),
        CountingEmbedder(),
        IsolatedExtractor(timeout_s=60).extract,
    )
    app = ingest_app(ingest, verifier)
    port = await app.start()
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
    yield rpc.IngestStub(channel), db
    await channel.close()
    await app.stop()
    await db.close()
    await admin.close()


BAD_FILES = [
    ("encrypted.pdf", lambda: a_pdf(owner_password="o", user_password="secret"), "FAILED", "password"),
    ("corrupt.pdf", lambda: b"%PDF-1.7\n" + bytes(range(256)) * 20, "FAILED", ""),
    ("bomb.docx", zip_bomb_docx, "FAILED", "zip bomb"),
    # declares 1.6 KB for its text, inflates to 256 MiB: the directory check alone passes it
    ("lying.docx", a_docx_lying_about_its_size, "FAILED", "zip bomb"),
    ("garbage.bin", lambda: bytes((i * 7919) % 256 for i in range(20000)), "FAILED", ""),
    ("empty.txt", lambda: b"", "SEARCHABLE", ""),
]


@pytest.mark.parametrize(("filename", "make", "state", "words"), BAD_FILES, ids=[f[0] for f in BAD_FILES])
async def test_bad_files_end_cleanly_and_the_worker_goes_on(real_ingest, make_token, filename, make, state, words):
    stub, _ = real_ingest
    metadata = auth(make_token, "t-files")
    corpus_id = await new_corpus(stub, metadata)
    job = await wait_terminal(
        stub, metadata, (await upload(stub, metadata, corpus_id, make(), filename)).job_id, timeout=90
    )
    assert ingest_pb2.DocumentState.Name(job.state) == f"DOCUMENT_STATE_{state}", job.error
    if state == "FAILED":
        assert job.error and SECRET not in job.error
        assert words.lower() in job.error.lower()
    else:
        assert job.result.extractable is False and job.result.chunk_count == 0
        assert "no text" in job.result.message
        assert list(job.result.warnings) == ["the file is empty"]  # the extractor's own words
        document = await stub.GetDocument(
            ingest_pb2.GetDocumentRequest(document_id=job.result.document_id), metadata=metadata
        )
        assert list(document.warnings) == ["the file is empty"]
    # the worker survived: a good file right after is ingested
    after = await wait_terminal(
        stub, metadata, (await upload(stub, metadata, corpus_id, f"fine text {filename}".encode())).job_id
    )
    assert after.state == ingest_pb2.DOCUMENT_STATE_SEARCHABLE


async def ingest_into_new_corpus(stub, metadata, data: bytes, filename: str) -> ingest_pb2.IngestJob:
    """The file uploaded into a corpus of its own; its job once it has ended."""
    corpus_id = await new_corpus(stub, metadata)
    return await wait_terminal(
        stub, metadata, (await upload(stub, metadata, corpus_id, data, filename)).job_id, timeout=90
    )


async def test_a_word_document_keeps_headings_and_table_cells(real_ingest, make_token):
    stub, db = real_ingest
    job = await ingest_into_new_corpus(stub, auth(make_token, "t-word"), word_document(), "handbook.docx")
    assert job.state == ingest_pb2.DOCUMENT_STATE_SEARCHABLE, job.error
    rows = await db.fetch(
        "t",
        "SELECT section, content FROM chunks WHERE document_id = $1 ORDER BY chunk_index",
        int(job.result.document_id),
    )
    by_section = {r["section"]: r["content"] for r in rows}
    assert {"Leave", "Allowances", "Closing"} <= set(by_section)
    assert "| Grade | Days | Note |" in by_section["Allowances"] and "| B | 30 |" in by_section["Allowances"]
    searchable = await db.fetchval(
        "t",
        "SELECT count(*) FROM chunks WHERE document_id = $1 AND lexemes @@ to_tsquery('english', 'grade')",
        int(job.result.document_id),
    )
    assert searchable == 1  # the Word table's cells are in the lexical index


async def test_a_pdf_tables_cell_finds_the_chunk_with_its_row(real_ingest, make_token):
    stub, db = real_ingest
    job = await ingest_into_new_corpus(stub, auth(make_token, "t-pdf-table"), regions_report(), "regions.pdf")
    assert job.state == ingest_pb2.DOCUMENT_STATE_SEARCHABLE, job.error
    found = await db.fetch(
        "t",
        "SELECT section, page, content FROM chunks WHERE document_id = $1 "
        "AND lexemes @@ plainto_tsquery('english', 'Zanzibar')",
        int(job.result.document_id),
    )
    assert len(found) == 1
    assert (found[0]["section"], found[0]["page"]) == ("Revenue by region", 2)
    assert "| Zanzibar | 4,250 | Amira Okafor |" in found[0]["content"]
    assert "| Region | Revenue | Owner |" in found[0]["content"]
