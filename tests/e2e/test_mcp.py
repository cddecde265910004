"""The MCP tools end to end: the official SDK's client (``mcp.client.streamable_http``) against
`knowledge up` through Envoy at /mcp with a bearer token, and ``knowledge mcp`` over stdio (the
SDK's stdio client). Listing and calling every tool, search's excerpts in full, paging a 60,000
character document back whole, a Hint for an unknown document, 401 without a valid token (at
Envoy, and at the adapter itself), the reach from the token only (another scope and another
tenant see nothing of this one's corpora, and no argument widens it), SCOPE_UNRESOLVED for a
token without a scope, and a stopped embedder as an Err or a degraded result, never a protocol
error. One stack for the module (no LLM configured)."""

from __future__ import annotations

import json
import os
import re
import signal
import sys
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import httpx2
import psutil
import pytest
from knowledge_runtime import registry
from knowledge_runtime.devkeys import mint_dev_token
from mcp import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from tests.support.mcp import TOOLS, assert_err, assert_hint, assert_ok, example_calls, text_of
from tests.support.stack import running_stack, wait_for_job

pytestmark = pytest.mark.e2e

BIN = Path(sys.executable).parent
SEARCHABLE = "DOCUMENT_STATE_SEARCHABLE"
# The embedder stays down long enough for a call to meet it down.
SETTINGS = {"SUPERVISOR_BACKOFF_S": "20"}
# One long paragraph: an excerpt cut short would lose its end.
POLICY = (
    "# Vacation policy\n\nEvery employee receives thirty paid vacation days per calendar year. "
    + " ".join(f"Clause {i}: unused vacation days carry over to the next year within the limit." for i in range(12))
    + " The final clause says that requests go to the team lead two weeks ahead.\n"
)
RUNBOOK = "# Aurora lantern\n\nThe aurora lantern procedure restarts the billing cluster from the eng runbook.\n"
PIPELINE = "# Sales pipeline\n\nThe quarterly sales pipeline lists the prospects of the sales team.\n"
MARK = re.compile(r"<<(\d{4})>>")


def long_document() -> str:
    """About 60,000 characters in three long sections (so that each page after the first starts
    inside one), each paragraph marked once, so that a lost or repeated piece shows."""
    parts, number = [], 0
    for section in range(3):
        parts.append(f"## Section {section}")
        for _ in range(40):
            parts.append(f"<<{number:04d}>> " + "The ledger entry was reconciled and filed. " * 11)
            number += 1
    return "# Ledger\n\n" + "\n\n".join(parts) + "\n"


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    with running_stack(tmp_path_factory.mktemp("mcp-stack"), **SETTINGS) as running:
        yield running


@pytest.fixture(scope="module")
def world(stack):
    """One tenant: a handbook at its root (a policy and the long ledger), a runbook bound to
    workspace:eng and a pipeline bound to workspace:sales; and document types to classify by."""
    tenant = f"agents-{uuid.uuid4().hex[:8]}"
    base, keys = stack["base"], stack["data_dir"] / "keys"

    def token(scope: str | None = "/", clearance: str | None = None, *, of: str = tenant, **claims) -> str:
        return mint_dev_token(keys, tenant=of, scope=scope, clearance=clearance, **claims)

    admin = {"Authorization": f"Bearer {token(clearance='RESTRICTED')}"}
    corpora, documents = {}, {}
    for corpus, files in {
        "handbook": {"policy.md": POLICY, "ledger.md": long_document()},
        "runbooks": {"aurora.md": RUNBOOK},
        "pipeline": {"pipeline.md": PIPELINE},
    }.items():
        made = httpx.post(f"{base}/corpora", headers=admin, json={"name": corpus})
        assert made.status_code == 200, made.text
        corpora[corpus] = made.json()["corpus_id"]
        for filename, text in files.items():
            upload = httpx.post(
                f"{base}/upload",
                params={"corpus_id": corpora[corpus], "filename": filename},
                content=text.encode(),
                headers=admin,
            )
            assert upload.status_code == 200, upload.text
            job, _ = wait_for_job(base, admin, upload.json()["job_id"])
            assert job["state"] == SEARCHABLE, job
            documents[filename] = job["result"]["document_id"]
    for corpus, node in (("runbooks", "workspace:eng"), ("pipeline", "workspace:sales")):
        bound = httpx.post(f"{base}/corpora/{corpora[corpus]}:bind", headers=admin, json={"scope": node})
        assert bound.status_code == 200, bound.text
    for name, description in (
        ("policy", "Rules employees must follow: vacation, approvals, what is allowed."),
        ("invoice", "A bill from a supplier: invoice number, amount due, payment terms."),
    ):
        made = httpx.post(f"{base}/document_types", json={"name": name, "description": description}, headers=admin)
        assert made.status_code == 200, made.text
    return {"tenant": tenant, "token": token, "corpora": corpora, "documents": documents, "admin": admin}


@asynccontextmanager
async def over_http(url: str, token: str) -> AsyncIterator[Client]:
    """The SDK's Streamable HTTP client, with the bearer token on every request."""
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=httpx2.Timeout(30.0, read=300.0))
    async with http, Client(streamable_http_client(url, http_client=http)) as client:
        yield client


def stdio_server(stack: dict, *args: str, token: str | None = None) -> StdioServerParameters:
    """``knowledge mcp`` as a desktop agent starts it: the stack's settings, a token or --tenant."""
    env = {k: v for k, v in stack["env"].items() if k.startswith("KNOWLEDGE_")}
    env["PYTHONPATH"] = os.environ.get("PYTHONPATH", "")
    if token is not None:
        env["KNOWLEDGE_TOKEN"] = token
    return StdioServerParameters(command=str(BIN / "knowledge"), args=["mcp", *args], env=env)


async def tool_schemas(client: Client) -> dict[str, tuple[dict, dict | None]]:
    return {t.name: (t.input_schema, t.output_schema) for t in (await client.list_tools()).tools}


def cited(result) -> set[str]:
    return {r["document_id"] for r in result.structured_content.get("results", [])}


async def test_every_tool_is_listed_and_answers_through_the_gateway(stack, world):
    calls = example_calls(document_id=world["documents"]["policy.md"], corpus_id=world["corpora"]["handbook"])
    async with over_http(stack["mcp"], world["token"]("/")) as client:
        schemas = await tool_schemas(client)
        assert set(schemas) == TOOLS
        assert all(output and output["type"] == "object" for _, output in schemas.values())
        for name, arguments in calls.items():
            result = await client.call_tool(name, arguments)
            if name in ("refresh_anchor",):
                # anchors are a platform service's: a user's token is refused, in plain words
                assert_err(result, "CAPABILITY_MISSING")
            else:
                assert_ok(result, schemas[name][1])
        prompt = await client.get_prompt("knowledge_context")
        assert "search_documents" in prompt.messages[0].content.text or "documents" in prompt.messages[0].content.text


async def test_search_gives_the_banner_the_synthesis_and_every_excerpt_in_full(stack, world):
    async with over_http(stack["mcp"], world["token"]("/")) as client:
        result = await client.call_tool("search_documents", {"query": "How many vacation days do employees get?"})
    assert not result.is_error, text_of(result)
    data = result.structured_content
    assert text_of(result).startswith(f"Relevance: {data['relevance']} - ")  # the banner, then the rest
    assert data["synthesis"] and data["synthesis"] in text_of(result)
    assert world["documents"]["policy.md"] in cited(result)
    rest = httpx.post(
        f"{stack['base']}/search",
        headers={"Authorization": f"Bearer {world['token']('/')}"},
        json={"query": "How many vacation days do employees get?"},
    ).json()
    assert [r["content"] for r in data["results"]] == [r["content"] for r in rest["results"]]
    for excerpt in data["results"]:
        assert excerpt["content"] in text_of(result)  # in full, in the text the model reads too
    assert any("two weeks ahead" in r["content"] for r in data["results"])  # the paragraph's end


async def test_a_60000_character_document_pages_back_whole(stack, world):
    document = world["documents"]["ledger.md"]
    rest_headers = {"Authorization": f"Bearer {world['token']('/')}"}
    pages, page = [], 1
    async with over_http(stack["mcp"], world["token"]("/")) as client:
        while page:
            result = await client.call_tool("get_document_text", {"document_id": document, "page": page})
            assert not result.is_error, text_of(result)
            data = result.structured_content
            rest = httpx.get(f"{stack['base']}/documents/{document}/text", params={"page": page}, headers=rest_headers)
            assert data["text"] == rest.json()["text"]
            if data["next_page"]:
                assert f'get_document_text(document_id="{document}", page={data["next_page"]})' in text_of(result)
                assert data["next_call"] in text_of(result)
            pages.append(data)
            page = data["next_page"]
        past = await client.call_tool("get_document_text", {"document_id": document, "page": len(pages) + 1})
    assert len(pages) == pages[0]["page_count"] >= 3
    assert all(len(p["text"]) <= 25_000 for p in pages)
    assert all(re.match(r"## Section \d \(continued\)\n", p["text"]) for p in pages[1:])
    marks = [m for p in pages for m in MARK.findall(p["text"])]
    assert marks == [f"{n:04d}" for n in range(120)]  # every paragraph once, in order
    hint = assert_hint(past)
    assert f"Valid pages are 1 to {len(pages)}" in hint["instead"]


async def test_an_unknown_document_id_is_a_hint_with_ids_in_reach(stack, world):
    async with over_http(stack["mcp"], world["token"]("/")) as client:
        result = await client.call_tool("get_document_text", {"document_id": "ledger.md"})
        bad = await client.call_tool("search_documents", {"query": "x", "top_k": 1000})
        missing = await client.call_tool("search_documents", {})
    hint = assert_hint(result)
    suggested = [s["id"] for s in hint["suggestions"]]
    assert suggested[0] == world["documents"]["ledger.md"]  # a filename for an id: the likeliest first
    assert world["documents"]["aurora.md"] not in suggested  # never one outside the reach
    assert "search_documents" in hint["instead"]
    for answer in (bad, missing):  # a bad argument is a Hint, not a protocol error
        assert assert_hint(answer)["reason"] == "INVALID_REQUEST"


async def test_another_scope_and_another_tenant_see_nothing_of_this_scopes_corpora(stack, world):
    runbook, corpus = world["documents"]["aurora.md"], world["corpora"]["runbooks"]
    query = {"query": "aurora lantern procedure", "top_k": 20}
    async with over_http(stack["mcp"], world["token"]("workspace:eng")) as eng:
        listed = await eng.call_tool("list_corpora", {})
        assert {"handbook", "runbooks"} <= {c["name"] for c in listed.structured_content["corpora"]}
        assert runbook in cited(await eng.call_tool("search_documents", query))
    for token in (world["token"]("workspace:sales"), world["token"]("/", of=f"other-{uuid.uuid4().hex[:6]}")):
        async with over_http(stack["mcp"], token) as other:
            listed = await other.call_tool("list_corpora", {})
            assert "runbooks" not in {c["name"] for c in listed.structured_content["corpora"]}
            assert runbook not in cited(await other.call_tool("search_documents", query))
            # naming the corpus or the document does not widen the reach: a Hint with what is in reach
            scoped = assert_hint(await other.call_tool("search_documents", {**query, "corpus_id": corpus}))
            assert corpus not in {s["id"] for s in scoped["suggestions"]}
            text = assert_hint(await other.call_tool("get_document_text", {"document_id": runbook}))
            assert runbook not in {s["id"] for s in text["suggestions"]}
            for tool, arguments in (
                ("classify_document", {"document_id": runbook}),
                ("extract_document", {"document_id": runbook}),
                ("get_context", {**{k: v for k, v in query.items() if k == "query"}, "corpus_id": corpus}),
            ):
                answer = await other.call_tool(tool, arguments)
                assert answer.is_error and "Aurora" not in text_of(answer), (tool, text_of(answer))
            # a reach argument is not taken: a Hint, and nothing of the other scope
            widened = await other.call_tool("search_documents", {**query, "scope": "workspace:eng", "tenant": "x"})
            assert assert_hint(widened)["reason"] == "UNKNOWN_FIELD"


async def test_a_token_without_a_scope_gets_scope_unresolved_from_every_retrieval_tool(stack, world):
    document = world["documents"]["policy.md"]
    async with over_http(stack["mcp"], world["token"](None)) as client:
        for tool, arguments in (
            ("search_documents", {"query": "vacation"}),
            ("get_document_text", {"document_id": document}),
            ("get_context", {"query": "vacation"}),
            ("list_corpora", {}),
        ):
            error = assert_err(await client.call_tool(tool, arguments), "SCOPE_UNRESOLVED")
            assert error["retry"] is False


def test_without_a_valid_token_mcp_is_401_at_the_gateway_and_at_the_adapter(stack, world):
    hello = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    adapter = f"http://127.0.0.1:{stack['env']['KNOWLEDGE_' + registry.service('mcp').port_setting]}/mcp"
    expired = world["token"]("/", ttl_s=-120)
    for url in (stack["mcp"], adapter):
        for auth, reason in ((None, "TOKEN_MISSING"), (expired, "TOKEN_EXPIRED"), ("not-a-jwt", "TOKEN_INVALID")):
            sent = {**headers, **({"Authorization": f"Bearer {auth}"} if auth else {})}
            reply = httpx.post(url, headers=sent, json=hello)
            assert reply.status_code == 401, (url, reply.text)
            if url == adapter:  # the gateway answers in its own words; the adapter in the catalogue's
                assert reply.json()["details"][0]["reason"] == reason
    # the adapter's probes need no token; its readiness does not hold up the gateway's
    assert httpx.get(adapter.removesuffix("/mcp") + registry.HTTP_READINESS_PATH).status_code == 200


async def test_knowledge_mcp_over_stdio_lists_and_searches_with_the_tokens_reach(stack, world):
    query = {"query": "aurora lantern procedure", "top_k": 20}
    token = world["token"]("workspace:eng")
    async with Client(stdio_server(stack, token=token)) as client:
        schemas = await tool_schemas(client)
        assert set(schemas) == TOOLS
        found = await client.call_tool("search_documents", query)
        assert_ok(found, schemas["search_documents"][1])
        assert world["documents"]["aurora.md"] in cited(found)
        assert text_of(found).startswith("Relevance: ")
    sales = ["--tenant", world["tenant"], "--scope", "workspace:sales"]
    async with Client(stdio_server(stack, *sales)) as client:
        found = await client.call_tool("search_documents", query)
        assert not found.is_error and world["documents"]["aurora.md"] not in cited(found)
        listed = {c["name"] for c in (await client.call_tool("list_corpora", {})).structured_content["corpora"]}
        assert "pipeline" in listed and "runbooks" not in listed
    expired = world["token"]("/", ttl_s=-120)
    async with Client(stdio_server(stack, token=expired)) as client:
        assert_err(await client.call_tool("search_documents", query), "TOKEN_EXPIRED")


async def test_a_stopped_embedder_gives_runtime_unavailable_or_a_degraded_result(stack, world):
    children = json.loads((stack["data_dir"] / "run" / "status.json").read_text())["children"]
    embedder = psutil.Process(children["embedder"]["pid"])
    embedder.send_signal(signal.SIGKILL)
    embedder.wait(10)
    query = f"vacation days carried over {uuid.uuid4().hex[:6]}"  # asked once: no cached answer
    async with over_http(stack["mcp"], world["token"]("/")) as client:
        # vector only: nothing can answer without the embedder, a refusal in plain words
        vector = assert_err(
            await client.call_tool("search_documents", {"query": query, "mode": "vector"}), "RUNTIME_UNAVAILABLE"
        )
        assert vector["retry"] is True
        # hybrid: the lexical channel answers alone, or the same refusal
        for tool in ("search_documents", "get_context"):
            result = await client.call_tool(tool, {"query": query})
            if result.is_error:
                assert_err(result, "RUNTIME_UNAVAILABLE")
            elif tool == "get_context":
                assert result.structured_content["degradations"], text_of(result)
            else:
                assert text_of(result).startswith("Relevance: ")
    deadline = time.monotonic() + 90  # the supervisor starts it again
    while json.loads((stack["data_dir"] / "run" / "status.json").read_text())["children"]["embedder"]["restarts"] < 1:
        assert time.monotonic() < deadline
        time.sleep(0.5)
