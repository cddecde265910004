"""Document AI through Envoy on the whole stack: the taxonomy over REST, classification
by the real model, schemaless extraction, the refusal of schema extraction without an LLM,
processing and its stored results, another tenant's 404, and `knowledge types|classify|extract|
process`. One `knowledge up` for the module (no LLM configured)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from knowledge_runtime.devkeys import mint_dev_token

from tests.support.stack import running_stack, wait_for_job

pytestmark = pytest.mark.e2e

BIN = Path(sys.executable).parent
INVOICE = (
    "# Invoice INV-2024-017\n\nInvoice issued by Globex Corporation to Initech Ltd. Invoice number "
    "INV-2024-017. Amount due: 1,250.00 EUR, payment due within 30 days by bank transfer.\n\n"
    "| item | quantity | unit price |\n|---|---|---|\n| steel bolts | 100 | 2.50 |\n| hex nuts | 400 | 0.25 |\n"
)
SCHEMA = {
    "type": "object",
    "properties": {"invoice_number": {"type": "string", "description": "the invoice's number"}},
}


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    with running_stack(tmp_path_factory.mktemp("docai-stack")) as running:
        yield running


def headers(stack, tenant: str = "acme") -> dict:
    return {"Authorization": f"Bearer {mint_dev_token(stack['data_dir'] / 'keys', tenant=tenant)}"}


@pytest.fixture(scope="module")
def invoice(stack):
    base, auth = stack["base"], headers(stack)
    corpus = httpx.post(f"{base}/corpora", json={"name": "Finance"}, headers=auth).json()
    upload = httpx.post(
        f"{base}/upload",
        params={"corpus_id": corpus["corpus_id"], "filename": "invoice.md"},
        content=INVOICE.encode(),
        headers=auth,
    )
    assert upload.status_code == 200, upload.text
    job, _ = wait_for_job(base, auth, upload.json()["job_id"])
    assert job["state"] == "DOCUMENT_STATE_SEARCHABLE", job
    for name, description in (
        ("invoice", "A bill from a supplier: invoice number, amount due, payment terms, line items."),
        ("policy", "Rules employees and staff must follow, approvals and what is allowed."),
    ):
        reply = httpx.post(f"{base}/document_types", json={"name": name, "description": description}, headers=auth)
        assert reply.status_code == 200, reply.text
    return job["result"]["document_id"]


def test_the_taxonomy_and_classification_over_rest(stack, invoice):
    base, auth = stack["base"], headers(stack)
    listed = httpx.get(f"{base}/document_types", headers=auth).json()
    assert [t["name"] for t in listed["document_types"]] == ["invoice", "policy"]
    duplicate = httpx.post(f"{base}/document_types", json={"name": "invoice", "description": "x"}, headers=auth)
    assert duplicate.status_code == 409 and duplicate.json()["details"][0]["reason"] == "DOCUMENT_TYPE_EXISTS"
    schema = httpx.post(
        f"{base}/document_types/invoice/schemas", json={"json_schema": json.dumps(SCHEMA)}, headers=auth
    )
    assert schema.status_code == 200 and schema.json()["schema"]["version"] == 1, schema.text
    versions = httpx.get(f"{base}/document_types/invoice/schemas", headers=auth).json()
    assert [s["version"] for s in versions["schemas"]] == [1]
    classified = httpx.post(f"{base}/documents/{invoice}:classify", json={}, headers=auth)
    assert classified.status_code == 200, classified.text
    body = classified.json()
    assert body["type_name"] == "invoice" and body["decided_by"] == "embedding" and body["evidence"]
    assert body["card"]["kind"] == "classification_result"
    other = httpx.post(f"{base}/documents/{invoice}:classify", json={}, headers=headers(stack, "globex"))
    assert other.status_code == 404


def test_extraction_over_rest_tables_and_the_llm_refusal(stack, invoice):
    base, auth = stack["base"], headers(stack)
    tables = httpx.post(f"{base}/documents/{invoice}:extract", json={}, headers=auth)
    assert tables.status_code == 200, tables.text
    (table,) = tables.json()["tables"]
    assert [(c["name"], c["type"]) for c in table["columns"]] == [
        ("item", "text"),
        ("quantity", "integer"),
        ("unit price", "number"),
    ]
    refused = httpx.post(f"{base}/documents/{invoice}:extract", json={"schema_name": "invoice"}, headers=auth)
    assert refused.status_code == 503, refused.text
    assert refused.json()["details"][0]["reason"] == "RUNTIME_UNAVAILABLE"
    assert "KNOWLEDGE_LLM_URL" in refused.json()["message"]


def test_processing_over_rest_is_stored_and_idempotent(stack, invoice):
    base, auth = stack["base"], headers(stack)
    first = httpx.post(f"{base}/documents/{invoice}:process", json={}, headers=auth)
    assert first.status_code == 200, first.text
    result = first.json()["result"]
    assert result["type_name"] == "invoice" and result["schema_version"] == 1
    assert not result.get("fields") and any("KNOWLEDGE_LLM_URL" in note for note in result["notes"])
    again = httpx.post(f"{base}/documents/{invoice}:process", json={}, headers=auth).json()
    assert again["existing"] is True and again["result"]["result_id"] == result["result_id"]
    listed = httpx.get(f"{base}/documents/{invoice}/processing_results", headers=auth).json()
    assert [r["result_id"] for r in listed["results"]] == [result["result_id"]]


def knowledge(stack, *args: str) -> subprocess.CompletedProcess:
    env = {**stack["env"], "KNOWLEDGE_URL": stack["base"]}
    return subprocess.run([str(BIN / "knowledge"), *args], env=env, capture_output=True, text=True, timeout=240)


def test_the_cli_commands(stack, invoice):
    types = knowledge(stack, "types", "list", "--tenant", "acme")
    assert types.returncode == 0, types.stderr
    assert types.stdout.startswith("invoice\tperson\tschema v1\t")
    added = knowledge(stack, "types", "add", "memo", "--description", "An internal memo.", "--tenant", "acme")
    assert added.returncode == 0 and added.stdout.startswith("memo\tperson"), added.stderr
    classified = knowledge(stack, "classify", invoice, "--tenant", "acme")
    assert classified.returncode == 0 and "Classified as invoice" in classified.stdout, classified.stderr
    extracted = knowledge(stack, "extract", invoice, "--tenant", "acme")
    assert extracted.returncode == 0 and "quantity (integer)" in extracted.stdout, extracted.stderr
    refused = knowledge(stack, "extract", invoice, "--schema", "invoice", "--tenant", "acme")
    assert refused.returncode != 0 and "KNOWLEDGE_LLM_URL" in refused.stderr
    results = knowledge(stack, "process", invoice, "--results", "--tenant", "acme")
    assert results.returncode == 0 and "\tinvoice\t" in results.stdout, results.stderr
