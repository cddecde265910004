"""Passages by reference through the real parts: content-index, the embedder with the real model,
ingest and search over one PostgreSQL. A platform service's passages come back as hits that name
its reference, fragment and metadata, a 1% metadata filter still fills top_k, searches running
during a re-index never see a mix of versions nor the document missing, a kill of ingest in the
middle of a version leaves the old one searchable and the next process finishes the new one, and
a reference removed after a refused run leaves nothing retrievable."""

from __future__ import annotations

import asyncio
import hashlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import grpc
import pytest
from google.protobuf import struct_pb2
from knowledge.v1 import ingest_pb2, search_pb2, search_pb2_grpc
from knowledge_ingest.bootstrap import build_app as ingest_app
from knowledge_ingest.config import IngestSettings
from knowledge_runtime.db.pool import Database
from knowledge_runtime.settings import Env
from knowledge_search.bootstrap import build_app as search_app
from knowledge_search.config import SearchSettings

from tests.support import rpc
from tests.support.ingest import wait_terminal
from tests.support.net import free_port
from tests.support.real_services import base_env, ingest_env, start_backends

pytestmark = pytest.mark.integration
SEARCHABLE = ingest_pb2.DOCUMENT_STATE_SEARCHABLE
TERM = "cormorant"


def struct(values: dict) -> struct_pb2.Struct:
    message = struct_pb2.Struct()
    message.update(values)
    return message


def version(ref: str, label: str, count: int, **extra) -> ingest_pb2.IndexPassagesRequest:
    """``count`` passages of a version ``label``; each names its version, so a hit tells which it is."""
    passages = [
        ingest_pb2.Passage(
            fragment=f"#p{i // 4 + 1}.{i % 4}",
            text=f"{label}: the {TERM} on page {i // 4 + 1} dives for fish near pier {i}.",
            metadata=struct({"page": i // 4 + 1, "block_ids": [f"blk-{i}", f"blk-{i}b"], "bucket": i % 100}),
        )
        for i in range(count)
    ]
    return ingest_pb2.IndexPassagesRequest(
        corpus_key="projects/42/production",
        document_ref=ref,
        content_sha256=hashlib.sha256(f"{ref}:{label}".encode()).hexdigest(),
        title=ref.rsplit("/", 1)[-1],
        metadata=struct({"file_id": f"file-{ref}", "project": "42"}),
        passages=passages,
        **extra,
    )


@pytest.fixture(scope="module")
async def backends(migrated_pg, keys_dir, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("passages-stack")
    apps, addresses = await start_backends(migrated_pg, keys_dir, tmp)
    yield tmp, addresses
    for app in apps:
        await app.stop()


@asynccontextmanager
async def running(settings, build, *, search: bool = False) -> AsyncIterator[tuple]:
    """One service app started on a free port; (its stub, the app)."""
    app = await build(settings)
    port = await app.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = search_pb2_grpc.SearchServiceStub(channel) if search else rpc.IngestStub(channel)
            yield stub, app
    finally:
        await app.stop()


@pytest.fixture
async def stack(backends, migrated_pg, keys_dir):
    tmp, addresses = backends
    ingest_settings = IngestSettings.from_env(Env(ingest_env(migrated_pg, keys_dir, tmp, addresses, 0)))
    search_settings = SearchSettings.from_env(Env(search_env(migrated_pg, keys_dir, tmp, addresses)))
    admin = await Database.connect(migrated_pg.url())
    try:
        async with (
            running(ingest_settings, ingest_app) as (ingest, _),
            running(search_settings, search_app, search=True) as (search, _),
        ):
            yield ingest, search, admin
    finally:
        await admin.close()


def search_env(migrated_pg, keys_dir, tmp, addresses) -> dict[str, str]:
    return {
        **base_env(migrated_pg, keys_dir, tmp, "search"),
        "KNOWLEDGE_SEARCH_PORT": "0",
        "KNOWLEDGE_EMBEDDER_ADDRESS": addresses["embedder"],
        "KNOWLEDGE_SEARCH_CACHE_TTL_S": "600",  # a stale cached answer would show here
    }


async def index(ingest, metadata, request, timeout: float = 180) -> ingest_pb2.IndexPassagesResponse:
    accepted = await ingest.IndexPassages(request, metadata=metadata)
    if accepted.job_id:
        job = await wait_terminal(ingest, metadata, accepted.job_id, timeout=timeout)
        assert job.state == SEARCHABLE, job.error
    return accepted


async def test_hits_carry_provenance_and_a_1_percent_filter_fills_top_k(stack, make_token):
    ingest, search, _ = stack
    metadata = rpc.auth(make_token("t-pstack-hits"))
    indexed = await index(ingest, metadata, version("projects/42/files/big.pdf", "v1", 1000))
    request = search_pb2.SearchRequest(
        query=f"{TERM} dives for fish", corpus_key="projects/42/production", top_k=10, filter="metadata.bucket = 7"
    )
    for mode in (search_pb2.SEARCH_MODE_HYBRID, search_pb2.SEARCH_MODE_VECTOR, search_pb2.SEARCH_MODE_LEXICAL):
        request.mode = mode
        found = await search.Search(request, metadata=metadata)
        assert len(found.results) == 10, mode  # 10 of the 1,000 passages match: all of them
        assert {r.metadata["bucket"] for r in found.results} == {7}
    hit = found.results[0]
    page, index_ = int(hit.metadata["page"]), int(hit.fragment.rsplit(".", 1)[1])
    assert (hit.document_ref, hit.document_id) == ("projects/42/files/big.pdf", indexed.document_id)
    assert hit.fragment == f"#p{page}.{index_}" and hit.page == page  # its page, cited from the passage
    assert hit.metadata["block_ids"][0].startswith("blk-")  # its first block
    assert dict(hit.document_metadata) == {"file_id": "file-projects/42/files/big.pdf", "project": "42"}
    answer = await search.Query(
        search_pb2.QueryRequest(
            query=f"{TERM} pier", corpus_key="projects/42/production", filter="metadata.bucket = 7"
        ),
        metadata=metadata,
    )
    assert answer.citations and all(c.document_ref == hit.document_ref and c.fragment for c in answer.citations)
    assert {c.metadata["bucket"] for c in answer.citations} == {7}
    context = await search.GetContext(
        search_pb2.GetContextRequest(query=f"{TERM} pier", filter='document_ref = "projects/42/*"'), metadata=metadata
    )
    assert context.context.evidence and {e.document_ref for e in context.context.evidence} == {hit.document_ref}
    assert "document_ref=projects/42/files/big.pdf#p" in context.context.rendered
    tool = await search.SearchDocuments(
        search_pb2.SearchDocumentsRequest(query=TERM, top_k=3, filter="metadata.page = 2"), metadata=metadata
    )
    assert [int(r.metadata["page"]) for r in tool.results] == [2, 2, 2]
    assert "document_ref=projects/42/files/big.pdf#p2." in tool.text


async def test_searches_during_a_re_index_never_see_a_mix_of_versions_nor_the_document_missing(stack, make_token):
    ingest, search, _ = stack
    metadata = rpc.auth(make_token("t-pstack-reindex"))
    ref = "projects/42/files/living.pdf"
    await index(ingest, metadata, version(ref, "alpha", 120))
    answers: list[tuple[float, set[str]]] = []  # (when the search started, the versions its hits of the ref hold)
    stop = asyncio.Event()

    async def client(cached: bool) -> None:
        """``cached``: the same query each time (search's cache answers it while nothing changed);
        else a query of its own each time, so the database answers every one."""
        for n in range(1_000_000):
            if stop.is_set():
                return
            query = f"{TERM} dives for fish near pier" + ("" if cached else f" {n}")
            request = search_pb2.SearchRequest(query=query, top_k=20, filter=f'document_ref = "{ref}"')
            started = time.monotonic()
            reply = await search.Search(request, metadata=metadata)
            answers.append((started, {r.content.split(":", 1)[0] for r in reply.results}))

    clients = [asyncio.create_task(client(cached)) for cached in (True, False, False)]
    try:
        while len(answers) < 6:
            await asyncio.sleep(0.05)
        admitted = time.monotonic()
        await index(ingest, metadata, version(ref, "beta", 120))
        stored = time.monotonic()  # the job answered SEARCHABLE after its storing transaction committed
        while sum(1 for started, _ in answers if started > stored) < 6:
            await asyncio.sleep(0.05)
    finally:
        stop.set()
        await asyncio.gather(*clients)
    assert all(len(seen) == 1 for _, seen in answers), [seen for _, seen in answers if len(seen) != 1]
    assert sum(1 for started, _ in answers if admitted < started < stored) >= 3  # looked while it re-indexed
    assert {"alpha"} in [seen for _, seen in answers] and {"beta"} in [seen for _, seen in answers]
    assert all(seen == {"beta"} for started, seen in answers if started > stored)


async def test_a_reference_removed_after_a_refused_run_leaves_nothing_retrievable(
    backends, migrated_pg, keys_dir, make_token
):
    tmp, addresses = backends
    tenant = "t-pstack-refused"
    metadata = rpc.auth(make_token(tenant))
    operator = rpc.auth(make_token("platform", ["platform.admin"]))
    settings = ingest_env(migrated_pg, keys_dir, tmp, addresses, 0)
    async with running(IngestSettings.from_env(Env(settings)), ingest_app) as (ingest, _):
        await index(ingest, metadata, version("projects/42/files/kept.pdf", "one", 6))
    # An API-only ingest admits a new reference and a new version of the kept one; the tenant is
    # switched off before any worker runs them, so their runs are refused (FEATURE_DISABLED, which
    # waiting does not fix: FAILED at once).
    api_only = IngestSettings.from_env(Env({**settings, "KNOWLEDGE_INGEST_WORKERS": "0"}))
    async with running(api_only, ingest_app) as (ingest, _):
        refused_new = await ingest.IndexPassages(version("projects/42/files/never.pdf", "one", 6), metadata=metadata)
        refused_next = await ingest.IndexPassages(version("projects/42/files/kept.pdf", "two", 6), metadata=metadata)
        await ingest.UpdateTenantSettings(
            ingest_pb2.UpdateTenantSettingsRequest(tenant=tenant, enabled=False), metadata=operator
        )
    async with running(IngestSettings.from_env(Env(settings)), ingest_app) as (ingest, _):
        try:  # a switched-off tenant reads nothing, its jobs included: they are read in the database
            ended = await ended_jobs(migrated_pg, [refused_new.job_id, refused_next.job_id])
            assert ended == ["FAILED", "FAILED"]
        finally:
            await ingest.UpdateTenantSettings(
                ingest_pb2.UpdateTenantSettingsRequest(tenant=tenant, enabled=True), metadata=operator
            )
        kept = await ingest.GetDocument(
            ingest_pb2.GetDocumentRequest(document_id=refused_next.document_id), metadata=metadata
        )
        assert kept.state == SEARCHABLE and kept.chunk_count == 6  # the refused version left the old one
        never = await ingest.GetDocument(
            ingest_pb2.GetDocumentRequest(document_id=refused_new.document_id), metadata=metadata
        )
        assert (never.state, never.refusal_reason) == (ingest_pb2.DOCUMENT_STATE_FAILED, "FEATURE_DISABLED")
        removed = {}
        for ref in ("projects/42/files/never.pdf", "projects/42/files/kept.pdf"):
            removed[ref] = await ingest.RemoveByReference(
                ingest_pb2.RemoveByReferenceRequest(corpus_key="projects/42/production", document_ref=ref),
                metadata=metadata,
            )
        listed = await ingest.ListDocuments(
            ingest_pb2.ListDocumentsRequest(corpus_id="-", corpus_key="projects/42/production"), metadata=metadata
        )
    assert removed["projects/42/files/never.pdf"].removed == 0 and removed["projects/42/files/never.pdf"].tombstone
    assert removed["projects/42/files/kept.pdf"].removed == 1
    assert list(listed.documents) == []
    search_settings = SearchSettings.from_env(Env(search_env(migrated_pg, keys_dir, tmp, addresses)))
    async with running(search_settings, search_app, search=True) as (search, _):
        found = await search.Search(
            search_pb2.SearchRequest(query=f"{TERM} dives for fish", top_k=50, filter='document_ref = "projects/42/*"'),
            metadata=metadata,
        )
    assert list(found.results) == []


async def ended_jobs(pg, job_ids: list[str], timeout: float = 120.0) -> list[str]:
    """The jobs' states once every one has ended."""
    admin = await Database.connect(pg.url())
    try:
        deadline = time.monotonic() + timeout
        while True:
            rows = await admin.fetch(
                "t", "SELECT job_id::text, state FROM ingest_jobs WHERE job_id = ANY($1::uuid[])", job_ids
            )
            states = {r["job_id"]: r["state"] for r in rows}
            if (
                all(states.get(j) in ("SEARCHABLE", "FAILED", "CANCELLED") for j in job_ids)
                or time.monotonic() > deadline
            ):
                return [states.get(j, "") for j in job_ids]
            await asyncio.sleep(0.1)
    finally:
        await admin.close()


async def test_a_kill_mid_version_leaves_the_old_one_searchable_and_the_next_process_finishes_it(
    backends, migrated_pg, keys_dir, make_token
):
    tmp, addresses = backends
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("KNOWLEDGE_")}
    env.update(ingest_env(migrated_pg, keys_dir, tmp, addresses, port))
    metadata = rpc.auth(make_token("t-pstack-kill"))
    ref = "projects/42/files/killed.pdf"
    admin = await Database.connect(migrated_pg.url())

    def start() -> subprocess.Popen:
        return subprocess.Popen(
            [sys.executable, "-m", "knowledge_ingest"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )

    async def versions(document_id: str) -> dict[str, int]:
        rows = await admin.fetch(
            "t",
            "SELECT split_part(content, ':', 1) AS label, count(*) AS n FROM chunks WHERE document_id = $1 GROUP BY 1",
            int(document_id),
        )
        return {r["label"]: r["n"] for r in rows}

    first = start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            await asyncio.wait_for(channel.channel_ready(), 60)
            stub = rpc.IngestStub(channel)
            old = await index(stub, metadata, version(ref, "old", 8))
            new = await stub.IndexPassages(version(ref, "new", 300), metadata=metadata)
            for _ in range(1200):
                job = await stub.GetIngestJob(ingest_pb2.GetIngestJobRequest(job_id=new.job_id), metadata=metadata)
                done, _, total = job.stage.partition(" ")[2].partition("/")
                if job.stage.startswith("embedding") and done.isdigit() and 0 < int(done) < int(total):
                    break
                await asyncio.sleep(0.02)
            assert job.stage.startswith("embedding"), job.stage
            first.send_signal(signal.SIGKILL)
            first.wait(10)
        assert await versions(old.document_id) == {"old": 8}  # the old version, whole
        state = await admin.fetchval("t", "SELECT state FROM documents WHERE document_id = $1", int(old.document_id))
        assert state == "SEARCHABLE"
        second = start()
        try:
            async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
                await asyncio.wait_for(channel.channel_ready(), 60)
                stub = rpc.IngestStub(channel)
                job = await wait_terminal(stub, metadata, new.job_id, timeout=240)
        finally:
            second.send_signal(signal.SIGTERM)
            second.wait(30)
    finally:
        if first.poll() is None:
            first.kill()
    try:
        assert job.state == SEARCHABLE and (job.attempt, job.interruptions) == (1, 1)
        assert await versions(old.document_id) == {"new": 300}  # replaced whole, no chunk twice
        sha = await admin.fetchval(
            "t", "SELECT source_sha256 FROM documents WHERE document_id = $1", int(old.document_id)
        )
        assert sha == hashlib.sha256(f"{ref}:new".encode()).hexdigest()
    finally:
        await admin.close()
