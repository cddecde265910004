"""Limits: a tenant over its rate is 429 while others pass; a 200 MB body is cut off at the cap
with flat memory; an upload without a Content-Length (chunked) is ingested like a sized one, and
over the cap is the same 413 and stores nothing."""

from __future__ import annotations

import asyncio
import json
import time

import httpx
import psutil
import pytest

from tests.support.gateway_api import CAP, HANDBOOK, SEARCHABLE, auth
from tests.support.stack import post_body, wait_for_job, zeros

pytestmark = pytest.mark.e2e


def test_a_tenant_over_its_rate_is_429_with_retry_after_while_others_pass(stack, token):
    noisy, quiet = auth(token("noisy")), auth(token("quiet"))

    async def burst(n: int) -> list[httpx.Response]:
        async with httpx.AsyncClient(limits=httpx.Limits(max_connections=32), timeout=30) as client:
            return await asyncio.gather(*[client.get(f"{stack['base']}/corpora", headers=noisy) for _ in range(n)])

    limited = []
    for _ in range(5):
        limited = [r for r in asyncio.run(burst(400)) if r.status_code == 429]
        if limited:
            break
    assert limited, "no 429 after 2,000 requests"
    assert limited[0].headers["retry-after"] == "1"
    assert limited[0].json()["details"][0]["reason"] == "RATE_LIMITED"
    assert httpx.get(f"{stack['base']}/corpora", headers=quiet).status_code == 200  # its own bucket


def _gateway_and_service_processes(stack) -> dict[str, psutil.Process]:
    found = {}
    for child in psutil.Process(stack["process"].pid).children(recursive=True):
        line = " ".join(child.cmdline())
        for name in ("envoy", "knowledge_ingest", "knowledge_content_index", "knowledge_search", "knowledge_embedder"):
            if name in line:
                found[name] = child
    return found


def test_a_200_mb_body_is_cut_off_at_the_cap_with_flat_memory(stack, token):
    processes = _gateway_and_service_processes(stack)
    assert set(processes) == {
        "envoy",
        "knowledge_ingest",
        "knowledge_content_index",
        "knowledge_search",
        "knowledge_embedder",
    }
    # A corpus of its own: the document stored at the cap stays out of the other modules' corpora.
    created = httpx.post(f"{stack['base']}/corpora", json={"name": "Capped"}, headers=auth(token("capped")))
    assert created.status_code == 200, created.text
    corpus_id = created.json()["corpus_id"]
    before = {name: p.memory_info().rss for name, p in processes.items()}
    path = f"/api/v1/knowledge/upload?corpus_id={corpus_id}&filename=huge.bin"
    total = 200 * 1024 * 1024
    headers = {"Authorization": f"Bearer {token('capped')}", "Content-Type": "application/octet-stream"}
    sized = post_body(stack["port"], path, {**headers, "Content-Length": str(total)}, zeros(total))
    assert sized.status == 413
    assert sized.sent < 64 * 1024 * 1024, f"the gateway took {sized.sent} bytes before refusing"
    # Without a Content-Length the bytes stream to ingest, which stops at the cap.
    chunked = post_body(stack["port"], path, headers, zeros(total), chunked=True)
    assert chunked.status == 413 and chunked.sent < 64 * 1024 * 1024, chunked
    assert json.loads(chunked.body) == json.loads(sized.body)
    after = {name: p.memory_info().rss for name, p in processes.items()}
    growth_mb = {name: (after[name] - before[name]) / 2**20 for name in processes}
    print(f"RSS before (MiB): { {n: round(v / 2**20, 1) for n, v in before.items()} }")
    print(
        f"RSS after  (MiB): { {n: round(v / 2**20, 1) for n, v in after.items()} }; "
        f"sent {sized.sent} bytes sized, {chunked.sent} chunked"
    )
    assert all(growth < 32 for growth in growth_mb.values()), growth_mb
    # Just over the cap with a true length is 413 too; at the cap it is accepted.
    over = httpx.post(
        f"{stack['base']}/upload",
        params={"corpus_id": corpus_id, "filename": "over.txt"},
        content=b"a" * (CAP + 1),
        headers=headers,
    )
    assert over.status_code == 413 and over.json()["details"][0]["reason"] == "UPLOAD_TOO_LARGE"
    at_cap = httpx.post(
        f"{stack['base']}/upload",
        params={"corpus_id": corpus_id, "filename": "at-cap.bin"},
        content=b"\0" * CAP,
        headers=headers,
        timeout=60,
    )
    assert at_cap.status_code == 200, at_cap.text  # stored; its ingestion is not this test's business


def _pieces(data: bytes, size: int = 4096):
    """A body of unknown length: httpx sends it with Transfer-Encoding: chunked."""
    for start in range(0, len(data), size):
        yield data[start : start + size]


async def _stored(stack, tenant: str, corpus_id: str) -> dict[str, int]:
    """Rows the upload path writes: the tenant's jobs, the corpus's documents, every blob."""
    import asyncpg

    postgres = stack["data_dir"] / "postgres"
    socket_dir = (postgres / "postmaster.pid").read_text().splitlines()[4]
    connection = await asyncpg.connect(host=socket_dir, user="postgres", database="knowledge")
    try:
        return {
            "jobs": await connection.fetchval("SELECT count(*) FROM ingest_jobs WHERE tenant_id = $1", tenant),
            "documents": await connection.fetchval(
                "SELECT count(*) FROM documents WHERE corpus_id = $1", int(corpus_id)
            ),
            "blobs": await connection.fetchval("SELECT count(*) FROM content_blobs"),
        }
    finally:
        await connection.close()


@pytest.fixture(scope="module")
def chunky(stack, token):
    headers = auth(token("chunky"))
    corpus = httpx.post(f"{stack['base']}/corpora", json={"name": "Streamed"}, headers=headers)
    assert corpus.status_code == 200, corpus.text
    return {"headers": headers, "corpus_id": corpus.json()["corpus_id"]}


def test_a_chunked_upload_is_ingested_like_a_sized_one(stack, chunky):
    base, headers, corpus_id = stack["base"], chunky["headers"], chunky["corpus_id"]
    text = HANDBOOK.replace("quokka", "wombat").encode()
    params = {"corpus_id": corpus_id, "filename": "streamed.md"}
    streamed = httpx.post(f"{base}/upload", params=params, content=_pieces(text), headers=headers)
    assert streamed.status_code == 200, streamed.text
    assert streamed.request.headers["transfer-encoding"] == "chunked"
    assert "content-length" not in streamed.request.headers
    sized = httpx.post(
        f"{base}/upload", params={**params, "filename": "sized.md"}, content=text + b"\n", headers=headers
    )
    assert sized.status_code == 200, sized.text
    assert set(streamed.json()) == set(sized.json()) == {"job_id", "filename", "status", "corpus_id"}
    assert streamed.json()["status"] == "ingesting" and streamed.json()["filename"] == "streamed.md"
    job, polls = wait_for_job(base, headers, streamed.json()["job_id"])
    assert job["state"] == SEARCHABLE, job
    document_id = next(p["result"]["document_id"] for p in polls if p.get("result"))
    listed = httpx.get(f"{base}/corpora/{corpus_id}/documents", headers=headers).json()["documents"]
    assert "streamed.md" in {d["filename"] for d in listed}
    page = httpx.get(f"{base}/documents/{document_id}/text", headers=headers).json()
    assert "wombat mentoring program" in page["text"]  # every byte arrived, in order


def test_a_chunked_upload_over_the_cap_is_the_same_413_and_stores_nothing(stack, chunky):
    base, headers, corpus_id = stack["base"], chunky["headers"], chunky["corpus_id"]
    path = f"/api/v1/knowledge/upload?corpus_id={corpus_id}&filename=too-big.bin"
    before = asyncio.run(_stored(stack, "chunky", corpus_id))
    streamed = post_body(
        stack["port"], path, {**headers, "Content-Type": "application/octet-stream"}, zeros(3 * CAP), chunked=True
    )
    sized = httpx.post(
        f"{base}/upload",
        params={"corpus_id": corpus_id, "filename": "too-big.bin"},
        content=b"\0" * (CAP + 1),
        headers=headers,
    )
    assert streamed.status == sized.status_code == 413
    assert streamed.headers["content-type"] == "application/json"
    assert json.loads(streamed.body) == sized.json()  # the same google.rpc.Status, reason and message
    assert sized.json()["details"][0]["reason"] == "UPLOAD_TOO_LARGE"
    # A form whose file part is under the cap but whose body is over it: the body is what is capped.
    boundary = "chunky-boundary"
    form = (
        (
            f'--{boundary}\r\nContent-Disposition: form-data; name="corpus_id"\r\n\r\n{corpus_id}\r\n'
            f"--{boundary}\r\nContent-Disposition: form-data\r\n\r\n"
        ).encode()
        + b"\0" * CAP
        + (
            f'\r\n--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="f.txt"\r\n\r\n'
            f"hello\r\n--{boundary}--\r\n"
        ).encode()
    )
    padded = post_body(
        stack["port"],
        "/api/v1/knowledge/upload",
        {**headers, "Content-Type": f"multipart/form-data; boundary={boundary}"},
        _pieces(form, 256 * 1024),
        chunked=True,
    )
    assert padded.status == 413 and json.loads(padded.body) == sized.json()
    time.sleep(1)  # anything the refused uploads started has had time to land
    after = asyncio.run(_stored(stack, "chunky", corpus_id))
    assert (after["jobs"], after["documents"]) == (before["jobs"], before["documents"]), (before, after)
    listed = httpx.get(f"{base}/corpora/{corpus_id}/documents", headers=headers).json()["documents"]
    assert not {"too-big.bin", "f.txt"} & {d["filename"] for d in listed}


def test_a_chunked_upload_over_the_cap_leaves_no_blob_row(stack, chunky):
    path = f"/api/v1/knowledge/upload?corpus_id={chunky['corpus_id']}&filename=partial.bin"
    before = asyncio.run(_stored(stack, "chunky", chunky["corpus_id"]))
    for _ in range(3):
        refused = post_body(
            stack["port"],
            path,
            {**chunky["headers"], "Content-Type": "application/octet-stream"},
            zeros(2 * CAP),
            chunked=True,
        )
        assert refused.status == 413
    time.sleep(1)
    assert asyncio.run(_stored(stack, "chunky", chunky["corpus_id"]))["blobs"] == before["blobs"]
