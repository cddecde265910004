"""Setting who may read a document: SetDocumentAccess (recorded, announced, idempotent, needing
document.share and a document the caller reads), a corpus's default list, and the lists given at
upload (multipart and gRPC), IngestText and IndexPassages. Real ingest over PostgreSQL, its
ports as fakes."""

from __future__ import annotations

import asyncio
import uuid

import grpc
import pytest
from google.api import httpbody_pb2
from knowledge.v1 import ingest_pb2
from knowledge_runtime.auth import DOCUMENT_SHARE, PUBLIC_CAPABILITIES

from tests.support import rpc
from tests.support.ingest import running_fakes, text_extract, upload, wait_terminal
from tests.support.rpc import error_info

pytestmark = pytest.mark.integration


@pytest.fixture
async def ingest(migrated_pg, verifier):
    async with running_fakes(migrated_pg, verifier, text_extract) as running:
        yield running


def tokens(make_token, tenant: str) -> dict[str, list]:
    """ana (who shares), bob (in hr), dana (the same capabilities as ana, but document.share)."""
    plain = [c for c in PUBLIC_CAPABILITIES if c != DOCUMENT_SHARE]
    return {
        "ana": rpc.auth(make_token(tenant, subject="ana")),
        "bob": rpc.auth(make_token(tenant, subject="bob", groups=["hr"])),
        "dana": rpc.auth(make_token(tenant, plain, subject="dana")),
    }


async def searchable(stub, metadata, reply) -> str:
    job = await wait_terminal(stub, metadata, reply.job_id)
    assert job.state == ingest_pb2.DOCUMENT_STATE_SEARCHABLE, job.error
    return job.result.document_id


async def test_a_change_is_recorded_announced_and_in_force_at_once(ingest, make_token):
    stub, _blobs, _embedder, db = ingest
    users = tokens(make_token, f"t-acl-{uuid.uuid4().hex[:6]}")
    ana, bob = users["ana"], users["bob"]
    corpus = (await stub.CreateCorpus(ingest_pb2.CreateCorpusRequest(name="hr"), metadata=ana)).corpus_id
    document = await searchable(stub, ana, await upload(stub, ana, corpus, b"# Pay\n\nPay bands.", "pay.md"))
    assert (
        list((await stub.GetDocument(ingest_pb2.GetDocumentRequest(document_id=document), metadata=bob)).principals)
        == []
    )

    changed = await stub.SetDocumentAccess(
        ingest_pb2.SetDocumentAccessRequest(document_id=document, principals=["user:ana", "user:ana", "group:cfo"]),
        metadata=ana,
    )
    assert list(changed.document.principals) == ["group:cfo", "user:ana"]  # as stored: deduplicated, sorted
    assert list(changed.previous_principals) == []
    with pytest.raises(grpc.aio.AioRpcError) as gone:  # bob reaches the corpus, not the document
        await stub.GetDocument(ingest_pb2.GetDocumentRequest(document_id=document), metadata=bob)
    assert gone.value.code() == grpc.StatusCode.NOT_FOUND and error_info(gone.value).reason == "DOCUMENT_NOT_FOUND"

    again = await stub.SetDocumentAccess(  # the list it has: nothing written, nothing recorded
        ingest_pb2.SetDocumentAccessRequest(document_id=document, principals=["group:cfo", "user:ana"]), metadata=ana
    )
    assert list(again.previous_principals) == ["group:cfo", "user:ana"]
    opened = await stub.SetDocumentAccess(
        ingest_pb2.SetDocumentAccessRequest(document_id=document, principals=["group:hr"]), metadata=ana
    )
    assert not opened.HasField("document")  # ana left herself out: she reads it no more
    await stub.GetDocument(ingest_pb2.GetDocumentRequest(document_id=document), metadata=bob)

    history = await db.fetch(
        "t",
        "SELECT changed_by, old_principals, new_principals FROM document_access_changes "
        "WHERE document_id = $1 ORDER BY change_id",
        int(document),
    )
    assert [(r["changed_by"], list(r["old_principals"]), list(r["new_principals"])) for r in history] == [
        ("ana", [], ["group:cfo", "user:ana"]),
        ("ana", ["group:cfo", "user:ana"], ["group:hr"]),
    ]
    events = []

    async def watch() -> None:
        async for event in stub.WatchEvents(ingest_pb2.WatchEventsRequest(), metadata=bob):
            if event.type == "document.access_changed":
                events.append(list(event.principals))
            if len(events) == 2 or event.type == "stream.heartbeat":
                return

    await asyncio.wait_for(watch(), 30)
    # bob reads the document now: he hears the change that let him in, with its list; the first
    # change's event is judged by the document's list now too (the row is there), so he hears it
    assert events == [["group:cfo", "user:ana"], ["group:hr"]]


async def test_who_may_change_a_list(ingest, make_token):
    stub, _blobs, _embedder, _db = ingest
    tenant = f"t-acl-{uuid.uuid4().hex[:6]}"
    users = tokens(make_token, tenant)
    ana, dana = users["ana"], users["dana"]
    corpus = (await stub.CreateCorpus(ingest_pb2.CreateCorpusRequest(name="c"), metadata=ana)).corpus_id
    document = await searchable(stub, ana, await upload(stub, ana, corpus, b"notes", "n.md"))
    request = ingest_pb2.SetDocumentAccessRequest(document_id=document, principals=["user:dana"])
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await stub.SetDocumentAccess(request, metadata=dana)
    assert error_info(refused.value).reason == "CAPABILITY_MISSING"
    with pytest.raises(grpc.aio.AioRpcError) as invalid:
        await stub.SetDocumentAccess(
            ingest_pb2.SetDocumentAccessRequest(document_id=document, principals=["user:ana", "team:hr"]), metadata=ana
        )
    info = error_info(invalid.value)
    assert invalid.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert (info.reason, info.metadata["field"], info.metadata["principal"]) == (
        "ACCESS_LIST_INVALID",
        "principals",
        "team:hr",
    )
    # IngestText's new content for the document, with a list: a change, so document.share again
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await stub.IngestText(
            ingest_pb2.IngestTextRequest(
                document_id=document, text="new", access=ingest_pb2.AccessList(principals=["user:dana"])
            ),
            metadata=dana,
        )
    assert error_info(refused.value).reason == "CAPABILITY_MISSING"
    same = await stub.IngestText(  # the list it has: no change, no capability needed
        ingest_pb2.IngestTextRequest(document_id=document, text="newer", access=ingest_pb2.AccessList()),
        metadata=dana,
    )
    await wait_terminal(stub, dana, same.job_id)
    moved = await stub.IngestText(
        ingest_pb2.IngestTextRequest(
            document_id=document, text="newest", access=ingest_pb2.AccessList(principals=["user:ana"])
        ),
        metadata=ana,
    )
    await wait_terminal(stub, ana, moved.job_id)
    got = await stub.GetDocument(ingest_pb2.GetDocumentRequest(document_id=document), metadata=ana)
    assert list(got.principals) == ["user:ana"]
    with pytest.raises(grpc.aio.AioRpcError) as gone:
        await stub.GetDocumentText(ingest_pb2.GetDocumentTextRequest(document_id=document), metadata=dana)
    assert gone.value.code() == grpc.StatusCode.NOT_FOUND


async def test_a_new_document_takes_the_list_given_else_its_corpus_default(ingest, make_token):
    stub, _blobs, _embedder, _db = ingest
    ana = tokens(make_token, f"t-acl-{uuid.uuid4().hex[:6]}")["ana"]
    corpus = await stub.CreateCorpus(
        ingest_pb2.CreateCorpusRequest(name="board", default_principals=["group:board", "user:ana"]), metadata=ana
    )
    assert list(corpus.default_principals) == ["group:board", "user:ana"]

    async def principals_of(reply) -> list[str]:
        document = await searchable(stub, ana, reply)
        got = await stub.GetDocument(ingest_pb2.GetDocumentRequest(document_id=document), metadata=ana)
        return list(got.principals)

    assert await principals_of(await upload(stub, ana, corpus.corpus_id, b"minutes 1", "m1.md")) == [
        "group:board",
        "user:ana",
    ]
    given = await upload(stub, ana, corpus.corpus_id, b"minutes 2", "m2.md", access=["user:ana"])
    assert await principals_of(given) == ["user:ana"]
    opened = await stub.IngestText(
        ingest_pb2.IngestTextRequest(corpus_id=corpus.corpus_id, text="minutes 3", access=ingest_pb2.AccessList()),
        metadata=ana,
    )
    assert await principals_of(opened) == []  # an empty list given: everyone who reaches the corpus

    boundary = "XyZ"
    form = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="corpus_id"\r\n\r\n{corpus.corpus_id}\r\n'
        f'--{boundary}\r\nContent-Disposition: form-data; name="principals"\r\n\r\n["user:ana", "group:legal"]\r\n'
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="m4.md"\r\n'
        f"Content-Type: text/markdown\r\n\r\nminutes 4\r\n--{boundary}--\r\n"
    ).encode()

    async def multipart(body: bytes):
        yield ingest_pb2.UploadDocumentRequest(
            http_body=httpbody_pb2.HttpBody(content_type=f"multipart/form-data; boundary={boundary}", data=body)
        )

    assert await principals_of(await stub.UploadDocument(multipart(form), metadata=ana)) == ["group:legal", "user:ana"]
    with pytest.raises(grpc.aio.AioRpcError) as invalid:
        await stub.UploadDocument(multipart(form.replace(b'"group:legal"', b"7")), metadata=ana)
    assert error_info(invalid.value).reason == "ACCESS_LIST_INVALID"
    file_first = (  # the list after the file: refused, not dropped (the document would be open to all)
        f'--{boundary}\r\nContent-Disposition: form-data; name="corpus_id"\r\n\r\n{corpus.corpus_id}\r\n'
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="m6.md"\r\n'
        f"Content-Type: text/markdown\r\n\r\nminutes 6\r\n"
        f'--{boundary}\r\nContent-Disposition: form-data; name="principals"\r\n\r\n["user:ana"]\r\n--{boundary}--\r\n'
    ).encode()
    with pytest.raises(grpc.aio.AioRpcError) as late:
        await stub.UploadDocument(multipart(file_first), metadata=ana)
    assert late.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert (error_info(late.value).reason, error_info(late.value).metadata["field"]) == (
        "INVALID_REQUEST",
        "principals",
    )
    listed = await stub.ListDocuments(ingest_pb2.ListDocumentsRequest(corpus_id=corpus.corpus_id), metadata=ana)
    assert "m6.md" not in {d.filename for d in listed.documents}

    changed = await stub.SetCorpusDefaultAccess(
        ingest_pb2.SetCorpusDefaultAccessRequest(corpus_id=corpus.corpus_id), metadata=ana
    )
    assert list(changed.corpus.default_principals) == []
    assert await principals_of(await upload(stub, ana, corpus.corpus_id, b"minutes 5", "m5.md")) == []


async def test_index_passages_sets_a_new_references_list_and_changes_a_known_ones(ingest, make_token):
    stub, _blobs, _embedder, _db = ingest
    users = tokens(make_token, f"t-acl-{uuid.uuid4().hex[:6]}")
    ana, bob = users["ana"], users["bob"]

    def version(sha: str, principals: list[str] | None) -> ingest_pb2.IndexPassagesRequest:
        return ingest_pb2.IndexPassagesRequest(
            corpus_key="platform/acl",
            document_ref="files/contract.pdf",
            content_sha256=sha * 64,
            passages=[ingest_pb2.Passage(fragment="#p1", text=f"Contract version {sha}.")],
            access=ingest_pb2.AccessList(principals=principals) if principals is not None else None,
        )

    first = await stub.IndexPassages(version("a", ["user:ana"]), metadata=ana)
    await wait_terminal(stub, ana, first.job_id)
    with pytest.raises(grpc.aio.AioRpcError) as hidden:  # bob reaches the corpus, not the reference
        await stub.IndexPassages(version("b", None), metadata=bob)
    assert error_info(hidden.value).reason == "DOCUMENT_NOT_FOUND"
    assert error_info(hidden.value).metadata["document_ref"] == "files/contract.pdf"
    unchanged = await stub.IndexPassages(version("a", ["user:ana", "group:hr"]), metadata=ana)
    assert unchanged.unchanged  # the same version: nothing indexed, the list changed all the same
    got = await stub.GetDocument(ingest_pb2.GetDocumentRequest(document_id=first.document_id), metadata=bob)
    assert list(got.principals) == ["group:hr", "user:ana"]


async def test_a_watch_sees_a_document_leave_and_come_back_with_its_list(ingest, make_token):
    stub, _blobs, _embedder, _db = ingest
    users = tokens(make_token, f"t-acl-{uuid.uuid4().hex[:6]}")
    ana, bob = users["ana"], users["bob"]
    corpus = (await stub.CreateCorpus(ingest_pb2.CreateCorpusRequest(name="w"), metadata=ana)).corpus_id
    document = await searchable(stub, ana, await upload(stub, ana, corpus, b"# Plan\n\nThe plan.", "plan.md"))
    changes = stub.WatchDocuments(ingest_pb2.WatchDocumentsRequest(corpus_id=corpus), metadata=bob)

    async def next_about(kind) -> ingest_pb2.DocumentChange:
        async for change in changes:
            if change.kind == kind and change.document_id == document:
                return change
        raise AssertionError("the watch ended")

    try:
        await asyncio.wait_for(next_about(ingest_pb2.DOCUMENT_CHANGE_KIND_SNAPSHOT), 10)
        await stub.SetDocumentAccess(
            ingest_pb2.SetDocumentAccessRequest(document_id=document, principals=["user:ana"]), metadata=ana
        )
        removed = await asyncio.wait_for(next_about(ingest_pb2.DOCUMENT_CHANGE_KIND_REMOVED), 10)
        assert not removed.HasField("document")  # nothing of it is shown to bob any more
        await stub.SetDocumentAccess(
            ingest_pb2.SetDocumentAccessRequest(document_id=document, principals=["user:ana", "group:hr"]), metadata=ana
        )
        back = await asyncio.wait_for(next_about(ingest_pb2.DOCUMENT_CHANGE_KIND_CHANGED), 10)
        assert list(back.document.principals) == ["group:hr", "user:ana"]
    finally:
        changes.cancel()
