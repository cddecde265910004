"""One `knowledge up` for every module of this package: the public REST API through Envoy.

Its upload cap is small (CAP) so the cap is cheap to cross; it may fetch from a local web site
and import from a local folder. ``handbook`` is tenant `acme`'s corpus with one searchable
document, uploaded as a raw body; only test_endpoints.py adds to it or deletes from it.
"""

from __future__ import annotations

import httpx
import pytest
from knowledge_runtime.devkeys import mint_dev_token

from tests.support.gateway_api import CAP, HANDBOOK, ORIGIN, SEARCHABLE, auth
from tests.support.net import LocalSite
from tests.support.stack import running_stack, wait_for_job


@pytest.fixture(scope="package")
def site():
    """A local web site the stack may fetch from (KNOWLEDGE_FETCH_ALLOW_HOSTS)."""
    from tests.support.documents import WEB_PAGE

    local = LocalSite({"/guide.html": ("text/html; charset=utf-8", WEB_PAGE.encode())})
    local.redirects = {"/pumps": "/guide.html"}
    yield local
    local.close()


@pytest.fixture(scope="package")
def import_root(tmp_path_factory):
    """A folder the operator allows imports from (KNOWLEDGE_IMPORT_ROOTS, name ``shared``)."""
    return tmp_path_factory.mktemp("import-root")


@pytest.fixture(scope="package")
def stack(tmp_path_factory, site, import_root):
    from tests.support.crossencoder import build_cross_encoder

    # A reranking model, so that every search the description allows (rerank: true included)
    # is answered rather than refused as not configured.
    reranker = build_cross_encoder(tmp_path_factory.mktemp("cross-encoder"))
    with running_stack(
        tmp_path_factory.mktemp("gateway-stack"),
        RERANK_MODEL=str(reranker),
        RERANK_MODEL_ID="local/cross-encoder",
        MAX_UPLOAD_BYTES=str(CAP),
        CORS_ORIGINS=ORIGIN,
        FETCH_ALLOW_HOSTS=f"127.0.0.1:{site.port}",
        IMPORT_ROOTS=f"shared={import_root}",
    ) as running:
        yield running


@pytest.fixture(scope="package")
def token(stack):
    def make(tenant: str, capabilities: list[str] | None = None, **kwargs) -> str:
        return mint_dev_token(stack["data_dir"] / "keys", tenant=tenant, capabilities=capabilities, **kwargs)

    return make


@pytest.fixture(scope="package")
def handbook(stack, token):
    """A corpus of tenant `acme` holding one searchable document, uploaded as a raw body."""
    headers = auth(token("acme"))
    corpus = httpx.post(f"{stack['base']}/corpora", json={"name": "Handbook"}, headers=headers).json()
    upload = httpx.post(
        f"{stack['base']}/upload",
        params={"corpus_id": corpus["corpus_id"], "filename": "handbook.md"},
        content=HANDBOOK.encode(),
        headers=headers,
    )
    assert upload.status_code == 200, upload.text
    job, polls = wait_for_job(stack["base"], headers, upload.json()["job_id"])
    assert job["state"] == SEARCHABLE, job
    return {
        "corpus": corpus,
        "upload": upload.json(),
        "job": job,
        "polls": polls,
        "headers": headers,
        "document_id": next(p["result"]["document_id"] for p in polls if p.get("result")),
    }
