"""The gateway's hardening through the real services, and an access log without tokens or
query values."""

from __future__ import annotations

import json
import time

import httpx
import pytest

from tests.support.gateway_api import auth

pytestmark = pytest.mark.e2e


def test_hardening_through_the_whole_stack(stack, token, handbook):
    """Through Envoy and the real services: a query-string token is not one, an unknown
    body field is 400 (not a tenant-wide search), a negative page_size is 400, oversized headers
    are a JSON 431 every time, and a REST GET is logged as GET."""
    base, headers = stack["base"], handbook["headers"]
    secret = headers["Authorization"].removeprefix("Bearer ")
    assert httpx.get(f"{base}/corpora", params={"access_token": secret}).status_code == 401
    misspelt = httpx.post(f"{base}/search", json={"query": "quokka", "corpus": "999"}, headers=headers)
    assert misspelt.status_code == 400 and misspelt.json()["message"] == "unknown field corpus in the request body"
    assert httpx.post(f"{base}/corpora", json={"name": "x", "admin": True}, headers=headers).status_code == 400
    # A repeated field is a JSON array: the transcoder would read a lone value as a one-item list.
    lone = httpx.post(
        f"{base}/document_types", json={"name": "memo", "description": "a memo", "examples": "one"}, headers=headers
    )
    assert lone.status_code == 400 and lone.json()["details"][0]["reason"] == "INVALID_REQUEST"
    assert lone.json()["details"][0]["metadata"]["field"] == "examples" and "JSON array" in lone.json()["message"]
    nested = httpx.post(f"{base}/search", json={"query": "x", "weights": {"vector": 1, "bogus": [1]}}, headers=headers)
    assert nested.status_code == 400 and nested.json()["details"][0]["reason"] == "UNKNOWN_FIELD"
    as_list = httpx.post(
        f"{base}/document_types",
        json={"name": "memo", "description": "a memo", "examples": ["one"]},
        headers=auth(token("acme", ["taxonomy.edit"])),
    )
    assert as_list.status_code == 200, as_list.text
    # An absent body would read as an empty access list (the document open to all): refused.
    bare = httpx.post(f"{base}/documents/{handbook['document_id']}:setAccess", headers=headers)
    assert bare.status_code == 400 and bare.json()["details"][0]["metadata"]["field"] == "body"
    stream_field = httpx.post(f"{base}/query:stream", json={"query": "x", "bogus": 1}, headers=headers)
    assert stream_field.status_code == 400 and stream_field.json()["details"][0]["reason"] == "UNKNOWN_FIELD"
    negative = httpx.get(f"{base}/corpora", params={"page_size": -1}, headers=headers)
    assert negative.status_code == 400 and negative.json()["details"][0]["reason"] == "INVALID_REQUEST"
    params = {"corpus_id": handbook["corpus"]["corpus_id"], "filename": "f" * 10_000}
    statuses = {
        httpx.post(f"{base}/upload", params=params, content=b"x", headers=headers).status_code for _ in range(5)
    }
    assert statuses == {431}
    huge = token("acme", subject="s" * 10_000)
    too_large = httpx.get(f"{base}/corpora", headers=auth(huge))
    assert too_large.status_code == 431 and too_large.json()["details"][0]["reason"] == "HEADERS_TOO_LARGE"
    # Just under the gateway's limit, every time: the services take what the gateway forwards.
    padding = {"x-padding": "p" * (7 * 1024 - len(secret))}
    assert {httpx.get(f"{base}/corpora", headers={**headers, **padding}).status_code for _ in range(5)} == {200}
    log, deadline = "", time.monotonic() + 20
    while time.monotonic() < deadline:
        log = (stack["data_dir"] / "logs" / "gateway.log").read_text()
        if '"status":431' in log and '"query":"access_token"' in log:
            break
        time.sleep(0.5)
    lines = [json.loads(line) for line in log.splitlines() if line.startswith("{")]
    listed = [line for line in lines if line["grpc_method"] == "/knowledge.v1.CorpusService/ListCorpora"]
    assert listed and {line["method"] for line in listed} == {"GET"}
    assert secret not in log and "f" * 100 not in log


def test_the_access_log_holds_no_token(stack, handbook):
    secret = handbook["headers"]["Authorization"].removeprefix("Bearer ")  # used by the tests above
    log, deadline = "", time.monotonic() + 20
    while '"tenant":"acme"' not in log and time.monotonic() < deadline:  # Envoy flushes it now and then
        time.sleep(0.5)
        log = (stack["data_dir"] / "logs" / "gateway.log").read_text()
    assert '"tenant":"acme"' in log and '"path":"/api/v1/knowledge/upload"' in log
    assert '"query":"corpus_id,filename"' in log and "handbook.md" not in log  # names, never values
    assert secret not in log and secret.split(".")[1] not in log and "Bearer" not in log
