"""An uploaded email's header fields as its document's metadata, over real PostgreSQL, a real
ingest gRPC server and the real isolated extraction child (content-index and the embedder as
fakes at its ports): GetDocument shows them, a ListDocuments filter finds the email by them, its
chunks carry them for search's filters, and the caller's own value wins on a shared key."""

from __future__ import annotations

import pytest
from google.api import httpbody_pb2
from google.protobuf import struct_pb2
from knowledge.v1 import ingest_pb2
from knowledge_ingest.extraction.isolated import IsolatedExtractor

from tests.support.formats import an_email
from tests.support.ingest import auth, new_corpus, running_fakes, wait_terminal

pytestmark = pytest.mark.integration


@pytest.fixture
async def ingest(migrated_pg, verifier):
    async with running_fakes(migrated_pg, verifier, IsolatedExtractor(use_unstructured=False).extract) as parts:
        yield parts


async def uploaded(stub, metadata, corpus_id: str, data: bytes, filename: str, values: dict) -> ingest_pb2.IngestJob:
    caller = struct_pb2.Struct()
    caller.update(values)

    async def requests():
        yield ingest_pb2.UploadDocumentRequest(
            corpus_id=corpus_id,
            filename=filename,
            metadata=caller,
            http_body=httpbody_pb2.HttpBody(content_type="message/rfc822", data=data),
        )

    reply = await stub.UploadDocument(requests(), metadata=metadata)
    return await wait_terminal(stub, metadata, reply.job_id, timeout=60)


async def listed(stub, metadata, corpus_id: str, text: str) -> list[str]:
    reply = await stub.ListDocuments(
        ingest_pb2.ListDocumentsRequest(corpus_id=corpus_id, filter=text), metadata=metadata
    )
    return sorted(d.filename for d in reply.documents)


async def test_an_emails_headers_are_its_documents_metadata_and_filters_find_it(ingest, make_token):
    stub, _, _, db = ingest
    metadata = auth(make_token, "t-email-metadata")
    corpus_id = await new_corpus(stub, metadata)
    job = await uploaded(stub, metadata, corpus_id, an_email(), "inspection.eml", {"team": "ops"})
    assert job.state == ingest_pb2.DOCUMENT_STATE_SEARCHABLE, job.error
    other = an_email("Another body.", subject="Seals").replace(b"amira@example.org", b"bo@example.org")
    chosen = await uploaded(stub, metadata, corpus_id, other, "seals.eml", {"email_subject": "Chosen title"})
    assert chosen.state == ingest_pb2.DOCUMENT_STATE_SEARCHABLE, chosen.error

    document = await stub.GetDocument(
        ingest_pb2.GetDocumentRequest(document_id=job.result.document_id), metadata=metadata
    )
    assert dict(document.metadata) == {
        "team": "ops",
        "email_subject": "Pump inspection résumé",
        "email_from": "Amira Okafor <amira@example.org>",
        "email_to": "Operations <ops@example.org>, Bo Lind <bo@example.org>",
        "email_cc": "Audit <audit@example.org>",
        "email_date": "2026-12-01T10:00:00Z",
    }
    assert await listed(stub, metadata, corpus_id, 'metadata.email_from = "Amira Okafor <amira@example.org>"') == [
        "inspection.eml"
    ]
    assert await listed(stub, metadata, corpus_id, 'metadata.email_from = "Amira Okafor <bo@example.org>"') == [
        "seals.eml"
    ]
    assert await listed(stub, metadata, corpus_id, 'metadata.email_date >= "2026-12-01T00:00:00Z"') == [
        "inspection.eml",
        "seals.eml",
    ]
    # The caller's own value wins over the file's.
    seals = await stub.GetDocument(
        ingest_pb2.GetDocumentRequest(document_id=chosen.result.document_id), metadata=metadata
    )
    assert seals.metadata["email_subject"] == "Chosen title"
    assert seals.metadata["email_from"] == "Amira Okafor <bo@example.org>"
    assert await listed(stub, metadata, corpus_id, 'metadata.email_subject = "Seals"') == []
    # Every chunk carries them, for search's metadata filters.
    rows = await db.fetch(
        "t",
        "SELECT DISTINCT metadata->>'email_from' AS sender FROM chunks WHERE document_id = $1",
        int(job.result.document_id),
    )
    assert [r["sender"] for r in rows] == ["Amira Okafor <amira@example.org>"]
