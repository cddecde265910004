"""The chat-completions client against a real local HTTP server speaking the protocol."""

from __future__ import annotations

import pytest
from knowledge_search.adapters.llm import ChatCompletionsSynthesiser
from knowledge_search.domain.answer import Source
from knowledge_search.domain.errors import LlmUnavailable

from tests.support.chat import ChatServer

pytestmark = pytest.mark.integration


SOURCES = [Source(1, "travel.pdf - Travel policy", "Book trains for short trips."), Source(2, "x", "Other.")]


async def test_posts_the_numbered_sources_and_reads_answer_and_usage():
    with ChatServer("Book a train [1].") as server:
        client = ChatCompletionsSynthesiser(
            server.url, "local-model", api_key="k-123", price_input_per_1k=0.5, price_output_per_1k=1.0
        )
        try:
            synthesis = await client.synthesise("How do I travel <NAME_1>?", SOURCES)
        finally:
            await client.close()
    request = server.requests[0]
    assert request["path"] == "/v1/chat/completions" and request["model"] == "local-model"
    assert request["temperature"] == 0
    assert [m["role"] for m in request["messages"]] == ["system", "user"]
    user = request["messages"][1]["content"]
    assert "[1] travel.pdf - Travel policy\nBook trains for short trips." in user and "[2] x" in user
    assert "How do I travel <NAME_1>?" in user
    assert server.headers[0]["Authorization"] == "Bearer k-123"
    assert synthesis.text == "Book a train [1]."
    (item,) = synthesis.cost.items
    assert (item.model_id, item.operation, item.input_tokens, item.output_tokens) == ("local-model", "chat", 120, 30)
    assert item.amount == pytest.approx(0.12 * 0.5 + 0.03 * 1.0)


@pytest.mark.parametrize("server_kwargs", [{"status": 500}, {"raw": b"not json"}, {"raw": b'{"choices": []}'}])
async def test_a_failing_model_is_unavailable(server_kwargs):
    with ChatServer(**server_kwargs) as server:
        client = ChatCompletionsSynthesiser(server.url, "m")
        try:
            with pytest.raises(LlmUnavailable) as caught:
                await client.synthesise("q", SOURCES)
        finally:
            await client.close()
    assert caught.value.code == "UNAVAILABLE" and caught.value.reason == "RUNTIME_UNAVAILABLE"
    assert caught.value.metadata == {"runtime": "llm"}


async def test_an_unreachable_model_is_unavailable():
    with ChatServer() as server:
        url = server.url
    client = ChatCompletionsSynthesiser(url, "m", timeout_s=2)
    try:
        with pytest.raises(LlmUnavailable):
            await client.synthesise("q", SOURCES)
    finally:
        await client.close()
