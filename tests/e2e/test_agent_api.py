"""The agent-facing reads through Envoy on the whole stack: housekeeping entries written
by a platform service token (system.write) and refused to a normal one, POST /prefetch showing a
user only their own behaviour and never another tenant's material, POST /context and
POST /search_documents on a real upload with the real model, and `knowledge context|prefetch`.

One `knowledge up` for the module.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest
from knowledge_runtime.auth import PUBLIC_CAPABILITIES
from knowledge_runtime.devkeys import mint_dev_token
from knowledge_runtime.system_corpora import SYSTEM_WRITE

from tests.support.stack import running_stack

pytestmark = pytest.mark.e2e

BIN = Path(sys.executable).parent
SEARCHABLE = "DOCUMENT_STATE_SEARCHABLE"
GUIDE = (
    "# Billing operations\n\n## Deploys\n\nThe billing service is deployed every Tuesday after the "
    "finance close. A deploy needs a second reviewer.\n\n## Rollback\n\nA failed billing deploy is "
    "rolled back with the previous release tag.\n"
)


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    with running_stack(tmp_path_factory.mktemp("agent-stack"), PREFETCH_DEADLINE_MS="2000") as running:
        yield running


@pytest.fixture(scope="module")
def token(stack):
    def make(tenant: str, capabilities: list[str] | None = None, **kwargs) -> str:
        return mint_dev_token(stack["data_dir"] / "keys", tenant=tenant, capabilities=capabilities, **kwargs)

    return make


def auth(token: str) -> dict:
    return {"Authorization": f"Bearer {token}"}


def wait_searchable(base: str, headers: dict, job_id: str, timeout_s: float = 180) -> dict:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        reply = httpx.get(f"{base}/ingest/{job_id}", headers=headers)
        assert reply.status_code == 200, reply.text
        job = reply.json()
        if job["state"] in (SEARCHABLE, "DOCUMENT_STATE_FAILED", "DOCUMENT_STATE_CANCELLED"):
            assert job["state"] == SEARCHABLE, job
            return job
        time.sleep(0.2)
    raise AssertionError("the job never ended")


@pytest.fixture(scope="module")
def entries(stack, token):
    """Housekeeping entries of tenant `acme` (and one of `globex`), written as a platform service."""
    base = stack["base"]
    for tenant, corpus, text, about in (
        ("acme", "operational_patterns", "Before a billing deploy, freeze the invoice queue.", ""),
        ("acme", "operational_patterns", "[PROVISIONAL] Billing deploys may move to Mondays.", ""),
        ("acme", "user_behavior", "alice asks for billing deploy checklists as numbered steps.", "alice"),
        ("acme", "user_behavior", "bob reads billing deploy notes on his phone.", "bob"),
        ("globex", "operational_patterns", "Globex billing deploy secret: the vault code.", ""),
    ):
        headers = auth(token(tenant, [*PUBLIC_CAPABILITIES, SYSTEM_WRITE], subject="orchestrator"))
        body = {"system_corpus": corpus, "text": text, "title": "entry"}
        if about:
            body["about_subject"] = about
        reply = httpx.post(f"{base}/texts", json=body, headers=headers)
        assert reply.status_code == 200, reply.text
        wait_searchable(base, headers, reply.json()["job_id"])


def test_a_normal_token_cannot_write_a_housekeeping_entry(stack, token):
    reply = httpx.post(
        f"{stack['base']}/texts",
        json={"system_corpus": "operational_patterns", "text": "an entry"},
        headers=auth(token("acme")),
    )
    assert reply.status_code == 404 and reply.json()["details"][0]["reason"] == "CORPUS_NOT_FOUND"


def test_prefetch_through_the_gateway(stack, token, entries):
    ask = {"user_message": "what should I do before the billing deploy?"}
    alice = httpx.post(f"{stack['base']}/prefetch", json=ask, headers=auth(token("acme", subject="alice")))
    assert alice.status_code == 200, alice.text
    answer = alice.json()
    assert answer["rendered"].startswith("[SUGGESTED CONTEXT]\nOperational patterns:\n- Before a billing deploy")
    assert "alice asks for billing deploy checklists" in answer["rendered"]
    assert "bob" not in answer["rendered"] and "PROVISIONAL" not in answer["rendered"]
    assert "Globex" not in answer["rendered"] and not answer.get("degraded", False)
    globex = httpx.post(f"{stack['base']}/prefetch", json=ask, headers=auth(token("globex", subject="alice")))
    assert "freeze the invoice queue" not in globex.json().get("rendered", "")
    searched = httpx.post(
        f"{stack['base']}/search", json={"query": "billing deploy invoice queue"}, headers=auth(token("acme"))
    )
    assert all(r["filename"] != "entry.txt" for r in searched.json().get("results", []))  # not ordinary results
    corpora = httpx.get(f"{stack['base']}/corpora", headers=auth(token("acme"))).json()
    assert all(c["name"] not in ("operational_patterns", "user_behavior") for c in corpora.get("corpora", []))


@pytest.fixture(scope="module")
def guide(stack, token):
    headers = auth(token("acme"))
    corpus = httpx.post(f"{stack['base']}/corpora", json={"name": "Ops"}, headers=headers).json()
    upload = httpx.post(
        f"{stack['base']}/upload",
        params={"corpus_id": corpus["corpus_id"], "filename": "billing.md"},
        content=GUIDE.encode(),
        headers=headers,
    )
    assert upload.status_code == 200, upload.text
    return wait_searchable(stack["base"], headers, upload.json()["job_id"])


def test_context_and_search_documents_through_the_gateway(stack, token, guide):
    headers = auth(token("acme"))
    ask = {"query": "When is the billing service deployed?", "top_k": 3}
    first = httpx.post(f"{stack['base']}/context", json=ask, headers=headers)
    assert first.status_code == 200, first.text
    context = first.json()["context"]
    again = httpx.post(f"{stack['base']}/context", json=ask, headers=headers).json()["context"]
    assert context["rendered"].encode() == again["rendered"].encode()
    evidence = {e["evidence_id"]: e for e in context["evidence"]}
    assert evidence and all(e["filename"] == "billing.md" and len(e["excerpt_sha256"]) == 64 for e in evidence.values())
    assert context["facts"] and any("Tuesday" in f["statement"] for f in context["facts"])
    for fact in context["facts"]:
        if fact.get("status") == "FACT_STATUS_GROUNDED":
            assert fact["evidence_ids"] and set(fact["evidence_ids"]) <= set(evidence)
        else:
            assert fact["status"] == "FACT_STATUS_UNRESOLVED" and not fact.get("evidence_ids")
    assert context["metadata"]["backend"] == "extractive"
    found = httpx.post(
        f"{stack['base']}/search_documents", json={"query": "billing deploy rollback", "top_k": 2}, headers=headers
    )
    assert found.status_code == 200, found.text
    reply = found.json()
    assert reply["text"].startswith("Relevance: ") and "[Source 1 (document_id=" in reply["text"]
    assert reply.get("synthesis") and reply["synthesis"] in reply["text"]
    bad = httpx.post(f"{stack['base']}/context", json={"query": ""}, headers=headers)
    assert bad.status_code == 400


def knowledge(stack, *args: str) -> subprocess.CompletedProcess:
    env = {**stack["env"], "KNOWLEDGE_URL": stack["base"]}
    return subprocess.run([str(BIN / "knowledge"), *args], env=env, capture_output=True, text=True, timeout=240)


def test_cli_context_and_prefetch(stack, token, guide, entries):
    context = knowledge(stack, "context", "When is the billing service deployed?", "--tenant", "acme")
    assert context.returncode == 0, context.stderr
    assert context.stdout.startswith("[KNOWLEDGE CONTEXT]\n") and "Tuesday" in context.stdout
    prefetch = knowledge(stack, "prefetch", "before the billing deploy", "--token", token("acme", subject="alice"))
    assert prefetch.returncode == 0, prefetch.stderr
    assert prefetch.stdout.startswith("[SUGGESTED CONTEXT]") and "alice asks" in prefetch.stdout
    nothing = knowledge(stack, "prefetch", "before the billing deploy", "--tenant", "nobody")
    assert nothing.returncode == 0 and nothing.stdout == "" and "no suggested context" in nothing.stderr
