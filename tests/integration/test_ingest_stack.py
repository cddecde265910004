"""Ingest with the real parts: content-index, the embedder with the real model, PostgreSQL;
and an ingest process killed during embedding that another process finishes cleanly."""

import asyncio
import os
import signal
import subprocess
import sys

import grpc
import numpy as np
import pytest
from knowledge.v1 import ingest_pb2
from knowledge_content_index.bootstrap import build_app as content_index_app
from knowledge_content_index.config import ContentIndexSettings
from knowledge_embedder.bootstrap import build_app as embedder_app
from knowledge_embedder.config import EmbedderSettings
from knowledge_ingest.bootstrap import build_app as ingest_app
from knowledge_ingest.config import IngestSettings
from knowledge_runtime.db.pool import Database
from knowledge_runtime.settings import Env

from tests.support import rpc
from tests.support.ingest import document_text, new_corpus, upload, wait_removed, wait_terminal
from tests.support.net import LocalSite, free_port
from tests.support.real_services import base_env, ingest_env, start_backends

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
async def backends(migrated_pg, keys_dir, tmp_path_factory):
    """Real content-index and embedder servers on free ports."""
    tmp = tmp_path_factory.mktemp("ingest-stack")
    apps, addresses = await start_backends(migrated_pg, keys_dir, tmp)
    yield tmp, addresses
    for app in apps:
        await app.stop()


async def test_a_document_goes_through_the_real_services(backends, migrated_pg, keys_dir, make_token):
    tmp, addresses = backends
    app = await ingest_app(IngestSettings.from_env(Env(ingest_env(migrated_pg, keys_dir, tmp, addresses, 0))))
    port = await app.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = rpc.IngestStub(channel)
            metadata = [("authorization", f"Bearer {make_token('stack-tenant', ['corpus.create', 'document.upload'])}")]
            corpus_id = await new_corpus(stub, metadata)
            reply = await upload(stub, metadata, corpus_id, document_text(3), "handbook.md")
            job = await wait_terminal(stub, metadata, reply.job_id, timeout=120)
            assert job.state == ingest_pb2.DOCUMENT_STATE_SEARCHABLE, job.error
    finally:
        await app.stop()
    admin = await Database.connect(migrated_pg.url())
    try:
        rows = await admin.fetch(
            "t",
            "SELECT content, embedding FROM chunks WHERE document_id = $1 ORDER BY chunk_index",
            int(job.result.document_id),
        )
        blob = await admin.fetchrow(
            "t",
            "SELECT b.size_bytes FROM documents d JOIN content_blobs b USING (blob_id) WHERE d.document_id = $1",
            int(job.result.document_id),
        )
    finally:
        await admin.close()
    assert len(rows) == job.result.chunk_count > 3
    assert blob["size_bytes"] == len(document_text(3))
    vectors = np.stack([r["embedding"].to_numpy() for r in rows])
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0, atol=1e-3)  # the real model's unit vectors
    assert len({v.tobytes() for v in vectors}) == len(rows)


async def test_a_killed_worker_leaves_no_duplicate_chunks(backends, migrated_pg, keys_dir, make_token):
    tmp, addresses = backends
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("KNOWLEDGE_")}
    env.update(ingest_env(migrated_pg, keys_dir, tmp, addresses, port))

    def start() -> subprocess.Popen:
        return subprocess.Popen(
            [sys.executable, "-m", "knowledge_ingest"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )

    first = start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            await asyncio.wait_for(channel.channel_ready(), 60)
            stub = rpc.IngestStub(channel)
            metadata = [("authorization", f"Bearer {make_token('kill-tenant')}")]
            corpus_id = await new_corpus(stub, metadata)
            reply = await upload(stub, metadata, corpus_id, document_text(30), "long.md")
            for _ in range(600):
                job = await stub.GetIngestJob(ingest_pb2.GetIngestJobRequest(job_id=reply.job_id), metadata=metadata)
                done, _, total = job.stage.partition(" ")[2].partition("/")
                if job.stage.startswith("embedding") and done.isdigit() and 0 < int(done) < int(total):
                    break
                await asyncio.sleep(0.05)
            assert job.stage.startswith("embedding"), job.stage
            first.send_signal(signal.SIGKILL)
            first.wait(10)
        second = start()
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                await asyncio.wait_for(channel.channel_ready(), 60)
                stub = rpc.IngestStub(channel)
                job = await wait_terminal(stub, metadata, reply.job_id, timeout=180)
        finally:
            second.send_signal(signal.SIGTERM)
            second.wait(30)
    finally:
        if first.poll() is None:
            first.kill()
    # the second process took the lost lease over: an interruption, not an attempt of the job's
    assert job.state == ingest_pb2.DOCUMENT_STATE_SEARCHABLE and (job.attempt, job.interruptions) == (1, 1)
    admin = await Database.connect(migrated_pg.url())
    try:
        counts = await admin.fetchrow(
            "t",
            "SELECT count(*) AS n, count(DISTINCT chunk_index) AS distinct_n FROM chunks WHERE document_id = $1",
            int(job.result.document_id),
        )
    finally:
        await admin.close()
    assert counts["n"] == counts["distinct_n"] == job.result.chunk_count


def client_lost_the_status(error: grpc.aio.AioRpcError) -> bool:
    """grpcio's asyncio client, writing its next message just after the server ended the call,
    can report INTERNAL ("Failed execute_batch" on a SendMessageOperation) in place of the status
    the server sent (a client-side bug: grpc/grpc#36066). Such an attempt says nothing about the
    server, so it is made again; any other status, INTERNAL included, counts."""
    return error.code() == grpc.StatusCode.INTERNAL and "SendMessageOperation" in (error.debug_error_string() or "")


async def test_an_upload_over_the_cap_is_refused_promptly_and_leaves_nothing(
    backends, migrated_pg, keys_dir, make_token
):
    tmp, addresses = backends
    env = {**ingest_env(migrated_pg, keys_dir, tmp, addresses, 0), "KNOWLEDGE_MAX_UPLOAD_BYTES": str(1024 * 1024)}
    app = await ingest_app(IngestSettings.from_env(Env(env)))
    port = await app.start()
    admin = await Database.connect(migrated_pg.url())
    try:
        blobs_before = await admin.fetchval("t", "SELECT count(*) FROM content_blobs")
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = rpc.IngestStub(channel)
            metadata = [("authorization", f"Bearer {make_token('cap-tenant')}")]
            corpus_id = await new_corpus(stub, metadata)
            for attempt in range(5):  # a truncated blob row came from a race: give it chances
                for _ in range(3):
                    started = asyncio.get_running_loop().time()
                    with pytest.raises(grpc.aio.AioRpcError) as caught:
                        await asyncio.wait_for(
                            upload(stub, metadata, corpus_id, bytes([65 + attempt]) * 5_000_000, piece=64 * 1024), 20
                        )
                    elapsed = asyncio.get_running_loop().time() - started
                    if not client_lost_the_status(caught.value):
                        break
                assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
                assert "UPLOAD_TOO_LARGE" in repr(caught.value.trailing_metadata())
                assert elapsed < 10
        await asyncio.sleep(0.5)
        assert await admin.fetchval("t", "SELECT count(*) FROM content_blobs") == blobs_before
        for _ in range(50):  # content-index removes the partial file once it sees the cancellation
            staged = list((tmp / "blobs").rglob("*.partial.*"))
            if not staged:
                break
            await asyncio.sleep(0.1)
        assert staged == []
    finally:
        await admin.close()
        await app.stop()


async def test_jobs_queued_before_a_start_and_an_embedder_restart_spend_no_attempt(
    migrated_pg, keys_dir, make_token, tmp_path
):
    """A dependency that is starting or restarting is not the job's failure."""
    content = await content_index_app(
        ContentIndexSettings.from_env(
            Env({**base_env(migrated_pg, keys_dir, tmp_path, "content-index"), "KNOWLEDGE_CONTENT_INDEX_PORT": "0"})
        )
    )
    embedder_port = free_port()  # nothing listens there yet
    addresses = {"content-index": f"127.0.0.1:{await content.start()}", "embedder": f"127.0.0.1:{embedder_port}"}
    env = {
        **ingest_env(migrated_pg, keys_dir, tmp_path, addresses, 0),
        "KNOWLEDGE_INGEST_EMBED_BATCH": "1",
        "KNOWLEDGE_INGEST_MAX_ATTEMPTS": "1",
    }  # a single spent attempt would end a job FAILED
    ingest = await ingest_app(IngestSettings.from_env(Env(env)))
    embedder_env = Env(
        {**base_env(migrated_pg, keys_dir, tmp_path, "embedder"), "KNOWLEDGE_EMBEDDER_PORT": str(embedder_port)}
    )
    embedder = None
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{await ingest.start()}") as channel:
            stub = rpc.IngestStub(channel)
            metadata = [("authorization", f"Bearer {make_token('restart-tenant')}")]
            corpus_id = await new_corpus(stub, metadata)
            early = await upload(stub, metadata, corpus_id, document_text(2), "early.md")
            await asyncio.sleep(3)  # the workers wait for the embedder: nothing claimed, nothing spent
            job = await stub.GetIngestJob(ingest_pb2.GetIngestJobRequest(job_id=early.job_id), metadata=metadata)
            assert (job.state, job.attempt, job.stage) == (ingest_pb2.DOCUMENT_STATE_QUEUED, 0, "queued")
            embedder = await embedder_app(EmbedderSettings.from_env(embedder_env))
            await embedder.start()
            job = await wait_terminal(stub, metadata, early.job_id, timeout=120)
            assert job.state == ingest_pb2.DOCUMENT_STATE_SEARCHABLE, job.error
            assert (job.attempt, job.interruptions) == (1, 0)

            long = await upload(stub, metadata, corpus_id, document_text(40), "long.md")
            for _ in range(1200):
                job = await stub.GetIngestJob(ingest_pb2.GetIngestJobRequest(job_id=long.job_id), metadata=metadata)
                done, _, total = job.stage.partition(" ")[2].partition("/")
                if job.stage.startswith("embedding") and done.isdigit() and 0 < int(done) < int(total):
                    break
                await asyncio.sleep(0.02)
            assert job.stage.startswith("embedding"), job.stage
            await embedder.stop()  # the embedder restarts in the middle of the job
            embedder = await embedder_app(EmbedderSettings.from_env(embedder_env))
            await embedder.start()
            job = await wait_terminal(stub, metadata, long.job_id, timeout=180)
            assert job.state == ingest_pb2.DOCUMENT_STATE_SEARCHABLE, job.error
            assert job.attempt == 1 and job.interruptions <= 1
    finally:
        await ingest.stop()
        if embedder is not None:
            await embedder.stop()
        await content.stop()


async def test_a_scan_read_before_ocr_gets_its_chunks_by_retry(backends, migrated_pg, keys_dir, make_token):
    """A scanned PDF ingested without OCR (the budget 0, as before OCR existed) is SEARCHABLE
    with no chunks; Retry reads it again, by OCR, from the kept blob: its words are in the
    lexical index with their page."""
    from tests.support.documents import PUMPS, VALVES, scanned_pdf

    tmp, addresses = backends
    metadata = [
        ("authorization", f"Bearer {make_token('ocr-tenant', ['corpus.create', 'corpus.read', 'document.upload'])}")
    ]
    env = ingest_env(migrated_pg, keys_dir, tmp, addresses, 0)
    without_ocr = await ingest_app(IngestSettings.from_env(Env({**env, "KNOWLEDGE_OCR_MAX_PAGES": "0"})))
    port = await without_ocr.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = rpc.IngestStub(channel)
            corpus_id = await new_corpus(stub, metadata)
            reply = await upload(stub, metadata, corpus_id, scanned_pdf([PUMPS, VALVES]), "scan.pdf")
            job = await wait_terminal(stub, metadata, reply.job_id, timeout=120)
    finally:
        await without_ocr.stop()
    assert job.state == ingest_pb2.DOCUMENT_STATE_SEARCHABLE and job.result.chunk_count == 0
    assert not job.result.extractable
    app = await ingest_app(IngestSettings.from_env(Env(env)))
    port = await app.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = rpc.IngestStub(channel)
            retried = await stub.RetryIngestJob(
                ingest_pb2.RetryIngestJobRequest(job_id=reply.job_id), metadata=metadata
            )
            assert retried.job.state == ingest_pb2.DOCUMENT_STATE_QUEUED
            job = await wait_terminal(stub, metadata, reply.job_id, timeout=180)
            document = await stub.GetDocument(
                ingest_pb2.GetDocumentRequest(document_id=job.result.document_id), metadata=metadata
            )
            # A document with chunks has nothing more to retry.
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await stub.RetryIngestJob(ingest_pb2.RetryIngestJobRequest(job_id=reply.job_id), metadata=metadata)
    finally:
        await app.stop()
    assert job.state == ingest_pb2.DOCUMENT_STATE_SEARCHABLE, job.error
    assert job.result.chunk_count >= 2 and job.result.re_extracted and job.result.extractable
    assert any("read by OCR" in w for w in document.warnings)
    # what read it is stored on the document: OCR on both pages of the scan
    assert document.extractor.startswith("OCR (tesseract") and document.extractor.endswith("on every page")
    assert document.ocr_page_count == 2
    assert refused.value.code() == grpc.StatusCode.FAILED_PRECONDITION
    admin = await Database.connect(migrated_pg.url())
    try:
        pages = {
            word: await admin.fetch(
                "t",
                "SELECT (metadata->>'page')::int AS page FROM chunks WHERE document_id = $1 "
                "AND lexemes @@ plainto_tsquery('english', $2)",
                int(job.result.document_id),
                word,
            )
            for word in ("zanzibar", "valves")
        }
    finally:
        await admin.close()
    assert [r["page"] for r in pages["zanzibar"]] == [1]
    assert [r["page"] for r in pages["valves"]] == [2]


async def test_a_web_page_by_url_is_fetched_fenced_and_ingested(backends, migrated_pg, keys_dir, make_token):
    from tests.support.documents import WEB_PAGE

    site = LocalSite(
        {
            "/guide.html": ("text/html; charset=utf-8", WEB_PAGE.encode()),
            "/notes": ("text/plain", b"The canteen opens at eight on weekdays.\n"),
        }
    )
    site.redirects = {
        "/moved": "/guide.html",
        "/to-loopback": f"http://localhost:{site.port}/guide.html",
        "/to-metadata": "http://169.254.169.254/latest/meta-data/",
    }
    tmp, addresses = backends
    env = {
        **ingest_env(migrated_pg, keys_dir, tmp, addresses, 0),
        "KNOWLEDGE_FETCH_ALLOW_HOSTS": f"127.0.0.1:{site.port}",
    }
    app = await ingest_app(IngestSettings.from_env(Env(env)))
    port = await app.start()
    metadata = [
        ("authorization", f"Bearer {make_token('web-tenant', ['corpus.create', 'corpus.read', 'document.upload'])}")
    ]
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = rpc.IngestStub(channel)
            corpus_id = await new_corpus(stub, metadata)

            async def ingest(url: str):
                return await stub.IngestUrl(
                    ingest_pb2.IngestUrlRequest(url=url, corpus_id=corpus_id), metadata=metadata
                )

            # the request answers with the job at once; the fetch is the job's first stage
            site.delays["/moved"] = 2.0
            started = asyncio.get_running_loop().time()
            reply = await ingest(site.url("/moved"))
            assert asyncio.get_running_loop().time() - started < 1.5
            assert reply.source_url == site.url("/moved") and reply.filename == "moved"
            first = await stub.GetIngestJob(ingest_pb2.GetIngestJobRequest(job_id=reply.job_id), metadata=metadata)
            assert first.state == ingest_pb2.DOCUMENT_STATE_QUEUED and first.stage in ("queued (to fetch)", "fetching")
            stages = set()
            for _ in range(400):
                polled = await stub.GetIngestJob(ingest_pb2.GetIngestJobRequest(job_id=reply.job_id), metadata=metadata)
                stages.add(polled.stage)
                if polled.stage not in ("queued (to fetch)", "fetching"):
                    break
                await asyncio.sleep(0.02)
            assert "fetching" in stages
            del site.delays["/moved"]
            job = await wait_terminal(stub, metadata, reply.job_id, timeout=120)
            assert job.state == ingest_pb2.DOCUMENT_STATE_SEARCHABLE, job.error
            document_id = job.result.document_id
            document = await stub.GetDocument(ingest_pb2.GetDocumentRequest(document_id=document_id), metadata=metadata)
            assert document.source_url == site.url("/guide.html") and document.filename == "guide.html"
            page = await stub.GetDocumentText(
                ingest_pb2.GetDocumentTextRequest(document_id=document_id), metadata=metadata
            )
            text = page.text
            assert page.source_url == site.url("/guide.html")
            assert "# Pump maintenance guide" in text and "| Valve | 120 |" in text and "About us" not in text
            again = await wait_terminal(stub, metadata, (await ingest(site.url("/guide.html"))).job_id, timeout=60)
            assert again.result.duplicate and again.result.document_id == document_id  # unchanged page
            assert document.extractor == "trafilatura" and page.extractor == "trafilatura"
            # the page changed: the same URL re-extracts into the same document, its chunks replaced
            site.pages["/guide.html"] = (
                "text/html; charset=utf-8",
                WEB_PAGE.replace("Pump maintenance guide", "Pump maintenance handbook").encode(),
            )
            changed = await wait_terminal(stub, metadata, (await ingest(site.url("/guide.html"))).job_id, timeout=120)
            assert changed.state == ingest_pb2.DOCUMENT_STATE_SEARCHABLE, changed.error
            assert changed.result.document_id == document_id and changed.result.re_extracted
            assert not changed.result.duplicate
            now = await stub.GetDocumentText(
                ingest_pb2.GetDocumentTextRequest(document_id=document_id), metadata=metadata
            )
            assert "# Pump maintenance handbook" in now.text and "# Pump maintenance guide" not in now.text
            plain = await wait_terminal(stub, metadata, (await ingest(site.url("/notes"))).job_id, timeout=60)
            assert plain.state == ingest_pb2.DOCUMENT_STATE_SEARCHABLE and plain.result.chunk_count == 1

            refused = {}
            for url in (site.url("/to-loopback"), site.url("/to-metadata")):  # refused by the fetching stage
                ended = await wait_terminal(stub, metadata, (await ingest(url)).job_id, timeout=60)
                assert ended.state == ingest_pb2.DOCUMENT_STATE_FAILED
                refused[url] = ended.error
            for url in (
                "ftp://127.0.0.1/x",
                "file:///etc/passwd",
                f"http://localhost:{site.port}/guide.html",
                "http://10.1.2.3/",
            ):
                with pytest.raises(grpc.aio.AioRpcError) as error:
                    await ingest(url)
                assert error.value.code() == grpc.StatusCode.INVALID_ARGUMENT
                refused[url] = error.value.details()
            missing = await wait_terminal(stub, metadata, (await ingest(site.url("/nowhere"))).job_id, timeout=60)
            assert missing.state == ingest_pb2.DOCUMENT_STATE_FAILED
            # the page appears: a retry fetches again (the job's first stage), under the same job
            site.pages["/nowhere"] = ("text/plain", b"The car park closes at nine in the evening.\n")
            await stub.RetryIngestJob(ingest_pb2.RetryIngestJobRequest(job_id=missing.job_id), metadata=metadata)
            fetched = await wait_terminal(stub, metadata, missing.job_id, timeout=60)
            assert fetched.state == ingest_pb2.DOCUMENT_STATE_SEARCHABLE and fetched.result.chunk_count == 1
    finally:
        await app.stop()
        site.close()
    assert "localhost is a loopback address" in refused[site.url("/to-loopback")]
    assert "link-local" in refused[site.url("/to-metadata")]
    assert (
        "only http and https" in refused["ftp://127.0.0.1/x"] and "only http and https" in refused["file:///etc/passwd"]
    )
    assert "private network" in refused["http://10.1.2.3/"]
    assert "answered 404" in missing.error
    # The redirects to refused addresses were followed no further: nothing else was asked for.
    assert site.requests.count("/guide.html") == 3 and "/latest/meta-data/" not in site.requests


async def test_a_removal_killed_with_its_process_completes_in_the_next(backends, migrated_pg, keys_dir, make_token):
    """The removal job of a deleted document, its process SIGKILLed in the middle of a
    batch (held there by a share lock on the chunks), is taken over by the next process once its
    lease expires and completes: no chunk and no document row are left."""
    tmp, addresses = backends
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("KNOWLEDGE_")}
    env.update(ingest_env(migrated_pg, keys_dir, tmp, addresses, port))

    def start() -> subprocess.Popen:
        return subprocess.Popen(
            [sys.executable, "-m", "knowledge_ingest"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )

    admin = await Database.connect(migrated_pg.url())
    metadata = [("authorization", f"Bearer {make_token('removal-kill-tenant')}")]
    first = start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            await asyncio.wait_for(channel.channel_ready(), 60)
            stub = rpc.IngestStub(channel)
            corpus_id = await new_corpus(stub, metadata)
            reply = await upload(stub, metadata, corpus_id, document_text(4), "doomed.md")
            job = await wait_terminal(stub, metadata, reply.job_id, timeout=180)
            assert job.state == ingest_pb2.DOCUMENT_STATE_SEARCHABLE, job.error
            document_id = int(job.result.document_id)
            async with admin.transaction() as hold:  # the removal's chunk delete waits on this
                await hold.fetch("hold", "SELECT 1 FROM chunks WHERE document_id = $1 FOR SHARE", document_id)
                await stub.DeleteDocument(
                    ingest_pb2.DeleteDocumentRequest(document_id=str(document_id)), metadata=metadata
                )
                for _ in range(600):
                    owner = await admin.fetchval(
                        "t", "SELECT lease_owner FROM document_tombstones WHERE document_id = $1", document_id
                    )
                    if owner is not None:
                        break
                    await asyncio.sleep(0.05)
                assert owner is not None, "no removal claimed the tombstone"
                first.send_signal(signal.SIGKILL)  # mid-batch: its transaction dies with it
                first.wait(10)
        assert await admin.fetchval("t", "SELECT count(*) FROM chunks WHERE document_id = $1", document_id) == (
            job.result.chunk_count
        )
        second = start()
        try:
            await wait_removed(admin, document_id, timeout=120)
        finally:
            second.send_signal(signal.SIGTERM)
            second.wait(30)
        row = await admin.fetchrow(
            "t", "SELECT interruptions, lease_owner FROM document_tombstones WHERE document_id = $1", document_id
        )
        assert row["interruptions"] == 1 and row["lease_owner"] is None
        assert await admin.fetchval("t", "SELECT count(*) FROM chunks WHERE document_id = $1", document_id) == 0
        assert await admin.fetchval("t", "SELECT count(*) FROM documents WHERE document_id = $1", document_id) == 0
    finally:
        if first.poll() is None:
            first.kill()
        await admin.close()
