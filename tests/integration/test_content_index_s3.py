"""content-index with its blobs on S3-compatible object storage (KNOWLEDGE_BLOB_STORE=s3), against
a real S3-protocol server on 127.0.0.1 (moto's, standing in for MinIO or S3; tests/support/object_store.py)
and real PostgreSQL: the same promises as on the filesystem: content-addressed keys, dedup,
streamed reads, heal-on-write, GC only after the reference check, tenant isolation; a blob whole
or not at all (no parts left behind); readiness that follows the store, with nothing lost."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from datetime import timedelta

import grpc
import pytest
from google.protobuf.duration_pb2 import Duration
from grpc_health.v1 import health_pb2, health_pb2_grpc
from knowledge.v1 import content_index_pb2 as pb
from knowledge.v1 import content_index_pb2_grpc
from knowledge_content_index.adapters.local_storage import LocalBlobStorage
from knowledge_content_index.adapters.s3_storage import (
    S3BlobStorage,
    S3Location,
    StagedBytesChanged,
    s3_clients,
)
from knowledge_content_index.bootstrap import build_app
from knowledge_content_index.config import ContentIndexSettings
from knowledge_content_index.domain.identity import ContentKeyring
from knowledge_content_index.domain.model import BlobKey
from knowledge_runtime.settings import Env

from tests.support.content_index import age, read_all, reference, rows_with_hash, sha256_hex, unique_bytes, write
from tests.support.object_store import CREDENTIALS, S3Server
from tests.support.real_services import base_env
from tests.support.rpc import auth

pytestmark = pytest.mark.integration

NAMED = "knowledge.v1.ContentIndexService"
SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
GRACE = Duration(seconds=3600)


@pytest.fixture(scope="module")
def s3() -> S3Server:
    server = S3Server()
    yield server
    server.close()


@pytest.fixture
def bucket(s3) -> str:
    return s3.new_bucket()


@pytest.fixture
def aws(monkeypatch) -> None:
    """The in-process service's botocore reads its credentials from the environment."""
    for name, value in CREDENTIALS.items():
        monkeypatch.setenv(name, value)


@asynccontextmanager
async def content_index(s3, bucket, pg, keys_dir, tmp_path, **extra: str) -> AsyncIterator:
    """content-index as `knowledge-content-index` wires it (bootstrap), on the object store."""
    env = {
        **base_env(pg, keys_dir, tmp_path, "content-index"),
        **s3.settings(bucket),
        "KNOWLEDGE_CONTENT_INDEX_PORT": "0",
        "KNOWLEDGE_METRICS_PORT": "0",
        "KNOWLEDGE_READINESS_INTERVAL_S": "0.2",
        **extra,
    }
    app = await build_app(ContentIndexSettings.from_env(Env(env)))
    port = await app.start()
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{port}") as channel:
            yield content_index_pb2_grpc.ContentIndexServiceStub(channel), health_pb2_grpc.HealthStub(channel)
    finally:
        await app.stop()


async def test_upload_dedup_read_heal_and_gc_on_the_object_store(
    s3, bucket, aws, migrated_pg, keys_dir, tmp_path, make_service_token, admin
):
    token = make_service_token(tenant="s3-tenant")
    small, large = unique_bytes(3 * 1024 * 1024 + 17), unique_bytes(20 * 1024 * 1024 + 5)  # one PUT; 3 parts
    async with content_index(s3, bucket, migrated_pg, keys_dir, tmp_path) as (stub, _):
        first = await write(stub, token, small, "report.pdf")
        digest = sha256_hex(small)
        key = f"blobs/{digest[:2]}/{digest}.pdf"
        assert s3.keys(bucket) == [key] and s3.read(bucket, key) == small
        assert first.blob.storage_uri == f"{digest[:2]}/{digest}.pdf" and not first.already_existed
        assert "s3://" not in first.blob.storage_uri and bucket not in first.blob.storage_uri

        again = await write(stub, token, small, "copy.pdf")
        assert again.already_existed and again.blob.blob_id == first.blob.blob_id
        assert s3.keys(bucket) == [key] and await rows_with_hash(admin, digest) == 1

        assert (await read_all(stub, token, first.blob.blob_id))[1] == small
        ranged = await read_all(stub, token, first.blob.blob_id, offset=1_000_000, limit=2_500_000)
        assert ranged[1] == small[1_000_000:3_500_000]

        second = await write(stub, token, large, "deck.pdf")
        large_key = f"blobs/{sha256_hex(large)[:2]}/{sha256_hex(large)}.pdf"
        assert s3.read(bucket, large_key) == large and s3.incomplete_uploads(bucket) == []
        assert (await read_all(stub, token, second.blob.blob_id))[1] == large

        # Heal-on-write: the object vanished behind its row; the next write of the bytes restores it.
        s3.client.delete_object(Bucket=bucket, Key=key)
        stat = await stub.StatBlob(pb.StatBlobRequest(blob_id=first.blob.blob_id), metadata=auth(token))
        assert not stat.file_present
        healed = await write(stub, token, small, "report.pdf")
        assert healed.blob.blob_id == first.blob.blob_id and s3.read(bucket, key) == small

        # GC removes the unreferenced blob's object after its row, and keeps the referenced one.
        await reference(admin, "s3-tenant", second.blob.blob_id)
        for blob in (first.blob, second.blob):
            await age(admin, blob.blob_id)
        report = await stub.CollectGarbage(pb.CollectGarbageRequest(min_age=GRACE), metadata=auth(token))
        assert first.blob.blob_id in report.removed_blob_ids
        assert second.blob.blob_id not in report.removed_blob_ids
        assert s3.keys(bucket) == [large_key] and await rows_with_hash(admin, digest) == 0


async def test_an_isolated_tenant_s_blob_is_keyed_by_its_hmac(
    s3, bucket, aws, migrated_pg, keys_dir, tmp_path, make_service_token, admin
):
    await admin.execute(
        "INSERT INTO tenants (tenant_id, isolate_content) VALUES ('s3-isolated', true) "
        "ON CONFLICT (tenant_id) DO UPDATE SET isolate_content = true"
    )
    data = unique_bytes(50_000)
    async with content_index(s3, bucket, migrated_pg, keys_dir, tmp_path) as (stub, _):
        isolated = await write(stub, make_service_token(tenant="s3-isolated"), data, "a.txt")
        shared = await write(stub, make_service_token(tenant="s3-shared"), data, "a.txt")
        other = make_service_token(tenant="s3-other")
        with pytest.raises(grpc.aio.AioRpcError) as refused:
            await read_all(stub, other, isolated.blob.blob_id)
        assert refused.value.code() == grpc.StatusCode.NOT_FOUND
    keyed = isolated.blob.content_hash.removeprefix("hmac-sha256:")
    assert isolated.blob.content_hash.startswith("hmac-sha256:") and keyed != sha256_hex(data)
    assert s3.keys(bucket) == sorted(
        [f"blobs/{keyed[:2]}/{keyed}.txt", f"blobs/{sha256_hex(data)[:2]}/{shared.blob.content_hash}.txt"]
    )


async def wait_status(health, wanted: int, timeout: float) -> float:
    started = time.monotonic()
    while True:
        reply = await health.Check(health_pb2.HealthCheckRequest(service=NAMED), timeout=2)
        if reply.status == wanted:
            return time.monotonic() - started
        if time.monotonic() - started > timeout:
            raise AssertionError(f"{NAMED} still {reply.status} after {timeout}s")
        await asyncio.sleep(0.05)


async def test_readiness_follows_the_store_and_nothing_is_lost(
    s3, bucket, aws, migrated_pg, keys_dir, tmp_path, make_service_token
):
    token = make_service_token(tenant="s3-outage")
    data = unique_bytes(300_000)
    async with content_index(s3, bucket, migrated_pg, keys_dir, tmp_path) as (stub, health):
        await wait_status(health, SERVING, 5)
        written = await write(stub, token, data, "kept.pdf")
        s3.stop()
        try:
            await wait_status(health, NOT_SERVING, 10)
            with pytest.raises(grpc.aio.AioRpcError) as failed:
                await read_all(stub, token, written.blob.blob_id)
            # a passing outage the caller may retry, not an internal error
            assert failed.value.code() == grpc.StatusCode.UNAVAILABLE
            assert "blob store" in failed.value.details()
            assert (await health.Check(health_pb2.HealthCheckRequest(service=""))).status == SERVING  # alive
        finally:
            s3.start()
        await wait_status(health, SERVING, 10)
        assert (await read_all(stub, token, written.blob.blob_id))[1] == data
        again = await write(stub, token, data, "kept.pdf")
        assert again.already_existed and again.blob.blob_id == written.blob.blob_id


@asynccontextmanager
async def storage_on(s3, bucket, tmp_path, prefix: str = "blobs") -> AsyncIterator[S3BlobStorage]:
    async with s3_clients(endpoint=s3.endpoint, region="us-east-1") as (client, probe):
        yield S3BlobStorage(client, S3Location(bucket, prefix), LocalBlobStorage.create(tmp_path / "spool"), probe)


def hashers():
    keyring = ContentKeyring(b"k" * 32)
    return lambda: keyring.hasher("t", isolated=False)


def flip_last_byte(path) -> None:
    with open(path, "r+b") as spool:
        spool.seek(-1, 2)
        last = spool.read(1)[0]
        spool.seek(-1, 2)
        spool.write(bytes([last ^ 1]))


async def test_an_upload_whose_spool_changed_is_aborted_and_leaves_nothing(s3, bucket, aws, tmp_path):
    data = unique_bytes(17 * 1024 * 1024)  # three parts: the check comes after the last one
    key = BlobKey(sha256_hex(data), ".bin")
    async with storage_on(s3, bucket, tmp_path) as storage, storage.stage() as staged:
        await staged.write(data)
        await staged.seal()
        flip_last_byte(staged.spool.path)  # after it was hashed
        with pytest.raises(StagedBytesChanged):
            await storage.prepare(staged, key, hashers())
    assert s3.keys(bucket) == [] and s3.incomplete_uploads(bucket) == []
    assert list((tmp_path / "spool" / ".staging").iterdir()) == []


async def test_the_store_trusts_only_its_own_content_keys(s3, bucket, aws, tmp_path):
    digest = "ab" * 32
    async with storage_on(s3, bucket, tmp_path) as storage:
        own = storage.uri_for(BlobKey(digest, ".pdf"))
        assert own == f"s3://{bucket}/blobs/ab/{digest}.pdf"
        assert storage.key_for(own) == BlobKey(digest, ".pdf")
        for foreign in (
            f"s3://other-bucket/blobs/ab/{digest}.pdf",
            f"s3://{bucket}/elsewhere/ab/{digest}.pdf",
            f"s3://{bucket}/blobs/cd/{digest}.pdf",  # not its shard
            f"s3://{bucket}/blobs/ab/{digest}.exe",  # not a whitelisted extension
            f"s3://{bucket}/blobs/ab/../ab/{digest}.pdf",
            f"file:///var/lib/knowledge/blobs/ab/{digest}.pdf",
        ):
            assert storage.key_for(foreign) is None, foreign
            assert await storage.size_of(foreign) is None and not await storage.delete(foreign)


async def test_listing_old_objects_and_stale_multipart_uploads(s3, bucket, aws, tmp_path):
    """The orphan sweep's listing in key order with a cursor, strays counted and never touched;
    removal by age; uploads of a pod that never came back aborted by age (content keys only)."""
    digests = sorted(sha256_hex(bytes([n])) for n in range(5))
    for digest in digests:
        s3.client.put_object(Bucket=bucket, Key=f"blobs/{digest[:2]}/{digest}.txt", Body=digest.encode())
    for stray in ("blobs/notes.txt", "blobs/ab/not-a-digest.txt", f"blobs/00/{digests[0]}.txt"):
        s3.client.put_object(Bucket=bucket, Key=stray, Body=b"x")
    s3.client.put_object(Bucket=bucket, Key="outside/kept.txt", Body=b"x")
    stale = s3.client.create_multipart_upload(Bucket=bucket, Key=f"blobs/{digests[0][:2]}/{digests[0]}.txt")
    foreign = s3.client.create_multipart_upload(Bucket=bucket, Key="outside/upload.bin")
    async with storage_on(s3, bucket, tmp_path) as storage:
        first = await storage.list_content(None, 3)
        assert [f.key.digest for f in first.files] == digests[:3] and not first.complete
        rest = await storage.list_content(first.files[-1].key, 10)
        assert [f.key.digest for f in rest.files] == digests[3:] and rest.complete
        assert first.stray_count + rest.stray_count >= 2
        uri = first.files[0].storage_uri
        assert await storage.remove_if_older(uri, timedelta(hours=1)) is None  # young: kept
        assert await storage.remove_if_older(uri, timedelta(0)) == len(digests[0])
        assert await storage.sweep_staging(timedelta(0)) == 1
    remaining = s3.client.list_multipart_uploads(Bucket=bucket).get("Uploads", [])
    assert [u["UploadId"] for u in remaining] == [foreign["UploadId"]] != [stale["UploadId"]]
    assert "blobs/notes.txt" in s3.keys(bucket) and "outside/kept.txt" in s3.keys(bucket)
