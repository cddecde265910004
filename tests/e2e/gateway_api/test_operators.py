"""What an operator does over REST: fenced imports and their findings, a tenant switched off and
on, its quota, its usage, and the GC's dry run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.support.gateway_api import SEARCHABLE, auth, knowledge
from tests.support.stack import wait_for_job

pytestmark = pytest.mark.e2e


def test_imports_findings_and_auto_index_over_rest(stack, token, import_root, tmp_path):
    """Through the gateway: a fenced import, a refused one, a pass with findings, accept
    and dismiss, and the CLI's findings list."""
    base = stack["base"]
    headers = auth(
        token("importer", ["corpus.create", "corpus.read", "document.upload", "document.import", "imports.admin"])
    )
    corpus_id = httpx.post(f"{base}/corpora", json={"name": "Imported"}, headers=headers).json()["corpus_id"]
    (import_root / "policy.md").write_text("# Travel policy\n\nTrains are preferred over flights under 600 km.\n")
    (import_root / "notes.md").write_text("# Notes\n\nNothing to see.\n")
    (tmp_path / "secret.txt").write_text("not for import\n")
    (import_root / "escape.md").symlink_to(tmp_path / "secret.txt")
    refused = httpx.post(
        f"{base}/imports", json={"corpus_id": corpus_id, "paths": [str(import_root / "escape.md")]}, headers=headers
    )
    assert refused.status_code == 400 and refused.json()["details"][0]["reason"] == "PATH_REFUSED", refused.text
    plain = auth(token("importer"))  # the public capabilities only
    assert (
        httpx.post(f"{base}/imports", json={"corpus_id": corpus_id, "paths": ["/x"]}, headers=plain).status_code == 403
    )
    imported = httpx.post(
        f"{base}/imports", json={"corpus_id": corpus_id, "paths": [str(import_root / "policy.md")]}, headers=headers
    )
    assert imported.status_code == 200, imported.text
    job, _ = wait_for_job(base, headers, imported.json()["items"][0]["job"]["job_id"])
    assert job["state"] == SEARCHABLE, job
    bound = httpx.put(f"{base}/corpora/{corpus_id}/imports/shared", json={"mode": "suggest"}, headers=headers)
    assert bound.status_code == 200 and bound.json()["mode"] == "suggest", bound.text
    scanned = httpx.post(f"{base}/corpora/{corpus_id}/imports:scan", json={}, headers=headers).json()
    assert scanned["findings_recorded"] == 1  # notes.md; policy.md was imported, escape.md is a link
    found = httpx.get(f"{base}/corpora/{corpus_id}/findings", params={"state": "open"}, headers=headers).json()
    assert [f["path"] for f in found["findings"]] == ["notes.md"]
    finding_id = found["findings"][0]["finding_id"]
    listed = subprocess.run(
        [str(Path(sys.executable).parent / "knowledge"), "findings", "list", "--corpus", corpus_id, "--url", base],
        env={"KNOWLEDGE_TOKEN": headers["Authorization"].split()[1], "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert listed.returncode == 0 and f"{finding_id}\topen\tnew\tshared\tnotes.md" in listed.stdout, listed.stderr
    dismissed = httpx.post(f"{base}/findings/{finding_id}:dismiss", json={}, headers=headers)
    assert dismissed.status_code == 200 and dismissed.json()["state"] == "dismissed"
    again = httpx.post(f"{base}/findings/{finding_id}:accept", json={}, headers=headers)
    assert again.status_code == 400, again.text  # FAILED_PRECONDITION through the gateway
    assert again.json()["details"][0]["reason"] == "FINDING_DECIDED"
    other = auth(token("someone-else", ["document.import"]))
    assert httpx.get(f"{base}/corpora/{corpus_id}/findings", headers=other).status_code == 404


def test_an_operator_switches_a_tenant_off_and_on_and_sets_its_quota_over_rest(stack, token):
    base, name = stack["base"], "switched-off"
    admin, user = auth(token("ops", ["platform.admin"])), auth(token(name))
    assert httpx.get(f"{base}/corpora", headers=user).status_code == 200  # the embedded stack's default: enabled
    fresh = httpx.get(f"{base}/tenants/{name}/settings", headers=admin)
    assert fresh.status_code == 200 and fresh.json()["configured"] is False, fresh.text
    assert httpx.put(f"{base}/tenants/{name}/settings", headers=user, json={"enabled": False}).status_code == 403
    off = httpx.put(f"{base}/tenants/{name}/settings", headers=admin, json={"enabled": False})
    assert off.status_code == 200 and off.json()["settings"]["enabled"] is False, off.text
    refused = httpx.get(f"{base}/corpora", headers=user)
    assert refused.status_code == 403 and refused.json()["details"][0]["reason"] == "FEATURE_DISABLED"
    body = {"enabled": True, "quotas": {"max_documents": 1}}
    on = httpx.put(f"{base}/tenants/{name}/settings", headers=admin, json=body)
    assert on.status_code == 200 and on.json()["settings"]["quotas"]["max_documents"] in (1, "1"), on.text
    corpus = httpx.post(f"{base}/corpora", headers=user, json={"name": "q"}).json()["corpus_id"]
    upload = f"{base}/upload"
    first = httpx.post(upload, params={"corpus_id": corpus, "filename": "a.txt"}, content=b"one", headers=user)
    assert first.status_code == 200, first.text
    second = httpx.post(upload, params={"corpus_id": corpus, "filename": "b.txt"}, content=b"two", headers=user)
    assert second.status_code == 429 and second.json()["details"][0]["reason"] == "QUOTA_EXHAUSTED", second.text
    usage = httpx.get(f"{base}/usage", params={"period": "2026-12"}, headers=user)
    assert usage.status_code == 200 and usage.json()["period"] == "2026-12", usage.text
    assert int(usage.json()["document_count"]) == 1
    assert httpx.get(f"{base}/usage", params={"period": "December"}, headers=user).status_code == 400
    table = knowledge(stack, "usage", "--tenant", name)
    assert table.returncode == 0 and "documents" in table.stdout and "unlimited" in table.stdout, table.stderr
    gc = knowledge(stack, "gc")
    assert gc.returncode == 0 and gc.stdout.startswith("dry run"), gc.stderr
