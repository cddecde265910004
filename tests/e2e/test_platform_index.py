"""The platform index through Envoy, end to end (`knowledge up`, the real model): a platform
service indexes a file's passages by reference into a collection by key, finds them with a
filtered search whose hits name its reference, fragment and metadata, changes a document's
metadata with PATCH, checks an index's admission, and removes by reference; a malformed filter is
400 at its column, a passage over 64 KiB 400 naming its fragment, an unknown key 404."""

from __future__ import annotations

import hashlib
import json
import time
import uuid

import httpx
import pytest
from knowledge_runtime.devkeys import mint_dev_token

from tests.support.stack import running_stack

pytestmark = pytest.mark.e2e

KEY = "projects/42/production"


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    with running_stack(tmp_path_factory.mktemp("platform-index-stack")) as running:
        yield running


@pytest.fixture(scope="module")
def api(stack):
    token = mint_dev_token(stack["data_dir"] / "keys", tenant=f"platform-{uuid.uuid4().hex[:8]}")
    with httpx.Client(base_url=stack["base"], headers={"Authorization": f"Bearer {token}"}, timeout=60) as client:
        yield client


def searchable(api: httpx.Client, job_id: str) -> dict:
    deadline = time.monotonic() + 180
    while True:
        job = api.get(f"/ingest/{job_id}").json()
        if job["state"] == "DOCUMENT_STATE_SEARCHABLE":
            return job
        assert time.monotonic() < deadline and job["state"] != "DOCUMENT_STATE_FAILED", job
        time.sleep(0.2)


def passages_of(pages: int) -> list[dict]:
    return [
        {
            "fragment": f"#p{page}.{block}",
            "text": f"Page {page}, block {block}: the lighthouse keeper logs the tide at dawn (entry {page}{block}).",
            "metadata": {"page": page, "block_ids": [f"b{page}-{block}"], "file_id": "f-42"},
        }
        for page in range(1, pages + 1)
        for block in range(2)
    ]


def error(reply: httpx.Response) -> dict:
    return reply.json()["details"][0]


def test_a_platform_service_indexes_by_reference_searches_with_a_filter_and_removes(api):
    body = {
        "corpus_key": KEY,
        "document_ref": "projects/42/files/log.pdf",
        "content_sha256": hashlib.sha256(b"log.pdf v1").hexdigest(),
        "title": "Tide log",
        "metadata": {"file_id": "f-42", "year": 2026},
        "passages": passages_of(5),
    }
    check = api.post("/passages:check", json={"corpus_key": KEY, "bytes": "4000", "passages": 10})
    assert check.status_code == 404 and error(check)["reason"] == "CORPUS_NOT_FOUND"  # no collection yet
    indexed = api.post("/passages:index", json=body)
    assert indexed.status_code == 200, indexed.text
    answer = indexed.json()
    assert answer["corpus_created"] and answer["state"] == "DOCUMENT_STATE_QUEUED"
    job = searchable(api, answer["job_id"])
    assert job["result"]["chunk_count"] == 10
    again = api.post("/passages:index", json=body).json()
    assert again["unchanged"] and again["job_id"] == "" and again["document_id"] == answer["document_id"]
    assert api.post("/passages:check", json={"corpus_key": KEY, "bytes": "4000", "passages": 10}).json()["admitted"]

    found = api.post(
        "/search",
        json={"query": "lighthouse keeper tide", "corpus_key": KEY, "filter": "metadata.page = 3", "top_k": 5},
    )
    assert found.status_code == 200, found.text
    results = found.json()["results"]
    assert {r["fragment"] for r in results} == {"#p3.0", "#p3.1"}
    hit = results[0]
    assert hit["document_ref"] == "projects/42/files/log.pdf" and hit["page"] == 3
    assert hit["metadata"]["block_ids"][0].startswith("b3-") and hit["document_metadata"]["year"] == 2026
    listed = api.get("/corpora/-/documents", params={"corpus_key": KEY, "filter": 'document_ref = "projects/42/*"'})
    assert listed.status_code == 200, listed.text
    assert [d["document_ref"] for d in listed.json()["documents"]] == ["projects/42/files/log.pdf"]

    patched = api.patch(
        f"/documents/{answer['document_id']}",
        json={"document": {"metadata": {"file_id": "f-42", "year": 2027}}, "update_mask": "metadata"},
    )
    assert patched.status_code == 200, patched.text
    assert patched.json()["document"]["metadata"] == {"file_id": "f-42", "year": 2027}
    newer = api.post("/search", json={"query": "tide", "corpus_key": KEY, "filter": "metadata.year = 2027"})
    assert len(newer.json()["results"]) == 10  # every chunk's merged metadata changed with it

    removed = api.post("/passages:remove", json={"corpus_key": KEY, "document_ref": "projects/42/files/log.pdf"})
    assert removed.status_code == 200 and removed.json()["removed"] == 1
    gone = api.post("/search", json={"query": "lighthouse keeper tide", "corpus_key": KEY})
    assert gone.json()["results"] == []


@pytest.mark.parametrize(
    ("method", "path", "kwargs", "column"),
    [
        ("POST", "/search", {"json": {"query": "tide", "filter": "metadata.page >"}}, "15"),
        ("POST", "/query", {"json": {"query": "tide", "filter": 'metadata.page = 3 AND owner = "x"'}}, "23"),
        ("GET", "/corpora/-/documents", {"params": {"corpus_key": KEY, "filter": "(state = "}}, "8"),
    ],
)
def test_a_malformed_filter_is_400_naming_its_column(api, method, path, kwargs, column):
    api.post("/corpora", json={"name": "filters", "key": KEY})  # 409 once it exists: the key is what matters
    reply = api.request(method, path, **kwargs)
    assert reply.status_code == 400, reply.text
    info = error(reply)
    assert (info["reason"], info["metadata"]["field"], info["metadata"]["column"]) == (
        "FILTER_INVALID",
        "filter",
        column,
    )
    assert f"column {column}" in reply.json()["message"]


def test_a_passage_over_64_kib_is_400_naming_it_and_an_unknown_key_is_404(api):
    big = {
        "corpus_key": KEY,
        "document_ref": "projects/42/files/big.pdf",
        "content_sha256": "0" * 64,
        "passages": [{"fragment": "#p1.0", "text": "ok"}, {"fragment": "#p9.9", "text": "x" * (64 * 1024 + 1)}],
    }
    reply = api.post("/passages:index", json=big)
    assert reply.status_code == 400, reply.text
    assert (error(reply)["reason"], error(reply)["metadata"]["fragment"]) == ("PASSAGE_TOO_LARGE", "#p9.9")
    for path, body in (
        ("/search", {"query": "tide", "corpus_key": "projects/none"}),
        ("/passages:remove", {"corpus_key": "projects/none", "document_ref": "x"}),
    ):
        missing = api.post(path, json=body)
        assert missing.status_code == 404 and error(missing)["reason"] == "CORPUS_NOT_FOUND", (path, missing.text)


def test_an_upload_carries_metadata_in_its_form_and_a_filter_finds_it(api):
    corpus = api.post("/corpora", json={"name": f"uploads-{uuid.uuid4().hex[:6]}"}).json()["corpus_id"]
    files = {"file": ("tides.md", b"# Tides\n\nSpring tides follow the new moon.", "text/markdown")}
    data = {"corpus_id": corpus, "metadata": json.dumps({"owner": "ana", "tags": ["sea"]})}
    reply = api.post("/upload", data=data, files=files)
    assert reply.status_code == 200, reply.text
    job = searchable(api, reply.json()["job_id"])
    document = api.get(f"/documents/{job['result']['document_id']}").json()
    assert document["metadata"] == {"owner": "ana", "tags": ["sea"]}
    found = api.post("/search", json={"query": "spring tides", "corpus_id": corpus, "filter": 'metadata.tags:"sea"'})
    assert [r["document_id"] for r in found.json()["results"]] == [document["document_id"]]
    bad = api.post(
        "/upload", data={"corpus_id": corpus, "metadata": '{"owner": {"x": 1}}'}, files={"file": ("x.md", b"x")}
    )
    assert bad.status_code == 400 and error(bad)["metadata"]["key"] == "owner"
