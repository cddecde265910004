"""Enablement, quotas and usage over real PostgreSQL and real gRPC servers: ingest with
its real adapters (blobs and vectors as fakes at their ports), the enablement gate every
service runs, two ingest processes sharing one database."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from knowledge.v1 import ingest_pb2
from knowledge_ingest.domain.extraction import Extracted
from knowledge_ingest.tenants.metrics import publish
from knowledge_runtime.auth import PUBLIC_CAPABILITIES, USAGE_ADMIN
from knowledge_runtime.db.pool import Database
from knowledge_runtime.db.tenant_settings import enablement_gate
from knowledge_runtime.registry import service
from prometheus_client import REGISTRY

from tests.support import rpc
from tests.support.ingest import (
    CountingEmbedder,
    MemoryBlobs,
    ingest_app,
    new_corpus,
    settings,
    upload,
    wait_terminal,
    wire_fakes,
)
from tests.support.net import free_port
from tests.support.rpc import auth, error_info

pytestmark = pytest.mark.integration


def extract(path: Path, filename: str, mime_type: str) -> Extracted:
    text = path.read_bytes().decode("utf-8", "replace")
    return Extracted(text=text, page_count=None, extractable=bool(text.strip()), format="text")


@pytest.fixture
async def ingest(migrated_pg, verifier):
    db = await Database.connect(migrated_pg.url(user="knowledge_ingest"), max_size=30)
    admin = await Database.connect(migrated_pg.url())
    ingest = wire_fakes(settings(), db, MemoryBlobs(admin), CountingEmbedder(), extract)
    app = ingest_app(ingest, verifier)
    app.tenant_gate = enablement_gate(db, True)
    port = await app.start()
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
    yield rpc.IngestStub(channel), admin
    await channel.close()
    await app.stop()
    await db.close()
    await admin.close()


def tenant() -> str:
    return f"t-{uuid.uuid4().hex[:10]}"


def admin_auth(make_token) -> list[tuple[str, str]]:
    # The operator's own tenant is not the one it manages, and may itself be switched off.
    return auth(make_token("platform-ops", ["platform.admin"]))


async def put(stub, make_token, name: str, enabled: bool, **quotas) -> ingest_pb2.TenantSettings:
    request = ingest_pb2.UpdateTenantSettingsRequest(
        tenant=name, enabled=enabled, quotas=ingest_pb2.TenantQuotas(**quotas)
    )
    return (await stub.UpdateTenantSettings(request, metadata=admin_auth(make_token))).settings


# ---- settings and enablement ----------------------------------------------------------------


async def test_an_unconfigured_tenant_has_the_deployments_default_and_no_quotas(ingest, make_token):
    stub, _ = ingest
    name = tenant()
    got = await stub.GetTenantSettings(
        ingest_pb2.GetTenantSettingsRequest(tenant=name), metadata=admin_auth(make_token)
    )
    assert (got.tenant, got.enabled, got.configured) == (name, True, False)
    assert not got.quotas.HasField("max_documents") and not got.HasField("update_time")


async def test_only_a_platform_admin_sets_or_reads_settings(ingest, make_token):
    stub, _ = ingest
    user = auth(make_token("acme"))  # the public capabilities, not platform.admin
    for call in (
        stub.GetTenantSettings(ingest_pb2.GetTenantSettingsRequest(tenant="acme"), metadata=user),
        stub.UpdateTenantSettings(ingest_pb2.UpdateTenantSettingsRequest(tenant="acme", enabled=True), metadata=user),
    ):
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await call
        assert caught.value.code() == grpc.StatusCode.PERMISSION_DENIED
        assert error_info(caught.value).reason == "CAPABILITY_MISSING"


async def test_a_disabled_tenant_is_refused_on_its_next_call_and_others_are_not(ingest, make_token):
    stub, _ = ingest
    name, other = tenant(), tenant()
    metadata = auth(make_token(name))
    await new_corpus(stub, metadata)
    saved = await put(stub, make_token, name, False)
    assert (saved.enabled, saved.configured, saved.updated_by) == (False, True, "dev")
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.ListCorpora(ingest_pb2.ListCorporaRequest(), metadata=metadata)
    assert caught.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert error_info(caught.value).reason == "FEATURE_DISABLED"
    with pytest.raises(grpc.aio.AioRpcError) as caught:  # an upload too: nothing is stored
        await upload(stub, metadata, "1", b"text")
    assert error_info(caught.value).reason == "FEATURE_DISABLED"
    await new_corpus(stub, auth(make_token(other)))  # another tenant is served
    await put(stub, make_token, name, True)
    listed = await stub.ListCorpora(ingest_pb2.ListCorporaRequest(), metadata=metadata)
    assert len(listed.corpora) == 1  # nothing of it was lost while it was off


async def test_settings_are_idempotent_and_quotas_absent_are_unlimited(ingest, make_token):
    stub, _ = ingest
    name = tenant()
    first = await put(stub, make_token, name, True, max_documents=1000, max_llm_cost_per_month=12.5)
    again = await put(stub, make_token, name, True, max_documents=1000, max_llm_cost_per_month=12.5)
    assert again == first  # the same body writes nothing, not even update_time
    assert first.quotas.max_documents == 1000 and first.quotas.max_llm_cost_per_month == 12.5
    assert not first.quotas.HasField("max_bytes")
    cleared = await put(stub, make_token, name, True)
    assert (
        not cleared.quotas.HasField("max_documents")
        and cleared.update_time.ToDatetime() >= first.update_time.ToDatetime()
    )


@pytest.mark.parametrize(
    ("request_fields", "field"),
    [
        ({"enabled": True, "quotas": ingest_pb2.TenantQuotas(max_documents=-1)}, "quotas.max_documents"),
        ({"quotas": ingest_pb2.TenantQuotas(max_documents=1)}, "enabled"),
        ({"enabled": True, "tenant": " "}, "tenant"),
        ({"enabled": True, "tenant": "x" * 201}, "tenant"),
        (
            {"enabled": True, "quotas": ingest_pb2.TenantQuotas(max_llm_cost_per_month=float("nan"))},
            "quotas.max_llm_cost_per_month",
        ),
    ],
)
async def test_invalid_settings_are_invalid_argument_and_change_nothing(ingest, make_token, request_fields, field):
    stub, admin = ingest
    fields = {"tenant": tenant(), **request_fields}
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.UpdateTenantSettings(
            ingest_pb2.UpdateTenantSettingsRequest(**fields), metadata=admin_auth(make_token)
        )
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert error_info(caught.value).metadata["field"] == field
    assert await admin.fetchval("n", "SELECT count(*) FROM tenant_settings WHERE tenant_id = $1", fields["tenant"]) == 0


# ---- quotas -----------------------------------------------------------------------------------


async def test_twenty_parallel_uploads_against_a_quota_of_five_store_exactly_five(ingest, make_token):
    stub, admin = ingest
    name = tenant()
    metadata = auth(make_token(name))
    corpus = await new_corpus(stub, metadata)
    await put(stub, make_token, name, True, max_documents=5)

    async def one(i: int):
        try:
            return await upload(stub, metadata, corpus, f"document {i} {uuid.uuid4().hex}".encode())
        except grpc.aio.AioRpcError as error:
            return error

    outcomes = await asyncio.gather(*(one(i) for i in range(20)))
    accepted = [o for o in outcomes if not isinstance(o, grpc.aio.AioRpcError)]
    refused = [o for o in outcomes if isinstance(o, grpc.aio.AioRpcError)]
    assert len(accepted) == 5 and len(refused) == 15
    for error in refused:
        assert error.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        info = error_info(error)
        assert info.reason == "QUOTA_EXHAUSTED" and info.metadata["quota"] == "max_documents"
    assert await admin.fetchval("n", "SELECT count(*) FROM documents WHERE tenant_id = $1", name) == 5
    assert await admin.fetchval("n", "SELECT count(*) FROM ingest_jobs WHERE tenant_id = $1", name) == 5


async def test_a_full_tenant_is_refused_before_any_byte_is_stored(ingest, make_token):
    stub, admin = ingest
    name = tenant()
    metadata = auth(make_token(name))
    corpus = await new_corpus(stub, metadata)
    await upload(stub, metadata, corpus, b"the only document allowed")
    await put(stub, make_token, name, True, max_documents=1)
    blobs_before = await admin.fetchval("n", "SELECT count(*) FROM content_blobs")
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await upload(stub, metadata, corpus, f"another {uuid.uuid4().hex}".encode())
    assert error_info(caught.value).reason == "QUOTA_EXHAUSTED"
    assert await admin.fetchval("n", "SELECT count(*) FROM content_blobs") == blobs_before


async def test_a_bytes_quota_counts_the_tenants_stored_bytes(ingest, make_token):
    stub, _ = ingest
    name = tenant()
    metadata = auth(make_token(name))
    corpus = await new_corpus(stub, metadata)
    await put(stub, make_token, name, True, max_bytes=100)
    await upload(stub, metadata, corpus, b"x" * 60 + uuid.uuid4().hex.encode()[:10])  # 70 bytes
    with pytest.raises(grpc.aio.AioRpcError) as caught:  # 70 + 40 > 100
        await upload(stub, metadata, corpus, b"y" * 30 + uuid.uuid4().hex.encode()[:10])
    info = error_info(caught.value)
    assert info.reason == "QUOTA_EXHAUSTED" and info.metadata["quota"] == "max_bytes"
    await upload(stub, metadata, corpus, b"z" * 20 + uuid.uuid4().hex.encode()[:10])  # 70 + 30 fits


async def test_a_chunks_quota_fails_the_job_with_its_refusal_and_it_is_not_retried(ingest, make_token):
    stub, admin = ingest
    name = tenant()
    metadata = auth(make_token(name))
    corpus = await new_corpus(stub, metadata)
    await put(stub, make_token, name, True, max_chunks=2)
    text = "\n\n".join(f"# Part {i}\n\n" + " ".join(f"Sentence {i}.{j}." for j in range(60)) for i in range(5))
    reply = await upload(stub, metadata, corpus, text.encode())
    job = await wait_terminal(stub, metadata, reply.job_id)
    assert job.state == ingest_pb2.DOCUMENT_STATE_FAILED
    assert "max_chunks quota is used up" in job.error
    row = await admin.fetchrow(
        "r",
        "SELECT j.attempts, d.state, d.error FROM ingest_jobs j JOIN documents d USING (document_id) WHERE j.job_id = $1",
        uuid.UUID(reply.job_id),
    )
    assert row["state"] == "FAILED" and "max_chunks" in row["error"]  # recorded on the document
    assert row["attempts"] <= 1  # failed at once, never rescheduled
    assert await admin.fetchval("n", "SELECT count(*) FROM chunks WHERE tenant_id = $1", name) == 0
    events = await admin.fetch(
        "e",
        "SELECT e.type, e.detail->>'reason' AS reason FROM events e JOIN ingest_jobs j USING (document_id)"
        " WHERE j.job_id = $1",
        uuid.UUID(reply.job_id),
    )
    assert [(e["type"], e["reason"]) for e in events] == [("document.failed", row["error"])]  # in APPLY's transaction


async def test_a_spent_embedding_token_quota_fails_the_job_before_extraction(ingest, make_token):
    stub, admin = ingest
    name = tenant()
    metadata = auth(make_token(name))
    corpus = await new_corpus(stub, metadata)
    await admin.execute(
        "c",
        "INSERT INTO cost_records (tenant_id, model, operation, texts, tokens) VALUES ($1, 'm', 'embed', 1, 500)",
        name,
    )
    await put(stub, make_token, name, True, max_embedding_tokens_per_month=500)
    reply = await upload(stub, metadata, corpus, f"text {uuid.uuid4().hex}".encode())
    job = await wait_terminal(stub, metadata, reply.job_id)
    assert job.state == ingest_pb2.DOCUMENT_STATE_FAILED and "max_embedding_tokens_per_month" in job.error


# ---- usage ------------------------------------------------------------------------------------


async def test_usage_sums_the_tenants_records_of_the_period(ingest, make_token):
    stub, admin = ingest
    name = tenant()
    metadata = auth(make_token(name, [*PUBLIC_CAPABILITIES, USAGE_ADMIN]))  # the whole tenant's figures
    corpus = await new_corpus(stub, metadata)
    data = f"usage {uuid.uuid4().hex}".encode()
    job = await wait_terminal(stub, metadata, (await upload(stub, metadata, corpus, data)).job_id)
    insert = "INSERT INTO cost_records (tenant_id, model, operation, texts, tokens, cost, create_time) VALUES ($1, 'm', $2, 1, $3, $4, $5)"
    now = datetime.now(UTC)
    await admin.execute("c", insert, name, "embed", 100, 0, now)
    await admin.execute("c", insert, name, "chat", 300, 0.25, now)
    await admin.execute("c", insert, name, "chat", 50, 0.5, datetime(2025, 3, 31, 23, 59, tzinfo=UTC))
    await admin.execute("c", insert, tenant(), "chat", 999, 9, now)  # another tenant's
    await put(stub, make_token, name, True, max_documents=10)
    usage = await stub.GetUsage(ingest_pb2.GetUsageRequest(), metadata=metadata)
    assert usage.period == f"{now.year:04d}-{now.month:02d}"
    assert (usage.document_count, usage.stored_bytes, usage.chunk_count) == (1, len(data), job.result.chunk_count)
    assert (usage.embedding_tokens, usage.llm_tokens, usage.llm_cost) == (100, 300, 0.25)
    assert usage.quotas.max_documents == 10 and usage.scope == ""
    march = await stub.GetUsage(ingest_pb2.GetUsageRequest(period="2025-03"), metadata=metadata)
    assert (march.period, march.llm_tokens, march.llm_cost, march.embedding_tokens) == ("2025-03", 50, 0.5, 0)
    for period in ("2025-13", "March", "2025-3", " ", "\x85"):
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await stub.GetUsage(ingest_pb2.GetUsageRequest(period=period), metadata=metadata)
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT


async def test_without_usage_admin_usage_is_the_callers_node_and_below_within_its_clearance(ingest, make_token):
    """A project token was told the whole tenant's figures. Now only a usage.admin token is; any
    other caller hears what the corpora of its node and below hold in bands it reads, and no
    spending (the cost records are not kept per node)."""
    stub, admin = ingest
    name = tenant()
    root = auth(make_token(name, clearance="RESTRICTED"))
    sizes = {}
    for corpus, band, node in (
        ("handbook", "TENANT", "/"),
        ("salaries", "CONFIDENTIAL", "/"),
        ("runbooks", "TENANT", "workspace:eng"),
        ("invoices", "TENANT", "workspace:eng/project:billing"),
        ("pipeline", "TENANT", "workspace:sales"),
    ):
        made = await stub.CreateCorpus(ingest_pb2.CreateCorpusRequest(name=corpus, confidentiality=band), metadata=root)
        data = f"{corpus} {uuid.uuid4().hex} ".encode() * (len(sizes) + 1)
        job = await wait_terminal(stub, root, (await upload(stub, root, made.corpus_id, data)).job_id)
        assert job.state == ingest_pb2.DOCUMENT_STATE_SEARCHABLE
        sizes[corpus] = len(data)
        if node != "/":
            await stub.BindCorpus(ingest_pb2.BindCorpusRequest(corpus_id=made.corpus_id, scope=node), metadata=root)
    insert = (
        "INSERT INTO cost_records (tenant_id, model, operation, texts, tokens, cost) VALUES ($1, 'm', $2, 1, $3, $4)"
    )
    await admin.execute("c", insert, name, "chat", 300, 0.25)

    async def usage(scope: str, clearance: str | None = None, capabilities=None) -> ingest_pb2.Usage:
        token = make_token(name, capabilities, scope=scope, clearance=clearance)
        return await stub.GetUsage(ingest_pb2.GetUsageRequest(), metadata=auth(token))

    whole = await usage("workspace:eng", capabilities=[*PUBLIC_CAPABILITIES, USAGE_ADMIN])
    assert (whole.scope, whole.document_count, whole.stored_bytes) == ("", 5, sum(sizes.values()))
    assert (whole.llm_tokens, whole.llm_cost) == (300, 0.25)
    for scope, clearance, counted in (
        ("/", None, {"handbook", "runbooks", "invoices", "pipeline"}),  # not the CONFIDENTIAL one
        ("/", "CONFIDENTIAL", set(sizes)),
        ("workspace:eng", None, {"runbooks", "invoices"}),  # never an ancestor's or a sibling's
        ("workspace:eng/project:billing", None, {"invoices"}),
        ("workspace:sales", "RESTRICTED", {"pipeline"}),
    ):
        part = await usage(scope, clearance)
        assert (part.scope, part.document_count) == (scope, len(counted)), (scope, clearance)
        assert part.stored_bytes == sum(sizes[c] for c in counted), (scope, clearance)
        assert (part.llm_tokens, part.llm_cost, part.embedding_tokens) == (0, 0, 0)


async def test_the_per_tenant_metrics_keep_their_label_bounded(ingest, make_token):
    stub, _ = ingest
    names = [tenant() for _ in range(3)]
    for count, name in enumerate(names, start=1):
        metadata = auth(make_token(name))
        corpus = await new_corpus(stub, metadata)
        for i in range(count):
            await upload(stub, metadata, corpus, f"{name} {i}".encode())
    from knowledge_ingest.tenants.postgres import PostgresTenants

    totals = await PostgresTenants(ingest[1], True).totals()
    mine = [t for t in totals if t.tenant in names]
    assert sorted(t.documents for t in mine) == [1, 2, 3]
    publish(mine, max_tenants=2)
    labels = {
        sample.labels["tenant"]: sample.value
        for metric in REGISTRY.collect()
        if metric.name == "knowledge_tenant_documents"
        for sample in metric.samples
    }
    assert labels == {names[2]: 3, names[1]: 2, "_other": 1}


# ---- two processes ------------------------------------------------------------------------------


def service_process(name: str, pg, keys_dir: Path, tmp_path: Path) -> tuple[subprocess.Popen, str]:
    """One service as its own process, tenants disabled by default (production's setting)."""
    port, entry = free_port(), service(name)
    env = {k: v for k, v in os.environ.items() if not k.startswith("KNOWLEDGE_")}
    env.update(
        {
            "KNOWLEDGE_DATA_DIR": str(tmp_path),
            f"KNOWLEDGE_{entry.port_setting}": str(port),
            "KNOWLEDGE_DATABASE_URL": pg.url(user=entry.database_role),
            "KNOWLEDGE_JWKS_PATH": str(keys_dir / "jwks.json"),
            "KNOWLEDGE_SERVICE_KEY_PATH": str(keys_dir / "dev-signing-key.pem"),
            "KNOWLEDGE_INGEST_WORKERS": "0",
            "KNOWLEDGE_TENANTS_ENABLED_BY_DEFAULT": "false",
        }
    )
    process = subprocess.Popen(
        [sys.executable, "-m", entry.module],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    return process, f"127.0.0.1:{port}"


def stop(*processes: subprocess.Popen) -> None:
    for process in processes:
        process.send_signal(signal.SIGTERM)
    for process in processes:
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()


async def wait_listening(address: str, process: subprocess.Popen, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    async with grpc.aio.insecure_channel(address) as channel:
        health = health_pb2_grpc.HealthStub(channel)
        while time.monotonic() < deadline:
            assert process.poll() is None, process.stderr.read().decode()
            try:
                await health.Check(health_pb2.HealthCheckRequest(service=""), timeout=1)
                return
            except grpc.aio.AioRpcError:
                await asyncio.sleep(0.1)
    raise AssertionError("ingest never listened")


async def test_a_change_through_one_replica_holds_on_the_next_request_of_another(
    migrated_pg, keys_dir, tmp_path, make_token
):
    """Two ingest processes on one database, tenants disabled by default (production's setting)."""
    (a, address_a), (b, address_b) = (service_process("ingest", migrated_pg, keys_dir, tmp_path / n) for n in "ab")
    try:
        await asyncio.gather(wait_listening(address_a, a), wait_listening(address_b, b))
        name = tenant()
        metadata = auth(make_token(name))
        async with grpc.aio.insecure_channel(address_a) as one, grpc.aio.insecure_channel(address_b) as two:
            replica_a, replica_b = rpc.IngestStub(one), rpc.IngestStub(two)
            for replica in (replica_a, replica_b):  # never configured: the default (false) holds
                with pytest.raises(grpc.aio.AioRpcError) as caught:
                    await replica.ListCorpora(ingest_pb2.ListCorporaRequest(), metadata=metadata)
                assert error_info(caught.value).reason == "FEATURE_DISABLED"
            await put(replica_a, make_token, name, True)
            await replica_b.ListCorpora(ingest_pb2.ListCorporaRequest(), metadata=metadata)  # at once on b
            await put(replica_b, make_token, name, False)
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await replica_a.ListCorpora(ingest_pb2.ListCorporaRequest(), metadata=metadata)
            assert error_info(caught.value).reason == "FEATURE_DISABLED"
    finally:
        stop(a, b)


async def test_content_index_and_search_refuse_a_disabled_tenant_too_and_gc_passes(
    migrated_pg, keys_dir, tmp_path, make_token, make_service_token
):
    """The one check in the shared interceptor: every service obeys it, internal calls included;
    blob GC (blob.admin, every tenant's) is platform work and passes."""
    from knowledge.v1 import content_index_pb2, content_index_pb2_grpc, search_pb2, search_pb2_grpc
    from knowledge_cli.gc import collect

    (blobs, blobs_address), (search, search_address) = (
        service_process(name, migrated_pg, keys_dir, tmp_path / name) for name in ("content-index", "search")
    )
    try:
        await asyncio.gather(wait_listening(blobs_address, blobs), wait_listening(search_address, search))
        name = tenant()
        async with grpc.aio.insecure_channel(blobs_address) as one, grpc.aio.insecure_channel(search_address) as two:
            stat = content_index_pb2_grpc.ContentIndexServiceStub(one).StatBlob(
                content_index_pb2.StatBlobRequest(blob_id="1"), metadata=auth(make_service_token(name, ["blob.read"]))
            )
            query = search_pb2_grpc.SearchServiceStub(two).Search(
                search_pb2.SearchRequest(query="anything"), metadata=auth(make_token(name))
            )
            for call in (stat, query):
                with pytest.raises(grpc.aio.AioRpcError) as caught:
                    await call
                assert caught.value.code() == grpc.StatusCode.PERMISSION_DENIED
                assert error_info(caught.value).reason == "FEATURE_DISABLED"
        token = make_service_token("platform", ["blob.admin"])
        report = await collect(blobs_address, token, apply=False)  # what `knowledge gc` runs
        assert report.applied is False and report.removed_count >= 0
    finally:
        stop(blobs, search)
