"""Search's LLM paths against a real local OpenAI-compatible server: llama.cpp serving the tiny
SmolLM2-135M (the ``local_llm`` fixture), real PostgreSQL and a real gRPC search.

The tiny model says whatever it says (it hallucinates), so these assert what the code promises
of any model's output, not what the model wrote: every ``[n]`` left in an answer names a citation
that exists and every citation is a chunk that was retrieved (markers the model invented are
dropped); the cost records carry the server's own token counts; a server that dies mid-call is
RUNTIME_UNAVAILABLE for Query, and SearchDocuments still returns its sources.
"""

from __future__ import annotations

import asyncio
import re
import signal
import uuid

import grpc
import pytest
from knowledge.v1 import search_pb2

from tests.support.llm_search import CHUNKS, MAX_TOKENS, Search, seed
from tests.support.local_llm import start_local_llm
from tests.support.rpc import auth, error_info

pytestmark = pytest.mark.integration


def markers(text: str) -> set[int]:
    return {int(n) for group in re.findall(r"\[(\d+(?:\s*,\s*\d+)*)\]", text) for n in group.split(",")}


async def test_query_through_the_real_server_cites_only_retrieved_chunks_and_records_its_tokens(
    migrated_pg, verifier, make_token, local_llm
):
    tenant = f"llm-{uuid.uuid4().hex[:8]}"
    chunks = await seed(migrated_pg, tenant)
    async with Search(migrated_pg, verifier, local_llm.base_url, local_llm.model) as search:
        reply = await search.stub.Query(
            search_pb2.QueryRequest(query="How do employees book train travel?"), metadata=auth(make_token(tenant))
        )
        records = await search.db.fetch(
            "records",
            "SELECT model, operation, tokens, cost FROM cost_records WHERE tenant_id = $1 AND operation = 'chat'",
            tenant,
        )
    assert reply.answer.strip()  # the model wrote something, whatever it is
    # Every marker left names a citation, numbered densely from 1; every citation is a retrieved chunk.
    assert markers(reply.answer) == set(range(1, len(reply.citations) + 1))
    for citation in reply.citations:
        assert int(citation.chunk_id) in chunks
        assert citation.excerpt in chunks[int(citation.chunk_id)]
    # The cost is the server's own usage: a prompt of both sources, at most MAX_TOKENS generated.
    (chat,) = [item for item in reply.cost.items if item.operation == "chat"]
    assert chat.model_id == local_llm.model
    assert chat.input_tokens > sum(len(c.split()) for c in CHUNKS) and 1 <= chat.output_tokens <= MAX_TOKENS
    assert chat.amount == pytest.approx(chat.input_tokens / 1000)
    assert [(r["model"], r["tokens"]) for r in records] == [(local_llm.model, chat.input_tokens + chat.output_tokens)]


async def test_search_documents_through_the_real_server_keeps_only_markers_of_its_sources(
    migrated_pg, verifier, make_token, local_llm
):
    tenant = f"llm-{uuid.uuid4().hex[:8]}"
    await seed(migrated_pg, tenant)
    async with Search(migrated_pg, verifier, local_llm.base_url, local_llm.model) as search:
        reply = await search.stub.SearchDocuments(
            search_pb2.SearchDocumentsRequest(query="When are expense receipts submitted?"),
            metadata=auth(make_token(tenant)),
        )
    assert reply.result_count == len(CHUNKS) and reply.synthesis.strip()
    assert markers(reply.synthesis) <= set(range(1, reply.result_count + 1))
    assert reply.synthesis in reply.text and all(chunk in reply.text for chunk in CHUNKS)


async def test_a_server_that_dies_mid_call_is_runtime_unavailable(migrated_pg, verifier, make_token, tmp_path):
    tenant = f"llm-{uuid.uuid4().hex[:8]}"
    await seed(migrated_pg, tenant)
    with start_local_llm(tmp_path) as server:
        async with Search(migrated_pg, verifier, server.base_url, server.model) as search:
            # Frozen, the server still takes the connection (the kernel's listen queue) and the request:
            # the call is in flight, waiting for an answer, when the server is killed.
            server.process.send_signal(signal.SIGSTOP)
            call = asyncio.ensure_future(
                search.stub.Query(
                    search_pb2.QueryRequest(query="How do employees book train travel?"),
                    metadata=auth(make_token(tenant)),
                )
            )
            await asyncio.sleep(1.0)
            assert not call.done()  # no answer yet
            server.process.kill()
            with pytest.raises(grpc.aio.AioRpcError) as caught:
                await call
            # SearchDocuments over the dead server: the sources still answer, and say why there is no synthesis.
            documents = await search.stub.SearchDocuments(
                search_pb2.SearchDocumentsRequest(query="train travel"), metadata=auth(make_token(tenant))
            )
    assert caught.value.code() == grpc.StatusCode.UNAVAILABLE
    info = error_info(caught.value)
    assert info.reason == "RUNTIME_UNAVAILABLE" and info.metadata["runtime"] == "llm"
    assert documents.result_count == len(CHUNKS) and documents.synthesis == ""
    assert "language model is unavailable" in documents.text
