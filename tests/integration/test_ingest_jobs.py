"""Ingest over real PostgreSQL and a real gRPC server; content-index and embedder as fakes at
their ports (the whole chain with the real services is in test_ingest_stack.py)."""

import asyncio
import uuid

import grpc
import pytest
from knowledge.v1 import ingest_pb2

from tests.support.ingest import (
    auth,
    document_text,
    new_corpus,
    partial_text_extract,
    running_fakes,
    upload,
    wait_removed,
    wait_terminal,
)

pytestmark = pytest.mark.integration


@pytest.fixture
async def ingest(migrated_pg, verifier):
    async with running_fakes(migrated_pg, verifier, partial_text_extract) as parts:
        yield parts


async def test_upload_answers_at_once_then_the_job_ends_searchable(ingest, make_token):
    stub, _blobs, _embedder, db = ingest
    metadata = auth(make_token, "t-upload")
    corpus_id = await new_corpus(stub, metadata)
    reply = await upload(stub, metadata, corpus_id, document_text(), filename="../../etc/pass wd.txt")
    assert reply.status == "ingesting" and reply.filename == "pass_wd.txt"
    job = await wait_terminal(stub, metadata, reply.job_id)
    assert job.state == ingest_pb2.DOCUMENT_STATE_SEARCHABLE and job.progress == 1.0
    assert job.HasField("result") and job.result.chunk_count > 6 and not job.result.duplicate
    assert "chunks are searchable" in job.result.message
    again = await stub.GetIngestJob(ingest_pb2.GetIngestJobRequest(job_id=reply.job_id), metadata=metadata)
    assert not again.HasField("result")  # delivered exactly once
    document = await stub.GetDocument(
        ingest_pb2.GetDocumentRequest(document_id=job.result.document_id), metadata=metadata
    )
    assert document.state == ingest_pb2.DOCUMENT_STATE_SEARCHABLE and document.chunk_count == job.result.chunk_count
    rows = await db.fetch(
        "t",
        "SELECT section, metadata FROM chunks WHERE document_id = $1 ORDER BY chunk_index",
        int(job.result.document_id),
    )
    assert {r["section"] for r in rows} == {f"Section {i}" for i in range(6)}
    text = await stub.GetDocumentText(
        ingest_pb2.GetDocumentTextRequest(document_id=job.result.document_id), metadata=metadata
    )
    assert text.text.startswith("# Section 0") and "Sentence 5.19 about topic 5." in text.text
    assert not text.HasField("page_count")  # one page: no pagination fields


async def test_the_result_is_delivered_once_to_concurrent_pollers(ingest, make_token):
    stub, *_ = ingest
    metadata = auth(make_token, "t-pollers")
    reply = await upload(stub, metadata, await new_corpus(stub, metadata), b"Just one line of text.")
    await wait_terminal_without_consuming(ingest, reply.job_id)
    polls = await asyncio.gather(
        *(stub.GetIngestJob(ingest_pb2.GetIngestJobRequest(job_id=reply.job_id), metadata=metadata) for _ in range(12))
    )
    assert sum(p.HasField("result") for p in polls) == 1


async def wait_terminal_without_consuming(ingest, job_id: str) -> None:
    *_, db = ingest
    for _ in range(600):
        state = await db.fetchval("t", "SELECT state FROM ingest_jobs WHERE job_id = $1", uuid.UUID(job_id))
        if state in ("SEARCHABLE", "FAILED", "CANCELLED"):
            return
        await asyncio.sleep(0.05)
    raise AssertionError("job never ended")


async def test_the_same_file_twice_is_a_duplicate(ingest, make_token):
    stub, *_ = ingest
    metadata = auth(make_token, "t-dup")
    corpus_id = await new_corpus(stub, metadata)
    first = await wait_terminal(stub, metadata, (await upload(stub, metadata, corpus_id, document_text(2))).job_id)
    second = await wait_terminal(stub, metadata, (await upload(stub, metadata, corpus_id, document_text(2))).job_id)
    assert second.result.duplicate and second.result.document_id == first.result.document_id
    assert "already" in second.result.message


async def test_another_tenant_sees_404_and_writes_nothing(ingest, make_token):
    stub, blobs, *_ = ingest
    owner, intruder = auth(make_token, "t-owner"), auth(make_token, "t-intruder")
    corpus_id = await new_corpus(stub, owner)
    job = await wait_terminal(stub, owner, (await upload(stub, owner, corpus_id, b"private text")).job_id)
    writes = blobs.writes
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await upload(stub, intruder, corpus_id, b"sneaky")
    assert caught.value.code() == grpc.StatusCode.NOT_FOUND and blobs.writes == writes
    for call in (
        stub.GetIngestJob(ingest_pb2.GetIngestJobRequest(job_id=job.job_id), metadata=intruder),
        stub.GetDocument(ingest_pb2.GetDocumentRequest(document_id=job.result.document_id), metadata=intruder),
        stub.GetDocumentText(ingest_pb2.GetDocumentTextRequest(document_id=job.result.document_id), metadata=intruder),
        stub.DeleteDocument(ingest_pb2.DeleteDocumentRequest(document_id=job.result.document_id), metadata=intruder),
        stub.ListDocuments(ingest_pb2.ListDocumentsRequest(corpus_id=corpus_id), metadata=intruder),
    ):
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await call
        assert caught.value.code() == grpc.StatusCode.NOT_FOUND


async def test_an_upload_over_the_cap_is_refused(ingest, make_token):
    stub, *_ = ingest
    metadata = auth(make_token, "t-cap")
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await upload(stub, metadata, await new_corpus(stub, metadata), b"x" * 150_000, piece=10_000)
    assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "UPLOAD_TOO_LARGE" in repr(caught.value.trailing_metadata())


async def test_a_transient_embedder_failure_is_retried(ingest, make_token):
    stub, _, embedder, _ = ingest
    embedder.failures_left = 2
    metadata = auth(make_token, "t-retry")
    job = await wait_terminal(
        stub, metadata, (await upload(stub, metadata, await new_corpus(stub, metadata), b"Retry me, please.")).job_id
    )
    assert job.state == ingest_pb2.DOCUMENT_STATE_SEARCHABLE and job.attempt == 3


async def test_a_permanent_failure_ends_failed_with_a_reason_then_retry_works(ingest, make_token):
    stub, blobs, _, db = ingest
    metadata = auth(make_token, "t-fail")
    reply = await upload(stub, metadata, await new_corpus(stub, metadata), b"%PDF-broken garbage", "scan.pdf")
    job = await wait_terminal(stub, metadata, reply.job_id)
    assert job.state == ingest_pb2.DOCUMENT_STATE_FAILED and "damaged" in job.error
    document_id = await db.fetchval(
        "t", "SELECT document_id FROM ingest_jobs WHERE job_id = $1", uuid.UUID(reply.job_id)
    )
    document = await stub.GetDocument(ingest_pb2.GetDocumentRequest(document_id=str(document_id)), metadata=metadata)
    assert document.state == ingest_pb2.DOCUMENT_STATE_FAILED and "damaged" in document.error
    blob_id = await db.fetchval("t", "SELECT blob_id FROM documents WHERE document_id = $1", document_id)
    blobs.blobs[blob_id] = b"Readable after all."  # what a fixed extractor would now see
    retried = await stub.RetryIngestJob(ingest_pb2.RetryIngestJobRequest(job_id=reply.job_id), metadata=metadata)
    assert retried.job.state == ingest_pb2.DOCUMENT_STATE_QUEUED
    done = await wait_terminal(stub, metadata, reply.job_id)
    assert done.state == ingest_pb2.DOCUMENT_STATE_SEARCHABLE and done.result.chunk_count == 1


async def test_cancel_stops_a_running_job_and_is_idempotent(ingest, make_token):
    stub, _, embedder, db = ingest
    embedder.gate = asyncio.Event()  # the job stalls in embedding until released
    metadata = auth(make_token, "t-cancel")
    reply = await upload(stub, metadata, await new_corpus(stub, metadata), document_text(3))
    for _ in range(200):
        job = await stub.GetIngestJob(ingest_pb2.GetIngestJobRequest(job_id=reply.job_id), metadata=metadata)
        if job.state == ingest_pb2.DOCUMENT_STATE_EMBEDDING:
            break
        await asyncio.sleep(0.05)
    assert job.stage.startswith("embedding 0/")

    async def cancel():
        return await stub.CancelIngestJob(ingest_pb2.CancelIngestJobRequest(job_id=reply.job_id), metadata=metadata)

    cancelling = asyncio.create_task(cancel())
    await asyncio.sleep(0.3)
    embedder.gate.set()
    cancelled = (await cancelling).job
    assert cancelled.state == ingest_pb2.DOCUMENT_STATE_CANCELLED
    again = await stub.CancelIngestJob(ingest_pb2.CancelIngestJobRequest(job_id=reply.job_id), metadata=metadata)
    assert again.job.state == ingest_pb2.DOCUMENT_STATE_CANCELLED
    document_id = await db.fetchval(
        "t", "SELECT document_id FROM ingest_jobs WHERE job_id = $1", uuid.UUID(reply.job_id)
    )
    assert await db.fetchval("t", "SELECT count(*) FROM chunks WHERE document_id = $1", document_id) == 0
    embedder.gate = None


async def test_move_delete_and_prompt_context(ingest, make_token):
    stub, _, _, db = ingest
    metadata = auth(make_token, "t-move")
    source = await new_corpus(stub, metadata, "Source")
    target = await new_corpus(stub, metadata, "Target")
    job = await wait_terminal(stub, metadata, (await upload(stub, metadata, source, document_text(2))).job_id)
    document_id = job.result.document_id
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.MoveDocuments(ingest_pb2.MoveDocumentsRequest(target_corpus_id=target), metadata=metadata)
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT and document_id in caught.value.details()
    for wrong, reason in (
        (
            ingest_pb2.MoveDocumentsRequest(
                target_corpus_id=source, source_corpus_id=target, document_ids=[document_id]
            ),
            "DOCUMENT_NOT_IN_SOURCE",
        ),
        (
            ingest_pb2.MoveDocumentsRequest(target_corpus_id=target, document_ids=[str(i + 1) for i in range(1001)]),
            "INVALID_REQUEST",
        ),
        (
            ingest_pb2.MoveDocumentsRequest(
                target_corpus_id=target, source_corpus_id=source, document_ids=[document_id], all_documents=True
            ),
            "INVALID_REQUEST",
        ),
    ):
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await stub.MoveDocuments(wrong, metadata=metadata)
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT and reason in repr(
            caught.value.trailing_metadata()
        )
    assert await db.fetchval("t", "SELECT corpus_id FROM documents WHERE document_id = $1", int(document_id)) == int(
        source
    )  # nothing moved by the refused requests
    moved = await stub.MoveDocuments(
        ingest_pb2.MoveDocumentsRequest(target_corpus_id=target, source_corpus_id=source, all_documents=True),
        metadata=metadata,
    )
    assert list(moved.moved_document_ids) == [document_id] and moved.moved_count == 1
    assert (
        await db.fetchval("t", "SELECT count(DISTINCT corpus_id) FROM chunks WHERE document_id = $1", int(document_id))
        == 1
    )
    assert await db.fetchval("t", "SELECT min(corpus_id) FROM chunks WHERE document_id = $1", int(document_id)) == int(
        target
    )
    context = await stub.GetPromptContext(ingest_pb2.GetPromptContextRequest(), metadata=metadata)
    assert context.text == (
        f"- Knowledge: 1 documents across 2 corpora: Source (corpus_id={source}), "
        f"Target (corpus_id={target}). Use `search_documents` to find content."
    )
    deleted = await stub.DeleteDocument(ingest_pb2.DeleteDocumentRequest(document_id=document_id), metadata=metadata)
    assert deleted.deleted_chunk_count == job.result.chunk_count
    # Its jobs (their blob references) go at once; the removal job deletes its chunks and row.
    assert await db.fetchval("t", "SELECT count(*) FROM ingest_jobs WHERE job_id = $1", uuid.UUID(job.job_id)) == 0
    await wait_removed(db, int(document_id))
    assert await db.fetchval("t", "SELECT count(*) FROM chunks WHERE document_id = $1", int(document_id)) == 0
    assert await db.fetchval("t", "SELECT count(*) FROM documents WHERE document_id = $1", int(document_id)) == 0
    empty = await stub.GetPromptContext(ingest_pb2.GetPromptContextRequest(), metadata=auth(make_token, "t-none"))
    assert empty.text == ""


async def test_a_duplicate_of_a_file_still_ingesting_reports_its_real_outcome(ingest, make_token):
    stub, _, embedder, db = ingest
    metadata = auth(make_token, "t-dup-running")
    corpus_id = await new_corpus(stub, metadata)
    embedder.gate = asyncio.Event()  # the first ingest stalls in embedding
    first = await upload(stub, metadata, corpus_id, document_text(3))
    second = await upload(stub, metadata, corpus_id, document_text(3))
    await asyncio.sleep(2.5)  # the duplicate has looked at the running ingest at least twice
    waiting = await stub.GetIngestJob(ingest_pb2.GetIngestJobRequest(job_id=second.job_id), metadata=metadata)
    assert waiting.state == ingest_pb2.DOCUMENT_STATE_QUEUED and "same file" in waiting.stage
    assert waiting.attempt <= 1  # waiting is not an attempt: a later transient error keeps its retries
    running = await stub.GetIngestJob(ingest_pb2.GetIngestJobRequest(job_id=first.job_id), metadata=metadata)
    document_id = await db.fetchval(
        "t", "SELECT document_id FROM ingest_jobs WHERE job_id = $1", uuid.UUID(first.job_id)
    )
    document = await stub.GetDocument(ingest_pb2.GetDocumentRequest(document_id=str(document_id)), metadata=metadata)
    # the document shows the running ingest's state, not the waiting duplicate's QUEUED
    assert running.state == document.state == ingest_pb2.DOCUMENT_STATE_EMBEDDING
    embedder.gate.set()
    original = await wait_terminal(stub, metadata, first.job_id)
    duplicate = await wait_terminal(stub, metadata, second.job_id)
    embedder.gate = None
    assert duplicate.result.duplicate and duplicate.result.document_id == original.result.document_id
    assert duplicate.result.chunk_count == original.result.chunk_count > 0


async def test_the_backlog_metric_counts_jobs_not_yet_ended(ingest, make_token):
    from prometheus_client import REGISTRY

    stub, _, embedder, db = ingest
    # The backlog is global: other tests' rows in this database count too, so compare with the table.
    unended = (
        "SELECT count(*) FROM ingest_jobs WHERE state NOT IN ('SEARCHABLE', 'FAILED', 'CANCELLED') "
        "AND NOT cancel_requested"
    )
    metadata = auth(make_token, "t-backlog")
    corpus_id = await new_corpus(stub, metadata)
    embedder.gate = asyncio.Event()  # jobs stall in embedding
    before = await db.fetchval("t", unended)
    jobs = [await upload(stub, metadata, corpus_id, f"backlog document {i}".encode()) for i in range(3)]
    await asyncio.sleep(0.5)
    assert REGISTRY.get_sample_value("knowledge_ingest_jobs_backlog") == before + 3
    embedder.gate.set()
    for job in jobs:
        await wait_terminal(stub, metadata, job.job_id)
    embedder.gate = None
    await asyncio.sleep(0.3)
    assert REGISTRY.get_sample_value("knowledge_ingest_jobs_backlog") == before


async def dead_worker(db, job_id: str, **columns) -> None:
    """Make an ended job look like one whose worker died mid-embedding (lease expired). One
    statement: the service's sweeper may take the job over the moment its lease looks expired, and
    a document set apart afterwards would undo what the sweeper just ended."""
    assignments = ", ".join(f"{name} = {value}" for name, value in columns.items())
    await db.execute(
        "t",
        f"WITH job AS (UPDATE ingest_jobs SET state = 'EMBEDDING', stage = 'embedding 0/3', progress = 0.1, "
        f"result = NULL, lease_owner = 'dead-worker', lease_expires_at = now() - interval '1 second'"
        f"{', ' + assignments if assignments else ''} WHERE job_id = $1 RETURNING document_id) "
        "UPDATE documents SET state = 'EMBEDDING' WHERE document_id IN (SELECT document_id FROM job)",
        uuid.UUID(job_id),
    )


async def test_a_cancel_whose_worker_died_still_ends_and_can_be_retried(ingest, make_token):
    stub, _, _, db = ingest
    metadata = auth(make_token, "t-cancel-dead")
    reply = await upload(stub, metadata, await new_corpus(stub, metadata), document_text(2))
    document_id = (await wait_terminal(stub, metadata, reply.job_id)).result.document_id
    await dead_worker(db, reply.job_id, cancel_requested="true")  # nobody claims it: cancel was asked
    job = await wait_terminal(stub, metadata, reply.job_id, timeout=10)
    assert job.state == ingest_pb2.DOCUMENT_STATE_CANCELLED and job.stage == "cancelled"
    document = await stub.GetDocument(ingest_pb2.GetDocumentRequest(document_id=document_id), metadata=metadata)
    assert document.state == ingest_pb2.DOCUMENT_STATE_CANCELLED
    retried = await stub.RetryIngestJob(ingest_pb2.RetryIngestJobRequest(job_id=reply.job_id), metadata=metadata)
    assert retried.job.state == ingest_pb2.DOCUMENT_STATE_QUEUED
    assert (await wait_terminal(stub, metadata, reply.job_id)).state == ingest_pb2.DOCUMENT_STATE_SEARCHABLE


async def test_a_job_whose_workers_keep_dying_ends_failed(ingest, make_token):
    stub, _, _, db = ingest
    metadata = auth(make_token, "t-takeovers")
    reply = await upload(stub, metadata, await new_corpus(stub, metadata), document_text(2))
    document_id = (await wait_terminal(stub, metadata, reply.job_id)).result.document_id
    # ten takeovers already (the limit): this one's worker died too
    await dead_worker(db, reply.job_id, attempts="1", interruptions="10")
    job = await wait_terminal(stub, metadata, reply.job_id, timeout=10)
    assert job.state == ingest_pb2.DOCUMENT_STATE_FAILED and "stopped unexpectedly 11 times" in job.error
    assert (job.attempt, job.interruptions) == (1, 11)  # taking a lost lease over spends no attempt
    document = await stub.GetDocument(ingest_pb2.GetDocumentRequest(document_id=document_id), metadata=metadata)
    assert document.state == ingest_pb2.DOCUMENT_STATE_FAILED
    await dead_worker(db, reply.job_id, attempts="1", interruptions="0")
    # below the limit a takeover simply finishes the job, in the same attempt
    job = await wait_terminal(stub, metadata, reply.job_id)
    assert job.state == ingest_pb2.DOCUMENT_STATE_SEARCHABLE and (job.attempt, job.interruptions) == (1, 1)


async def test_moving_a_whole_corpus_moves_past_the_first_thousand(ingest, make_token):
    stub, _, _, db = ingest
    metadata = auth(make_token, "t-move-all")
    source, target = await new_corpus(stub, metadata, "Many"), await new_corpus(stub, metadata, "Elsewhere")
    await db.execute(
        "t",
        "INSERT INTO documents (tenant_id, corpus_id, filename, mime_type, state) "
        "SELECT 't-move-all', $1, 'd' || n || '.txt', 'text/plain', 'SEARCHABLE' "
        "FROM generate_series(1, 1005) AS n",
        int(source),
    )
    moved = await stub.MoveDocuments(
        ingest_pb2.MoveDocumentsRequest(target_corpus_id=target, source_corpus_id=source, all_documents=True),
        metadata=metadata,
    )
    assert moved.moved_count == 1005 and len(moved.moved_document_ids) == 1000
    counts = await db.fetch(
        "t", "SELECT corpus_id, count(*) AS n FROM documents WHERE tenant_id = 't-move-all' GROUP BY corpus_id"
    )
    assert {(r["corpus_id"], r["n"]) for r in counts} == {(int(target), 1005)}


async def test_retry_of_a_searchable_job_is_a_failed_precondition(ingest, make_token):
    stub, *_ = ingest
    metadata = auth(make_token, "t-retry-ok")
    reply = await upload(stub, metadata, await new_corpus(stub, metadata), b"Nothing wrong with this one.")
    await wait_terminal(stub, metadata, reply.job_id)
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.RetryIngestJob(ingest_pb2.RetryIngestJobRequest(job_id=reply.job_id), metadata=metadata)
    assert caught.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "INGEST_JOB_SEARCHABLE" in repr(caught.value.trailing_metadata())
