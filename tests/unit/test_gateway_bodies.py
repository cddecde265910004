"""Bodies through the real Envoy with the rendered configuration and a fake ingest service: a
chunked upload reaches ingest, ingest's refusal of one over the cap becomes the sized 413, a
chunked JSON body over the cap is cut off at the gateway, and other 429s stay 429."""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import grpc
import httpx
import pytest
from knowledge.v1 import ingest_pb2, ingest_pb2_grpc
from knowledge_gateway.config import GatewayConfig
from knowledge_gateway.descriptors import write_descriptor_set
from knowledge_gateway.envoy import write_config
from knowledge_gateway.local_replies import too_large_json
from knowledge_runtime.errors import ResourceExhausted, UploadTooLarge
from knowledge_runtime.interceptors import status_for

from tests.support.envoy import wait_until_up
from tests.support.net import free_port
from tests.support.stack import post_body, zeros

ENVOY = Path(sys.executable).parent / "envoy"
CAP = 2 * 1024 * 1024  # over the 1 MiB a stream buffers by default, as real caps are


class Overloaded(ResourceExhausted):
    reason = "OVERLOADED"


class FakeIngest(ingest_pb2_grpc.IngestJobServiceServicer, ingest_pb2_grpc.CorpusServiceServicer):
    """Caps an upload as ingest does (its bytes as they stream) and records what reached it."""

    def __init__(self) -> None:
        self.uploaded: list[int] = []
        self.refused_at: list[int] = []
        self.created: list[str] = []

    async def UploadDocument(self, request_iterator, context):
        seen = 0
        async for message in request_iterator:
            seen += len(message.http_body.data)
            if seen > CAP:
                self.refused_at.append(seen)
                status = status_for(UploadTooLarge(CAP))
                await context.abort(status.code, status.details, status.trailing_metadata)
        self.uploaded.append(seen)
        return ingest_pb2.UploadDocumentResponse(job_id="job-1", filename="a.bin", status="ingesting", corpus_id="1")

    async def CreateCorpus(self, request, context):
        self.created.append(request.name)
        return ingest_pb2.Corpus(corpus_id="1", name=request.name)

    async def ListCorpora(self, request, context):
        status = status_for(Overloaded("busy"))
        await context.abort(status.code, status.details, status.trailing_metadata)


@pytest.fixture
async def gateway(tmp_path, keys_dir, make_token) -> AsyncIterator[dict]:
    fake = FakeIngest()
    server = grpc.aio.server()
    ingest_pb2_grpc.add_IngestJobServiceServicer_to_server(fake, server)
    ingest_pb2_grpc.add_CorpusServiceServicer_to_server(fake, server)
    ingest_port = server.add_insecure_port("127.0.0.1:0")
    await server.start()
    port = free_port()
    config = GatewayConfig(
        listen_host="127.0.0.1",
        listen_port=port,
        admin_port=free_port(),
        upstreams={"ingest": f"127.0.0.1:{ingest_port}", "search": "127.0.0.1:1", "documents-ai": "127.0.0.1:1"},
        jwks_path=keys_dir / "jwks.json",
        issuer="knowledge-dev",
        audience="knowledge",
        descriptor_path=write_descriptor_set(tmp_path / "knowledge.pb"),
        max_body_bytes=CAP,
    )
    path = write_config(config, tmp_path / "envoy.json")
    envoy = subprocess.Popen(
        [str(ENVOY), "-c", str(path), "--log-level", "error", "--base-id", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    base = f"http://127.0.0.1:{port}"
    try:
        async with httpx.AsyncClient(
            base_url=base, timeout=30, headers={"Authorization": f"Bearer {make_token('acme')}"}
        ) as client:
            await wait_until_up(client, envoy)
            yield {"client": client, "fake": fake, "port": port}
    finally:
        envoy.terminate()
        envoy.wait(30)
        await server.stop(None)


async def chunked(data: bytes, size: int = 8 * 1024) -> AsyncIterator[bytes]:
    """A body without a length: httpx sends it chunked."""
    for start in range(0, len(data), size):
        yield data[start : start + size]


UPLOAD = "/api/v1/knowledge/upload?corpus_id=1&filename=a.bin"


async def test_a_chunked_upload_under_the_cap_reaches_ingest_whole(gateway):
    reply = await gateway["client"].post(UPLOAD, content=chunked(b"x" * CAP))
    assert reply.status_code == 200, reply.text
    assert reply.json()["job_id"] == "job-1"
    assert gateway["fake"].uploaded == [CAP]


async def test_ingest_refusing_a_chunked_upload_is_the_413_a_sized_one_gets(gateway, make_token):
    headers = {"Authorization": f"Bearer {make_token('acme')}", "Content-Type": "application/octet-stream"}
    streamed = await asyncio.to_thread(post_body, gateway["port"], UPLOAD, headers, zeros(20 * CAP), chunked=True)
    sized = await gateway["client"].post(UPLOAD, content=b"x" * (CAP + 1))
    assert streamed.status == sized.status_code == 413
    assert streamed.headers["content-type"] == sized.headers["content-type"] == "application/json"
    assert json.loads(streamed.body) == sized.json() == json.loads(too_large_json(CAP))
    [refused_at] = gateway["fake"].refused_at  # ingest refused it as it crossed the cap, mid-stream
    assert CAP < refused_at < 20 * CAP and gateway["fake"].uploaded == []


async def test_a_chunked_json_body_over_the_cap_is_cut_off_at_the_gateway(gateway):
    client = gateway["client"]
    body = b'{"name": "' + b"n" * (2 * CAP) + b'"}'
    reply = await client.post(
        "/api/v1/knowledge/corpora", content=chunked(body), headers={"content-type": "application/json"}
    )
    assert reply.status_code == 413 and reply.json()["details"][0]["reason"] == "UPLOAD_TOO_LARGE"
    assert reply.json()["message"] == (await client.post(UPLOAD, content=b"x" * (CAP + 1))).json()["message"]
    assert gateway["fake"].created == []
    small = await client.post(
        "/api/v1/knowledge/corpora",
        content=chunked(b'{"name": "ok"}', size=4),
        headers={"content-type": "application/json"},
    )
    assert small.status_code == 200 and gateway["fake"].created == ["ok"]


async def test_another_resource_exhausted_answer_stays_429(gateway):
    reply = await gateway["client"].get("/api/v1/knowledge/corpora")
    assert reply.status_code == 429
    assert reply.json()["details"][0]["reason"] == "OVERLOADED"
