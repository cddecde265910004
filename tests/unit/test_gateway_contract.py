"""What the gateway answers, against the real Envoy with the rendered configuration in front of a
gRPC server that records what reaches it: one request id end to end."""

from __future__ import annotations

from collections.abc import AsyncIterator

import grpc
import pytest
from knowledge.v1 import ingest_pb2, ingest_pb2_grpc

from tests.support.envoy import running_gateway

API = "/api/v1/knowledge"


@pytest.fixture
async def gateway(tmp_path, keys_dir) -> AsyncIterator[dict]:
    async with running_gateway(tmp_path, keys_dir) as running:
        yield running


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


async def test_the_request_id_is_the_client_s_or_the_gateway_s_and_comes_back(gateway, make_token):
    client, recorder = gateway["client"], gateway["recorder"]
    sent = await client.get(f"{API}/corpora", headers={**bearer(make_token("acme")), "x-request-id": "client-id-1"})
    assert sent.status_code == 200 and sent.headers["x-request-id"] == "client-id-1"
    made = await client.get(f"{API}/corpora", headers=bearer(make_token("acme")))
    assert made.status_code == 200 and made.headers["x-request-id"] not in {"", "client-id-1"}
    refused = await client.get(f"{API}/corpora", headers={"x-request-id": "client-id-2"})  # the gateway's own answer
    assert refused.status_code == 401 and refused.headers["x-request-id"] == "client-id-2"
    forwarded = [metadata.get("x-request-id") for name, metadata, _ in recorder.calls if name == "ListCorpora"]
    assert forwarded == ["client-id-1", made.headers["x-request-id"]]
    async with grpc.aio.insecure_channel(f"127.0.0.1:{gateway['port']}") as channel:
        call = ingest_pb2_grpc.CorpusServiceStub(channel).ListCorpora(
            ingest_pb2.ListCorporaRequest(),
            metadata=[("authorization", f"Bearer {make_token('acme')}"), ("x-request-id", "grpc-id-1")],
        )
        await call
        assert dict(await call.initial_metadata())["x-request-id"] == "grpc-id-1"
    assert recorder.calls[-1][1]["x-request-id"] == "grpc-id-1"
