"""The MCP server in process (the official SDK's in-memory client) over a fake of the services:
the tool list with output schemas, no reach argument anywhere, each tool's Ok, and the contract's
Hints and Errs, never a protocol error nor a trace; every call carries the caller's token."""

from __future__ import annotations

import grpc
import pytest
from knowledge_mcp.caller import Caller
from knowledge_mcp.descriptions import TOOLS as DESCRIBED
from knowledge_mcp.server import build_server
from knowledge_runtime.refusals import REFUSALS, Refusal
from mcp import Client

from tests.support.mcp import (
    PROMPT,
    TOOLS,
    FakeServices,
    assert_err,
    assert_hint,
    assert_ok,
    example_calls,
    knowledge_error,
    reach_arguments,
    text_of,
)

TOKEN = "the-callers-token"


@pytest.fixture
def fake():
    return FakeServices()


@pytest.fixture
def server(fake):
    return build_server(fake, fixed=Caller(TOKEN), index_wait_s=5.0)


async def schemas(client) -> dict[str, tuple[dict, dict | None]]:
    return {t.name: (t.input_schema, t.output_schema) for t in (await client.list_tools()).tools}


async def test_every_tool_is_listed_with_its_description_and_an_output_schema(server):
    async with Client(server) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        assert set(tools) == TOOLS
        for name, tool in tools.items():
            assert tool.description == DESCRIBED[name]
            assert tool.output_schema and tool.output_schema["type"] == "object", name
        prompts = {p.name for p in (await client.list_prompts()).prompts}
        assert prompts == {PROMPT}


async def test_no_tool_takes_a_reach_argument(server):
    async with Client(server) as client:
        found = {name: reach_arguments(inputs) for name, (inputs, _) in (await schemas(client)).items()}
        assert found == {name: [] for name in TOOLS}
        assert reach_arguments({"properties": {"x": {"properties": {"tenant_id": {}}}}}) == ["tenant_id"]  # it sees


async def test_each_tool_answers_ok_with_text_and_structured_content_that_follows_its_schema(server, fake):
    async with Client(server) as client:
        outputs = {name: output for name, (_, output) in (await schemas(client)).items()}
        for name, arguments in example_calls().items():
            result = await client.call_tool(name, arguments)
            assert_ok(result, outputs[name])
        assert fake.tokens and set(fake.tokens) == {TOKEN}  # every service call carried the caller's token


async def test_search_keeps_the_banner_and_every_excerpt_in_full(server):
    async with Client(server) as client:
        result = await client.call_tool("search_documents", {"query": "vacation"})
        assert text_of(result).startswith("Relevance: HIGH")
        assert result.structured_content["results"][0]["content"] == "30 days."
        assert result.structured_content["relevance"] == "HIGH"


async def test_a_page_spells_out_the_next_call(server):
    async with Client(server) as client:
        result = await client.call_tool("get_document_text", {"document_id": "11", "page": 2})
        page = result.structured_content
        assert page["next_call"] == 'get_document_text(document_id="11", page=3)'
        assert page["next_call"] in text_of(result) and "Page 2 of 3" in text_of(result)


@pytest.mark.parametrize(
    ("tool", "arguments", "words"),
    [
        ("search_documents", {"query": "x", "top_k": 1000}, "top_k"),
        ("search_documents", {}, "query"),
        ("search_documents", {"query": "x", "mode": "fuzzy"}, "mode"),
        ("get_document_text", {"document_id": "11", "page": 0}, "page"),
        ("index_content", {"kind": "chunks", "content": "x"}, "corpus_id"),
        ("index_content", {"kind": "anchor", "content": "x"}, "entity_type"),
        ("move_documents", {"target_corpus_id": "1", "document_ids": ["11"], "all_documents": True}, "not both"),
    ],
)
async def test_a_bad_argument_is_a_hint(server, fake, tool, arguments, words):
    async with Client(server) as client:
        hint = assert_hint(await client.call_tool(tool, arguments))
        assert words in hint["message"] + hint["instead"]


async def test_a_reach_argument_or_an_unknown_tool_is_a_hint_too(server):
    async with Client(server) as client:
        hint = assert_hint(await client.call_tool("search_documents", {"query": "x", "tenant": "globex"}))
        assert "'tenant'" in hint["message"] and "token" in hint["message"]
        unknown = assert_hint(await client.call_tool("search", {"query": "x"}))
        assert "search_documents" in [s["id"] for s in unknown["suggestions"]]


async def test_an_unknown_document_id_lists_the_ids_it_may_have_meant(server, fake):
    async with Client(server) as client:
        fake.fail["document_text"] = knowledge_error(
            grpc.StatusCode.NOT_FOUND, "DOCUMENT_NOT_FOUND", document_id="vacation"
        )
        hint = assert_hint(await client.call_tool("get_document_text", {"document_id": "vacation"}))
        assert hint["reason"] == "DOCUMENT_NOT_FOUND"
        assert hint["suggestions"][0] == {"id": "11", "label": "vacation-policy.md"}  # the filename it passed
        assert {s["id"] for s in hint["suggestions"]} == {"11", "12", "21"}


async def test_an_unknown_corpus_lists_the_corpora_in_reach(server, fake):
    async with Client(server) as client:
        fake.fail["search_documents"] = knowledge_error(grpc.StatusCode.NOT_FOUND, "CORPUS_NOT_FOUND", corpus_id="9")
        hint = assert_hint(await client.call_tool("search_documents", {"query": "x", "corpus_id": "9"}))
        assert {s["id"]: s["label"] for s in hint["suggestions"]} == {"1": "Handbook", "2": "Contracts"}


async def test_a_page_out_of_range_says_the_valid_range(server, fake):
    async with Client(server) as client:
        fake.fail["document_text"] = knowledge_error(
            grpc.StatusCode.OUT_OF_RANGE, "PAGE_OUT_OF_RANGE", page="7", page_count="3"
        )
        hint = assert_hint(await client.call_tool("get_document_text", {"document_id": "11", "page": 7}))
        assert "Valid pages are 1 to 3" in hint["instead"]


async def test_a_filter_fault_says_where(server, fake):
    async with Client(server) as client:
        fake.fail["search_documents"] = knowledge_error(
            grpc.StatusCode.INVALID_ARGUMENT, "FILTER_INVALID", "unknown field", column="5"
        )
        hint = assert_hint(await client.call_tool("search_documents", {"query": "x", "filter": "size > 3"}))
        assert "column 5" in hint["message"] and "metadata.<key>" in hint["instead"]


async def test_a_taken_corpus_name_gives_the_existing_corpus(server, fake):
    async with Client(server) as client:
        fake.fail["create_corpus"] = knowledge_error(
            grpc.StatusCode.ALREADY_EXISTS, "CORPUS_ALREADY_EXISTS", name="Handbook"
        )
        hint = assert_hint(await client.call_tool("create_corpus", {"name": "Handbook"}))
        assert hint["suggestions"] == [{"id": "1", "label": "Handbook"}]


@pytest.mark.parametrize("refusal", list(Refusal))
async def test_a_refusal_is_an_error_in_its_plain_words(server, fake, refusal):
    async with Client(server) as client:
        code = getattr(grpc.StatusCode, REFUSALS[refusal].code)
        fake.fail["search_documents"] = knowledge_error(code, refusal.value, "internal detail x1")
        error = assert_err(await client.call_tool("search_documents", {"query": "x"}), refusal.value)
        assert error["message"].startswith(REFUSALS[refusal].plain)
        assert error["retry"] is REFUSALS[refusal].waiting_helps


async def test_a_service_out_of_reach_is_an_error_that_may_be_retried(server, fake):
    async with Client(server) as client:
        down = grpc.aio.AioRpcError(grpc.StatusCode.UNAVAILABLE, grpc.aio.Metadata(), grpc.aio.Metadata(), "connect")
        from knowledge_client import KnowledgeError

        fake.fail["search_documents"] = KnowledgeError(down)
        error = assert_err(await client.call_tool("search_documents", {"query": "x"}), "DEPENDENCY_UNAVAILABLE")
        assert error["retry"] is True


async def test_a_failure_inside_the_adapter_is_an_internal_error_with_nothing_of_it(server, fake):
    async with Client(server) as client:
        fake.fail["corpora"] = RuntimeError("secret internals at /srv/x.py")
        result = await client.call_tool("list_corpora", {})
        assert_err(result, "INTERNAL")
        assert "secret" not in text_of(result) and "RuntimeError" not in text_of(result)


async def test_index_content_waits_for_the_document_to_be_searchable(server, fake):
    async with Client(server) as client:
        result = await client.call_tool("index_content", example_calls()["index_content"])
        assert result.structured_content["state"] == "SEARCHABLE" and result.structured_content["document_id"] == "13"
        assert fake.job_polls == 2


async def test_a_user_token_writing_an_anchor_reads_the_embedder_s_refusal(server, fake):
    async with Client(server) as client:
        fake.fail["index_anchor"] = knowledge_error(
            grpc.StatusCode.PERMISSION_DENIED, "CAPABILITY_MISSING", "missing capability 'embed'", capability="embed"
        )
        arguments = {"kind": "anchor", "content": "adds numbers", "entity_type": "tool", "entity_id": "calc"}
        error = assert_err(await client.call_tool("index_content", arguments), "CAPABILITY_MISSING")
        assert "capability embed" in error["message"]


async def test_an_anchor_not_there_yet_hints_at_creating_it(server, fake):
    async with Client(server) as client:
        fake.fail["refresh_anchor"] = knowledge_error(grpc.StatusCode.NOT_FOUND, "ANCHOR_NOT_FOUND")
        hint = assert_hint(await client.call_tool("refresh_anchor", example_calls()["refresh_anchor"]))
        assert 'index_content(kind="anchor"' in hint["instead"]


async def test_the_prompt_is_the_callers_prompt_context_line(server, fake):
    async with Client(server) as client:
        prompt = await client.get_prompt(PROMPT)
        assert prompt.messages[0].content.text == "- Knowledge: 3 documents across 2 corpora."
        assert fake.tokens == [TOKEN]


def test_every_description_is_short_and_says_when():
    for name, text in DESCRIBED.items():
        assert 80 < len(text) < 500, name
        assert "Use " in text or "use " in text, name
    assert "LOW" in DESCRIBED["search_documents"] and "do not search again" in DESCRIBED["search_documents"]
