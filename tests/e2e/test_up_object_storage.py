"""The whole stack (`knowledge up`, through Envoy) with content-index's blobs on the S3 test server
(moto's, standing in for MinIO or S3): an upload lands in the bucket and nowhere on disk, is
searchable, and once its document is deleted, garbage collection removes its object."""

import hashlib
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.support.object_store import CREDENTIALS, S3Server
from tests.support.stack import running_stack

pytestmark = pytest.mark.e2e

BIN = Path(sys.executable).parent
SEARCHABLE = "DOCUMENT_STATE_SEARCHABLE"
TEXT = b"# Backups\n\nBackups of the lantern archive run nightly and are kept for thirty days.\n"


@pytest.fixture(scope="module")
def s3():
    server = S3Server()
    yield server
    server.close()


def knowledge(env: dict, *args: str) -> str:
    return subprocess.run([str(BIN / "knowledge"), *args], env=env, capture_output=True, text=True, check=True).stdout


def wait(predicate, what: str, timeout_s: float = 180):
    deadline = time.monotonic() + timeout_s
    while not (value := predicate()):
        assert time.monotonic() < deadline, what
        time.sleep(0.2)
    return value


def test_upload_search_delete_and_gc_with_the_blobs_in_a_bucket(s3, tmp_path, monkeypatch):
    bucket = s3.new_bucket()
    for name, value in CREDENTIALS.items():
        monkeypatch.setenv(name, value)  # the stack's children inherit them
    settings = {k.removeprefix("KNOWLEDGE_"): v for k, v in s3.settings(bucket).items() if k.startswith("KNOWLEDGE_")}
    with running_stack(
        tmp_path / "stack", **settings, BLOB_GC_GRACE_S="0", BLOB_GC_MIN_AGE_S="0", GC_EVERY_S="0"
    ) as stack:
        base, env = stack["base"], stack["env"]
        headers = {"Authorization": f"Bearer {knowledge(env, 'dev-token', '--tenant', 'acme').strip()}"}
        corpus = httpx.post(f"{base}/corpora", json={"name": "ops"}, headers=headers).json()["corpus_id"]
        reply = httpx.post(
            f"{base}/upload", params={"corpus_id": corpus, "filename": "backups.md"}, content=TEXT, headers=headers
        )
        assert reply.status_code == 200, reply.text
        job_id = reply.json()["job_id"]

        def searchable():
            job = httpx.get(f"{base}/ingest/{job_id}", headers=headers).json()
            assert job["state"] != "DOCUMENT_STATE_FAILED", job
            return job if job["state"] == SEARCHABLE else None

        document_id = wait(searchable, "the upload never became searchable")["result"]["document_id"]
        digest = hashlib.sha256(TEXT).hexdigest()
        key = f"blobs/{digest[:2]}/{digest}.md"
        assert s3.keys(bucket) == [key] and s3.read(bucket, key) == TEXT
        on_disk = [p for p in (stack["data_dir"] / "blobs").rglob("*") if p.is_file()]
        assert on_disk == [], "the blob went to the filesystem"

        found = httpx.post(
            f"{base}/search", json={"query": "how long are backups kept", "corpus_id": corpus}, headers=headers
        )
        assert found.status_code == 200, found.text
        assert any(r["document_id"] == document_id for r in found.json()["results"])

        assert httpx.delete(f"{base}/documents/{document_id}", headers=headers).status_code == 200
        address = f"127.0.0.1:{env['KNOWLEDGE_CONTENT_INDEX_PORT']}"

        def collected():
            knowledge(env, "gc", "--apply", "--address", address)  # again until the removal job released it
            return key not in s3.keys(bucket)

        wait(collected, "garbage collection never removed the deleted document's object", 120)
        assert s3.keys(bucket) == [] and s3.incomplete_uploads(bucket) == []
