"""`knowledge blobs migrate` moves a filesystem store to the S3 test server (moto's, standing in for
MinIO or S3): it copies every blob, verifies each hash (an isolated tenant's HMAC too), refuses to
switch while one does not verify, then points every row at its object; content-index on the
object store reads them all back, and running it again changes nothing."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from datetime import timedelta
from pathlib import Path

import grpc
import pytest
from knowledge.v1 import content_index_pb2_grpc
from knowledge_content_index.adapters.local_storage import LocalBlobStorage
from knowledge_content_index.adapters.postgres import PostgresBlobs
from knowledge_content_index.bootstrap import build_app
from knowledge_content_index.config import ContentIndexSettings
from knowledge_content_index.domain.identity import ContentKeyring
from knowledge_content_index.domain.model import UploadHeader
from knowledge_content_index.usecases import BlobPolicy, BlobUseCases
from knowledge_runtime.auth import Scope
from knowledge_runtime.settings import Env

from tests.support.content_index import read_all, unique_bytes
from tests.support.object_store import CREDENTIALS, S3Server
from tests.support.real_services import base_env

pytestmark = pytest.mark.integration

KNOWLEDGE = Path(sys.executable).parent / "knowledge"
PDF = UploadHeader(extension=".pdf", mime_type="application/pdf")


@pytest.fixture(scope="module")
def s3() -> S3Server:
    server = S3Server()
    yield server
    server.close()


async def knowledge_blobs(env: dict[str, str], *args: str) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        str(KNOWLEDGE),
        "blobs",
        "migrate",
        *args,
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await process.communicate()
    return process.returncode, out.decode(), err.decode()


async def stored(cases, tenant: str, data: bytes):
    async def chunks():
        yield data

    return (await cases.write_blob(Scope(tenant=tenant, capabilities=frozenset()), PDF, chunks())).blob


async def test_migrate_copies_verifies_and_switches_a_filesystem_store(
    s3, content_db, migrated_pg, admin, keys_dir, tmp_path, make_service_token, monkeypatch
):
    bucket, root, master = s3.new_bucket(), tmp_path / "blobs", os.urandom(32)
    await admin.execute(
        "INSERT INTO tenants (tenant_id, isolate_content) VALUES ('migrate-isolated', true) "
        "ON CONFLICT (tenant_id) DO UPDATE SET isolate_content = true"
    )
    cases = BlobUseCases(
        PostgresBlobs(content_db),
        LocalBlobStorage.create(root),
        ContentKeyring(master),
        BlobPolicy(64 * 1024 * 1024, timedelta(days=1), timedelta(0)),
    )
    contents = {
        "small": ("migrate-tenant", unique_bytes(200_000)),
        "large": ("migrate-tenant", unique_bytes(12 * 1024 * 1024)),  # a multipart upload
        "isolated": ("migrate-isolated", unique_bytes(30_000)),
        "damaged": ("migrate-tenant", unique_bytes(40_000)),
    }
    blobs = {name: await stored(cases, tenant, data) for name, (tenant, data) in contents.items()}
    damaged = cases._storage.path_for(cases._storage.key_for(blobs["damaged"].storage_uri))
    damaged.write_bytes(b"\0" + contents["damaged"][1][1:])  # same size, another hash

    env = {k: v for k, v in os.environ.items() if not k.startswith("KNOWLEDGE_")}
    env |= {
        "KNOWLEDGE_DATA_DIR": str(tmp_path),
        "KNOWLEDGE_DATABASE_URL": migrated_pg.url(user="knowledge_content_index"),
        "KNOWLEDGE_CONTENT_KEY": master.hex(),
        "KNOWLEDGE_BLOB_ROOT": str(root),
        **{k: v for k, v in s3.settings(bucket).items() if k != "KNOWLEDGE_BLOB_STORE"},  # still the filesystem
    }
    keys = {
        name: f"blobs/{blob.storage_uri.split('/')[-2]}/{blob.storage_uri.split('/')[-1]}"
        for name, blob in blobs.items()
    }

    code, out, err = await knowledge_blobs(env)
    assert code == 1 and f"blob {blobs['damaged'].blob_id}" in err
    assert "4 blob(s) on the filesystem: 3 copied" in out
    assert s3.keys(bucket) == sorted(keys[n] for n in ("small", "large", "isolated"))
    for name in ("small", "large", "isolated"):
        assert s3.read(bucket, keys[name]) == contents[name][1]
    assert s3.incomplete_uploads(bucket) == []

    code, _, err = await knowledge_blobs(env, "--switch")
    assert code == 1 and "nothing was switched" in err
    uris = await admin.fetch(
        "SELECT storage_uri FROM content_blobs WHERE blob_id = ANY($1::bigint[])", [b.blob_id for b in blobs.values()]
    )
    assert all(row["storage_uri"].startswith("file://") for row in uris)

    damaged.write_bytes(contents["damaged"][1])  # repaired: now it verifies
    code, out, err = await knowledge_blobs(env, "--switch", "--json")
    assert code == 0, err
    report = json.loads(out)
    assert report["copied"] == 1 and report["already_there"] == 3 and report["switched"] == 4 and report["complete"]
    for name, blob in blobs.items():
        uri = await admin.fetchval("SELECT storage_uri FROM content_blobs WHERE blob_id = $1", blob.blob_id)
        assert uri == f"s3://{bucket}/{keys[name]}"

    code, out, _ = await knowledge_blobs(env, "--switch", "--json")  # again: nothing left to do
    assert code == 0 and json.loads(out)["rows"] == 0 and json.loads(out)["switched"] == 0

    for name, value in CREDENTIALS.items():
        monkeypatch.setenv(name, value)
    service_env = {
        **base_env(migrated_pg, keys_dir, tmp_path, "content-index"),
        **s3.settings(bucket),
        "KNOWLEDGE_CONTENT_KEY": master.hex(),
        "KNOWLEDGE_CONTENT_INDEX_PORT": "0",
        "KNOWLEDGE_METRICS_PORT": "0",
    }
    app = await build_app(ContentIndexSettings.from_env(Env(service_env)))
    port = await app.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            stub = content_index_pb2_grpc.ContentIndexServiceStub(channel)
            for name, (tenant, data) in contents.items():
                token = make_service_token(tenant=tenant)
                assert (await read_all(stub, token, str(blobs[name].blob_id)))[1] == data, name
    finally:
        await app.stop()
