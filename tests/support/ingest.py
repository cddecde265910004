"""What the ingest integration tests share: ingest's ports as fakes (blobs in memory, deterministic
vectors), its settings for tests, and the client side of uploads and jobs."""

from __future__ import annotations

import asyncio
import hashlib
import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import grpc
from google.api import httpbody_pb2
from knowledge.v1 import ingest_pb2
from knowledge_ingest.bootstrap import Ingest, wire
from knowledge_ingest.config import IngestSettings
from knowledge_ingest.domain.extraction import Extracted, ExtractionFailed
from knowledge_ingest.domain.ports import StoredBlob
from knowledge_ingest.webhooks.sealing import AesGcmSealer
from knowledge_runtime.costs import Cost
from knowledge_runtime.db.pool import Database
from knowledge_runtime.errors import Unavailable
from knowledge_runtime.server import GrpcApp
from knowledge_runtime.settings import Env
from knowledge_search.domain.model import EmbeddedQuery

from tests.support import rpc

DIMENSION = 384


class MemoryBlobs:
    """Bytes in memory; the content_blobs row that documents reference is written as admin."""

    def __init__(self, admin: Database) -> None:
        self.admin = admin
        self.blobs: dict[int, bytes] = {}
        self.writes = 0

    async def write(self, tenant: str, filename: str, mime_type: str, chunks: AsyncIterator[bytes]) -> StoredBlob:
        self.writes += 1
        data = b"".join([c async for c in chunks])
        digest = hashlib.sha256(data).hexdigest()
        blob_id = await self.admin.fetchval(
            "blob",
            "INSERT INTO content_blobs (content_hash, size_bytes, storage_uri) VALUES ($1, $2, 'memory:') "
            "ON CONFLICT (content_hash) DO UPDATE SET size_bytes = EXCLUDED.size_bytes RETURNING blob_id",
            digest,
            len(data),
        )
        existed = blob_id in self.blobs
        self.blobs[blob_id] = data
        return StoredBlob(blob_id, len(data), existed)

    async def read_to(self, tenant: str, blob_id: int, target: Path) -> int:
        target.write_bytes(self.blobs[blob_id])
        return len(self.blobs[blob_id])

    def kept(self, tenant: str, blob_id: int) -> bytes | None:
        return None  # every job reads its blob

    async def import_file(self, tenant: str, path: str, mime_type: str) -> StoredBlob:
        raise Unavailable("no content-index here: these tests configure no import root")


class NoDependencies:
    """Readiness with nothing to wait for: the fakes answer at once."""

    async def wait_ready(self) -> None:
        return None

    def waiting_for(self) -> list[str]:
        return []


class CountingEmbedder:
    """Deterministic vectors; can fail the first calls as if the embedder were down, stall, or
    answer its calls spaced out (so each progress step is its own committed change)."""

    def __init__(self) -> None:
        self.failures_left = 0
        self.calls = 0
        self.gate: asyncio.Event | None = None
        self.stagger_s = 0.0  # when set, the calls past the gate answer this far apart, in order
        self._staggered = 0

    async def embed(self, tenant: str, texts: Sequence[str], tokenizer: str = "") -> list[list[float]]:
        self.calls += 1
        if self.gate is not None:
            await self.gate.wait()
        if self.stagger_s:
            self._staggered += 1
            await asyncio.sleep(self.stagger_s * self._staggered)
        if self.failures_left > 0:
            self.failures_left -= 1
            raise Unavailable("the embedder is unavailable")
        vectors = []
        for text in texts:
            seed = hashlib.sha256(text.encode()).digest()
            vector = [(seed[i % 32] - 128) / 128.0 + 0.01 for i in range(DIMENSION)]
            vectors.append(vector)
        return vectors


class SameVectors:
    """Search's query embedder, giving the vectors CountingEmbedder gives the chunks."""

    def __init__(self) -> None:
        self._embedder = CountingEmbedder()

    async def embed_query(self, tenant: str, text: str) -> EmbeddedQuery:
        return EmbeddedQuery(vector=(await self._embedder.embed(tenant, [text]))[0], warnings=(), cost=Cost())


def settings(**overrides: str) -> IngestSettings:
    values = {
        "KNOWLEDGE_INGEST_WORKERS": "2",
        "KNOWLEDGE_INGEST_LEASE_S": "5",
        "KNOWLEDGE_INGEST_RETRY_BASE_S": "0.1",
        "KNOWLEDGE_MAX_UPLOAD_BYTES": "100000",
        "KNOWLEDGE_INGEST_EMBED_BATCH": "4",
        "KNOWLEDGE_CHUNK_MAX_CHARS": "400",
        **overrides,
    }
    return IngestSettings.from_env(Env(values))


def auth(make_token, tenant: str) -> list[tuple[str, str]]:
    return rpc.auth(make_token(tenant))


def text_extract(path: Path, filename: str, mime_type: str) -> Extracted:
    """Extraction as plain text; a file containing ``%BROKEN%`` fails as corrupt."""
    text = path.read_bytes().decode("utf-8", "replace")
    if "%BROKEN%" in text:
        raise ExtractionFailed("the file is damaged and cannot be read", reason=ExtractionFailed.FILE_CORRUPT)
    return Extracted(text=text, page_count=None, extractable=bool(text.strip()), format="text")


# The key the tests' in-process ingest seals webhook secrets with (a real process reads its file).
TEST_WEBHOOK_KEY = bytes(range(32))


class NoSearch:
    """Search for a model change's evaluation where a test stores no evaluation set."""

    async def ranked(self, evaluation_set, text: str, mode: str, candidate: bool, top_k: int) -> list[str]:
        raise AssertionError("this test's ingest has no search service")


def wire_fakes(settings: IngestSettings, db: Database, blobs, embedder, extract) -> Ingest:
    """Ingest composed over test doubles: ``blobs`` is also the (unused) file importer."""
    return wire(
        settings,
        db,
        blobs=blobs,
        embedder=embedder,
        extract=extract,
        readiness=NoDependencies(),
        importer=blobs,
        sealer=AesGcmSealer(TEST_WEBHOOK_KEY),
        search=NoSearch(),
    )


def ingest_app(ingest: Ingest, verifier, port: int = 0) -> GrpcApp:
    """Ingest's gRPC services and background loops as one app on 127.0.0.1."""
    return GrpcApp(
        services=ingest.services,
        verifier=verifier,
        port=port,
        on_start=[ingest.background.start],
        on_stop=[ingest.background.stop, ingest.feed.close],
        scope_resolver=ingest.reach.reader,
    )


def partial_text_extract(path: Path, filename: str, mime_type: str) -> Extracted:
    """Extraction as plain text; ``%PDF-broken`` fails as corrupt, and a text that starts with
    ``PARTIAL`` carries a warning of pages that could not be read."""
    data = path.read_bytes()
    if data.startswith(b"%PDF-broken"):
        raise ExtractionFailed("the PDF is damaged and cannot be read", reason=ExtractionFailed.FILE_CORRUPT)
    text = data.decode("utf-8", "replace")
    warnings = ("2 page(s) could not be read",) if text.startswith("PARTIAL") else ()
    return Extracted(text=text, page_count=None, extractable=bool(text.strip()), format="text", warnings=warnings)


@asynccontextmanager
async def running_fakes(migrated_pg, verifier, extract) -> AsyncIterator[tuple]:
    """Ingest over the session's PostgreSQL with fakes at its ports, on a free port: (its stub, the
    blobs, the embedder, its pool)."""
    db = await Database.connect(migrated_pg.url(user="knowledge_ingest"))
    admin = await Database.connect(migrated_pg.url())
    blobs, embedder = MemoryBlobs(admin), CountingEmbedder()
    ingest = wire_fakes(settings(), db, blobs, embedder, extract)
    ingest.workers.backlog_every_s = 0.1
    app = ingest_app(ingest, verifier)
    port = await app.start()
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{port}")
    try:
        yield rpc.IngestStub(channel), blobs, embedder, db
    finally:
        await channel.close()
        await app.stop()
        await db.close()
        await admin.close()


@asynccontextmanager
async def replica(
    url: str, verifier, blobs, embedder, db: Database | None = None, *, port: int = 0, **overrides: str
) -> AsyncIterator[rpc.IngestStub]:
    """One ingest process: its own pool (or ``db``, left open), servicer and workers, on 127.0.0.1
    ``port`` (0: any free one); a stub of it. ``overrides``: its settings (events heartbeat 0.5 s)."""
    own = db is None
    db = db or await Database.connect(url, max_size=6)
    ingest = wire_fakes(
        settings(**{"KNOWLEDGE_EVENTS_HEARTBEAT_S": "0.5", **overrides}), db, blobs, embedder, text_extract
    )
    app = ingest_app(ingest, verifier, port)
    bound = await app.start()
    channel = grpc.aio.insecure_channel(f"127.0.0.1:{bound}")
    try:
        yield rpc.IngestStub(channel)
    finally:
        await channel.close()
        await app.stop()
        if own:
            await db.close()


async def new_corpus(stub, metadata, name: str | None = None) -> str:
    reply = await stub.CreateCorpus(
        ingest_pb2.CreateCorpusRequest(name=name or uuid.uuid4().hex[:12]), metadata=metadata
    )
    return reply.corpus_id


async def upload(
    stub,
    metadata,
    corpus_id: str,
    data: bytes,
    filename: str = "notes.txt",
    piece: int = 1000,
    access: Sequence[str] | None = None,
):
    """``access``: the new document's access list (AccessList), on the first message; None: none."""

    async def requests():
        for start in range(0, max(len(data), 1), piece):
            yield ingest_pb2.UploadDocumentRequest(
                corpus_id=corpus_id if start == 0 else "",
                filename=filename if start == 0 else "",
                http_body=httpbody_pb2.HttpBody(content_type="text/plain", data=data[start : start + piece]),
                access=ingest_pb2.AccessList(principals=access) if start == 0 and access is not None else None,
            )

    return await stub.UploadDocument(requests(), metadata=metadata)


async def wait_terminal(stub, metadata, job_id: str, timeout: float = 30.0) -> ingest_pb2.IngestJob:
    deadline = asyncio.get_running_loop().time() + timeout
    seen = []
    while asyncio.get_running_loop().time() < deadline:
        job = await stub.GetIngestJob(ingest_pb2.GetIngestJobRequest(job_id=job_id), metadata=metadata)
        seen.append(job)
        if job.state in (
            ingest_pb2.DOCUMENT_STATE_SEARCHABLE,
            ingest_pb2.DOCUMENT_STATE_FAILED,
            ingest_pb2.DOCUMENT_STATE_CANCELLED,
        ):
            return job
        await asyncio.sleep(0.05)
    raise AssertionError(f"job never ended: {seen[-1] if seen else None}")


async def wait_removed(db: Database, document_id: int, timeout: float = 30.0) -> None:
    """Until the removal job of a deleted document is done (its tombstone says so)."""
    deadline = asyncio.get_running_loop().time() + timeout
    while asyncio.get_running_loop().time() < deadline:
        state = await db.fetchval(
            "removal_state", "SELECT removal_state FROM document_tombstones WHERE document_id = $1", document_id
        )
        if state == "DONE":
            return
        await asyncio.sleep(0.05)
    raise AssertionError(f"the removal of document {document_id} never completed")


def document_text(sections: int = 6) -> bytes:
    parts = []
    for i in range(sections):
        parts.append(f"# Section {i}\n\n" + " ".join(f"Sentence {i}.{j} about topic {i}." for j in range(20)))
    return "\n\n".join(parts).encode()
