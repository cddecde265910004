"""QueryStream against a real local model (llama.cpp serving SmolLM2-135M), real PostgreSQL and a
real gRPC search: the answer's first pieces arrive while the model is still writing, the
citations after the text, and a caller that goes away ends the model's own request."""

from __future__ import annotations

import asyncio
import re
import time
import uuid

import grpc
import httpx
import pytest
from knowledge.v1 import search_pb2

from tests.support.llm_search import Search, seed
from tests.support.local_llm import start_local_llm
from tests.support.rpc import auth

pytestmark = pytest.mark.integration

QUESTION = "How do employees book train travel? Explain the rules in detail."


def request(query: str = QUESTION, **history) -> search_pb2.QueryStreamRequest:
    return search_pb2.QueryStreamRequest(query=search_pb2.QueryRequest(query=query, **history))


async def test_the_first_pieces_arrive_while_the_model_writes_and_the_citations_after_the_text(
    migrated_pg, verifier, make_token, local_llm
):
    tenant = f"llm-{uuid.uuid4().hex[:8]}"
    chunks = await seed(migrated_pg, tenant)
    async with Search(migrated_pg, verifier, local_llm.base_url, local_llm.model, max_tokens=80) as search:
        arrivals = [
            (time.monotonic(), message)
            async for message in search.stub.QueryStream(request(), metadata=auth(make_token(tenant)))
        ]
    kinds = [message.WhichOneof("event") for _, message in arrivals]
    assert kinds[0] == "started" and kinds[-1] == "done" and set(kinds[1:-1]) == {"delta"}
    deltas = [(at, message.delta) for at, message in arrivals[1:-1]]
    # The model's tokens come one by one: many pieces, spread over the time it wrote.
    assert len(deltas) >= 3 and deltas[-1][0] - deltas[0][0] > 0.05
    done = arrivals[-1][1].done
    assert " ".join("".join(text for _, text in deltas).split()) == " ".join(done.answer.split())
    markers = {int(n) for n in re.findall(r"\[(\d+)\]", done.answer)}
    assert markers == set(range(1, len(done.citations) + 1))  # every marker names a citation sent last
    assert all(int(c.chunk_id) in chunks for c in done.citations)
    assert any(item.operation == "chat" and item.output_tokens >= len(deltas) for item in done.cost.items)


async def test_a_caller_that_goes_away_ends_the_models_request(migrated_pg, verifier, make_token, tmp_path):
    tenant = f"llm-{uuid.uuid4().hex[:8]}"
    await seed(migrated_pg, tenant)
    with start_local_llm(tmp_path) as server:
        async with Search(migrated_pg, verifier, server.base_url, server.model, max_tokens=1500) as search:
            call = search.stub.QueryStream(request(), metadata=auth(make_token(tenant)))
            assert (await call.read()).WhichOneof("event") == "started"
            assert (await call.read()).WhichOneof("event") == "delta"  # the model is writing
            call.cancel()
            with pytest.raises(asyncio.CancelledError):
                await call.read()
            # llama.cpp's server says so when the client of a stream goes away mid-answer; the
            # 1,500 tokens asked for would have taken it far longer than this wait.
            deadline = time.monotonic() + 15
            while "disconnected" not in server.log_path.read_text() and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
            assert "disconnected" in server.log_path.read_text()
            # The server is free again: a one-token answer is not queued behind the abandoned one.
            started = time.monotonic()
            async with httpx.AsyncClient(timeout=30) as client:
                reply = await client.post(
                    f"{server.base_url}/chat/completions",
                    json={"model": server.model, "messages": [{"role": "user", "content": "Hi"}], "max_tokens": 1},
                )
            assert reply.status_code == 200 and time.monotonic() - started < 10


async def test_a_follow_up_is_condensed_by_the_model_with_its_history(migrated_pg, verifier, make_token, local_llm):
    """The tiny model's wording is its own: what is checked is that it was asked (its tokens are
    in the cost) and that retrieval read its standalone query, not the bare follow-up."""
    tenant = f"llm-{uuid.uuid4().hex[:8]}"
    await seed(migrated_pg, tenant)
    history = [
        search_pb2.Turn(role=search_pb2.TURN_ROLE_USER, text="How do employees book train travel?"),
        search_pb2.Turn(role=search_pb2.TURN_ROLE_ASSISTANT, text="For trips under four hours [1]."),
    ]
    async with Search(migrated_pg, verifier, local_llm.base_url, local_llm.model) as search:
        reply = await search.stub.Query(
            search_pb2.QueryRequest(query="and what about receipts?", history=history),
            metadata=auth(make_token(tenant)),
        )
        with pytest.raises(grpc.aio.AioRpcError) as caught:
            await search.stub.Query(
                search_pb2.QueryRequest(query="and?", history=[search_pb2.Turn(text="no role")]),
                metadata=auth(make_token(tenant)),
            )
    assert reply.condensed_query and reply.condensed_query != "and what about receipts?"
    assert reply.conversation_note == ""
    assert len([item for item in reply.cost.items if item.operation == "chat"]) == 2  # condensed, then answered
    assert caught.value.code() == grpc.StatusCode.INVALID_ARGUMENT
