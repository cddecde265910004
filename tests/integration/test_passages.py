"""Passages by reference over real PostgreSQL and a real ingest gRPC server (content-index and the
embedder as fakes at its ports; the real services are in test_passages_stack.py): a version is
indexed as given under the caller's reference, the same hash changes nothing, a new hash replaces
the old passages when it stores and not before, the later of two versions wins, a failed version
leaves the old one, a reference is removed whatever state it is in, and everything refused is
refused before anything is stored."""

from __future__ import annotations

import asyncio
import hashlib
import json
import uuid

import grpc
import pytest
from google.protobuf import struct_pb2
from knowledge.v1 import common_pb2, ingest_pb2
from knowledge_runtime.refusals import Refusal, Refused

from tests.support.ingest import auth, partial_text_extract, running_fakes, wait_terminal
from tests.support.rpc import error_info

pytestmark = pytest.mark.integration
SEARCHABLE = ingest_pb2.DOCUMENT_STATE_SEARCHABLE


@pytest.fixture
async def ingest(migrated_pg, verifier):
    async with running_fakes(migrated_pg, verifier, partial_text_extract) as parts:
        yield parts


def struct(values: dict) -> struct_pb2.Struct:
    message = struct_pb2.Struct()
    message.update(values)
    return message


def sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def passages(version: str, count: int = 3) -> list[ingest_pb2.Passage]:
    return [
        ingest_pb2.Passage(
            fragment=f"#p{i + 1}.1",
            text=f"Version {version}: the heron on page {i + 1} waits by the river.",
            metadata=struct({"page": i + 1, "block_ids": [f"b{i}", f"b{i}x"], "file_id": "f-1"}),
        )
        for i in range(count)
    ]


def index_request(key: str, ref: str, version: str, **fields) -> ingest_pb2.IndexPassagesRequest:
    values = {
        "corpus_key": key,
        "document_ref": ref,
        "content_sha256": sha(version),
        "title": f"{ref.rsplit('/', 1)[-1]}",
        "metadata": struct({"project": "42", "file_id": "doc-level"}),
        "passages": passages(version),
        **fields,
    }
    return ingest_pb2.IndexPassagesRequest(**values)


async def chunks(db, document_id: str) -> list[dict]:
    rows = await db.fetch(
        "t",
        "SELECT content, page, fragment, passage_metadata, metadata FROM chunks WHERE document_id = $1 "
        "ORDER BY chunk_index",
        int(document_id),
    )
    return [
        {**dict(r), "passage_metadata": json.loads(r["passage_metadata"]), "metadata": json.loads(r["metadata"])}
        for r in rows
    ]


async def test_a_version_is_indexed_as_given_and_the_same_hash_changes_nothing(ingest, make_token):
    stub, blobs, embedder, db = ingest
    metadata = auth(make_token, f"t-pass-{uuid.uuid4().hex[:6]}")
    first = await stub.IndexPassages(index_request("projects/42/production", "files/a.pdf", "v1"), metadata=metadata)
    assert first.corpus_created and first.job_id and not first.unchanged
    job = await wait_terminal(stub, metadata, first.job_id)
    assert job.state == SEARCHABLE and job.result.chunk_count == 3, job.error
    rows = await chunks(db, first.document_id)
    assert [r["fragment"] for r in rows] == ["#p1.1", "#p2.1", "#p3.1"] and [r["page"] for r in rows] == [1, 2, 3]
    assert rows[1]["content"] == "Version v1: the heron on page 2 waits by the river."  # as given
    assert rows[1]["passage_metadata"] == {"page": 2, "block_ids": ["b1", "b1x"], "file_id": "f-1"}
    merged = rows[1]["metadata"]
    assert merged["project"] == "42" and merged["file_id"] == "f-1"  # the passage's key wins
    assert merged["fragment"] == "#p2.1" and merged["document_id"] == first.document_id
    document = await stub.GetDocument(ingest_pb2.GetDocumentRequest(document_id=first.document_id), metadata=metadata)
    assert (document.document_ref, document.filename) == ("files/a.pdf", "a.pdf")
    assert dict(document.metadata) == {"project": "42", "file_id": "doc-level"}
    corpus = await stub.ListCorpora(ingest_pb2.ListCorporaRequest(), metadata=metadata)
    assert [(c.key, c.name, c.confidentiality) for c in corpus.corpora] == [
        ("projects/42/production", "projects/42/production", "TENANT")
    ]

    writes, calls = blobs.writes, embedder.calls
    again = await stub.IndexPassages(index_request("projects/42/production", "files/a.pdf", "v1"), metadata=metadata)
    assert again.unchanged and not again.job_id and not again.corpus_created
    assert (again.document_id, again.corpus_id, again.state) == (first.document_id, first.corpus_id, SEARCHABLE)
    assert (blobs.writes, embedder.calls) == (writes, calls)  # nothing stored, nothing embedded


async def test_a_new_version_replaces_the_old_when_it_stores_and_not_before(ingest, make_token):
    stub, _blobs, embedder, db = ingest
    metadata = auth(make_token, f"t-pass-{uuid.uuid4().hex[:6]}")
    first = await stub.IndexPassages(index_request("k", "files/b.pdf", "v1"), metadata=metadata)
    await wait_terminal(stub, metadata, first.job_id)
    gate = embedder.gate = asyncio.Event()
    second = await stub.IndexPassages(
        index_request("k", "files/b.pdf", "v2", metadata=struct({"project": "43"})), metadata=metadata
    )
    assert second.document_id == first.document_id and second.job_id != first.job_id
    same = await stub.IndexPassages(index_request("k", "files/b.pdf", "v2"), metadata=metadata)
    assert same.job_id == second.job_id  # the version being indexed answers with its job
    for _ in range(50):
        job = await stub.GetIngestJob(ingest_pb2.GetIngestJobRequest(job_id=second.job_id), metadata=metadata)
        if job.state == ingest_pb2.DOCUMENT_STATE_EMBEDDING:
            break
        await asyncio.sleep(0.05)
    # while v2 embeds, v1 is what the document holds: searchable, its metadata and hash
    assert {r["content"][:10] for r in await chunks(db, first.document_id)} == {"Version v1"}
    document = await stub.GetDocument(ingest_pb2.GetDocumentRequest(document_id=first.document_id), metadata=metadata)
    assert document.state == SEARCHABLE and document.metadata["project"] == "42"
    assert document.job_id == second.job_id and document.stage.startswith("embedding")
    gate.set()
    embedder.gate = None
    assert (await wait_terminal(stub, metadata, second.job_id)).state == SEARCHABLE
    rows = await chunks(db, first.document_id)
    assert {r["content"][:10] for r in rows} == {"Version v2"} and len(rows) == 3
    assert {r["metadata"]["project"] for r in rows} == {"43"}
    stored = await db.fetchrow(
        "t", "SELECT source_sha256, metadata FROM documents WHERE document_id = $1", int(first.document_id)
    )
    assert stored["source_sha256"] == sha("v2") and json.loads(stored["metadata"]) == {"project": "43"}


async def test_of_two_concurrent_versions_the_later_request_wins(ingest, make_token):
    stub, _blobs, embedder, db = ingest
    metadata = auth(make_token, f"t-pass-{uuid.uuid4().hex[:6]}")
    first = await stub.IndexPassages(index_request("k", "files/c.pdf", "v1"), metadata=metadata)
    await wait_terminal(stub, metadata, first.job_id)
    gate = embedder.gate = asyncio.Event()
    earlier = await stub.IndexPassages(index_request("k", "files/c.pdf", "v2"), metadata=metadata)
    later = await stub.IndexPassages(index_request("k", "files/c.pdf", "v3"), metadata=metadata)
    gate.set()
    embedder.gate = None
    ended = await wait_terminal(stub, metadata, earlier.job_id)
    assert ended.state == ingest_pb2.DOCUMENT_STATE_CANCELLED
    assert (await wait_terminal(stub, metadata, later.job_id)).state == SEARCHABLE
    assert {r["content"][:10] for r in await chunks(db, first.document_id)} == {"Version v3"}
    with pytest.raises(grpc.aio.AioRpcError) as caught:  # the superseded version stays superseded
        await stub.RetryIngestJob(ingest_pb2.RetryIngestJobRequest(job_id=earlier.job_id), metadata=metadata)
    assert caught.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    # the searchable version again, while another is being indexed: that one is cancelled
    gate = embedder.gate = asyncio.Event()
    pending = await stub.IndexPassages(index_request("k", "files/c.pdf", "v4"), metadata=metadata)
    back = await stub.IndexPassages(index_request("k", "files/c.pdf", "v3"), metadata=metadata)
    gate.set()
    embedder.gate = None
    assert back.unchanged
    assert (await wait_terminal(stub, metadata, pending.job_id)).state == ingest_pb2.DOCUMENT_STATE_CANCELLED
    assert {r["content"][:10] for r in await chunks(db, first.document_id)} == {"Version v3"}


async def test_a_failed_version_leaves_the_old_one_searchable(ingest, make_token):
    stub, _blobs, embedder, db = ingest
    metadata = auth(make_token, f"t-pass-{uuid.uuid4().hex[:6]}")
    first = await stub.IndexPassages(index_request("k", "files/d.pdf", "v1"), metadata=metadata)
    await wait_terminal(stub, metadata, first.job_id)
    original = embedder.embed

    async def refusing(tenant, texts, tokenizer=""):
        raise Refused(Refusal.QUOTA_EXHAUSTED, "the tenant's max_embedding_tokens_per_month quota is used up")

    embedder.embed = refusing
    try:
        second = await stub.IndexPassages(index_request("k", "files/d.pdf", "v2"), metadata=metadata)
        failed = await wait_terminal(stub, metadata, second.job_id)
    finally:
        embedder.embed = original
    assert failed.state == ingest_pb2.DOCUMENT_STATE_FAILED and "quota" in failed.error
    document = await stub.GetDocument(ingest_pb2.GetDocumentRequest(document_id=first.document_id), metadata=metadata)
    assert document.state == SEARCHABLE and document.chunk_count == 3 and not document.refusal_reason
    assert {r["content"][:10] for r in await chunks(db, first.document_id)} == {"Version v1"}
    retried = await stub.RetryIngestJob(ingest_pb2.RetryIngestJobRequest(job_id=second.job_id), metadata=metadata)
    assert retried.job.state == ingest_pb2.DOCUMENT_STATE_QUEUED
    assert (await wait_terminal(stub, metadata, second.job_id)).state == SEARCHABLE
    assert {r["content"][:10] for r in await chunks(db, first.document_id)} == {"Version v2"}


async def test_remove_by_reference_tombstones_whatever_state_the_reference_is_in(ingest, make_token):
    stub, _blobs, embedder, db = ingest
    metadata = auth(make_token, f"t-pass-{uuid.uuid4().hex[:6]}")
    done = await stub.IndexPassages(index_request("k", "files/e.pdf", "v1"), metadata=metadata)
    await wait_terminal(stub, metadata, done.job_id)
    removed = await stub.RemoveByReference(
        ingest_pb2.RemoveByReferenceRequest(corpus_key="k", document_ref="files/e.pdf"), metadata=metadata
    )
    assert removed.removed == 1 and removed.tombstone.document_id == done.document_id
    assert removed.tombstone.chunk_count == 3 and removed.tombstone.reason == "removed by reference"
    again = await stub.RemoveByReference(
        ingest_pb2.RemoveByReferenceRequest(corpus_key="k", document_ref="files/e.pdf"), metadata=metadata
    )
    assert again.removed == 0 and not again.HasField("tombstone")  # idempotent
    # one still being indexed: tombstoned, its job cancelled, nothing of it stored
    gate = embedder.gate = asyncio.Event()
    pending = await stub.IndexPassages(index_request("k", "files/f.pdf", "v1"), metadata=metadata)
    cut = await stub.RemoveByReference(
        ingest_pb2.RemoveByReferenceRequest(corpus_key="k", document_ref="files/f.pdf"), metadata=metadata
    )
    gate.set()
    embedder.gate = None
    assert cut.removed == 0 and cut.tombstone.document_id == pending.document_id
    assert cut.cancelled_job_id == pending.job_id
    await asyncio.sleep(0.5)
    assert await db.fetchval("t", "SELECT count(*) FROM chunks WHERE document_id = $1", int(pending.document_id)) == 0
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.RemoveByReference(
            ingest_pb2.RemoveByReferenceRequest(corpus_key="no/such/key", document_ref="files/e.pdf"), metadata=metadata
        )
    assert (caught.value.code(), error_info(caught.value).reason) == (grpc.StatusCode.NOT_FOUND, "CORPUS_NOT_FOUND")
    # a new version after a removal is a new document
    fresh = await stub.IndexPassages(index_request("k", "files/e.pdf", "v1"), metadata=metadata)
    assert fresh.document_id != done.document_id and not fresh.unchanged


@pytest.mark.parametrize(
    ("change", "field", "reason"),
    [
        ({"content_sha256": "abc"}, "content_sha256", "INVALID_REQUEST"),
        ({"content_sha256": ""}, "content_sha256", "INVALID_REQUEST"),
        ({"document_ref": ""}, "document_ref", "INVALID_REQUEST"),
        ({"passages": []}, "passages", "INVALID_REQUEST"),
        (
            {"passages": [ingest_pb2.Passage(fragment="#p1", text="x" * (64 * 1024 + 1))]},
            "passages[0].text",
            "PASSAGE_TOO_LARGE",
        ),
        (
            {"passages": [ingest_pb2.Passage(fragment="#a", text="x"), ingest_pb2.Passage(fragment="#a", text="y")]},
            "passages[1].fragment",
            "INVALID_REQUEST",
        ),
        (
            {"passages": [ingest_pb2.Passage(fragment="#a", text="x", metadata=struct({"n": {"x": 1}}))]},
            "passages[0].metadata",
            "METADATA_INVALID",
        ),
        ({"metadata": struct({"document_id": "7"})}, "metadata", "METADATA_INVALID"),
        (
            {"passages": [ingest_pb2.Passage(fragment=f"#{i}", text="x") for i in range(10_001)]},
            "passages",
            "INVALID_REQUEST",
        ),
        ({"corpus_id": "12"}, "corpus_key", "INVALID_REQUEST"),  # a key and an id
        ({"confidentiality": "SECRET"}, "confidentiality", "INVALID_REQUEST"),
    ],
)
async def test_a_bad_request_is_refused_naming_its_field_and_stores_nothing(ingest, make_token, change, field, reason):
    stub, blobs, _embedder, _db = ingest
    metadata = auth(make_token, f"t-pass-bad-{uuid.uuid4().hex[:6]}")
    writes = blobs.writes
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.IndexPassages(index_request("k", "files/x.pdf", "v1", **change), metadata=metadata)
    info = error_info(caught.value)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert (info.reason, info.metadata["field"]) == (reason, field)
    if reason == "PASSAGE_TOO_LARGE":
        assert info.metadata["fragment"] == "#p1" and "#p1" in caught.value.details()
    assert blobs.writes == writes
    assert not (await stub.ListCorpora(ingest_pb2.ListCorporaRequest(), metadata=metadata)).corpora


async def test_a_plan_without_the_feature_and_a_used_up_quota_are_refused_and_checked(ingest, make_token):
    stub, blobs, _embedder, _db = ingest
    tenant = f"t-pass-plan-{uuid.uuid4().hex[:6]}"
    metadata = auth(make_token, tenant)
    operator = auth(lambda t: make_token(t, ["platform.admin"]), "platform")
    corpus = await stub.CreateCorpus(ingest_pb2.CreateCorpusRequest(name="c", key="k"), metadata=metadata)

    async def settings(features: list[str], **quotas):
        await stub.UpdateTenantSettings(
            ingest_pb2.UpdateTenantSettingsRequest(
                tenant=tenant, enabled=True, features=features, quotas=ingest_pb2.TenantQuotas(**quotas)
            ),
            metadata=operator,
        )

    check = ingest_pb2.CheckIndexingRequest(corpus_key="k", bytes=1000, passages=3)
    assert (await stub.CheckIndexing(check, metadata=metadata)).admitted
    await settings(["basic"])
    checked = await stub.CheckIndexing(check, metadata=metadata)
    assert (checked.admitted, checked.reason, checked.metadata["feature"]) == (
        False,
        common_pb2.REFUSAL_REASON_PLAN_REQUIRED,
        "platform_index",
    )
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.IndexPassages(index_request("k", "files/p.pdf", "v1"), metadata=metadata)
    assert (caught.value.code(), error_info(caught.value).reason) == (
        grpc.StatusCode.PERMISSION_DENIED,
        "PLAN_REQUIRED",
    )
    await settings(["basic", "platform_index"], max_chunks=2)
    checked = await stub.CheckIndexing(check, metadata=metadata)
    assert (checked.admitted, checked.reason, checked.metadata["quota"]) == (
        False,
        common_pb2.REFUSAL_REASON_QUOTA_EXHAUSTED,
        "max_chunks",
    )
    assert checked.corpus_id == corpus.corpus_id
    writes = blobs.writes
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.IndexPassages(index_request("k", "files/p.pdf", "v1"), metadata=metadata)
    assert (caught.value.code(), error_info(caught.value).metadata["quota"]) == (
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        "max_chunks",
    )
    assert blobs.writes == writes
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.CheckIndexing(ingest_pb2.CheckIndexingRequest(corpus_key="none"), metadata=metadata)
    assert caught.value.code() == grpc.StatusCode.NOT_FOUND
    await settings([])


async def test_an_ancestors_corpus_is_read_only_and_a_key_creates_in_the_callers_node(ingest, make_token):
    stub, *_ = ingest
    tenant = f"t-pass-reach-{uuid.uuid4().hex[:6]}"
    root, eng = auth(make_token, tenant), auth(lambda t: make_token(t, scope="workspace:eng"), tenant)
    await stub.CreateCorpus(ingest_pb2.CreateCorpusRequest(name="root", key="shared"), metadata=root)
    placed = await stub.CreateCorpus(ingest_pb2.CreateCorpusRequest(name="p"), metadata=root)
    await stub.BindCorpus(
        ingest_pb2.BindCorpusRequest(corpus_id=placed.corpus_id, scope="workspace:eng"), metadata=root
    )
    with pytest.raises(grpc.aio.AioRpcError) as caught:  # the root's corpus: read, never written
        await stub.IndexPassages(index_request("shared", "files/r.pdf", "v1"), metadata=eng)
    assert error_info(caught.value).reason == "CORPUS_READ_ONLY"
    made = await stub.IndexPassages(
        index_request("eng/own", "files/r.pdf", "v1", confidentiality="CONFIDENTIAL"),
        metadata=auth(lambda t: make_token(t, scope="workspace:eng", clearance="CONFIDENTIAL"), tenant),
    )
    assert made.corpus_created
    listed = await stub.ListCorpora(
        ingest_pb2.ListCorporaRequest(),
        metadata=auth(lambda t: make_token(t, scope="workspace:eng", clearance="CONFIDENTIAL"), tenant),
    )
    created = next(c for c in listed.corpora if c.key == "eng/own")
    assert (created.scope, created.confidentiality) == ("workspace:eng", "CONFIDENTIAL")
