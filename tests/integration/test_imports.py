"""Fenced imports, change findings and auto-indexing with the real parts: content-index (its own
fence), the embedder with the real model, ingest, PostgreSQL, and real files, directories and
symlinks under a temporary import root."""

import asyncio
import os
import time
import uuid

import grpc
import pytest
from knowledge.v1 import content_index_pb2, content_index_pb2_grpc, ingest_pb2
from knowledge_cli.stack_settings import default_embedding_model
from knowledge_content_index.bootstrap import build_app as content_index_app
from knowledge_content_index.config import ContentIndexSettings
from knowledge_embedder.bootstrap import build_app as embedder_app
from knowledge_embedder.config import EmbedderSettings
from knowledge_ingest.bootstrap import build_app as ingest_app
from knowledge_ingest.clients.services import ContentIndexClient
from knowledge_ingest.config import IngestSettings
from knowledge_ingest.documents.postgres import PostgresDocuments
from knowledge_ingest.imports.postgres import PostgresImports, hash_file
from knowledge_ingest.imports.usecases import ImportUseCases
from knowledge_ingest.jobs.postgres import PostgresJobs
from knowledge_runtime.auth import Scope
from knowledge_runtime.db.pool import Database
from knowledge_runtime.registry import service as registered
from knowledge_runtime.service_tokens import ServiceTokenSigner
from knowledge_runtime.settings import Env

from tests.support import rpc
from tests.support.ingest import new_corpus, wait_terminal
from tests.support.rpc import error_info

pytestmark = pytest.mark.integration

IMPORTING = ["corpus.create", "corpus.read", "document.upload", "document.import", "imports.admin"]


def base_env(pg, keys_dir, tmp_path, service: str) -> dict[str, str]:
    return {
        "KNOWLEDGE_DATA_DIR": str(tmp_path),
        "KNOWLEDGE_DATABASE_URL": pg.url(user=registered(service).database_role),
        "KNOWLEDGE_JWKS_PATH": str(keys_dir / "jwks.json"),
        "KNOWLEDGE_SERVICE_KEY_PATH": str(keys_dir / "dev-signing-key.pem"),
        "KNOWLEDGE_EMBEDDING_MODEL": default_embedding_model(),
        "KNOWLEDGE_BLOB_ROOT": str(tmp_path / "blobs"),
        "KNOWLEDGE_LOG_LEVEL": "warning",
    }


@pytest.fixture(scope="module")
async def stack(migrated_pg, keys_dir, tmp_path_factory):
    """Real content-index, embedder and ingest, all configured with the import root ``docs``."""
    tmp = tmp_path_factory.mktemp("imports")
    root = tmp / "docs"
    root.mkdir()
    outside = tmp / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("the launch codes are 0000\n")
    roots = {"KNOWLEDGE_IMPORT_ROOTS": f"docs={root}"}
    apps, addresses = [], {}
    for name, settings_type, build in (
        ("content-index", ContentIndexSettings, content_index_app),
        ("embedder", EmbedderSettings, embedder_app),
    ):
        env = {
            **base_env(migrated_pg, keys_dir, tmp, name),
            **roots,
            f"KNOWLEDGE_{registered(name).port_setting}": "0",
        }
        app = await build(settings_type.from_env(Env(env)))
        addresses[name] = f"127.0.0.1:{await app.start()}"
        apps.append(app)
    env = {
        **base_env(migrated_pg, keys_dir, tmp, "ingest"),
        **roots,
        "KNOWLEDGE_INGEST_PORT": "0",
        "KNOWLEDGE_CONTENT_INDEX_ADDRESS": addresses["content-index"],
        "KNOWLEDGE_EMBEDDER_ADDRESS": addresses["embedder"],
        "KNOWLEDGE_IMPORT_SCAN_INTERVAL_S": "0",  # passes on demand only (the schedule has its own test)
    }
    settings = IngestSettings.from_env(Env(env))
    app = await ingest_app(settings)
    addresses["ingest"] = f"127.0.0.1:{await app.start()}"
    apps.append(app)
    yield {"root": root, "outside": outside, "addresses": addresses, "settings": settings, "env": env}
    for app in reversed(apps):
        await app.stop()


@pytest.fixture
async def ingest(stack, make_token):
    async with grpc.aio.insecure_channel(stack["addresses"]["ingest"]) as channel:
        tenant = f"imp-{uuid.uuid4().hex[:8]}"
        metadata = [("authorization", f"Bearer {make_token(tenant, IMPORTING)}")]
        stub = rpc.IngestStub(channel)
        yield stub, metadata, tenant, await new_corpus(stub, metadata)


async def counts(pg, tenant: str) -> tuple[int, int, int]:
    admin = await Database.connect(pg.url())
    try:
        row = await admin.fetchrow(
            "t",
            "SELECT (SELECT count(*) FROM ingest_jobs WHERE tenant_id = $1) AS jobs,"
            " (SELECT count(*) FROM documents WHERE tenant_id = $1) AS documents,"
            " (SELECT count(*) FROM content_blobs WHERE content_hash = encode(sha256($2::bytea), 'hex')) AS secret",
            tenant,
            b"the launch codes are 0000\n",
        )
    finally:
        await admin.close()
    return row["jobs"], row["documents"], row["secret"]


async def test_a_file_under_the_root_is_imported_and_searchable(stack, ingest):
    stub, metadata, _, corpus = ingest
    path = stack["root"] / f"{uuid.uuid4().hex[:6]}-handbook.md"
    path.write_text("# Leave\n\nEvery employee gets thirty days of paid leave a year.\n")
    reply = await stub.ImportPath(ingest_pb2.ImportPathRequest(corpus_id=corpus, paths=[str(path)]), metadata=metadata)
    assert [item.resolved_path for item in reply.items] == [str(path.resolve())]
    job = await wait_terminal(stub, metadata, reply.items[0].job.job_id, timeout=120)
    assert job.state == ingest_pb2.DOCUMENT_STATE_SEARCHABLE and job.result.chunk_count >= 1, job.error
    document = await stub.GetDocument(
        ingest_pb2.GetDocumentRequest(document_id=job.result.document_id), metadata=metadata
    )
    assert document.filename == path.name and document.extractor  # what read it is on the document
    findings = await stub.ListImportFindings(ingest_pb2.ListImportFindingsRequest(corpus_id=corpus), metadata=metadata)
    assert [(f.path, f.state, f.job_id) for f in findings.findings] == [(path.name, "accepted", job.job_id)]


@pytest.mark.parametrize("how", ["symlink", "dotdot", "absolute", "symlinked-directory"])
async def test_paths_out_of_the_root_are_refused_and_nothing_is_read(stack, ingest, migrated_pg, how):
    stub, metadata, tenant, corpus = ingest
    root, outside = stack["root"], stack["outside"]
    name = uuid.uuid4().hex[:6]
    if how == "symlink":
        (root / f"{name}.txt").symlink_to(outside / "secret.txt")
        path = str(root / f"{name}.txt")
    elif how == "dotdot":
        path = f"{root}/../outside/secret.txt"
    elif how == "absolute":
        path = str(outside / "secret.txt")
    else:
        (root / name).symlink_to(outside, target_is_directory=True)
        path = str(root / name / "secret.txt")
    good = root / f"{name}-fine.txt"
    good.write_text("fine\n")
    before = await counts(migrated_pg, tenant)
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        # one refused path refuses the call: the good one before it is not stored either
        await stub.ImportPath(
            ingest_pb2.ImportPathRequest(corpus_id=corpus, paths=[str(good), path]), metadata=metadata
        )
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert error_info(caught.value).reason == "PATH_REFUSED"
    assert await counts(migrated_pg, tenant) == before
    assert before[2] == 0  # the secret's bytes were never stored


async def test_content_index_fences_on_its_own(stack, make_service_token, migrated_pg):
    """Called directly, as if ingest's own check were missing or wrong: content-index refuses."""
    root, outside = stack["root"], stack["outside"]
    link = root / f"{uuid.uuid4().hex[:6]}.txt"
    link.symlink_to(outside / "secret.txt")
    metadata = [("authorization", f"Bearer {make_service_token('imp-direct', ['blob.write'])}")]
    async with grpc.aio.insecure_channel(stack["addresses"]["content-index"]) as channel:
        stub = content_index_pb2_grpc.ContentIndexServiceStub(channel)
        for path in (str(link), str(outside / "secret.txt"), f"{root}/../outside/secret.txt", str(root)):
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await stub.ImportFile(content_index_pb2.ImportFileRequest(path=path), metadata=metadata)
            assert error_info(caught.value).reason == "PATH_REFUSED", path
        fine = root / f"{uuid.uuid4().hex[:6]}.txt"
        fine.write_text("imported directly\n")
        reply = await stub.ImportFile(content_index_pb2.ImportFileRequest(path=str(fine)), metadata=metadata)
        assert reply.blob.size_bytes == len("imported directly\n") and reply.resolved_path == str(fine)
    assert (await counts(migrated_pg, "imp-direct"))[2] == 0


class SwapBeforeRead:
    """Content-index's client, except that just before content-index reads the (checked) path,
    the file there is replaced by a symlink out of the root: the swap between check and read."""

    def __init__(self, real: ContentIndexClient, outside) -> None:
        self.real, self.outside = real, outside

    async def import_file(self, tenant: str, path: str, mime_type: str):
        os.unlink(path)
        os.symlink(self.outside / "secret.txt", path)
        return await self.real.import_file(tenant, path, mime_type)


async def test_a_path_swapped_for_a_symlink_between_check_and_read_is_refused(stack, migrated_pg, keys_dir):
    settings = stack["settings"]
    signer = ServiceTokenSigner.for_service(settings.common)
    db = await Database.connect(migrated_pg.url(user="knowledge_ingest"))
    client = ContentIndexClient(stack["addresses"]["content-index"], signer)
    documents, jobs = PostgresDocuments(db), PostgresJobs(db)

    async def hash_only(resolved):  # ingest's own read happens first, while the file is still regular
        return await hash_file(resolved)

    imports = ImportUseCases(
        settings.import_roots, SwapBeforeRead(client, stack["outside"]), documents, jobs, PostgresImports(db), hash_only
    )
    tenant = f"imp-{uuid.uuid4().hex[:8]}"
    scope = Scope(tenant, frozenset(IMPORTING), "dev")
    try:
        await db.execute("t", "INSERT INTO tenants (tenant_id) VALUES ($1)", tenant)
        corpus = await db.fetchval(
            "t", "INSERT INTO corpora (tenant_id, name) VALUES ($1, 'c') RETURNING corpus_id", tenant
        )
        path = stack["root"] / f"{uuid.uuid4().hex[:6]}.txt"
        path.write_text("a regular file when checked\n")
        with pytest.raises(Exception) as caught:
            await imports.import_paths(scope, str(corpus), [str(path)])
        assert getattr(caught.value, "reason", None) == "PATH_REFUSED"
        assert await counts(migrated_pg, tenant) == (0, 0, 0)
    finally:
        await client.close()
        await db.close()


async def _findings(stub, metadata, corpus, state=""):
    reply = await stub.ListImportFindings(
        ingest_pb2.ListImportFindingsRequest(corpus_id=corpus, state=state), metadata=metadata
    )
    return list(reply.findings)


async def test_passes_record_findings_once_per_path_and_content(stack, ingest):
    stub, metadata, _, corpus = ingest
    folder = stack["root"] / uuid.uuid4().hex[:8]
    folder.mkdir()
    (folder / "a.md").write_text("# A\n\nAlpha.\n")
    (folder / "b.md").write_text("# B\n\nBravo.\n")
    # the corpus watches a root of its own: a sub-folder is not a root, so bind the root and
    # read the findings of this folder only
    binding = await stub.SetImportBinding(
        ingest_pb2.SetImportBindingRequest(corpus_id=corpus, root="docs", mode="suggest"), metadata=metadata
    )
    assert (binding.mode, binding.set_by) == ("suggest", "dev")
    first = await stub.ScanImports(ingest_pb2.ScanImportsRequest(corpus_id=corpus), metadata=metadata)
    mine = [f for f in await _findings(stub, metadata, corpus) if f.path.startswith(folder.name + "/")]
    assert sorted((f.path.split("/")[-1], f.kind, f.state) for f in mine) == [
        ("a.md", "new", "open"),
        ("b.md", "new", "open"),
    ]
    assert first.findings_recorded >= 2 and first.jobs_started == 0
    again = await stub.ScanImports(ingest_pb2.ScanImportsRequest(corpus_id=corpus), metadata=metadata)
    assert again.findings_recorded == 0 and again.files_seen >= 2  # an untouched root: nothing new
    (folder / "a.md").write_text("# A\n\nAlpha, changed.\n")
    changed = await stub.ScanImports(ingest_pb2.ScanImportsRequest(corpus_id=corpus), metadata=metadata)
    assert changed.findings_recorded == 1
    mine = [f for f in await _findings(stub, metadata, corpus, "open") if f.path.startswith(folder.name + "/")]
    assert sorted((f.path.split("/")[-1], f.kind) for f in mine) == [
        ("a.md", "changed"),
        ("a.md", "new"),
        ("b.md", "new"),
    ]
    b = next(f for f in mine if f.path.endswith("b.md"))
    dismissed = await stub.DismissImportFinding(
        ingest_pb2.DismissImportFindingRequest(finding_id=b.finding_id), metadata=metadata
    )
    assert (dismissed.state, dismissed.decided_by) == ("dismissed", "dev")
    assert (
        await stub.ScanImports(ingest_pb2.ScanImportsRequest(corpus_id=corpus), metadata=metadata)
    ).findings_recorded == 0
    kept = [f for f in await _findings(stub, metadata, corpus, "dismissed")]
    assert [f.finding_id for f in kept] == [b.finding_id]  # kept: somebody looked
    with pytest.raises(grpc.aio.AioRpcError) as caught:
        await stub.AcceptImportFinding(
            ingest_pb2.AcceptImportFindingRequest(finding_id=b.finding_id), metadata=metadata
        )
    assert error_info(caught.value).reason == "FINDING_DECIDED"
    newest = next(f for f in mine if f.kind == "changed")
    accepted = await stub.AcceptImportFinding(
        ingest_pb2.AcceptImportFindingRequest(finding_id=newest.finding_id), metadata=metadata
    )
    assert accepted.finding.state == "accepted" and accepted.finding.job_id == accepted.job.job_id
    job = await wait_terminal(stub, metadata, accepted.job.job_id, timeout=120)
    assert job.state == ingest_pb2.DOCUMENT_STATE_SEARCHABLE, job.error


async def test_auto_ingests_what_a_pass_finds_and_off_does_nothing(stack, ingest):
    stub, metadata, _, corpus = ingest
    await stub.SetImportBinding(
        ingest_pb2.SetImportBindingRequest(corpus_id=corpus, root="docs", mode="off"), metadata=metadata
    )
    off = await stub.ScanImports(ingest_pb2.ScanImportsRequest(corpus_id=corpus), metadata=metadata)
    assert (off.roots, off.findings_recorded) == (0, 0)
    binding = await stub.SetImportBinding(
        ingest_pb2.SetImportBindingRequest(corpus_id=corpus, root="docs", mode="auto"), metadata=metadata
    )
    assert binding.set_by == "dev"
    listed = await stub.ListImportBindings(ingest_pb2.ListImportBindingsRequest(corpus_id=corpus), metadata=metadata)
    assert [(b.root, b.mode) for b in listed.bindings] == [("docs", "auto")]
    name = f"{uuid.uuid4().hex[:8]}.md"
    (stack["root"] / name).write_text("# Auto\n\nIndexed without anybody asking.\n")
    report = await stub.ScanImports(ingest_pb2.ScanImportsRequest(corpus_id=corpus), metadata=metadata)
    assert report.jobs_started == report.findings_recorded >= 1
    mine = [f for f in await _findings(stub, metadata, corpus) if f.path == name]
    assert len(mine) == 1 and mine[0].state == "accepted" and mine[0].decided_by == "auto-index (set by dev)"
    job = await wait_terminal(stub, metadata, mine[0].job_id, timeout=120)
    assert job.state == ingest_pb2.DOCUMENT_STATE_SEARCHABLE, job.error


async def test_a_scheduled_pass_runs_without_being_asked(stack, ingest):
    stub, metadata, _, corpus = ingest
    name = f"{uuid.uuid4().hex[:8]}.md"
    (stack["root"] / name).write_text("# Scheduled\n\nFound by the schedule.\n")
    await stub.SetImportBinding(
        ingest_pb2.SetImportBindingRequest(corpus_id=corpus, root="docs", mode="suggest"), metadata=metadata
    )
    assert not any(f.path == name for f in await _findings(stub, metadata, corpus))  # this replica: no schedule
    scheduled = await ingest_app(
        IngestSettings.from_env(
            Env({**stack["env"], "KNOWLEDGE_IMPORT_SCAN_INTERVAL_S": "1", "KNOWLEDGE_INGEST_WORKERS": "0"})
        )
    )
    await scheduled.start()
    try:
        for _ in range(200):
            if any(f.path == name for f in await _findings(stub, metadata, corpus)):
                break
            await asyncio.sleep(0.1)
        else:
            raise AssertionError("no scheduled pass recorded the file")
    finally:
        await scheduled.stop()
    listed = await stub.ListImportBindings(ingest_pb2.ListImportBindingsRequest(corpus_id=corpus), metadata=metadata)
    assert listed.bindings[0].HasField("last_scan_time")


async def test_a_file_over_the_upload_cap_is_refused_at_once_and_left_out_of_passes(stack, ingest, migrated_pg):
    stub, metadata, tenant, corpus = ingest
    folder = stack["root"] / uuid.uuid4().hex[:8]
    folder.mkdir()
    huge = folder / "huge.pdf"
    huge.touch()
    os.truncate(huge, 5 * 1024**3)  # 5 GB that cost no disk; the cap is 100 MiB
    try:
        started = time.monotonic()
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await stub.ImportPath(ingest_pb2.ImportPathRequest(corpus_id=corpus, paths=[str(huge)]), metadata=metadata)
        assert time.monotonic() - started < 1.5  # refused from its size, not after hashing
        assert caught.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert error_info(caught.value).reason == "UPLOAD_TOO_LARGE"
        assert (await counts(migrated_pg, tenant))[:2] == (0, 0)
        await stub.SetImportBinding(
            ingest_pb2.SetImportBindingRequest(corpus_id=corpus, root="docs", mode="suggest"), metadata=metadata
        )
        started = time.monotonic()
        report = await stub.ScanImports(ingest_pb2.ScanImportsRequest(corpus_id=corpus), metadata=metadata)
        assert time.monotonic() - started < 5  # the rest of the shared root is small files
        assert report.errors >= 1
        assert not [f for f in await _findings(stub, metadata, corpus) if f.path.startswith(folder.name + "/")]
    finally:
        huge.unlink()


async def test_binding_needs_the_admin_capability_and_a_known_root(stack, make_token):
    async with grpc.aio.insecure_channel(stack["addresses"]["ingest"]) as channel:
        stub = rpc.IngestStub(channel)
        tenant = f"imp-{uuid.uuid4().hex[:8]}"
        admin = [("authorization", f"Bearer {make_token(tenant, IMPORTING)}")]
        corpus = await new_corpus(stub, admin)
        plain = [("authorization", f"Bearer {make_token(tenant, ['document.import'])}")]
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await stub.SetImportBinding(
                ingest_pb2.SetImportBindingRequest(corpus_id=corpus, root="docs", mode="auto"), metadata=plain
            )
        assert error_info(caught.value).reason == "CAPABILITY_MISSING"
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await stub.SetImportBinding(
                ingest_pb2.SetImportBindingRequest(corpus_id=corpus, root="nope", mode="auto"), metadata=admin
            )
        assert error_info(caught.value).reason == "IMPORT_ROOT_NOT_FOUND"
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await stub.SetImportBinding(
                ingest_pb2.SetImportBindingRequest(corpus_id=corpus, root="docs", mode="always"), metadata=admin
            )
        assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
        other = [("authorization", f"Bearer {make_token('imp-other', IMPORTING)}")]
        with pytest.raises(grpc.aio.AioRpcError) as caught:  # another tenant's corpus: 404
            await stub.ListImportFindings(ingest_pb2.ListImportFindingsRequest(corpus_id=corpus), metadata=other)
        assert caught.value.code() == grpc.StatusCode.NOT_FOUND
        roots = await stub.ListImportRoots(ingest_pb2.ListImportRootsRequest(), metadata=admin)
        assert [(r.name, r.path) for r in roots.roots] == [("docs", str(stack["root"].resolve()))]
