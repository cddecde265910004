"""Metadata on every document, over real PostgreSQL and a real ingest gRPC server (content-index
and the embedder as fakes at its ports): set at upload (gRPC and multipart), by texts and
batches, changed by UpdateDocument with its chunks' merged metadata in the same transaction,
refused past its limits naming the key, and written only where the caller writes."""

from __future__ import annotations

import json

import grpc
import pytest
from google.api import httpbody_pb2
from google.protobuf import field_mask_pb2, struct_pb2
from knowledge.v1 import ingest_pb2

from tests.support.ingest import auth, new_corpus, partial_text_extract, running_fakes, upload, wait_terminal
from tests.support.rpc import error_info

pytestmark = pytest.mark.integration

TEXT = b"# Pay\n\nSalaries are paid monthly.\n\n# Leave\n\n" + b"Holidays are planned a year ahead. " * 30


@pytest.fixture
async def ingest(migrated_pg, verifier):
    async with running_fakes(migrated_pg, verifier, partial_text_extract) as parts:
        yield parts


def struct(values: dict) -> struct_pb2.Struct:
    message = struct_pb2.Struct()
    message.update(values)
    return message


async def upload_with(stub, metadata, corpus_id: str, data: bytes, values: dict, filename: str = "hr.md"):
    async def requests():
        yield ingest_pb2.UploadDocumentRequest(
            corpus_id=corpus_id,
            filename=filename,
            metadata=struct(values),
            http_body=httpbody_pb2.HttpBody(content_type="text/markdown", data=data),
        )

    return await stub.UploadDocument(requests(), metadata=metadata)


async def chunk_metadata(db, document_id: str) -> list[dict]:
    rows = await db.fetch(
        "t", "SELECT metadata FROM chunks WHERE document_id = $1 ORDER BY chunk_index", int(document_id)
    )
    return [json.loads(r["metadata"]) for r in rows]


async def test_metadata_given_at_upload_is_the_documents_and_every_chunk_carries_it(ingest, make_token):
    stub, _blobs, _embedder, db = ingest
    metadata = auth(make_token, "t-meta-upload")
    corpus_id = await new_corpus(stub, metadata)
    given = {"file_id": "f-42", "page": 3.0, "tags": ["hr", "pay"], "draft": False}
    job = await wait_terminal(stub, metadata, (await upload_with(stub, metadata, corpus_id, TEXT, given)).job_id)
    assert job.state == ingest_pb2.DOCUMENT_STATE_SEARCHABLE, job.error
    document = await stub.GetDocument(
        ingest_pb2.GetDocumentRequest(document_id=job.result.document_id), metadata=metadata
    )
    assert dict(document.metadata) == {"file_id": "f-42", "page": 3.0, "tags": ["hr", "pay"], "draft": False}
    chunks = await chunk_metadata(db, job.result.document_id)
    assert len(chunks) == job.result.chunk_count > 1
    for index, chunk in enumerate(chunks):
        # the caller's keys (an integral page stored as an integer) beside the service's own
        assert chunk["file_id"] == "f-42" and chunk["page"] == 3 and chunk["tags"] == ["hr", "pay"]
        assert chunk["document_id"] == job.result.document_id and chunk["chunk_index"] == index
        assert chunk["source"] == "hr.md" and "overlap_chars" in chunk


async def test_a_multipart_form_carries_metadata_before_the_file(ingest, make_token):
    stub, _blobs, _embedder, _db = ingest
    metadata = auth(make_token, "t-meta-form")
    corpus_id = await new_corpus(stub, metadata)
    boundary = "B0und"
    body = (
        (
            f'--{boundary}\r\nContent-Disposition: form-data; name="corpus_id"\r\n\r\n{corpus_id}\r\n'
            f'--{boundary}\r\nContent-Disposition: form-data; name="metadata"\r\n\r\n'
            '{"owner": "ana", "year": 2025}\r\n'
            f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="form.md"\r\n'
            "Content-Type: text/markdown\r\n\r\n"
        ).encode()
        + TEXT
        + f"\r\n--{boundary}--\r\n".encode()
    )

    async def requests():
        yield ingest_pb2.UploadDocumentRequest(
            http_body=httpbody_pb2.HttpBody(content_type=f"multipart/form-data; boundary={boundary}", data=body)
        )

    job = await wait_terminal(stub, metadata, (await stub.UploadDocument(requests(), metadata=metadata)).job_id)
    document = await stub.GetDocument(
        ingest_pb2.GetDocumentRequest(document_id=job.result.document_id), metadata=metadata
    )
    assert dict(document.metadata) == {"owner": "ana", "year": 2025}


async def test_texts_and_batches_carry_metadata(ingest, make_token):
    stub, *_ = ingest
    metadata = auth(make_token, "t-meta-texts")
    corpus_id = await new_corpus(stub, metadata)
    one = await stub.IngestText(
        ingest_pb2.IngestTextRequest(corpus_id=corpus_id, text="A kettle.", metadata=struct({"sku": "k-1"})),
        metadata=metadata,
    )
    batch = await stub.BatchIngestTexts(
        ingest_pb2.BatchIngestTextsRequest(
            items=[
                ingest_pb2.IngestTextRequest(corpus_id=corpus_id, text=f"Item {i}.", metadata=struct({"sku": f"b-{i}"}))
                for i in range(2)
            ]
        ),
        metadata=metadata,
    )
    jobs = [one.job_id] + [item.job.job_id for item in batch.items]
    skus = []
    for job_id in jobs:
        job = await wait_terminal(stub, metadata, job_id)
        document = await stub.GetDocument(
            ingest_pb2.GetDocumentRequest(document_id=job.result.document_id), metadata=metadata
        )
        skus.append(document.metadata["sku"])
    assert skus == ["k-1", "b-0", "b-1"]
    with pytest.raises(grpc.aio.AioRpcError) as caught:  # one item's bad metadata refuses the batch
        await stub.BatchIngestTexts(
            ingest_pb2.BatchIngestTextsRequest(
                items=[ingest_pb2.IngestTextRequest(corpus_id=corpus_id, text="x", metadata=struct({"a b": 1}))]
            ),
            metadata=metadata,
        )
    assert error_info(caught.value).metadata["field"] == "items[0].metadata"


async def test_metadata_past_a_limit_is_refused_naming_the_key_and_stores_nothing(ingest, make_token):
    stub, blobs, _embedder, _db = ingest
    metadata = auth(make_token, "t-meta-refused")
    corpus_id = await new_corpus(stub, metadata)
    writes = blobs.writes
    for values, key in (
        ({"owner": {"name": "ana"}}, "owner"),
        ({"v": "x" * 2000}, "v"),
        ({"document_id": "1"}, "document_id"),
    ):
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await upload_with(stub, metadata, corpus_id, TEXT, values)
        info = error_info(caught.value)
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        assert (info.reason, info.metadata["key"]) == ("METADATA_INVALID", key)
    assert blobs.writes == writes  # refused before a byte was stored
    listed = await stub.ListDocuments(ingest_pb2.ListDocumentsRequest(corpus_id=corpus_id), metadata=metadata)
    assert not listed.documents


async def test_update_document_rewrites_every_chunks_merged_metadata(ingest, make_token):
    stub, _blobs, _embedder, db = ingest
    metadata = auth(make_token, "t-meta-update")
    corpus_id = await new_corpus(stub, metadata)
    job = await wait_terminal(
        stub, metadata, (await upload_with(stub, metadata, corpus_id, TEXT, {"owner": "ana", "stale": 1})).job_id
    )
    document_id = job.result.document_id
    updated = (
        await stub.UpdateDocument(
            ingest_pb2.UpdateDocumentRequest(
                document_id=document_id,
                document=ingest_pb2.Document(metadata=struct({"owner": "bob", "year": 2026}), filename="renamed.md"),
                update_mask=field_mask_pb2.FieldMask(paths=["metadata", "filename"]),
            ),
            metadata=metadata,
        )
    ).document
    assert dict(updated.metadata) == {"owner": "bob", "year": 2026} and updated.filename == "renamed.md"
    for chunk in await chunk_metadata(db, document_id):
        assert chunk["owner"] == "bob" and chunk["year"] == 2026 and "stale" not in chunk
        assert chunk["source"] == "renamed.md" and chunk["document_id"] == document_id
    # without a mask, only what the request sets: the filename stays
    again = (
        await stub.UpdateDocument(
            ingest_pb2.UpdateDocumentRequest(
                document_id=document_id, document=ingest_pb2.Document(metadata=struct({}))
            ),
            metadata=metadata,
        )
    ).document
    assert dict(again.metadata) == {} and again.filename == "renamed.md"
    assert all("owner" not in chunk for chunk in await chunk_metadata(db, document_id))
    text = await stub.GetDocumentText(ingest_pb2.GetDocumentTextRequest(document_id=document_id), metadata=metadata)
    assert "Salaries are paid monthly." in text.text  # the chunks' own keys survived the rewrite


@pytest.mark.parametrize(
    ("request_fields", "field"),
    [
        ({"update_mask": field_mask_pb2.FieldMask(paths=["state"])}, "update_mask"),
        ({}, "update_mask"),  # nothing to change
        ({"document": ingest_pb2.Document(document_id="999999")}, "document.document_id"),
        ({"document": ingest_pb2.Document(metadata=struct({"x": None}))}, "metadata"),
    ],
)
async def test_update_document_refuses_what_it_cannot_change(ingest, make_token, request_fields, field):
    stub, *_ = ingest
    metadata = auth(make_token, "t-meta-update-bad")
    corpus_id = await new_corpus(stub, metadata)
    job = await wait_terminal(stub, metadata, (await upload(stub, metadata, corpus_id, b"Some text.")).job_id)
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.UpdateDocument(
            ingest_pb2.UpdateDocumentRequest(document_id=job.result.document_id, **request_fields), metadata=metadata
        )
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert error_info(caught.value).metadata["field"] == field


async def test_update_document_writes_only_where_the_caller_writes(ingest, make_token):
    stub, *_ = ingest
    root = auth(make_token, "t-meta-reach")
    corpus_id = await new_corpus(stub, root)
    job = await wait_terminal(stub, root, (await upload(stub, root, corpus_id, b"Root text.")).job_id)
    elsewhere = await new_corpus(stub, root)
    await stub.BindCorpus(ingest_pb2.BindCorpusRequest(corpus_id=elsewhere, scope="workspace:eng"), metadata=root)
    change = ingest_pb2.UpdateDocumentRequest(
        document_id=job.result.document_id, document=ingest_pb2.Document(metadata=struct({"k": "v"}))
    )
    with pytest.raises(grpc.aio.AioRpcError) as caught:  # an ancestor's corpus: read, never written
        await stub.UpdateDocument(change, metadata=auth(lambda t: make_token(t, scope="workspace:eng"), "t-meta-reach"))
    assert (caught.value.code(), error_info(caught.value).reason) == (
        grpc.StatusCode.PERMISSION_DENIED,
        "CORPUS_READ_ONLY",
    )
    with pytest.raises(grpc.aio.AioRpcError) as caught:  # another tenant's: as if absent
        await stub.UpdateDocument(change, metadata=auth(make_token, "t-meta-reach-other"))
    assert caught.value.code() == grpc.StatusCode.NOT_FOUND
