"""What the content-index integration tests share: a real service over real PostgreSQL and real
files, and helpers to write, read and inspect its blobs."""

from __future__ import annotations

import asyncio
import hashlib
import os
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import asyncpg
import grpc
from knowledge.v1 import content_index_pb2 as pb
from knowledge.v1 import content_index_pb2_grpc
from knowledge_content_index.adapters.local_storage import LocalBlobStorage
from knowledge_content_index.adapters.postgres import PostgresBlobs
from knowledge_content_index.api.servicer import ContentIndexServicer, service_spec
from knowledge_content_index.domain.identity import ContentKeyring
from knowledge_content_index.usecases import BlobPolicy, BlobUseCases
from knowledge_runtime.db.pool import Database
from knowledge_runtime.server import GrpcApp

from tests.support.rpc import auth

MAX_UPLOAD_BYTES = 1024 * 1024
GRACE = timedelta(hours=1)
CHUNK = 64 * 1024


@dataclass
class ContentIndex:
    """One running content-index: its use cases, gRPC stub, blob root and master key."""

    cases: BlobUseCases
    storage: LocalBlobStorage
    keyring: ContentKeyring
    root: Path
    address: str
    stub: content_index_pb2_grpc.ContentIndexServiceStub


def build_cases(db: Database, root: Path, master: bytes, cls: type[BlobUseCases] = BlobUseCases) -> BlobUseCases:
    storage = LocalBlobStorage.create(root)
    policy = BlobPolicy(max_upload_bytes=MAX_UPLOAD_BYTES, gc_grace=timedelta(days=1), gc_min_age=timedelta(0))
    return cls(PostgresBlobs(db), storage, ContentKeyring(master), policy)


@asynccontextmanager
async def running_content_index(db: Database, root: Path, verifier) -> AsyncIterator[ContentIndex]:
    """A content-index serving gRPC on a free port, with a client channel; both closed on exit."""
    master = os.urandom(32)
    cases = build_cases(db, root, master)
    app = GrpcApp(services=[service_spec(ContentIndexServicer(cases))], verifier=verifier)
    port = await app.start()
    address = f"127.0.0.1:{port}"
    try:
        async with grpc.aio.insecure_channel(address) as channel:
            stub = content_index_pb2_grpc.ContentIndexServiceStub(channel)
            storage = cases._storage
            yield ContentIndex(cases, storage, ContentKeyring(master), storage.root, address, stub)
    finally:
        await app.stop()


def unique_bytes(size: int = 200_000) -> bytes:
    return os.urandom(size)


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


async def requests_for(
    data: bytes, filename: str = "report.pdf", mime_type: str = "", chunk: int = CHUNK
) -> AsyncIterator[pb.WriteBlobRequest]:
    yield pb.WriteBlobRequest(header=pb.WriteBlobHeader(filename=filename, mime_type=mime_type))
    for start in range(0, len(data), chunk):
        yield pb.WriteBlobRequest(chunk=data[start : start + chunk])


async def write(
    stub, token: str, data: bytes, filename: str = "report.pdf", mime_type: str = ""
) -> pb.WriteBlobResponse:
    return await stub.WriteBlob(requests_for(data, filename, mime_type), metadata=auth(token))


async def read_all(stub, token: str, blob_id: str, offset: int = 0, limit: int = 0) -> tuple[pb.Blob, bytes]:
    meta, parts = None, []
    async for message in stub.ReadBlob(
        pb.ReadBlobRequest(blob_id=blob_id, offset=offset, limit=limit), metadata=auth(token)
    ):
        if message.WhichOneof("payload") == "blob":
            assert meta is None, "metadata must come first and only once"
            meta = message.blob
        else:
            assert meta is not None
            parts.append(message.chunk)
    assert meta is not None
    return meta, b"".join(parts)


def files_under(root: Path) -> list[Path]:
    """Every file under the blob root, staged ones included."""
    return sorted(p for p in root.rglob("*") if p.is_file())


async def eventually(predicate: Callable[[], bool], timeout: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not predicate():
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(0.02)


async def rows_with_hash(admin: asyncpg.Connection, content_hash: str) -> int:
    return await admin.fetchval("SELECT count(*) FROM content_blobs WHERE content_hash = $1", content_hash)


async def reference(admin: asyncpg.Connection, tenant: str, blob_id: int | str, *, job: bool = False) -> str:
    """A document (or ingest job) of ``tenant`` referencing the blob; returns its id."""
    await admin.execute("INSERT INTO tenants (tenant_id) VALUES ($1) ON CONFLICT DO NOTHING", tenant)
    corpus_id = await admin.fetchval(
        "INSERT INTO corpora (tenant_id, name) VALUES ($1, $2) RETURNING corpus_id", tenant, uuid.uuid4().hex
    )
    table, key = ("ingest_jobs", "job_id") if job else ("documents", "document_id")
    return str(
        await admin.fetchval(
            f"INSERT INTO {table} (tenant_id, corpus_id, blob_id, filename) VALUES ($1, $2, $3, 'f') RETURNING {key}",
            tenant,
            corpus_id,
            int(blob_id),
        )
    )


async def age(admin: asyncpg.Connection, blob_id: int | str, by: timedelta = timedelta(days=2)) -> None:
    """Make a blob look last written ``by`` ago."""
    await admin.execute(
        "UPDATE content_blobs SET last_write_time = now() - $2::interval, create_time = now() - $2::interval "
        "WHERE blob_id = $1",
        int(blob_id),
        by,
    )


def write_with_sync_client(address: str, token: str, header: pb.WriteBlobHeader, chunks) -> pb.WriteBlobResponse:
    """WriteBlob through grpc's synchronous client (run it in a thread). A server that ends the
    call early is reported with its own status here; grpc-aio clients may instead see INTERNAL
    "Internal error from Core" when a write races the status (grpc/grpc#36066)."""

    def messages():
        yield pb.WriteBlobRequest(header=header)
        for chunk in chunks:
            yield pb.WriteBlobRequest(chunk=chunk)

    with grpc.insecure_channel(address) as channel:
        stub = content_index_pb2_grpc.ContentIndexServiceStub(channel)
        return stub.WriteBlob(messages(), metadata=auth(token), timeout=60)
