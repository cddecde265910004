"""Signed webhooks through the real stack (`knowledge up`, Envoy's REST, the ingest process and
its deliverer) to a real receiver on 127.0.0.1 under KNOWLEDGE_WEBHOOK_ALLOW_HOSTS that verifies
every request with the standardwebhooks library: registered over REST (the secret answered once,
a private target refused), managed with the CLI, and ingest SIGKILLed in the middle of delivering
loses nothing: every event arrives after it is back, in the order of GET /events."""

from __future__ import annotations

import asyncio
import json
import signal
import time

import httpx
import psutil
import pytest
from knowledge_runtime.devkeys import mint_dev_token

from tests.support.gateway_api import knowledge
from tests.support.stack import running_stack, wait_for_job
from tests.support.webhooks import Receiver

pytestmark = pytest.mark.e2e

CAPABILITIES = ["corpus.create", "corpus.read", "document.upload", "webhooks.admin"]
TEXTS = 30


@pytest.fixture(scope="module")
def receiver():
    made = Receiver(delay=0.15)  # slow enough that ingest is killed with deliveries still to make
    yield made
    made.stop()


@pytest.fixture(scope="module")
def stack(tmp_path_factory, receiver):
    settings = {
        "WEBHOOK_ALLOW_HOSTS": receiver.allow,
        "WEBHOOK_TIMEOUT_S": "2",  # a killed holder's lease runs out in 14 s
        "WEBHOOK_RETRY_SCHEDULE_S": "0.5",
        "SUPERVISOR_BACKOFF_S": "0.5",
    }
    with running_stack(tmp_path_factory.mktemp("webhooks-stack"), **settings) as running:
        yield running


def headers_of(stack, tenant: str) -> dict[str, str]:
    token = mint_dev_token(stack["data_dir"] / "keys", tenant=tenant, capabilities=CAPABILITIES)
    return {"Authorization": f"Bearer {token}"}


def events_after(base: str, headers: dict, after: str, count: int) -> list[dict]:
    """``count`` events of GET /events after ``after`` (heartbeats left out)."""
    found: list[dict] = []
    with httpx.stream("GET", f"{base}/events", params={"after": after}, headers=headers, timeout=60) as reply:
        assert reply.status_code == 200, reply.read()
        for raw in reply.iter_lines():
            if raw.strip() and (event := json.loads(raw))["type"] != "stream.heartbeat":
                found.append(event)
                if len(found) == count:
                    return found
    raise AssertionError(f"the stream ended after {len(found)} events")


def ingest_pid(stack) -> int:
    return json.loads((stack["data_dir"] / "run" / "status.json").read_text())["children"]["ingest"]["pid"]


def test_a_webhook_registered_over_rest_receives_signed_events_and_survives_ingest_killed(stack, receiver):
    base, headers = stack["base"], headers_of(stack, "hooked")
    refused = httpx.post(f"{base}/webhooks", json={"url": "https://10.1.2.3/hook"}, headers=headers)
    assert refused.status_code == 400 and refused.json()["details"][0]["reason"] == "URL_REFUSED"
    plain = httpx.post(f"{base}/webhooks", json={"url": "http://hooks.example.com/in"}, headers=headers)
    assert plain.status_code == 400 and "https" in plain.json()["message"]

    created = httpx.post(f"{base}/webhooks", json={"url": receiver.url, "description": "e2e"}, headers=headers)
    assert created.status_code == 200, created.text
    secret, webhook = created.json()["secret"], created.json()["webhook"]
    receiver.secrets.append(secret)
    shown = httpx.get(f"{base}/webhooks/{webhook['webhook_id']}", headers=headers)
    assert shown.status_code == 200 and secret not in shown.text and shown.json()["url"] == receiver.url
    assert secret not in httpx.get(f"{base}/webhooks", headers=headers).text

    corpus_id = httpx.post(f"{base}/corpora", json={"name": "Hooked"}, headers=headers).json()["corpus_id"]
    items = [
        {"corpus_id": corpus_id, "text": f"# Note {i}\n\nThe kettle number {i}.", "title": f"n{i}"}
        for i in range(TEXTS)
    ]
    accepted = httpx.post(f"{base}/texts:batch", json={"items": items}, headers=headers)
    assert accepted.status_code == 200, accepted.text
    for item in accepted.json()["items"]:
        assert wait_for_job(base, headers, item["job"]["job_id"])[0]["state"] == "DOCUMENT_STATE_SEARCHABLE"

    # Killed while delivering: some events arrived, the rest are still to be sent.
    asyncio.run(receiver.wait_for(3, timeout=60))
    killed = ingest_pid(stack)
    psutil.Process(killed).send_signal(signal.SIGKILL)
    assert len(receiver.first_arrivals()) < TEXTS + 1
    asyncio.run(receiver.wait_for(TEXTS + 1, timeout=120, acknowledged=True))
    assert ingest_pid(stack) != killed

    events = events_after(base, headers, webhook["cursor"], TEXTS + 1)
    assert receiver.unverified == [] and all(r.verified_by == [0] for r in receiver.received)
    assert receiver.first_arrivals(acknowledged=True) == [e["event_id"] for e in events]  # nothing lost, in order
    bodies = {r.webhook_id: r.event for r in receiver.received}
    assert all(bodies[e["event_id"]] == e for e in events)  # the body is the event as GET /events gives it

    deliveries = httpx.get(f"{base}/webhooks/{webhook['webhook_id']}/deliveries", headers=headers).json()
    assert deliveries["deliveries"][0]["delivered"] and deliveries["deliveries"][0]["status_code"] == 200


def test_the_cli_manages_a_webhook_and_rotation_signs_with_both_secrets(stack, receiver):
    def cli(*args: str):
        done = knowledge(stack, "webhooks", *args, "--tenant", "cli-hooks")
        assert done.returncode == 0, done.stderr
        return done.stdout

    created = cli("create", receiver.url, "--types", "corpus.created").splitlines()
    webhook_id = created[0].split("\t")[0]
    receiver.secrets[:] = [created[1].split("\t")[1]]
    assert cli("list").splitlines()[1].startswith(f"{webhook_id}\tactive\t")
    rotated = cli("rotate", webhook_id, "--grace-seconds", "600").splitlines()
    receiver.secrets.append(rotated[1].split("\t")[1])
    before = len(receiver.received)
    token = mint_dev_token(stack["data_dir"] / "keys", tenant="cli-hooks", capabilities=CAPABILITIES)
    httpx.post(f"{stack['base']}/corpora", json={"name": "Rotated"}, headers={"Authorization": f"Bearer {token}"})
    deadline = time.monotonic() + 60
    while len(receiver.received) == before and time.monotonic() < deadline:
        time.sleep(0.1)
    assert receiver.received[before].verified_by == [0, 1]  # the old and the new secret both verify
    assert cli("pause", webhook_id).startswith(f"{webhook_id}\tpaused\t")
    assert "corpus.created" in cli("deliveries", webhook_id)
    assert cli("delete", webhook_id) == f"deleted webhook {webhook_id}\n"
