"""Fairness between tenants on the real stack (``knowledge up``: the real model, real workers):
one tenant's one-page upload, timed from upload to searchable, alone and then while another
tenant's 3,000-chunk document is being embedded, takes at most twice as long (and half a second of shared CPU)."""

from __future__ import annotations

import time

import httpx
import pytest

from tests.support.gateway_api import SEARCHABLE, auth
from tests.support.stack import running_stack, wait_for_job

pytestmark = pytest.mark.e2e

BIG_CHUNKS = 3_000


def big_document() -> str:
    """About 3,000 chunks of distinct prose, one section each."""
    return "\n\n".join(
        f"## Section {n}\n\nThe pump of station {n} was serviced in week {n % 52}; its valve {n * 7} "
        f"was replaced and the seal {n * 13} checked. " * 4
        for n in range(BIG_CHUNKS)
    )


def small_upload(stack, headers, corpus_id: str, n: int) -> float:
    """Seconds from the upload of a one-page text to its job SEARCHABLE."""
    started = time.monotonic()
    reply = httpx.post(
        f"{stack['base']}/texts",
        json={
            "corpus_id": corpus_id,
            "text": f"Visitor parking rule {n}: park in bay {n} after nine.",
            "title": f"p{n}",
        },
        headers=headers,
    )
    assert reply.status_code == 200, reply.text
    job, _ = wait_for_job(stack["base"], headers, reply.json()["job_id"], timeout_s=300)
    assert job["state"] == SEARCHABLE, job
    return time.monotonic() - started


def test_a_small_upload_waits_at_most_twice_its_idle_time_behind_another_tenants_big_document(tmp_path):
    with running_stack(tmp_path, MAX_UPLOAD_BYTES=str(64 * 1024 * 1024)) as stack:
        from knowledge_runtime.devkeys import mint_dev_token

        def headers(tenant: str) -> dict:
            return auth(mint_dev_token(stack["data_dir"] / "keys", tenant=tenant))

        big, small = headers("fair-big"), headers("fair-small")
        big_corpus = httpx.post(f"{stack['base']}/corpora", json={"name": "Pumps"}, headers=big).json()["corpus_id"]
        small_corpus = httpx.post(f"{stack['base']}/corpora", json={"name": "Parking"}, headers=small).json()
        small_corpus = small_corpus["corpus_id"]
        small_upload(stack, small, small_corpus, 0)  # warm: the first job pays for loading what it needs
        idle = sorted(small_upload(stack, small, small_corpus, n) for n in range(1, 4))[1]
        upload = httpx.post(
            f"{stack['base']}/upload",
            params={"corpus_id": big_corpus, "filename": "pumps.md"},
            content=big_document().encode(),
            headers=big,
            timeout=120,
        )
        assert upload.status_code == 200, upload.text
        job_id = upload.json()["job_id"]
        # Wait until the big document is being embedded (its progress counts chunks).
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            job = httpx.get(f"{stack['base']}/ingest/{job_id}", headers=big).json()
            if job.get("stage", "").startswith("embedding") or job["state"] in ("SEARCHABLE", "FAILED"):
                break
            time.sleep(0.2)
        assert job.get("stage", "").startswith("embedding"), job
        busy = [small_upload(stack, small, small_corpus, n) for n in range(10, 13)]
        still = httpx.get(f"{stack['base']}/ingest/{job_id}", headers=big).json()
        assert still["state"] not in ("SEARCHABLE", "FAILED"), "the big document ended before the small uploads did"
        print(f"fairness: idle {idle:.2f} s, during a {BIG_CHUNKS}-chunk document {[round(b, 2) for b in busy]} s")
        # Twice the idle time, plus half a second for the CPU the big document's embedding takes
        # from everything else on a small machine (which no queue can give back). Without the
        # per-tenant queue the small upload waited behind the big one's batches: 3.4-3.9 s
        # against 0.31 s idle, far past this bound.
        assert sorted(busy)[1] <= 2 * idle + 0.5, (idle, busy)
        final, _ = wait_for_job(stack["base"], big, job_id, timeout_s=900)
        assert final["state"] == SEARCHABLE and int(final["result"]["chunk_count"]) >= BIG_CHUNKS
