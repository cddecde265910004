"""Scopes and clearance through Envoy, end to end (`knowledge up`, the real model): tokens of
different scope nodes and clearances see exactly their reach over REST, a token without a scope
or naming an unknown node is 403 SCOPE_UNRESOLVED, and what is out of reach is 404."""

from __future__ import annotations

import json
import time
import uuid

import httpx
import pytest
from knowledge_runtime.devkeys import mint_dev_token

from tests.support.stack import running_stack

pytestmark = pytest.mark.e2e

SEARCHABLE = "DOCUMENT_STATE_SEARCHABLE"
# corpus -> (node, band)
LAYOUT = {
    "handbook": ("/", "TENANT"),
    "brochure": ("/", "GENERAL"),
    "salaries": ("/", "CONFIDENTIAL"),
    "runbooks": ("workspace:eng", "TENANT"),
    "invoices": ("workspace:eng/project:billing", "TENANT"),
    "pipeline": ("workspace:sales", "TENANT"),
}
# (scope, clearance) -> corpora seen
READERS = {
    ("/", None): {"handbook", "brochure"},
    ("/", "GENERAL"): {"brochure"},
    ("/", "CONFIDENTIAL"): {"handbook", "brochure", "salaries"},
    ("workspace:eng", None): {"handbook", "brochure", "runbooks"},
    ("workspace:eng/project:billing", None): {"handbook", "brochure", "runbooks", "invoices"},
    ("workspace:sales", "RESTRICTED"): {"handbook", "brochure", "salaries", "pipeline"},
}


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    # A quiet event stream beats every second (the events tests below wait for one).
    with running_stack(tmp_path_factory.mktemp("scopes-stack"), EVENTS_HEARTBEAT_S="1") as running:
        yield running


@pytest.fixture(scope="module")
def tenant(stack):
    name = f"scoped-{uuid.uuid4().hex[:8]}"
    base = stack["base"]

    def headers(scope: str | None = "/", clearance: str | None = None) -> dict:
        token = mint_dev_token(stack["data_dir"] / "keys", tenant=name, scope=scope, clearance=clearance)
        return {"Authorization": f"Bearer {token}"}

    admin = headers(clearance="RESTRICTED")
    ids, jobs = {}, {}
    for corpus, (_, band) in LAYOUT.items():
        made = httpx.post(f"{base}/corpora", headers=admin, json={"name": corpus, "confidentiality": band})
        assert made.status_code == 200, made.text
        assert made.json()["scope"] == "/" and made.json()["confidentiality"] == band
        ids[corpus] = made.json()["corpus_id"]
        text = f"# {corpus.title()}\n\nThe {corpus} corpus explains the aurora lantern procedure in detail."
        reply = httpx.post(
            f"{base}/upload?corpus_id={ids[corpus]}&filename={corpus}.md", headers=admin, content=text.encode()
        )
        assert reply.status_code == 200, reply.text
        jobs[corpus] = reply.json()["job_id"]
    documents = {}
    for corpus, job_id in jobs.items():
        deadline = time.monotonic() + 180
        while True:
            job = httpx.get(f"{base}/ingest/{job_id}", headers=admin).json()
            if job["state"] == SEARCHABLE:
                documents[corpus] = job["result"]["document_id"]
                break
            assert time.monotonic() < deadline and job["state"] != "DOCUMENT_STATE_FAILED", job
            time.sleep(0.2)
    for corpus, (node, _) in LAYOUT.items():
        if node != "/":
            bound = httpx.post(f"{base}/corpora/{ids[corpus]}:bind", headers=admin, json={"scope": node})
            assert bound.status_code == 200, bound.text
            assert bound.json()["corpus"]["scope"] == node
    return {"headers": headers, "corpora": ids, "documents": documents}


@pytest.mark.parametrize(("scope", "clearance"), list(READERS))
def test_each_token_reads_exactly_its_reach_through_the_gateway(stack, tenant, scope, clearance):
    base, headers = stack["base"], tenant["headers"](scope, clearance)
    expected = READERS[(scope, clearance)]
    found = httpx.post(f"{base}/search", headers=headers, json={"query": "aurora lantern procedure", "top_k": 20})
    assert found.status_code == 200, found.text
    assert {r["filename"].removesuffix(".md") for r in found.json().get("results", [])} == expected
    answer = httpx.post(f"{base}/query", headers=headers, json={"query": "What is the aurora lantern procedure?"})
    assert answer.status_code == 200, answer.text
    assert {c["filename"].removesuffix(".md") for c in answer.json().get("citations", [])} <= expected
    listed = httpx.get(f"{base}/corpora", headers=headers).json()
    assert {c["name"] for c in listed.get("corpora", [])} == expected
    for corpus, document_id in tenant["documents"].items():
        status = 200 if corpus in expected else 404
        for reply in (
            httpx.get(f"{base}/documents/{document_id}", headers=headers),
            httpx.get(f"{base}/documents/{document_id}/text", headers=headers),
            httpx.get(f"{base}/corpora/{tenant['corpora'][corpus]}/documents", headers=headers),
        ):
            assert reply.status_code == status, (corpus, reply.text)


def test_an_unresolved_scope_is_403_and_reads_nothing(stack, tenant):
    base = stack["base"]
    for headers in (tenant["headers"](scope=None), tenant["headers"](scope="workspace:nowhere")):
        for reply in (
            httpx.post(f"{base}/search", headers=headers, json={"query": "aurora"}),
            httpx.get(f"{base}/corpora", headers=headers),
            httpx.get(f"{base}/documents/{tenant['documents']['handbook']}", headers=headers),
            httpx.get(f"{base}/usage", headers=headers),
            httpx.get(f"{base}/document_types", headers=headers),
            httpx.post(f"{base}/document_types", headers=headers, json={"name": "planted", "description": "x"}),
        ):
            assert reply.status_code == 403, reply.text
            assert reply.json()["details"][0]["reason"] == "SCOPE_UNRESOLVED"


def test_binding_outside_the_own_node_is_refused_over_rest(stack, tenant):
    base, billing = stack["base"], tenant["headers"]("workspace:eng/project:billing")
    invoices = tenant["corpora"]["invoices"]
    up = httpx.post(f"{base}/corpora/{invoices}:bind", headers=billing, json={"scope": "workspace:eng"})
    assert up.status_code == 400 and up.json()["details"][0]["reason"] == "SCOPE_OUT_OF_REACH"
    sales = httpx.post(
        f"{base}/corpora/{tenant['corpora']['pipeline']}:bind", headers=billing, json={"scope": "workspace:eng"}
    )
    assert sales.status_code == 404  # another branch's corpus is not even there for this token


def test_an_ancestors_corpus_is_read_only_over_rest(stack, tenant):
    """A lower token reads the root's corpus but neither binds, deletes nor empties it: 403
    CORPUS_READ_ONLY naming where it sits, and the root still lists it."""
    base, billing = stack["base"], tenant["headers"]("workspace:eng/project:billing")
    handbook = tenant["corpora"]["handbook"]
    for reply in (
        httpx.post(f"{base}/corpora/{handbook}:bind", headers=billing, json={"scope": "workspace:eng/project:billing"}),
        httpx.delete(f"{base}/corpora/{handbook}", params={"delete_documents": "true"}, headers=billing),
        httpx.delete(f"{base}/documents/{tenant['documents']['handbook']}", headers=billing),
    ):
        assert reply.status_code == 403, reply.text
        detail = reply.json()["details"][0]
        assert detail["reason"] == "CORPUS_READ_ONLY" and detail["metadata"]["corpus_scope"] == "/"
    listed = httpx.get(f"{base}/corpora", headers=tenant["headers"]()).json()
    assert handbook in {c["corpus_id"] for c in listed["corpora"]}


# ---- events obey scope and clearance ----
def stream_until_cursor(base: str, headers: dict, cursor: int) -> list[dict]:
    """Every line of GET /events from the start (heartbeats too) until one carries ``cursor``."""
    lines: list[dict] = []
    with httpx.stream("GET", f"{base}/events", params={"after": ""}, headers=headers, timeout=60) as reply:
        assert reply.status_code == 200, reply.read()
        for raw in reply.iter_lines():
            if raw.strip():
                lines.append(json.loads(raw))
                if int(lines[-1]["cursor"]) >= cursor:
                    return lines
    raise AssertionError(f"the stream ended after {lines}")


@pytest.mark.parametrize(("scope", "clearance"), list(READERS))
def test_each_token_hears_only_the_events_of_its_reach_through_the_gateway(stack, tenant, scope, clearance):
    """The tenant is fresh and nothing else in this module writes events: its head is a
    corpus.created and a document.searchable per corpus. Each token's stream reaches that head
    (skipped events move its cursor on) carrying only the events of corpora it reads now —
    the bound corpora's corpus.created was written while they were still at the root."""
    names = {corpus_id: name for name, corpus_id in tenant["corpora"].items()}
    head = 2 * len(LAYOUT)
    lines = stream_until_cursor(stack["base"], tenant["headers"](scope, clearance), head)
    events = [line for line in lines if line["type"] != "stream.heartbeat"]
    expected = READERS[(scope, clearance)]
    assert sorted((names[e["corpus_id"]], e["type"]) for e in events) == sorted(
        (name, kind) for name in expected for kind in ("corpus.created", "document.searchable")
    )
    cursors = [int(line["cursor"]) for line in lines]
    assert cursors == sorted(cursors) and cursors[-1] == head
    # Resumed from its last cursor, the stream starts after the head: nothing again.
    with httpx.stream(
        "GET", f"{stack['base']}/events", params={"after": str(head)}, headers=tenant["headers"](scope, clearance)
    ) as reply:
        first = json.loads(next(raw for raw in reply.iter_lines() if raw.strip()))
    assert first["type"] == "stream.heartbeat" and first["cursor"] == str(head)


def test_an_unresolved_scope_hears_no_events_through_the_gateway(stack, tenant):
    for headers in (tenant["headers"](scope=None), tenant["headers"](scope="workspace:nowhere")):
        reply = httpx.get(f"{stack['base']}/events", headers=headers)
        assert reply.status_code == 403, reply.text
        assert reply.json()["details"][0]["reason"] == "SCOPE_UNRESOLVED"
