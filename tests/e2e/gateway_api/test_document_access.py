"""Who may read a document, end to end through Envoy: a token minted by `knowledge dev-token
--groups`, lists given at upload (a multipart part, a query parameter of a raw body), search and
reads that obey them, and the `knowledge access show|set` commands changing them."""

from __future__ import annotations

import json
import uuid

import httpx
import pytest

from tests.support.gateway_api import SEARCHABLE, auth, knowledge
from tests.support.stack import wait_for_job

pytestmark = pytest.mark.e2e


def found(base: str, headers: dict, corpus_id: str) -> set[str]:
    reply = httpx.post(
        f"{base}/search", json={"query": "heliotrope salary bands", "corpus_id": corpus_id}, headers=headers
    )
    assert reply.status_code == 200, reply.text
    return {r["filename"] for r in reply.json().get("results", [])}


def test_access_lists_through_the_gateway_and_the_cli(stack, token):
    base, tenant = stack["base"], f"acl-{uuid.uuid4().hex[:8]}"
    minted = knowledge(stack, "dev-token", "--tenant", tenant, "--subject", "bob", "--groups", "hr, payroll")
    assert minted.returncode == 0, minted.stderr
    bob = auth(minted.stdout.strip())
    ana_token = token(tenant, subject="ana")
    ana, carl = auth(ana_token), auth(token(tenant, subject="carl", groups=["finance"]))
    corpus_id = httpx.post(f"{base}/corpora", json={"name": "HR"}, headers=ana).json()["corpus_id"]

    text = "# Pay\n\nThe heliotrope salary bands of {}."
    form = httpx.post(
        f"{base}/upload",
        data={"corpus_id": corpus_id, "principals": json.dumps(["user:ana", "group:hr"])},
        files={"file": ("bands.md", text.format("the staff").encode(), "text/markdown")},
        headers=ana,
    )
    raw = httpx.post(
        f"{base}/upload",
        params={"corpus_id": corpus_id, "filename": "board.md", "access.principals": ["user:ana"]},
        content=text.format("the board").encode(),
        headers=ana,
    )
    opened = httpx.post(
        f"{base}/texts", json={"corpus_id": corpus_id, "title": "open.md", "text": text.format("everyone")}, headers=ana
    )
    ids = {}
    for reply in (form, raw, opened):
        assert reply.status_code == 200, reply.text
        job, polls = wait_for_job(base, ana, reply.json()["job_id"])
        assert job["state"] == SEARCHABLE, job
        ids[reply.json()["filename"]] = next(p["result"]["document_id"] for p in polls if p.get("result"))

    assert found(base, ana, corpus_id) == {"bands.md", "board.md", "open.md"}
    assert found(base, bob, corpus_id) == {"bands.md", "open.md"}  # through his group hr
    assert found(base, carl, corpus_id) == {"open.md"}
    hidden = httpx.get(f"{base}/documents/{ids['bands.md']}", headers=carl)
    assert hidden.status_code == 404 and hidden.json()["details"][0]["reason"] == "DOCUMENT_NOT_FOUND"

    shown = knowledge(stack, "access", "show", ids["bands.md"], "--token", ana_token)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.strip().split("\t") == [ids["bands.md"], "bands.md", "group:hr, user:ana"]
    changed = knowledge(stack, "access", "set", ids["bands.md"], "--everyone", "--token", ana_token)
    assert changed.returncode == 0, changed.stderr
    assert f"{ids['bands.md']}: group:hr, user:ana -> everyone who reaches its corpus" in changed.stdout
    assert found(base, carl, corpus_id) == {"bands.md", "open.md"}  # at once
    narrowed = knowledge(stack, "access", "set", ids["board.md"], "user:ana", "group:payroll", "--token", ana_token)
    assert narrowed.returncode == 0, narrowed.stderr
    assert found(base, bob, corpus_id) == {"bands.md", "board.md", "open.md"}
    refused = knowledge(stack, "access", "set", ids["board.md"], "team:x", "--token", ana_token)
    assert refused.returncode == 2 and "ACCESS_LIST_INVALID" in refused.stderr
    missing = knowledge(stack, "access", "show", ids["board.md"], "--token", token(tenant, subject="carl"))
    assert missing.returncode == 3 and "DOCUMENT_NOT_FOUND" in missing.stderr
