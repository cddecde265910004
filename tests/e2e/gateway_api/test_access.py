"""The API's front door: the OpenAPI description without a token, CORS for the configured
origin only, bad tokens 401 as JSON, a missing capability 403 naming it."""

from __future__ import annotations

import json

import httpx
import pytest
from knowledge_gateway.openapi import openapi_text
from knowledge_runtime.devkeys import mint_dev_token

from tests.support.gateway_api import ORIGIN, auth

pytestmark = pytest.mark.e2e


def test_openapi_is_served_without_a_token_and_is_the_committed_one(stack):
    reply = httpx.get(f"{stack['base']}/openapi.json")
    assert reply.status_code == 200
    assert reply.headers["content-type"] == "application/json"
    assert reply.json() == json.loads(openapi_text())


def test_cors_preflight_and_responses_for_the_configured_origin_only(stack, token):
    preflight = {
        "Origin": ORIGIN,
        "Access-Control-Request-Method": "POST",
        "Access-Control-Request-Headers": "authorization, content-type",
    }
    allowed = httpx.options(f"{stack['base']}/corpora", headers=preflight)
    assert allowed.status_code == 200
    assert allowed.headers["access-control-allow-origin"] == ORIGIN
    assert "authorization" in allowed.headers["access-control-allow-headers"]
    other = httpx.options(f"{stack['base']}/corpora", headers={**preflight, "Origin": "https://evil.example.com"})
    assert "access-control-allow-origin" not in other.headers
    actual = httpx.get(f"{stack['base']}/corpora", headers={"Origin": ORIGIN, **auth(token("cors"))})
    assert actual.status_code == 200 and actual.headers["access-control-allow-origin"] == ORIGIN


@pytest.mark.parametrize("case", ["missing", "garbage", "expired", "wrong-issuer", "wrong-audience", "other-key"])
def test_bad_tokens_are_401_as_json(stack, token, case, tmp_path):
    from knowledge_runtime.devkeys import ensure_dev_keys

    headers = {
        "missing": {},
        "garbage": auth("not.a.jwt"),
        "expired": auth(token("acme", ttl_s=-120)),  # past the 30 s clock skew
        "wrong-issuer": auth(token("acme", issuer="someone-else")),
        "wrong-audience": auth(token("acme", audience="another-api")),
        "other-key": auth(mint_dev_token(ensure_dev_keys(tmp_path).parent, tenant="acme")),
    }[case]
    reply = httpx.get(f"{stack['base']}/corpora", headers=headers)
    assert reply.status_code == 401, reply.text
    assert reply.headers["content-type"] == "application/json"
    body = reply.json()
    expected = {"missing": "TOKEN_MISSING", "expired": "TOKEN_EXPIRED"}.get(case, "TOKEN_INVALID")  # as a service says
    assert body["code"] == 16 and body["details"][0]["reason"] == expected and body["message"]
    assert reply.headers["www-authenticate"].startswith("Bearer")


@pytest.mark.parametrize(
    ("method", "path", "body", "capability"),
    [
        ("POST", "/corpora", {"name": "x"}, "corpus.create"),
        ("GET", "/corpora", None, "corpus.read"),
        ("GET", "/documents/1/text", None, "corpus.read"),
        ("GET", "/ingest/00000000-0000-0000-0000-000000000000", None, "document.upload"),
        ("DELETE", "/documents/1", None, "document.upload"),
        ("POST", "/search", {"query": "vacation"}, "search"),
        ("POST", "/query", {"query": "vacation"}, "search"),
    ],
)
def test_a_missing_capability_is_403_naming_it(stack, token, method, path, body, capability):
    from knowledge_runtime.auth import PUBLIC_CAPABILITIES

    others = [c for c in PUBLIC_CAPABILITIES if c != capability]
    reply = httpx.request(method, f"{stack['base']}{path}", json=body, headers=auth(token("acme", others)))
    assert reply.status_code == 403, reply.text
    assert capability in reply.json()["message"]


def test_an_upload_without_document_upload_is_403(stack, token, handbook):
    headers = auth(token("acme", ["corpus.read", "search"]))
    reply = httpx.post(
        f"{stack['base']}/upload",
        params={"corpus_id": handbook["corpus"]["corpus_id"], "filename": "a.txt"},
        content=b"hello",
        headers=headers,
    )
    assert reply.status_code == 403 and "document.upload" in reply.json()["message"]
