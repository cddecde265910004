"""The scope-keyed cache across two real search processes on one PostgreSQL: an answer cached in
both is replaced in both the moment a document in its scope changes (ingest, delete, rebinding),
while another scope's cached answer survives; hits and misses are counted in the metrics."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import grpc
import httpx
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from knowledge.v1 import ingest_pb2, search_pb2, search_pb2_grpc
from knowledge_ingest.domain.extraction import Extracted
from knowledge_runtime.auth import PUBLIC_CAPABILITIES
from knowledge_runtime.db.pool import Database
from knowledge_runtime.reach import PLATFORM_TENANT
from knowledge_runtime.system_corpora import PLATFORM_ADMIN

from tests.support import rpc
from tests.support.ingest import CountingEmbedder, MemoryBlobs, ingest_app, settings, upload, wait_terminal, wire_fakes
from tests.support.net import free_port
from tests.support.platform import drop_platform_corpora
from tests.support.rpc import auth

pytestmark = pytest.mark.integration


def extract(path: Path, filename: str, mime_type: str) -> Extracted:
    return Extracted(text=path.read_text(), page_count=None, extractable=True, format="text")


@pytest.fixture(scope="module")
async def ingest(migrated_pg, verifier):
    db = await Database.connect(migrated_pg.url(user="knowledge_ingest"))
    admin = await Database.connect(migrated_pg.url())
    ingest = wire_fakes(settings(), db, MemoryBlobs(admin), CountingEmbedder(), extract)
    app = ingest_app(ingest, verifier)
    port = await app.start()
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
    yield rpc.IngestStub(channel)
    await channel.close()
    await app.stop()
    await db.close()
    await admin.close()


async def wait_serving(address: str, process: subprocess.Popen) -> None:
    deadline = time.monotonic() + 60
    async with grpc.aio.insecure_channel(address) as channel:
        health = health_pb2_grpc.HealthStub(channel)
        while time.monotonic() < deadline:
            assert process.poll() is None, process.stderr.read().decode() if process.stderr else ""
            try:
                request = health_pb2.HealthCheckRequest(service="knowledge.v1.SearchService")
                if (await health.Check(request, timeout=1)).status == health_pb2.HealthCheckResponse.SERVING:
                    return
            except grpc.aio.AioRpcError:
                pass
            await asyncio.sleep(0.1)
    raise AssertionError("search never reported SERVING")


@pytest.fixture(scope="module")
async def searches(migrated_pg, keys_dir, tmp_path_factory):
    """Two search processes, each with its own cache (TTL long enough never to expire here)."""
    tmp = tmp_path_factory.mktemp("search-cache")
    started = []
    for _ in range(2):
        port, metrics = free_port(), free_port()
        env = {k: v for k, v in os.environ.items() if not k.startswith("KNOWLEDGE_")}
        env.update(
            {
                "KNOWLEDGE_DATA_DIR": str(tmp),
                "KNOWLEDGE_SEARCH_PORT": str(port),
                "KNOWLEDGE_METRICS_PORT": str(metrics),
                "KNOWLEDGE_DATABASE_URL": migrated_pg.url(user="knowledge_search"),
                "KNOWLEDGE_JWKS_PATH": str(keys_dir / "jwks.json"),
                "KNOWLEDGE_EMBEDDER_ADDRESS": f"127.0.0.1:{free_port()}",  # lexical searches only
                "KNOWLEDGE_SEARCH_CACHE_TTL_S": "600",
                "KNOWLEDGE_LOG_LEVEL": "warning",
            }
        )
        process = subprocess.Popen(
            [sys.executable, "-m", "knowledge_search"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
        )
        started.append((process, port, metrics))
    channels = []
    try:
        for process, port, _ in started:
            await wait_serving(f"127.0.0.1:{port}", process)
            channels.append(grpc.aio.insecure_channel(f"127.0.0.1:{port}"))
        yield [(search_pb2_grpc.SearchServiceStub(c), metrics) for c, (_, _, metrics) in zip(channels, started)]
    finally:
        for channel in channels:
            await channel.close()
        for process, _, _ in started:
            process.terminate()
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()


def counted(metrics_port: int) -> dict[str, float]:
    text = httpx.get(f"http://127.0.0.1:{metrics_port}/metrics").text
    values = {}
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        if name in ("knowledge_search_cache_hits_total", "knowledge_search_cache_misses_total"):
            values[name.split("_")[3]] = float(value)
    return values


async def herons(stub, metadata) -> list[str]:
    request = search_pb2.SearchRequest(query="heron", mode=search_pb2.SEARCH_MODE_LEXICAL, top_k=20)
    return sorted(r.filename for r in (await stub.Search(request, metadata=metadata)).results)


async def ingest_one(ingest, metadata, corpus_id: str, name: str) -> str:
    reply = await upload(ingest, metadata, corpus_id, f"# {name}\n\nA grey heron waits at the {name}.".encode(), name)
    job = await wait_terminal(ingest, metadata, reply.job_id)
    assert job.state == ingest_pb2.DOCUMENT_STATE_SEARCHABLE, job.error
    return job.result.document_id


async def test_a_change_in_a_scope_reaches_every_replica_and_spares_other_scopes(ingest, searches, make_token):
    tenant = f"cache-{uuid.uuid4().hex[:8]}"
    root = auth(make_token(tenant))
    corpora = {}
    for name in ("eng", "sales"):
        made = await ingest.CreateCorpus(ingest_pb2.CreateCorpusRequest(name=name), metadata=root)
        await ingest_one(ingest, root, made.corpus_id, f"{name}-pond.txt")
        await ingest.BindCorpus(
            ingest_pb2.BindCorpusRequest(corpus_id=made.corpus_id, scope=f"workspace:{name}"), metadata=root
        )
        corpora[name] = made.corpus_id
    eng = auth(make_token(tenant, scope="workspace:eng"))
    sales = auth(make_token(tenant, scope="workspace:sales"))
    (a, a_metrics), (b, b_metrics) = searches

    for stub in (a, b):  # both replicas cache both scopes' answers
        assert await herons(stub, eng) == ["eng-pond.txt"]
        assert await herons(stub, sales) == ["sales-pond.txt"]
    before = counted(a_metrics)
    assert await herons(a, eng) == ["eng-pond.txt"]
    after = counted(a_metrics)
    assert after["hits"] == before["hits"] + 1 and after["misses"] == before["misses"]

    lake = await ingest_one(ingest, eng, corpora["eng"], "eng-lake.txt")  # a change in eng's scope
    for stub in (a, b):  # seen at once through both, though both had it cached
        assert await herons(stub, eng) == ["eng-lake.txt", "eng-pond.txt"]
    before = counted(b_metrics)
    assert await herons(b, sales) == ["sales-pond.txt"]  # the other scope's entry survived: a hit
    assert counted(b_metrics)["hits"] == before["hits"] + 1

    await ingest.DeleteDocument(ingest_pb2.DeleteDocumentRequest(document_id=lake), metadata=eng)
    assert await herons(b, eng) == ["eng-pond.txt"]
    assert await herons(a, eng) == ["eng-pond.txt"]

    await ingest.BindCorpus(  # rebinding below its node: the sales reader no longer reaches it
        ingest_pb2.BindCorpusRequest(corpus_id=corpora["sales"], scope="workspace:sales/project:q3"), metadata=sales
    )
    assert await herons(a, sales) == []
    q3 = auth(make_token(tenant, scope="workspace:sales/project:q3"))
    assert await herons(b, q3) == ["sales-pond.txt"]


async def egrets(stub, metadata) -> list[str]:
    request = search_pb2.SearchRequest(query="egret", mode=search_pb2.SEARCH_MODE_LEXICAL, top_k=20)
    return sorted(r.filename for r in (await stub.Search(request, metadata=metadata)).results)


async def test_a_platform_corpus_change_reaches_every_tenants_cache_and_a_tenants_own_spares_the_others(
    ingest, searches, migrated_pg, make_token
):
    """The platform tenant's root generation is in every cache key (runtime/db/reach.py): a change
    in a platform-wide corpus replaces every tenant's cached answer on every replica, while one
    tenant's own change leaves another tenant's entry a hit."""
    admin = await Database.connect(migrated_pg.url())
    try:
        platform = await admin.fetchval(
            "t",
            "INSERT INTO corpora (tenant_id, name, is_system, confidentiality) "
            "VALUES (NULL, $1, true, 'GENERAL') RETURNING corpus_id",
            f"egrets-{uuid.uuid4().hex[:8]}",
        )
        curator = auth(make_token(PLATFORM_TENANT, [*PUBLIC_CAPABILITIES, PLATFORM_ADMIN]))
        await ingest_egret(ingest, curator, str(platform), "platform-egret.txt")
        suffix = uuid.uuid4().hex[:8]
        acme, globex = auth(make_token(f"acme-{suffix}")), auth(make_token(f"globex-{suffix}"))
        own = await ingest.CreateCorpus(ingest_pb2.CreateCorpusRequest(name="own"), metadata=acme)
        (a, a_metrics), (b, _) = searches
        for stub in (a, b):  # both replicas cache both tenants' answers
            for metadata in (acme, globex):
                assert await egrets(stub, metadata) == ["platform-egret.txt"]

        marsh = await ingest_egret(ingest, curator, str(platform), "platform-marsh.txt")  # a platform change
        for stub in (a, b):  # seen at once by every tenant through both replicas
            for metadata in (acme, globex):
                assert await egrets(stub, metadata) == ["platform-egret.txt", "platform-marsh.txt"]

        await ingest_egret(ingest, acme, own.corpus_id, "acme-egret.txt")  # acme's own change
        assert await egrets(a, acme) == ["acme-egret.txt", "platform-egret.txt", "platform-marsh.txt"]
        before = counted(a_metrics)
        assert await egrets(a, globex) == ["platform-egret.txt", "platform-marsh.txt"]  # globex's entry survived
        assert counted(a_metrics)["hits"] == before["hits"] + 1

        await ingest.DeleteDocument(ingest_pb2.DeleteDocumentRequest(document_id=marsh), metadata=curator)
        for stub in (b, a):
            assert await egrets(stub, globex) == ["platform-egret.txt"]
            assert await egrets(stub, acme) == ["acme-egret.txt", "platform-egret.txt"]
    finally:
        await drop_platform_corpora(admin)
        await admin.close()


async def ingest_egret(ingest, metadata, corpus_id: str, name: str) -> str:
    reply = await upload(ingest, metadata, corpus_id, f"# {name}\n\nA white egret fishes at the {name}.".encode(), name)
    job = await wait_terminal(ingest, metadata, reply.job_id)
    assert job.state == ingest_pb2.DOCUMENT_STATE_SEARCHABLE, job.error
    return job.result.document_id
