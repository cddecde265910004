"""Text intake over real PostgreSQL and a real gRPC server (content-index and the embedder as fakes
at their ports): titles, what extraction could not read, a text as a document's new content, and
batches of texts, each its own durable job."""

import asyncio
import json

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
    wait_terminal,
)

pytestmark = pytest.mark.integration


@pytest.fixture
async def ingest(migrated_pg, verifier):
    async with running_fakes(migrated_pg, verifier, partial_text_extract) as parts:
        yield parts


async def test_ingest_text_titles_up_to_1000_characters(ingest, make_token):
    stub, *_ = ingest
    metadata = auth(make_token, "t-title")
    corpus_id = await new_corpus(stub, metadata)
    accepted = await stub.IngestText(
        ingest_pb2.IngestTextRequest(corpus_id=corpus_id, text="Some page text.", title="T" * 1000), metadata=metadata
    )
    assert accepted.filename.startswith("T" * 100) and len(accepted.filename) <= 255
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.IngestText(
            ingest_pb2.IngestTextRequest(corpus_id=corpus_id, text="Other page text.", title="T" * 1001),
            metadata=metadata,
        )
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "title" in caught.value.details()


async def test_what_extraction_could_not_read_is_reported_and_kept(ingest, make_token):
    stub, *_ = ingest
    metadata = auth(make_token, "t-warnings")
    corpus_id = await new_corpus(stub, metadata)
    partly = b"PARTIAL scan: the readable pages say the budget is approved."
    job = await wait_terminal(stub, metadata, (await upload(stub, metadata, corpus_id, partly)).job_id)
    assert job.state == ingest_pb2.DOCUMENT_STATE_SEARCHABLE and list(job.result.warnings) == [
        "2 page(s) could not be read"
    ]
    document = await stub.GetDocument(
        ingest_pb2.GetDocumentRequest(document_id=job.result.document_id), metadata=metadata
    )
    assert list(document.warnings) == ["2 page(s) could not be read"]  # kept after the result was delivered
    duplicate = await wait_terminal(stub, metadata, (await upload(stub, metadata, corpus_id, partly)).job_id)
    assert duplicate.result.duplicate and list(duplicate.result.warnings) == ["2 page(s) could not be read"]
    clean = await wait_terminal(stub, metadata, (await upload(stub, metadata, corpus_id, b"All readable.")).job_id)
    assert list(clean.result.warnings) == []


async def test_ingest_text_into_a_document_replaces_its_chunks_as_a_durable_job(ingest, make_token):
    stub, _blobs, embedder, db = ingest
    metadata = auth(make_token, "t-bound")
    corpus_id = await new_corpus(stub, metadata)
    first = await wait_terminal(
        stub, metadata, (await upload(stub, metadata, corpus_id, document_text(2), "page.md")).job_id
    )
    document_id = first.result.document_id
    new_text = "# Fresh page\n\nThe quokka migration is scheduled for spring."
    gate = embedder.gate = asyncio.Event()
    accepted = await stub.IngestText(
        ingest_pb2.IngestTextRequest(document_id=document_id, text=new_text, source_url="https://example.com/page"),
        metadata=metadata,
    )
    assert accepted.corpus_id == corpus_id and accepted.filename == "page.md"
    # another bound text while that job runs is refused, naming the running job
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.IngestText(ingest_pb2.IngestTextRequest(document_id=document_id, text="Other."), metadata=metadata)
    assert caught.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    assert "INDEXING" in repr(caught.value.trailing_metadata()) and accepted.job_id in caught.value.details()
    gate.set()
    embedder.gate = None
    job = await wait_terminal(stub, metadata, accepted.job_id)
    assert job.state == ingest_pb2.DOCUMENT_STATE_SEARCHABLE, job.error
    assert job.result.document_id == document_id and job.result.re_extracted and job.result.chunk_count == 1
    rows = await db.fetch(
        "t", "SELECT content, lexemes::text AS lexemes FROM chunks WHERE document_id = $1", int(document_id)
    )
    assert [r["content"] for r in rows] == [new_text]
    assert "'quokka':" in rows[0]["lexemes"] and "'fresh':1A" in rows[0]["lexemes"]  # the database's rule
    document = await stub.GetDocument(ingest_pb2.GetDocumentRequest(document_id=document_id), metadata=metadata)
    assert document.chunk_count == 1 and document.source_url == "https://example.com/page"
    assert document.state == ingest_pb2.DOCUMENT_STATE_SEARCHABLE
    # the same content again is a duplicate; a wrong corpus, another tenant's document: refused
    again = await stub.IngestText(
        ingest_pb2.IngestTextRequest(document_id=document_id, text=new_text), metadata=metadata
    )
    assert (await wait_terminal(stub, metadata, again.job_id)).result.duplicate
    other_corpus = await new_corpus(stub, metadata)
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.IngestText(
            ingest_pb2.IngestTextRequest(document_id=document_id, corpus_id=other_corpus, text="Moved?"),
            metadata=metadata,
        )
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.IngestText(
            ingest_pb2.IngestTextRequest(document_id=document_id, text="Mine now."),
            metadata=auth(make_token, "t-bound-other"),
        )
    assert caught.value.code() == grpc.StatusCode.NOT_FOUND


async def test_ingest_texts_gives_each_item_its_own_job_and_answer(ingest, make_token):
    stub, *_ = ingest
    metadata = auth(make_token, "t-batch")
    corpus_id = await new_corpus(stub, metadata)
    other_corpus = await new_corpus(stub, auth(make_token, "t-batch-other"))

    async def stream():
        yield ingest_pb2.IngestTextsRequest(
            items=[
                ingest_pb2.IngestTextRequest(
                    corpus_id=corpus_id, text=f"Catalog entry {i}: a blue kettle.", title=f"e{i}"
                )
                for i in range(3)
            ]
        )
        yield ingest_pb2.IngestTextsRequest(
            items=[
                ingest_pb2.IngestTextRequest(corpus_id=corpus_id, text="x" * 100_001),  # over the cap
                ingest_pb2.IngestTextRequest(corpus_id=other_corpus, text="Not yours."),
                ingest_pb2.IngestTextRequest(
                    corpus_id=corpus_id, text="Catalog entry 0: a blue kettle.", title="again"
                ),
            ]
        )

    reply = await stub.IngestTexts(stream(), metadata=metadata)
    assert [item.index for item in reply.items] == list(range(6))
    assert (reply.accepted_count, reply.rejected_count) == (4, 2)
    assert [item.error_reason for item in reply.items[3:5]] == ["UPLOAD_TOO_LARGE", "CORPUS_NOT_FOUND"]
    assert [item.error_code for item in reply.items[3:5]] == ["RESOURCE_EXHAUSTED", "NOT_FOUND"]
    jobs = [await wait_terminal(stub, metadata, reply.items[i].job.job_id) for i in (0, 1, 2, 5)]
    assert all(job.state == ingest_pb2.DOCUMENT_STATE_SEARCHABLE for job in jobs)
    assert len({job.result.document_id for job in jobs[1:]}) == 3  # a document each
    # the same bytes twice in one batch (stored concurrently): one document, the other a duplicate
    assert jobs[0].result.document_id == jobs[3].result.document_id
    assert sorted([jobs[0].result.duplicate, jobs[3].result.duplicate]) == [False, True]
    assert reply.items[0].job.filename == "e0.txt" and reply.items[0].job.corpus_id == corpus_id

    batch = await stub.BatchIngestTexts(
        ingest_pb2.BatchIngestTextsRequest(
            items=[ingest_pb2.IngestTextRequest(corpus_id=corpus_id, text="A red teapot.")]
        ),
        metadata=metadata,
    )
    assert batch.accepted_count == 1 and batch.items[0].job.job_id
    malformed = [
        ingest_pb2.IngestTextRequest(corpus_id=corpus_id, text="Fine."),
        ingest_pb2.IngestTextRequest(corpus_id=corpus_id, text="  "),
    ]
    for too_many in ([], [ingest_pb2.IngestTextRequest(corpus_id=corpus_id, text="x")] * 1001, malformed):
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await stub.BatchIngestTexts(ingest_pb2.BatchIngestTextsRequest(items=too_many), metadata=metadata)
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT


async def test_a_document_s_chunks_are_stored_in_one_statement_with_their_vectors_and_statistics(
    ingest, make_token, admin
):
    """One INSERT for all of a document's chunks (the BM25 statistics triggers are per statement,
    so they run once per document, not once per chunk); rows, vectors and statistics exact."""
    stub, _blobs, embedder, db = ingest
    metadata = auth(make_token, "t-one-insert")
    corpus_id = await new_corpus(stub, metadata)
    await admin.execute(
        """
        CREATE TABLE test_chunk_statements (rows integer NOT NULL);
        CREATE FUNCTION test_count_chunk_statements() RETURNS trigger LANGUAGE plpgsql SECURITY DEFINER AS $$
        BEGIN INSERT INTO public.test_chunk_statements SELECT count(*) FROM new_rows; RETURN NULL; END $$;
        CREATE TRIGGER test_chunk_statements AFTER INSERT ON chunks
            REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION test_count_chunk_statements();
        """
    )
    try:
        reply = await upload(stub, metadata, corpus_id, document_text(), filename="stats.md")
        job = await wait_terminal(stub, metadata, reply.job_id)
        assert job.state == ingest_pb2.DOCUMENT_STATE_SEARCHABLE and job.result.chunk_count > 6
        statements = [r["rows"] for r in await admin.fetch("SELECT rows FROM test_chunk_statements")]
    finally:
        await admin.execute(
            "DROP TRIGGER test_chunk_statements ON chunks; DROP FUNCTION test_count_chunk_statements(); "
            "DROP TABLE test_chunk_statements"
        )
    assert statements == [job.result.chunk_count]
    rows = await db.fetch(
        "t",
        "SELECT chunk_index, content, embedding, metadata FROM chunks WHERE document_id = $1 ORDER BY chunk_index",
        int(job.result.document_id),
    )
    assert [r["chunk_index"] for r in rows] == list(range(job.result.chunk_count))
    for row in rows:
        expected = (await embedder.embed("t-one-insert", [row["content"]]))[0]
        assert row["embedding"].to_list() == pytest.approx(expected, abs=1e-6)
        meta = json.loads(row["metadata"])
        assert meta["chunk_index"] == row["chunk_index"] and meta["document_id"] == job.result.document_id
    stats = await admin.fetchrow(
        "SELECT chunk_count, total_length FROM search_tenant_stats WHERE tenant_id = 't-one-insert'"
    )
    recomputed = await admin.fetchrow(
        "SELECT count(*) AS chunk_count, sum(search_bm25_length(lexemes)) AS total_length FROM chunks "
        "WHERE tenant_id = 't-one-insert'"
    )
    assert dict(stats) == dict(recomputed)
    mismatched = await admin.fetchval(
        """
        SELECT count(*) FROM (
            SELECT u.lexeme, count(*) AS doc_freq FROM chunks c, unnest(c.lexemes) AS u
            WHERE c.tenant_id = 't-one-insert' GROUP BY u.lexeme
        ) AS r FULL JOIN (
            SELECT lexeme, doc_freq FROM search_lexeme_stats WHERE tenant_id = 't-one-insert' AND doc_freq <> 0
        ) AS s USING (lexeme)
        WHERE r.doc_freq IS DISTINCT FROM s.doc_freq
        """
    )
    assert mismatched == 0
