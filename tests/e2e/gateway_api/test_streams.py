"""Server streams through the gateway as newline-delimited JSON: a corpus's live document list
(and `knowledge documents --watch`), and the events outbox resumed from a cursor."""

from __future__ import annotations

import json
import subprocess
import threading
import time

import httpx
import pytest

from tests.support.gateway_api import HANDBOOK, SEARCHABLE, auth
from tests.support.stack import BIN, wait_for_job

pytestmark = pytest.mark.e2e


class StreamedLines:
    """A streamed REST answer read line by line in a thread (newline-delimited JSON)."""

    def __init__(self, url: str, headers: dict) -> None:
        self.lines: list[dict] = []
        self.status: int | None = None
        self.content_type = ""
        self._client = httpx.Client(timeout=httpx.Timeout(10.0, read=None))
        self._thread = threading.Thread(target=self._read, args=(url, headers), daemon=True)
        self._thread.start()

    def _read(self, url: str, headers: dict) -> None:
        try:
            with self._client.stream("GET", url, headers=headers) as response:
                self.status, self.content_type = response.status_code, response.headers.get("content-type", "")
                for line in response.iter_lines():
                    if line.strip():
                        self.lines.append(json.loads(line))
        except httpx.HTTPError:
            pass  # closed by the test

    def until(self, predicate, timeout_s: float = 120) -> dict:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            for line in list(self.lines):
                if predicate(line):
                    return line
            time.sleep(0.05)
        raise AssertionError(f"no such line within {timeout_s} s: {self.lines}")

    def close(self) -> None:
        self._client.close()
        self._thread.join(10)


def cli_lines(process: subprocess.Popen, lines: list[str]) -> threading.Thread:
    def read() -> None:
        lines.extend(process.stdout)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    return reader


def test_a_watcher_through_the_gateway_and_the_cli_sees_an_upload_become_searchable(stack, token):
    """One client watches (GET .../documents:watch through Envoy, and `knowledge documents --watch`),
    another uploads: both see the document move through its stages to searchable, as it happens."""
    headers = auth(token("watcher"))
    corpus = httpx.post(f"{stack['base']}/corpora", json={"name": "Live"}, headers=headers).json()
    corpus_id = corpus["corpus_id"]
    earlier = httpx.post(
        f"{stack['base']}/upload",
        params={"corpus_id": corpus_id, "filename": "earlier.md"},
        content=b"# Early\n\nA note.\n",
        headers=headers,
    ).json()
    earlier_job, _ = wait_for_job(stack["base"], headers, earlier["job_id"])
    watch = StreamedLines(f"{stack['base']}/corpora/{corpus_id}/documents:watch", headers)
    env = {**stack["env"], "KNOWLEDGE_URL": stack["base"]}
    cli = subprocess.Popen(
        [str(BIN / "knowledge"), "documents", "--corpus", corpus_id, "--watch", "--tenant", "watcher"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    printed: list[str] = []
    reader = cli_lines(cli, printed)
    try:
        watch.until(lambda line: line["kind"] == "DOCUMENT_CHANGE_KIND_SYNCED")
        assert watch.status == 200 and "json" in watch.content_type
        assert [line["document_id"] for line in watch.lines if line["kind"] == "DOCUMENT_CHANGE_KIND_SNAPSHOT"] == [
            earlier_job["result"]["document_id"]
        ]
        deadline = time.monotonic() + 60
        while not any(line.startswith(earlier_job["result"]["document_id"] + "\t") for line in printed):
            assert time.monotonic() < deadline and cli.poll() is None, printed
            time.sleep(0.05)
        assert printed[0] == "document_id\tstate\tstage\tchunks\tfilename\n"
        text = "\n\n".join(
            f"## Part {n}\n\n" + f"Paragraph {n} about the live list and its stages. " * 12 for n in range(30)
        )
        uploaded = httpx.post(
            f"{stack['base']}/upload",
            params={"corpus_id": corpus_id, "filename": "live.md"},
            content=("# Live\n\n" + text).encode(),
            headers=auth(token("watcher")),  # another client
        ).json()
        done = watch.until(
            lambda line: line["kind"] == "DOCUMENT_CHANGE_KIND_CHANGED" and line["document"]["state"] == SEARCHABLE
        )
        assert done["document"]["job_id"] == uploaded["job_id"] and done["document"]["stage"] == "searchable"
        seen = [
            line["document"] for line in watch.lines if line.get("document", {}).get("job_id") == uploaded["job_id"]
        ]
        states = list(dict.fromkeys(d["state"] for d in seen))
        assert len(states) >= 3 and states[-1] == SEARCHABLE and "DOCUMENT_STATE_EMBEDDING" in states, states
        document_id = done["document_id"]
        deadline = time.monotonic() + 60
        while not any(line.startswith(f"{document_id}\tsearchable\t") for line in printed):
            assert time.monotonic() < deadline and cli.poll() is None, printed
            time.sleep(0.05)
        cli_stages = [line.split("\t")[2] for line in printed if line.startswith(f"{document_id}\t")]
        assert cli_stages[-1] == "searchable" and len(cli_stages) >= 2, cli_stages

        deleted = httpx.delete(f"{stack['base']}/documents/{document_id}", headers=headers)
        assert deleted.status_code == 200
        removed = watch.until(lambda line: line["kind"] == "DOCUMENT_CHANGE_KIND_REMOVED")
        assert removed["document_id"] == document_id

        batch = httpx.get(
            f"{stack['base']}/documents:batchGet",
            params=[("document_ids", earlier_job["result"]["document_id"]), ("document_ids", document_id)],
            headers=headers,
        )
        assert batch.status_code == 200, batch.text
        assert [d["document_id"] for d in batch.json()["documents"]] == [earlier_job["result"]["document_id"]]
        assert batch.json()["not_found_ids"] == [document_id]
        other = httpx.get(
            f"{stack['base']}/documents:batchGet",
            params={"document_ids": earlier_job["result"]["document_id"]},
            headers=auth(token("someone-else")),
        )
        assert other.status_code == 200 and other.json()["documents"] == []
        assert (
            httpx.get(
                f"{stack['base']}/corpora/{corpus_id}/documents:watch", headers=auth(token("someone-else"))
            ).status_code
            == 404
        )
    finally:
        watch.close()
        cli.terminate()
        cli.wait(30)
        reader.join(10)


def read_events(base: str, headers: dict, after: str, until) -> list[dict]:
    """Lines of GET /events?after= (heartbeats left out) until ``until(events)`` holds."""
    events: list[dict] = []
    with httpx.stream("GET", f"{base}/events", params={"after": after}, headers=headers, timeout=60) as reply:
        assert reply.status_code == 200, reply.read()
        for line in reply.iter_lines():
            if not line.strip():
                continue
            event = json.loads(line)  # one whole event per line
            if event["type"] != "stream.heartbeat":
                events.append(event)
                if until(events):
                    return events
    raise AssertionError(f"the stream ended after {events}")


def test_events_stream_through_the_gateway_as_ndjson_and_resume_from_a_cursor(stack, token):
    base, headers = stack["base"], auth(token("events-e2e"))
    corpus = httpx.post(f"{base}/corpora", json={"name": "Events"}, headers=headers).json()
    created = read_events(base, headers, "", lambda got: got[-1]["type"] == "corpus.created")
    assert created[-1]["corpus_id"] == corpus["corpus_id"] and created[-1]["event_id"]
    cursor = created[-1]["cursor"]
    # A watcher connected before the ingest hears it become searchable as it commits.
    with httpx.stream("GET", f"{base}/events", params={"after": cursor}, headers=headers, timeout=120) as live:
        assert live.status_code == 200
        job = httpx.post(
            f"{base}/texts", json={"corpus_id": corpus["corpus_id"], "text": HANDBOOK, "title": "ev"}, headers=headers
        ).json()
        lines = live.iter_lines()
        event = json.loads(next(line for line in lines if line.strip() and "stream.heartbeat" not in line))
    done, _ = wait_for_job(base, headers, job["job_id"])
    assert event["type"] == "document.searchable" and event["cursor"] == str(int(cursor) + 1)
    assert event["document_id"] == done["result"]["document_id"] and event["chunk_count"] > 0
    assert set(event) >= {"event_id", "cursor", "type", "document_id", "corpus_id", "time"}
    # Reconnected with its cursor: the same event again, nothing before it.
    again = read_events(base, headers, cursor, lambda got: True)
    assert again[0]["event_id"] == event["event_id"]
    refused = httpx.get(f"{base}/events", params={"after": "not-a-cursor"}, headers=headers)
    assert refused.status_code == 400 and refused.json()["details"][0]["reason"] == "INVALID_REQUEST"
    assert httpx.get(f"{base}/events", headers=auth(token("events-e2e", ["search"]))).status_code == 403
